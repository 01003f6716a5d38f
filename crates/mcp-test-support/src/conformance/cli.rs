//! The `mcp-conformance-server` command line.
//!
//! Like `mcp-test-server`, the binary is one line calling [`run`], so
//! another crate can ship the same wrapper and get a `CARGO_BIN_EXE_…` path.

use std::{io::Write as _, net::SocketAddr};

use anyhow::Context as _;
use clap::Parser;
use rmcp::ServiceExt as _;

use super::{handler::ConformanceServer, http::ConformanceHttpServer};

/// An MCP server with every fixture the official conformance suite
/// (`@modelcontextprotocol/conformance`) expects of a server under test.
///
/// Default: MCP over stdio. With `--http ADDR`: streamable HTTP at
/// `http://ADDR/mcp` (port 0 picks one), announced on stdout as
/// `listening on http://ADDR/mcp`. Logs go to stderr (filter with
/// `MCP_CONFORMANCE_SERVER_LOG`, default `warn`).
#[derive(Debug, Parser)]
#[command(name = "mcp-conformance-server", version)]
pub struct Args {
    /// Serve streamable HTTP on ADDR (e.g. 127.0.0.1:0) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Answer like a 2025-era server: refuse `server/discover`, so clients
    /// open a session with `initialize` (and are asked for sampling,
    /// elicitation and roots with requests, not `input_required`).
    #[arg(long)]
    pub legacy_only: bool,
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
            eprintln!("mcp-conformance-server: {error:#}");
            1
        }
    };
    std::process::exit(code);
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCP_CONFORMANCE_SERVER_LOG")
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
    runtime.block_on(async {
        let server = if args.legacy_only {
            ConformanceServer::legacy_only()
        } else {
            ConformanceServer::new()
        };
        match args.http {
            Some(addr) => serve_http(addr, server).await,
            None => serve_stdio(server).await,
        }
    })
}

async fn serve_http(addr: SocketAddr, handler: ConformanceServer) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Installed before announcing the address, so a SIGTERM sent the
    // moment the line appears is a clean stop.
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let server = ConformanceHttpServer::start(addr, handler).await?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", server.url())?;
    stdout.flush()?;
    drop(stdout);
    tokio::select! {
        _ = term.recv() => {}
        _ = interrupt.recv() => {}
    }
    server.shutdown().await;
    Ok(())
}

/// Serves one client on stdin/stdout until it goes away.
async fn serve_stdio(handler: ConformanceServer) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    match handler.serve((stdin, stdout)).await {
        Ok(running) => {
            let reason = running
                .waiting()
                .await
                .context("stdio server task failed")?;
            tracing::info!(?reason, "stdio session ended");
        }
        // Typically stdin closed before `initialize`.
        Err(error) => tracing::info!(%error, "stdio session never started"),
    }
    Ok(())
}
