//! [`RecordingClient`]: rmcp's `StreamableHttpClient` over a shared `reqwest::Client`.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, OnceLock},
    time::SystemTime,
};

use futures::{Stream, StreamExt, stream::BoxStream};
use http::{
    HeaderMap, HeaderName, HeaderValue, StatusCode,
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE},
};
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::{
        common::http_header::{EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE},
        streamable_http_client::{
            AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError,
            StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
            StreamableHttpResponseLimits,
        },
    },
};
use sse_stream::Sse;
use tokio::sync::watch;

use super::{
    LaneTarget,
    drain::DrainOnDrop,
    plain::Answered,
    recorder::{HttpObservation, HttpRecorder},
    reuse::{HttpClients, OriginReuse},
    sse_limit::LimitedEvents,
};
use crate::{
    codec::{mcp_headers::SESSION_ID, request::Outgoing},
    failure::parse_retry_after,
    heavy,
    oauth::{TokenClient, TokenSource},
};

mod post;
pub(crate) use post::{PostOutgoing, Posted, with_post_headers};

type HttpError = StreamableHttpError<reqwest::Error>;

/// rmcp's `StreamableHttpClient`, implemented over the shared [`HttpClients`]
/// (pooled, unless the upstream's origin stalls on reuse), recording every
/// response on the connection.
///
/// Differences from rmcp's bundled client, all deliberate:
/// - every response's method, path, status and `Retry-After` goes to the
///   [`HttpRecorder`];
/// - every non-2xx answer becomes a typed error carrying its status (a 5xx with a
///   JSON-RPC body is `HttpStatus(500)`, not a bare JSON-RPC error), except a
///   404 on an established session, which stays `SessionExpired` so rmcp
///   re-initializes by itself;
/// - error bodies are never read into errors, so no upstream text (which could
///   echo a credential) reaches a log line.
#[derive(Clone)]
pub struct RecordingClient {
    clients: HttpClients,
    recorder: HttpRecorder,
    /// The session's endpoint, parsed once: rmcp passes the same URI string on
    /// every request, and parsing it (twice: reqwest and the recorder's path)
    /// was a measurable share of a call's CPU.
    target: Arc<OnceLock<Arc<Target>>>,
    /// Whether to open the standalone GET stream: `Some(true)` yes, `Some(false)`
    /// or a dropped sender no, `None` not decided yet (wait).
    server_stream: watch::Receiver<Option<bool>>,
    /// The session id last sent or given (a 2025 session's; see
    /// [`RecordingClient::session_ids`]).
    session_id: SessionIds,
}

/// The id of the session a [`RecordingClient`] serves, as rmcp last sent it
/// or the upstream last gave it (a new one after rmcp re-initializes an
/// expired session): what requests sent beside rmcp's client must carry.
#[derive(Clone, Default)]
pub struct SessionIds {
    current: Arc<std::sync::Mutex<Option<Arc<str>>>>,
    /// Called when the id changes from one session to another: the upstream
    /// forgot the session and it was opened again (see [`Self::on_renewed`]).
    renewed: Arc<std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>>,
}

impl std::fmt::Debug for SessionIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionIds").finish_non_exhaustive()
    }
}

impl SessionIds {
    pub(crate) fn current(&self) -> Option<Arc<str>> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Has `renewed` called whenever the session is opened again under a new
    /// id (set once; later calls are ignored).
    pub(crate) fn on_renewed(&self, renewed: impl Fn() + Send + Sync + 'static) {
        let _ = self.renewed.set(Box::new(renewed));
    }

    fn saw(&self, id: &str) {
        let renewal = {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            if current.as_deref() == Some(id) {
                return;
            }
            current.replace(Arc::from(id)).is_some()
        };
        if renewal && let Some(renewed) = self.renewed.get() {
            renewed();
        }
    }
}

/// Decides, once, whether a [`RecordingClient`] opens its session's
/// standalone GET stream (see [`RecordingClient::defer_server_stream`]).
/// Dropped undecided, it means no.
#[derive(Debug)]
pub struct ServerStreamDecision(watch::Sender<Option<bool>>);

impl ServerStreamDecision {
    pub fn decide(self, open: bool) {
        // No receiver left means the session is gone; nothing to open then.
        let _ = self.0.send(Some(open));
    }
}

