//! Requests an HTTP session sends itself, as the one POST rmcp's client
//! would send, instead of through rmcp's service loop and HTTP transport
//! worker (docs/DECISIONS.md #79 and #83):
//!
//! - a 2025 session's plain `tools/call`s (the service loop, the transport
//!   worker and their channels were about half of the gateway's CPU per
//!   call, docs/BENCHMARKS.md, P5);
//! - every request of a 2026-07-28 session, which keeps no rmcp client once
//!   open (its channels and tasks were most of the memory of an idle
//!   session, P4), and its `subscriptions/listen` stream.
//!
//! A request sent here crosses no task or channel on its way. What rmcp's
//! client does for such a request, this does too, with the same HTTP client
//! (so the same recording, authorization, limits and errors):
//!
//! - the same body: for 2026-07-28, `_meta` with the protocol version, our
//!   client info and capabilities and what the caller adds (log level, a
//!   downstream's capabilities); a progress token for both generations;
//! - the same headers: `MCP-Protocol-Version`, the session id (2025), and
//!   SEP-2243's `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` (2026-07-28, see
//!   `mcp_headers`), with tools whose `x-mcp-header` annotations are
//!   unusable left out of its listings, as rmcp leaves them out;
//! - an answer as JSON, or as an event stream whose progress, log messages
//!   and server-to-client requests go where rmcp would send them, resumed
//!   with `Last-Event-ID` when it ends early after an event id (SEP-1699);
//! - a listen stream opened only on its acknowledgement, for no more than
//!   was asked, ended by anything that does not belong on it;
//! - cancelling: closing the stream (2026-07-28), and for a 2025 session
//!   also `notifications/cancelled`, which the session sends through rmcp;
//! - a 2025 session the upstream has forgotten (404) is rmcp's to
//!   re-initialize: the call is handed to it (it did not run).
//!
//! A 2025 session sends here only calls of tools whose name travels as a
//! bare header value and whose input schema promotes no argument to a
//! header; its other requests go through rmcp.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use futures::{FutureExt, StreamExt, future::BoxFuture, stream::BoxStream};
use http::{HeaderName, HeaderValue};
use rmcp::{
    ServiceError,
    model::{
        ClientCapabilities, ClientConfig, ClientJsonRpcMessage, ClientRequest, GetMeta, JsonObject,
        NumberOrString, ProgressToken, ProtocolVersion, RequestId, RequestMetaObject,
        ServerJsonRpcMessage, ServerNotification, ServerResult, SubscriptionFilter,
        SubscriptionsListenRequest, SubscriptionsListenRequestParams, Tool,
    },
    transport::{
        DynamicTransportError,
        common::client_side_sse::SseRetryPolicy,
        streamable_http_client::{
            StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
            StreamableHttpPostResponse, StreamableHttpResponseLimits,
        },
    },
};
use sse_stream::{Error as SseError, Sse};

use super::handler::SessionHandler;
use crate::{
    codec::answers,
    codec::mcp_headers,
    http::{SessionIds, Stamp},
};

type HttpError = StreamableHttpError<reqwest::Error>;
type Events = BoxStream<'static, Result<Sse, SseError>>;

/// rmcp's HTTP client interface for the two calls made here, as an object
/// (the session's client is ours, or it wrapped for OAuth).
trait Poster: Send + Sync {
    fn post(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> BoxFuture<'static, Result<StreamableHttpPostResponse, HttpError>>;

    fn resume(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: String,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> BoxFuture<'static, Result<Events, HttpError>>;
}

impl<C> Poster for C
where
    C: StreamableHttpClient<Error = reqwest::Error> + Clone + Send + Sync + 'static,
{
    fn post(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> BoxFuture<'static, Result<StreamableHttpPostResponse, HttpError>> {
        let client = self.clone();
        async move {
            client
                .post_message_with_response_limits(uri, message, session_id, auth, headers, limits)
                .await
        }
        .boxed()
    }

    fn resume(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: String,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> BoxFuture<'static, Result<Events, HttpError>> {
        let client = self.clone();
        async move {
            client
                .get_stream_with_max_sse_event_size(
                    uri,
                    session_id,
                    Some(last_event_id),
                    auth,
                    headers,
                    max_sse_event_size,
                )
                .await
        }
        .boxed()
    }
}

/// How an HTTP session sends its plain tool calls (see the module).
pub(crate) struct Stateless {
    /// The transport's parts, its headers with `MCP-Protocol-Version`.
    parts: StatelessParts,
    /// A 2025 session (with `initialize`), whose requests carry its id.
    legacy: bool,
    /// What every 2026-07-28 request carries in `_meta` (protocol version,
    /// client info and capabilities), built once, and for tool calls,
    /// which `http::outgoing` writes, encoded once.
    stamp: Option<(RequestMetaObject, Stamp)>,
    /// The stamp of the last downstream client whose capabilities a call
    /// carried: the session's, with that client's capabilities in place of
    /// ours, encoded once for as long as its calls keep coming.
    client_stamp: Mutex<Option<(ClientCapabilities, Stamp)>>,
    /// Request ids and progress tokens, apart from rmcp's (which count up
    /// from 0 in 32 bits) so the session's links never mix them up.
    next_id: AtomicI64,
    /// A 2025 session's tools whose calls may be sent here, from the last
    /// listing.
    plain: RwLock<HashSet<String>>,
    /// A 2026-07-28 session's tools that mark arguments for headers, with
    /// their input schemas, from the listings (as rmcp's client keeps them).
    annotated: RwLock<HashMap<String, Arc<JsonObject>>>,
}

impl std::fmt::Debug for Stateless {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No URL, headers or token: any of them may carry a credential.
        f.debug_struct("Stateless")
            .field("legacy", &self.legacy)
            .finish_non_exhaustive()
    }
}

/// What a session's HTTP transport was built with, kept to send its plain
/// tool calls once the session is open.
pub(crate) struct StatelessParts {
    client: Arc<dyn Poster>,
    uri: Arc<str>,
    session: SessionIds,
    headers: HashMap<HeaderName, HeaderValue>,
    auth: Option<String>,
    limits: StreamableHttpResponseLimits,
    retry: Arc<dyn SseRetryPolicy>,
}

impl StatelessParts {
    pub(crate) fn new<C>(
        client: &C,
        session: SessionIds,
        config: &StreamableHttpClientTransportConfig,
    ) -> Self
    where
        C: StreamableHttpClient<Error = reqwest::Error> + Clone + Send + Sync + 'static,
    {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = config.max_sse_event_size;
        limits.max_json_response_size = config.max_json_response_size;
        limits.max_error_response_size = config.max_error_response_size;
        StatelessParts {
            client: Arc::new(client.clone()),
            uri: config.uri.clone(),
            session,
            headers: config.custom_headers.clone(),
            auth: config.auth_header.clone(),
            limits,
            retry: config.retry_config.clone(),
        }
    }

