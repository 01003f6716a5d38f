//! `mcp-supervisor serve`: the long-lived process. One MCP gateway (streamable
//! HTTP, or stdio with `--stdio`) in front of every upstream, the admin API,
//! SIGHUP reloads and bounded SIGTERM/SIGINT shutdowns.

use std::{
    io::IsTerminal,
    path::{Path, PathBuf},
};

use actix::Actor;
use mcp_supervisor::{
    admin::{AdminLinks, ConfigSource, Reloader, serve_admin_linked},
    config::Config,
    gateway::{GatewayShutdown, GatewayState, serve_http, serve_stdio},
    registry::{CurrentConfig, OnFleetReload, Registry, Shutdown, Subscribe},
};
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
};
use tokio_util::sync::CancellationToken;

use crate::exit::Exit;

/// The config `serve` runs when given none: one connection to the bundled
/// demo server, so a fresh machine needs nothing but this workspace.
pub(crate) const EMBEDDED_DEFAULT: &str = include_str!("../../../../config/default.toml");
const EMBEDDED_NAME: &str = "<embedded config/default.toml>";

pub(crate) fn run(config: Option<PathBuf>, stdio: bool) -> Result<(), Exit> {
    let (source, config) = load(config)?;
    actix_rt::System::new().block_on(serve(source, config, stdio))
}

fn load(path: Option<PathBuf>) -> Result<(ConfigSource, Config), Exit> {
    let usage = |error: mcp_supervisor::config::ConfigError| Exit::Usage(error.to_string());
    match path {
        Some(path) => {
            let config = Config::from_file(&path).map_err(usage)?;
            super::oneshot::lock_readable(&path, &config)?;
            Ok((ConfigSource::File(path), config))
        }
        None => {
            let config =
                Config::from_toml_str(EMBEDDED_DEFAULT, Path::new(EMBEDDED_NAME), &|name| {
                    std::env::var(name).ok()
                })
                .map_err(usage)?;
            let source = ConfigSource::Embedded {
                name: EMBEDDED_NAME,
                text: EMBEDDED_DEFAULT,
            };
            Ok((source, config))
        }
    }
}

async fn bind(what: &str, address: std::net::SocketAddr) -> Result<TcpListener, Exit> {
    TcpListener::bind(address).await.map_err(|error| {
        Exit::Failed(format!(
            "cannot listen for the {what} on {address}: {error}"
        ))
    })
}

