//! The gateway over streamable HTTP: rmcp's own server implementation behind
//! a thin layer of ours (docs/DECISIONS.md #60, #61).
//!
//! rmcp enforces the `Host` and `Origin` allowlists (DNS-rebinding and
//! cross-site protection; the origins are the allowed hosts'), the protocol's
//! rules and the body size limit. In front of it, this layer:
//!
//! - checks the bearer token (scheme case-insensitive, constant-time);
//! - reads a POST body within `body_timeout` (else 408) and `max_body_bytes`
//!   (else 413), so a slow client cannot hold a request open;
//! - admits large requests (a body of [`LARGE_BODY_BYTES`] or more) at most
//!   [`LARGE_AT_ONCE`] at a time, so what their parsing and copies cost in
//!   memory is bounded however many arrive together; the others wait before
//!   their bodies are read (one with a declared length holds none of its
//!   bytes; one without, at most 1 MiB), for at most `body_timeout`, then
//!   get 503 with `Retry-After` (small requests never wait);
//! - caps live sessions at `max_sessions`, and per client at
//!   `max_sessions_per_client` (`sessions.rs`): at a cap the least recently
//!   used idle session is ended to admit the new one, and `initialize` is
//!   answered 503 with a JSON-RPC error only when every session it could
//!   replace is busy; a session idle for `session_idle_timeout` is closed;
//! - answers a request with plain JSON when nothing comes before its answer
//!   (`answer.rs`; rmcp streams every answer of a session as SSE), and asks
//!   rmcp for JSON on stateless (2026-07-28) requests (`json_response`);
//! - answers a `tools/call` whose arguments not every reader reads alike
//!   with `-32602` before rmcp's server sees it (`door.rs`);
//! - in a fleet, hands out session ids that name this node, and forwards a
//!   request whose id names another node there (`elsewhere.rs`), before
//!   anything else here looks at it but the token, which stays here: the
//!   other node takes this node's voucher for it (`vouch.rs`);
//! - corrects three answers of rmcp 3.11: a body that is not JSON, or not a
//!   JSON-RPC message, gets 400 with a JSON-RPC error (-32700 / -32600)
//!   instead of 415; `DELETE` of an unknown session gets 404, and of a live
//!   one 200, instead of 202.
//!
//! Connections (timeouts, the connection cap) are `listener.rs`'s.
//!
//! Stopping is in steps, driven by a [`GatewayShutdown`]: drain (serve the
//! sessions the gateway has, refuse new ones and session-less work with 503
//! and `Retry-After`, until nothing is in progress and no request has come
//! for a short grace), stop accepting, then end the sessions and their open
//! streams (docs/ARCHITECTURE.md, "Shutdown").

use std::{
    io,
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
    routing::any,
};
use bytes::BytesMut;
use futures::StreamExt;
use rmcp::{
    model::{
        ConstString, ErrorCode, ErrorData, JsonRpcError, RequestId,
        SubscriptionsListenRequestMethod,
    },
    transport::{StreamableHttpServerConfig, StreamableHttpService},
};
use serde_json::Value;
use tokio::{
    net::TcpListener,
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    answer,
    direct::{self, Generation, StatelessCall},
    door,
    elsewhere::Elsewhere,
    handler::GatewayHandler,
    session_ids::SessionIds,
    sessions::{CappedSessions, OPENING, Opening},
    state::GatewayState,
    vouch::{FORWARDED, Vouchers},
};
use crate::{
    codec::{mcp_headers, posted},
    config::{BearerToken, FleetSettings, GatewaySettings},
    heavy,
    listener::{
        self, Peer, Port, Server,
        guard::{AllowedHosts, bearer_matches, is_json, unauthorized},
        tallies::{Protection, Tallies},
    },
};

/// `response`, keeping a large request's `permit` until its body is sent.
fn holding_permit(response: Response, permit: Option<OwnedSemaphorePermit>) -> Response {
    match permit {
        Some(permit) => response.map(|answer| Body::new(Holding::new(answer, permit))),
        None => response,
    }
}

