//! The gateway's downstream side: one [`DownstreamSession`] per client
//! session (its peer, the log level it asked for, the resources it
//! subscribed to), and one [`DownstreamRequest`] per request forwarded
//! upstream, which carries the upstream's progress back to the client and
//! lets the client answer the upstream's sampling, elicitation and roots
//! requests made while it runs.

// Sampling, roots and logging are deprecated by SEP-2577 (protocol
// 2026-07-28), but 2025-era clients and servers use them: we relay them.
#![allow(deprecated)]

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, OnceLock},
};

use futures::future::BoxFuture;
use rmcp::{
    ErrorData, RoleServer,
    model::{
        ClientCapabilities, ClientResult, ErrorCode, GetExtensions, LoggingLevel,
        LoggingMessageNotification, LoggingMessageNotificationParam, ProgressNotification,
        ProgressNotificationParam, ProgressToken, RequestId, ServerConfig, ServerJsonRpcMessage,
        ServerNotification, ServerRequest,
    },
    service::{OriginatingRequestId, Peer, RequestContext},
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::{
    access::Caller,
    session::{Downstream, DownstreamLink},
};

/// One downstream client session.
#[derive(Debug, Default)]
pub struct DownstreamSession {
    /// Known once the client is initialized (never for a 2026-07-28
    /// stateless request, which has no session).
    peer: OnceLock<Peer<RoleServer>>,
    /// What this session was told at `initialize`, so every later
    /// `get_info` agrees with it.
    info: OnceLock<ServerConfig>,
    /// The level set with `logging/setLevel`; `None`: everything.
    log_level: Mutex<Option<LoggingLevel>>,
    /// Exposed URIs this session subscribed to.
    subscriptions: Mutex<HashSet<String>>,
    /// Who opened it, as the gateway identified them.
    caller: OnceLock<Arc<Caller>>,
    /// What each list (tools, prompts, resources) showed this session's
    /// caller when last told of (a fingerprint), with access rules: it is
    /// told a list changed only when what it may see did.
    seen: Mutex<[Option<u64>; 3]>,
    /// Its requests forwarded upstream and not yet answered (a client that
    /// went away does not end them).
    forwarded: std::sync::atomic::AtomicUsize,
}

/// One of a session's forwarded requests, counted while it lasts.
#[derive(Debug)]
struct Forwarded(Arc<DownstreamSession>);

impl Forwarded {
    fn new(session: &Arc<DownstreamSession>) -> Self {
        session
            .forwarded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Forwarded(session.clone())
    }
}

impl Drop for Forwarded {
    fn drop(&mut self) {
        self.0
            .forwarded
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl DownstreamSession {
    pub(super) fn caller(&self) -> Option<&Arc<Caller>> {
        self.caller.get()
    }

    pub(super) fn set_caller(&self, caller: Arc<Caller>) {
        let _ = self.caller.set(caller);
    }

    /// Whether `list` now shows this session's caller something else than
    /// when last asked (`fingerprint`), remembering it; the first time, only
    /// remembers it.
    pub(super) fn saw(&self, list: crate::events::ListKind, fingerprint: u64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let slot = &mut seen[list as usize];
        let changed = slot.is_some_and(|before| before != fingerprint);
        *slot = Some(fingerprint);
        changed
    }
    pub fn peer(&self) -> Option<&Peer<RoleServer>> {
        self.peer.get()
    }

    pub(super) fn set_peer(&self, peer: &Peer<RoleServer>) {
        let _ = self.peer.set(peer.clone());
    }

    pub(super) fn info(&self) -> Option<&ServerConfig> {
        self.info.get()
    }

    pub(super) fn set_info(&self, info: ServerConfig) -> &ServerConfig {
        self.info.get_or_init(|| info)
    }

    /// An opaque key telling this session apart (see `Downstream::log`).
    pub(super) fn key(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    pub(super) fn is_closed(&self) -> bool {
        self.peer().is_none_or(Peer::is_transport_closed)
    }

    /// Whether it keeps nothing a replayed `initialize` would not set
    /// again: no request forwarded and unanswered, no subscription, no log
    /// level.
    pub(super) fn holds_nothing(&self) -> bool {
        self.forwarded.load(std::sync::atomic::Ordering::Relaxed) == 0
            && self.subscriptions().is_empty()
            && self
                .log_level
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_none()
    }

    pub(super) fn set_log_level(&self, level: LoggingLevel) {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = Some(level);
    }

    /// Whether a message at `level` is wanted here.
    pub(super) fn wants(&self, level: LoggingLevel) -> bool {
        let wanted = *self.log_level.lock().unwrap_or_else(|p| p.into_inner());
        wanted.is_none_or(|wanted| severity(level) >= severity(wanted))
    }

    /// Records a subscription; `true` if it is new for this session.
    pub(super) fn subscribe(&self, uri: &str) -> bool {
        self.subscriptions().insert(uri.to_owned())
    }

    /// Forgets a subscription; `true` if this session had it.
    pub(super) fn unsubscribe(&self, uri: &str) -> bool {
        self.subscriptions().remove(uri)
    }

    pub(super) fn subscribed(&self, uri: &str) -> bool {
        self.subscriptions().contains(uri)
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.subscriptions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends a log message (in the background; a closed session misses it);
    /// whether it was sent.
    pub(super) fn log(&self, message: LoggingMessageNotificationParam) -> bool {
        self.log_during(message, None)
    }

    /// As [`Self::log`], logged during a request whose answer waits until it
    /// is sent (`relaying`, see [`Downstream::settled`]): a message logged
    /// during a request reaches its client before the request's answer.
    fn log_during(
        &self,
        message: LoggingMessageNotificationParam,
        relaying: Option<Arc<Relaying>>,
    ) -> bool {
        use std::sync::atomic::Ordering;
        let Some(peer) = self.peer().cloned() else {
            return false;
        };
        if !self.wants(message.level) {
            return false;
        }
        if let Some(relaying) = &relaying {
            relaying.pending.fetch_add(1, Ordering::AcqRel);
        }
        tokio::spawn(async move {
            let _ = peer.notify_logging_message(message).await;
            if let Some(relaying) = relaying {
                relaying.pending.fetch_sub(1, Ordering::AcqRel);
                relaying.sent.notify_waiters();
            }
        });
        true
    }
}

/// A relayed log message's `logger`: the connection, then the upstream's own.
pub(super) fn logger(connection: &str, upstream: Option<String>) -> String {
    match upstream {
        Some(logger) => format!("{connection}/{logger}"),
        None => connection.to_owned(),
    }
}

/// RFC 5424 order, least severe first.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The downstream of one forwarded request.
#[derive(Debug)]
pub struct DownstreamRequest {
    /// The downstream request's id: server-to-client requests made for it
    /// ride that request's stream.
    id: RequestId,
    /// Where the request's notifications go.
    to: MessagesTo,
    /// What the client declared it can answer.
    capabilities: Option<ClientCapabilities>,
    /// The client's own progress token (`None`: it asked for no progress).
    progress: Option<ProgressToken>,
    /// Progress in arrival order, to the task that sends it downstream with
    /// that token: started with the first progress, since most calls
    /// report none (docs/DECISIONS.md #122).
    relay: OnceLock<mpsc::UnboundedSender<ProgressNotificationParam>>,
    /// Progress handed to the relay and not yet sent downstream.
    relaying: Arc<Relaying>,
    /// How the upstream's questions reach the client.
    asking: Asking,
    /// The connection the request went to (log messages name it).
    connection: String,
    /// The log level a 2026-07-28 request asked for (`None`: no logs).
    log_level: Option<LoggingLevel>,
    /// A 2025 client's session: log messages go there, at its level.
    session: Option<Arc<DownstreamSession>>,
    /// Counts it among the session's forwarded requests.
    _forwarded: Option<Forwarded>,
}

/// How a client is asked what an upstream wants to know.
#[derive(Debug)]
enum Asking {
    /// A 2025-era client: a server-to-client request on its session.
    Request(Peer<RoleServer>),
    /// A 2026-07-28 client has no session to receive one: the question goes
    /// to the gateway's handler, which answers the client's request with
    /// `input_required` and hands the answer back when the client retries
    /// (see `mrtr`).
    Question(mpsc::UnboundedSender<Question>),
    /// A 2026-07-28 client that declared none of sampling, elicitation and
    /// roots: nothing can be asked of it, so its request has no rounds
    /// (`mrtr`), and every question is refused.
    Nothing,
}

/// A question an upstream asks a 2026-07-28 client, and where its answer goes.
#[derive(Debug)]
pub struct Question {
    pub request: ServerRequest,
    pub answer: oneshot::Sender<Result<ClientResult, ErrorData>>,
}

impl DownstreamRequest {
    /// The link for the request `context` belongs to, asking the client with
    /// server-to-client requests.
    pub fn link(
        context: &RequestContext<RoleServer>,
        connection: &str,
        session: &Arc<DownstreamSession>,
    ) -> DownstreamLink {
        Origin::of(context).link(
            connection,
            Asking::Request(context.peer.clone()),
            context.ct.clone(),
            Some(session),
        )
    }

    /// The link for request `id` of a 2025 session's client that the
    /// gateway answers without rmcp's server (`direct.rs`): what the client
    /// declared at `initialize`, `cancelled` as its cancellation, and its
    /// progress (with the client's `token`) sent to `answer` as messages
    /// for the request's own answer. `None` before the session is initialized.
    pub(super) fn direct(
        (session, caller): (&Arc<DownstreamSession>, Arc<Caller>),
        id: RequestId,
        connection: &str,
        cancelled: CancellationToken,
        progress: Option<ProgressToken>,
        answer: super::answer::BeforeSender,
    ) -> Option<DownstreamLink> {
        let peer = session.peer()?.clone();
        let origin = Origin {
            id,
            to: MessagesTo::Answer(answer),
            capabilities: peer.peer_info().map(|info| info.capabilities.clone()),
            progress,
            log_level: None,
            caller: Some(caller),
        };
        Some(origin.link(connection, Asking::Request(peer), cancelled, Some(session)))
    }

    /// The link for a request of a 2026-07-28 client (from `origin`):
    /// questions arrive on the returned channel; `cancelled` cancels the
    /// forwarded request (it may outlive the client's first request, see
    /// `mrtr`).
    /// The link for a 2026-07-28 request whose client can be asked
    /// nothing (see [`Origin::may_be_asked`]).
    pub(super) fn unasked(
        origin: Origin,
        connection: &str,
        cancelled: CancellationToken,
    ) -> DownstreamLink {
        origin.link(connection, Asking::Nothing, cancelled, None)
    }

    pub(super) fn questioning(
        origin: Origin,
        connection: &str,
        cancelled: CancellationToken,
    ) -> (DownstreamLink, mpsc::UnboundedReceiver<Question>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            origin.link(connection, Asking::Question(tx), cancelled, None),
            rx,
        )
    }
}

/// The downstream request a link is for: its id, where its notifications
/// go, and what its client declared (capabilities, a progress token, a log
/// level).
#[derive(Debug)]
pub(super) struct Origin {
    id: RequestId,
    to: MessagesTo,
    capabilities: Option<ClientCapabilities>,
    progress: Option<ProgressToken>,
    log_level: Option<LoggingLevel>,
    /// Who its client is, as the gateway identified it.
    caller: Option<Arc<Caller>>,
}

/// Where a request's notifications (progress, log messages) go.
#[derive(Debug, Clone)]
enum MessagesTo {
    /// The client's session (rmcp sends them on the request's stream).
    Session(Peer<RoleServer>),
    /// The request's answer, which the gateway writes itself (`direct.rs`).
    Answer(super::answer::BeforeSender),
}

impl MessagesTo {
    /// Sends `notification`; `false` once the client is gone.
    async fn send(&self, notification: ServerNotification) -> bool {
        match self {
            MessagesTo::Session(peer) => peer.send_notification(notification).await.is_ok(),
            MessagesTo::Answer(answer) => {
                answer.send(ServerJsonRpcMessage::notification(notification))
            }
        }
    }

    /// Sends `notification` without waiting (in the background to a
    /// session; at once, so in order, to an answer).
    fn post(&self, notification: ServerNotification) {
        match self {
            MessagesTo::Session(peer) => {
                let peer = peer.clone();
                tokio::spawn(async move {
                    let _ = peer.send_notification(notification).await;
                });
            }
            MessagesTo::Answer(answer) => {
                answer.send(ServerJsonRpcMessage::notification(notification));
            }
        }
    }
}

impl Origin {
    /// The request of `context`, which rmcp's server serves.
    pub(super) fn of(context: &RequestContext<RoleServer>) -> Self {
        Origin {
            id: context.id.clone(),
            to: MessagesTo::Session(context.peer.clone()),
            capabilities: context.client_capabilities(),
            progress: context.meta.get_progress_token(),
            log_level: context.meta.log_level(),
            caller: Some(super::rights::caller_of(context)),
        }
    }

    /// A 2026-07-28 request `id` that the gateway answers itself
    /// (`direct.rs`): what its `_meta` declared, and its notifications sent
    /// to `answer` as messages for the request's own answer.
    pub(super) fn answered(
        (id, caller): (RequestId, Arc<Caller>),
        capabilities: ClientCapabilities,
        progress: Option<ProgressToken>,
        log_level: Option<LoggingLevel>,
        answer: super::answer::BeforeSender,
    ) -> Self {
        Origin {
            id,
            to: MessagesTo::Answer(answer),
            capabilities: Some(capabilities),
            progress,
            log_level,
            caller: Some(caller),
        }
    }

    /// Whether a question may go to its client: it declared sampling,
    /// elicitation or roots (the others are refused as they come).
    pub(super) fn may_be_asked(&self) -> bool {
        self.capabilities.as_ref().is_some_and(|capabilities| {
            capabilities.sampling.is_some()
                || capabilities.elicitation.is_some()
                || capabilities.roots.is_some()
        })
    }

    fn link(
        self,
        connection: &str,
        asking: Asking,
        cancelled: CancellationToken,
        session: Option<&Arc<DownstreamSession>>,
    ) -> DownstreamLink {
        let capabilities = self.capabilities.clone();
        let log_level = self.log_level;
        let caller = self.caller.clone();
        let downstream = self.request(connection, asking, session);
        DownstreamLink::new(Arc::new(downstream), cancelled)
            .with_capabilities(capabilities)
            .with_log_level(log_level)
            .with_caller(caller)
    }

    fn request(
        self,
        connection: &str,
        asking: Asking,
        session: Option<&Arc<DownstreamSession>>,
    ) -> DownstreamRequest {
        DownstreamRequest {
            id: self.id,
            to: self.to,
            capabilities: self.capabilities,
            progress: self.progress,
            relay: OnceLock::new(),
            relaying: Arc::default(),
            asking,
            connection: connection.to_owned(),
            log_level: self.log_level,
            session: session.cloned(),
            _forwarded: session.map(Forwarded::new),
        }
    }
}

/// How many progress notifications and log messages of a request wait to be
/// sent downstream, and a wake-up for whoever waits for none to.
#[derive(Debug, Default)]
struct Relaying {
    pending: std::sync::atomic::AtomicUsize,
    sent: tokio::sync::Notify,
}

/// The longest an answer waits for progress still being relayed.
const SETTLE_BOUND: std::time::Duration = std::time::Duration::from_secs(1);

/// Sends progress downstream one at a time (so it stays in order) with the
/// client's token, until the request ends.
async fn relay_progress(
    to: MessagesTo,
    token: ProgressToken,
    mut progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    relaying: Arc<Relaying>,
) {
    use std::sync::atomic::Ordering;
    while let Some(mut params) = progress.recv().await {
        params.progress_token = token.clone();
        let sent = to.send(ProgressNotification::new(params).into()).await;
        relaying.pending.fetch_sub(1, Ordering::AcqRel);
        relaying.sent.notify_waiters();
        if !sent {
            // The client is gone: nothing more will be sent, nor waited for.
            relaying.pending.store(0, Ordering::Release);
            relaying.sent.notify_waiters();
            return;
        }
    }
}

impl Downstream for DownstreamRequest {
    /// The gateway writes a tool's answer for its client with its
    /// structured content as it came (rmcp's server path reads it then).
    fn takes_kept_answers(&self) -> bool {
        true
    }

    fn progress(&self, progress: ProgressNotificationParam) {
        if let Some(token) = &self.progress {
            let relay = self.relay.get_or_init(|| {
                let (relay, progress) = mpsc::unbounded_channel();
                tokio::spawn(relay_progress(
                    self.to.clone(),
                    token.clone(),
                    progress,
                    self.relaying.clone(),
                ));
                relay
            });
            self.relaying
                .pending
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            if relay.send(progress).is_err() {
                self.relaying
                    .pending
                    .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            }
        }
    }

    fn settled(&self) -> futures::future::BoxFuture<'static, ()> {
        // The usual case, nothing on its way: settled now (a box of nothing
        // allocates nothing, and no timer is set).
        if self
            .relaying
            .pending
            .load(std::sync::atomic::Ordering::Acquire)
            == 0
        {
            return Box::pin(std::future::ready(()));
        }
        let relaying = self.relaying.clone();
        Box::pin(async move {
            let all_sent = async {
                loop {
                    let sent = relaying.sent.notified();
                    if relaying.pending.load(std::sync::atomic::Ordering::Acquire) == 0 {
                        return;
                    }
                    sent.await;
                }
            };
            let _ = tokio::time::timeout(SETTLE_BOUND, all_sent).await;
        })
    }

    fn log(&self, mut message: LoggingMessageNotificationParam) -> Option<usize> {
        message.logger = Some(logger(&self.connection, message.logger.take()));
        // A 2025 client gets log messages on its session, at its level; a
        // 2026-07-28 one on the requests that asked for them.
        if let Some(session) = &self.session {
            return session
                .log_during(message, Some(self.relaying.clone()))
                .then(|| session.key());
        }
        let wanted = self.log_level?;
        if severity(message.level) >= severity(wanted) {
            self.to
                .post(LoggingMessageNotification::new(message).into());
        }
        None
    }

    fn request(
        &self,
        request: ServerRequest,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>> {
        // A 2026-07-28 client has no ping to be asked; the upstream asks
        // whether its client (the gateway) is alive, and it is.
        if matches!(request, ServerRequest::PingRequest(_))
            && matches!(self.asking, Asking::Question(_) | Asking::Nothing)
        {
            return Box::pin(std::future::ready(Ok(ClientResult::empty(()))));
        }
        if let Some(missing) = missing_capability(self.capabilities.as_ref(), &request) {
            return Box::pin(std::future::ready(Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("the client connected to the gateway does not support {missing}"),
                None,
            ))));
        }
        match &self.asking {
            Asking::Nothing => Box::pin(std::future::ready(Err(super::mrtr::not_askable()))),
            Asking::Request(peer) => {
                Box::pin(ask_by_request(peer.clone(), self.id.clone(), request))
            }
            Asking::Question(questions) => {
                let (answer, answered) = oneshot::channel();
                let asked = questions.send(Question { request, answer }).is_ok();
                Box::pin(async move {
                    match (asked, answered.await) {
                        (true, Ok(answer)) => answer,
                        _ => Err(ErrorData::internal_error(
                            "the client's request ended before it answered",
                            None,
                        )),
                    }
                })
            }
        }
    }
}

/// Sends `request` to a 2025-era client as a server-to-client request on the
/// stream of its request `id`.
async fn ask_by_request(
    peer: Peer<RoleServer>,
    id: RequestId,
    mut request: ServerRequest,
) -> Result<ClientResult, ErrorData> {
    request.extensions_mut().insert(OriginatingRequestId(id));
    // A task of its own: rmcp tags what a task sends with the request that
    // task serves, which here would be the upstream's request, and the
    // downstream session would route it to the wrong stream.
    let sent = tokio::spawn(async move { peer.send_request(request).await });
    match sent.await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(rmcp::ServiceError::McpError(error))) => Err(error),
        Ok(Err(error)) => Err(ErrorData::internal_error(
            format!("the client did not answer: {error}"),
            None,
        )),
        Err(_) => Err(ErrorData::internal_error("the gateway stopped", None)),
    }
}

