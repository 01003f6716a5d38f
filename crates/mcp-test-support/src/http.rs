//! The in-process streamable-HTTP test server and its fault layer.
//!
//! Requests flow `TCP accept → hyper → axum → fault layer → rmcp
//! StreamableHttpService`. The fault layer sees every request first: it
//! parses the JSON-RPC body (method, id, tool name), counts it, checks the
//! bearer token, then either answers with an injected fault or forwards it.
//!
//! The accept loop is ours rather than `axum::serve` so that stopping the
//! server really drops every open connection (pooled keep-alive sockets,
//! SSE streams, hanging requests) the way a crashed upstream would; with
//! `axum::serve` accepted connections outlive the server task.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::accept::{Protocols, Serving, accept_loop};
use anyhow::Context as _;
use axum::{
    Json, Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{any, get, post},
};
use bytes::Bytes;
use futures::StreamExt as _;
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::{SessionManager, local::LocalSessionManager},
};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{
    counters::Counts,
    fault::{Fault, FaultHandle, FaultRule, RequestInfo, RetryAfter},
    seen_trace::SeenTrace,
    server::{ServerBehavior, ServerControl, Speaks, TestMcpServer},
};

/// Path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// Largest request body the fault layer reads (rmcp's own default).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How long a `DropConnection` fault lets the forwarded request run before
/// cutting the connection anyway.
const DROP_CONNECTION_DRAIN: Duration = Duration::from_secs(60);

/// How long a restart keeps retrying to bind the old address.
const REBIND_PATIENCE: Duration = Duration::from_secs(5);

/// Options of a [`TestServer`].
#[derive(Debug, Clone)]
pub struct TestServerOptions {
    /// Set `TCP_NODELAY` on accepted sockets (default `true`). `false`
    /// leaves Nagle's algorithm on, to reproduce the Nagle + delayed-ACK
    /// stall of servers that forget it.
    pub nodelay: bool,
    /// When set, `/mcp` requires `Authorization: Bearer <token>` and answers
    /// `401` with `WWW-Authenticate: Bearer` otherwise.
    pub require_bearer: Option<String>,
    /// Tool-handler behavior (delay, hanging tool, …).
    pub behavior: ServerBehavior,
    /// Also append one line per received request to this file.
    pub count_file: Option<PathBuf>,
    /// Which protocol generations the server answers.
    pub speaks: Speaks,
    /// When set, `/mcp` is an OAuth-protected resource: it takes the access
    /// tokens of this authorization server ([`crate::oauth`]) and publishes
    /// its protected-resource metadata (RFC 9728).
    pub oauth: Option<OAuthProtection>,
}

/// How an OAuth-protected test server checks its callers.
#[derive(Debug, Clone)]
pub struct OAuthProtection {
    pub server: Arc<crate::oauth::AuthServer>,
    /// Scopes `tools/call` of a tool needs, beyond a valid token:
    /// `(tool, scope)`. Without one: 403 `insufficient_scope` naming it.
    pub tool_scopes: Vec<(String, String)>,
}

/// Where a protected test server publishes its resource metadata.
pub const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

impl TestServerOptions {
    /// The defaults, as a 2025-era server: for tests of what a session
    /// (`initialize`, `Mcp-Session-Id`, an expired session's 404, the
    /// standalone GET stream) does.
    pub fn legacy() -> Self {
        TestServerOptions {
            speaks: Speaks::Legacy,
            ..Self::default()
        }
    }
}

impl Default for TestServerOptions {
    fn default() -> Self {
        Self {
            nodelay: true,
            require_bearer: None,
            behavior: ServerBehavior::default(),
            count_file: None,
            speaks: Speaks::Both,
            oauth: None,
        }
    }
}

/// An MCP server on loopback HTTP with runtime fault injection.
///
/// Dropping it stops it (the serve task and all its connections are
/// aborted). Counters, the fault script and the `late_tool` switch survive
/// [`stop`](Self::stop) / [`restart_on_same_port`](Self::restart_on_same_port);
/// MCP sessions do not, as with a real server restart.
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    control: ServerControl,
    options: TestServerOptions,
    /// Connection-level counts, over restarts.
    tallies: Arc<HttpTallies>,
    /// `None` while stopped.
    running: Option<Running>,
}

