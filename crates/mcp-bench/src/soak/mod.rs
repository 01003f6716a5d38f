//! `mcp-bench soak` (`make soak`): a bounded soak of the whole service under
//! faults, hostile input and reloads, on loopback only. What it does and how
//! to read its table: docs/RELIABILITY.md.
//!
//! Layout:
//! - this module: the processes, the config, the phases, the callers, the
//!   reloads, the process checks and the table;
//! - [`client`]: a raw MCP client over reqwest;
//! - [`faults`]: the fault kinds and their scheduler;
//! - [`hostile`]: the hostile probes;
//! - [`drain`]: the rolling-restart phase (abandoned sessions, SIGTERM with
//!   SDK clients mid-call).

mod client;
mod drain;
mod faults;
mod hostile;

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU8, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use crate::{
    measure,
    procs::{Binaries, Guarded, start_announcing},
};
use client::{Answer, Mcp, Reply};
use drain::DrainPhase;
use faults::FaultKind;
use hostile::HostileKind;

/// The gateway's `max_body_bytes` in the soak's config.
pub(crate) const MAX_BODY_BYTES: usize = 65_536;
/// The gateway's `header_timeout` in the soak's config.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest `call_timeout` any config generation gives a connection.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// An answer later than this is late.
const LATE: Duration = Duration::from_secs(CALL_TIMEOUT.as_secs() + 1);
/// The longest run the soak accepts (its phases; start and stop add ~30 s).
const MAX_SECONDS: u64 = 540;
/// A downstream `initialize` body.
pub(crate) const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp-soak-hostile","version":"0"}}}"#;

/// `mcp-bench soak`.
#[derive(Debug, clap::Args)]
pub(crate) struct SoakArgs {
    /// Seconds of load: a no-fault baseline (a tenth, at least 10 s) and the
    /// fault phase (the rest). At most 540.
    #[arg(long, default_value_t = 300)]
    seconds: u64,
}

/// Which phase the callers are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    Baseline = 0,
    Faults = 1,
    Done = 2,
}

/// Everything the callers got.
#[derive(Debug, Default)]
struct Tally {
    calls: u64,
    values: u64,
    tool_errors: u64,
    /// `tool: what` → count.
    non_values: BTreeMap<String, u64>,
    late: u64,
    late_examples: Vec<String>,
    /// isError texts (digits masked) → count.
    error_texts: BTreeMap<String, u64>,
    neighbour_baseline_ns: Vec<u64>,
    neighbour_faults_ns: Vec<u64>,
    canary_in_answers: u64,
    /// `delete_item` ids sent, per connection.
    sent_ids: BTreeMap<&'static str, BTreeSet<String>>,
}

/// Hostile probes, per kind.
#[derive(Debug, Default)]
struct HostileTally {
    runs: u64,
    ok: u64,
    got: BTreeMap<String, u64>,
}

/// The running soak: processes, tokens and what was seen so far.
pub(crate) struct Soak {
    http: reqwest::Client,
    bins: Binaries,
    dir: PathBuf,
    gateway_url: String,
    admin_url: String,
    gateway_token: String,
    admin_token: String,
    canary: String,
    flaky_control: String,
    bouncer: Mutex<Option<Guarded>>,
    bouncer_port: u16,
    supervisor_pid: u32,
    phase: AtomicU8,
    next_id: AtomicU64,
    tally: Mutex<Tally>,
}