/// `read(body)`, on a blocking thread for a large body (parsing one takes
/// long enough to hold up every other request on this thread); `None` if
/// the runtime is shutting down.
async fn read_body_as<T: Send + 'static>(
    body: &Bytes,
    large: bool,
    read: fn(&[u8]) -> T,
) -> Option<T> {
    if !large {
        return Some(read(body));
    }
    let body = body.clone();
    heavy::off_thread(move || read(&body)).await
}

/// The JSON-RPC "server error" code of the gateway's own refusals (too many
/// sessions or connections): the request was not looked at.
const BUSY_CODE: ErrorCode = ErrorCode(-32000);

/// What a connection over `gateway.max_connections` is answered (with 503).
const BUSY_BODY: &str = r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"too many connections to the gateway (gateway.max_connections); retry later"}}"#;

/// `Retry-After` of an `initialize` refused for too many sessions: a slot
/// frees when a client ends its session or one idles out.
const SESSIONS_RETRY_AFTER_SECS: &str = "30";

/// `Retry-After` of a request refused while draining: a load balancer has
/// another replica, or this one is back by then.
const DRAINING_RETRY_AFTER_SECS: &str = "5";

/// How a running gateway is stopped, step by step (see [`serve_http`]), and
/// what its protections did ([`Tallies`]).
#[derive(Debug, Clone, Default)]
pub struct GatewayShutdown {
    /// Cancelled: the gateway drains (see the module).
    draining: CancellationToken,
    /// When the last request arrived (only kept while draining).
    last_arrival: Arc<Mutex<Option<Instant>>>,
    /// Cancelled: no new connection is accepted, and each open one closes
    /// once its request in progress is answered.
    accepting: CancellationToken,
    /// Cancelled: every MCP session and open stream (standalone SSE,
    /// `subscriptions/listen`) ends.
    sessions: CancellationToken,
    /// The requests in progress: a POST counts until its answer is sent.
    /// Streams that stay open on purpose do not count.
    requests: TaskTracker,
    tallies: Arc<Tallies>,
}

impl GatewayShutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Evictions and refusals so far, for `/metrics`.
    pub fn tallies(&self) -> Arc<Tallies> {
        self.tallies.clone()
    }

    /// Step 1: drain. Requests of the sessions the gateway has are served,
    /// on any connection, new or not; a new session or a session-less
    /// request is answered 503 with `Retry-After`; each connection closes
    /// after its next answer.
    pub fn start_draining(&self) {
        *self.arrivals() = Some(Instant::now());
        self.draining.cancel();
    }

    /// Step 2: waits, for at most `bound`, until no request is in progress
    /// and none has arrived for `grace` since the last one ended (a client's
    /// follow-up to an answer comes within it); `true` if that happened in
    /// time.
    pub async fn drained(&self, bound: Duration, grace: Duration) -> bool {
        let deadline = Instant::now() + bound;
        self.requests.close();
        loop {
            if tokio::time::timeout_at(deadline, self.requests.wait())
                .await
                .is_err()
            {
                return false;
            }
            let quiet_since = Instant::now();
            tokio::time::sleep_until((quiet_since + grace).min(deadline)).await;
            let arrived_since = self.arrivals().is_some_and(|last| last > quiet_since);
            if !arrived_since && self.requests.is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return self.requests.is_empty();
            }
        }
    }

    /// Step 3: accept nothing new.
    pub fn stop_accepting(&self) {
        self.accepting.cancel();
    }

    /// Step 4: ends every session and stream; [`serve_http`] then returns
    /// once the connections are closed.
    pub fn end_sessions(&self) {
        self.accepting.cancel();
        self.sessions.cancel();
    }

    /// How many requests are in progress.
    pub fn in_progress(&self) -> usize {
        self.requests.len()
    }

    fn arrivals(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.last_arrival
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a request's arrival while draining.
    fn arrived(&self) {
        if self.draining.is_cancelled() {
            *self.arrivals() = Some(Instant::now());
        }
    }
}

/// A request body this large (1 MiB) or larger is a large request.
pub const LARGE_BODY_BYTES: usize = 1 << 20;

