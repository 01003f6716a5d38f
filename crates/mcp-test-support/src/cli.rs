//! The `mcp-test-server` command line.
//!
//! The binary is one line calling [`run`], so another crate that needs the
//! server as a child process in its own tests can ship the same one-line
//! `src/bin/` wrapper and get a `CARGO_BIN_EXE_…` path for it.

use std::{
    io::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use clap::Parser;

use crate::{
    http::{OAuthProtection, TestServer, TestServerOptions},
    oauth::AuthServer,
    otlp::OtlpReceiver,
    server::{ServerBehavior, ServerControl, Speaks},
    stdio::{StdioOptions, serve_stdio},
};

/// An MCP test server with predictable tools and injectable misbehavior.
///
/// Default: MCP over stdio. With `--http ADDR`: MCP over streamable HTTP at
/// `http://ADDR/mcp` with the fault layer and the `/_control/*` endpoints.
/// With `--otlp ADDR`: no MCP server, an OTLP collector that prints the
/// spans it receives.
/// SIGUSR1 / SIGUSR2 list / hide `late_tool` (with `tools/list_changed`).
/// Logs go to stderr (filter with `MCP_TEST_SERVER_LOG`, default `warn`).
#[derive(Debug, Parser)]
#[command(name = "mcp-test-server", version)]
pub struct Args {
    /// Delay every tools/call by this many milliseconds.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub delay_ms: u64,
    /// Calls to this tool never return.
    #[arg(long, value_name = "NAME")]
    pub hang_tool: Option<String>,
    /// Exit with code 3 right after answering N requests (stdio only;
    /// `initialize` counts).
    #[arg(long, value_name = "N")]
    pub exit_after: Option<u64>,
    /// Exit with code 3 in the middle of a call to this tool.
    #[arg(long, value_name = "NAME")]
    pub exit_on_tool: Option<String>,
    /// Write a non-JSON line instead of answering calls to this tool (stdio only).
    #[arg(long, value_name = "NAME")]
    pub garbage_on_tool: Option<String>,
    /// Keep running after stdin closes (sleep until killed).
    #[arg(long)]
    pub ignore_stdin_close: bool,
    /// Install a SIGTERM handler that ignores the signal.
    #[arg(long)]
    pub ignore_sigterm: bool,
    /// Append one line per received request (`method` or `tools/call:NAME`,
    /// then ` traceparent=VALUE` when the call's `_meta` carried one).
    #[arg(long, value_name = "PATH")]
    pub count_file: Option<PathBuf>,
    /// Write this process's pid here at start.
    #[arg(long, value_name = "PATH")]
    pub pid_file: Option<PathBuf>,
    /// Start a `sleep 1000` child and write its pid to `<pid-file>.child`.
    #[arg(long)]
    pub spawn_grandchild: bool,
    /// Serve streamable HTTP on ADDR (e.g. 127.0.0.1:0) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// HTTP mode: require `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "TOKEN")]
    pub require_bearer: Option<String>,
    /// HTTP mode: protected by OAuth, with an authorization server of its
    /// own on another port (`oauth::AuthServer`: registration, PKCE,
    /// approves every authorization at once); its URL is printed after the
    /// server's.
    #[arg(long)]
    pub oauth: bool,
    /// HTTP mode: leave Nagle's algorithm on (no TCP_NODELAY).
    #[arg(long)]
    pub no_nodelay: bool,
    /// Do not declare `tools.listChanged` (a server that never announces
    /// tool changes).
    #[arg(long)]
    pub no_list_changed: bool,
    /// List N more tools after the fixed ones: `extra_000`, `extra_001`, …
    /// with varied descriptions ("Reads the quarterly ledger for region
    /// 7", …; a quarter mention a ledger), each echoing its `text`.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub extra_tools: usize,
    /// Answer like a 2025-era server: refuse `server/discover`, so clients
    /// open a session with `initialize`.
    #[arg(long, conflicts_with = "modern_only")]
    pub legacy_only: bool,
    /// Answer like a server that speaks only protocol 2026-07-28:
    /// `initialize` is an unknown method.
    #[arg(long)]
    pub modern_only: bool,
    /// HTTP mode: instead of the test server, a 2026-07-28 server whose
    /// tools ask the client with requests on the call's stream (the older
    /// pattern); see `mcp_test_support::asking`.
    #[arg(long, requires = "http")]
    pub asks_by_request: bool,
    /// Instead of an MCP server, an OTLP collector (`otlp::OtlpReceiver`):
    /// OTLP/HTTP on ADDR, OTLP/gRPC on the next port (both free ports when
    /// the port is 0). Prints both endpoints, then one line per received
    /// span: `trace_id span_id parent_span_id kind name` (parent `-` for a
    /// root span).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "http")]
    pub otlp: Option<SocketAddr>,
    /// Read at start a JSON object of tool name → merge patch, and list each
    /// tool with its patch applied (`ServerControl::redefine`): a server
    /// that comes back after a restart with changed definitions. A missing
    /// file patches nothing.
    #[arg(long, value_name = "PATH")]
    pub redefine_file: Option<PathBuf>,
}

impl Args {
    fn speaks(&self) -> Speaks {
        match (self.legacy_only, self.modern_only) {
            (true, _) => Speaks::Legacy,
            (_, true) => Speaks::Modern,
            _ => Speaks::Both,
        }
    }
}

/// Parses the command line, runs the server and exits the process.
///
/// Exits rather than returns: tokio's blocking stdin reader could otherwise
/// keep the runtime (and the process) alive after the session ended.
pub fn run() -> ! {
    let args = Args::parse();
    init_logging();
    let code = match run_with(args) {
        Ok(()) => 0,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("mcp-test-server: {error:#}");
            1
        }
    };
    std::process::exit(code);
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCP_TEST_SERVER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

fn run_with(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<()> {
    if args.ignore_sigterm {
        ignore_sigterm()?;
    }
    if args.spawn_grandchild {
        spawn_grandchild(args.pid_file.as_deref())?;
    }
    let behavior = ServerBehavior {
        delay: Duration::from_millis(args.delay_ms),
        hang_tool: args.hang_tool.clone(),
        exit_on_tool: args.exit_on_tool.clone(),
        no_list_changed: args.no_list_changed,
        extra_tools: args.extra_tools,
    };
    if let Some(addr) = args.otlp {
        return serve_otlp(addr, &args).await;
    }
    if let Some(addr) = args.http {
        return serve_http(addr, behavior, &args).await;
    }
    let control = match &args.count_file {
        Some(path) => ServerControl::with_count_file(behavior, path)
            .with_context(|| format!("opening count file {}", path.display()))?,
        None => ServerControl::new(behavior),
    };
    control.set_speaks(args.speaks());
    redefine(&control, &args)?;
    let options = StdioOptions {
        exit_after: args.exit_after,
        garbage_on_tool: args.garbage_on_tool.clone(),
        count_requests: args.count_file.is_some(),
    };
    late_tool_on_signals(control.clone())?;
    write_pid_file(&args)?;
    serve_stdio(control, options).await?;
    if args.ignore_stdin_close {
        tracing::info!("stdin closed; staying alive as configured");
        std::future::pending::<()>().await;
    }
    Ok(())
}

async fn serve_http(addr: SocketAddr, behavior: ServerBehavior, args: &Args) -> anyhow::Result<()> {
    if args.asks_by_request {
        let (url, _served) = crate::asking::serve(addr).await?;
        let shutdown = shutdown_signal(args.ignore_sigterm)?;
        write_pid_file(args)?;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(format!("listening on {url}\n").as_bytes())?;
        stdout.flush()?;
        drop(stdout);
        shutdown.await?;
        return Ok(());
    }
    let options = TestServerOptions {
        nodelay: !args.no_nodelay,
        require_bearer: args.require_bearer.clone(),
        behavior,
        count_file: args.count_file.clone(),
        speaks: args.speaks(),
        oauth: None,
    };
    let auth = if args.oauth {
        Some(Arc::new(AuthServer::start().await?))
    } else {
        None
    };
    let options = TestServerOptions {
        oauth: auth.clone().map(|server| OAuthProtection {
            server,
            tool_scopes: Vec::new(),
        }),
        ..options
    };
    let server = TestServer::start_on(addr, options).await?;
    redefine(server.control(), args)?;
    late_tool_on_signals(server.control().clone())?;
    let shutdown = shutdown_signal(args.ignore_sigterm)?;
    write_pid_file(args)?;
    let mut stdout = std::io::stdout().lock();
    // One write: a reader that takes the first line and closes the pipe
    // must not make the second fail.
    let mut banner = format!("listening on {}\n", server.url());
    if let Some(auth) = &auth {
        banner.push_str(&format!("authorization server on {}\n", auth.issuer()));
    }
    stdout.write_all(banner.as_bytes())?;
    stdout.flush()?;
    drop(stdout);
    shutdown.await?;
    server.shutdown().await;
    Ok(())
}

/// `--redefine-file`: each tool listed with its patch.
fn redefine(control: &ServerControl, args: &Args) -> anyhow::Result<()> {
    let Some(path) = &args.redefine_file else {
        return Ok(());
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let patches: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text)
        .with_context(|| format!("{}: expected a JSON object of tool → patch", path.display()))?;
    for (tool, patch) in patches {
        control.redefine(&tool, Some(patch));
    }
    Ok(())
}

/// `--otlp`: the collector, printing every span it receives until killed.
async fn serve_otlp(http: SocketAddr, args: &Args) -> anyhow::Result<()> {
    let grpc = match http.port() {
        0 => http,
        port => {
            let next = port
                .checked_add(1)
                .context("--otlp: no port after 65535 for gRPC")?;
            SocketAddr::new(http.ip(), next)
        }
    };
    let receiver = OtlpReceiver::start_on(http, grpc)
        .await
        .with_context(|| format!("binding the OTLP receiver on {http} and {grpc}"))?;
    let shutdown = shutdown_signal(args.ignore_sigterm)?;
    write_pid_file(args)?;
    // One write, as for `--http`.
    let banner = format!(
        "otlp http on {}\notlp grpc on {}\n",
        receiver.http_endpoint(),
        receiver.grpc_endpoint()
    );
    print_flushed(&banner)?;
    let print_spans = async {
        let mut seen = 0;
        loop {
            let spans = receiver.spans_after(seen).await;
            seen += spans.len();
            let lines: String = spans
                .iter()
                .map(|span| {
                    let parent = if span.is_root() {
                        "-"
                    } else {
                        &span.parent_span_id
                    };
                    format!(
                        "{} {} {parent} {} {}\n",
                        span.trace_id, span.span_id, span.kind, span.name
                    )
                })
                .collect();
            print_flushed(&lines)?;
        }
    };
    tokio::select! {
        done = shutdown => done,
        printed = print_spans => printed,
    }
}

/// Writes `text` to stdout and flushes it, for a reader on a pipe.
fn print_flushed(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Written once every signal handler is installed and the grandchild is
/// started, so a test that waits for the pid file sees a ready process.
fn write_pid_file(args: &Args) -> anyhow::Result<()> {
    if let Some(path) = &args.pid_file {
        write_atomically(path, &std::process::id().to_string())
            .with_context(|| format!("writing pid file {}", path.display()))?;
    }
    Ok(())
}

/// Resolves on Ctrl-C, or on SIGTERM unless it is ignored. The handlers
/// are installed before this returns.
fn shutdown_signal(
    ignore_sigterm: bool,
) -> anyhow::Result<impl std::future::Future<Output = anyhow::Result<()>>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv(), if !ignore_sigterm => {}
        }
        Ok(())
    })
}

