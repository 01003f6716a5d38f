//! P12's fleet at scale, simulated: [`NODES`] nodes, each the library's
//! `Registry` with the same `[fleet]` and [`CONNECTIONS`] connections, in
//! this one process (one actix system) over one real `redis-server`, and
//! P12's storm: the upstream of [`STORMED`] connections fails, each of them
//! is called once on one node (spread over the nodes), and it recovers
//! [`STORM_FOR`] later. Measured: Redis's commands and publishes (`INFO
//! commandstats`) idle and through the storm, how soon every node has every
//! park and every revival, and the probes the fleet made.
//!
//! [`run`] measures; `Bench::p12_fleet` (at the end) judges and reports.

use std::{
    fmt::Write as _,
    path::Path,
    time::{Duration, Instant},
};

use actix::{Actor, Addr};
use anyhow::{Context, bail};
use mcp_supervisor::{
    config::Config,
    registry::{CallTool, FleetOverview, Registry, Status},
};
use mcp_test_support::RedisServer;
use serde_json::json;

use crate::{
    dashboard::{CONNECTIONS, connection},
    procs::{self, Binaries},
    scale::{STORM_FOR, STORMED, opens, probe_histogram, set_faults},
};

/// Nodes of the simulated fleet.
pub(crate) const NODES: usize = 20;
/// The idle window: the fleet's steady cost (heartbeats).
const IDLE: Duration = Duration::from_secs(5);
/// How long every node may take to join, and to converge after a change.
const PATIENCE: Duration = Duration::from_secs(60);
/// How often every node's status is read.
const POLL: Duration = Duration::from_millis(250);
/// Redis commands counted (`INFO commandstats`), and the ones named apart.
const NAMED: [&str; 4] = ["publish", "set", "get", "del"];

/// What the simulation measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Measured {
    /// Redis commands a second, idle (every node joined, nothing failing).
    pub(crate) idle_commands_per_s: f64,
    pub(crate) idle_publishes_per_s: f64,
    /// From the storm's start to every node showing every stormed
    /// connection parked.
    pub(crate) parked_everywhere: Option<Duration>,
    /// From the recovery to every node showing every stormed connection
    /// ready.
    pub(crate) revived_everywhere: Option<Duration>,
    /// Through the storm (its start to every node revived): the wall time,
    /// Redis commands (by name, and in all), publishes.
    pub(crate) storm_wall: Duration,
    pub(crate) storm_commands: u64,
    pub(crate) storm_named: Vec<(&'static str, u64)>,
    pub(crate) storm_publishes: u64,
    /// Probes of each stormed connection, every node's together.
    pub(crate) probes: Vec<u64>,
    /// Sessions the storm's upstream was asked to open while it failed
    /// (the calls' own attempts and every probe).
    pub(crate) opens_failing: u64,
}

/// Starts Redis, two upstreams and the nodes, and runs the storm.
pub(crate) fn run(bins: &Binaries, scratch: &Path) -> anyhow::Result<Measured> {
    let redis = RedisServer::start().context("starting redis-server")?;
    let upstream = |name: &str| {
        procs::start_upstream_with(bins, &[], &scratch.join(format!("fleet-sim-{name}.log")))
    };
    let (storm, calm) = (upstream("storm")?, upstream("calm")?);
    let key = scratch.join("fleet-sim.key");
    std::fs::write(&key, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n")?;
    let mut configs = Vec::new();
    for node in 0..NODES {
        let mut text = format!(
            "[fleet]\nredis = \"{}\"\nkey_file = \"{}\"\nnode = \"sim-{node:02}\"\n",
            redis.url(),
            key.display()
        );
        for n in 0..CONNECTIONS {
            let url = if n < STORMED { &storm.url } else { &calm.url };
            let _ = write!(
                text,
                "\n[connections.{}]\ntransport = \"http\"\nurl = \"{url}\"\n",
                connection(n)
            );
        }
        let origin = scratch.join(format!("sim-{node:02}.toml"));
        configs.push(
            Config::from_toml_str(&text, &origin, &|name| std::env::var(name).ok())
                .context("the simulated node's config")?,
        );
    }
    let control = storm
        .url
        .strip_suffix("/mcp")
        .unwrap_or(&storm.url)
        .to_owned();
    actix_rt::System::new().block_on(simulate(configs, &redis, &control))
}

/// Redis's command counts now: every command's, and each of [`NAMED`].
fn counts(redis: &RedisServer) -> anyhow::Result<(u64, Vec<(&'static str, u64)>)> {
    let info = redis.query(&["INFO", "commandstats"])?;
    let text = info.text().context("INFO answered no text")?;
    let mut total = 0;
    let mut named = Vec::new();
    for line in text.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|line| line.split_once(":calls="))
        else {
            continue;
        };
        let calls: u64 = rest
            .split(',')
            .next()
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0);
        // The harness's own INFO is not the fleet's.
        if name != "info" {
            total += calls;
        }
        if let Some(known) = NAMED.iter().find(|known| **known == name) {
            named.push((*known, calls));
        }
    }
    Ok((total, named))
}