    /// The sender for a session that agreed to `version`, as the client
    /// `us` (what rmcp's client declared for the session).
    pub(crate) fn for_version(
        mut self,
        version: Option<&ProtocolVersion>,
        us: &ClientConfig,
    ) -> Option<Stateless> {
        let version = version?;
        self.headers.insert(
            mcp_headers::PROTOCOL_VERSION,
            HeaderValue::from_str(version.as_str()).ok()?,
        );
        let legacy = version.has_initialize();
        // rmcp stamps its client context on 2026-07-28 requests only.
        let stamp = match legacy {
            true => None,
            false => {
                let meta = RequestMetaObject::with_client_context(
                    version.clone(),
                    us.client_info.clone(),
                    us.capabilities.clone(),
                );
                let encoded = Stamp::new(&meta).ok()?;
                Some((meta, encoded))
            }
        };
        Some(Stateless {
            parts: self,
            legacy,
            stamp,
            client_stamp: Mutex::default(),
            next_id: AtomicI64::new(FIRST_ID),
            plain: RwLock::default(),
            annotated: RwLock::default(),
        })
    }
}

/// Past anything rmcp's 32-bit counters reach.
const FIRST_ID: i64 = 1 << 40;

/// Where the answer to an upstream's request goes: a POST of its own, as
/// rmcp's client sends it.
#[derive(Clone)]
struct Reply {
    client: Arc<dyn Poster>,
    uri: Arc<str>,
    session: Option<Arc<str>>,
    auth: Option<String>,
    headers: HashMap<HeaderName, HeaderValue>,
    limits: StreamableHttpResponseLimits,
}

impl Reply {
    /// Posts `answer` (the upstream's request `asked` answered, or refused).
    async fn send(
        self,
        asked: RequestId,
        answer: Result<rmcp::model::ClientResult, rmcp::ErrorData>,
    ) {
        let message = match answer {
            Ok(result) => ClientJsonRpcMessage::response(result, asked),
            Err(error) => ClientJsonRpcMessage::error(error, Some(asked)),
        };
        let posted = self.client.post(
            self.uri,
            message,
            self.session,
            self.auth,
            self.headers,
            self.limits,
        );
        if let Err(error) = posted.await {
            tracing::debug!(%error, "could not answer the upstream's request");
        }
    }
}

impl Stateless {
    /// Remembers which of the upstream's `tools` calls may be sent here.
    pub(crate) fn listed(&self, tools: &[Tool]) {
        let plain = tools
            .iter()
            .filter(|tool| {
                mcp_headers::bare_header_value(&tool.name)
                    && !mcp_headers::promotes_headers(&tool.input_schema)
            })
            .map(|tool| tool.name.to_string())
            .collect();
        *self.plain.write().unwrap_or_else(|p| p.into_inner()) = plain;
    }

    /// Whether `request` is sent here: every request of a 2026-07-28
    /// session, a 2025 session's plain tool calls.
    pub(crate) fn takes(&self, request: &ClientRequest) -> bool {
        if !self.legacy {
            return true;
        }
        let ClientRequest::CallToolRequest(call) = request else {
            return false;
        };
        self.plain
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(call.params.name.as_ref())
    }

    /// A fresh request id, and the progress token that goes with it.
    pub(crate) fn next_id(&self) -> (RequestId, ProgressToken) {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        (
            NumberOrString::Number(n),
            ProgressToken(NumberOrString::Number(n)),
        )
    }

    /// Whether the session has an `initialize` handshake (2025).
    pub(crate) fn legacy(&self) -> bool {
        self.legacy
    }

    /// Whether it stamps its requests with a client context (2026-07-28),
    /// and so with the capabilities of the client a request is made for.
    pub(crate) fn stamps(&self) -> bool {
        self.stamp.is_some()
    }