/// SIGUSR1 lists `late_tool`, SIGUSR2 hides it; either change is announced
/// with `notifications/tools/list_changed`. This is how a test flips the
/// tool list of a stdio child it has no other channel to.
fn late_tool_on_signals(control: ServerControl) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut enable = signal(SignalKind::user_defined1()).context("installing a SIGUSR1 handler")?;
    let mut disable =
        signal(SignalKind::user_defined2()).context("installing a SIGUSR2 handler")?;
    tokio::spawn(async move {
        loop {
            let enabled = tokio::select! {
                Some(()) = enable.recv() => true,
                Some(()) = disable.recv() => false,
                else => break,
            };
            tracing::info!(enabled, "late_tool switched by signal");
            control.set_late_tool(enabled).await;
        }
    });
    Ok(())
}

/// Replaces SIGTERM's default action (exit) with a handler that only logs.
fn ignore_sigterm() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    tokio::spawn(async move {
        while term.recv().await.is_some() {
            tracing::warn!("ignoring SIGTERM as configured");
        }
    });
    Ok(())
}

/// Starts `sleep 1000` (inheriting our process group) so a test can check
/// that group cleanup also reaches grandchildren.
fn spawn_grandchild(pid_file: Option<&Path>) -> anyhow::Result<()> {
    let child = std::process::Command::new("sleep")
        .arg("1000")
        // Not our stdout: the MCP channel must close when we die.
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("spawning the grandchild")?;
    let pid = child.id();
    // Dropping a std `Child` neither kills nor waits for it.
    drop(child);
    match pid_file {
        Some(path) => {
            let mut child_path = path.as_os_str().to_owned();
            child_path.push(".child");
            write_atomically(Path::new(&child_path), &pid.to_string())
                .with_context(|| format!("writing {}", Path::new(&child_path).display()))?;
        }
        None => tracing::info!(pid, "spawned grandchild"),
    }
    Ok(())
}

/// Writes via a temporary file and a rename, so a test polling for the file
/// never reads it half-written.
fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}
