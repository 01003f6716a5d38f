//! The admin API's HTTP server (axum): routes, handlers, protection,
//! graceful shutdown.
//!
//! Handlers only talk to the registry by message, so the server must run on
//! the actix system's runtime (the `serve` command runs it inside
//! `actix_rt::System`, and so do the tests).
//!
//! # Protection (docs/DECISIONS.md #62)
//!
//! The API changes state (`POST /reload`, `POST /connections/{name}/reset`)
//! and listens on loopback, where any web page the user visits can reach it.
//! Every request must name an allowed `Host` (DNS rebinding) and, when a
//! browser sends an `Origin`, an allowed host's origin (403 otherwise); a
//! POST must be `Content-Type: application/json` (415 otherwise), which a page
//! cannot send to another site without a CORS preflight we never approve.
//! With `[admin] auth`, every route but the probes `/healthz` and `/readyz`
//! needs the bearer token (401 with a `Bearer` challenge otherwise): the
//! probes say only whether the process is up and ready, and probe clients
//! (orchestrators, `curl` in a health check) often cannot send a token.
//! Connections are limited like the gateway's (`listener.rs`).

use std::{io, sync::Arc, time::Duration};

use actix::{Addr, MailboxError};
use axum::{
    Json, Router,
    extract::{FromRef, Path, Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{
    dashboard::{self, Dashboard, Let, LoginLinks, Route},
    metrics::{METRICS_CONTENT_TYPE, metrics_text},
    reload::{ConfigSource, ReloadError, Reloader, report_json},
    status::status_json,
};
use crate::{
    config::{AdminSettings, BearerToken},
    contracts::ApproveError,
    contracts::ItemKind,
    fleet::FleetView,
    listener::{
        self, Port, Server,
        guard::{AllowedHosts, bearer_matches, is_json, unauthorized},
    },
    registry::{
        ApproveContracts, ConnectionStatus, FleetOverview, Registry, Reset, Status,
        UnknownConnection,
    },
    tallies::Tallies,
};

/// `/readyz` is ready only if the registry answers a status request this fast.
pub const READY_TIMEOUT: Duration = Duration::from_secs(1);

/// Bound on the status snapshot behind `/status` and `/metrics`: a scrape
/// answers 503 rather than hang if the registry is stuck.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5);

/// What a connection over `admin.max_connections` is answered (with 503).
const BUSY_BODY: &str =
    r#"{"error":"too many connections to the admin API (admin.max_connections); retry later"}"#;

/// Routes that answer without the admin token: liveness and readiness probes.
const PROBES: [&str; 2] = ["/healthz", "/readyz"];

/// What every handler needs.
#[derive(Clone, Debug)]
struct AdminState {
    registry: Addr<Registry>,
    reloader: Reloader,
    /// Cancelled when the process starts shutting down: `/readyz` turns 503
    /// and the server stops accepting.
    shutdown: CancellationToken,
    links: AdminLinks,
    dashboard: Arc<Dashboard>,
}

impl FromRef<AdminState> for Arc<Dashboard> {
    fn from_ref(state: &AdminState) -> Self {
        state.dashboard.clone()
    }
}

/// What the admin API is told by the rest of the process besides its
/// settings (`serve` links it to its gateway; tests and the library need
/// none of it).
#[derive(Clone, Debug, Default)]
pub struct AdminLinks {
    /// Cancelled when the process starts to drain for shutdown: from then on
    /// `/readyz` answers 503, so a load balancer sends new clients
    /// elsewhere, while the rest of the API keeps answering.
    pub draining: CancellationToken,
    /// The gateway's evictions and refusals, shown in `/metrics`.
    pub gateway: Option<Arc<Tallies>>,
    /// The dashboard's one-time login links (`serve` mints the first one it
    /// prints here).
    pub logins: Arc<LoginLinks>,
}

/// Who may use the API: see the module documentation.
#[derive(Debug)]
struct Protection {
    hosts: AllowedHosts,
    token: Option<BearerToken>,
    dashboard: Arc<Dashboard>,
}

/// Serves the admin API on `listener` with the default `[admin]` settings
/// (loopback hosts, no token); see [`serve_admin_with`].
pub async fn serve_admin(
    listener: TcpListener,
    registry: Addr<Registry>,
    reloader: Reloader,
    shutdown: CancellationToken,
) -> io::Result<()> {
    serve_admin_with(
        listener,
        registry,
        reloader,
        AdminSettings::default(),
        shutdown,
    )
    .await
}

/// Serves the admin API on `listener` under `settings` (its `listen` is not
/// used: the listener is already bound) until `shutdown` is cancelled, then
/// finishes the requests in progress and returns.
pub async fn serve_admin_with(
    listener: TcpListener,
    registry: Addr<Registry>,
    reloader: Reloader,
    settings: AdminSettings,
    shutdown: CancellationToken,
) -> io::Result<()> {
    serve_admin_linked(
        listener,
        registry,
        reloader,
        settings,
        shutdown,
        AdminLinks::default(),
    )
    .await
}

/// [`serve_admin_with`], linked to the rest of the process (see
/// [`AdminLinks`]).
pub async fn serve_admin_linked(
    listener: TcpListener,
    registry: Addr<Registry>,
    reloader: Reloader,
    settings: AdminSettings,
    shutdown: CancellationToken,
    links: AdminLinks,
) -> io::Result<()> {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, auth = settings.auth.is_some(), "admin API listening");
    }
    let app = router_linked(registry, reloader, &settings, shutdown.clone(), links);
    let server = Server {
        port: Port::Admin,
        header_timeout: settings.header_timeout,
        idle_timeout: settings.idle_timeout,
        max_connections: settings.max_connections,
        busy_body: BUSY_BODY,
        // The admin API does not drain: it answers until it stops.
        draining: CancellationToken::new(),
        tallies: Arc::default(),
    };
    listener::serve(listener, listener::App::routes(app), server, shutdown).await
}