async fn simulate(
    configs: Vec<Config>,
    redis: &RedisServer,
    control: &str,
) -> anyhow::Result<Measured> {
    let http = reqwest::Client::new();
    let nodes: Vec<Addr<Registry>> = configs
        .into_iter()
        .map(|config| Registry::new(config).start())
        .collect();
    let joined = Instant::now();
    loop {
        let mut everyone = true;
        for node in &nodes {
            let seen = node
                .send(FleetOverview)
                .await?
                .map_or(0, |view| view.nodes.len());
            everyone &= seen >= NODES - 1;
        }
        if everyone {
            break;
        }
        if joined.elapsed() > PATIENCE {
            bail!("the {NODES} nodes did not all see each other within {PATIENCE:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("  fleet: {NODES} nodes joined in {:.1?}", joined.elapsed());
    let mut measured = Measured::default();

    let (commands, named) = counts(redis)?;
    let publishes = |named: &[(&str, u64)]| {
        named
            .iter()
            .find(|(name, _)| *name == "publish")
            .map_or(0, |(_, calls)| *calls)
    };
    tokio::time::sleep(IDLE).await;
    let (after, after_named) = counts(redis)?;
    measured.idle_commands_per_s = (after - commands) as f64 / IDLE.as_secs_f64();
    measured.idle_publishes_per_s =
        (publishes(&after_named) - publishes(&named)) as f64 / IDLE.as_secs_f64();
    let probes_before = probes(&nodes).await?;
    let opens_before = opens(&http, control).await?;

    let (commands, named) = counts(redis)?;
    let failed_at = Instant::now();
    set_faults(
        &http,
        control,
        json!([{ "when": "any", "fault": { "kind": "status", "status": 503 } }]),
    )
    .await?;
    for n in 0..STORMED {
        let node = nodes[n % NODES].clone();
        actix_rt::spawn(async move {
            let _ = node
                .send(CallTool {
                    connection: connection(n),
                    tool: "lookup".into(),
                    arguments: json!({ "key": "storm" }).as_object().cloned(),
                    timeout: None,
                    trace: mcp_supervisor::telemetry::TraceParent::current(),
                })
                .await;
        });
    }
    while failed_at.elapsed() < STORM_FOR {
        if measured.parked_everywhere.is_none() && every(&nodes, "parked").await? {
            measured.parked_everywhere = Some(failed_at.elapsed());
        }
        tokio::time::sleep(POLL).await;
    }
    set_faults(&http, control, json!([])).await?;
    let recovered_at = Instant::now();
    measured.opens_failing = opens(&http, control).await? - opens_before;
    eprintln!(
        "  fleet: recovered; every node had every park after {:.1?}",
        measured.parked_everywhere
    );
    while recovered_at.elapsed() < PATIENCE {
        if every(&nodes, "ready").await? {
            measured.revived_everywhere = Some(recovered_at.elapsed());
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    measured.storm_wall = failed_at.elapsed();
    let (after, after_named) = counts(redis)?;
    measured.storm_commands = after - commands;
    measured.storm_publishes = publishes(&after_named) - publishes(&named);
    measured.storm_named = after_named
        .iter()
        .map(|(name, calls)| {
            let before = named
                .iter()
                .find(|(known, _)| known == name)
                .map_or(0, |(_, calls)| *calls);
            (*name, calls - before)
        })
        .collect();
    let probes_after = probes(&nodes).await?;
    measured.probes = probes_after
        .iter()
        .zip(probes_before)
        .map(|(after, before)| after - before)
        .collect();
    eprintln!(
        "  fleet: every node had every revival after {:.1?}; {} Redis commands, {} publishes",
        measured.revived_everywhere, measured.storm_commands, measured.storm_publishes
    );
    for node in nodes {
        let _ = node.send(mcp_supervisor::registry::Shutdown).await;
    }
    Ok(measured)
}

/// Whether every node shows every stormed connection in `state`.
async fn every(nodes: &[Addr<Registry>], state: &str) -> anyhow::Result<bool> {
    for node in nodes {
        let statuses = node.send(Status).await?;
        let stormed = statuses
            .iter()
            .filter(|status| status.name.as_str() < connection(STORMED).as_str());
        if !stormed
            .into_iter()
            .all(|status| status.state.as_str() == state)
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Probes of each stormed connection, every node's together.
async fn probes(nodes: &[Addr<Registry>]) -> anyhow::Result<Vec<u64>> {
    let mut total = vec![0; STORMED];
    for node in nodes {
        for status in node.send(Status).await? {
            if let Some(n) = status
                .name
                .strip_prefix('c')
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n < STORMED)
            {
                total[n] += status.probes;
            }
        }
    }
    Ok(total)
}

/// Revived everywhere within this of the recovery (issue #50: 5 s in one
/// process; a fleet adds a message's trip).
const REVIVE_TARGET: Duration = Duration::from_secs(5);

impl crate::scenarios::Bench<'_> {
    /// P12's fleet: [`NODES`] nodes × [`CONNECTIONS`] connections over one
    /// Redis, and the storm.
    pub(crate) fn p12_fleet(&mut self) -> anyhow::Result<()> {
        eprintln!(
            "P12: the fleet at scale, {NODES} nodes × {CONNECTIONS} connections over one redis-server"
        );
        let m = run(self.bins, &self.settings.scratch)?;
        let secs = |d: Option<Duration>| {
            d.map_or("never".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()))
        };
        let rows = &mut self.report.rows;
        rows.push(crate::report::Row::info(
            "P12",
            &format!("fleet, {NODES} nodes idle: Redis commands a second (heartbeats)"),
            format!("{:.0}/s", m.idle_commands_per_s),
            format!("{:.0} publishes/s", m.idle_publishes_per_s),
            "—".into(),
        ));
        rows.push(crate::report::Row::info(
            "P12",
            &format!(
                "fleet storm: every node has every one of the {STORMED} parks, after the failure"
            ),
            secs(m.parked_everywhere),
            format!("{STORMED} calls, one per connection, spread over the nodes"),
            "—".into(),
        ));
        let most = m.probes.iter().copied().max().unwrap_or(0);
        let per_interval_ok = most <= 3;
        rows.push(crate::report::Row {
            id: "P12".into(),
            scenario: format!("fleet storm: every node has every revival, after the recovery ({NODES} × {STORMED} connections ready)"),
            ours: secs(m.revived_everywhere),
            baseline: format!("probes per upstream, the fleet's together: at most {most}"),
            ratio: "—".into(),
            target: "≤ 5 s; ≤ 3 probes".into(),
            met: Some(m.revived_everywhere.is_some_and(|d| d <= REVIVE_TARGET) && per_interval_ok),
        });
        let wall = m.storm_wall.as_secs_f64().max(1e-9);
        rows.push(crate::report::Row::info(
            "P12",
            "fleet storm: Redis commands a second through it (failure to every node revived)",
            format!("{:.0}/s", m.storm_commands as f64 / wall),
            format!(
                "{} publishes ({:.0}/s), each delivered to all {NODES} nodes",
                m.storm_publishes,
                m.storm_publishes as f64 / wall
            ),
            "—".into(),
        ));
        self.report.notes.push((
            "P12".into(),
            vec![format!(
                "Fleet: {NODES} nodes, each the library's `Registry` with the same `[fleet]` and {CONNECTIONS} \
                 connections (c0000–c0499 to the storm's upstream, the rest to a calm one), in one process over \
                 one `redis-server`. The storm: its upstream answers 503, each stormed connection gets one \
                 `lookup` call on node n mod {NODES}, it recovers {} s later. Through it ({:.1} s): {} Redis \
                 commands ({:?}), {} publishes. The storm's upstream was asked to open {} sessions while it \
                 failed (each call's attempts and every probe of every node). Probes per upstream, the \
                 fleet's together: {:?} connections made 0, 1, 2, 3, more.",
                STORM_FOR.as_secs(),
                wall,
                m.storm_commands,
                m.storm_named,
                m.storm_publishes,
                m.opens_failing,
                probe_histogram(&m.probes),
            )],
        ));
        Ok(())
    }
}