    /// Stamps `request` as rmcp's client would: the client context (for
    /// 2026-07-28), with `client`'s capabilities in place of ours when it is
    /// made for a downstream client, what the caller adds (`extra`), and
    /// `token`.
    pub(crate) fn stamp(
        &self,
        request: &mut ClientRequest,
        extra: Option<RequestMetaObject>,
        token: ProgressToken,
        client: Option<&ClientCapabilities>,
    ) {
        if let Some((stamp, encoded)) = &self.stamp {
            // A call's stamp is written by `http::outgoing`, which takes it
            // as encoded.
            let encoded = match (&*request, client) {
                (ClientRequest::CallToolRequest(_), None) => Some(encoded.clone()),
                (ClientRequest::CallToolRequest(_), Some(client)) => {
                    self.client_stamp(stamp, client)
                }
                _ => None,
            };
            match (&mut *request, encoded) {
                (ClientRequest::CallToolRequest(call), Some(encoded)) => {
                    call.extensions.insert(encoded);
                }
                // Anything else, or a client's stamp that could not be
                // encoded: as rmcp's client puts them.
                (other, _) => {
                    let meta = other.get_meta_mut();
                    meta.extend(stamp.clone());
                    if let Some(client) = client {
                        meta.set_client_capabilities(client.clone());
                    }
                }
            }
        }
        let meta = rmcp::model::GetMeta::get_meta_mut(request);
        if let Some(extra) = extra {
            meta.extend(extra);
        }
        meta.set_progress_token(token);
    }

    /// The session's stamp with `client`'s capabilities, encoded once per
    /// run of calls for the same client; `None` if they cannot be encoded.
    fn client_stamp(
        &self,
        stamp: &RequestMetaObject,
        client: &ClientCapabilities,
    ) -> Option<Stamp> {
        let mut cached = self
            .client_stamp
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((capabilities, encoded)) = cached.as_ref()
            && capabilities == client
        {
            return Some(encoded.clone());
        }
        let mut meta = stamp.clone();
        meta.set_client_capabilities(client.clone());
        let encoded = Stamp::new(&meta).ok()?;
        *cached = Some((client.clone(), encoded.clone()));
        Some(encoded)
    }

    /// Sends `request` (its `_meta` complete) as request `id` and reads its
    /// answer; what arrives before it goes to `handler`. Dropping the future
    /// closes the stream (for 2026-07-28, that cancels the request).
    pub(crate) async fn send(
        &self,
        request: ClientRequest,
        id: RequestId,
        handler: &SessionHandler,
    ) -> Result<ServerResult, Unsent> {
        let headers = self.headers(&request);
        let session = self.parts.session.current();
        let posted = self
            .post(request, &id, session.clone(), headers.clone())
            .await;
        let mut answer = match posted {
            Err(StreamableHttpError::SessionExpired) if self.legacy => return Err(Unsent::Expired),
            Err(error) => Err(transport(error)),
            Ok(StreamableHttpPostResponse::Json(message, _)) => {
                answer_of(message, &id).unwrap_or(Err(ServiceError::UnexpectedResponse))
            }
            Ok(StreamableHttpPostResponse::Sse(events, _)) => {
                self.read(events, &id, session, headers, handler).await
            }
            // Nothing else carries an answer to a request.
            Ok(_) => Err(ServiceError::UnexpectedResponse),
        };
        if let Ok(ServerResult::ListToolsResult(list)) = &mut answer
            && !self.legacy
        {
            self.keep_usable(&mut list.tools);
        }
        answer.map_err(Unsent::Failed)
    }

    /// Posts `request` as request `id` of `session`, with `headers`.
    async fn post(
        &self,
        request: ClientRequest,
        id: &RequestId,
        session: Option<Arc<str>>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let message = ClientJsonRpcMessage::request(request, id.clone());
        self.parts
            .client
            .post(
                self.parts.uri.clone(),
                message,
                session,
                self.parts.auth.clone(),
                headers,
                self.parts.limits,
            )
            .await
    }

