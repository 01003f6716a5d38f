//! The measured side of every benchmark: one worker process per round runs one
//! client (supervised or raw rmcp) against an upstream and prints a
//! [`LoopResult`] as one JSON line. A process of its own per round keeps the
//! client's CPU (`getrusage`) and peak RSS (`VmHWM`) clean.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use actix::{Actor, Addr};
use anyhow::{Context, bail};
use mcp_supervisor::{
    CallOutcome,
    config::Config,
    registry::{CallTool, Registry, Shutdown, Status, Warmup},
};
use rmcp::{
    model::{CallToolRequestParams, JsonObject, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde::{Deserialize, Serialize};

use crate::measure::{self, LoopResult};

/// Which client a loop drives.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Client {
    /// rmcp's default client: `StreamableHttpClientTransport::from_uri` (a new
    /// TCP connection per request).
    RawDefault,
    /// The best raw rmcp setup: rmcp over one pooled reqwest client
    /// (`TCP_NODELAY`), on a current-thread runtime.
    RawPooled,
    /// `RawPooled` speaking protocol 2026-07-28: `server/discover`, then
    /// self-contained (stateless) requests, no session.
    RawModern,
    /// `Registry::new(config).start()` + `CallTool`, in an actix system.
    Supervised,
}

/// What a worker does.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum Spec {
    /// `callers` loops calling `tool` for `seconds` (after `warmup_seconds`).
    Loop {
        client: Client,
        url: String,
        tool: String,
        arguments: serde_json::Value,
        callers: usize,
        /// Separate client sessions the callers are spread over (each its
        /// own rmcp client and connection pool); 1 shares one between all.
        #[serde(default = "one")]
        sessions: usize,
        max_concurrent_calls: usize,
        seconds: f64,
        warmup_seconds: f64,
        /// A process whose CPU is sampled around the loop (the gateway).
        observe_pid: Option<u32>,
        /// A credential sent as `Authorization: Bearer …` on every request
        /// (a gateway's shared bearer, or an access token).
        #[serde(default)]
        bearer: Option<String>,
    },
    /// P4: `connections` HTTP connections to `url`, warmed up, called once
    /// each, `call_concurrency` calls at a time.
    Fanout {
        url: String,
        connections: usize,
        call_concurrency: usize,
    },
    /// P6: calls to a connection that is parked (or retired).
    Parked { retired: bool, calls: usize },
    /// P7: `count` stdio connections started (warmup) then shut down.
    Stdio {
        server: PathBuf,
        count: usize,
        dir: PathBuf,
    },
}