async fn serve(source: ConfigSource, config: Config, stdio: bool) -> Result<(), Exit> {
    // Handlers first: from the moment a port answers, SIGTERM/SIGINT must mean
    // a graceful shutdown and SIGHUP a reload, never the default action
    // (termination without stopping the children).
    let signal_error =
        |error: std::io::Error| Exit::Failed(format!("cannot watch signals: {error}"));
    let mut hangup = signal(SignalKind::hangup()).map_err(signal_error)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let shutdown = CancellationToken::new();
    let draining = CancellationToken::new();
    let admin = bind("admin API", config.admin.listen).await?;
    let gateway = if stdio {
        None
    } else {
        Some(bind("gateway", config.gateway.listen).await?)
    };

    // Where the gateway's HTTP server runs (docs/ARCHITECTURE.md,
    // "Threads"; docs/DECISIONS.md #76). The actors and the upstream sessions
    // run on this thread, where what an upstream sends is handled in the
    // order it arrives (a request's progress before its answer). On a
    // machine of two cores or fewer the HTTP server runs here too: every
    // hand-off between threads cost more than the second thread gained. With
    // more cores it gets one `network` thread of its own (#72). Large
    // requests are parsed, copied and encoded on blocking threads either way.
    let network = if std::thread::available_parallelism().map_or(true, |cores| cores.get() <= 2) {
        None
    } else {
        Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("network")
                .enable_all()
                .build()
                .map_err(|error| {
                    Exit::Failed(format!("cannot start the network thread: {error}"))
                })?,
        )
    };
    // `[telemetry]`: spans and metrics over OTLP from a thread of their own
    // (docs/OBSERVABILITY.md). Nothing connects yet: a collector that is
    // not there only costs the exports that fail.
    let telemetry = match &config.telemetry {
        Some(settings) => {
            let installed = mcp_supervisor::telemetry::install(settings)
                .map_err(|error| Exit::Failed(format!("cannot start telemetry: {error}")))?;
            tracing::info!(
                endpoint = %settings.endpoint,
                protocol = settings.protocol.as_str(),
                sample_ratio = settings.sample_ratio.get(),
                "telemetry: exporting spans and metrics over OTLP"
            );
            Some(installed)
        }
        None => None,
    };
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let registry = Registry::new(config.clone()).start();
    let state = GatewayState::start(&registry, &config)
        .await
        .map_err(|error| Exit::Failed(format!("cannot open the audit log: {error}")))?;
    if telemetry.is_some() {
        let lifecycle = mcp_supervisor::telemetry::LifecycleSpans.start();
        let _ = registry.send(Subscribe(lifecycle.recipient())).await;
    }
    let config_file = match &source {
        ConfigSource::File(path) => Some(path.clone()),
        ConfigSource::Embedded { .. } => None,
    };
    let reloader = Reloader::new(source, registry.clone());
    // Another node of the fleet reloaded: re-read our own file too.
    let (fleet_reload_tx, mut fleet_reloads) = tokio::sync::mpsc::unbounded_channel();
    let _ = registry.send(OnFleetReload(fleet_reload_tx)).await;

    // Where to find us. Under --stdio, stdout is the MCP channel: use stderr.
    let admin_url = format!("http://{}", local(&admin));
    let mut announce =
        format!("admin API listening on {admin_url} (dashboard at /, GET /status, /metrics)\n");
    let gateway_stop = GatewayShutdown::new();
    let links = AdminLinks {
        draining: draining.clone(),
        gateway: gateway.is_some().then(|| gateway_stop.tallies()),
        logins: Default::default(),
    };
    // With `[admin] auth` a browser needs a login link: one to start with,
    // printed only to a person at a terminal (stdout is the log under
    // systemd or Kubernetes, and a link in a log is a key anyone reading
    // it can use); `mcp-supervisor dashboard` mints more.
    if config.admin.auth.is_some() {
        let terminal = if stdio {
            std::io::stderr().is_terminal()
        } else {
            std::io::stdout().is_terminal()
        };
        let token = terminal.then(|| links.logins.mint());
        announce = format!(
            "{}{announce}",
            login_line(&admin_url, token.as_deref(), config_file.as_deref())
        );
    }
    let admin_task = actix_rt::spawn(serve_admin_linked(
        admin,
        registry.clone(),
        reloader.clone(),
        config.admin.clone(),
        shutdown.clone(),
        links,
    ));

    let (stdio_done_tx, mut stdio_done) = tokio::sync::oneshot::channel::<()>();
    let mut gateway_task = None;
    match gateway {
        Some(listener) => {
            announce = format!(
                "gateway listening on http://{}{} (expose = {})\n{announce}",
                local(&listener),
                config.gateway.path,
                mcp_supervisor::config::Choice::as_str(config.gateway.expose)
            );
            let settings = config.gateway.clone();
            let fleet = config.fleet.clone();
            let stop = gateway_stop.clone();
            // Registered again with the reactor of the runtime it runs on.
            let listener = listener.into_std().map_err(|error| {
                Exit::Failed(format!("cannot hand the gateway's socket over: {error}"))
            })?;
            let task = async move {
                let listener = match TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(error) => {
                        tracing::error!(%error, "gateway stopped");
                        return;
                    }
                };
                if let Err(error) =
                    serve_http(listener, state, &settings, fleet.as_ref(), stop).await
                {
                    tracing::error!(%error, "gateway stopped");
                }
            };
            gateway_task = Some(match &network {
                Some(network) => network.spawn(task),
                None => actix_rt::spawn(task),
            });
            print!("{announce}");
        }
        None => {
            eprint!("gateway serving MCP on stdin/stdout\n{announce}");
            actix_rt::spawn(async move {
                if let Err(error) = serve_stdio(state).await {
                    tracing::warn!(%error, "stdio gateway ended");
                }
                let _ = stdio_done_tx.send(());
            });
        }
    }
    tracing::info!(connections = config.connections.len(), "supervisor running");

    // Waits for signals in a task of its own: this future is polled each
    // time any actor's task is woken (actix runs them in a `LocalSet`
    // under it), and polling the signal streams each time cost a call
    // more than two thousand instructions (docs/DECISIONS.md #137).
    let signals = actix_rt::spawn(async move {
        loop {
            tokio::select! {
                _ = hangup.recv() => {
                    tracing::info!("SIGHUP: reloading the config");
                    // The reloader logs the outcome; an invalid file keeps the old config.
                    let _ = reloader.reload().await;
                }
                Some(()) = fleet_reloads.recv() => {
                    let _ = reloader.reload_as_asked().await;
                }
                _ = terminate.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
                _ = interrupt.recv() => { tracing::info!("SIGINT: shutting down"); break; }
                _ = &mut stdio_done => { tracing::info!("stdio client closed: shutting down"); break; }
            }
        }
    });
    let _ = signals.await;
    // Drain: `/readyz` turns 503 so a load balancer sends new clients
    // elsewhere; the sessions the gateway has are served (a client's
    // follow-up to an answer included) while new ones are refused, until
    // nothing is in progress and nothing has come for DRAIN_GRACE, within
    // shutdown_timeout. What is still running then is answered by the
    // registry's shutdown ("shutting down"), and those answers are sent
    // before the sessions end (docs/ARCHITECTURE.md, "Shutdown").
    let signalled = tokio::time::Instant::now();
    draining.cancel();
    gateway_stop.start_draining();
    let patience = match registry.send(CurrentConfig).await {
        Ok(current) => current.supervisor.shutdown_timeout,
        Err(_) => config.supervisor.shutdown_timeout,
    };
    if gateway_task.is_some() && !gateway_stop.drained(patience, DRAIN_GRACE).await {
        tracing::info!(
            in_progress = gateway_stop.in_progress(),
            "requests still in progress after shutdown_timeout; answering them"
        );
    }
    gateway_stop.stop_accepting();
    let _ = registry.send(Shutdown).await;
    if let Some(task) = gateway_task {
        gateway_stop
            .drained(ANSWER_FLUSH, std::time::Duration::ZERO)
            .await;
        gateway_stop.end_sessions();
        let _ = tokio::time::timeout(ANSWER_FLUSH, task).await;
    }
    shutdown.cancel();
    let _ = tokio::time::timeout(ANSWER_FLUSH, admin_task).await;
    // Whatever is left there (nothing, normally) is dropped without waiting.
    if let Some(network) = network {
        network.shutdown_background();
    }
    // The last spans (those of the answers given at shutdown included) go
    // out within what is left of shutdown_timeout, and never less than the
    // answers' own allowance.
    if let Some(telemetry) = telemetry {
        let left = (signalled + patience).saturating_duration_since(tokio::time::Instant::now());
        telemetry.shutdown(left.max(ANSWER_FLUSH)).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// How long the answers given at shutdown may take to reach their clients,
/// and the connections to close.
const ANSWER_FLUSH: std::time::Duration = std::time::Duration::from_secs(1);

/// While draining, how long after the last request the gateway waits for
/// another before it stops: a client's follow-up to an answer (the Python
/// SDK lists tools after a call, to check its result) comes within
/// milliseconds.
const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

fn local(listener: &TcpListener) -> String {
    listener
        .local_addr()
        .map(|address| address.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// What `serve` says of the dashboard's login: a one-time link when `token`
/// was minted (a terminal), else how to get one.
fn login_line(admin_url: &str, token: Option<&str>, config: Option<&std::path::Path>) -> String {
    match token {
        Some(token) => {
            format!("dashboard login (single use, 5 min): {admin_url}/login?token={token}\n")
        }
        None => {
            let config =
                config.map_or_else(|| "FILE".to_owned(), |path| path.display().to_string());
            format!(
                "dashboard login: run `mcp-supervisor dashboard --config {config}` for a one-time link\n"
            )
        }
    }
}

#[cfg(test)]
mod login_tests {
    use super::*;

    #[test]
    fn a_login_link_is_printed_only_when_one_was_minted_for_a_terminal() {
        let url = "http://127.0.0.1:7301";
        assert_eq!(
            login_line(url, Some("tok"), None),
            "dashboard login (single use, 5 min): http://127.0.0.1:7301/login?token=tok\n"
        );
        let told = login_line(url, None, Some(std::path::Path::new("/etc/mcp.toml")));
        assert_eq!(
            told,
            "dashboard login: run `mcp-supervisor dashboard --config /etc/mcp.toml` for a one-time link\n"
        );
        assert!(!told.contains("token"));
    }
}
