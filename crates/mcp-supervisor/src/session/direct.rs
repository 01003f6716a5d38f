//! The direct client: requests an HTTP session sends itself, as the one
//! POST rmcp's client would send, instead of through rmcp's service loop
//! and HTTP transport worker (docs/DECISIONS.md #79 and #83):
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
    collections::HashMap,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use futures::{FutureExt, StreamExt, future::BoxFuture, stream::BoxStream};
use http::{HeaderMap, HeaderValue};
use rmcp::{
    ServiceError,
    model::{
        ClientCapabilities, ClientConfig, ClientJsonRpcMessage, JsonObject, NumberOrString,
        ProgressToken, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
        ServerResult, Tool,
    },
    transport::{
        DynamicTransportError,
        common::client_side_sse::SseRetryPolicy,
        streamable_http_client::{
            StreamableHttpClientTransportConfig, StreamableHttpError, StreamableHttpResponseLimits,
        },
    },
};
use sse_stream::{Error as SseError, Sse};

use super::handler::SessionHandler;
use crate::{
    call::{ToolCall, UpstreamRequest},
    codec::{
        answers, mcp_headers,
        request::{Outgoing, Stamp, Stamped},
    },
    generation::Generation,
    http::{PostOutgoing, Posted, SessionIds},
    tool_answer::{Answer, Message},
};

type HttpError = StreamableHttpError<reqwest::Error>;
type Events = BoxStream<'static, Result<Sse, SseError>>;

/// rmcp's HTTP client interface for the two calls made here, as an object
/// (the session's client is ours, or it wrapped for OAuth).
trait Poster: Send + Sync {
    fn post(
        &self,
        uri: Arc<str>,
        message: Outgoing,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HeaderMap,
        limits: StreamableHttpResponseLimits,
    ) -> BoxFuture<'static, Result<Posted, HttpError>>;

    fn resume(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: String,
        auth: Option<String>,
        headers: HeaderMap,
        max_sse_event_size: usize,
    ) -> BoxFuture<'static, Result<Events, HttpError>>;
}

impl<C: PostOutgoing> Poster for C {
    fn post(
        &self,
        uri: Arc<str>,
        message: Outgoing,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HeaderMap,
        limits: StreamableHttpResponseLimits,
    ) -> BoxFuture<'static, Result<Posted, HttpError>> {
        let client = self.clone();
        crate::boxed::in_place(move || async move {
            client
                .post_outgoing(uri, message, session_id, auth, headers, limits)
                .await
        })
    }

    fn resume(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: String,
        auth: Option<String>,
        headers: HeaderMap,
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
                    headers
                        .iter()
                        .map(|(name, value)| (name.clone(), value.clone()))
                        .collect(),
                    max_sse_event_size,
                )
                .await
        }
        .boxed()
    }
}

/// How an HTTP session sends its plain tool calls (see the module).
pub(crate) struct DirectClient {
    /// The transport's parts, its headers with `MCP-Protocol-Version`.
    parts: DirectClientParts,
    /// A 2025 session (with `initialize`), whose requests carry its id.
    /// A 2025 session's (plain calls only) or a 2026-07-28 one's (everything).
    generation: Generation,
    /// What every 2026-07-28 request carries in `_meta` (protocol version,
    /// client info and capabilities), built once, and for tool calls,
    /// which `codec::request` writes, encoded once.
    stamp: Option<(RequestMetaObject, Stamp)>,
    /// The stamp of the last downstream client whose capabilities a call
    /// carried: the session's, with that client's capabilities in place of
    /// ours, encoded once for as long as its calls keep coming.
    client_stamp: Mutex<Option<(ClientCapabilities, Stamp)>>,
    /// Request ids and progress tokens, apart from rmcp's (which count up
    /// from 0 in 32 bits) so the session's links never mix them up.
    next_id: AtomicI64,
    /// The tools whose calls' headers do not depend on their arguments,
    /// from the last listing, with those headers (a 2026-07-28 session's:
    /// the transport's, `Mcp-Method` and `Mcp-Name`), built once. A 2025
    /// session's calls may be sent here for these tools only.
    plain: RwLock<foldhash::HashMap<String, HeaderMap>>,
    /// A 2026-07-28 session's tools that mark arguments for headers, with
    /// their input schemas, from the listings (as rmcp's client keeps them).
    annotated: RwLock<HashMap<String, Arc<JsonObject>>>,
}