/// A serving instance: the accept task owns the listener and every
/// connection task, so aborting it closes them all.
#[derive(Debug)]
struct Running {
    accept: tokio::task::JoinHandle<()>,
    shutdown: CancellationToken,
}

impl Running {
    fn abort(&self) {
        self.shutdown.cancel();
        self.accept.abort();
    }
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0` (a free port).
    pub async fn start(options: TestServerOptions) -> anyhow::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), options).await
    }

    /// Starts a server on `addr` (port 0 picks a free port).
    pub async fn start_on(addr: SocketAddr, options: TestServerOptions) -> anyhow::Result<Self> {
        let control = match &options.count_file {
            Some(path) => ServerControl::with_count_file(options.behavior.clone(), path)
                .with_context(|| format!("opening count file {}", path.display()))?,
            None => ServerControl::new(options.behavior.clone()),
        };
        control.set_speaks(options.speaks);
        let listener = bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let addr = listener.local_addr()?;
        let tallies = Arc::<HttpTallies>::default();
        let running = serve(listener, control.clone(), &options, tallies.clone());
        tracing::debug!(%addr, "test MCP server listening");
        Ok(Self {
            addr,
            control,
            options,
            tallies,
            running: Some(running),
        })
    }

    /// TCP connections accepted so far (over restarts): how a test tells
    /// connection reuse from a connection per request.
    pub fn connections_accepted(&self) -> u64 {
        self.tallies.accepted.load(Ordering::Relaxed)
    }

    /// `GET` requests to the MCP endpoint (standalone or resumed SSE streams)
    /// so far, over restarts.
    pub fn stream_gets(&self) -> u64 {
        self.tallies.stream_gets.load(Ordering::Relaxed)
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// The bound address (kept across restarts).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The fault script.
    pub fn faults(&self) -> &FaultHandle {
        self.control.faults()
    }

    /// Counters and switches, as a cloneable handle.
    pub fn control(&self) -> &ServerControl {
        &self.control
    }

    /// POSTs received with this JSON-RPC method, faulted ones included.
    pub fn requests(&self, method: &str) -> u64 {
        self.control.requests(method)
    }

    /// `tools/call` POSTs received for this tool, faulted ones included.
    pub fn tool_calls(&self, tool: &str) -> u64 {
        self.control.tool_calls(tool)
    }

    /// Calls of this tool whose body ran to the end.
    pub fn completed_calls(&self, tool: &str) -> u64 {
        self.control.completed_calls(tool)
    }

    /// The trace context (`_meta.traceparent`, `traceparent` header) of
    /// every `tools/call` that reached the tool handler, in arrival order.
    pub fn seen_traces(&self) -> Vec<SeenTrace> {
        self.control.seen_traces()
    }

    /// The last calls' arguments as sent
    /// ([`ServerControl::seen_arguments`](crate::ServerControl::seen_arguments)).
    pub fn seen_arguments(&self) -> Vec<String> {
        self.control.seen_arguments()
    }

    /// Most tool calls executing at once since the last reset.
    pub fn in_flight_peak(&self) -> usize {
        self.control.in_flight_peak()
    }

    /// Starts a new peak measurement.
    pub fn reset_peak(&self) {
        self.control.reset_peak();
    }

    /// A copy of every counter.
    pub fn counts(&self) -> Counts {
        self.control.counts()
    }

    /// Lists or hides `late_tool`, notifying connected clients on a change.
    pub async fn set_late_tool(&self, enabled: bool) {
        self.control.set_late_tool(enabled).await;
    }

    /// Whether the server is accepting connections.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Stops serving: the port is closed and every open connection and MCP
    /// session is dropped. Returns once the listener is gone.
    pub async fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.abort();
            let _ = running.accept.await;
        }
    }

    /// Stops (if running) and serves again on the same address with fresh
    /// MCP sessions, keeping counters and faults. Old session ids get `404`.
    pub async fn restart_on_same_port(&mut self) -> anyhow::Result<()> {
        self.stop().await;
        let deadline = Instant::now() + REBIND_PATIENCE;
        let listener = loop {
            match bind(self.addr).await {
                Ok(listener) => break listener,
                Err(error)
                    if error.kind() == std::io::ErrorKind::AddrInUse
                        && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => {
                    return Err(error).with_context(|| format!("rebinding {}", self.addr));
                }
            }
        };
        self.running = Some(serve(
            listener,
            self.control.clone(),
            &self.options,
            self.tallies.clone(),
        ));
        Ok(())
    }

    /// Stops the server and waits until its port is closed.
    pub async fn shutdown(mut self) {
        self.stop().await;
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(running) = &self.running {
            running.abort();
        }
    }
}

/// Binds with `SO_REUSEADDR` so a restart can take the port back at once.
async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Counts below the JSON-RPC level, shared by every serving instance.
#[derive(Debug, Default)]
struct HttpTallies {
    /// TCP connections accepted.
    accepted: AtomicU64,
    /// `GET` requests to the MCP endpoint.
    stream_gets: AtomicU64,
}

/// Shared by every request of one serving instance.
#[derive(Clone)]
struct AppState {
    control: ServerControl,
    mcp: StreamableHttpService<TestMcpServer, LocalSessionManager>,
    /// Kept to expire sessions on demand.
    sessions: Arc<LocalSessionManager>,
    bearer: Option<Arc<str>>,
    oauth: Option<OAuthProtection>,
    /// `http://ADDR`, for the resource metadata and its link.
    base: Arc<str>,
    tallies: Arc<HttpTallies>,
}