/// Large requests processed at once. A parsed JSON body costs many times its
/// bytes (a 3.6 MB body of small objects is about 50 MB of values) and a
/// call holds a few copies while it runs: two at once keep the gateway's
/// memory in the hundreds of MiB where eight together reached 2 GB
/// (docs/DECISIONS.md #70).
pub const LARGE_AT_ONCE: usize = 2;

/// What the MCP endpoint's handler shares between requests (one, behind an
/// `Arc`: nothing is copied per request).
struct Endpoint {
    mcp: StreamableHttpService<GatewayHandler, CappedSessions>,
    sessions: Arc<CappedSessions>,
    /// For the direct path (`direct.rs`), which checks what rmcp would.
    state: Arc<GatewayState>,
    hosts: AllowedHosts,
    /// rmcp's SSE keep-alive interval.
    keep_alive: Option<Duration>,
    /// Cancelled when the gateway ends its sessions.
    ending: CancellationToken,
    requests: TaskTracker,
    /// The shutdown's handle: draining, arrivals, tallies.
    control: GatewayShutdown,
    /// Permits for large requests in progress ([`LARGE_AT_ONCE`]).
    large: Arc<Semaphore>,
    token: Option<Arc<BearerToken>>,
    body_timeout: Duration,
    max_body_bytes: usize,
    /// In a fleet: the sessions other nodes hold, reached by forwarding.
    elsewhere: Option<Elsewhere>,
    /// Proxies believed about who their client is (`trusted_proxies`).
    proxies: listener::forwarded::Proxies,
}

/// Serves the gateway on `listener` at `settings.path` until `shutdown` has
/// stopped it; returns once every connection is closed. With `fleet`, its
/// session ids name this node and requests for another node's sessions are
/// forwarded there (docs/FLEET.md, "Sessions across nodes").
pub async fn serve_http(
    listener: TcpListener,
    state: Arc<GatewayState>,
    settings: &GatewaySettings,
    fleet: Option<&FleetSettings>,
    shutdown: GatewayShutdown,
) -> io::Result<()> {
    let hosts = AllowedHosts::new(&settings.allowed_hosts);
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(settings.allowed_hosts.clone())
        .with_allowed_origins(hosts.origins())
        .with_cancellation_token(shutdown.sessions.child_token())
        .with_json_response(true);
    config.max_request_body_bytes = settings.max_body_bytes;
    let ids = fleet.map(|fleet| Arc::new(SessionIds::new(&fleet.node, &fleet.key)));
    let elsewhere = ids.clone().zip(fleet).map(|(ids, fleet)| {
        let vouchers = Vouchers::new(&fleet.node, &fleet.key, &fleet.namespace);
        Elsewhere::new(ids, vouchers, state.registry.clone(), settings.idle_timeout)
    });
    let sessions = Arc::new(CappedSessions::new(
        settings.max_sessions,
        settings.max_sessions_per_client,
        settings.session_idle_timeout,
        shutdown.tallies(),
        ids,
    ));
    let keep_alive = config.sse_keep_alive;
    let handlers = state.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(GatewayHandler::new(handlers.clone())),
        sessions.clone(),
        config,
    );
    let endpoint = Endpoint {
        mcp,
        sessions,
        state,
        hosts,
        keep_alive,
        ending: shutdown.sessions.clone(),
        requests: shutdown.requests.clone(),
        control: shutdown.clone(),
        large: Arc::new(Semaphore::new(LARGE_AT_ONCE)),
        token: settings.auth.clone().map(Arc::new),
        body_timeout: settings.body_timeout,
        max_body_bytes: settings.max_body_bytes,
        elsewhere,
        proxies: listener::forwarded::Proxies::new(settings),
    };
    let router = Router::new()
        .route(&settings.path, any(mcp_endpoint))
        .with_state(Arc::new(endpoint));
    let server = Server {
        port: Port::Gateway,
        header_timeout: settings.header_timeout,
        idle_timeout: settings.idle_timeout,
        max_connections: settings.max_connections,
        busy_body: BUSY_BODY,
        draining: shutdown.draining.clone(),
        tallies: shutdown.tallies(),
    };
    // The listener's shutdown lets a request in progress finish, and an
    // open stream is one: connections close for good when sessions end.
    listener::serve(listener, router, server, shutdown.accepting.clone()).await
}