impl Soak {
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }
    pub(crate) fn gateway_url(&self) -> &str {
        &self.gateway_url
    }
    pub(crate) fn admin_url(&self) -> &str {
        &self.admin_url
    }
    pub(crate) fn gateway_token(&self) -> &str {
        &self.gateway_token
    }
    pub(crate) fn admin_token(&self) -> &str {
        &self.admin_token
    }

    fn phase(&self) -> Phase {
        match self.phase.load(Ordering::SeqCst) {
            0 => Phase::Baseline,
            1 => Phase::Faults,
            _ => Phase::Done,
        }
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::SeqCst);
    }

    pub(crate) fn in_fault_phase(&self) -> bool {
        self.phase() == Phase::Faults
    }

    /// A valid `initialize` POST (token, headers, body) on `request`.
    pub(crate) fn initialize_request(
        &self,
        request: reqwest::RequestBuilder,
    ) -> reqwest::RequestBuilder {
        request
            .bearer_auth(&self.gateway_token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INITIALIZE)
    }

    /// A new downstream session that has listed the tools.
    pub(crate) async fn session(&self) -> anyhow::Result<Mcp> {
        let mut mcp = Mcp::connect(&self.http, &self.gateway_url, &self.gateway_token).await?;
        let listed = mcp.list_tools().await;
        self.scan(&listed.body);
        Ok(mcp)
    }

    /// Replaces `flaky`'s fault script.
    pub(crate) async fn set_flaky_faults(&self, script: &Value) -> anyhow::Result<()> {
        let response = self
            .http
            .post(format!("{}/_control/faults", self.flaky_control))
            .json(script)
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("fault script refused: {}", response.status());
        }
        Ok(())
    }

    /// A state-changing admin request (JSON, with the admin token).
    pub(crate) async fn admin_post(&self, path: &str) -> anyhow::Result<u16> {
        let response = self
            .http
            .post(format!("{}{path}", self.admin_url))
            .bearer_auth(&self.admin_token)
            .json(&json!({}))
            .send()
            .await?;
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        self.scan(&body);
        if !(200..300).contains(&status) {
            bail!("POST {path}: {status} {body}");
        }
        Ok(status)
    }

    async fn admin_get(&self, path: &str) -> anyhow::Result<String> {
        let response = self
            .http
            .get(format!("{}{path}", self.admin_url))
            .bearer_auth(&self.admin_token)
            .send()
            .await?;
        Ok(response.text().await?)
    }

    /// Stops `bouncer` with `signal` (and reaps it).
    pub(crate) async fn bouncer_down(
        &self,
        signal: nix::sys::signal::Signal,
    ) -> anyhow::Result<()> {
        let taken = lock(&self.bouncer).take();
        if let Some(mut bouncer) = taken {
            bouncer.signal(signal);
            tokio::task::spawn_blocking(move || {
                let _ = bouncer.wait_exit(Duration::from_secs(5));
                drop(bouncer);
            })
            .await?;
        }
        Ok(())
    }

    /// Starts `bouncer` again on its port.
    pub(crate) async fn bouncer_up(&self) -> anyhow::Result<()> {
        let bins = self.bins.clone();
        let dir = self.dir.clone();
        let port = self.bouncer_port;
        let started = tokio::task::spawn_blocking(move || {
            start_upstream(&bins, &dir, "bouncer", &[], Some(port))
        })
        .await??;
        *lock(&self.bouncer) = Some(started);
        Ok(())
    }

    /// Counts one answer a caller got.
    pub(crate) fn record(&self, tool: &str, reply: &Reply, neighbour: bool) {
        let phase = self.phase();
        let mut tally = lock(&self.tally);
        tally.calls += 1;
        if reply.body.contains(&self.canary) {
            tally.canary_in_answers += 1;
        }
        match &reply.answer {
            Answer::Value { is_error, text } => {
                tally.values += 1;
                if *is_error {
                    tally.tool_errors += 1;
                    *tally.error_texts.entry(mask(text)).or_default() += 1;
                }
            }
            other => {
                *tally
                    .non_values
                    .entry(format!("{tool}: {}", describe(other)))
                    .or_default() += 1;
            }
        }
        if reply.elapsed > LATE {
            tally.late += 1;
            if tally.late_examples.len() < 10 {
                tally.late_examples.push(format!(
                    "{tool} {:.2} s: {}",
                    reply.elapsed.as_secs_f64(),
                    describe(&reply.answer)
                ));
            }
        }
        if neighbour {
            let ns = reply.elapsed.as_nanos() as u64;
            match phase {
                Phase::Baseline => tally.neighbour_baseline_ns.push(ns),
                Phase::Faults => tally.neighbour_faults_ns.push(ns),
                Phase::Done => {}
            }
        }
    }

    /// Counts the canary in something other than a call's answer.
    fn scan(&self, text: &str) {
        if text.contains(&self.canary) {
            lock(&self.tally).canary_in_answers += 1;
        }
    }

    /// A fresh `delete_item` id for `connection`, remembered as sent.
    fn delete_id(&self, connection: &'static str) -> String {
        let id = format!(
            "{connection}-{}",
            self.next_id.fetch_add(1, Ordering::SeqCst)
        );
        lock(&self.tally)
            .sent_ids
            .entry(connection)
            .or_default()
            .insert(id.clone());
        id
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn describe(answer: &Answer) -> String {
    match answer {
        Answer::Value { is_error, .. } => format!("value (isError {is_error})"),
        Answer::RpcError { code, message } => format!("JSON-RPC error {code} {}", mask(message)),
        Answer::Http(status) => format!("HTTP {status}"),
        Answer::Transport(kind) => format!("transport error ({kind})"),
        Answer::Malformed => "2xx without a response".into(),
        Answer::NoResponse => format!("no response in {} s", client::PATIENCE.as_secs()),
    }
}

/// The first 70 characters of a text, digits masked, so similar texts group.
fn mask(text: &str) -> String {
    text.chars()
        .take(70)
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect()
}

/// `mcp-test-server --http 127.0.0.1:PORT` (0: any) with extra arguments.
fn start_upstream(
    bins: &Binaries,
    dir: &Path,
    name: &str,
    extra: &[&str],
    port: Option<u16>,
) -> anyhow::Result<Guarded> {
    let mut command = Command::new(&bins.test_server);
    command
        .args(["--http", &format!("127.0.0.1:{}", port.unwrap_or(0))])
        .args(extra)
        .env("MCP_TEST_SERVER_LOG", "error");
    start_announcing(command, &["listening on"], &dir.join(format!("{name}.log")))
}

/// What a config generation needs to know.
struct Upstreams {
    healthy_a: String,
    healthy_b: String,
    vault: String,
    flaky: String,
    bouncer: String,
    test_server: PathBuf,
    stubborn_pid: PathBuf,
    marker: String,
}

/// The supervisor's config, generation `generation` (reloads change
/// `flaky`'s timeout, add or remove `extra` and restart `stubborn`).
fn config(
    up: &Upstreams,
    gateway_token: &str,
    admin_token: &str,
    canary: &str,
    generation: u32,
) -> String {
    let server = up.test_server.display();
    let odd = generation % 2 == 1;
    let mut text = format!(
        r#"[supervisor]
connect_timeout = "3s"
call_timeout = "3s"
list_timeout = "3s"
max_attempts = 3
shutdown_timeout = "2s"
restart_budget = {{ restarts = 1000, within = "60s" }}

[supervisor.quarantine]
base_cooldown = "500ms"
max_cooldown = "2s"
retire_after = 1000

[gateway]
listen = "127.0.0.1:0"
auth = {{ kind = "bearer", token = "{gateway_token}" }}
max_body_bytes = {MAX_BODY_BYTES}
header_timeout = "{header}s"
body_timeout = "3s"
session_idle_timeout = "30s"

[admin]
listen = "127.0.0.1:0"
auth = {{ kind = "bearer", token = "{admin_token}" }}

[connections.healthy-a]
transport = "http"
url = "{healthy_a}"

[connections.healthy-b]
transport = "http"
url = "{healthy_b}?key={canary}"

[connections.vault]
transport = "http"
url = "{vault}"
auth = {{ kind = "bearer", token = "{canary}" }}

[connections.flaky]
transport = "http"
url = "{flaky}"
call_timeout = "{flaky_timeout}"

[connections.bouncer]
transport = "http"
url = "{bouncer}"

[connections.crasher]
transport = "stdio"
command = "{server}"
args = ["--exit-on-tool", "add"]
env = {{ SOAK_MARKER = "{marker}" }}

[connections.stubborn]
transport = "stdio"
command = "{server}"
args = ["--ignore-sigterm", "--spawn-grandchild", "--pid-file", "{pid}"]
env = {{ SOAK_MARKER = "{marker}", SOAK_GENERATION = "{generation}" }}
"#,
        header = HEADER_TIMEOUT.as_secs(),
        healthy_a = up.healthy_a,
        healthy_b = up.healthy_b,
        vault = up.vault,
        flaky = up.flaky,
        bouncer = up.bouncer,
        flaky_timeout = if odd { "2s" } else { "3s" },
        pid = up.stubborn_pid.display(),
        marker = up.marker,
    );
    if odd {
        let _ = write!(
            text,
            "\n[connections.extra]\ntransport = \"http\"\nurl = \"{}\"\n",
            up.healthy_a
        );
    }
    text
}

/// Live (non-zombie) processes whose environment holds `SOAK_MARKER=marker`.
fn marked_processes(marker: &str) -> Vec<u32> {
    let needle = format!("SOAK_MARKER={marker}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|b| *b == 0)
                    .any(|var| var == needle.as_bytes())
            })
        })
        .filter(|pid| matches!(measure::proc_state(*pid), Some((state, _)) if state != 'Z'))
        .collect()
}