fn serve(
    listener: TcpListener,
    control: ServerControl,
    options: &TestServerOptions,
    tallies: Arc<HttpTallies>,
) -> Running {
    let shutdown = CancellationToken::new();
    let sessions = Arc::new(LocalSessionManager::default());
    let mcp = StreamableHttpService::new(
        {
            let control = control.clone();
            move || Ok(TestMcpServer::new(control.clone()))
        },
        sessions.clone(),
        StreamableHttpServerConfig::default()
            // A test server is reached as 127.0.0.1, localhost or whatever a
            // test binds; DNS-rebinding protection is the gateway's job.
            .disable_allowed_hosts()
            .with_cancellation_token(shutdown.child_token()),
    );
    // A bound listener always knows its address.
    let base: Arc<str> = match listener.local_addr() {
        Ok(addr) => format!("http://{addr}").into(),
        Err(_) => "http://127.0.0.1".into(),
    };
    let state = AppState {
        control,
        mcp,
        sessions,
        bearer: options.require_bearer.as_deref().map(Arc::from),
        oauth: options.oauth.clone(),
        base,
        tallies: tallies.clone(),
    };
    let router = router(state);
    let serving = Serving {
        protocols: Protocols::Http1,
        nodelay: options.nodelay,
        name: "test server",
    };
    let accept = tokio::spawn(accept_loop(
        listener,
        router,
        serving,
        move || {
            tallies.accepted.fetch_add(1, Ordering::Relaxed);
        },
        shutdown.clone(),
    ));
    Running { accept, shutdown }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route(MCP_PATH, any(mcp_endpoint))
        .route("/_control/faults", get(get_faults).post(set_faults))
        .route("/_control/counts", get(get_counts))
        .route("/_control/late_tool", post(set_late_tool))
        .route("/_control/redefine", post(redefine))
        .route("/_control/reset_peak", post(reset_peak))
        .route(RESOURCE_METADATA_PATH, get(resource_metadata))
        .route(
            "/.well-known/oauth-protected-resource",
            get(resource_metadata),
        )
        .with_state(state)
}

/// The `params.arguments` of a JSON-RPC request, as the body holds them.
fn raw_arguments(body: &[u8]) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        arguments: Option<&'a serde_json::value::RawValue>,
    }
    let message: Message<'_> = serde_json::from_slice(body).ok()?;
    Some(message.params?.arguments?.get())
}

