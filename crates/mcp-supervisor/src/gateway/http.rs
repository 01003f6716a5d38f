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
//! A request's main line is `mcp_endpoint`: who may come in (the token, or
//! a fleet node's voucher), forwarded to the node holding its session, then
//! a POST (`Endpoint::post`): its body read within the limits (`body.rs`),
//! refused while draining, answered by the direct path, refused at the
//! door, or handed to rmcp within the session caps. The refusals it answers
//! itself are `refusals.rs`'s; the steps of stopping, `shutdown.rs`'s.
//!
//! Stopping is in steps, driven by a [`GatewayShutdown`]: drain (serve the
//! sessions the gateway has, refuse new ones and session-less work with 503
//! and `Retry-After`, until nothing is in progress and no request has come
//! for a short grace), stop accepting, then end the sessions and their open
//! streams (docs/ARCHITECTURE.md, "Shutdown").

mod body;
mod refusals;
mod shutdown;

use std::{io, sync::Arc};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, request::Parts},
    response::{IntoResponse, Response},
    routing::get,
};
use rmcp::{
    model::{ConstString, SubscriptionsListenRequestMethod},
    transport::{StreamableHttpServerConfig, StreamableHttpService},
};
use tokio::{net::TcpListener, sync::Semaphore};

pub use shutdown::GatewayShutdown;

pub(super) use body::read_body_as;
use body::{Bodies, Holding, holding_permit};
use refusals::{
    BUSY_BODY, internal_error, is_initialize, not_json_rpc, refused_while_draining,
    session_not_found, too_many_sessions,
};

use super::{
    answer,
    callers::{Callers, METADATA_PATH},
    direct::{DirectPath, Post},
    door,
    elsewhere::Elsewhere,
    handler::GatewayHandler,
    rights::caller_in,
    session_ids::SessionIds,
    sessions::{CappedSessions, Holder, OPENING, Opening},
    state::GatewayState,
    vouch::{CALLER, FORWARDED, SUBJECT, Vouchers},
};
use crate::{
    access::Caller,
    codec::mcp_headers,
    config::{FleetSettings, GatewaySettings},
    generation::Generation,
    listener::{
        self, Peer, Port, Server,
        guard::{AllowedHosts, is_json, unauthorized},
        tallies::Protection,
    },
};

/// A request body this large (1 MiB) or larger is a large request.
pub const LARGE_BODY_BYTES: usize = 1 << 20;

/// Large requests processed at once. A parsed JSON body costs many times its
/// bytes (a 3.6 MB body of small objects is about 50 MB of values) and a
/// call holds a few copies while it runs: two at once keep the gateway's
/// memory in the hundreds of MiB where eight together reached 2 GB
/// (docs/DECISIONS.md #70).
pub const LARGE_AT_ONCE: usize = 2;

/// What the MCP endpoint's handler shares between requests (one, behind an
/// `Arc`: nothing is copied per request), by the steps of a request's main
/// line (`mcp_endpoint`, [`Endpoint::post`]).
struct Endpoint {
    /// Who may come in without a fleet node's voucher, and as whom.
    callers: Callers,
    /// In a fleet: the sessions other nodes hold, reached by forwarding,
    /// and the vouchers of the nodes that forward here.
    elsewhere: Option<Elsewhere>,
    /// Proxies believed about who their client is (`trusted_proxies`).
    proxies: listener::forwarded::Proxies,
    /// A POST's body, read within its limits (`body.rs`).
    bodies: Bodies,
    /// Plain calls, answered without rmcp's server (`direct.rs`).
    direct: DirectPath,
    /// rmcp's server, within the session caps.
    rmcp: Rmcp,
    /// Draining and stopping, and the tallies (`shutdown.rs`).
    control: GatewayShutdown,
}

/// rmcp's streamable HTTP server, and the sessions it keeps (capped).
struct Rmcp {
    server: StreamableHttpService<GatewayHandler, CappedSessions>,
    sessions: Arc<CappedSessions>,
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
        let subjects = state.exchanges.load(std::sync::atomic::Ordering::Relaxed);
        Elsewhere::new(ids, vouchers, state.registry.clone(), settings.idle_timeout)
            .carrying_subjects(subjects)
    });
    let sessions = Arc::new(CappedSessions::new(
        settings.max_sessions,
        settings.max_sessions_per_client,
        (settings.session_idle_timeout, settings.session_rest_after),
        shutdown.tallies(),
        ids,
    ));
    // Resting sessions are restored through rmcp's session store.
    config.session_store = Some(sessions.clone());
    let direct = state.clone();
    sessions.keep_resting(move |id| direct.direct.rest(id));
    let keep_alive = config.sse_keep_alive;
    let handlers = state.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(GatewayHandler::new(handlers.clone())),
        sessions.clone(),
        config,
    );
    let endpoint = Endpoint {
        callers: Callers::new(settings),
        elsewhere,
        proxies: listener::forwarded::Proxies::new(settings),
        bodies: Bodies {
            large: Arc::new(Semaphore::new(LARGE_AT_ONCE)),
            timeout: settings.body_timeout,
            max_bytes: settings.max_body_bytes,
        },
        direct: DirectPath::new(state, hosts, keep_alive),
        rmcp: Rmcp {
            server: mcp,
            sessions,
        },
        control: shutdown.clone(),
    };
    let endpoint = Arc::new(endpoint);
    let router = Router::new()
        .route(METADATA_PATH, get(resource_metadata))
        .route(
            &format!("{METADATA_PATH}{}", settings.path.trim_end_matches('/')),
            get(resource_metadata),
        )
        .with_state(endpoint.clone());
    let front = McpFront {
        path: settings.path.as_str().into(),
        endpoint,
    };
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
    let app = listener::App::fronted(router, front);
    listener::serve(listener, app, server, shutdown.accepting.clone()).await
}

