//! P12, supervision at scale (docs/BENCHMARKS.md, "Targets"): one gateway
//! with [`CONNECTIONS`] HTTP connections of [`TOOLS_PER_CONNECTION`] tools,
//! spread over three upstream processes so that parts of them can be made
//! to fail or change on their own:
//!
//! - `storm`: `c0000` … `c0499`, the half that fails at once and recovers;
//! - `calm`: `c0500` … `c0998`, the healthy neighbours;
//! - `changing`: `c0999` alone, whose tool list changes.
//!
//! In turn it measures: the start (spawn → every catalog in `/status`, and
//! the gateway's RSS then); `tools/list` over 20,000 tools, page by page;
//! one upstream's `list_changed` (the gateway's CPU for it and what each
//! connected client was told); the storm; and 10,000 idle sessions held.
//!
//! [`run`] measures; `Bench::p12` (at the end) judges and reports.

use std::{
    fmt::Write as _,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use futures::StreamExt as _;
use rmcp::{
    RoleClient,
    model::PaginatedRequestParams,
    service::{NotificationContext, Peer},
};
use serde_json::{Value, json};

use crate::{
    dashboard::{CONNECTIONS, TOOLS_PER_CONNECTION, connection, open_fds, raise_fd_limit},
    measure,
    procs::{self, Binaries, Guarded},
    worker::{Client, raw_session, raw_session_as},
};

/// Connections `c0000` … `c0499`: the half the storm fails.
pub(crate) const STORMED: usize = 500;
/// The connection whose tool list changes, alone on its upstream.
const CHANGING: usize = CONNECTIONS - 1;
/// Clients connected (each with its `GET` stream) when a list changes.
pub(crate) const CLIENTS: usize = 10;
/// Idle 2025 sessions held at once.
pub(crate) const IDLE_SESSIONS: usize = 10_000;
/// Sessions opened at a time.
const OPENING: usize = 16;
/// How long the storm's upstream fails before it recovers.
pub(crate) const STORM_FOR: Duration = Duration::from_secs(10);
/// How long after the recovery the storm's connections are watched.
const REVIVE_PATIENCE: Duration = Duration::from_secs(30);
/// Calls a second through the gateway, before and during the storm, spread
/// over every connection in turn.
pub(crate) const CALL_RATE: u64 = 200;
/// How often `/status` is read while the storm is watched (and before).
const POLL: Duration = Duration::from_millis(250);
/// A call with no answer within this long is not a value.
const CALL_PATIENCE: Duration = Duration::from_secs(30);
/// How long every catalog may take to load.
const LOAD_WITHIN: Duration = Duration::from_secs(120);
/// The window after a change: the upstream's notification, the
/// connection's listing, the gateway's batch (100 ms) and its notices.
const CHANGE_WINDOW: Duration = Duration::from_millis(1_000);
/// What the upstream's tools are given (`--extra-tools 13`: 7 + 13).
const EXTRA_TOOLS: &str = "13";

/// How much of each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Whole paginated listings timed.
    pub(crate) listings: usize,
    /// Changes of one upstream's list, each against an idle window.
    pub(crate) changes: usize,
    /// The calm window before the storm (and the storm's calls as long).
    pub(crate) calm: Duration,
}

impl Plan {
    pub(crate) fn new(quick: bool) -> Self {
        Plan {
            listings: if quick { 30 } else { 100 },
            changes: if quick { 5 } else { 9 },
            calm: Duration::from_secs(if quick { 10 } else { 20 }),
        }
    }
}

/// The listings timed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listings {
    /// Each whole listing, first page to last.
    pub(crate) whole: Vec<u64>,
    /// Each page (ns).
    pub(crate) pages: Vec<u64>,
    /// Pages and tools in one listing.
    pub(crate) pages_each: usize,
    pub(crate) tools: usize,
}

/// One change of the changing upstream's list.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    /// The gateway's CPU in the window after the change, and in an idle
    /// window as long just before it.
    pub(crate) cpu: Duration,
    pub(crate) idle_cpu: Duration,
    /// `tools/list_changed` each client got in the window.
    pub(crate) told: Vec<u64>,
}

impl Change {
    pub(crate) fn cost(&self) -> Duration {
        self.cpu.saturating_sub(self.idle_cpu)
    }
}

/// Calls made in one stretch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Calls {
    /// Latencies (ns) of the answered calls to healthy neighbours.
    pub(crate) healthy: Vec<u64>,
    /// Calls answered with a result, and with the supervisor's (or the
    /// upstream's) error as a value.
    pub(crate) results: u64,
    pub(crate) errors: u64,
    /// Calls with no answer: a transport error, or none within
    /// [`CALL_PATIENCE`].
    pub(crate) lost: u64,
    /// Calls to healthy neighbours answered with an error (none expected).
    pub(crate) healthy_errors: u64,
    pub(crate) wall: Duration,
    /// The gateway's CPU in the stretch, and the share of the machine's
    /// CPU time that was busy (every process, both cores).
    pub(crate) gateway_cpu: Duration,
    pub(crate) machine_busy: f64,
}