async fn mcp_endpoint(State(endpoint): State<Arc<Endpoint>>, request: Request) -> Response {
    let (request, forwarded) = match endpoint.admit(request) {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    endpoint.control.arrived();
    if !forwarded
        && let Some(elsewhere) = &endpoint.elsewhere
        && let Some(node) = elsewhere.holder(request.headers())
    {
        return Box::pin(endpoint.forward(elsewhere, request, &node)).await;
    }
    // The session's request keeps it busy until its response is sent.
    let in_use = request
        .headers()
        .get(&mcp_headers::SESSION_ID)
        .and_then(|id| id.to_str().ok())
        .and_then(|id| endpoint.sessions.begin(id));
    let response = match *request.method() {
        Method::POST if opens_a_stream(request.headers()) => endpoint.post(request).await,
        Method::POST => {
            let in_progress = endpoint.requests.token();
            let response = answer::as_json_when_answered(endpoint.post(request).await).await;
            response.map(|body| Body::new(Holding::new(body, in_progress)))
        }
        // Boxed, as every path but a POST's is rare: a call's future (moved
        // at each step of its way) stays the size of the POST's.
        Method::DELETE => Box::pin(endpoint.delete(request)).await,
        _ => Box::pin(endpoint.mcp.handle(request)).await.map(Body::new),
    };
    match in_use {
        Some(in_use) => response.map(|body| Body::new(Holding::new(body, in_use))),
        None => response,
    }
}

/// Whether a POST opens a stream meant to stay open (a 2026-07-28
/// `subscriptions/listen`), which a graceful shutdown does not wait for.
fn opens_a_stream(headers: &HeaderMap) -> bool {
    headers.get(&mcp_headers::METHOD).is_some_and(|method| {
        method.as_bytes() == SubscriptionsListenRequestMethod::VALUE.as_bytes()
    })
}

pin_project_lite::pin_project! {
    /// A response body that holds `guard` until it is sent (or dropped, the
    /// client gone): the request counts as in progress
    /// ([`TaskTrackerToken`]), or keeps its large-request permit, until then.
    struct Holding<B, G> {
        #[pin]
        body: B,
        guard: G,
    }
}

impl<B, G> Holding<B, G> {
    fn new(body: B, guard: G) -> Self {
        Holding { body, guard }
    }
}

impl<B: http_body::Body, G> http_body::Body for Holding<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Endpoint {
    /// `request` if its caller may come in, and whether another node of
    /// the fleet forwarded it here: with that node's voucher, which stands
    /// for the bearer token it checked (a forwarded request carries no
    /// credentials, `vouch.rs`), or with the token. A request marked as
    /// forwarded without a valid voucher is refused, whatever it carries.
    fn admit(&self, mut request: Request) -> Result<(Request, bool), Response> {
        let forwarded = request.headers().contains_key(&FORWARDED)
            && match &self.elsewhere {
                Some(elsewhere) => {
                    if !elsewhere.vouched(&mut request) {
                        self.control.tallies.count(Protection::ForgedForwarding);
                        return Err(unauthorized(
                            "a request marked as forwarded by a node of this fleet without its voucher",
                        ));
                    }
                    self.control.tallies.count(Protection::ForwardedIn);
                    true
                }
                // Outside a fleet the mark means nothing.
                None => {
                    request.headers_mut().remove(&FORWARDED);
                    false
                }
            };
        if !forwarded
            && let Some(token) = &self.token
            && !bearer_matches(request.headers(), token)
        {
            return Err(unauthorized("missing or invalid bearer token"));
        }
        Ok((request, forwarded))
    }

    /// `request`, for a session `node` holds, answered there; as an unknown
    /// session when `node` cannot be reached. A POST counts as in progress
    /// here too until its answer is sent, so a drain waits for it.
    async fn forward(&self, elsewhere: &Elsewhere, request: Request, node: &str) -> Response {
        let in_progress = (request.method() == Method::POST && !opens_a_stream(request.headers()))
            .then(|| self.requests.token());
        let Some(response) = elsewhere
            .forward(request, node, self.ending.child_token())
            .await
        else {
            return session_not_found();
        };
        self.control.tallies.count(Protection::ForwardedOut);
        match in_progress {
            Some(token) => response.map(|body| Body::new(Holding::new(body, token))),
            None => response,
        }
    }

    async fn post(self: &Arc<Self>, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        let client = self.client(&parts);
        // A large request waits for a permit before its body is read (a
        // waiting one holds none of its bytes; its client waits to send
        // them); the permit goes with its answer, which is when its copies
        // are gone.
        let (body, permit) = match self.read_body(&parts.headers, body).await {
            Ok(read) => read,
            Err(refused) => return refused,
        };
        let sessionless = !parts.headers.contains_key(&mcp_headers::SESSION_ID);
        if sessionless
            && self.control.draining.is_cancelled()
            && let Some(refused) = refused_while_draining(&body)
        {
            self.control.tallies.count(Protection::RefusedWhileDraining);
            return refused;
        }
        if let Some(answer) = self.direct(&parts, &body, permit.is_some()).await {
            return holding_permit(answer, permit);
        }
        if let Some(refused) = self.door(&parts.headers, &body, permit.is_some()).await {
            return holding_permit(refused, permit);
        }
        let declared_json = is_json(&parts.headers);
        // Checked here first (peeking at the body only when a session would
        // be refused) so a flood of initializes is refused without rmcp
        // logging each one as an error.
        if sessionless
            && let Some(why) = self.sessions.refusal(client).await
            && is_initialize(&body)
        {
            self.control.tallies.count(why);
            return self.too_many_sessions(&body, why);
        }
        let request = Request::from_parts(parts, Body::from(body.clone()));
        let (response, refused) = if permit.is_some() {
            // rmcp parses the body inside `handle`: a large one is parsed on
            // a blocking thread, so the network thread keeps serving others.
            let runtime = tokio::runtime::Handle::current();
            let endpoint = self.clone();
            let handled = move || runtime.block_on(endpoint.handle(request, client));
            match tokio::task::spawn_blocking(handled).await {
                Ok(handled) => handled,
                Err(_) => return internal_error(),
            }
        } else {
            // Boxed: rmcp's future is several times the direct path's, which
            // would otherwise carry its size (docs/DECISIONS.md #132).
            Box::pin(self.handle(request, client)).await
        };
        if let Some(why) = refused {
            return self.too_many_sessions(&body, why);
        }
        // With the content type right, rmcp's 415 means it could not parse
        // the body as a JSON-RPC message.
        if declared_json && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            return not_json_rpc(&body);
        }
        holding_permit(response, permit)
    }

    /// rmcp's answer to `request` from `client`, and why [`CappedSessions`]
    /// refused it, if it was an `initialize` it refused.
    async fn handle(
        &self,
        request: Request,
        client: Option<IpAddr>,
    ) -> (Response, Option<Protection>) {
        let opening = Opening {
            client,
            refused: Default::default(),
        };
        OPENING
            .scope(opening, async {
                let response = self.mcp.handle(request).await.map(Body::new);
                (response, OPENING.with(|opening| opening.refused.get()))
            })
            .await
    }

    /// `initialize` refused for `why`: 503, `Retry-After`, and a JSON-RPC
    /// error a client can show.
    fn too_many_sessions(&self, body: &[u8], why: Protection) -> Response {
        let limit = match why {
            Protection::SessionRefusedAtClientQuota => self.sessions.per_client,
            _ => self.sessions.max,
        };
        too_many_sessions(body, why.reason(), limit)
    }

    /// The answer to a call that takes the direct path (`direct.rs`); `None`
    /// for every other request, which rmcp then handles. A cancellation of a
    /// direct call cancels it (and goes on to rmcp, which ignores it).
    async fn direct(&self, parts: &Parts, body: &Bytes, large: bool) -> Option<Response> {
        let Some(id) = parts.headers.get(&mcp_headers::SESSION_ID) else {
            return self.stateless(parts, body, large).await;
        };
        let id = id.to_str().ok()?;
        let session = self.state.direct.session(id)?;
        match read_body_as(body, large, posted::Posted::read).await? {
            posted::Posted::Call(call)
                if !self.state.serves_meta_tool(&call.name)
                    && session.takes(&parts.headers)
                    && self.hosts.check(&parts.uri, &parts.headers).is_ok()
                    && self.sessions.has(id).await =>
            {
                let call = direct::Call::from(call);
                self.sessions.touch(id, &session).await;
                self.state.direct.taken();
                let cancelled = self.ending.child_token();
                let protocol = session.info().map(|info| info.protocol_version.clone());
                let span = call.span(
                    &parts.headers,
                    Some(id),
                    protocol.as_ref().map(rmcp::model::ProtocolVersion::as_str),
                    self.client(parts),
                );
                let (answer, before) = session.answer(self.state.clone(), (call, span), cancelled);
                Some(direct::respond(answer, before, self.keep_alive, Generation::Sessions).await)
            }
            posted::Posted::Cancelled(request) => {
                session.cancel(&request);
                None
            }
            posted::Posted::Call(_) | posted::Posted::Other => None,
        }
    }

    /// The answer to a 2026-07-28 client's call that takes the direct path
    /// (`direct.rs`); `None` for every other session-less request.
    async fn stateless(&self, parts: &Parts, body: &Bytes, large: bool) -> Option<Response> {
        let call = read_body_as(body, large, StatelessCall::read).await??;
        let takes = !call.is_meta(&self.state)
            && call.takes(&parts.headers)
            && !self.state.current().promotes_headers(call.name())
            && self.hosts.check(&parts.uri, &parts.headers).is_ok();
        if !takes {
            return None;
        }
        self.state.direct.taken();
        let span = call.span(&parts.headers, self.client(parts));
        let (answer, before) = call.answer(self.state.clone(), span, self.ending.child_token());
        Some(direct::respond(answer, before, self.keep_alive, Generation::Stateless).await)
    }

    /// The answer to a call whose arguments the door refuses (`door.rs`),
    /// as the direct path writes it; `None` for anything else. Whatever
    /// session the request names, known, unknown or unreadable: rmcp serves
    /// a 2026-07-28 request per request even under a session id it does not
    /// know, so no id may take a request past the door.
    async fn door(&self, headers: &HeaderMap, body: &Bytes, large: bool) -> Option<Response> {
        let refusal = read_body_as(body, large, door::answer).await??;
        self.control.tallies.count(Protection::UnreadableArguments);
        let generation = match headers.get(&mcp_headers::SESSION_ID) {
            Some(_) => Generation::Sessions,
            None => Generation::Stateless,
        };
        Some(direct::json(&refusal, generation.status(&refusal)))
    }

    async fn delete(&self, request: Request) -> Response {
        let known = match request
            .headers()
            .get(&mcp_headers::SESSION_ID)
            .and_then(|value| value.to_str().ok())
        {
            Some(id) => self.sessions.has(id).await,
            // rmcp answers a DELETE without a session id itself (400).
            None => true,
        };
        let response = self.mcp.handle(request).await;
        if response.status() == StatusCode::ACCEPTED {
            if !known {
                return session_not_found();
            }
            // The session ended: 200, which every SDK takes as done (the
            // Python SDK warns on rmcp's 202).
            return StatusCode::OK.into_response();
        }
        response.map(Body::new)
    }

    /// The whole body, within `body_timeout` and `max_body_bytes`, and the
    /// permit a large one holds. A body declared large waits for its permit
    /// before it is read; one without a length, once it has reached
    /// [`LARGE_BODY_BYTES`]. Time spent waiting for a permit is ours, not
    /// the client's: it does not count toward `body_timeout`.
    async fn read_body(
        &self,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Response> {
        let limit = self.max_body_bytes;
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        if declared.is_some_and(|length| length > limit as u64) {
            return Err(payload_too_large(limit));
        }
        let mut permit = None;
        if declared.is_some_and(|length| length >= LARGE_BODY_BYTES as u64) {
            permit = Some(self.large_permit().await?);
        }
        let mut deadline = Instant::now() + self.body_timeout;
        let mut chunks = body.into_data_stream();
        let mut collected = BytesMut::new();
        loop {
            let Ok(chunk) = tokio::time::timeout_at(deadline, chunks.next()).await else {
                return Err((
                    StatusCode::REQUEST_TIMEOUT,
                    [(header::CONNECTION, "close")],
                    "Request Timeout: the request body did not arrive within gateway.body_timeout",
                )
                    .into_response());
            };
            let Some(chunk) = chunk else {
                return Ok((collected.freeze(), permit));
            };
            let Ok(chunk) = chunk else {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the request body could not be read",
                )
                    .into_response());
            };
            if chunk.len() > limit - collected.len() {
                return Err(payload_too_large(limit));
            }
            collected.extend_from_slice(&chunk);
            if permit.is_none() && collected.len() >= LARGE_BODY_BYTES {
                let waiting = Instant::now();
                permit = Some(self.large_permit().await?);
                deadline += waiting.elapsed();
            }
        }
    }

    /// One of the [`LARGE_AT_ONCE`] permits, when one is free within
    /// `body_timeout` (permits held by clients slow to send their bodies, or
    /// by long calls, must not make others wait without end); else 503 with
    /// `Retry-After`.
    async fn large_permit(&self) -> Result<OwnedSemaphorePermit, Response> {
        let permit = self.large.clone().acquire_owned();
        match tokio::time::timeout(self.body_timeout, permit).await {
            Ok(permit) => Ok(permit.expect("the large-request semaphore is never closed")),
            Err(_) => {
                let mut busy = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable: large requests are being processed; retry shortly",
                )
                    .into_response();
                busy.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                Err(busy)
            }
        }
    }
}

