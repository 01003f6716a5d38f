//! One live, initialized MCP client session and the operations the
//! connection actor runs on it, each bounded by a deadline and each answering
//! with a classified [`Failure`] instead of an rmcp error. rmcp's client
//! (`RunningService`) opens every session and carries stdio and 2025 HTTP
//! sessions; a 2026-07-28 HTTP session lets it go once open and sends its
//! requests itself (`direct`).
//!
//! Layout:
//! - [`handler`]: our rmcp `ClientHandler`, which forwards upstream
//!   notifications (list changes, resource updates, logs) to whoever owns the
//!   session, and progress and server-to-client requests to the downstream
//!   request they belong to;
//! - [`relay`]: the links between forwarded requests and their downstream;
//! - [`http`]: building a session over streamable HTTP with [`RecordingClient`];
//! - [`stdio`]: starting a child process and building a session over its stdio.

mod classify;
mod clients;
mod direct;
pub mod handler;
pub mod http;
mod modern;
pub mod relay;
pub mod stdio;
mod watch;

use std::{borrow::Cow, sync::Arc, time::Duration};

use rmcp::{
    ErrorData, RoleClient, ServiceError,
    model::{
        CallToolResult, CancelledNotificationParam, ClientRequest, JsonObject,
        PaginatedRequestParams, Prompt, ProtocolVersion, RequestOptionalParam, Resource,
        ResourceTemplate, ServerCapabilities, ServerPeerInfo, ServerResult, Tool,
    },
    service::{ClientCacheConfig, PeerRequestOptions, RunningService},
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use crate::events::ListKind;
pub use classify::{classify, classify_with_fallback};
pub(crate) use handler::pinned_version;
pub use handler::{SessionEvent, SessionHandler};
pub(crate) use http::open_http_sharing;
pub use http::{open_http, shared_http_client};
pub use relay::{Downstream, DownstreamLink};
pub use stdio::{ChildGroup, open_stdio};

use clients::Clients;

use crate::{
    call::{NotAttached, ToolCall, UpstreamRequest},
    failure::Phase,
    failure::{Failure, FailureKind},
    generation::Generation,
    http::{HttpRecorder, RecordingClient},
    tool_answer::Answer,
};

/// A live session. Dropping it cancels the rmcp service; prefer [`Session::close`].
#[derive(Debug)]
pub struct Session {
    /// How its requests reach the upstream: rmcp's client, which opened
    /// the session, the direct client, or both.
    clients: Clients,
    /// What the upstream said of itself when the session opened.
    info: Option<Arc<ServerPeerInfo>>,
    /// Where the upstream's notifications and requests go (rmcp's client
    /// holds it too, while there is one).
    handler: SessionHandler,
    /// HTTP sessions record every response here (see [`RecordingClient`]).
    recorder: Option<HttpRecorder>,
    /// Stdio sessions own their child's process group; dropping it kills
    /// whatever is left of the group.
    child: Option<ChildGroup>,
    /// Fires when the upstream's stream ended for good (see [`Session::ended`]).
    ended: CancellationToken,
    /// What a 2026-07-28 upstream keeps on our side (`None` for 2025 ones).
    modern: Option<Arc<modern::Modern>>,
    /// An OAuth session's tokens (see [`crate::oauth::on_session`]).
    tokens: Option<crate::oauth::TokenFile>,
}

impl Session {
    pub(crate) fn new(
        service: RunningService<RoleClient, SessionHandler>,
        recorder: Option<HttpRecorder>,
        ended: CancellationToken,
    ) -> Self {
        let info = service.peer_info();
        let modern = modern::for_version(info.as_ref().map(|info| &info.protocol_version));
        Session {
            handler: service.service().clone(),
            clients: Clients::Rmcp(service),
            info,
            recorder,
            child: None,
            ended,
            modern,
            tokens: None,
        }
    }

    /// An HTTP session built with `parts`: a 2025 session's plain tool
    /// calls skip rmcp's client, and a 2026-07-28 session lets rmcp's client
    /// go (waiting until it has) and sends every request itself
    /// (docs/DECISIONS.md #83).
    pub(crate) async fn sending_directly(mut self, parts: direct::DirectClientParts) -> Self {
        let us = rmcp::ClientHandler::get_info(&self.handler);
        let Some(direct) = parts.for_version(self.protocol_version().as_ref(), &us) else {
            return self;
        };
        let Clients::Rmcp(rmcp) = self.clients else {
            return self;
        };
        let (clients, let_go) = Clients::with_direct(rmcp, Arc::new(direct));
        self.clients = clients;
        if let Some(rmcp) = let_go {
            // rmcp's transport ends `ended` as it goes; the session goes on.
            self.ended = CancellationToken::new();
            // Bounded: a wind-down that takes longer goes on in the
            // background (there is nothing to tell a 2026-07-28 upstream).
            let _ = tokio::time::timeout(WIND_DOWN_PATIENCE, rmcp.cancel()).await;
        }
        self
    }

    /// Marks an OAuth session, whose tokens are in `tokens`.
    pub(crate) fn logging_in(mut self, tokens: crate::oauth::TokenFile) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// A stdio session, owning the process group of its child.
    pub(crate) fn with_child(
        service: RunningService<RoleClient, SessionHandler>,
        child: ChildGroup,
        ended: CancellationToken,
    ) -> Self {
        let info = service.peer_info();
        let modern = modern::for_version(info.as_ref().map(|info| &info.protocol_version));
        Session {
            handler: service.service().clone(),
            clients: Clients::Rmcp(service),
            info,
            recorder: None,
            child: Some(child),
            ended,
            modern,
            tokens: None,
        }
    }

    /// Cancelled when the upstream's stream ends for good (the child exited,
    /// the HTTP transport gave up) or the session is closed: how the
    /// connection notices a session that died while idle, without polling.
    /// A 2026-07-28 HTTP session has no stream to lose: it ends when closed
    /// (a request that fails tells of an upstream gone).
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }

    /// The protocol version the upstream agreed to.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.info.as_ref().map(|info| info.protocol_version.clone())
    }

    /// A 2026-07-28 upstream announces list changes and resource updates only
    /// on a `subscriptions/listen` stream: open it (see `modern`).
    pub(crate) async fn start_listening(&self) {
        if let Some(modern) = &self.modern {
            self.listen(modern).await;
        }
    }

    async fn listen(&self, modern: &modern::Modern) {
        let capabilities = self.capabilities();
        let through = match &self.clients {
            Clients::Rmcp(rmcp) | Clients::Split { rmcp, .. } => {
                modern::Through::Rmcp(rmcp.peer().clone())
            }
            Clients::Direct(direct) => modern::Through::Lane(Arc::clone(direct)),
        };
        let listening = modern.listen(through, &capabilities, &self.handler);
        // Calls work without it; only announcements are missed (until the next
        // change of subscriptions, or the next session).
        match tokio::time::timeout(LISTEN_PATIENCE, listening).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::debug!(%error, "subscriptions/listen failed"),
            Err(_) => tracing::debug!("subscriptions/listen was not acknowledged in time"),
        }
    }

    /// The child process group of a stdio session (`None` over HTTP).
    pub fn child(&self) -> Option<&ChildGroup> {
        self.child.as_ref()
    }

    /// Calls `tool`, answering by `deadline` (see [`Session::send`]).
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        deadline: Instant,
    ) -> Result<CallToolResult, Failure> {
        let call = ToolCall::new(tool.to_owned(), arguments);
        match self.send(call.into(), None, deadline).await {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(_) => Err(unexpected("tools/call")),
            Err(SendError::Failed { failure, .. }) => Err(failure),
            Err(SendError::Cancelled) => Err(Failure::transport("cancelled")),
        }
    }

    /// Sends `request` upstream as it is and answers by `deadline`. With a
    /// `link`, the upstream's progress and server-to-client requests for it go
    /// to that downstream, and its cancellation cancels the request. A
    /// request that runs out of time, or is cancelled, is cancelled upstream
    /// (`notifications/cancelled`) too.
    pub async fn send(
        &self,
        request: UpstreamRequest,
        link: Option<&DownstreamLink>,
        deadline: Instant,
    ) -> Result<ServerResult, SendError> {
        self.answer(request, link, deadline)
            .await
            .map(Answer::into_result)
    }

    /// [`Session::send`], a tool's answer with its structured content kept
    /// as text when it came so (`crate::tool_answer`).
    pub(crate) async fn answer(
        &self,
        request: UpstreamRequest,
        link: Option<&DownstreamLink>,
        deadline: Instant,
    ) -> Result<Answer, SendError> {
        let mut options = PeerRequestOptions::no_options();
        let direct = self.clients.direct_for(&request);
        if let Some(modern) = &self.modern {
            if let Some(answer) = self.held_here(modern, &request).await {
                return Ok(Answer::from(answer));
            }
            options.meta = modern.request_meta();
            if let Some(link) = link {
                // The client's capabilities go with its direct requests'
                // stamp (`DirectClient::stamp`), encoded once.
                let capabilities = link
                    .capabilities
                    .as_ref()
                    .filter(|_| !direct.is_some_and(|lane| lane.stamps()));
                #[allow(deprecated)]
                if capabilities.is_some() || link.log_level.is_some() {
                    let meta = options
                        .meta
                        .get_or_insert_with(rmcp::model::RequestMetaObject::new);
                    if let Some(capabilities) = capabilities {
                        meta.set_client_capabilities(capabilities.clone());
                    }
                    if let Some(level) = link.log_level {
                        meta.set_log_level(level);
                    }
                }
            }
        }
        if let Some(direct) = direct {
            return self
                .send_direct(direct, request, options, link, deadline)
                .await;
        }
        // Boxed here and below: rmcp's client's future is larger than the
        // direct lane's, and every step a call's future takes on its way
        // moves it whole (docs/DECISIONS.md #132).
        Box::pin(self.send_with_rmcp(request, options, link, deadline))
            .await
            .map(Answer::from)
    }

    /// [`Session::send`] through rmcp's client.
    async fn send_with_rmcp(
        &self,
        request: UpstreamRequest,
        options: PeerRequestOptions,
        link: Option<&DownstreamLink>,
        deadline: Instant,
    ) -> Result<ServerResult, SendError> {
        let method = method_of(&request);
        let request = match request.into_rmcp().await {
            Ok(request) => request,
            Err(NotAttached::ShuttingDown) => {
                return Err(SendError::Failed {
                    failure: Failure::transport("the runtime is shutting down").with_not_run(),
                    upstream: None,
                });
            }
            // The caller's request is at fault, not the upstream: refused
            // as the upstream would refuse it, nothing sent, the session
            // kept (a protocol failure of a call is rejected, no strike).
            Err(NotAttached::Unreadable) => {
                let refused = "the call's arguments could not be read";
                return Err(SendError::Failed {
                    failure: Failure::new(FailureKind::Protocol, refused).with_not_run(),
                    upstream: Some(ErrorData::invalid_params(refused, None)),
                });
            }
        };
        let Some(service) = self.clients.rmcp() else {
            return Err(self.send_failure(&ServiceError::TransportClosed));
        };
        let peer = service.peer();
        let sent = peer.send_request_with_option(request, options);
        let handle = match tokio::time::timeout_at(deadline, sent).await {
            Ok(Ok(handle)) => handle,
            Ok(Err(error)) => return Err(self.send_failure(&error)),
            Err(_) => return Err(timed_out(&method)),
        };
        let id = handle.id.clone();
        let _link = link.map(|link| {
            self.handler
                .links()
                .register(id.clone(), handle.progress_token.clone(), link)
        });
        let cancelled = link.map(|link| link.cancelled.clone()).unwrap_or_default();
        let outcome = tokio::select! {
            answer = tokio::time::timeout_at(deadline, handle.await_response()) => answer,
            () = cancelled.cancelled() => {
                self.cancel_request(id, "cancelled by the client");
                return Err(SendError::Cancelled);
            }
        };
        match outcome {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(self.send_failure(&error)),
            Err(_) => {
                self.cancel_request(id, "timed out");
                Err(timed_out(&method))
            }
        }
    }

    /// [`Session::send`] for a plain tool call over HTTP: the same request,
    /// stamped as rmcp's client stamps it, sent without it (see
    /// `direct`). Giving up closes the request's stream, which is how
    /// rmcp's client cancels a 2026-07-28 request; a 2025 upstream is also
    /// told, as rmcp tells it. A 2025 session the upstream forgot goes to
    /// rmcp, which opens a new one.
    async fn send_direct(
        &self,
        direct: &direct::DirectClient,
        request: UpstreamRequest,
        options: PeerRequestOptions,
        link: Option<&DownstreamLink>,
        deadline: Instant,
    ) -> Result<Answer, SendError> {
        let method = method_of(&request);
        let legacy = direct.generation() == Generation::Sessions;
        // Kept to hand to rmcp if the 2025 session turns out forgotten (no
        // `options` to keep: only 2026-07-28 requests carry extra `_meta`).
        let again = legacy.then(|| request.clone());
        let mut request = request;
        let (id, token) = direct.next_id();
        let handler = &self.handler;
        // A 2026-07-28 upstream learns the client's capabilities per request.
        let client = link
            .and_then(|link| link.capabilities.as_ref())
            .filter(|_| self.modern.is_some());
        let stamp = direct.stamp(&mut request, options.meta, token.clone(), client);
        let registered = link.map(|link| handler.links().register(id.clone(), token, link));
        let cancelled = link.map(|link| link.cancelled.clone()).unwrap_or_default();
        // Boxed: the send's future is large, and `select!` and the timeout
        // would move it whole, more than once (docs/DECISIONS.md #145).
        let mut sent = crate::boxed::in_place(|| {
            tokio::time::timeout_at(deadline, direct.send(request, stamp, id.clone(), handler))
        });
        let outcome = tokio::select! {
            answer = &mut sent => Some(answer),
            () = cancelled.cancelled() => None,
            // The session was closed: what is in flight on it fails now.
            () = self.ended.cancelled() => Some(Ok(Err(direct::Unsent::Failed(ServiceError::TransportClosed)))),
        };
        // Gone before anything else is done: its stream closes before a
        // 2025 upstream is told of the cancellation, as when `select!`
        // dropped it.
        drop(sent);
        let Some(outcome) = outcome else {
            if legacy {
                self.cancel_request(id, "cancelled by the client");
            }
            return Err(SendError::Cancelled);
        };
        match outcome {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(direct::Unsent::Failed(error))) => Err(self.send_failure(&error)),
            Ok(Err(direct::Unsent::Expired)) => {
                drop(registered);
                match again {
                    Some(request) => {
                        let options = PeerRequestOptions::no_options();
                        Box::pin(self.send_with_rmcp(request, options, link, deadline))
                            .await
                            .map(Answer::from)
                    }
                    // Only a 2025 session can have expired.
                    None => Err(self.send_failure(&rmcp::ServiceError::TransportClosed)),
                }
            }
            Err(_) => {
                if legacy {
                    self.cancel_request(id, "timed out");
                }
                Err(timed_out(&method))
            }
        }
    }

    /// A 2026-07-28 upstream has no `resources/subscribe` or
    /// `logging/setLevel`: what they ask for is kept here and applied to the
    /// listen stream and to every request (see `modern`).
    async fn held_here(
        &self,
        modern: &modern::Modern,
        request: &UpstreamRequest,
    ) -> Option<ServerResult> {
        match request.relayed()? {
            ClientRequest::SubscribeRequest(subscribe) => {
                if modern.subscribe(&subscribe.params.uri, true) {
                    Box::pin(self.listen(modern)).await;
                }
            }
            ClientRequest::UnsubscribeRequest(unsubscribe) => {
                if modern.subscribe(&unsubscribe.params.uri, false) {
                    Box::pin(self.listen(modern)).await;
                }
            }
            #[allow(deprecated)]
            ClientRequest::SetLevelRequest(set) => modern.set_log_level(set.params.level),
            _ => return None,
        }
        Some(ServerResult::empty(()))
    }

    /// Tells the upstream we gave up on request `id` (best effort, in the
    /// background: the caller answers now).
    fn cancel_request(&self, id: rmcp::model::RequestId, reason: &str) {
        // Only a 2025 session, which keeps rmcp's client, is told.
        let Some(service) = self.clients.rmcp() else {
            return;
        };
        let peer = service.peer().clone();
        let params = CancelledNotificationParam::new(Some(id), Some(reason.to_owned()));
        tokio::spawn(async move {
            let _ = peer.notify_cancelled(params).await;
        });
    }

    fn send_failure(&self, error: &ServiceError) -> SendError {
        let upstream = match error {
            ServiceError::McpError(data) => Some(data.clone()),
            _ => None,
        };
        SendError::Failed {
            failure: self.classify(error, Phase::Call),
            upstream,
        }
    }

    /// Lists every tool (all pages), answering by `deadline`.
    pub async fn list_tools(&self, deadline: Instant) -> Result<Vec<Tool>, Failure> {
        Ok(self.list_surface(deadline).await?.tools)
    }

    /// Lists what the upstream offers (every page of every list its
    /// capabilities declare), answering by `deadline`.
    pub async fn list_surface(&self, deadline: Instant) -> Result<Surface, Failure> {
        let capabilities = self.capabilities();
        let listing = async {
            use ClientRequest as Ask;
            use ServerResult as Page;
            let tools = match capabilities.tools {
                Some(_) => {
                    self.list_every(
                        |peer| async move { peer.list_all_tools().await },
                        |params| Ask::ListToolsRequest(RequestOptionalParam::with_param(params)),
                        |page| match page {
                            Page::ListToolsResult(page) => Some((page.tools, page.next_cursor)),
                            _ => None,
                        },
                    )
                    .await?
                }
                None => Vec::new(),
            };
            let prompts = match capabilities.prompts {
                Some(_) => optional(
                    self.list_every(
                        |peer| async move { peer.list_all_prompts().await },
                        |params| Ask::ListPromptsRequest(RequestOptionalParam::with_param(params)),
                        |page| match page {
                            Page::ListPromptsResult(page) => Some((page.prompts, page.next_cursor)),
                            _ => None,
                        },
                    )
                    .await,
                )?,
                None => Vec::new(),
            };
            let (resources, templates) = match capabilities.resources {
                Some(_) => (
                    optional(
                        self.list_every(
                            |peer| async move { peer.list_all_resources().await },
                            |params| {
                                Ask::ListResourcesRequest(RequestOptionalParam::with_param(params))
                            },
                            |page| match page {
                                Page::ListResourcesResult(page) => {
                                    Some((page.resources, page.next_cursor))
                                }
                                _ => None,
                            },
                        )
                        .await,
                    )?,
                    optional(
                        self.list_every(
                            |peer| async move { peer.list_all_resource_templates().await },
                            |params| {
                                Ask::ListResourceTemplatesRequest(RequestOptionalParam::with_param(
                                    params,
                                ))
                            },
                            |page| match page {
                                Page::ListResourceTemplatesResult(page) => {
                                    Some((page.resource_templates, page.next_cursor))
                                }
                                _ => None,
                            },
                        )
                        .await,
                    )?,
                ),
                None => (Vec::new(), Vec::new()),
            };
            Ok::<_, ServiceError>(Surface {
                tools,
                prompts,
                resources,
                templates,
                capabilities: capabilities.clone(),
                instructions: self
                    .info
                    .as_ref()
                    .and_then(|info| info.instructions.clone()),
            })
        };
        match tokio::time::timeout_at(deadline, listing).await {
            Ok(Ok(surface)) => {
                if let Some(direct) = self.clients.direct() {
                    direct.listed(&surface.tools);
                }
                Ok(surface)
            }
            Ok(Err(error)) => Err(self.classify(&error, Phase::Connect)),
            Err(_) => Err(Failure::timeout("no answer to the listing in time")),
        }
    }

    /// Every page of a list: through rmcp's client (`rmcp`) while the
    /// session has one, else through the lane (`request` builds a page's
    /// request, `page` reads its items and the next cursor), as rmcp's
    /// client lists them.
    async fn list_every<T, F>(
        &self,
        rmcp: impl FnOnce(rmcp::service::Peer<RoleClient>) -> F,
        request: impl Fn(PaginatedRequestParams) -> ClientRequest,
        page: impl Fn(ServerResult) -> Option<(Vec<T>, Option<String>)>,
    ) -> Result<Vec<T>, ServiceError>
    where
        F: Future<Output = Result<Vec<T>, ServiceError>>,
    {
        if let Some(service) = self.clients.rmcp() {
            return rmcp(service.peer().clone()).await;
        }
        let Some(lane) = self.clients.direct() else {
            return Err(ServiceError::TransportClosed);
        };
        let mut items = Vec::new();
        let mut cursor = None;
        loop {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let mut listing = UpstreamRequest::from(request(params));
            let (id, token) = lane.next_id();
            let stamp = lane.stamp(&mut listing, None, token, None);
            let answer = match lane.send(listing, stamp, id, &self.handler).await {
                Ok(answer) => answer,
                Err(direct::Unsent::Failed(error)) => return Err(error),
                // Only a 2025 session can have expired, and it lists through rmcp.
                Err(direct::Unsent::Expired) => return Err(ServiceError::TransportClosed),
            };
            let (found, next) =
                page(answer.into_result()).ok_or(ServiceError::UnexpectedResponse)?;
            items.extend(found);
            cursor = next;
            if cursor.is_none() {
                return Ok(items);
            }
        }
    }

    /// What the upstream declared it can do.
    fn capabilities(&self) -> ServerCapabilities {
        self.info
            .as_ref()
            .map(|info| info.capabilities.clone())
            .unwrap_or_default()
    }

    /// rmcp caches list and read results, and serves a stale one when the
    /// upstream fails: a supervisor must see every failure, and the gateway
    /// keeps its own last good catalog.
    pub(crate) async fn disable_response_cache(&self) {
        if let Some(service) = self.clients.rmcp() {
            service
                .peer()
                .set_response_cache_config(ClientCacheConfig::disabled())
                .await;
        }
    }

    /// Whether the session's service loop has ended (stream closed, child exited).
    pub fn is_closed(&self) -> bool {
        match self.clients.rmcp() {
            Some(service) => service.is_transport_closed(),
            None => self.ended.is_cancelled(),
        }
    }

    /// After [`Session::cancel`]: waits up to `grace` for a stdio child's
    /// process group to exit on its own (rmcp closes its stdin, then sends
    /// SIGTERM), then kills whatever is left. No-op over HTTP.
    pub async fn wait_closed(&self, grace: Duration) {
        let Some(child) = &self.child else { return };
        let deadline = Instant::now() + grace;
        while child.is_alive() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        child.kill_group();
    }

    /// Ends the session without waiting: its service loop stops and closes the
    /// transport in the background (for a child: close stdin, SIGTERM, kill).
    /// Requests still in flight on it fail promptly instead of hanging.
    pub fn cancel(&self) {
        let ending = match self.clients.rmcp() {
            Some(service) => service.cancellation_token(),
            // Nothing to send on the way out: the listen stream closes
            // with the session.
            None => {
                if let Some(modern) = &self.modern {
                    modern.stop();
                }
                self.ended.cancel();
                return;
            }
        };
        let Some(reader) = self.modern.as_ref().and_then(|modern| modern.stop()) else {
            ending.cancel();
            return;
        };
        // Dropped after its runtime ended (a process or test tearing down):
        // nothing can be sent any more; just end it.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            ending.cancel();
            return;
        };
        // The listen stream's end goes out first (see `modern`), briefly.
        runtime.spawn(async move {
            let _ = tokio::time::timeout(modern::CANCEL_PATIENCE, reader).await;
            ending.cancel();
        });
    }

    /// Closes the session, waiting at most `grace` for a clean goodbye.
    pub async fn close(mut self, grace: Duration) {
        if let Some(reader) = self.modern.as_ref().and_then(|modern| modern.stop()) {
            let _ = tokio::time::timeout(modern::CANCEL_PATIENCE, reader).await;
        }
        self.ended.cancel();
        // The result only says how the loop ended; there is nothing left to do
        // with it, and a hung upstream is cut off by the timeout.
        if let Some(service) = self.clients.rmcp_mut() {
            let _ = service.close_with_timeout(grace).await;
        }
        // A grandchild, or a child that outlived `grace` (ignoring stdin EOF
        // and SIGTERM), must not survive the session.
        if let Some(child) = &self.child {
            child.kill_group();
        }
    }

    /// The failure an rmcp error means, using the HTTP recording when the
    /// error itself lost the status.
    fn classify(&self, error: &(dyn std::error::Error + 'static), phase: Phase) -> Failure {
        let failure = classify_recorded(error, self.recorder.as_ref());
        crate::oauth::on_session(failure, error, self.tokens.as_ref(), phase)
    }
}