/// The capability `request` needs that the downstream client did not declare.
fn missing_capability(
    capabilities: Option<&ClientCapabilities>,
    request: &ServerRequest,
) -> Option<&'static str> {
    let has = |present: fn(&ClientCapabilities) -> bool| capabilities.is_some_and(present);
    match request {
        ServerRequest::CreateMessageRequest(_) if !has(|c| c.sampling.is_some()) => {
            Some("sampling")
        }
        ServerRequest::ElicitRequest(_) if !has(|c| c.elicitation.is_some()) => Some("elicitation"),
        ServerRequest::ListRootsRequest(_) if !has(|c| c.roots.is_some()) => Some("roots"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;

    use super::*;

    /// A 2026-07-28 client that declared none of sampling, elicitation and
    /// roots is asked nothing: a ping is answered for it, a question it did
    /// not declare is refused by name, anything else as in rounds.
    #[tokio::test]
    async fn a_client_that_can_be_asked_nothing_is_asked_nothing() {
        use crate::session::Downstream;
        let origin = |capabilities| {
            let (answer, _) = super::super::answer::Before::channel();
            let caller = (RequestId::Number(1), Caller::open());
            Origin::answered(caller, capabilities, None, None, answer)
        };
        for asks in [
            ClientCapabilities::builder().enable_sampling().build(),
            ClientCapabilities::builder().enable_elicitation().build(),
            ClientCapabilities::builder().enable_roots().build(),
        ] {
            assert!(origin(asks).may_be_asked());
        }
        let unasked = origin(ClientCapabilities::default());
        assert!(!unasked.may_be_asked());
        let request = unasked.request("a", Asking::Nothing, None);
        let ping = ServerRequest::PingRequest(Default::default());
        assert!(request.request(ping).await.is_ok());
        let sampling = ServerRequest::CreateMessageRequest(rmcp::model::CreateMessageRequest::new(
            rmcp::model::CreateMessageRequestParams::new(vec![], 10),
        ));
        let refused = request.request(sampling).await.unwrap_err();
        assert!(
            refused.message.contains("does not support sampling"),
            "{refused:?}"
        );
        let other = ServerRequest::CustomRequest(rmcp::model::CustomRequest::new("x/y", None));
        let refused = request.request(other).await.unwrap_err();
        assert_eq!(refused, super::super::mrtr::not_askable());
    }

    #[tokio::test]
    async fn progress_is_relayed_in_order_with_the_clients_token_once_there_is_some() {
        let (answer, messages) = super::super::answer::Before::channel();
        let token = ProgressToken(NumberOrString::String("client-token".into()));
        let origin = Origin::answered(
            (RequestId::Number(1), Caller::open()),
            ClientCapabilities::default(),
            Some(token),
            None,
            answer,
        );
        let (questions, _) = mpsc::unbounded_channel();
        let request = origin.request("a", Asking::Question(questions), None);
        // No progress yet: nothing started for it.
        assert!(request.relay.get().is_none());
        for step in [1.0, 2.0] {
            let upstream_token = ProgressToken(NumberOrString::Number(7));
            request.progress(ProgressNotificationParam::new(upstream_token, step));
        }
        assert!(request.relay.get().is_some());
        request.settled().await;
        for step in [1.0, 2.0] {
            let message = serde_json::to_value(messages.recv().await).unwrap();
            assert_eq!(message["method"], "notifications/progress", "{message}");
            assert_eq!(message["params"]["progressToken"], "client-token");
            assert_eq!(message["params"]["progress"], step);
        }

        // A client that asked for no progress gets none, and starts nothing.
        let (answer, messages) = super::super::answer::Before::channel();
        let origin = Origin::answered(
            (RequestId::Number(2), Caller::open()),
            ClientCapabilities::default(),
            None,
            None,
            answer,
        );
        let (questions, _) = mpsc::unbounded_channel();
        let request = origin.request("a", Asking::Question(questions), None);
        request.progress(ProgressNotificationParam::new(
            ProgressToken(NumberOrString::Number(7)),
            1.0,
        ));
        assert!(request.relay.get().is_none());
        request.settled().await;
        drop(request);
        assert!(messages.try_recv().is_none());
    }
}