/// The admin routes with the default `[admin]` settings; see [`router_with`].
pub fn router(registry: Addr<Registry>, reloader: Reloader, shutdown: CancellationToken) -> Router {
    router_with(registry, reloader, &AdminSettings::default(), shutdown)
}

/// The admin routes (docs/SUPERVISION.md, "Admin API") behind `settings`' protection. Unknown paths
/// answer 404, known paths with the wrong method 405.
pub fn router_with(
    registry: Addr<Registry>,
    reloader: Reloader,
    settings: &AdminSettings,
    shutdown: CancellationToken,
) -> Router {
    router_linked(
        registry,
        reloader,
        settings,
        shutdown,
        AdminLinks::default(),
    )
}

fn router_linked(
    registry: Addr<Registry>,
    reloader: Reloader,
    settings: &AdminSettings,
    shutdown: CancellationToken,
    links: AdminLinks,
) -> Router {
    let config = match reloader.source() {
        ConfigSource::File(path) => Some(path.display().to_string()),
        ConfigSource::Embedded { .. } => None,
    };
    let dashboard = Arc::new(Dashboard::new(
        registry.clone(),
        links.logins.clone(),
        settings.auth.is_some(),
        config,
        // Each live page holds an admin connection: leave most for the API.
        settings.max_connections / 4,
        shutdown.clone(),
    ));
    let protection = Arc::new(Protection {
        hosts: AllowedHosts::new(&settings.allowed_hosts),
        token: settings.auth.clone(),
        dashboard: dashboard.clone(),
    });
    let json_only = || middleware::from_fn(json_only);
    Router::new()
        .merge(dashboard::routes())
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route(
            "/connections/{name}/reset",
            post(reset).route_layer(json_only()),
        )
        .route(
            "/connections/{name}/approve",
            post(approve_all).route_layer(json_only()),
        )
        .route(
            "/connections/{name}/{kind}/{item}/approve",
            post(approve_item).route_layer(json_only()),
        )
        .route("/contracts", get(contracts))
        .route("/reload", post(reload).route_layer(json_only()))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(protection, protect))
        .layer(middleware::from_fn(dashboard::headers))
        .with_state(AdminState {
            registry,
            reloader,
            shutdown,
            links,
            dashboard,
        })
}

/// `Host`, `Origin`, the token (or a dashboard session), before any route.
async fn protect(
    State(protection): State<Arc<Protection>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Err(refused) = protection.hosts.check(request.uri(), request.headers()) {
        tracing::debug!(reason = %refused, "admin API request refused");
        return error(refused.status(), &refused);
    }
    let route = Route::of(request.method(), request.uri().path());
    let bearer = protection
        .token
        .as_ref()
        .is_some_and(|token| bearer_matches(request.headers(), token));
    if protection.token.is_some()
        && !bearer
        && route == Route::Api
        && !PROBES.contains(&request.uri().path())
    {
        return unauthorized(Json(json!({
            "error": "missing or invalid bearer token (see [admin] auth)"
        })));
    }
    match protection.dashboard.admit(route, &request, bearer) {
        Let::In(csrf) => {
            request.extensions_mut().insert(csrf);
            next.run(request).await
        }
        Let::Out(refused) => {
            tracing::debug!(status = %refused.status(), "dashboard request refused");
            refused
        }
    }
}

/// State changes only as `application/json`.
pub(super) async fn json_only(request: Request, next: Next) -> Response {
    if !is_json(request.headers()) {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &"state-changing requests must be sent with Content-Type: application/json",
        );
    }
    next.run(request).await
}