/// The MCP endpoint, in front of the router: the path every call takes,
/// answered without axum's routing on its way (`listener::Front`); the
/// router has the rest (the resource metadata, and 404s).
#[derive(Clone)]
struct McpFront {
    path: Arc<str>,
    endpoint: Arc<Endpoint>,
}

impl listener::Front for McpFront {
    fn takes(&self, request: &Request) -> bool {
        request.uri().path() == &*self.path
    }

    fn serve(&self, request: Request) -> impl Future<Output = Response> + Send + 'static {
        mcp_endpoint(self.endpoint.clone(), request)
    }
}

/// The gateway's protected-resource metadata (RFC 9728); 404 when it
/// takes no access tokens.
async fn resource_metadata(State(endpoint): State<Arc<Endpoint>>) -> Response {
    endpoint
        .callers
        .metadata()
        .unwrap_or_else(|| StatusCode::NOT_FOUND.into_response())
}

/// Every request to the MCP endpoint, whatever its method.
async fn mcp_endpoint(endpoint: Arc<Endpoint>, request: Request) -> Response {
    let (request, forwarded) = match endpoint.admit(request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    endpoint.control.arrived();
    if !forwarded
        && let Some(elsewhere) = &endpoint.elsewhere
        && let Some(node) = elsewhere.holder(request.headers())
    {
        return Box::pin(endpoint.to_node(elsewhere, request, &node)).await;
    }
    let session = request
        .headers()
        .get(&mcp_headers::SESSION_ID)
        .and_then(|id| id.to_str().ok());
    // The session's request keeps it busy until its response is sent. A
    // session serves the caller who opened it; to anyone else it is not
    // there.
    let in_use = match session {
        Some(id) => {
            let principal = caller_in(request.extensions()).principal();
            match endpoint.rmcp.sessions.begin_for(id, principal.as_deref()) {
                Ok(in_use) => in_use,
                Err(_) => return session_not_found(),
            }
        }
        None => None,
    };
    let response = match *request.method() {
        Method::POST if opens_a_stream(request.headers()) => endpoint.post(request).await,
        Method::POST => {
            let in_progress = endpoint.control.requests.token();
            let response = answer::as_json_when_answered(endpoint.post(request).await).await;
            response.map(|body| Body::new(Holding::new(body, in_progress)))
        }
        // Boxed, as every path but a POST's is rare: a call's future (moved
        // at each step of its way) stays the size of the POST's.
        Method::DELETE => Box::pin(endpoint.delete(request)).await,
        _ => Box::pin(endpoint.rmcp.server.handle(request))
            .await
            .map(Body::new),
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

impl Endpoint {
    /// `request` if its caller may come in, and whether another node of
    /// the fleet forwarded it here: with that node's voucher, which stands
    /// for the caller it identified (a forwarded request carries no
    /// credentials, `vouch.rs`), or with its own credentials. A request
    /// marked as forwarded without a valid voucher is refused, whatever it
    /// carries. The caller goes into the request's extensions, for every
    /// step after this one.
    async fn admit(&self, mut request: Request) -> Result<(Request, bool), Response> {
        // One pass over the names for the marks only a node may set (a
        // lookup per mark hashes each name again).
        let marked = request
            .headers()
            .keys()
            .any(|name| [&FORWARDED, &CALLER, &SUBJECT].contains(&name));
        let vouched = if marked && request.headers().contains_key(&FORWARDED) {
            match &self.elsewhere {
                Some(elsewhere) => {
                    let Some(caller) = elsewhere.vouched(&mut request) else {
                        self.control.tallies.count(Protection::ForgedForwarding);
                        return Err(unauthorized(
                            "a request marked as forwarded by a node of this fleet without its voucher",
                        ));
                    };
                    self.control.tallies.count(Protection::ForwardedIn);
                    Some(caller)
                }
                // Outside a fleet the mark means nothing.
                None => None,
            }
        } else {
            None
        };
        // What only a node may say of a request, no client says.
        if marked {
            request.headers_mut().remove(&FORWARDED);
            request.headers_mut().remove(&CALLER);
            request.headers_mut().remove(&SUBJECT);
        }
        let forwarded = vouched.is_some();
        let caller = match vouched {
            Some(caller) => caller,
            None => self
                .callers
                .identify(request.headers())
                .await
                .map_err(|why| self.callers.refusal(&why))?,
        };
        request.extensions_mut().insert(caller);
        Ok((request, forwarded))
    }

    /// `request`, for a session `node` holds, answered there; as an unknown
    /// session when `node` cannot be reached. A POST counts as in progress
    /// here too until its answer is sent, so a drain waits for it.
    async fn to_node(&self, elsewhere: &Elsewhere, request: Request, node: &str) -> Response {
        let in_progress = (request.method() == Method::POST && !opens_a_stream(request.headers()))
            .then(|| self.control.requests.token());
        let Some(response) = elsewhere
            .forward(request, node, self.control.sessions.child_token())
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

    /// A POST's main line: its body read within the limits, refused while
    /// draining, answered by the direct path, refused at the door or at a
    /// session cap, or handed to rmcp. A large request's permit goes with
    /// its answer, which is when its copies are gone.
    async fn post(self: &Arc<Self>, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        let client = self.client(&parts);
        let (body, permit) = match self.bodies.read(&parts.headers, body).await {
            Ok(read) => read,
            Err(refused) => return refused,
        };
        if let Some(refused) = self.draining_refusal(&parts.headers, &body) {
            return refused;
        }
        let post = Post {
            parts: &parts,
            body: &body,
            large: permit.is_some(),
            client,
            sessions: &self.rmcp.sessions,
            ending: &self.control.sessions,
        };
        if let Some(answer) = self.direct.answer(post).await {
            return holding_permit(answer, permit);
        }
        if let Some(refused) = self.door(&parts.headers, &body, permit.is_some()).await {
            return holding_permit(refused, permit);
        }
        let holder = Holder::of(&caller_in(&parts.extensions), client);
        if let Some(refused) = self
            .at_session_cap(&parts.headers, &body, holder.clone())
            .await
        {
            return refused;
        }
        let large = permit.is_some();
        let response = self.by_rmcp(parts, body, large, holder).await;
        holding_permit(response, permit)
    }

    /// A session-less request's refusal while the gateway drains (new
    /// sessions and session-less work wait for the next node).
    fn draining_refusal(&self, headers: &HeaderMap, body: &[u8]) -> Option<Response> {
        if headers.contains_key(&mcp_headers::SESSION_ID) || !self.control.draining.is_cancelled() {
            return None;
        }
        let refused = refused_while_draining(body)?;
        self.control.tallies.count(Protection::RefusedWhileDraining);
        Some(refused)
    }

    /// An `initialize` refused at a session cap. Checked before rmcp
    /// (peeking at the body only when a session would be refused) so a
    /// flood of initializes is refused without rmcp logging each one as an
    /// error.
    async fn at_session_cap(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        client: Option<Holder>,
    ) -> Option<Response> {
        if headers.contains_key(&mcp_headers::SESSION_ID) {
            return None;
        }
        let why = self.rmcp.sessions.refusal(client).await?;
        if !is_initialize(body) {
            return None;
        }
        self.control.tallies.count(why);
        Some(self.too_many_sessions(body, why))
    }

    /// rmcp's answer, its status corrected: a session it refused at a cap
    /// after all, and a body it could not parse as a JSON-RPC message (its
    /// 415 with the content type right) is 400 with a JSON-RPC error.
    async fn by_rmcp(
        self: &Arc<Self>,
        parts: Parts,
        body: Bytes,
        large: bool,
        client: Option<Holder>,
    ) -> Response {
        let declared_json = is_json(&parts.headers);
        let request = Request::from_parts(parts, Body::from(body.clone()));
        let (response, refused) = if large {
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
        if declared_json && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            return not_json_rpc(&body);
        }
        response
    }

    /// rmcp's answer to `request` from `client`, and why [`CappedSessions`]
    /// refused it, if it was an `initialize` it refused.
    async fn handle(
        &self,
        request: Request,
        client: Option<Holder>,
    ) -> (Response, Option<Protection>) {
        let opening = Opening {
            client,
            caller: request.extensions().get::<Arc<Caller>>().cloned(),
            refused: Default::default(),
        };
        OPENING
            .scope(opening, async {
                let response = self.rmcp.server.handle(request).await.map(Body::new);
                (response, OPENING.with(|opening| opening.refused.get()))
            })
            .await
    }

    /// `initialize` refused for `why`: 503, `Retry-After`, and a JSON-RPC
    /// error a client can show.
    fn too_many_sessions(&self, body: &[u8], why: Protection) -> Response {
        let limit = match why {
            Protection::SessionRefusedAtClientQuota => self.rmcp.sessions.per_client,
            _ => self.rmcp.sessions.max,
        };
        too_many_sessions(body, why.reason(), limit)
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
        let refusal = crate::tool_answer::Message::Rmcp(refusal);
        Some(answer::json(&refusal, generation.status(&refusal)))
    }

    async fn delete(&self, request: Request) -> Response {
        let known = match request
            .headers()
            .get(&mcp_headers::SESSION_ID)
            .and_then(|value| value.to_str().ok())
        {
            Some(id) => self.rmcp.sessions.has(id).await,
            // rmcp answers a DELETE without a session id itself (400).
            None => true,
        };
        let response = self.rmcp.server.handle(request).await;
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