/// A parsed endpoint and its origin's reuse state.
struct Target {
    uri: Arc<str>,
    url: reqwest::Url,
    /// The URL's path, never its query (which may carry an API key).
    path: Arc<str>,
    origin: Arc<OriginReuse>,
    /// Where its requests go on the plain-HTTP lane, for an `http://` URL
    /// (worked out once).
    lane: Option<LaneTarget>,
}

impl std::fmt::Debug for RecordingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingClient").finish_non_exhaustive()
    }
}

impl RecordingClient {
    /// Sends through `clients` and records responses into `recorder`.
    pub fn new(clients: HttpClients, recorder: HttpRecorder) -> Self {
        // The sender is dropped at once: the value stays `Some(true)`.
        let (_, server_stream) = watch::channel(Some(true));
        RecordingClient {
            clients,
            recorder,
            target: Arc::default(),
            server_stream,
            session_id: SessionIds::default(),
        }
    }

    /// The session id this client's requests carry.
    pub fn session_ids(&self) -> SessionIds {
        self.session_id.clone()
    }

    /// Holds the standalone GET stream (server-initiated messages outside any
    /// request) back until the returned decision says whether to open it.
    /// The stream costs a long-lived TCP connection and about 20 KiB per
    /// session; it is only worth it when the upstream will send something
    /// on it that we use.
    pub fn defer_server_stream(&mut self) -> ServerStreamDecision {
        let (decision, server_stream) = watch::channel(None);
        self.server_stream = server_stream;
        ServerStreamDecision(decision)
    }

    /// Waits for the decision on the standalone stream.
    async fn server_stream_wanted(&self) -> bool {
        let mut decision = self.server_stream.clone();
        matches!(
            decision.wait_for(Option::is_some).await.map(|open| *open),
            Ok(Some(true))
        )
    }

    /// The parsed endpoint for `uri` (cached; `None` if it is not a URL).
    fn target(&self, uri: &Arc<str>) -> Option<Arc<Target>> {
        if let Some(target) = self.target.get()
            && target.uri == *uri
        {
            return Some(target.clone());
        }
        let url = reqwest::Url::parse(uri).ok()?;
        let origin = self.clients.origin(&url);
        let target = Arc::new(Target {
            uri: uri.clone(),
            path: url.path().into(),
            lane: LaneTarget::new(&url, origin.lane_pool().clone()),
            origin,
            url,
        });
        // Only the first endpoint is cached; rmcp never changes it.
        let _ = self.target.set(target.clone());
        Some(target)
    }

    /// The path to record for `uri`.
    fn path(&self, uri: &Arc<str>) -> Arc<str> {
        self.target(uri)
            .map_or_else(|| "/".into(), |target| target.path.clone())
    }

    /// The recorder this client writes to.
    pub fn recorder(&self) -> &HttpRecorder {
        &self.recorder
    }

    /// A request to `uri` with the connection's credentials: the bearer
    /// `auth_token` and `custom_headers`, marked sensitive (so no `Debug`
    /// output shows them).
    fn request(
        &self,
        method: reqwest::Method,
        auth_token: Option<String>,
        mut custom_headers: HeaderMap,
    ) -> Outbound {
        for value in custom_headers.values_mut() {
            value.set_sensitive(true);
        }
        let mut request = Outbound {
            method,
            headers: custom_headers,
            invalid: None,
            body: None,
        };
        if let Some(token) = auth_token {
            // The bearer goes first, ahead of a configured `Authorization`
            // (an `on_behalf` connection may have both): an upstream that
            // reads one reads the caller's.
            let configured = request.headers.remove(AUTHORIZATION);
            request = request.header(AUTHORIZATION, &format!("Bearer {token}"));
            if let Some(value) = configured {
                request.headers.append(AUTHORIZATION, value);
            }
        }
        request
    }