impl Calls {
    /// This stretch and `next` as one.
    fn joined(&self, next: &Calls) -> Calls {
        let wall = self.wall + next.wall;
        let share = |calls: &Calls| calls.wall.as_secs_f64() / wall.as_secs_f64().max(1e-9);
        Calls {
            healthy: [self.healthy.as_slice(), &next.healthy].concat(),
            results: self.results + next.results,
            errors: self.errors + next.errors,
            lost: self.lost + next.lost,
            healthy_errors: self.healthy_errors + next.healthy_errors,
            wall,
            gateway_cpu: self.gateway_cpu + next.gateway_cpu,
            machine_busy: self.machine_busy * share(self) + next.machine_busy * share(next),
        }
    }
}

/// The storm, watched.
#[derive(Debug, Clone)]
pub(crate) struct Storm {
    pub(crate) calm: Calls,
    /// From the failure to every stormed connection revived (or given up):
    /// `failing` until the upstream recovered, `reviving` after.
    pub(crate) stormy: Calls,
    pub(crate) failing: Calls,
    pub(crate) reviving: Calls,
    /// Stormed connections parked during the storm.
    pub(crate) parked: usize,
    /// For each stormed connection that was parked: from the recovery to
    /// `/status` showing it ready (`None`: not within [`REVIVE_PATIENCE`]).
    pub(crate) revived: Vec<Option<Duration>>,
    /// Probes each stormed connection made (from `/status`).
    pub(crate) probes: Vec<u64>,
    /// `initialize` and `server/discover` requests the storm's upstream got
    /// from the failure on.
    pub(crate) upstream_opens: u64,
    /// Parks of healthy connections meanwhile (none expected).
    pub(crate) healthy_parks: u64,
}

/// The idle sessions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sessions {
    pub(crate) opened: usize,
    pub(crate) took: Duration,
    pub(crate) rss_before_kib: u64,
    /// Two seconds after the last was opened: every one awake.
    pub(crate) rss_awake_kib: u64,
    /// Once they rested (`session_rest_after`) and the allocator gave the
    /// memory back.
    pub(crate) rss_after_kib: u64,
    /// Sessions the gateway rested, and from the last opened until then.
    pub(crate) rested: u64,
    pub(crate) rest_took: Duration,
}

/// Everything P12 measured.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    pub(crate) fd_limit: u64,
    /// From spawning the gateway to every catalog in `/status`.
    pub(crate) loaded_in: Duration,
    /// The gateway's RSS then, and its open descriptors.
    pub(crate) loaded_rss_kib: u64,
    pub(crate) loaded_fds: usize,
    pub(crate) listings: Listings,
    pub(crate) changes: Vec<Change>,
    pub(crate) storm: Storm,
    pub(crate) sessions: Sessions,
}

/// Starts the upstreams and the gateway and measures everything.
pub(crate) fn run(bins: &Binaries, scratch: &Path, plan: Plan) -> anyhow::Result<Measured> {
    let fd_limit = raise_fd_limit();
    let upstream = |name: &str| {
        procs::start_upstream_with(
            bins,
            &["--extra-tools", EXTRA_TOOLS],
            &scratch.join(format!("p12-{name}.log")),
        )
    };
    let upstreams = Upstreams {
        storm: upstream("storm")?,
        calm: upstream("calm")?,
        changing: upstream("changing")?,
    };
    let spawned = Instant::now();
    let gateway = procs::start_gateway_config(bins, scratch, "p12-gateway", &config(&upstreams))?;
    let scene = Scene {
        http: reqwest::Client::builder().tcp_nodelay(true).build()?,
        gateway_pid: gateway.pid(),
        gateway_url: gateway.urls[0].clone(),
        admin: gateway.urls[1].clone(),
        storm_control: control(&upstreams.storm),
        changing_control: control(&upstreams.changing),
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(scene.measure(plan, spawned, fd_limit))
}

struct Upstreams {
    storm: Guarded,
    calm: Guarded,
    changing: Guarded,
}

/// An upstream's origin, for its `/_control/…` routes.
fn control(upstream: &Guarded) -> String {
    upstream
        .url
        .strip_suffix("/mcp")
        .unwrap_or(&upstream.url)
        .to_owned()
}

/// The gateway's config: every connection with the supervisor's defaults
/// (probes on), and room for [`IDLE_SESSIONS`] sessions from one address.
fn config(upstreams: &Upstreams) -> String {
    let mut text = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"namespaced\"\n\
         max_sessions = {cap}\nmax_sessions_per_client = {cap}\n\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n",
        cap = IDLE_SESSIONS * 2
    );
    for n in 0..CONNECTIONS {
        let url = if n < STORMED {
            &upstreams.storm.url
        } else if n == CHANGING {
            &upstreams.changing.url
        } else {
            &upstreams.calm.url
        };
        let _ = write!(
            text,
            "\n[connections.{}]\ntransport = \"http\"\nurl = \"{url}\"\n",
            connection(n)
        );
    }
    text
}