/// The process is up and serving HTTP.
async fn healthz() -> &'static str {
    "ok"
}

/// The registry answers and the process is not shutting down (nor
/// draining for it).
async fn readyz(State(state): State<AdminState>) -> Response {
    if state.shutdown.is_cancelled() || state.links.draining.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    match tokio::time::timeout(READY_TIMEOUT, state.registry.send(Status)).await {
        Ok(Ok(_)) => "ready".into_response(),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response(),
    }
}

async fn status(State(state): State<AdminState>) -> Response {
    match snapshot(&state.registry).await {
        Ok(connections) => {
            let fleet = fleet(&state.registry).await;
            Json(status_json(&connections, fleet.as_ref())).into_response()
        }
        Err(unavailable) => unavailable,
    }
}

async fn metrics(State(state): State<AdminState>) -> Response {
    match snapshot(&state.registry).await {
        Ok(connections) => {
            let fleet = fleet(&state.registry).await;
            (
                [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
                metrics_text(&connections, state.links.gateway.as_deref(), fleet.as_ref()),
            )
                .into_response()
        }
        Err(unavailable) => unavailable,
    }
}

/// The fleet as this node sees it (none when alone, or when it does not
/// answer within [`SNAPSHOT_TIMEOUT`]).
async fn fleet(registry: &Addr<Registry>) -> Option<FleetView> {
    tokio::time::timeout(SNAPSHOT_TIMEOUT, registry.send(FleetOverview))
        .await
        .ok()?
        .ok()?
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

/// Approves every item the connection lists now. A hash is refused: it
/// names one item, and approving everything else with it unseen is what a
/// hash is there to prevent.
async fn approve_all(
    State(state): State<AdminState>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    match approve_body(&body) {
        Ok(ApproveBody { sha256: None }) => approve(&state, name, None, None).await,
        Ok(ApproveBody { sha256: Some(_) }) => error(
            StatusCode::BAD_REQUEST,
            &"a sha256 names one item: approve it at \
              /connections/NAME/{tools|prompts|resource_templates}/ITEM/approve",
        ),
        Err(refusal) => refusal,
    }
}

/// The body of an approval: `{}`, or `{"sha256": "…"}`, the hash the
/// person reviewed (the approval fails if the item is listed otherwise now).
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    sha256: Option<String>,
}

/// Reads an approval's body; no body is `{}`, as for reset.
fn approve_body(body: &[u8]) -> Result<ApproveBody, Response> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ApproveBody::default());
    }
    serde_json::from_slice::<ApproveBody>(body).map_err(|_| {
        error(
            StatusCode::BAD_REQUEST,
            &"expected {} or {\"sha256\": \"the reviewed hash\"}",
        )
    })
}

/// Approves one tool, prompt or resource template.
async fn approve_item(
    State(state): State<AdminState>,
    Path((name, kind, item)): Path<(String, String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Some(kind) = ItemKind::of_segment(&kind) else {
        return not_found().await;
    };
    match approve_body(&body) {
        Ok(body) => approve(&state, name, Some((kind, item)), body.sha256).await,
        Err(refusal) => refusal,
    }
}

/// Approves a connection's current contracts (docs/CONTRACTS.md).
async fn approve(
    state: &AdminState,
    connection: String,
    item: Option<(ItemKind, String)>,
    sha256: Option<String>,
) -> Response {
    let answer = state.registry.send(ApproveContracts {
        connection: connection.clone(),
        item,
        sha256,
    });
    match answer.await {
        Ok(Ok(approved)) => {
            Json(json!({ "connection": connection, "approved": approved })).into_response()
        }
        Ok(Err(ApproveError::Lock(problem))) => error(StatusCode::INTERNAL_SERVER_ERROR, &problem),
        Ok(Err(changed @ ApproveError::ChangedSince { .. })) => {
            error(StatusCode::CONFLICT, &changed)
        }
        Ok(Err(refused)) => error(StatusCode::NOT_FOUND, &refused),
        Err(stopped) => registry_gone(stopped),
    }
}

/// Every connection's judged contracts, with both forms of each item that
/// differs from its approved contract.
async fn contracts(State(state): State<AdminState>) -> Response {
    let connections = match snapshot(&state.registry).await {
        Ok(connections) => connections,
        Err(response) => return response,
    };
    let connections: Vec<serde_json::Value> = connections
        .iter()
        .map(|status| {
            json!({
                "name": status.name,
                "contracts": status.contracts.as_deref().map(|judged| super::status::contracts_json(judged, true)),
            })
        })
        .collect();
    Json(json!({ "connections": connections })).into_response()
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
pub(super) fn error(status: StatusCode, message: &dyn std::fmt::Display) -> Response {
    (status, Json(json!({ "error": message.to_string() }))).into_response()
}