    /// Sends `request` to `uri` by the lane its target takes: hyper's
    /// plain-HTTP lane, or reqwest (which also reports what is wrong with a
    /// request: a `uri` that is no URL, a header that is no header).
    async fn send(&self, uri: &Arc<str>, request: Outbound) -> Result<Answered, HttpError> {
        let target = self.target(uri);
        let lane = target.as_deref().and_then(|target| {
            let to = target.lane.as_ref()?;
            Some((self.clients.plain_lane(&target.origin)?, to))
        });
        let Outbound {
            method,
            headers,
            invalid,
            body,
        } = request;
        if let (Some((lane, to)), None) = (lane, &invalid) {
            return lane.send(method, headers, body, to).await;
        }
        let mut builder = match &target {
            Some(target) => self
                .clients
                .for_origin(&target.origin)
                .request(method, target.url.clone()),
            None => self.clients.pooled().request(method, uri.as_ref()),
        };
        builder = builder.headers(headers);
        if let Some((name, value)) = invalid {
            builder = builder.header(name, value);
        }
        if let Some(body) = body {
            builder = builder.body(body);
        }
        // A body left before its end is read on by a task of its own, so
        // reqwest's pool can take its connection back (`super::drain`).
        builder
            .send()
            .await
            .map(|response| {
                Answered::from(response).map(|body| reqwest::Body::wrap(DrainOnDrop::new(body)))
            })
            .map_err(transport_error)
    }

    /// Records the response and turns any non-2xx status into a typed error.
    fn check_status(
        &self,
        method: &'static str,
        uri: &Arc<str>,
        response: &Answered,
        session_attached: bool,
    ) -> Result<(), HttpError> {
        let status = response.status();
        let retry_after_raw = header_str(response.headers(), RETRY_AFTER);
        self.recorder.record(HttpObservation {
            method,
            path: self.path(uri),
            status: status.as_u16(),
            retry_after: retry_after_raw
                .as_deref()
                .and_then(|value| parse_retry_after(value, SystemTime::now())),
            at: SystemTime::now(),
        });
        if status.is_success() {
            return Ok(());
        }
        let challenge = header_str(response.headers(), WWW_AUTHENTICATE);
        Err(match (status, challenge) {
            (StatusCode::NOT_FOUND, _) if session_attached => StreamableHttpError::SessionExpired,
            (StatusCode::UNAUTHORIZED, Some(challenge)) => {
                StreamableHttpError::AuthRequired(AuthRequiredError::new(challenge))
            }
            (StatusCode::FORBIDDEN, Some(challenge)) => {
                let scope = required_scope(&challenge);
                StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
                    challenge, scope,
                ))
            }
            (StatusCode::METHOD_NOT_ALLOWED, _) if method == "GET" => {
                StreamableHttpError::ServerDoesNotSupportSse
            }
            _ => StreamableHttpError::HttpStatus(HttpStatusError::new(
                status.as_u16(),
                retry_after_raw,
            )),
        })
    }
}

impl RecordingClient {
    /// Many servers (the TypeScript SDK's examples among them) answer a request
    /// carrying a session id they no longer know — typically after a restart —
    /// with `400` and a JSON-RPC error about the session, not the `404` the
    /// spec asks for. That is an expired session, not a bad request: report it
    /// as such so rmcp re-initializes (the server turned the request away at
    /// its session check).
    /// The body is only inspected (bounded), never kept.
    async fn session_rejection(&self, uri: &Arc<str>, response: Answered) -> HttpError {
        let status = response.status();
        let retry_after = header_str(response.headers(), RETRY_AFTER);
        let body = read_bounded(response, SESSION_ERROR_PEEK)
            .await
            .unwrap_or_default();
        let mentions_session = String::from_utf8_lossy(&body)
            .to_lowercase()
            .contains("session");
        self.recorder.record(HttpObservation {
            method: "POST",
            path: self.path(uri),
            status: status.as_u16(),
            retry_after: None,
            at: SystemTime::now(),
        });
        if mentions_session {
            return StreamableHttpError::SessionExpired;
        }
        StreamableHttpError::HttpStatus(HttpStatusError::new(status.as_u16(), retry_after))
    }
}

/// The id of a `server/discover` the upstream refused with a 4xx (other than
/// 401/403): how a 2025-era server answers a request outside a session.
fn rejected_discover(
    discover: Option<rmcp::model::RequestId>,
    session_attached: bool,
    response: &Answered,
) -> Option<rmcp::model::RequestId> {
    let status = response.status();
    if session_attached
        || !status.is_client_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
    {
        return None;
    }
    discover
}