/// The processes P12 measures, and how to reach them.
struct Scene {
    http: reqwest::Client,
    gateway_pid: u32,
    gateway_url: String,
    admin: String,
    storm_control: String,
    changing_control: String,
}

/// A client that counts the `tools/list_changed` it is sent.
#[derive(Clone, Default)]
struct Told(Arc<AtomicU64>);

impl rmcp::ClientHandler for Told {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Scene {
    async fn measure(
        &self,
        plan: Plan,
        spawned: Instant,
        fd_limit: u64,
    ) -> anyhow::Result<Measured> {
        let session = raw_session(Client::RawPooled, &self.gateway_url).await?;
        self.load(session.peer(), spawned).await?;
        let loaded_in = spawned.elapsed();
        let loaded_rss_kib = self.rss_kib();
        let loaded_fds = open_fds(self.gateway_pid);
        eprintln!(
            "  {CONNECTIONS} catalogs in /status {loaded_in:.1?} after the spawn, {} MiB",
            loaded_rss_kib / 1024
        );
        let listings = self.time_listings(session.peer(), plan.listings).await?;
        eprintln!(
            "  {} listings of {} tools in {} pages",
            listings.whole.len(),
            listings.tools,
            listings.pages_each
        );
        let changes = self.changes(plan.changes).await?;
        let storm = self.storm(plan.calm).await?;
        let _ = session.cancel().await;
        let sessions = self.idle_sessions().await?;
        Ok(Measured {
            fd_limit,
            loaded_in,
            loaded_rss_kib,
            loaded_fds,
            listings,
            changes,
            storm,
            sessions,
        })
    }

    fn rss_kib(&self) -> u64 {
        measure::status_field(&format!("/proc/{}/status", self.gateway_pid), "VmRSS:").unwrap_or(0)
    }

    fn cpu(&self) -> Duration {
        measure::other_process_cpu(self.gateway_pid).unwrap_or_default()
    }

    fn window(&self) -> Window {
        Window {
            gateway: self.cpu(),
            machine: machine_ticks(),
        }
    }

    /// The calls of the stretch that began at `window`, `wall` ago.
    fn take(&self, book: &Mutex<Calls>, wall: Duration, window: Window) -> Calls {
        let mut calls = std::mem::take(&mut *book.lock().unwrap_or_else(|p| p.into_inner()));
        let (busy, total) = machine_ticks();
        calls.wall = wall;
        calls.gateway_cpu = self.cpu().saturating_sub(window.gateway);
        calls.machine_busy =
            (busy - window.machine.0) as f64 / (total - window.machine.1).max(1) as f64;
        calls
    }