/// MCP: a request for an unknown or ended session is 404 (rmcp's own words).
fn session_not_found() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// A request whose handling panicked (never expected).
fn internal_error() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal Server Error: the request could not be handled",
    )
        .into_response()
}

/// rmcp's own answer to a body over the limit.
fn payload_too_large(limit: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        [(header::CONNECTION, "close")],
        format!("Payload Too Large: request body exceeds {limit} bytes"),
    )
        .into_response()
}

/// Whether `body` is an `initialize` request (only asked when sessions are
/// full, so the extra parse is rare).
fn is_initialize(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .is_ok_and(|message| message.get("method").and_then(Value::as_str) == Some("initialize"))
}

/// The `id` of a JSON-RPC message, when it has a valid one.
fn request_id(message: &Value) -> Option<RequestId> {
    message
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .and_then(|id| serde_json::from_value(id.clone()).ok())
}

/// `initialize` beyond `gateway.{key}` (= `limit`), every session it could
/// replace busy: 503, `Retry-After`, and a JSON-RPC error a client can show.
fn too_many_sessions(body: &[u8], key: &str, limit: usize) -> Response {
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|message| request_id(&message));
    let mut response = jsonrpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        ErrorData::new(
            BUSY_CODE,
            format!(
                "too many MCP sessions (gateway.{key} = {limit}), all of them busy; \
                 retry later, or end an unused session"
            ),
            None,
        ),
    );
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(SESSIONS_RETRY_AFTER_SECS),
    );
    response
}