impl std::fmt::Debug for DirectClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No URL, headers or token: any of them may carry a credential.
        f.debug_struct("DirectClient")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

/// Room kept in a map of headers made once, for what a request's copy of
/// it gains on its way (hyper's `Content-Length`): a copy keeps its index
/// table's size, and a map with no room left grows that table (about 900
/// instructions) at the first `HeaderMap::entry`, which makes room for one
/// more before it looks.
const ROOM: usize = 2;

/// What a session's HTTP transport was built with, kept to send its plain
/// tool calls once the session is open.
pub(crate) struct DirectClientParts {
    client: Arc<dyn Poster>,
    uri: Arc<str>,
    session: SessionIds,
    /// The transport's headers (with the protocol version): a GET's.
    headers: HeaderMap,
    /// The same with a POST's `Accept` and `Content-Type` (see
    /// `http::with_post_headers`) and, for an `http://` upstream, its
    /// `Host`, made once.
    post_headers: HeaderMap,
    auth: Option<String>,
    limits: StreamableHttpResponseLimits,
    retry: Arc<dyn SseRetryPolicy>,
}

impl DirectClientParts {
    pub(crate) fn new<C>(
        client: &C,
        session: SessionIds,
        config: &StreamableHttpClientTransportConfig,
    ) -> Self
    where
        C: PostOutgoing,
    {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = config.max_sse_event_size;
        limits.max_json_response_size = config.max_json_response_size;
        limits.max_error_response_size = config.max_error_response_size;
        DirectClientParts {
            client: Arc::new(client.clone()),
            uri: config.uri.clone(),
            session,
            headers: crate::http::header_map(config.custom_headers.clone()),
            post_headers: HeaderMap::new(),
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
    ) -> Option<DirectClient> {
        let version = version?;
        self.headers.insert(
            mcp_headers::PROTOCOL_VERSION,
            HeaderValue::from_str(version.as_str()).ok()?,
        );
        self.post_headers = self.headers.clone();
        crate::http::with_post_headers(&mut self.post_headers);
        // An `http://` upstream's `Host`, which the plain lane would add to
        // each request's copy of these (and reqwest's writes the same).
        if let Some(host) = reqwest::Url::parse(&self.uri)
            .ok()
            .as_ref()
            .and_then(crate::http::LaneTarget::host_of)
        {
            self.post_headers.insert(http::header::HOST, host);
        }
        self.post_headers.reserve(ROOM);
        let generation = Generation::of(version);
        // rmcp stamps its client context on 2026-07-28 requests only.
        let stamp = match generation {
            Generation::Sessions => None,
            Generation::Stateless => {
                let meta = RequestMetaObject::with_client_context(
                    version.clone(),
                    us.client_info.clone(),
                    us.capabilities.clone(),
                );
                let encoded = Stamp::new(&meta).ok()?;
                Some((meta, encoded))
            }
        };
        Some(DirectClient {
            parts: self,
            generation,
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
    headers: HeaderMap,
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
            Outgoing::Other(message),
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

impl DirectClient {
    /// Remembers which of the upstream's `tools` calls may be sent here.
    pub(crate) fn listed(&self, tools: &[Tool]) {
        let plain = tools
            .iter()
            .filter(|tool| {
                mcp_headers::bare_header_value(&tool.name)
                    && !mcp_headers::promotes_headers(&tool.input_schema)
            })
            .map(|tool| {
                let headers = if self.legacy() {
                    HeaderMap::new()
                } else {
                    self.built_headers(&ToolCall::new(tool.name.to_string(), None).into(), None)
                };
                (tool.name.to_string(), headers)
            })
            .collect();
        *self.plain.write().unwrap_or_else(|p| p.into_inner()) = plain;
    }

    /// Whether `request` is sent here: every request of a 2026-07-28
    /// session, a 2025 session's plain tool calls.
    pub(crate) fn takes(&self, request: &UpstreamRequest) -> bool {
        if !self.legacy() {
            return true;
        }
        let Some(tool) = request.tool() else {
            return false;
        };
        self.plain
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(tool)
    }

    /// A fresh request id, and the progress token that goes with it.
    pub(crate) fn next_id(&self) -> (RequestId, ProgressToken) {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        (
            NumberOrString::Number(n),
            ProgressToken(NumberOrString::Number(n)),
        )
    }

    /// The session's generation: a 2025 one has an `initialize` handshake.
    pub(crate) fn generation(&self) -> Generation {
        self.generation
    }

    fn legacy(&self) -> bool {
        self.generation == Generation::Sessions
    }

    /// Whether it stamps its requests with a client context (2026-07-28),
    /// and so with the capabilities of the client a request is made for.
    pub(crate) fn stamps(&self) -> bool {
        self.stamp.is_some()
    }

    /// Stamps `request` as rmcp's client would: the client context (for
    /// 2026-07-28), with `client`'s capabilities in place of ours when it is
    /// made for a downstream client, what the caller adds (`extra`), and
    /// `token`. A call's client context (as encoded once) and its token are
    /// not put in its `_meta` but answered, for `codec::request` to write.
    pub(crate) fn stamp(
        &self,
        request: &mut UpstreamRequest,
        extra: Option<RequestMetaObject>,
        token: ProgressToken,
        client: Option<&ClientCapabilities>,
    ) -> Stamped {
        let mut encoded = None;
        if let Some((stamp, ours)) = &self.stamp {
            encoded = match (&*request, client) {
                (UpstreamRequest::Call(_), None) => Some(ours.clone()),
                (UpstreamRequest::Call(_), Some(client)) => self.client_stamp(stamp, client),
                _ => None,
            };
            // The context wins over what the call held before (as rmcp's
            // client merges it), and loses to what is added below.
            if let (Some(encoded), UpstreamRequest::Call(call)) = (&encoded, &mut *request)
                && let Some(meta) = &mut call.meta
            {
                encoded.clear_from(&mut meta.0.0);
            }
            // Anything else, or a client's stamp that could not be encoded:
            // as rmcp's client puts them.
            if encoded.is_none() {
                let meta = request.meta_mut();
                meta.extend(stamp.clone());
                if let Some(client) = client {
                    meta.set_client_capabilities(client.clone());
                }
            }
        }
        if let Some(extra) = extra {
            request.meta_mut().extend(extra);
        }
        match request {
            UpstreamRequest::Call(_) => Stamped {
                context: encoded,
                token: Some(token),
            },
            UpstreamRequest::Relayed(_) => {
                request.meta_mut().set_progress_token(token);
                Stamped {
                    context: encoded,
                    token: None,
                }
            }
        }
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

    /// Sends `request` (its `_meta` complete but for what a call carries
    /// in `stamp`) as request `id` and reads its answer; what arrives before it
    /// goes to `handler`. Dropping the future closes the stream (for
    /// 2026-07-28, that cancels the request).
    pub(crate) async fn send(
        &self,
        request: UpstreamRequest,
        stamp: Stamped,
        id: RequestId,
        handler: &SessionHandler,
    ) -> Result<Answer, Unsent> {
        let headers = self.headers(&request);
        let session = self.parts.session.current();
        let message = Outgoing::request(request, id.clone(), stamp);
        let posted = self.post(message, session.clone(), headers).await;
        let mut answer = match posted {
            Err(StreamableHttpError::SessionExpired) if self.legacy() => {
                return Err(Unsent::Expired);
            }
            Err(error) => Err(transport(error)),
            Ok(Posted::Json(message, _)) => {
                answer_of(message, &id).unwrap_or(Err(ServiceError::UnexpectedResponse))
            }
            Ok(Posted::Sse(events, _)) => self.read(events, &id, session, handler).await,
            // Nothing else carries an answer to a request.
            Ok(_) => Err(ServiceError::UnexpectedResponse),
        };
        if let Ok(Answer::Result(result)) = &mut answer
            && let ServerResult::ListToolsResult(list) = &mut **result
            && !self.legacy()
        {
            self.keep_usable(&mut list.tools);
        }
        answer.map_err(Unsent::Failed)
    }

    /// Posts `message` in `session`, with `headers`.
    async fn post(
        &self,
        message: Outgoing,
        session: Option<Arc<str>>,
        headers: HeaderMap,
    ) -> Result<Posted, HttpError> {
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
    fn headers(&self, request: &UpstreamRequest) -> HeaderMap {
        if self.legacy() {
            return self.parts.post_headers.clone();
        }
        let Some(tool) = request.tool() else {
            return self.built_headers(request, None);
        };
        if let Some(headers) = self
            .plain
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tool)
        {
            return headers.clone();
        }
        let schema = self
            .annotated
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tool)
            .cloned();
        self.built_headers(request, schema.as_deref())
    }

    /// The headers of `request` for a 2026-07-28 session, built: the
    /// transport's and `mcp_headers`' (with `schema`, a tool's that marks
    /// arguments for headers).
    fn built_headers(&self, request: &UpstreamRequest, schema: Option<&JsonObject>) -> HeaderMap {
        let mut headers = self.parts.post_headers.clone();
        for (name, value) in mcp_headers::request_headers(request, schema) {
            headers.insert(name, value);
        }
        headers.reserve(ROOM);
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
    /// early end once the upstream gave an event id (as rmcp does, with the
    /// transport's headers: a request's own SEP-2243 headers describe its
    /// POST, not the GET that resumes its stream).
    async fn read(
        &self,
        mut events: Events,
        id: &RequestId,
        session: Option<Arc<str>>,
        handler: &SessionHandler,
    ) -> Result<Answer, ServiceError> {
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
                        let Some(data) = answers::payload(event) else {
                            continue;
                        };
                        let Some(message) = answers::read_message(data).await else {
                            continue;
                        };
                        if let Some(answer) = self.event(message, id, &session, handler) {
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
                .resumed(resume_from, server_retry.take(), &session)
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
                    self.parts.headers.clone(),
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

    /// One message of the stream: the answer to `id`, or something for the
    /// handler (`None`).
    fn event(
        &self,
        message: Message,
        id: &RequestId,
        session: &Option<Arc<str>>,
        handler: &SessionHandler,
    ) -> Option<Result<Answer, ServiceError>> {
        let message = match message {
            Message::Rmcp(message) => message,
            tool @ Message::Tool(..) => return answer_of(tool, id),
        };
        match message {
            ServerJsonRpcMessage::Notification(notification) => {
                handler.notified(notification.notification);
                None
            }
            ServerJsonRpcMessage::Request(request) => {
                let origin = id.clone();
                self.answer_upstream(request.request, request.id, origin, session, handler);
                None
            }
            answer => answer_of(Message::Rmcp(answer), id),
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
            headers: self.parts.post_headers.clone(),
            limits: self.parts.limits,
        }
    }
}

/// Why [`DirectClient::send`] has no answer.
#[derive(Debug)]
pub(crate) enum Unsent {
    /// The 2025 session was gone (404): the request did not run, and rmcp
    /// re-initializes the session when it sends it.
    Expired,
    Failed(ServiceError),
}

/// The answer in `message` if it is the one to `id`.
fn answer_of(message: Message, id: &RequestId) -> Option<Result<Answer, ServiceError>> {
    match message {
        Message::Tool(answered, answer) if &answered == id => Some(Ok(Answer::Tool(answer))),
        Message::Rmcp(ServerJsonRpcMessage::Response(response)) if &response.id == id => {
            Some(Ok(Answer::from(response.result)))
        }
        Message::Rmcp(ServerJsonRpcMessage::Error(error)) if error.id.as_ref() == Some(id) => {
            Some(Err(ServiceError::McpError(error.error)))
        }
        _ => None,
    }
}

/// An HTTP failure as rmcp's service reports it (so it is classified alike).
fn transport(error: HttpError) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "streamable-http",
        std::any::TypeId::of::<DirectClient>(),
        Box::new(error),
    ))
}

mod listen;

pub(crate) use listen::Listening;

#[cfg(test)]
// Logging is deprecated by SEP-2577; `Downstream` still relays it.
#[allow(deprecated)]
mod tests;