/// A request's trace context (in its `_meta`, SEP-414) as HTTP headers
/// too, for upstreams and proxies that read those.
fn trace_headers(message: &Outgoing) -> Vec<(HeaderName, HeaderValue)> {
    let Some(meta) = message.meta() else {
        return Vec::new();
    };
    crate::telemetry::propagate::header_pairs(meta)
        .filter_map(|(name, value)| {
            Some((
                HeaderName::from_static(name),
                HeaderValue::from_str(value).ok()?,
            ))
        })
        .collect()
}

impl RecordingClient {
    /// A refused `server/discover` answered as the JSON-RPC error rmcp
    /// correlates with it, so its lifecycle falls back to `initialize` (what
    /// rmcp's own HTTP client does; the status is still recorded).
    async fn legacy_discover_answer(
        &self,
        uri: &Arc<str>,
        id: rmcp::model::RequestId,
        response: Answered,
    ) -> StreamableHttpPostResponse {
        let status = response.status();
        self.recorder.record(HttpObservation {
            method: "POST",
            path: self.path(uri),
            status: status.as_u16(),
            retry_after: None,
            at: SystemTime::now(),
        });
        let body = read_bounded(response, SESSION_ERROR_PEEK)
            .await
            .unwrap_or_default();
        let error = match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
            Ok(ServerJsonRpcMessage::Error(error)) => error.error,
            _ => rmcp::model::ErrorData::invalid_request(
                format!("server/discover rejected with HTTP {status}"),
                None,
            ),
        };
        StreamableHttpPostResponse::Json(ServerJsonRpcMessage::error(error, Some(id)), None)
    }
}

/// A 4xx that is not about auth, rate or the session, with a JSON body: a
/// 2026-07-28 server answers a request it refuses this way (400 with the
/// JSON-RPC error, e.g. -32021 for a missing client capability; 404 with
/// -32601 for an unknown method), and the error must reach whoever sent the
/// request, not just its status. A 404 on a session is the session's end.
fn rejects_with_json_rpc(response: &Answered, session_attached: bool) -> bool {
    let status = response.status();
    status.is_client_error()
        && !matches!(
            status,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS
        )
        && !(status == StatusCode::NOT_FOUND && session_attached)
        && header_str(response.headers(), CONTENT_TYPE)
            .is_some_and(|ct| media_type_is(&ct, JSON_MIME_TYPE))
}

impl RecordingClient {
    /// The JSON-RPC error of a 4xx answer, as rmcp's own client answers it
    /// (the status is recorded first, for classification); a body that is
    /// not one keeps the status error.
    async fn json_rpc_rejection(
        &self,
        uri: &Arc<str>,
        response: Answered,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let status = response.status();
        self.recorder.record(HttpObservation {
            method: "POST",
            path: self.path(uri),
            status: status.as_u16(),
            retry_after: None,
            at: SystemTime::now(),
        });
        let body = read_bounded(response, SESSION_ERROR_PEEK)
            .await
            .unwrap_or_default();
        match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
            Ok(error @ ServerJsonRpcMessage::Error(_)) => {
                Ok(StreamableHttpPostResponse::Json(error, None))
            }
            _ => Err(StreamableHttpError::HttpStatus(HttpStatusError::new(
                status.as_u16(),
                None,
            ))),
        }
    }
}

/// How much of a `400` body is read to tell an unknown-session answer apart.
const SESSION_ERROR_PEEK: usize = 4096;

impl StreamableHttpClient for RecordingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_outgoing(
            uri,
            Outgoing::from(message),
            session_id,
            auth_token,
            header_map(custom_headers),
            limits,
        )
        .await
        .map(StreamableHttpPostResponse::from)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let request = self
            .request(
                reqwest::Method::DELETE,
                auth_token,
                header_map(custom_headers),
            )
            .header(SESSION_ID, &session_id);
        let response = self.send(&uri, request).await?;
        // 405: the server does not do explicit session deletion, which is fine.
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        self.check_status("DELETE", &uri, &response, false)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_token,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        // Resuming a request's stream (it carries the last event id) is never
        // held back; only the standalone stream is optional.
        if last_event_id.is_none() && !self.server_stream_wanted().await {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        let mut request =
            self.request(reqwest::Method::GET, auth_token, header_map(custom_headers));
        request
            .headers
            .append(ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
        let session_attached = session_id.is_some();
        if let Some(session_id) = session_id {
            request = request.header(SESSION_ID, &session_id);
        }
        if let Some(last_event_id) = last_event_id {
            request = request.header(LAST_EVENT_ID, &last_event_id);
        }
        let response = self.send(&uri, request).await?;
        self.check_status("GET", &uri, &response, session_attached)?;
        match header_str(response.headers(), CONTENT_TYPE) {
            Some(ct)
                if media_type_is(&ct, EVENT_STREAM_MIME_TYPE)
                    || media_type_is(&ct, JSON_MIME_TYPE) =>
            {
                let events = LimitedEvents::new(body_chunks(response), max_sse_event_size);
                Ok(super::events::Events::new(events).boxed())
            }
            other => Err(StreamableHttpError::UnexpectedContentType(other)),
        }
    }
}