/// Entry point of `mcp-bench worker JSON` (a serialized [`Spec`]).
pub(crate) fn run(spec_json: &str) -> anyhow::Result<()> {
    let spec: Spec = serde_json::from_str(spec_json).context("parsing the worker spec")?;
    let result = match spec {
        Spec::Loop {
            client,
            url,
            tool,
            arguments,
            callers,
            sessions,
            max_concurrent_calls,
            seconds,
            warmup_seconds,
            observe_pid,
            bearer,
        } => {
            let plan = Plan {
                tool,
                arguments: arguments.as_object().cloned(),
                callers: callers.max(1),
                sessions: sessions.clamp(1, callers.max(1)),
                measure: Duration::from_secs_f64(seconds),
                warmup: Duration::from_secs_f64(warmup_seconds),
                observe_pid,
            };
            match client {
                Client::Supervised => actix_rt::System::new().block_on(supervised_loop(
                    url,
                    max_concurrent_calls,
                    bearer,
                    plan,
                )),
                Client::RawDefault | Client::RawPooled | Client::RawModern => {
                    current_thread()?.block_on(raw_loop(client, url, bearer, plan))
                }
            }
        }
        Spec::Fanout {
            url,
            connections,
            call_concurrency,
        } => actix_rt::System::new().block_on(fanout(url, connections, call_concurrency)),
        Spec::Parked { retired, calls } => actix_rt::System::new().block_on(parked(retired, calls)),
        Spec::Stdio { server, count, dir } => {
            actix_rt::System::new().block_on(stdio(&server, count, &dir))
        }
    }?;
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

fn current_thread() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn config(toml: &str) -> anyhow::Result<Config> {
    Config::from_toml_str(toml, Path::new("bench.toml"), &|_| None)
        .map_err(|error| anyhow::anyhow!("bench config: {error}"))
}

/// The shape of one loop.
#[derive(Debug, Clone)]
struct Plan {
    tool: String,
    arguments: Option<JsonObject>,
    callers: usize,
    sessions: usize,
    warmup: Duration,
    measure: Duration,
    observe_pid: Option<u32>,
}

/// Runs `call` from `plan.callers` concurrent callers: warmup, then the
/// measured window, then the result. `call` answers whether the call
/// succeeded; it is given the caller's number.
async fn drive<F, Fut>(plan: &Plan, call: F) -> LoopResult
where
    F: Fn(usize) -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = bool>,
{
    // Warmup: same load, not recorded.
    let warm_end = Instant::now() + plan.warmup;
    let warmers = (0..plan.callers).map(|caller| {
        let call = call.clone();
        async move {
            while Instant::now() < warm_end {
                call(caller).await;
            }
        }
    });
    futures::future::join_all(warmers).await;

    let errors = Arc::new(AtomicU64::new(0));
    let observed_before = plan.observe_pid.and_then(measure::other_process_cpu);
    let cpu_before = measure::process_cpu();
    let start = Instant::now();
    let end = start + plan.measure;
    let loops = (0..plan.callers).map(|caller| {
        let call = call.clone();
        let errors = errors.clone();
        async move {
            let mut samples = Vec::with_capacity(16_384);
            loop {
                let began = Instant::now();
                if began >= end {
                    break;
                }
                let ok = call(caller).await;
                if ok {
                    samples.push(began.elapsed().as_nanos() as u64);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            samples
        }
    });
    let per_caller = futures::future::join_all(loops).await;
    let elapsed = start.elapsed();
    let cpu = measure::process_cpu().saturating_sub(cpu_before);
    let observed = match (plan.observe_pid, observed_before) {
        (Some(pid), Some(before)) => {
            measure::other_process_cpu(pid).map(|after| after.saturating_sub(before).as_secs_f64())
        }
        _ => None,
    };
    let samples_ns: Vec<u64> = per_caller.into_iter().flatten().collect();
    LoopResult {
        calls: samples_ns.len() as u64,
        errors: errors.load(Ordering::Relaxed),
        elapsed_s: elapsed.as_secs_f64(),
        cpu_s: cpu.as_secs_f64(),
        samples_ns,
        peak_rss_kib: measure::peak_rss_kib(),
        observed_cpu_s: observed,
        extra: Default::default(),
    }
}

async fn supervised_loop(
    url: String,
    max_concurrent_calls: usize,
    bearer: Option<String>,
    plan: Plan,
) -> anyhow::Result<LoopResult> {
    let auth = bearer.map_or(String::new(), |token| {
        format!(
            "auth = {{ kind = \"bearer\", token = {} }}\n",
            toml_string(&token)
        )
    });
    let config = config(&format!(
        "[connections.up]\ntransport = \"http\"\nurl = \"{url}\"\n\
         max_concurrent_calls = {max_concurrent_calls}\n{auth}"
    ))?;
    let registry = Registry::new(config).start();
    let warm = registry.send(Warmup).await?;
    if let Some((name, Err(unavailable))) = warm.first() {
        bail!("warmup of {name} failed: {}", unavailable.message);
    }
    let call = {
        let registry = registry.clone();
        let tool = plan.tool.clone();
        let arguments = plan.arguments.clone();
        move |_caller| {
            let message = CallTool {
                connection: "up".into(),
                tool: tool.clone(),
                arguments: arguments.clone(),
                timeout: None,
                trace: mcp_supervisor::telemetry::TraceParent::current(),
            };
            let registry = registry.clone();
            async move { matches!(registry.send(message).await, Ok(CallOutcome::Success(_))) }
        }
    };
    let result = drive(&plan, call).await;
    let _ = registry.send(Shutdown).await;
    Ok(result)
}

async fn raw_loop(
    client: Client,
    url: String,
    bearer: Option<String>,
    plan: Plan,
) -> anyhow::Result<LoopResult> {
    let mut sessions = Vec::with_capacity(plan.sessions);
    for _ in 0..plan.sessions {
        sessions.push(raw_session_as(client, &url, bearer.as_deref(), ()).await?);
    }
    let peers: Arc<Vec<_>> = Arc::new(sessions.iter().map(|s| s.peer().clone()).collect());
    let call = {
        let tool = plan.tool.clone();
        let arguments = plan.arguments.clone();
        move |caller: usize| {
            let mut params = CallToolRequestParams::new(tool.clone());
            params.arguments = arguments.clone();
            let peer = peers[caller % peers.len()].clone();
            async move {
                matches!(peer.call_tool(params).await, Ok(result) if result.is_error != Some(true))
            }
        }
    };
    let result = drive(&plan, call).await;
    for session in sessions {
        let _ = session.cancel().await;
    }
    Ok(result)
}

/// One raw rmcp client session to `url`, set up as `client` says.
pub(crate) async fn raw_session(
    client: Client,
    url: &str,
) -> anyhow::Result<rmcp::service::RunningService<rmcp::RoleClient, ()>> {
    raw_session_as(client, url, None, ()).await
}

/// [`raw_session`] presenting `bearer` (`Authorization: Bearer …`) on
/// every request, when given, with `handler` answering what the server
/// sends (its notifications).
pub(crate) async fn raw_session_as<H: rmcp::ClientHandler>(
    client: Client,
    url: &str,
    bearer: Option<&str>,
    handler: H,
) -> anyhow::Result<rmcp::service::RunningService<rmcp::RoleClient, H>> {
    let transport = match (client, bearer) {
        (Client::RawDefault, None) => StreamableHttpClientTransport::from_uri(url.to_owned()),
        (client, bearer) => {
            let http = if client == Client::RawDefault {
                // `from_uri`'s client (private in rmcp) keeps no idle
                // connection: a new one per request, as without a bearer.
                reqwest::Client::builder()
                    .pool_max_idle_per_host(0)
                    .build()?
            } else {
                reqwest::Client::builder()
                    .tcp_nodelay(true)
                    .pool_idle_timeout(Duration::from_secs(60))
                    .build()?
            };
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
            if let Some(token) = bearer {
                config = config.auth_header(token);
            }
            StreamableHttpClientTransport::with_client(http, config)
        }
    };
    let lifecycle = match client {
        Client::RawModern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        _ => ClientLifecycleMode::Initialize,
    };
    handler
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .with_context(|| format!("rmcp client ({client:?}) to {url}"))
}

/// P4: one config, `connections` HTTP connections to the same upstream;
/// warmed up (connect + list), then each called once, `call_concurrency` at a time.
async fn fanout(
    url: String,
    connections: usize,
    call_concurrency: usize,
) -> anyhow::Result<LoopResult> {
    use futures::StreamExt;
    let mut toml = String::new();
    for n in 0..connections {
        toml.push_str(&format!(
            "[connections.c{n}]\ntransport = \"http\"\nurl = \"{url}\"\n"
        ));
    }
    let config = config(&toml)?;
    let cpu_before = measure::process_cpu();
    let start = Instant::now();
    let registry = Registry::new(config).start();
    let warm = registry.send(Warmup).await?;
    let warmed = start.elapsed();
    let connected = warm.iter().filter(|(_, result)| result.is_ok()).count();
    let rss_warm = measure::status_field("/proc/self/status", "VmRSS:").unwrap_or(0);
    let calls = (0..connections).map(|n| {
        registry.send(CallTool {
            connection: format!("c{n}"),
            tool: "echo".into(),
            arguments: echo_arguments(),
            timeout: None,
            trace: mcp_supervisor::telemetry::TraceParent::current(),
        })
    });
    let outcomes: Vec<_> = futures::stream::iter(calls)
        .buffer_unordered(call_concurrency.max(1))
        .collect()
        .await;
    let elapsed = start.elapsed();
    let cpu = measure::process_cpu().saturating_sub(cpu_before);
    let ok = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Ok(CallOutcome::Success(_))))
        .count();
    let rss_now = measure::status_field("/proc/self/status", "VmRSS:").unwrap_or(0);
    let result = LoopResult::scenario(
        ok,
        connections,
        elapsed,
        cpu,
        Vec::new(),
        [
            ("warmup_s", warmed.as_secs_f64()),
            ("connected", connected as f64),
            ("rss_after_kib", rss_now as f64),
            ("rss_after_warmup_kib", rss_warm as f64),
        ],
    );
    let _ = registry.send(Shutdown).await;
    Ok(result)
}

fn echo_arguments() -> Option<JsonObject> {
    serde_json::json!({"text": "hello"}).as_object().cloned()
}

/// P6: an upstream that accepts TCP connections and drops them at once (the
/// request fails like a dead server), counting every connection attempt. After
/// the connection parks (or retires), calls are timed and the count must not move.
async fn parked(retired: bool, calls: usize) -> anyhow::Result<LoopResult> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let attempts = Arc::new(AtomicU64::new(0));
    {
        let attempts = attempts.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                attempts.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
    }
    let retire_after = if retired { 1 } else { 3 };
    let config = config(&format!(
        "[supervisor]\nconnect_timeout = \"1s\"\nmax_attempts = 1\n\
         [supervisor.quarantine]\nbase_cooldown = \"1h\"\nmax_cooldown = \"1h\"\n\
         retire_after = {retire_after}\n\n\
         [connections.down]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    ))?;
    let registry = Registry::new(config).start();
    let warm = registry.send(Warmup).await?;
    if warm.iter().any(|(_, result)| result.is_ok()) {
        bail!("the dead upstream answered");
    }
    let status = registry.send(Status).await?;
    let state = status.first().map_or("?", |s| s.state.as_str());
    let wanted = if retired { "retired" } else { "parked" };
    if state != wanted {
        bail!("expected the connection {wanted}, it is {state}");
    }
    let call = || CallTool {
        connection: "down".into(),
        tool: "echo".into(),
        arguments: echo_arguments(),
        timeout: None,
        trace: mcp_supervisor::telemetry::TraceParent::current(),
    };
    // Warm the path (allocator, mailboxes), not measured.
    for _ in 0..1_000 {
        let _ = registry.send(call()).await;
    }
    let attempts_before = attempts.load(Ordering::SeqCst);
    let io_before = proc_io();
    let cpu_before = measure::process_cpu();
    let mut samples = Vec::with_capacity(calls);
    let mut wrong = 0usize;
    let start = Instant::now();
    for _ in 0..calls {
        let began = Instant::now();
        let outcome = registry.send(call()).await;
        samples.push(began.elapsed().as_nanos() as u64);
        if !matches!(outcome, Ok(CallOutcome::Unavailable { .. })) {
            wrong += 1;
        }
    }
    let elapsed = start.elapsed();
    let cpu = measure::process_cpu().saturating_sub(cpu_before);
    let io_after = proc_io();
    // Give a stray connection attempt time to show up before counting.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let attempts_after = attempts.load(Ordering::SeqCst);
    let _ = registry.send(Shutdown).await;
    let mut extra: std::collections::BTreeMap<String, f64> = [
        (
            "socket_attempts_during".to_owned(),
            (attempts_after - attempts_before) as f64,
        ),
        ("socket_attempts_before".to_owned(), attempts_before as f64),
    ]
    .into_iter()
    .collect();
    for (key, before) in &io_before {
        if let Some(after) = io_after.get(key) {
            extra.insert(format!("io_{key}_during"), after - before);
        }
    }
    let total = samples.len();
    Ok(LoopResult::scenario(
        total - wrong,
        total,
        elapsed,
        cpu,
        samples,
        extra,
    ))
}

/// `/proc/self/io` counters (read/write syscalls and bytes).
fn proc_io() -> std::collections::BTreeMap<String, f64> {
    std::fs::read_to_string("/proc/self/io")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            Some((key.trim().to_owned(), value.trim().parse().ok()?))
        })
        .filter(|(key, _)| matches!(key.as_str(), "syscr" | "syscw"))
        .collect()
}