/// The fault layer in front of rmcp.
async fn mcp_endpoint(State(state): State<AppState>, request: Request) -> Response {
    let values: Vec<String> = request
        .headers()
        .get_all(axum::http::header::AUTHORIZATION)
        .iter()
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        .collect();
    for value in &values {
        state.control.saw_authorization(value);
    }
    // Two at once are seen as such too (a request sent with two
    // credentials: `a, b`).
    if values.len() > 1 {
        state.control.saw_authorization(&values.join(", "));
    }
    if request.method() != Method::POST {
        // SSE GET / session DELETE: never faulted, only authenticated.
        if request.method() == Method::GET {
            state.tallies.stream_gets.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(denied) = state.check_bearer(request.headers(), None) {
            return denied;
        }
        return state.forward(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(_) => return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response(),
    };
    let info = RequestInfo::parse(&body);
    if info.method.as_deref() == Some("tools/call")
        && let Some(arguments) = raw_arguments(&body)
    {
        state.control.saw_arguments(arguments);
    }
    if let Some(method) = &info.method {
        state.control.counters().record_request(
            method,
            info.tool.as_deref(),
            info.traceparent.as_deref(),
        );
    }
    if let Some(denied) = state.check_bearer(&parts.headers, info.tool.as_deref()) {
        return denied;
    }
    let session_id = parts
        .headers
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let request = Request::from_parts(parts, Body::from(body));
    let Some(fault) = state.control.faults().take(&info) else {
        return state.forward(request).await;
    };
    tracing::debug!(?fault, method = ?info.method, tool = ?info.tool, "injecting fault");
    match fault {
        Fault::Status {
            status,
            retry_after,
            jsonrpc_body,
            www_authenticate,
        } => status_response(
            status,
            retry_after,
            jsonrpc_body,
            www_authenticate.as_deref(),
            info.id,
        ),
        Fault::Delay(delay) => {
            tokio::time::sleep(delay).await;
            state.forward(request).await
        }
        Fault::Hang => std::future::pending().await,
        Fault::DropConnection => {
            // Let the request run to completion first, so a tool call has
            // really executed when the client loses the answer.
            let response = state.forward(request).await;
            let drained = axum::body::to_bytes(response.into_body(), usize::MAX);
            let _ = tokio::time::timeout(DROP_CONNECTION_DRAIN, drained).await;
            truncated_response()
        }
        Fault::ExpireSession => {
            if let Some(id) = session_id
                && let Err(error) = state.sessions.close_session(&id.into()).await
            {
                tracing::debug!(%error, "closing the expired session failed");
            }
            (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
        }
        Fault::Garbage => (
            [(header::CONTENT_TYPE, "application/json")],
            "<html>this is not JSON-RPC</html>",
        )
            .into_response(),
        Fault::StatusAfterRun(status) => {
            let response = state.forward(request).await;
            let drained = axum::body::to_bytes(response.into_body(), usize::MAX);
            let _ = tokio::time::timeout(DROP_CONNECTION_DRAIN, drained).await;
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            (status, "failed after the request ran").into_response()
        }
    }
}

impl AppState {
    async fn forward(&self, request: Request) -> Response {
        self.mcp.handle(request).await.map(Body::new)
    }

    /// `Some(401)` when a bearer token is required and not presented, or a
    /// revoked one is ([`ServerControl::revoke`]); `Some(429)` for a limited
    /// one ([`ServerControl::limit`]); with
    /// OAuth, `Some(403)` when the token lacks the scope `tool` needs.
    fn check_bearer(&self, headers: &HeaderMap, tool: Option<&str>) -> Option<Response> {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if let Some(oauth) = &self.oauth {
            return self.check_oauth(oauth, presented, tool);
        }
        if let Some(429) = presented.and_then(|token| self.control.refusal_of(token)) {
            return Some(
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, "7")],
                    "Too Many Requests",
                )
                    .into_response(),
            );
        }
        let revoked = presented.is_some_and(|token| self.control.refusal_of(token).is_some());
        let token = match self.bearer.as_deref() {
            Some(token) => token,
            None if !revoked => return None,
            None => "",
        };
        if presented == Some(token) && !revoked {
            return None;
        }
        Some(
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "Unauthorized",
            )
                .into_response(),
        )
    }
}

impl AppState {
    fn check_oauth(
        &self,
        oauth: &OAuthProtection,
        presented: Option<&str>,
        tool: Option<&str>,
    ) -> Option<Response> {
        use crate::oauth::Refusal;
        let needed = tool.and_then(|tool| {
            oauth
                .tool_scopes
                .iter()
                .find(|(name, _)| name == tool)
                .map(|(_, scope)| scope.as_str())
        });
        let metadata = format!("{}{RESOURCE_METADATA_PATH}", self.base);
        let refusal = match presented.map(|token| oauth.server.check(token, needed)) {
            Some(Ok(_)) => return None,
            Some(Err(refusal)) => refusal,
            None => Refusal::Invalid,
        };
        let (status, challenge) = match refusal {
            Refusal::Invalid => (
                StatusCode::UNAUTHORIZED,
                format!("Bearer resource_metadata=\"{metadata}\""),
            ),
            Refusal::InsufficientScope(scope) => (
                StatusCode::FORBIDDEN,
                format!(
                    "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{metadata}\""
                ),
            ),
        };
        let challenge = HeaderValue::from_str(&challenge).ok()?;
        Some(
            (
                status,
                [(header::WWW_AUTHENTICATE, challenge)],
                "Unauthorized",
            )
                .into_response(),
        )
    }
}

