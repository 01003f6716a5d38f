//! `mcp-bench`: measures the performance targets P1–P12 (docs/BENCHMARKS.md,
//! "Targets") side by side in one run, prints a table and writes `docs/BENCHMARKS.md`.
//!
//! Every measured round runs in a worker process of its own (`mcp-bench worker
//! JSON`, the same binary), against upstreams that are separate processes
//! (`mcp-test-server --http`, `mcp-supervisor serve`), so the client CPU
//! (`getrusage`) and peak RSS (`VmHWM`) a worker reports are its own.
//! Variants of a comparison alternate round by round.
//!
//! Layout:
//! - [`scenarios`]: P1–P11, their variants and their rows;
//! - [`dashboard`]: P10's gateway with 1,000 connections, its call load,
//!   the `/events` reader and the page timings (headless Chromium);
//! - [`scale`]: P12's gateway with 1,000 connections over three upstreams:
//!   its start, listings, a list change, a storm and 10,000 idle sessions;
//! - [`fleet_sim`]: P12's fleet, 20 library nodes × 1,000 connections over
//!   one `redis-server`, and the same storm;
//! - [`callgrind`]: P11's hops under callgrind, and their instructions per call;
//! - [`worker`]: the client loops (supervised, raw rmcp, …) in a worker process;
//! - [`procs`]: starting upstreams, the gateway, workers, the Python client;
//! - [`relay`]: `mcp-bench relay`, an HTTP relay with no MCP logic (the
//!   floor of any gateway, beside the gateway in every P5);
//! - [`measure`]: CPU, RSS, percentiles, machine facts;
//! - [`report`]: the table and the markdown;
//! - [`soak`]: `mcp-bench soak` (`make soak`), the soak under faults
//!   (docs/RELIABILITY.md).

mod callgrind;
mod dashboard;
mod fleet_sim;
mod fleet_worker;
mod measure;
mod otlp_sink;
mod procs;
mod relay;
mod report;
mod scale;
mod scenarios;
mod soak;
mod worker;

use std::{path::PathBuf, time::Instant};

use clap::{Parser, Subcommand};

use crate::{
    procs::Binaries,
    report::{Report, RunInfo},
    scenarios::{Bench, Settings},
};

/// Measures the performance targets (P1–P12) side by side and writes docs/BENCHMARKS.md.
#[derive(Debug, Parser)]
#[command(name = "mcp-bench")]
struct Cli {
    /// Short rounds (about a minute in all) instead of the full run.
    #[arg(long)]
    quick: bool,
    /// Run only these benchmarks (e.g. `--only P1,P5`).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Add the peer gateway (mcp-proxy 0.6.0 in .tools/mcp-proxy, installed
    /// by scripts/install-peers.sh) to every P5 row.
    #[arg(long)]
    peers: bool,
    /// Override the rounds per variant.
    #[arg(long)]
    rounds: Option<u32>,
    /// Override the measured seconds per round.
    #[arg(long)]
    seconds: Option<f64>,
    /// Where to write the report. Default: docs/BENCHMARKS.md for a run of
    /// every benchmark, target/bench/BENCHMARKS.md for a partial (`--only`) run.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Do not write a report file.
    #[arg(long)]
    no_write: bool,
    /// The command to record in the report (the Makefile passes `make bench …`).
    #[arg(long)]
    invoked_as: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs one measured round (internal).
    #[command(hide = true)]
    Worker {
        #[arg(value_name = "JSON")]
        spec: String,
    },
    /// The soak under faults, hostile input and reloads (`make soak`,
    /// docs/RELIABILITY.md); exits 1 on any finding.
    Soak(soak::SoakArgs),
    /// An HTTP relay with no MCP logic, the floor of any gateway (internal,
    /// started by P5 and P11).
    #[command(hide = true)]
    Relay(relay::RelayArgs),
    /// An agent worker embedding the library, driven by lines on stdin
    /// (internal, for the fleet's tests).
    #[command(hide = true)]
    FleetWorker(fleet_worker::FleetWorkerArgs),
}

const ALL: [&str; 12] = [
    "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12",
];