    /// The headers of `request`: the transport's, and for 2026-07-28 the
    /// SEP-2243 ones.
    fn headers(&self, request: &ClientRequest) -> HashMap<HeaderName, HeaderValue> {
        if self.legacy {
            return self.parts.headers.clone();
        }
        let schema = match request {
            ClientRequest::CallToolRequest(call) => self
                .annotated
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(call.params.name.as_ref())
                .cloned(),
            _ => None,
        };
        let arguments = || match request {
            ClientRequest::CallToolRequest(call) => crate::arguments::arguments_of(call),
            _ => None,
        };
        let extra = mcp_headers::request_headers(request, schema.as_deref(), arguments);
        // Sized once: growing it as they come rehashes it twice per call.
        let mut headers = HashMap::with_capacity(self.parts.headers.len() + extra.len());
        headers.extend(
            self.parts
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), value.clone())),
        );
        headers.extend(extra);
        headers
    }

    /// Leaves out listed tools whose `x-mcp-header` annotations are
    /// unusable, and keeps the schemas of those that mark arguments for
    /// headers, as rmcp's client does with a 2026-07-28 listing.
    fn keep_usable(&self, tools: &mut Vec<Tool>) {
        let mut annotated = self.annotated.write().unwrap_or_else(|p| p.into_inner());
        tools.retain(|tool| {
            if let Some(reason) = mcp_headers::unusable_annotations(&tool.input_schema) {
                tracing::warn!(tool = %tool.name, "leaving out a tool with unusable x-mcp-header annotations: {reason}");
                return false;
            }
            if mcp_headers::promotes_headers(&tool.input_schema) {
                annotated.insert(tool.name.to_string(), tool.input_schema.clone());
            } else {
                annotated.remove(tool.name.as_ref());
            }
            true
        });
    }

    /// Reads the answer to `id` from its event stream, resuming it after an
    /// early end once the upstream gave an event id (as rmcp does).
    async fn read(
        &self,
        mut events: Events,
        id: &RequestId,
        session: Option<Arc<str>>,
        headers: HashMap<HeaderName, HeaderValue>,
        handler: &SessionHandler,
    ) -> Result<ServerResult, ServiceError> {
        let mut last_event_id: Option<String> = None;
        let mut server_retry: Option<Duration> = None;
        loop {
            let ended = loop {
                match events.next().await {
                    Some(Ok(event)) => {
                        if let Some(retry) = event.retry {
                            server_retry = Some(Duration::from_millis(retry));
                        }
                        if event.id.is_some() {
                            last_event_id.clone_from(&event.id);
                        }
                        if let Some(answer) = self.event(event, id, &session, handler) {
                            return answer;
                        }
                    }
                    Some(Err(error)) => break Some(error),
                    None => break None,
                }
            };
            let Some(resume_from) = last_event_id.clone() else {
                return Err(match ended {
                    Some(error) => transport(StreamableHttpError::Sse(error)),
                    None => ServiceError::TransportClosed,
                });
            };
            events = self
                .resumed(resume_from, server_retry.take(), &session, &headers)
                .await?;
        }
    }

    /// A new stream from `last_event_id`, retried as the transport's policy
    /// says (the caller's deadline bounds it).
    async fn resumed(
        &self,
        last_event_id: String,
        server_retry: Option<Duration>,
        session: &Option<Arc<str>>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, ServiceError> {
        let mut wait = server_retry.or_else(|| self.parts.retry.retry(0));
        let mut attempts = 0;
        loop {
            let Some(delay) = wait else {
                return Err(ServiceError::TransportClosed);
            };
            tokio::time::sleep(delay).await;
            match self
                .parts
                .client
                .resume(
                    self.parts.uri.clone(),
                    session.clone(),
                    last_event_id.clone(),
                    self.parts.auth.clone(),
                    headers.clone(),
                    self.parts.limits.max_sse_event_size,
                )
                .await
            {
                Ok(events) => return Ok(events),
                // Repeating the GET cannot fix these.
                Err(
                    error @ (StreamableHttpError::ServerDoesNotSupportSse
                    | StreamableHttpError::AuthRequired(_)
                    | StreamableHttpError::InsufficientScope(_)),
                ) => return Err(transport(error)),
                Err(error) => {
                    attempts += 1;
                    wait = self.parts.retry.retry(attempts);
                    if wait.is_none() {
                        return Err(transport(error));
                    }
                }
            }
        }
    }

    /// One event of the stream: the answer to `id`, or something for the
    /// handler (`None`).
    fn event(
        &self,
        event: Sse,
        id: &RequestId,
        session: &Option<Arc<str>>,
        handler: &SessionHandler,
    ) -> Option<Result<ServerResult, ServiceError>> {
        match answers::read(&answers::payload(event)?)? {
            ServerJsonRpcMessage::Notification(notification) => {
                handler.notified(notification.notification);
                None
            }
            ServerJsonRpcMessage::Request(request) => {
                let origin = id.clone();
                self.answer_upstream(request.request, request.id, origin, session, handler);
                None
            }
            answer => answer_of(answer, id),
        }
    }

    /// Opens a `subscriptions/listen` stream for `filter` and waits for its
    /// acknowledgement, as rmcp's client does: the first message must
    /// acknowledge this request, for no more than was asked.
    pub(crate) async fn listen(
        &self,
        filter: SubscriptionFilter,
    ) -> Result<Listening, ServiceError> {
        let params = SubscriptionsListenRequestParams::new(filter.clone());
        let mut request =
            ClientRequest::SubscriptionsListenRequest(SubscriptionsListenRequest::new(params));
        let (id, token) = self.next_id();
        self.stamp(&mut request, None, token, None);
        let headers = self.headers(&request);
        let mut events = match self.post(request, &id, None, headers).await {
            Ok(StreamableHttpPostResponse::Sse(events, _)) => events,
            Ok(StreamableHttpPostResponse::Json(message, _)) => {
                return Err(match answer_of(message, &id) {
                    Some(Err(error)) => error,
                    _ => ServiceError::UnexpectedResponse,
                });
            }
            Ok(_) => return Err(ServiceError::UnexpectedResponse),
            Err(error) => return Err(transport(error)),
        };
        loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(error)) => return Err(transport(StreamableHttpError::Sse(error))),
                None => return Err(ServiceError::TransportClosed),
            };
            let Some(message) = answers::payload(event).and_then(|data| answers::read(&data))
            else {
                continue;
            };
            return match message {
                ServerJsonRpcMessage::Notification(notification) => {
                    let notification = notification.notification;
                    let ours = notification.get_meta().subscription_id().as_ref() == Some(&id);
                    match notification {
                        ServerNotification::SubscriptionsAcknowledgedNotification(acknowledged)
                            if ours && acknowledged.params.notifications.is_subset_of(&filter) =>
                        {
                            Ok(Listening {
                                events,
                                id,
                                accepted: acknowledged.params.notifications,
                                reply: self.reply(None),
                            })
                        }
                        _ => Err(ServiceError::UnexpectedResponse),
                    }
                }
                answer => Err(match answer_of(answer, &id) {
                    Some(Err(error)) => error,
                    _ => ServiceError::UnexpectedResponse,
                }),
            };
        }
    }

    /// Has the downstream of request `origin` answer the upstream's request
    /// `asked`, and posts the answer, in the background (the stream goes on).
    fn answer_upstream(
        &self,
        request: rmcp::model::ServerRequest,
        asked: RequestId,
        origin: RequestId,
        session: &Option<Arc<str>>,
        handler: &SessionHandler,
    ) {
        let handler = handler.clone();
        let reply = self.reply(session.clone());
        tokio::spawn(async move {
            let answer = handler.ask_for(request, Some(&origin)).await;
            reply.send(asked, answer).await;
        });
    }

    /// Where answers to the upstream's requests go, in `session`.
    fn reply(&self, session: Option<Arc<str>>) -> Reply {
        Reply {
            client: Arc::clone(&self.parts.client),
            uri: self.parts.uri.clone(),
            session,
            auth: self.parts.auth.clone(),
            headers: self.parts.headers.clone(),
            limits: self.parts.limits,
        }
    }
}