/// P7: `count` stdio connections to `server`, each writing its pid into
/// `dir`; warmed up, then shut down. Reports the total time and what is
/// left running.
async fn stdio(server: &Path, count: usize, dir: &Path) -> anyhow::Result<LoopResult> {
    let mut toml = String::from("[supervisor]\nshutdown_timeout = \"10s\"\n\n");
    for n in 0..count {
        let pid_file = dir.join(format!("s{n}.pid"));
        toml.push_str(&format!(
            "[connections.s{n}]\ntransport = \"stdio\"\ncommand = {}\nargs = [\"--pid-file\", {}]\n",
            toml_string(&server.display().to_string()),
            toml_string(&pid_file.display().to_string()),
        ));
    }
    let config = config(&toml)?;
    let cpu_before = measure::process_cpu();
    let start = Instant::now();
    let registry: Addr<Registry> = Registry::new(config).start();
    let warm = registry.send(Warmup).await?;
    let started = start.elapsed();
    let connected = warm.iter().filter(|(_, result)| result.is_ok()).count();
    // The guardian is one process for all stdio children, not a server.
    let children_running = measure::live_children(std::process::id())
        .into_iter()
        .filter(|pid| !measure::is_guardian(*pid))
        .count();
    registry.send(Shutdown).await?;
    let elapsed = start.elapsed();
    let cpu = measure::process_cpu().saturating_sub(cpu_before);
    let pids = read_pids(dir, count);
    let alive = pids
        .iter()
        .filter(|pid| matches!(measure::proc_state(**pid), Some((state, _)) if state != 'Z'))
        .count();
    let zombies = pids
        .iter()
        .filter(|pid| matches!(measure::proc_state(**pid), Some(('Z', _))))
        .count();
    let children_left = measure::live_children(std::process::id()).len();
    Ok(LoopResult::scenario(
        connected,
        count,
        elapsed,
        cpu,
        Vec::new(),
        [
            ("startup_s", started.as_secs_f64()),
            ("shutdown_s", (elapsed - started).as_secs_f64()),
            ("children_running", children_running as f64),
            ("pids_written", pids.len() as f64),
            ("alive_after_shutdown", alive as f64),
            ("zombies_after_shutdown", zombies as f64),
            ("children_left", children_left as f64),
        ],
    ))
}

/// The pids the stdio children wrote.
pub(crate) fn read_pids(dir: &Path, count: usize) -> Vec<u32> {
    (0..count)
        .filter_map(|n| {
            std::fs::read_to_string(dir.join(format!("s{n}.pid")))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
        .collect()
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn one() -> usize {
    1
}
