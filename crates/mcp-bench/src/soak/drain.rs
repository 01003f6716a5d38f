//! The soak's rolling-restart phase, on a supervisor of its own (no auth,
//! so the Python SDK's clients connect as users' agents do):
//!
//! 1. **Abandoned sessions.** One client opens 500 sessions and abandons
//!    them (no `DELETE`); then a new client, from the same address, opens a
//!    session and calls a tool. It must be served at once: the caps make
//!    room instead of locking everyone out (docs/CONFIG.md, "Connections
//!    and limits").
//! 2. **SIGTERM mid-call.** The Python SDK 2.x, two clients in each mode,
//!    each calling a 1.5 s tool without having listed the tools (so each
//!    lists them right after the answer, to check it). SIGTERM arrives while
//!    all four calls are in flight: every `call_tool` must return its result
//!    without raising, and the process must exit within `shutdown_timeout`
//!    leaving no child (docs/ARCHITECTURE.md, "Shutdown").

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{
    client::{Answer, Mcp},
    survivors,
};
use crate::procs::{Binaries, start_announcing};

/// Sessions opened and abandoned before the new client comes.
const ABANDONED: usize = 500;
/// How long the new client may take to be served: "at once", with a margin
/// for a loaded machine (the lockout it guards against lasted minutes).
const SERVED_WITHIN: Duration = Duration::from_secs(5);
/// The drain's `shutdown_timeout`.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// The tool call in flight at SIGTERM.
const CALL_MS: u64 = 1_500;

/// What the phase saw.
pub(super) struct DrainPhase {
    /// The new client after the flood: `Ok(how long it took)` or what went
    /// wrong.
    pub(super) new_client: Result<Duration, String>,
    /// Per SDK client: `Ok(())` when `call_tool` returned the result.
    pub(super) clients: Vec<(&'static str, Result<(), String>)>,
    /// How the supervisor exited, and how long after SIGTERM.
    pub(super) exit: Option<String>,
    pub(super) took: Duration,
    pub(super) orphans: Vec<u32>,
}

impl DrainPhase {
    pub(super) fn flood_ok(&self) -> bool {
        self.new_client
            .as_ref()
            .is_ok_and(|took| *took <= SERVED_WITHIN)
    }

    pub(super) fn drain_ok(&self) -> bool {
        self.clients.iter().all(|(_, outcome)| outcome.is_ok())
            && self.exit.as_deref() == Some("exit status: 0")
            && self.took <= SHUTDOWN_TIMEOUT
            && self.orphans.is_empty()
    }

    pub(super) fn flood_row(&self) -> String {
        match &self.new_client {
            Ok(took) => format!(
                "{ABANDONED} sessions abandoned, then a new client served in {:.2} s",
                took.as_secs_f64()
            ),
            Err(error) => format!("{ABANDONED} sessions abandoned, then a new client: {error}"),
        }
    }

    pub(super) fn drain_row(&self) -> String {
        let failed: Vec<String> = self
            .clients
            .iter()
            .filter_map(|(mode, outcome)| outcome.as_ref().err().map(|e| format!("{mode}: {e}")))
            .collect();
        format!(
            "{} of {} SDK 2.x calls answered; supervisor exited {} {:.1} s after SIGTERM; {} orphans{}",
            self.clients.len() - failed.len(),
            self.clients.len(),
            self.exit.as_deref().unwrap_or("NOT"),
            self.took.as_secs_f64(),
            self.orphans.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!(" ({})", failed.join("; "))
            }
        )
    }
}