/// An acknowledged `subscriptions/listen` stream opened by [`Stateless`].
/// Dropping it closes the stream, which for 2026-07-28 ends the
/// subscription.
pub(crate) struct Listening {
    events: Events,
    id: RequestId,
    accepted: SubscriptionFilter,
    /// Where the answers to requests that come on the stream go.
    reply: Reply,
}

impl Listening {
    /// The next notification of the subscription; `None` once it ended (the
    /// stream closed, a final answer, or a message it may not carry). A
    /// request the upstream sends on it is answered as a client with no user
    /// would (no client waits on this stream) and the stream goes on.
    pub(crate) async fn next(&mut self) -> Option<ServerNotification> {
        loop {
            let event = self.events.next().await?.ok()?;
            let Some(message) = answers::payload(event).and_then(|data| answers::read(&data))
            else {
                continue;
            };
            let notification = match message {
                ServerJsonRpcMessage::Notification(notification) => notification,
                ServerJsonRpcMessage::Request(request) => {
                    let answer = super::handler::unattended(&request.request);
                    tokio::spawn(self.reply.clone().send(request.id, answer));
                    continue;
                }
                _ => return None,
            };
            let notification = notification.notification;
            let ours = notification.get_meta().subscription_id().as_ref() == Some(&self.id);
            return (ours && accepts(&self.accepted, &notification)).then_some(notification);
        }
    }
}

/// Whether a subscription acknowledged for `accepted` may carry `notification`.
fn accepts(accepted: &SubscriptionFilter, notification: &ServerNotification) -> bool {
    match notification {
        ServerNotification::ToolListChangedNotification(_) => {
            accepted.tools_list_changed == Some(true)
        }
        ServerNotification::PromptListChangedNotification(_) => {
            accepted.prompts_list_changed == Some(true)
        }
        ServerNotification::ResourceListChangedNotification(_) => {
            accepted.resources_list_changed == Some(true)
        }
        ServerNotification::ResourceUpdatedNotification(updated) => accepted
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.contains(&updated.params.uri)),
        // Nothing else belongs on it (rmcp ends the subscription on them).
        _ => false,
    }
}

/// Why [`Stateless::send`] has no answer.
#[derive(Debug)]
pub(crate) enum Unsent {
    /// The 2025 session was gone (404): the request did not run, and rmcp
    /// re-initializes the session when it sends it.
    Expired,
    Failed(ServiceError),
}

/// The answer in `message` if it is the one to `id`.
fn answer_of(
    message: ServerJsonRpcMessage,
    id: &RequestId,
) -> Option<Result<ServerResult, ServiceError>> {
    match message {
        ServerJsonRpcMessage::Response(response) if &response.id == id => Some(Ok(response.result)),
        ServerJsonRpcMessage::Error(error) if error.id.as_ref() == Some(id) => {
            Some(Err(ServiceError::McpError(error.error)))
        }
        _ => None,
    }
}

/// An HTTP failure as rmcp's service reports it (so it is classified alike).
fn transport(error: HttpError) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "streamable-http",
        std::any::TypeId::of::<Stateless>(),
        Box::new(error),
    ))
}

#[cfg(test)]
// Logging is deprecated by SEP-2577; `Downstream` still relays it.
#[allow(deprecated)]
mod tests {
    //! The lane against a small scripted upstream on loopback HTTP: what it
    //! sends, and each way an answer can come back.

    use std::sync::Mutex;