/// A transport failure, without the request URL: reqwest puts the full URL
/// in its errors, and a configured URL may carry a credential in its query
/// (`?token=...`), which must reach no log or error text.
fn transport_error(error: reqwest::Error) -> HttpError {
    StreamableHttpError::Client(error.without_url())
}

/// A response body whose read errors carry no URL (see [`transport_error`]).
fn body_chunks(
    response: Answered,
) -> impl Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send + Unpin + 'static {
    http_body_util::BodyDataStream::new(response.into_body())
        .map(|chunk| chunk.map_err(reqwest::Error::without_url))
}

const ACCEPT_BOTH: &str = "text/event-stream, application/json";
/// rmcp's `Last-Event-Id`, as a header name.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// A request as built, before the lane that sends it: its headers made once
/// (credentials marked sensitive), for hyper's lane directly or reqwest's
/// builder.
struct Outbound {
    method: reqwest::Method,
    headers: HeaderMap,
    /// A header whose value is no header value: reqwest's builder reports
    /// it when the request is sent, as it did when it built every request.
    invalid: Option<(HeaderName, String)>,
    body: Option<Vec<u8>>,
}

impl Outbound {
    /// With `name: value` appended (marked sensitive when it is the
    /// credential `Authorization`).
    fn header(mut self, name: HeaderName, value: &str) -> Self {
        match HeaderValue::from_str(value) {
            Ok(mut value) => {
                value.set_sensitive(name == AUTHORIZATION);
                self.headers.append(name, value);
            }
            Err(_) => self.invalid = Some((name, value.to_owned())),
        }
        self
    }
}

/// rmcp's custom headers as a request's header map.
pub(crate) fn header_map(headers: HashMap<HeaderName, HeaderValue>) -> HeaderMap {
    headers.into_iter().collect()
}

fn header_str(headers: &HeaderMap, name: impl http::header::AsHeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// `application/json; charset=utf-8` is `application/json`.
fn media_type_is(content_type: &str, expected: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(expected))
}

/// Reads a whole body, refusing one larger than `limit` (a hostile upstream
/// must not make us buffer gigabytes).
async fn read_bounded(response: Answered, limit: usize) -> Result<Vec<u8>, HttpError> {
    if http_body::Body::size_hint(response.body())
        .exact()
        .is_some_and(|len| len > limit as u64)
    {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
    }
    let mut body = Vec::new();
    let mut chunks = body_chunks(response);
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(StreamableHttpError::Client)?;
        if body.len() + chunk.len() > limit {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The `scope` of an `insufficient_scope` challenge, if it names one: only
/// scope-token characters (RFC 6749 §3.3) and spaces, at most 200 of them
/// (it is recorded for the next login, and `status` shows it).
fn required_scope(challenge: &str) -> Option<String> {
    let base = reqwest::Url::parse("http://localhost/").ok()?;
    let params = rmcp::transport::auth::WWWAuthenticateParams::parse(challenge, &base);
    if !params.is_insufficient_scope() {
        return None;
    }
    let scope: String = params
        .scope?
        .chars()
        .filter(|c| *c == ' ' || (c.is_ascii_graphic() && !matches!(c, '"' | '\\')))
        .take(200)
        .collect();
    let scope = scope.split_whitespace().collect::<Vec<_>>().join(" ");
    (!scope.is_empty()).then_some(scope)
}

#[cfg(test)]
mod tests;