fn main() {
    let cli = Cli::parse();
    if let Some(Command::Worker { spec }) = &cli.command {
        if let Err(error) = worker::run(spec) {
            eprintln!("mcp-bench worker: {error:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Some(Command::FleetWorker(args)) = &cli.command {
        if let Err(error) = fleet_worker::run(args) {
            eprintln!("mcp-bench fleet-worker: {error:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Some(Command::Relay(args)) = &cli.command {
        if let Err(error) = relay::run(args) {
            eprintln!("mcp-bench relay: {error:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Some(Command::Soak(args)) = &cli.command {
        match soak::run(args) {
            Ok(true) => return,
            Ok(false) => std::process::exit(1),
            Err(error) => {
                eprintln!("mcp-soak: {error:#}");
                std::process::exit(2);
            }
        }
    }
    if let Err(error) = run(cli) {
        eprintln!("mcp-bench: {error:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let only: Vec<String> = cli.only.iter().map(|id| id.trim().to_uppercase()).collect();
    if let Some(unknown) = only.iter().find(|id| !ALL.contains(&id.as_str())) {
        anyhow::bail!("unknown benchmark {unknown}; pick from {}", ALL.join(", "));
    }
    let selected: Vec<&str> = ALL
        .iter()
        .copied()
        .filter(|id| only.is_empty() || only.iter().any(|o| o == id))
        .collect();
    let root = scenarios::workspace_root();
    let scratch_parent = root.join("target/bench");
    std::fs::create_dir_all(&scratch_parent)?;
    let scratch = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(&scratch_parent)?;
    let mut settings = Settings::new(cli.quick, root.clone(), scratch.path().to_owned());
    settings.peers = cli.peers;
    if let Some(rounds) = cli.rounds {
        settings.rounds = rounds.max(1);
    }
    if let Some(seconds) = cli.seconds {
        settings.seconds = seconds;
    }
    let bins = Binaries::locate(&root)?;
    let machine = measure::Machine::detect();
    measure::note_load();
    let date = measure::utc_now();
    let started = Instant::now();
    eprintln!(
        "mcp-bench: {} mode, {} round(s) × {:.1} s per variant; {} cores, load {}",
        if cli.quick { "quick" } else { "full" },
        settings.rounds,
        settings.seconds,
        machine.cores,
        machine.loadavg_start
    );

    let mut report = Report::default();
    {
        let mut bench = Bench {
            bins: &bins,
            settings: &settings,
            report: &mut report,
        };
        for id in &selected {
            let outcome = match *id {
                "P1" => bench.p1(),
                "P2" => bench.p2(),
                "P3" => bench.p3(),
                "P4" => bench.p4(),
                "P5" => bench.p5(),
                "P6" => bench.p6(),
                "P7" => bench.p7(),
                "P8" => bench.p8(),
                "P9" => bench.p9(),
                "P10" => bench.p10(),
                "P11" => bench.p11(),
                "P12" => bench.p12(),
                _ => Ok(()),
            };
            if let Err(error) = outcome {
                eprintln!("mcp-bench: {id} failed: {error:#}");
                bench
                    .report
                    .failures
                    .push(((*id).to_owned(), format!("{error:#}")));
            }
        }
    }
    report.print();

    let command = cli.invoked_as.clone().unwrap_or_else(|| {
        std::env::args()
            .map(|arg| arg.replace(&root.display().to_string(), "."))
            .collect::<Vec<_>>()
            .join(" ")
    });
    let run = RunInfo {
        date,
        command,
        mode: if cli.quick { "quick" } else { "full" },
        only: if only.is_empty() {
            Vec::new()
        } else {
            selected.iter().map(|s| (*s).to_owned()).collect()
        },
        machine,
        loadavg_end: measure::loadavg(),
        max_load: measure::max_load(),
        duration_s: started.elapsed().as_secs_f64(),
        rounds: settings.rounds,
        seconds: settings.seconds,
    };
    if !cli.no_write {
        let out = cli.out.clone().unwrap_or_else(|| {
            if only.is_empty() {
                root.join("docs/BENCHMARKS.md")
            } else {
                root.join("target/bench/BENCHMARKS.md")
            }
        });
        report::write_markdown(&out, &report.markdown(&run))?;
        println!("  Report written to {}", out.display());
    }
    let missed = report.rows.iter().any(|row| row.met == Some(false));
    if !report.failures.is_empty() {
        anyhow::bail!("{} benchmark(s) failed to run", report.failures.len());
    }
    if missed {
        // A missed target is a finding, not a harness failure: the report says so.
        eprintln!("mcp-bench: some targets are not met (see the table)");
    }
    Ok(())
}