/// How long a 2026-07-28 HTTP session waits for rmcp's client to wind down
/// once open (it has nothing to send; it takes milliseconds).
const WIND_DOWN_PATIENCE: Duration = Duration::from_secs(1);

/// How long opening a `subscriptions/listen` stream may take.
const LISTEN_PATIENCE: Duration = Duration::from_secs(5);

/// What an upstream offers: its lists, capabilities and instructions.
#[derive(Debug, Clone, Default)]
pub struct Surface {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    pub capabilities: ServerCapabilities,
    pub instructions: Option<String>,
}

/// Why a forwarded request has no result.
#[derive(Debug, Clone)]
pub enum SendError {
    /// It failed; `upstream` is the upstream's own JSON-RPC error, if it
    /// answered with one (the gateway passes it on unchanged).
    Failed {
        failure: Failure,
        upstream: Option<ErrorData>,
    },
    /// The downstream client cancelled it.
    Cancelled,
}

/// `request`'s method, for what is said about it: a call's is a constant
/// (no copy per call).
fn method_of(request: &UpstreamRequest) -> Cow<'static, str> {
    match request {
        UpstreamRequest::Call(_) => {
            Cow::Borrowed(<rmcp::model::CallToolRequestMethod as rmcp::model::ConstString>::VALUE)
        }
        UpstreamRequest::Relayed(other) => Cow::Owned(other.request().method().to_owned()),
    }
}