/// The protected-resource metadata (RFC 9728) of an OAuth-protected server.
async fn resource_metadata(State(state): State<AppState>) -> Response {
    let Some(oauth) = &state.oauth else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut scopes: Vec<&str> = oauth
        .tool_scopes
        .iter()
        .map(|(_, scope)| scope.as_str())
        .collect();
    scopes.sort_unstable();
    scopes.dedup();
    Json(serde_json::json!({
        "resource": format!("{}{MCP_PATH}", state.base),
        "authorization_servers": [oauth.server.issuer()],
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
    }))
    .into_response()
}

fn status_response(
    status: u16,
    retry_after: Option<RetryAfter>,
    jsonrpc_body: Option<i32>,
    www_authenticate: Option<&str>,
    id: Option<serde_json::Value>,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = if let Some(code) = jsonrpc_body {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id.unwrap_or(serde_json::Value::Null),
            "error": {"code": code, "message": "injected"},
        });
        (status, Json(body)).into_response()
    } else {
        let text = format!(
            "injected {} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        (status, text).into_response()
    };
    let headers = response.headers_mut();
    if let Some(retry_after) = retry_after
        && let Ok(value) = HeaderValue::from_str(&retry_after.header_value())
    {
        headers.insert(header::RETRY_AFTER, value);
    }
    if let Some(challenge) = www_authenticate
        && let Ok(value) = HeaderValue::from_str(challenge)
    {
        headers.insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `200` headers promising more body than is sent, then a body error:
/// hyper aborts the connection and the client sees an incomplete message.
fn truncated_response() -> Response {
    let partial = futures::stream::once(async {
        Ok::<_, std::io::Error>(Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",\"id\""))
    });
    let cut = futures::stream::once(async {
        // Give hyper time to flush the headers and the partial chunk.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "injected connection drop",
        ))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CONTENT_LENGTH, "4096")
        .body(Body::from_stream(partial.chain(cut)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn get_faults(State(state): State<AppState>) -> Json<Vec<FaultRule>> {
    Json(state.control.faults().rules())
}

/// Replaces the fault script (`[]` clears it).
async fn set_faults(
    State(state): State<AppState>,
    Json(rules): Json<Vec<FaultRule>>,
) -> StatusCode {
    state.control.faults().set(rules);
    StatusCode::NO_CONTENT
}

async fn get_counts(State(state): State<AppState>) -> Json<Counts> {
    Json(state.control.counts())
}

/// Body of `POST /_control/late_tool`.
#[derive(Debug, Serialize, Deserialize)]
struct LateTool {
    enabled: bool,
}

async fn set_late_tool(
    State(state): State<AppState>,
    Json(LateTool { enabled }): Json<LateTool>,
) -> StatusCode {
    state.control.set_late_tool(enabled).await;
    StatusCode::NO_CONTENT
}

/// Body of `POST /_control/redefine`: `tool` listed with `patch` merged in
/// (`null`: as built), announced to the clients or not.
#[derive(Debug, Serialize, Deserialize)]
struct Redefine {
    tool: String,
    patch: Option<serde_json::Value>,
    #[serde(default)]
    announce: bool,
}

async fn redefine(
    State(state): State<AppState>,
    Json(Redefine {
        tool,
        patch,
        announce,
    }): Json<Redefine>,
) -> StatusCode {
    if announce {
        state.control.redefine_and_announce(&tool, patch).await;
    } else {
        state.control.redefine(&tool, patch);
    }
    StatusCode::NO_CONTENT
}

async fn reset_peak(State(state): State<AppState>) -> StatusCode {
    state.control.reset_peak();
    StatusCode::NO_CONTENT
}