    /// Lists the gateway's tools (which loads every catalog) until
    /// `/status` shows every catalog.
    async fn load(&self, peer: &Peer<RoleClient>, spawned: Instant) -> anyhow::Result<()> {
        peer.list_all_tools()
            .await
            .context("tools/list through the gateway")?;
        loop {
            let loaded = self
                .statuses()
                .await?
                .iter()
                .filter(|status| status["tool_count"].as_u64() == Some(TOOLS_PER_CONNECTION as u64))
                .count();
            if loaded == CONNECTIONS {
                return Ok(());
            }
            if spawned.elapsed() > LOAD_WITHIN {
                bail!("only {loaded} of {CONNECTIONS} catalogs loaded within {LOAD_WITHIN:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Times `times` whole listings, page by page.
    async fn time_listings(
        &self,
        peer: &Peer<RoleClient>,
        times: usize,
    ) -> anyhow::Result<Listings> {
        let mut listings = Listings::default();
        for _ in 0..times {
            let started = Instant::now();
            let (mut cursor, mut pages, mut tools) = (None, 0, 0);
            loop {
                let page_started = Instant::now();
                let page = peer
                    .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                    .await
                    .context("a page of tools/list")?;
                listings
                    .pages
                    .push(page_started.elapsed().as_nanos() as u64);
                pages += 1;
                tools += page.tools.len();
                cursor = page.next_cursor;
                if cursor.is_none() {
                    break;
                }
            }
            listings.whole.push(started.elapsed().as_nanos() as u64);
            listings.pages_each = pages;
            listings.tools = tools;
        }
        Ok(listings)
    }

    /// Changes `c0999`'s list `times` times with [`CLIENTS`] clients
    /// connected, each change after an idle window as long as its own.
    async fn changes(&self, times: usize) -> anyhow::Result<Vec<Change>> {
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            let told = Told::default();
            let client =
                raw_session_as(Client::RawPooled, &self.gateway_url, None, told.clone()).await?;
            clients.push((client, told));
        }
        // Their `GET` streams open after `initialized`.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let read = |clients: &[(_, Told)]| -> Vec<u64> {
            clients
                .iter()
                .map(|(_, told)| told.0.load(Ordering::Relaxed))
                .collect()
        };
        let mut changes = Vec::new();
        for n in 0..times {
            let before = self.cpu();
            tokio::time::sleep(CHANGE_WINDOW).await;
            let (idle_cpu, told_before, before) = (
                self.cpu().saturating_sub(before),
                read(&clients),
                self.cpu(),
            );
            self.http
                .post(format!("{}/_control/redefine", self.changing_control))
                .json(&json!({
                    "tool": "echo",
                    "patch": { "description": format!("Echoes, version {n}") },
                    "announce": true,
                }))
                .send()
                .await?
                .error_for_status()
                .context("changing the upstream's list")?;
            tokio::time::sleep(CHANGE_WINDOW).await;
            let cpu = self.cpu().saturating_sub(before);
            let told = read(&clients)
                .iter()
                .zip(told_before)
                .map(|(after, before)| after - before)
                .collect();
            let change = Change {
                cpu,
                idle_cpu,
                told,
            };
            eprintln!(
                "  change {}: {:.2} ms of gateway CPU beyond idle, told {:?}",
                n + 1,
                change.cost().as_secs_f64() * 1e3,
                change.told
            );
            changes.push(change);
        }
        for (client, _) in clients {
            let _ = client.cancel().await;
        }
        Ok(changes)
    }

    /// Calls at [`CALL_RATE`] for `calm`, then fails the storm's upstream
    /// for [`STORM_FOR`] and watches its connections come back.
    async fn storm(&self, calm: Duration) -> anyhow::Result<Storm> {
        let book = Arc::new(Mutex::new(Calls::default()));
        let caller = Arc::new(Caller {
            http: self.http.clone(),
            url: self.gateway_url.clone(),
            session: self.open_session(IDLE_SESSIONS).await?,
        });
        let driver = tokio::spawn(drive_calls(caller, book.clone()));
        let started = Instant::now();
        let window = self.window();
        while started.elapsed() < calm {
            self.states().await?;
            tokio::time::sleep(POLL).await;
        }
        let calm_calls = self.take(&book, started.elapsed(), window);
        let before = self.statuses().await?;
        let opens_before = self.opens().await?;

        let failed_at = Instant::now();
        let window = self.window();
        self.set_storm_faults(json!([{
            "when": "any",
            "fault": { "kind": "status", "status": 503 },
        }]))
        .await?;
        eprintln!("  storm: the upstream of {STORMED} connections answers 503");
        let mut parked = vec![false; STORMED];
        while failed_at.elapsed() < STORM_FOR {
            for (n, state) in self.states().await?.iter().take(STORMED).enumerate() {
                parked[n] |= state == "parked";
            }
            tokio::time::sleep(POLL).await;
        }
        self.set_storm_faults(json!([])).await?;
        let recovered_at = Instant::now();
        let failing = self.take(&book, failed_at.elapsed(), window);
        let window = self.window();
        eprintln!(
            "  storm: recovered; {} of {STORMED} were seen parked",
            parked.iter().filter(|p| **p).count()
        );
        let mut revived: Vec<Option<Duration>> = vec![None; STORMED];
        loop {
            let now = recovered_at.elapsed();
            for (n, state) in self.states().await?.iter().take(STORMED).enumerate() {
                parked[n] |= state == "parked";
                if parked[n] && revived[n].is_none() && state == "ready" {
                    revived[n] = Some(now);
                }
            }
            let waiting = (0..STORMED)
                .filter(|n| parked[*n] && revived[*n].is_none())
                .count();
            if waiting == 0 || now > REVIVE_PATIENCE {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        let reviving = self.take(&book, recovered_at.elapsed(), window);
        driver.abort();
        let after = self.statuses().await?;
        let field =
            |statuses: &[Value], n: usize, key: &str| statuses[n][key].as_u64().unwrap_or(0);
        Ok(Storm {
            calm: calm_calls,
            stormy: failing.joined(&reviving),
            failing,
            reviving,
            parked: parked.iter().filter(|p| **p).count(),
            revived: (0..STORMED)
                .filter(|n| parked[*n])
                .map(|n| revived[n])
                .collect(),
            probes: (0..STORMED)
                .map(|n| field(&after, n, "probes") - field(&before, n, "probes"))
                .collect(),
            upstream_opens: self.opens().await? - opens_before,
            healthy_parks: (STORMED..CONNECTIONS)
                .map(|n| field(&after, n, "parks") - field(&before, n, "parks"))
                .sum(),
        })
    }

    async fn set_storm_faults(&self, rules: Value) -> anyhow::Result<()> {
        set_faults(&self.http, &self.storm_control, rules).await
    }

    /// Sessions the storm's upstream was asked to open so far.
    async fn opens(&self) -> anyhow::Result<u64> {
        opens(&self.http, &self.storm_control).await
    }

    /// Opens [`IDLE_SESSIONS`] 2025 sessions (`initialize`, then
    /// `notifications/initialized`) and leaves them idle.
    async fn idle_sessions(&self) -> anyhow::Result<Sessions> {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss_before_kib = self.rss_kib();
        let started = Instant::now();
        let opened: Vec<anyhow::Result<String>> = futures::stream::iter(0..IDLE_SESSIONS)
            .map(|n| self.open_session(n))
            .buffer_unordered(OPENING)
            .collect()
            .await;
        let took = started.elapsed();
        let opened = opened.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
        let opened_at = Instant::now();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss_awake_kib = self.rss_kib();
        // Each rests after the gateway's `session_rest_after` (its default):
        // wait for every one, then for the allocator to give back what they
        // held (jemalloc's background thread, within seconds).
        let rested_before = self.rested().await?;
        let mut rested = 0;
        while opened_at.elapsed() < REST_PATIENCE {
            rested = self.rested().await?.saturating_sub(rested_before);
            if rested >= opened.len() as u64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let rest_took = opened_at.elapsed();
        let mut rss_after_kib = self.rss_kib();
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = self.rss_kib();
            let settled = rss_after_kib.abs_diff(now) < 1024;
            rss_after_kib = now;
            if settled {
                break;
            }
        }
        let sessions = Sessions {
            opened: opened.len(),
            took,
            rss_before_kib,
            rss_awake_kib,
            rss_after_kib,
            rested,
            rest_took,
        };
        eprintln!(
            "  {} idle sessions opened in {took:.1?}: {} → {} MiB awake; {rested} rested in {rest_took:.1?}: {} MiB",
            sessions.opened,
            rss_before_kib / 1024,
            rss_awake_kib / 1024,
            sessions.rss_after_kib / 1024
        );
        Ok(sessions)
    }

    /// Sessions the gateway rested so far (`/metrics`).
    async fn rested(&self) -> anyhow::Result<u64> {
        let metrics = self
            .http
            .get(format!("{}/metrics", self.admin))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        Ok(metrics
            .lines()
            .find(|line| {
                line.starts_with("mcp_supervisor_gateway_rests_total")
                    && line.contains("reason=\"quiet\"")
            })
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0))
    }

    /// One session, as a 2025 client opens it; its id.
    async fn open_session(&self, n: usize) -> anyhow::Result<String> {
        let post = |body: Value, session: Option<&str>| {
            let mut request = self
                .http
                .post(&self.gateway_url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-11-25")
                .json(&body);
            if let Some(session) = session {
                request = request.header("mcp-session-id", session);
            }
            request.send()
        };
        let answer = post(
            json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": format!("idle-{n}"), "version": "1" },
                },
            }),
            None,
        )
        .await?
        .error_for_status()
        .context("initialize")?;
        let session = answer
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .context("no mcp-session-id")?
            .to_owned();
        answer.bytes().await?;
        post(
            json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
            Some(&session),
        )
        .await?
        .error_for_status()
        .context("notifications/initialized")?;
        Ok(session)
    }

    /// Every connection's state, in name order, from the dashboard's rows
    /// (`/status`, with every connection's history, is 4.4 MB here: read
    /// only before and after the storm).
    async fn states(&self) -> anyhow::Result<Vec<String>> {
        let rows: Value = self
            .http
            .get(format!("{}/dashboard/api/rows", self.admin))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let Some(rows) = rows["rows"].as_array() else {
            bail!("/dashboard/api/rows has no rows");
        };
        let mut states: Vec<(&str, String)> = rows
            .iter()
            .map(|row| {
                (
                    row["name"].as_str().unwrap_or_default(),
                    row["state"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        states.sort();
        if states.len() != CONNECTIONS {
            bail!("the dashboard shows {} connections", states.len());
        }
        Ok(states.into_iter().map(|(_, state)| state).collect())
    }

    /// `/status`'s connections, in name order (`c0000` first).
    async fn statuses(&self) -> anyhow::Result<Vec<Value>> {
        let mut connections = crate::dashboard::statuses(&self.http, &self.admin).await?;
        connections.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        if connections.len() != CONNECTIONS {
            bail!("/status lists {} connections", connections.len());
        }
        Ok(connections)
    }
}

/// How many connections made 0, 1, 2, 3, and 4 or more probes.
pub(crate) fn probe_histogram(probes: &[u64]) -> [usize; 5] {
    let mut histogram = [0; 5];
    for probes in probes {
        histogram[(*probes).min(4) as usize] += 1;
    }
    histogram
}

/// Sets the fault script of the test server at `control` (its origin).
pub(crate) async fn set_faults(
    http: &reqwest::Client,
    control: &str,
    rules: Value,
) -> anyhow::Result<()> {
    http.post(format!("{control}/_control/faults"))
        .json(&rules)
        .send()
        .await?
        .error_for_status()
        .context("setting an upstream's fault script")?;
    Ok(())
}

/// Sessions the test server at `control` was asked to open so far
/// (`initialize` and `server/discover` requests).
pub(crate) async fn opens(http: &reqwest::Client, control: &str) -> anyhow::Result<u64> {
    let counts: Value = http
        .get(format!("{control}/_control/counts"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(["initialize", "server/discover"]
        .iter()
        .filter_map(|method| counts["requests"][method].as_u64())
        .sum())
}

/// What has been booked since the last take, over `wall`; the book starts
/// again.
/// Where the CPU stood when a stretch of calls began: the gateway's, and
/// the machine's busy and total time (`/proc/stat`, in ticks).
struct Window {
    gateway: Duration,
    machine: (u64, u64),
}

/// The machine's busy and total CPU time so far, in ticks (`/proc/stat`'s
/// first line: idle and iowait are not busy).
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    let total: u64 = ticks.iter().sum();
    let idle = ticks.get(3).unwrap_or(&0) + ticks.get(4).unwrap_or(&0);
    (total - idle, total)
}

/// Calls `lookup` on every connection in turn, [`CALL_RATE`] a second, each
/// on its own task (an open loop: a slow answer delays no other call), as
/// plain JSON-RPC posts of one session (rmcp's client holds a call back
/// behind slower ones). A read-only tool: its failure is retried, and once
/// the attempts are spent it parks the connection (a failed call that may
/// have run does not).
async fn drive_calls(scene: Arc<Caller>, book: Arc<Mutex<Calls>>) {
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / CALL_RATE));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for (id, n) in (0..CONNECTIONS).cycle().enumerate() {
        tick.tick().await;
        let (caller, book) = (scene.clone(), book.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let answer = tokio::time::timeout(CALL_PATIENCE, caller.call(id, n)).await;
            let took = started.elapsed().as_nanos() as u64;
            let mut book = book.lock().unwrap_or_else(|p| p.into_inner());
            match answer {
                Ok(Ok(false)) => {
                    book.results += 1;
                    if n >= STORMED {
                        book.healthy.push(took);
                    }
                }
                Ok(Ok(true)) => {
                    book.errors += 1;
                    if n >= STORMED {
                        book.healthy_errors += 1;
                    }
                }
                _ => book.lost += 1,
            }
        });
    }
}

/// One session's calls, posted as they are.
struct Caller {
    http: reqwest::Client,
    url: String,
    session: String,
}

impl Caller {
    /// Calls `lookup` on connection `n`: whether the answer was an error
    /// (a tool error or a JSON-RPC error), or no answer at all.
    async fn call(&self, id: usize, n: usize) -> anyhow::Result<bool> {
        let body = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &self.session)
            .json(&json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": { "name": format!("{}__lookup", connection(n)), "arguments": { "key": "storm" } },
            }))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        // A JSON answer, or the last `data:` line of an SSE one.
        let json = body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .next_back()
            .unwrap_or(&body);
        let answer: Value = serde_json::from_str(json.trim()).context("the call's answer")?;
        if answer.get("result").is_none() && answer.get("error").is_none() {
            bail!("neither a result nor an error: {answer}");
        }
        Ok(answer.get("error").is_some() || answer["result"]["isError"] == true)
    }
}

/// The targets (docs/BENCHMARKS.md, "Targets").
const LOAD_TARGET: Duration = Duration::from_secs(5);
const RSS_TARGET_MIB: f64 = 300.0;
const CHANGE_TARGET: Duration = Duration::from_millis(5);
const LISTING_TARGET: Duration = Duration::from_millis(50);
const SESSIONS_TARGET_MIB: f64 = 200.0;
/// How long the idle sessions may take to rest: the gateway's default
/// `session_rest_after` (30 s), its sweep (every 5 s) and room to spare.
const REST_PATIENCE: Duration = Duration::from_secs(60);
const REVIVE_TARGET: Duration = Duration::from_secs(5);
const PROBES_TARGET: u64 = 3;
/// Healthy neighbours' p99 during the storm, against before it.
const NEIGHBOUR_TARGET: f64 = 1.10;

impl crate::scenarios::Bench<'_> {
    /// P12: 1,000 upstream connections on one node.
    pub(crate) fn p12(&mut self) -> anyhow::Result<()> {
        eprintln!(
            "P12: supervision at scale, {CONNECTIONS} connections and {} tools",
            CONNECTIONS * TOOLS_PER_CONNECTION
        );
        let plan = Plan::new(self.settings.quick);
        let m = run(self.bins, &self.settings.scratch, plan)?;
        let ms = |ns: f64| ns / 1e6;
        let mib = |kib: u64| kib as f64 / 1024.0;
        let rows = &mut self.report.rows;
        let row = |scenario: String, ours: String, baseline: String, target: &str, met: bool| {
            crate::report::Row {
                id: "P12".into(),
                scenario,
                ours,
                baseline,
                ratio: "—".into(),
                target: target.into(),
                met: Some(met),
            }
        };

        rows.push(row(
            format!("start: spawn → every one of {CONNECTIONS} catalogs in /status (one tools/list through the gateway)"),
            format!("{:.2} s", m.loaded_in.as_secs_f64()),
            "—".into(),
            "≤ 5 s",
            m.loaded_in <= LOAD_TARGET,
        ));
        rows.push(row(
            format!(
                "start: the gateway's RSS with {} tools loaded",
                CONNECTIONS * TOOLS_PER_CONNECTION
            ),
            format!("{:.0} MiB", mib(m.loaded_rss_kib)),
            "—".into(),
            "≤ 300 MiB",
            mib(m.loaded_rss_kib) <= RSS_TARGET_MIB,
        ));

        let mut whole = m.listings.whole.clone();
        let mut pages = m.listings.pages.clone();
        let page_p99 = measure::percentile_ns(&mut pages, 99.0) as f64;
        rows.push(row(
            format!(
                "tools/list over {} tools: one request (a page of ≤ {}; the first asks the registry), p99 of {}",
                m.listings.tools,
                mcp_supervisor::gateway::paging::PAGE_SIZE,
                m.listings.pages.len()
            ),
            format!("{:.2} ms", ms(page_p99)),
            format!("p50 {:.2} ms", ms(measure::percentile_ns(&mut pages, 50.0) as f64)),
            "≤ 50 ms",
            page_p99 <= LISTING_TARGET.as_nanos() as f64,
        ));
        rows.push(crate::report::Row::info(
            "P12",
            &format!(
                "tools/list: a whole listing, every one of its {} pages in turn (rmcp's client), p50 of {}",
                m.listings.pages_each,
                m.listings.whole.len()
            ),
            format!("{:.1} ms", ms(measure::percentile_ns(&mut whole, 50.0) as f64)),
            format!("p99 {:.1} ms", ms(measure::percentile_ns(&mut whole, 99.0) as f64)),
            "—".into(),
        ));

        let mut costs: Vec<f64> = m
            .changes
            .iter()
            .map(|c| c.cost().as_secs_f64() * 1e3)
            .collect();
        let cost = measure::median(&mut costs);
        let once_each = m
            .changes
            .iter()
            .all(|change| change.told.iter().all(|told| *told == 1));
        rows.push(row(
            format!(
                "one upstream's list_changed: the gateway's CPU for it (beyond an idle window as long), median of {}",
                m.changes.len()
            ),
            format!("{cost:.2} ms"),
            format!("each change: {costs:.2?} ms"),
            "≤ 5 ms",
            cost <= CHANGE_TARGET.as_secs_f64() * 1e3,
        ));
        rows.push(row(
            format!("one upstream's list_changed: notifications/tools/list_changed per connected client ({CLIENTS} clients)"),
            if once_each { "1 each".into() } else { "not 1 each".into() },
            format!("{:?}", m.changes.iter().map(|c| c.told.clone()).collect::<Vec<_>>()),
            "exactly 1",
            once_each,
        ));

        let s = &m.storm;
        let values = s.calm.lost + s.stormy.lost == 0
            && s.calm.healthy_errors + s.stormy.healthy_errors == 0;
        let mut calm = s.calm.healthy.clone();
        let mut stormy = s.stormy.healthy.clone();
        let calm_p99 = measure::percentile_ns(&mut calm, 99.0) as f64;
        let stormy_p99 = measure::percentile_ns(&mut stormy, 99.0) as f64;
        let neighbours = stormy_p99 / calm_p99.max(1.0);
        let slowest = s.revived.iter().map(|r| r.unwrap_or(Duration::MAX)).max();
        let all_revived = s.parked == STORMED
            && s.revived
                .iter()
                .all(|r| r.is_some_and(|r| r <= REVIVE_TARGET));
        let most_probes = s.probes.iter().copied().max().unwrap_or(0);
        rows.push(row(
            format!("storm: {STORMED} upstreams fail at once for {} s, {CALL_RATE} calls/s over all: every call a value", STORM_FOR.as_secs()),
            format!("{} lost", s.calm.lost + s.stormy.lost),
            format!(
                "{} results, {} errors as values ({} of them from healthy neighbours)",
                s.calm.results + s.stormy.results,
                s.calm.errors + s.stormy.errors,
                s.calm.healthy_errors + s.stormy.healthy_errors,
            ),
            "0 lost, healthy ones answered",
            values,
        ));
        rows.push(crate::report::Row::ratio(
            "P12",
            "storm: healthy neighbours' call p99, during the storm against before it",
            format!("{:.2} ms", ms(stormy_p99)),
            format!("{:.2} ms", ms(calm_p99)),
            neighbours,
            "≤ 1.10×",
            neighbours <= NEIGHBOUR_TARGET,
        ));
        let busy = |calls: &Calls| {
            format!(
                "gateway {:.0}% of a core, machine {:.0}% busy",
                100.0 * calls.gateway_cpu.as_secs_f64() / calls.wall.as_secs_f64().max(1e-9),
                100.0 * calls.machine_busy
            )
        };
        let p99 = |calls: &Calls| {
            let mut healthy = calls.healthy.clone();
            ms(measure::percentile_ns(&mut healthy, 99.0) as f64)
        };
        for (phase, calls) in [
            ("before it", &s.calm),
            ("while the upstream failed", &s.failing),
            ("from its recovery to the last revival", &s.reviving),
        ] {
            rows.push(crate::report::Row {
                met: None,
                ..row(
                    format!("storm: {phase}, healthy neighbours' p99 and the CPU"),
                    format!("{:.2} ms", p99(calls)),
                    busy(calls),
                    "—",
                    true,
                )
            });
        }
        rows.push(row(
            format!("storm: each of the {STORMED} parked, revived (ready in /status) after its upstream recovered, the slowest"),
            slowest.map_or("—".into(), |d| if d == Duration::MAX { "not revived".into() } else { format!("{:.1} s", d.as_secs_f64()) }),
            format!("{} of {STORMED} parked, {} revived", s.parked, s.revived.iter().flatten().count()),
            "≤ 5 s",
            all_revived,
        ));
        rows.push(row(
            "storm: probes per stormed upstream, the most".into(),
            format!("{most_probes}"),
            format!(
                "{} sessions opened at the upstream ({:.2} per connection)",
                s.upstream_opens,
                s.upstream_opens as f64 / STORMED as f64
            ),
            "≤ 3",
            most_probes <= PROBES_TARGET,
        ));

        let held = m
            .sessions
            .rss_after_kib
            .saturating_sub(m.sessions.rss_before_kib);
        rows.push(row(
            format!(
                "{IDLE_SESSIONS} idle 2025 sessions held, resting (after `session_rest_after`): the gateway's RSS above before"
            ),
            format!("+{:.0} MiB", mib(held)),
            format!(
                "{:.0} → {:.0} MiB; awake +{:.0} MiB; {} rested {:.0} s after the last opened",
                mib(m.sessions.rss_before_kib),
                mib(m.sessions.rss_after_kib),
                mib(m.sessions.rss_awake_kib.saturating_sub(m.sessions.rss_before_kib)),
                m.sessions.rested,
                m.sessions.rest_took.as_secs_f64()
            ),
            "≤ +200 MiB",
            m.sessions.opened == IDLE_SESSIONS && mib(held) <= SESSIONS_TARGET_MIB,
        ));

        let mut revived: Vec<f64> = s
            .revived
            .iter()
            .flatten()
            .map(|d| d.as_secs_f64())
            .collect();
        let notes = vec![
            format!(
                "{CONNECTIONS} HTTP connections with the supervisor's defaults (probes on), over three \
                 `mcp-test-server --extra-tools 13`: c0000–c0499 on the storm's, c0500–c0998 on the calm one, \
                 c0999 on its own (whose list changes); open-file limit {}. Loaded, the gateway held {} descriptors.",
                m.fd_limit, m.loaded_fds
            ),
            format!(
                "Storm: calls to `lookup` on every connection in turn, {CALL_RATE}/s on their own tasks, {:.0} s before \
                 the storm and from its start until every stormed connection was back ({:.0} s): {} and {} healthy \
                 calls timed. {} parks of healthy connections. Revivals after the recovery: median {:.1} s, \
                 read from /status every {} ms. Probes: {:?} connections made 0, 1, 2, 3, more.",
                s.calm.wall.as_secs_f64(),
                s.stormy.wall.as_secs_f64(),
                s.calm.healthy.len(),
                s.stormy.healthy.len(),
                s.healthy_parks,
                if revived.is_empty() {
                    f64::NAN
                } else {
                    measure::median(&mut revived)
                },
                POLL.as_millis(),
                probe_histogram(&s.probes),
            ),
            format!(
                "Sessions: {} opened ({OPENING} at a time) in {:.1} s.",
                m.sessions.opened,
                m.sessions.took.as_secs_f64()
            ),
        ];
        self.report.notes.push(("P12".into(), notes));
        self.p12_fleet()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_probe_histogram_counts_four_and_more_together() {
        assert_eq!(super::probe_histogram(&[0, 2, 3, 3, 4, 9]), [1, 0, 1, 2, 2]);
    }
}
