//! Our rmcp `ClientHandler`: identifies us to the upstream, declares what a
//! downstream client may answer (sampling, elicitation, roots), and passes on
//! what the upstream sends us: notifications to whoever owns the session,
//! progress and server-to-client requests to the downstream request they
//! belong to (see [`super::relay`]).

// Sampling, roots and logging are deprecated by SEP-2577 (protocol
// 2026-07-28), but 2025-era servers and clients use them: we relay them.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::{
    ClientHandler, ErrorData,
    model::{
        ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequest,
        CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
        ElicitResult, ErrorCode, Implementation, ListRootsRequest, ListRootsResult,
        LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion, RequestId,
        ResourceUpdatedNotificationParam, ServerNotification, ServerRequest,
    },
    service::{
        ClientLifecycleMode, InboundStreamOrigin, NotificationContext, RequestContext, RoleClient,
    },
};
use tokio::sync::mpsc;

use crate::{config::UpstreamProtocol, events::ListKind};

use super::relay::Links;

/// The version offered at `initialize`: the newest with that handshake.
const LEGACY_OFFER: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The version a connection starts with when its config pins one
/// (`protocol`); `None` asks the server what it speaks.
pub(crate) fn pinned_version(protocol: UpstreamProtocol) -> Option<ProtocolVersion> {
    match protocol {
        UpstreamProtocol::Newest => None,
        UpstreamProtocol::V2025_11_25 => Some(LEGACY_OFFER),
        UpstreamProtocol::V2026_07_28 => Some(ProtocolVersion::V_2026_07_28),
    }
}

/// What an upstream told us outside any request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// `notifications/{tools,prompts,resources}/list_changed`: reload that list.
    ListChanged(ListKind),
    /// `notifications/resources/updated` for a subscribed URI.
    ResourceUpdated { uri: String },
    /// `notifications/message`: a log message, and the downstream sessions
    /// the requests in flight already passed it to (see `relay`).
    Log {
        message: LoggingMessageNotificationParam,
        reached: Vec<usize>,
    },
}

/// Handler for one session: where to send events, and the links of the
/// session's forwarded requests in flight.
#[derive(Debug, Clone, Default)]
pub struct SessionHandler {
    events: Option<mpsc::UnboundedSender<SessionEvent>>,
    links: Arc<Links>,
    /// The protocol version the upstream agreed to last time, if known.
    known: Option<ProtocolVersion>,
}

impl SessionHandler {
    /// A handler that forwards events to `events`.
    pub fn new(events: mpsc::UnboundedSender<SessionEvent>) -> Self {
        SessionHandler {
            events: Some(events),
            links: Arc::default(),
            known: None,
        }
    }

    /// After a first connect whose `server/discover` got an answer that is
    /// not a discover result (some 2025-era servers answer any unknown method
    /// with an empty result): the server is 2025-era after all, and the next
    /// attempt starts with `initialize`. `None` when that was not the case.
    pub(crate) fn after_failed_discover(
        &self,
        error: &rmcp::service::ClientInitializeError,
    ) -> Option<SessionHandler> {
        let probed = matches!(self.lifecycle(), ClientLifecycleMode::Auto { .. });
        let misanswered = matches!(
            error,
            rmcp::service::ClientInitializeError::ExpectedInitResult(_)
        );
        (probed && misanswered).then(|| self.clone().knowing(Some(LEGACY_OFFER)))
    }

    /// Starts the session with the protocol the upstream spoke last time.
    pub fn knowing(mut self, known: Option<ProtocolVersion>) -> Self {
        self.known = known;
        self
    }

    /// How the session starts: with the protocol the upstream agreed to last
    /// time (remembered per connection), or the first time by asking:
    /// `server/discover` (protocol 2026-07-28), falling back to `initialize`
    /// when the upstream answers like a 2025-era server (rmcp gives it 10 s
    /// before falling back). We never offer a version the server did not list.
    pub fn lifecycle(&self) -> ClientLifecycleMode {
        match &self.known {
            Some(version) if !version.has_initialize() => ClientLifecycleMode::Discover {
                preferred_versions: vec![version.clone()],
            },
            Some(_) => ClientLifecycleMode::Initialize,
            None => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(LEGACY_OFFER),
            },
        }
    }

    pub(crate) fn links(&self) -> &Arc<Links> {
        &self.links
    }

    pub(crate) fn emit(&self, event: SessionEvent) {
        if let Some(events) = &self.events {
            // The owner may be gone (session closing); nothing to tell then.
            let _ = events.send(event);
        }
    }

    /// Hands a server-to-client request to the downstream of the request it
    /// arrived for: over streamable HTTP the POST's stream names it; without
    /// that (stdio), the most recently sent request in flight is the best
    /// guess. With none in flight the upstream gets an error at once.
    async fn ask(
        &self,
        request: ServerRequest,
        context: &RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        let origin = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id),
            _ => None,
        };
        self.ask_for(request, origin).await
    }

    /// [`Self::ask`] for a request that arrived on the stream of the request
    /// with id `origin` (if known).
    pub(crate) async fn ask_for(
        &self,
        request: ServerRequest,
        origin: Option<&RequestId>,
    ) -> Result<ClientResult, ErrorData> {
        let origin = origin.and_then(|id| self.links.by_request(id));
        match origin.or_else(|| self.links.most_recent()) {
            Some(downstream) => downstream.request(request).await,
            None => unattended(&request),
        }
    }
}