/// Runs the phase (blocking; call it off the async runtime).
pub(super) fn drain_phase(
    bins: &Binaries,
    root: &Path,
    dir: &Path,
    run_id: &str,
) -> anyhow::Result<DrainPhase> {
    let marker = format!("soak-{run_id}-drain");
    let path = dir.join("drain.toml");
    std::fs::write(
        &path,
        format!(
            "[supervisor]\nshutdown_timeout = \"{}s\"\n\
             [gateway]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
             [connections.up]\ntransport = \"stdio\"\ncommand = \"{}\"\n\
             env = {{ SOAK_MARKER = \"{marker}\" }}\n",
            SHUTDOWN_TIMEOUT.as_secs(),
            bins.test_server.display()
        ),
    )?;
    let mut command = Command::new(&bins.supervisor);
    command.arg("serve").arg("--config").arg(&path);
    let mut supervisor = start_announcing(
        command,
        &["gateway listening on", "admin API listening on"],
        &dir.join("drain.log"),
    )?;
    let (gateway, admin) = (supervisor.urls[0].clone(), supervisor.urls[1].clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;

    let new_client = runtime.block_on(flood_then_call(&gateway));

    let python = root.join(".tools/venv2/bin/python");
    let script = root.join("tests/interop/python_client_v2.py");
    anyhow::ensure!(
        python.exists(),
        "{} is missing: run ./scripts/install-test-deps.sh",
        python.display()
    );
    let modes = ["auto", "auto", "legacy", "legacy"];
    let mut clients: Vec<(&'static str, Child, PathBuf)> = Vec::new();
    for (n, mode) in modes.into_iter().enumerate() {
        let out = dir.join(format!("drain-client-{n}.json"));
        let child = Command::new(&python)
            .arg(&script)
            .args(["--mode", mode, "--no-list", &gateway, "up__sleep"])
            .arg(json!({ "ms": CALL_MS }).to_string())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(std::fs::File::create(out.with_extension("err"))?)
            .spawn()
            .with_context(|| format!("starting {}", python.display()))?;
        clients.push((mode, child, out));
    }
    // SIGTERM once every call is in flight.
    let in_flight = runtime.block_on(wait_in_flight(&admin, modes.len()));
    let signalled = Instant::now();
    supervisor.signal(nix::sys::signal::Signal::SIGTERM);
    let mut outcomes = Vec::new();
    for (mode, mut child, out) in clients {
        let outcome = match wait_child(&mut child, Duration::from_secs(60)) {
            Some(0) => check_output(&out),
            other => Err(format!(
                "exited {other:?}: {}",
                std::fs::read_to_string(out.with_extension("err"))
                    .unwrap_or_default()
                    .lines()
                    .last()
                    .unwrap_or_default()
            )),
        };
        outcomes.push((mode, in_flight.clone().and(outcome)));
    }
    let exit = supervisor.wait_exit(SHUTDOWN_TIMEOUT + Duration::from_secs(20));
    let took = signalled.elapsed();
    let orphans = survivors(&marker, Duration::from_secs(1));
    drop(supervisor);
    Ok(DrainPhase {
        new_client,
        clients: outcomes,
        exit: exit.map(|status| status.to_string()),
        took,
        orphans,
    })
}

/// Opens [`ABANDONED`] sessions and leaves them; then a new client opens one
/// and calls `up__echo`: how long that took, or what went wrong.
async fn flood_then_call(gateway: &str) -> Result<Duration, String> {
    let http = reqwest::Client::new();
    for _ in 0..ABANDONED {
        // Each its own session, never ended.
        Mcp::connect(&http, gateway, "")
            .await
            .map_err(|error| format!("the flood could not open a session: {error:#}"))?;
    }
    let started = Instant::now();
    let fresh = reqwest::Client::new();
    let mut mcp = Mcp::connect(&fresh, gateway, "")
        .await
        .map_err(|error| format!("refused: {error:#}"))?;
    let reply = mcp.call("up__echo", json!({"text": "hi"})).await;
    match reply.answer {
        Answer::Value {
            is_error: false, ..
        } => Ok(started.elapsed()),
        other => Err(format!("its call got {other:?}")),
    }
}

/// Waits (up to 30 s) until the admin API shows `calls` in flight on `up`.
async fn wait_in_flight(admin: &str, calls: usize) -> Result<(), String> {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status: Option<Value> = match http.get(format!("{admin}/status")).send().await {
            Ok(response) => response.json().await.ok(),
            Err(_) => None,
        };
        let in_flight = status
            .as_ref()
            .and_then(|status| status["connections"][0]["in_flight"].as_u64())
            .unwrap_or(0);
        if in_flight >= calls as u64 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("only {in_flight} of {calls} calls ever in flight"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The exit code of `child` within `bound` (killed after it).
fn wait_child(child: &mut Child, bound: Duration) -> Option<i32> {
    let deadline = Instant::now() + bound;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The client's document must show the call's result.
fn check_output(out: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(out).map_err(|error| error.to_string())?;
    let output: Value = serde_json::from_str(&text).map_err(|error| error.to_string())?;
    let got = &output["calls"][0]["text"][0];
    if *got == json!(format!("slept {CALL_MS}")) {
        Ok(())
    } else {
        Err(format!("got {got}"))
    }
}