    use axum::{
        Router,
        body::Body,
        extract::State,
        http::{HeaderMap, StatusCode},
        response::Response,
        routing::post,
    };
    use futures::future::BoxFuture;
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientResult, LoggingMessageNotificationParam,
        ProgressNotificationParam, ServerRequest,
    };
    use serde_json::{Value, json};

    use super::*;
    use crate::{
        http::{HttpRecorder, RecordingClient},
        session::{Downstream, DownstreamLink, shared_http_client},
    };

    /// What the upstream answers a POST with, and then a GET.
    #[derive(Clone, Copy)]
    enum Script {
        Json,
        /// Progress for the request's token, then the answer.
        ProgressFirst,
        /// A priming event with an id, then the stream ends; the answer comes
        /// on the GET that resumes from that id.
        CutAfterId,
        /// The stream ends with nothing in it.
        CutEmpty,
        /// JSON, naming a session; a request that names it gets 404 (the
        /// upstream forgot it).
        Forgets,
        /// A listen stream: its first message as given, then a tool list
        /// change for it, then one for another subscription.
        Listens(First),
    }

    /// The first message of a scripted listen stream.
    #[derive(Clone, Copy)]
    enum First {
        /// Acknowledges what was asked.
        Acknowledged,
        /// Acknowledges prompt changes too, which were not asked for.
        Wider,
        /// A list change before any acknowledgement.
        Unacknowledged,
    }

    #[derive(Default)]
    struct Seen {
        posts: Vec<(HeaderMap, Value)>,
        resumed_from: Vec<String>,
    }

    struct Upstream {
        script: Script,
        seen: Mutex<Seen>,
    }

    fn events(events: &[String]) -> Response {
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(events.concat()))
            .unwrap_or_default()
    }

    fn message(value: &Value) -> String {
        format!("data: {value}\n\n")
    }

    fn answer(id: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "hi"}]}})
    }

    async fn posted(
        State(upstream): State<Arc<Upstream>>,
        headers: HeaderMap,
        body: String,
    ) -> Response {
        let request: Value = serde_json::from_str(&body).unwrap_or_default();
        let id = request["id"].clone();
        let token = request["params"]["_meta"]["progressToken"].clone();
        let names_session = headers.contains_key("mcp-session-id");
        let asked = request["params"]["notifications"].clone();
        upstream.seen.lock().unwrap().posts.push((headers, request));
        match upstream.script {
            Script::Forgets if names_session => Response::builder()
                .status(StatusCode::NOT_FOUND)
                .body(Body::empty())
                .unwrap_or_default(),
            Script::Forgets => Response::builder()
                .header("content-type", "application/json")
                .header("mcp-session-id", "s1")
                .body(Body::from(answer(&id).to_string()))
                .unwrap_or_default(),
            Script::Json => Response::builder()
                .header("content-type", "application/json")
                .body(Body::from(answer(&id).to_string()))
                .unwrap_or_default(),
            Script::ProgressFirst => events(&[
                message(
                    &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": 1}}),
                ),
                message(&answer(&id)),
            ]),
            Script::CutAfterId => events(&["id: e1\nretry: 5\ndata: \n\n".to_owned()]),
            Script::Listens(first) => {
                let changed = |subscription: &Value| {
                    message(
                        &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": subscription}}}),
                    )
                };
                let mut accepted = asked;
                if let First::Wider = first {
                    accepted["promptsListChanged"] = json!(true);
                }
                let acknowledged = message(&json!({"jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": accepted,
                        "_meta": {"io.modelcontextprotocol/subscriptionId": id}}}));
                let opening = match first {
                    First::Unacknowledged => changed(&id),
                    First::Acknowledged | First::Wider => acknowledged,
                };
                events(&[opening, changed(&id), changed(&json!("another"))])
            }
            Script::CutEmpty => events(&[]),
        }
    }

    async fn resumed(State(upstream): State<Arc<Upstream>>, headers: HeaderMap) -> Response {
        let Some(from) = headers
            .get("last-event-id")
            .and_then(|value| value.to_str().ok())
        else {
            return Response::builder()
                .status(StatusCode::METHOD_NOT_ALLOWED)
                .body(Body::empty())
                .unwrap_or_default();
        };
        upstream
            .seen
            .lock()
            .unwrap()
            .resumed_from
            .push(from.to_owned());
        events(&[message(&answer(&json!(FIRST_ID)))])
    }

    /// A `Stateless` for a 2026-07-28 session to an upstream playing `script`.
    async fn lane(script: Script) -> (Stateless, Arc<Upstream>) {
        lane_of(script, ProtocolVersion::V_2026_07_28).await
    }

    /// A `Stateless` for a session on `version` to an upstream playing `script`.
    async fn lane_of(script: Script, version: ProtocolVersion) -> (Stateless, Arc<Upstream>) {
        let upstream = Arc::new(Upstream {
            script,
            seen: Mutex::default(),
        });
        let app = Router::new()
            .route("/mcp", post(posted).get(resumed))
            .with_state(upstream.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let mut client = RecordingClient::new(shared_http_client(), HttpRecorder::default());
        // No standalone stream in these tests.
        client.defer_server_stream().decide(false);
        let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"));
        let lane = StatelessParts::new(&client, client.session_ids(), &config)
            .for_version(Some(&version), &ClientConfig::default())
            .unwrap();
        (lane, upstream)
    }

    fn call(name: &str) -> ClientRequest {
        ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(
            name.to_owned(),
        )))
    }

    #[derive(Debug, Default)]
    struct Progressed(Mutex<Vec<ProgressNotificationParam>>);

    impl Downstream for Progressed {
        fn progress(&self, progress: ProgressNotificationParam) {
            self.0.lock().unwrap().push(progress);
        }
        fn request(
            &self,
            _: ServerRequest,
        ) -> BoxFuture<'static, Result<ClientResult, rmcp::ErrorData>> {
            Box::pin(async { Err(rmcp::ErrorData::internal_error("not in this test", None)) })
        }
        fn log(&self, _: LoggingMessageNotificationParam) -> Option<usize> {
            None
        }
    }

    fn text_of(result: &ServerResult) -> Option<String> {
        match result {
            ServerResult::CallToolResult(result) => result
                .content
                .first()
                .and_then(|content| content.as_text())
                .map(|text| text.text.clone()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_call_goes_out_as_rmcp_sends_it_and_its_json_answer_comes_back() {
        let (lane, upstream) = lane(Script::Json).await;
        let (id, _) = lane.next_id();
        let answered = lane
            .send(call("echo"), id.clone(), &SessionHandler::default())
            .await;
        assert_eq!(text_of(&answered.unwrap()).as_deref(), Some("hi"));
        let seen = upstream.seen.lock().unwrap();
        let (headers, body) = &seen.posts[0];
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        assert_eq!(header("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(header("mcp-method"), Some("tools/call"));
        assert_eq!(header("mcp-name"), Some("echo"));
        assert_eq!(body["method"], "tools/call");
        assert_eq!(body["id"], json!(FIRST_ID));
        // Its own ids, never one of rmcp's.
        assert_eq!(lane.next_id().0, NumberOrString::Number(FIRST_ID + 1));
    }

    /// A call made for a downstream client carries that client's
    /// capabilities in place of ours, the rest of the context as ever; the
    /// next client's calls carry its own.
    #[tokio::test]
    async fn a_call_for_a_client_carries_its_capabilities_in_the_context() {
        let (lane, upstream) = lane(Script::Json).await;
        let elicits: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
        let samples: ClientCapabilities = serde_json::from_value(json!({"sampling": {}})).unwrap();
        let handler = SessionHandler::default();
        for client in [None, Some(&elicits), Some(&elicits), Some(&samples)] {
            let (id, token) = lane.next_id();
            let mut request = call("echo");
            lane.stamp(&mut request, None, token, client);
            lane.send(request, id, &handler).await.unwrap();
        }
        let seen = upstream.seen.lock().unwrap();
        let sent: Vec<&Value> = seen
            .posts
            .iter()
            .map(|(_, body)| &body["params"]["_meta"])
            .collect();
        let key = "io.modelcontextprotocol/clientCapabilities";
        let ours = serde_json::to_value(ClientCapabilities::default()).unwrap();
        assert_eq!(sent[0][key], ours);
        assert_eq!(sent[1][key], json!({"elicitation": {"form": {}}}));
        assert_eq!(sent[2][key], sent[1][key]);
        assert_eq!(sent[3][key], json!({"sampling": {}}));
        for meta in &sent {
            assert_eq!(
                meta["io.modelcontextprotocol/protocolVersion"],
                "2026-07-28"
            );
            assert!(
                meta["io.modelcontextprotocol/clientInfo"].is_object(),
                "{meta}"
            );
            assert!(meta["progressToken"].is_number(), "{meta}");
        }
        // A request other than a call carries them in its `_meta` too.
        let mut listing = ClientRequest::ListToolsRequest(Default::default());
        lane.stamp(&mut listing, None, lane.next_id().1, Some(&samples));
        let meta = serde_json::to_value(rmcp::model::GetMeta::get_meta(&listing)).unwrap();
        assert_eq!(meta[key], json!({"sampling": {}}));
    }

    #[tokio::test]
    async fn a_2025_call_carries_the_session_id_and_no_2026_headers() {
        let (lane, upstream) = lane_of(Script::Json, ProtocolVersion::V_2025_11_25).await;
        assert!(lane.legacy());
        let handler = SessionHandler::default();
        let (id, _) = lane.next_id();
        let answered = lane.send(call("echo"), id, &handler).await;
        assert_eq!(text_of(&answered.unwrap()).as_deref(), Some("hi"));
        let seen = upstream.seen.lock().unwrap();
        let (headers, _) = &seen.posts[0];
        assert_eq!(
            headers
                .get("mcp-protocol-version")
                .and_then(|v| v.to_str().ok()),
            Some("2025-11-25")
        );
        assert!(headers.get("mcp-method").is_none());
        assert!(headers.get("mcp-name").is_none());
    }

    #[tokio::test]
    async fn a_forgotten_2025_session_is_handed_back_unsent() {
        let (lane, upstream) = lane_of(Script::Forgets, ProtocolVersion::V_2025_11_25).await;
        let handler = SessionHandler::default();
        // The first answer names the session; the next request carries it.
        let (id, _) = lane.next_id();
        assert!(lane.send(call("echo"), id, &handler).await.is_ok());
        let (id, _) = lane.next_id();
        let again = lane.send(call("echo"), id, &handler).await;
        assert!(matches!(again, Err(Unsent::Expired)), "{again:?}");
        let seen = upstream.seen.lock().unwrap();
        let session = |n: usize| seen.posts[n].0.get("mcp-session-id").cloned();
        assert_eq!(session(0), None);
        assert_eq!(
            session(1).as_ref().and_then(|v| v.to_str().ok()),
            Some("s1")
        );
    }

    #[tokio::test]
    async fn progress_on_the_stream_reaches_the_downstream_before_the_answer() {
        let (lane, _upstream) = lane(Script::ProgressFirst).await;
        let handler = SessionHandler::default();
        let (id, token) = lane.next_id();
        let progressed = Arc::new(Progressed::default());
        let link = DownstreamLink::new(progressed.clone(), Default::default());
        let _registered = handler.links().register(id.clone(), token.clone(), &link);
        let mut request = call("echo");
        rmcp::model::GetMeta::get_meta_mut(&mut request).set_progress_token(token.clone());
        let answered = lane.send(request, id, &handler).await;
        assert_eq!(text_of(&answered.unwrap()).as_deref(), Some("hi"));
        let progressed = progressed.0.lock().unwrap();
        assert_eq!(progressed.len(), 1);
        assert_eq!(progressed[0].progress_token, token);
    }

    #[tokio::test]
    async fn a_stream_cut_after_an_event_id_is_resumed_from_it() {
        let (lane, upstream) = lane(Script::CutAfterId).await;
        let (id, _) = lane.next_id();
        let answered = lane
            .send(call("echo"), id, &SessionHandler::default())
            .await;
        assert_eq!(text_of(&answered.unwrap()).as_deref(), Some("hi"));
        assert_eq!(upstream.seen.lock().unwrap().resumed_from, ["e1"]);
    }

    #[tokio::test]
    async fn a_stream_that_ends_without_an_answer_or_an_event_id_fails() {
        let (lane, upstream) = lane(Script::CutEmpty).await;
        let (id, _) = lane.next_id();
        let answered = lane
            .send(call("echo"), id, &SessionHandler::default())
            .await;
        assert!(matches!(
            answered,
            Err(Unsent::Failed(ServiceError::TransportClosed))
        ));
        assert!(upstream.seen.lock().unwrap().resumed_from.is_empty());
    }

    fn tool_changes() -> SubscriptionFilter {
        let mut filter = SubscriptionFilter::new();
        filter.tools_list_changed = Some(true);
        filter
    }

    #[tokio::test]
    async fn a_listen_stream_opens_on_its_acknowledgement_and_carries_its_own_notifications() {
        let (lane, upstream) = lane(Script::Listens(First::Acknowledged)).await;
        let mut listening = lane.listen(tool_changes()).await.expect("acknowledged");
        assert!(matches!(
            listening.next().await,
            Some(ServerNotification::ToolListChangedNotification(_))
        ));
        // One for another subscription ends it, as rmcp ends it.
        assert!(listening.next().await.is_none());
        let seen = upstream.seen.lock().unwrap();
        let (headers, body) = &seen.posts[0];
        assert_eq!(body["method"], "subscriptions/listen");
        assert_eq!(body["params"]["notifications"]["toolsListChanged"], true);
        assert_eq!(
            headers.get("mcp-method").and_then(|v| v.to_str().ok()),
            Some("subscriptions/listen")
        );
    }

    #[tokio::test]
    async fn a_listen_stream_the_upstream_ends_is_opened_again_and_what_it_missed_reported() {
        use crate::session::{
            ListKind, SessionEvent,
            modern::{Modern, Through},
        };
        let (lane, upstream) = lane(Script::Listens(First::Acknowledged)).await;
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let handler = SessionHandler::new(events);
        let capabilities = rmcp::model::ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let modern = Modern::default();
        modern
            .listen(Through::Lane(Arc::new(lane)), &capabilities, &handler)
            .await
            .expect("acknowledged");
        // The change it carried; then, once it ended (a notification for
        // another subscription ends it) and was opened again, the change
        // that may have been missed meanwhile.
        for _ in 0..2 {
            let event = tokio::time::timeout(Duration::from_secs(10), received.recv()).await;
            assert!(
                matches!(event, Ok(Some(SessionEvent::ListChanged(ListKind::Tools)))),
                "{event:?}"
            );
        }
        let listens = |upstream: &Upstream| {
            let seen = upstream.seen.lock().unwrap();
            seen.posts
                .iter()
                .filter(|(_, body)| body["method"] == "subscriptions/listen")
                .count()
        };
        assert!(listens(&upstream) >= 2);
        if let Some(reader) = modern.stop() {
            let _ = reader.await;
        }
        // Stopped: not opened again.
        let after = listens(&upstream);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(listens(&upstream), after);
    }

    #[tokio::test]
    async fn a_listen_stream_acknowledged_for_more_or_not_at_all_is_refused() {
        for first in [First::Wider, First::Unacknowledged] {
            let (lane, _upstream) = lane(Script::Listens(first)).await;
            assert!(matches!(
                lane.listen(tool_changes()).await,
                Err(ServiceError::UnexpectedResponse)
            ));
        }
    }

    #[tokio::test]
    async fn a_2026_listing_leaves_out_tools_with_unusable_annotations_and_keeps_marked_ones() {
        let (lane, upstream) = lane(Script::Json).await;
        let tool = |name: &str, schema: Value| {
            Tool::new(
                name.to_owned(),
                "",
                Arc::new(schema.as_object().cloned().unwrap_or_default()),
            )
        };
        let mut tools = vec![
            tool("echo", json!({"type": "object"})),
            tool("root", json!({"type": "object", "x-mcp-header": "Root"})),
            tool(
                "region",
                json!({"type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
            ),
        ];
        lane.keep_usable(&mut tools);
        let names: Vec<_> = tools.iter().map(|tool| tool.name.to_string()).collect();
        assert_eq!(names, ["echo", "region"]);
        // A call of the marked tool carries its argument as a header.
        let mut params = CallToolRequestParams::new("region");
        params.arguments = json!({"region": "eu"}).as_object().cloned();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let (id, _) = lane.next_id();
        assert!(
            lane.send(request, id, &SessionHandler::default())
                .await
                .is_ok()
        );
        let seen = upstream.seen.lock().unwrap();
        assert_eq!(
            seen.posts[0]
                .0
                .get("mcp-param-region")
                .and_then(|v| v.to_str().ok()),
            Some("eu")
        );
    }

    #[test]
    fn its_debug_output_shows_no_url_header_or_token() {
        let client = RecordingClient::new(shared_http_client(), HttpRecorder::default());
        let mut headers = HashMap::new();
        headers.insert(
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_static("canary-header"),
        );
        let config = StreamableHttpClientTransportConfig::with_uri(
            "http://127.0.0.1:1/mcp?key=canary-query",
        )
        .auth_header("canary-token")
        .custom_headers(headers);
        let lane = StatelessParts::new(&client, client.session_ids(), &config)
            .for_version(
                Some(&ProtocolVersion::V_2026_07_28),
                &ClientConfig::default(),
            )
            .unwrap();
        let shown = format!("{lane:?}");
        assert!(!shown.contains("canary"), "{shown}");
    }

    #[tokio::test]
    async fn a_2025_session_sends_only_calls_of_listed_plain_tools_here() {
        let (legacy, _upstream) = lane_of(Script::Json, ProtocolVersion::V_2025_11_25).await;
        let tool = |name: &str, schema: Value| {
            Tool::new(
                name.to_owned(),
                "",
                Arc::new(schema.as_object().cloned().unwrap_or_default()),
            )
        };
        legacy.listed(&[
            tool("echo", json!({"type": "object"})),
            tool(
                "region",
                json!({"type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
            ),
        ]);
        assert!(legacy.takes(&call("echo")));
        assert!(!legacy.takes(&call("region")));
        assert!(!legacy.takes(&call("unlisted")));
        assert!(!legacy.takes(&ClientRequest::PingRequest(Default::default())));
        // A 2026-07-28 session sends everything here.
        let (modern, _upstream) = lane(Script::Json).await;
        assert!(modern.takes(&call("unlisted")));
        assert!(modern.takes(&ClientRequest::PingRequest(Default::default())));
    }
}