/// Polls until no marked process is alive or `within` passes; returns the
/// survivors.
fn survivors(marker: &str, within: Duration) -> Vec<u32> {
    let deadline = Instant::now() + within;
    loop {
        let alive = marked_processes(marker);
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// RSS (KiB) and open fds of a process.
fn footprint(pid: u32) -> (u64, usize) {
    let rss = measure::status_field(&format!("/proc/{pid}/status"), "VmRSS:").unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    (rss, fds)
}

fn random_hex() -> String {
    let mut bytes = [0u8; 8];
    if let Ok(mut file) = std::fs::File::open("/dev/urandom") {
        use std::io::Read as _;
        let _ = file.read_exact(&mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One caller: a session, and a plan of calls it repeats until the end.
#[derive(Debug, Clone, Copy)]
enum Call {
    Echo(&'static str),
    Lookup(&'static str),
    SlowLookup(&'static str),
    Delete(&'static str),
}

impl Call {
    fn tool_and_arguments(self, soak: &Soak, n: u64) -> (String, Value) {
        match self {
            Call::Echo(c) => (format!("{c}__echo"), json!({"text": format!("hello {n}")})),
            Call::Lookup(c) => (format!("{c}__lookup"), json!({"key": format!("k{n}")})),
            Call::SlowLookup(c) => (
                format!("{c}__lookup"),
                json!({"key": format!("k{n}"), "ms": 200}),
            ),
            Call::Delete(c) => (
                format!("{c}__delete_item"),
                json!({"id": soak.delete_id(c)}),
            ),
        }
    }
}

async fn caller(soak: Arc<Soak>, plan: Vec<Call>, neighbour: bool) {
    let mut mcp = None;
    let mut n = 0u64;
    while soak.phase() != Phase::Done {
        if mcp.is_none() {
            match soak.session().await {
                Ok(session) => mcp = Some(session),
                Err(error) => {
                    *lock(&soak.tally)
                        .non_values
                        .entry(format!("session: {error:#}"))
                        .or_default() += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            }
        }
        let Some(session) = mcp.as_mut() else {
            continue;
        };
        for call in &plan {
            n += 1;
            let (tool, arguments) = call.tool_and_arguments(&soak, n);
            let reply = session.call(&tool, arguments).await;
            soak.record(&tool, &reply, neighbour);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The reloads: rewrite the config and reload, by `POST /reload` or SIGHUP.
async fn reloads(
    soak: Arc<Soak>,
    path: PathBuf,
    up: Arc<Upstreams>,
    every: Duration,
) -> Vec<(u32, &'static str, String)> {
    let mut done = Vec::new();
    let mut generation = 0;
    loop {
        let wake = Instant::now() + every;
        while Instant::now() < wake && soak.in_fault_phase() {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if !soak.in_fault_phase() {
            return done;
        }
        generation += 1;
        let text = config(
            &up,
            &soak.gateway_token,
            &soak.admin_token,
            &soak.canary,
            generation,
        );
        if let Err(error) = std::fs::write(&path, text) {
            done.push((generation, "write", format!("{error}")));
            continue;
        }
        if generation % 3 == 0 {
            let pid = nix::unistd::Pid::from_raw(soak.supervisor_pid as i32);
            let sent = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP);
            done.push((
                generation,
                "SIGHUP",
                if sent.is_ok() {
                    "sent".into()
                } else {
                    "failed".into()
                },
            ));
        } else {
            let outcome = match soak.admin_post("/reload").await {
                Ok(status) => status.to_string(),
                Err(error) => format!("{error:#}"),
            };
            done.push((generation, "POST /reload", outcome));
        }
    }
}

async fn hostile_loop(soak: Arc<Soak>) -> BTreeMap<HostileKind, HostileTally> {
    let mut tallies: BTreeMap<HostileKind, HostileTally> = BTreeMap::new();
    'outer: loop {
        for kind in HostileKind::ALL {
            if !soak.in_fault_phase() {
                break 'outer;
            }
            let outcome = hostile::probe(&soak, kind).await;
            soak.scan(&outcome.body);
            let tally = tallies.entry(kind).or_default();
            tally.runs += 1;
            tally.ok += u64::from(outcome.ok);
            *tally.got.entry(outcome.got_class()).or_default() += 1;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    tallies
}

impl hostile::Outcome {
    /// The answer with timings rounded away, so runs group.
    fn got_class(&self) -> String {
        match self.got.split_once(" after ") {
            Some((head, rest)) => {
                let timing = if self.ok { "in time" } else { "too late" };
                match rest.split_once(", ") {
                    Some((_, tail)) => format!("{head} {timing} ({tail})"),
                    None => format!("{head} {timing}"),
                }
            }
            None => self.got.clone(),
        }
    }
}

/// Entry point of `mcp-bench soak`.
pub(crate) fn run(args: &SoakArgs) -> anyhow::Result<bool> {
    let seconds = args.seconds.clamp(20, MAX_SECONDS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(soak(seconds))
}

async fn soak(seconds: u64) -> anyhow::Result<bool> {
    let started = Instant::now();
    let bins = Binaries::locate(&crate::scenarios::workspace_root())?;
    let root = crate::scenarios::workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let parent = target.join("soak");
    std::fs::create_dir_all(&parent)?;
    let scratch = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(&parent)?;
    let dir = scratch.path().to_owned();
    let run_id = random_hex();
    let canary = format!("soak-canary-{run_id}");
    let gateway_token = format!("gw-{}", random_hex());
    let admin_token = format!("adm-{}", random_hex());
    let marker = format!("soak-{run_id}");
    let machine = measure::Machine::detect();
    eprintln!(
        "mcp-soak: {seconds} s of load; {} cores, {:.0} GiB; scratch {}",
        machine.cores,
        machine.mem_total_gib,
        dir.display()
    );

    // Upstreams.
    let healthy_a = start_upstream(&bins, &dir, "healthy-a", &[], None)?;
    let healthy_b = start_upstream(&bins, &dir, "healthy-b", &[], None)?;
    let vault = start_upstream(&bins, &dir, "vault", &["--require-bearer", &canary], None)?;
    let flaky = start_upstream(&bins, &dir, "flaky", &[], None)?;
    let bouncer = start_upstream(&bins, &dir, "bouncer", &[], None)?;
    let bouncer_port: u16 = bouncer
        .url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|p| p.parse().ok())
        .context("bouncer's port")?;
    let up = Arc::new(Upstreams {
        healthy_a: healthy_a.url.clone(),
        healthy_b: healthy_b.url.clone(),
        vault: vault.url.clone(),
        flaky: flaky.url.clone(),
        bouncer: bouncer.url.clone(),
        test_server: bins.test_server.clone(),
        stubborn_pid: dir.join("stubborn.pid"),
        marker: marker.clone(),
    });

    // The supervisor.
    let config_path = dir.join("soak.toml");
    std::fs::write(
        &config_path,
        config(&up, &gateway_token, &admin_token, &canary, 0),
    )?;
    let mut command = Command::new(&bins.supervisor);
    command.arg("serve").arg("--config").arg(&config_path);
    let log = dir.join("supervisor.log");
    let mut supervisor = start_announcing(
        command,
        &["gateway listening on", "admin API listening on"],
        &log,
    )?;
    let soak = Arc::new(Soak {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?,
        bins: bins.clone(),
        dir: dir.clone(),
        gateway_url: supervisor.urls[0].clone(),
        admin_url: supervisor.urls[1].clone(),
        gateway_token: gateway_token.clone(),
        admin_token: admin_token.clone(),
        canary: canary.clone(),
        flaky_control: flaky.url.trim_end_matches("/mcp").to_owned(),
        bouncer: Mutex::new(Some(bouncer)),
        bouncer_port,
        supervisor_pid: supervisor.pid(),
        phase: AtomicU8::new(Phase::Baseline as u8),
        next_id: AtomicU64::new(0),
        tally: Mutex::new(Tally::default()),
    });

    // Callers.
    let plans: Vec<(Vec<Call>, bool)> = vec![
        (
            vec![Call::Echo("healthy-a"), Call::Delete("healthy-a")],
            true,
        ),
        (vec![Call::Lookup("healthy-b"), Call::Echo("vault")], true),
        (vec![Call::Delete("flaky"), Call::Lookup("flaky")], false),
        (vec![Call::Delete("flaky"), Call::Echo("flaky")], false),
        (vec![Call::Lookup("flaky"), Call::Delete("flaky")], false),
        (vec![Call::SlowLookup("bouncer")], false),
        (vec![Call::Echo("crasher"), Call::Echo("stubborn")], false),
    ];
    let callers: Vec<_> = plans
        .into_iter()
        .map(|(plan, neighbour)| tokio::spawn(caller(soak.clone(), plan, neighbour)))
        .collect();

    let baseline = Duration::from_secs((seconds / 10).max(10));
    let fault_phase = Duration::from_secs(seconds) - baseline;
    eprintln!("mcp-soak: baseline {} s", baseline.as_secs());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let at_start = footprint(soak.supervisor_pid);
    tokio::time::sleep(baseline - Duration::from_secs(2)).await;

    eprintln!(
        "mcp-soak: faults, hostile input and reloads for {} s",
        fault_phase.as_secs()
    );
    soak.set_phase(Phase::Faults);
    let scheduler = {
        let soak = soak.clone();
        tokio::spawn(async move { faults::schedule(&soak).await })
    };
    let hostile = tokio::spawn(hostile_loop(soak.clone()));
    let reloader = tokio::spawn(reloads(
        soak.clone(),
        config_path.clone(),
        up.clone(),
        (fault_phase / 6).max(Duration::from_secs(10)),
    ));
    tokio::time::sleep(fault_phase / 2).await;
    let at_middle = footprint(soak.supervisor_pid);
    let mid_status = soak.admin_get("/status").await.unwrap_or_default();
    soak.scan(&mid_status);
    tokio::time::sleep(fault_phase - fault_phase / 2).await;

    soak.set_phase(Phase::Done);
    eprintln!("mcp-soak: stopping the load");
    let applied = scheduler.await?;
    let hostile = hostile.await?;
    let reloads = reloader.await?;
    let _ = soak.set_flaky_faults(&json!([])).await;
    for caller in callers {
        caller.await?;
    }
    let at_end = footprint(soak.supervisor_pid);
    let status = soak.admin_get("/status").await.unwrap_or_default();
    let metrics = soak.admin_get("/metrics").await.unwrap_or_default();
    let canary_status = u64::from(status.contains(&canary));
    let canary_metrics = u64::from(metrics.contains(&canary));

    // Exact duplicates: every delete_item id ran at most once, and only ids sent ran.
    let mut duplicates = Vec::new();
    let mut ran_vs_sent = Vec::new();
    for (name, guarded) in [("flaky", &flaky), ("healthy-a", &healthy_a)] {
        let control = guarded.url.trim_end_matches("/mcp");
        let counts: Value = soak
            .http
            .get(format!("{control}/_control/counts"))
            .send()
            .await?
            .json()
            .await?;
        let sent = lock(&soak.tally)
            .sent_ids
            .get(name)
            .cloned()
            .unwrap_or_default();
        let mut ran = 0;
        if let Some(ids) = counts.get("deleted_ids").and_then(Value::as_object) {
            for (id, count) in ids {
                let count = count.as_u64().unwrap_or(0);
                ran += count;
                if count > 1 || !sent.contains(id) {
                    duplicates.push(format!("{name}: id {id} ran {count} time(s)"));
                }
            }
        }
        ran_vs_sent.push(format!("{name}: {ran} ran of {} sent", sent.len()));
    }

    // SIGTERM: the supervisor and every child and grandchild must be gone.
    let children_before = marked_processes(&marker).len();
    let stop_started = Instant::now();
    supervisor.signal(nix::sys::signal::Signal::SIGTERM);
    let exit = tokio::task::block_in_place(|| supervisor.wait_exit(Duration::from_secs(20)));
    let stop_took = stop_started.elapsed();
    let orphans_term = tokio::task::block_in_place(|| survivors(&marker, Duration::from_secs(1)));
    drop(supervisor);

    // Logs: the canary must not be in what the supervisor wrote.
    let mut canary_logs = 0;
    for file in ["supervisor.log", "supervisor.log.stdout"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        canary_logs += text.matches(canary.as_str()).count() as u64;
    }

    // SIGKILL: a second supervisor with stdio children only.
    let kill = tokio::task::block_in_place(|| kill_phase(&bins, &dir, &gateway_token, &run_id));
    let kill = match kill {
        Ok(kill) => kill,
        Err(error) => {
            eprintln!("mcp-soak: kill -9 phase failed: {error:#}");
            KillPhase {
                children: 0,
                orphans: vec![u32::MAX],
                took: Duration::ZERO,
            }
        }
    };

    // The rolling restart: a supervisor of its own.
    let drain = tokio::task::block_in_place(|| drain::drain_phase(&bins, &root, &dir, &run_id));
    let drain = drain.unwrap_or_else(|error| DrainPhase {
        new_client: Err(format!("the phase failed: {error:#}")),
        clients: Vec::new(),
        exit: None,
        took: Duration::ZERO,
        orphans: Vec::new(),
    });

    drop((healthy_a, healthy_b, vault, flaky));
    let _ = soak.bouncer_down(nix::sys::signal::Signal::SIGTERM).await;

    let tally = std::mem::take(&mut *lock(&soak.tally));
    let report = Report {
        seconds,
        baseline,
        machine,
        duration: started.elapsed(),
        tally,
        applied,
        hostile,
        reloads,
        duplicates,
        ran_vs_sent,
        footprints: [at_start, at_middle, at_end],
        children_before,
        exit: exit.map(|s| s.to_string()),
        stop_took,
        orphans_term,
        kill,
        drain,
        canary_logs,
        canary_status,
        canary_metrics,
    };
    let (text, passed) = report.render();
    println!("{text}");
    let out = parent.join("last-run.md");
    std::fs::write(&out, &text)?;
    eprintln!("mcp-soak: report also written to {}", out.display());
    if passed {
        drop(scratch);
    } else {
        let kept = scratch.keep();
        eprintln!("mcp-soak: logs kept in {}", kept.display());
    }
    Ok(passed)
}

struct KillPhase {
    children: usize,
    orphans: Vec<u32>,
    took: Duration,
}

/// Starts a supervisor with two stdio connections (one ignoring SIGTERM,
/// each with a grandchild), gets them running, kills the supervisor with
/// SIGKILL and waits up to 5 s for the guardian to end every child.
fn kill_phase(bins: &Binaries, dir: &Path, token: &str, run_id: &str) -> anyhow::Result<KillPhase> {
    let marker = format!("soak-{run_id}-kill");
    let server = bins.test_server.display();
    let mut text = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nauth = {{ kind = \"bearer\", token = \"{token}\" }}\n\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n"
    );
    for (name, extra) in [("stubborn", "\"--ignore-sigterm\", "), ("plain", "")] {
        let _ = write!(
            text,
            "\n[connections.{name}]\ntransport = \"stdio\"\ncommand = \"{server}\"\n\
             args = [{extra}\"--spawn-grandchild\", \"--pid-file\", \"{}\"]\n\
             env = {{ SOAK_MARKER = \"{marker}\" }}\n",
            dir.join(format!("kill-{name}.pid")).display()
        );
    }
    let path = dir.join("kill.toml");
    std::fs::write(&path, text)?;
    let mut command = Command::new(&bins.supervisor);
    command.arg("serve").arg("--config").arg(&path);
    let supervisor = start_announcing(command, &["gateway listening on"], &dir.join("kill.log"))?;
    let url = supervisor.url.clone();
    let token = token.to_owned();
    // The children start with the first listing or call.
    let called = std::thread::spawn(move || -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let http = reqwest::Client::new();
            let mut mcp = Mcp::connect(&http, &url, &token).await?;
            let _ = mcp.list_tools().await;
            for tool in ["stubborn__echo", "plain__echo"] {
                let reply = mcp.call(tool, json!({"text": "hi"})).await;
                if !matches!(
                    reply.answer,
                    Answer::Value {
                        is_error: false,
                        ..
                    }
                ) {
                    bail!("{tool}: {:?}", reply.answer);
                }
            }
            Ok(())
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the kill-phase client panicked"))?;
    called?;
    let children = marked_processes(&marker).len();
    supervisor.signal(nix::sys::signal::Signal::SIGKILL);
    let killed = Instant::now();
    let orphans = survivors(&marker, Duration::from_secs(5));
    let took = killed.elapsed();
    drop(supervisor);
    // Leave nothing behind whatever the result.
    for pid in &orphans {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    Ok(KillPhase {
        children,
        orphans,
        took,
    })
}

/// Everything the table shows.
struct Report {
    seconds: u64,
    baseline: Duration,
    machine: measure::Machine,
    duration: Duration,
    tally: Tally,
    applied: Vec<(FaultKind, u32)>,
    hostile: BTreeMap<HostileKind, HostileTally>,
    reloads: Vec<(u32, &'static str, String)>,
    duplicates: Vec<String>,
    ran_vs_sent: Vec<String>,
    footprints: [(u64, usize); 3],
    children_before: usize,
    exit: Option<String>,
    stop_took: Duration,
    orphans_term: Vec<u32>,
    kill: KillPhase,
    drain: DrainPhase,
    canary_logs: u64,
    canary_status: u64,
    canary_metrics: u64,
}

impl Report {
    /// The markdown report and whether the run passed.
    fn render(mut self) -> (String, bool) {
        let t = &mut self.tally;
        let non_values: u64 = t.non_values.values().sum();
        let canary =
            t.canary_in_answers + self.canary_logs + self.canary_status + self.canary_metrics;
        let hostile_runs: u64 = self.hostile.values().map(|h| h.runs).sum();
        let hostile_bad: u64 = self.hostile.values().map(|h| h.runs - h.ok).sum();
        let reloads_bad = self
            .reloads
            .iter()
            .filter(|(_, _, outcome)| !(outcome.starts_with('2') || outcome == "sent"))
            .count();
        let pct = |samples: &mut Vec<u64>, p: f64| measure::percentile_ns(samples, p) as f64 / 1e6;
        let (b50, b99) = (
            pct(&mut t.neighbour_baseline_ns, 50.0),
            pct(&mut t.neighbour_baseline_ns, 99.0),
        );
        let (f50, f99) = (
            pct(&mut t.neighbour_faults_ns, 50.0),
            pct(&mut t.neighbour_faults_ns, 99.0),
        );
        let checks = [
            ("non-values", non_values == 0),
            ("late answers", t.late == 0),
            ("duplicates", self.duplicates.is_empty()),
            ("orphans after SIGTERM", self.orphans_term.is_empty()),
            ("orphans after SIGKILL", self.kill.orphans.is_empty()),
            ("abandoned sessions", self.drain.flood_ok()),
            ("SIGTERM with SDK clients mid-call", self.drain.drain_ok()),
            ("canary hits", canary == 0),
            ("hostile probes", hostile_bad == 0),
            ("reloads", reloads_bad == 0),
        ];
        let passed = checks.iter().all(|(_, ok)| *ok);
        let mark = |ok: bool| if ok { "ok" } else { "**FAIL**" };
        let [(r0, f0), (r1, f1), (r2, f2)] = self.footprints;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## Soak: {} s of load ({} s baseline), {:.0} s in all, {}\n\n\
             Machine: {} cores ({}), {:.0} GiB, Linux {}, {}.\n",
            self.seconds,
            self.baseline.as_secs(),
            self.duration.as_secs_f64(),
            measure::utc_now(),
            self.machine.cores,
            self.machine.cpu_model,
            self.machine.mem_total_gib,
            self.machine.kernel,
            self.machine.rustc,
        );
        let _ = writeln!(out, "| measure | result | check |\n|---|---|---|");
        let rows = [
            ("calls", t.calls.to_string(), String::new()),
            (
                "values (results; isError included)",
                format!("{} ({} isError)", t.values, t.tool_errors),
                String::new(),
            ),
            (
                "non-values",
                non_values.to_string(),
                mark(non_values == 0).into(),
            ),
            (
                "answers later than deadline + 1 s (4 s)",
                t.late.to_string(),
                mark(t.late == 0).into(),
            ),
            (
                "duplicated non-idempotent executions (`delete_item`, per id)",
                format!(
                    "{} ({})",
                    self.duplicates.len(),
                    self.ran_vs_sent.join("; ")
                ),
                mark(self.duplicates.is_empty()).into(),
            ),
            (
                "orphans after SIGTERM",
                format!(
                    "{} of {} children and grandchildren (supervisor exited {} in {:.1} s)",
                    self.orphans_term.len(),
                    self.children_before,
                    self.exit.as_deref().unwrap_or("NOT within 20 s"),
                    self.stop_took.as_secs_f64()
                ),
                mark(self.orphans_term.is_empty()).into(),
            ),
            (
                "orphans after SIGKILL (within 5 s)",
                format!(
                    "{} of {} (all gone {:.2} s after the kill)",
                    self.kill.orphans.len(),
                    self.kill.children,
                    self.kill.took.as_secs_f64()
                ),
                mark(self.kill.orphans.is_empty()).into(),
            ),
            (
                "abandoned sessions, then a new client",
                self.drain.flood_row(),
                mark(self.drain.flood_ok()).into(),
            ),
            (
                "SIGTERM with SDK clients mid-call (drain)",
                self.drain.drain_row(),
                mark(self.drain.drain_ok()).into(),
            ),
            (
                "canary hits",
                format!(
                    "{canary} (answers {}, logs {}, /status {}, /metrics {})",
                    t.canary_in_answers, self.canary_logs, self.canary_status, self.canary_metrics
                ),
                mark(canary == 0).into(),
            ),
            (
                "healthy neighbours p50 / p99, baseline",
                format!(
                    "{b50:.2} / {b99:.2} ms ({} calls)",
                    t.neighbour_baseline_ns.len()
                ),
                String::new(),
            ),
            (
                "healthy neighbours p50 / p99, during faults",
                format!(
                    "{f50:.2} / {f99:.2} ms ({} calls)",
                    t.neighbour_faults_ns.len()
                ),
                String::new(),
            ),
            (
                "supervisor RSS start / middle / end",
                format!(
                    "{:.1} / {:.1} / {:.1} MiB",
                    r0 as f64 / 1024.0,
                    r1 as f64 / 1024.0,
                    r2 as f64 / 1024.0
                ),
                String::new(),
            ),
            (
                "supervisor fds start / middle / end",
                format!("{f0} / {f1} / {f2}"),
                String::new(),
            ),
            (
                "reloads (POST /reload, SIGHUP)",
                format!("{} ({} failed)", self.reloads.len(), reloads_bad),
                mark(reloads_bad == 0).into(),
            ),
            (
                "hostile probes",
                format!("{hostile_runs} ({hostile_bad} unexpected)"),
                mark(hostile_bad == 0).into(),
            ),
        ];
        for (measure, result, check) in rows {
            let _ = writeln!(out, "| {measure} | {result} | {check} |");
        }
        let _ = writeln!(
            out,
            "\n### Faults injected (windows of 3 s)\n\n| fault | windows |\n|---|---|"
        );
        for (kind, count) in &self.applied {
            let _ = writeln!(out, "| {} | {count} |", kind.name());
        }
        let _ = writeln!(
            out,
            "\n### Hostile probes\n\n| probe | expected | runs | got |\n|---|---|---|---|"
        );
        for (kind, tally) in &self.hostile {
            let got: Vec<String> = tally.got.iter().map(|(g, n)| format!("{g} ×{n}")).collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                kind.name(),
                kind.expected(),
                tally.runs,
                got.join(", ")
            );
        }
        let _ = writeln!(out, "\n### Reloads\n");
        for (generation, how, outcome) in &self.reloads {
            let _ = writeln!(out, "- generation {generation}: {how} → {outcome}");
        }
        let _ = writeln!(
            out,
            "\n### isError values the callers got (digits masked)\n\n| text | count |\n|---|---|"
        );
        for (text, count) in &t.error_texts {
            let _ = writeln!(out, "| {} | {count} |", text.replace('|', "\\|"));
        }
        if !t.non_values.is_empty() {
            let _ = writeln!(
                out,
                "\n### Non-values\n\n| call: answer | count |\n|---|---|"
            );
            for (what, count) in &t.non_values {
                let _ = writeln!(out, "| {} | {count} |", what.replace('|', "\\|"));
            }
        }
        if !t.late_examples.is_empty() {
            let _ = writeln!(out, "\n### Late answers (first 10)\n");
            for late in &t.late_examples {
                let _ = writeln!(out, "- {late}");
            }
        }
        if !self.duplicates.is_empty() {
            let _ = writeln!(out, "\n### Duplicates (first 10)\n");
            for dup in self.duplicates.iter().take(10) {
                let _ = writeln!(out, "- {dup}");
            }
        }
        let failed: Vec<&str> = checks
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(n, _)| *n)
            .collect();
        let _ = writeln!(
            out,
            "\nResult: {}",
            if passed {
                "PASS".to_owned()
            } else {
                format!("FAIL ({})", failed.join(", "))
            }
        );
        (out, passed)
    }
}