/// Session-less requests the gateway answers from its own view, at once,
/// with no upstream work and no stream: served while draining (a client's
/// follow-up listing after an answer is one of them).
const ANSWERED_FROM_THE_VIEW: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "ping",
];

/// While draining, a session-less request that would start new work (reach
/// an upstream, open a stream, open a session): 503 with `Retry-After` and a
/// JSON-RPC error. `None` for what may go on: a notification (a
/// cancellation), what is answered from the gateway's view, and the retry of
/// an input round already under way.
fn refused_while_draining(body: &[u8]) -> Option<Response> {
    let message = serde_json::from_slice::<Value>(body).ok()?;
    let id = request_id(&message)?;
    let method = message.get("method")?.as_str()?;
    let params = message.get("params");
    if ANSWERED_FROM_THE_VIEW.contains(&method)
        || params.is_some_and(|params| params.get("requestState").is_some())
    {
        return None;
    }
    let mut response = jsonrpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        Some(id),
        ErrorData::new(
            BUSY_CODE,
            "the gateway is shutting down and takes no new work; retry (another replica may \
             take it)",
            None,
        ),
    );
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(DRAINING_RETRY_AFTER_SECS),
    );
    Some(response)
}

/// 400 for a body rmcp could not parse: -32700 when it is not JSON at all
/// (invalid UTF-8 included), -32600 when it is JSON but no JSON-RPC message.
fn not_json_rpc(body: &[u8]) -> Response {
    let (id, error) = match serde_json::from_slice::<Value>(body) {
        Err(error) => (
            None,
            // Position only: the body is the client's and is not echoed.
            ErrorData::parse_error(
                format!(
                    "Parse error: the body is not valid JSON (line {}, column {})",
                    error.line(),
                    error.column()
                ),
                None,
            ),
        ),
        Ok(message) => (
            request_id(&message),
            ErrorData::invalid_request(
                "Invalid Request: the body is not a JSON-RPC 2.0 message this server accepts",
                None,
            ),
        ),
    };
    jsonrpc_error(StatusCode::BAD_REQUEST, id, error)
}

