//! The admin API's HTTP server (axum): routes, handlers, graceful shutdown.
//!
//! Handlers only talk to the registry by message, so the server must run on
//! the actix system's runtime (the `serve` command runs it inside
//! `actix_rt::System`, and so do the tests).

use std::{io, time::Duration};

use actix::{Addr, MailboxError};
use axum::{
    Json, Router,
    extract::{Path, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{
    metrics::{METRICS_CONTENT_TYPE, metrics_text},
    reload::{ReloadError, Reloader, report_json},
    status::status_json,
};
use crate::{
    listener::without_nagle,
    registry::{ConnectionStatus, Registry, Reset, Status, UnknownConnection},
};

/// `/readyz` is ready only if the registry answers a status request this fast.
pub const READY_TIMEOUT: Duration = Duration::from_secs(1);

/// Bound on the status snapshot behind `/status` and `/metrics`: a scrape
/// answers 503 rather than hang if the registry is stuck.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5);

/// What every handler needs.
#[derive(Clone, Debug)]
struct AdminState {
    registry: Addr<Registry>,
    reloader: Reloader,
    /// Cancelled when the process starts shutting down: `/readyz` turns 503
    /// and the server stops accepting.
    shutdown: CancellationToken,
}

/// Serves the admin API on `listener` until `shutdown` is cancelled, then
/// finishes the requests in progress and returns.
pub async fn serve_admin(
    listener: TcpListener,
    registry: Addr<Registry>,
    reloader: Reloader,
    shutdown: CancellationToken,
) -> io::Result<()> {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "admin API listening");
    }
    let app = router(registry, reloader, shutdown.clone());
    axum::serve(without_nagle(listener), app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

/// The admin routes (SPEC §10). Unknown paths answer 404, known paths with
/// the wrong method 405.
pub fn router(registry: Addr<Registry>, reloader: Reloader, shutdown: CancellationToken) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/connections/{name}/reset", post(reset))
        .route("/reload", post(reload))
        .fallback(not_found)
        .with_state(AdminState {
            registry,
            reloader,
            shutdown,
        })
}

/// The process is up and serving HTTP.
async fn healthz() -> &'static str {
    "ok"
}

/// The registry answers and the process is not shutting down.
async fn readyz(State(state): State<AdminState>) -> Response {
    if state.shutdown.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    match tokio::time::timeout(READY_TIMEOUT, state.registry.send(Status)).await {
        Ok(Ok(_)) => "ready".into_response(),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response(),
    }
}

async fn status(State(state): State<AdminState>) -> Response {
    match snapshot(&state.registry).await {
        Ok(connections) => Json(status_json(&connections)).into_response(),
        Err(unavailable) => unavailable,
    }
}

async fn metrics(State(state): State<AdminState>) -> Response {
    match snapshot(&state.registry).await {
        Ok(connections) => (
            [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
            metrics_text(&connections),
        )
            .into_response(),
        Err(unavailable) => unavailable,
    }
}

async fn reset(State(state): State<AdminState>, Path(name): Path<String>) -> Response {
    let answer = state.registry.send(Reset {
        connection: name.clone(),
    });
    match answer.await {
        Ok(Ok(())) => Json(json!({ "reset": name })).into_response(),
        Ok(Err(unknown @ UnknownConnection(_))) => error(StatusCode::NOT_FOUND, &unknown),
        Err(stopped) => registry_gone(stopped),
    }
}

async fn reload(State(state): State<AdminState>) -> Response {
    match state.reloader.reload().await {
        Ok(report) => Json(report_json(&report)).into_response(),
        // ConfigError's Display never holds a secret value.
        Err(ReloadError::Config(invalid)) => error(StatusCode::UNPROCESSABLE_ENTITY, &invalid),
        Err(other) => error(StatusCode::SERVICE_UNAVAILABLE, &other),
    }
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, &"not found")
}

/// The registry's status, bounded by [`SNAPSHOT_TIMEOUT`].
async fn snapshot(registry: &Addr<Registry>) -> Result<Vec<ConnectionStatus>, Response> {
    match tokio::time::timeout(SNAPSHOT_TIMEOUT, registry.send(Status)).await {
        Ok(Ok(connections)) => Ok(connections),
        Ok(Err(stopped)) => Err(registry_gone(stopped)),
        Err(_) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            &"the supervisor did not answer in time",
        )),
    }
}

fn registry_gone(_: MailboxError) -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        &"the supervisor is shutting down",
    )
}

/// `{"error":"…"}` with `status`.
fn error(status: StatusCode, message: &dyn std::fmt::Display) -> Response {
    (status, Json(json!({ "error": message.to_string() }))).into_response()
}