/// What a client without a user answers (a request with no client behind
/// it: the library, `mcp-supervisor call`; or one the upstream sends on a
/// stream no request of ours is waiting on): no to an elicitation, no
/// roots, and a ping is answered (we are alive). Sampling needs a client:
/// an error at once, never silence.
pub(crate) fn unattended(request: &ServerRequest) -> Result<ClientResult, ErrorData> {
    match request {
        ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
        ServerRequest::ElicitRequest(_) => Ok(ClientResult::ElicitResult(ElicitResult::new(
            rmcp::model::ElicitationAction::Decline,
        ))),
        ServerRequest::ListRootsRequest(_) => {
            Ok(ClientResult::ListRootsResult(ListRootsResult::default()))
        }
        _ => Err(ErrorData::new(
            ErrorCode::INTERNAL_ERROR,
            format!(
                "no client is waiting on a request of this session to answer {}",
                server_request_method(request)
            ),
            None,
        )),
    }
}

/// The method of a server-to-client request, for messages.
fn server_request_method(request: &ServerRequest) -> &'static str {
    match request {
        ServerRequest::PingRequest(_) => "ping",
        ServerRequest::CreateMessageRequest(_) => "sampling/createMessage",
        ServerRequest::ListRootsRequest(_) => "roots/list",
        ServerRequest::ElicitRequest(_) => "elicitation/create",
        ServerRequest::CustomRequest(_) => "a custom request",
        _ => "a request",
    }
}

/// The answer a downstream gave, as the result type the upstream expects.
fn expect<T>(
    answer: Result<ClientResult, ErrorData>,
    pick: impl FnOnce(ClientResult) -> Option<T>,
) -> Result<T, ErrorData> {
    pick(answer?).ok_or_else(|| {
        ErrorData::internal_error("the client answered with an unexpected result", None)
    })
}

impl ClientHandler for SessionHandler {
    fn get_info(&self) -> ClientConfig {
        // Declared so servers show the tools that need them; answered by the
        // downstream client of the request in flight (or refused with an error).
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_sampling()
            .enable_elicitation()
            .build();
        // At `initialize`, offer what the upstream agreed to last time, or
        // the newest version with an `initialize` handshake: a 2025-era server
        // must not be offered a version it may refuse.
        let offer = match &self.known {
            Some(version) if version.has_initialize() => version.clone(),
            _ => LEGACY_OFFER,
        };
        ClientConfig::new(
            capabilities,
            Implementation::new("mcp-supervisor", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(offer)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        expect(self.ask(request, &context).await, |answer| match answer {
            ClientResult::CreateMessageResult(result) => Some(*result),
            _ => None,
        })
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        expect(self.ask(request, &context).await, |answer| match answer {
            ClientResult::ElicitResult(result) => Some(result),
            _ => None,
        })
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        expect(self.ask(request, &context).await, |answer| match answer {
            ClientResult::ListRootsResult(result) => Some(result),
            _ => None,
        })
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progressed(params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logged(params);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.emit(SessionEvent::ResourceUpdated { uri: params.uri });
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(SessionEvent::ListChanged(ListKind::Tools));
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(SessionEvent::ListChanged(ListKind::Prompts));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(SessionEvent::ListChanged(ListKind::Resources));
    }
}

impl SessionHandler {
    /// What the notifications above do, for one that arrived outside rmcp's
    /// service (see `super::stateless`).
    pub(crate) fn notified(&self, notification: ServerNotification) {
        match notification {
            ServerNotification::ProgressNotification(progress) => self.progressed(progress.params),
            ServerNotification::LoggingMessageNotification(logged) => self.logged(logged.params),
            ServerNotification::ResourceUpdatedNotification(updated) => {
                self.emit(SessionEvent::ResourceUpdated {
                    uri: updated.params.uri,
                });
            }
            ServerNotification::ToolListChangedNotification(_) => {
                self.emit(SessionEvent::ListChanged(ListKind::Tools));
            }
            ServerNotification::PromptListChangedNotification(_) => {
                self.emit(SessionEvent::ListChanged(ListKind::Prompts));
            }
            ServerNotification::ResourceListChangedNotification(_) => {
                self.emit(SessionEvent::ListChanged(ListKind::Resources));
            }
            _ => {}
        }
    }

    fn progressed(&self, params: ProgressNotificationParam) {
        // Progress of a request no longer in flight has no one to go to.
        if let Some(downstream) = self.links.by_token(&params.progress_token) {
            downstream.progress(params);
        }
    }

    fn logged(&self, params: LoggingMessageNotificationParam) {
        // The requests in flight first, so a message logged during a request
        // reaches its client before the request's answer does.
        let reached = self
            .links
            .all()
            .iter()
            .filter_map(|downstream| downstream.log(params.clone()))
            .collect();
        self.emit(SessionEvent::Log {
            message: params,
            reached,
        });
    }
}