fn jsonrpc_error(status: StatusCode, id: Option<RequestId>, error: ErrorData) -> Response {
    let body = serde_json::to_vec(&JsonRpcError::new(id, error)).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The client's address, as the listener recorded it.
fn peer(parts: &Parts) -> Option<std::net::IpAddr> {
    parts.extensions.get::<Peer>().map(|peer| peer.0)
}

impl Endpoint {
    /// Who sent the request: its peer, or, when the peer is a trusted proxy,
    /// the client it names (`listener/forwarded.rs`).
    fn client(&self, parts: &Parts) -> Option<std::net::IpAddr> {
        Some(self.proxies.client(peer(parts)?, &parts.headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_json(response: Response) -> (StatusCode, Value) {
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn unparsable_bodies_get_parse_error_or_invalid_request() {
        let (status, error) = body_json(not_json_rpc(b"{not json")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(error["error"]["code"], -32700);
        assert!(error.get("id").is_none(), "{error}");

        let (_, error) = body_json(not_json_rpc(&[0x7b, 0xff, 0xfe, 0x7d])).await;
        assert_eq!(error["error"]["code"], -32700);

        let (status, error) = body_json(not_json_rpc(br#"{"id": 7, "hello": 1}"#)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(error["error"]["code"], -32600);
        assert_eq!(error["id"], 7);
        assert_eq!(error["jsonrpc"], "2.0");
    }

    #[tokio::test]
    async fn the_session_refusal_names_the_request() {
        let response = too_many_sessions(
            br#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}"#,
            "max_sessions",
            2,
        );
        assert_eq!(response.headers()[header::RETRY_AFTER], "30");
        let (status, error) = body_json(response).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(error["id"], "a");
        assert_eq!(error["error"]["code"], -32000);
    }

    #[test]
    fn the_busy_body_is_a_json_rpc_error() {
        let busy: Value = serde_json::from_str(BUSY_BODY).unwrap();
        assert_eq!(busy["error"]["code"], BUSY_CODE.0);
    }

    #[test]
    fn draining_refuses_new_work_and_lets_the_rest_go_on() {
        let refused = |body: &str| refused_while_draining(body.as_bytes()).map(|r| r.status());
        let unavailable = Some(StatusCode::SERVICE_UNAVAILABLE);
        for new_work in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__b"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"x:y"}}"#,
        ] {
            assert_eq!(refused(new_work), unavailable, "{new_work}");
        }
        for goes_on in [
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"server/discover"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__b","requestState":"s"}}"#,
            "not json",
        ] {
            assert_eq!(refused(goes_on), None, "{goes_on}");
        }
        let response = refused_while_draining(
            br#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{}}"#,
        )
        .unwrap();
        assert_eq!(
            response.headers()[header::RETRY_AFTER],
            DRAINING_RETRY_AFTER_SECS
        );
    }
}