fn timed_out(method: &str) -> SendError {
    SendError::Failed {
        failure: Failure::timeout(format!("no answer to {method} in time")),
        upstream: None,
    }
}

fn unexpected(method: &str) -> Failure {
    Failure::new(
        crate::FailureKind::Protocol,
        format!("unexpected result type for {method}"),
    )
}

/// A list the server declared but does not serve (method not found) is empty.
fn optional<T>(listed: Result<Vec<T>, ServiceError>) -> Result<Vec<T>, ServiceError> {
    match listed {
        Err(ServiceError::McpError(error))
            if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
        {
            Ok(Vec::new())
        }
        other => other,
    }
}

/// Classifies with the recorder as fallback and fills in the method and path
/// of the response that carried the failure's status.
pub(crate) fn classify_recorded(
    error: &(dyn std::error::Error + 'static),
    recorder: Option<&HttpRecorder>,
) -> Failure {
    let last_error = recorder.and_then(HttpRecorder::last_error);
    let mut failure = classify_with_fallback(error, last_error.as_ref());
    if let Some(observed) = &last_error
        && failure.status == Some(observed.status)
        && failure.method.is_none()
    {
        failure.method = Some(observed.method.to_owned());
        failure.path = Some(observed.path.to_string());
    }
    failure
}

/// The HTTP client type sessions use (exported for benchmarks and tests).
pub type HttpClient = RecordingClient;
