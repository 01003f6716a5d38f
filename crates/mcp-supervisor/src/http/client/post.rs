//! Posting a message written by us ([`Outgoing`]: a call by hand,
//! `crate::codec::request`), the one way a request reaches the upstream's
//! socket: rmcp's client trait takes only rmcp's messages.

use super::*;
use crate::tool_answer::Message;

/// What a POST came back with, as rmcp's `StreamableHttpPostResponse` but
/// for a JSON answer, read as a [`Message`] (a tool's structured content
/// kept as text, `crate::tool_answer`).
// As rmcp's: built once per POST and matched at once; boxing the answer
// would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Posted {
    Accepted,
    Json(Message, Option<String>),
    Sse(
        BoxStream<'static, Result<Sse, sse_stream::Error>>,
        Option<String>,
    ),
}

impl From<StreamableHttpPostResponse> for Posted {
    fn from(response: StreamableHttpPostResponse) -> Self {
        match response {
            StreamableHttpPostResponse::Json(message, session) => {
                Posted::Json(Message::Rmcp(message), session)
            }
            StreamableHttpPostResponse::Sse(events, session) => Posted::Sse(events, session),
            _ => Posted::Accepted,
        }
    }
}

impl From<Posted> for StreamableHttpPostResponse {
    fn from(posted: Posted) -> Self {
        match posted {
            Posted::Accepted => StreamableHttpPostResponse::Accepted,
            Posted::Json(message, session) => {
                StreamableHttpPostResponse::Json(message.into_rmcp(), session)
            }
            Posted::Sse(events, session) => StreamableHttpPostResponse::Sse(events, session),
        }
    }
}

impl PostOutgoing for RecordingClient {
    async fn post_outgoing(
        &self,
        uri: Arc<str>,
        message: Outgoing,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HeaderMap,
        limits: StreamableHttpResponseLimits,
    ) -> Result<Posted, HttpError> {
        let mut custom_headers = custom_headers;
        let trace = trace_headers(&message);
        for (name, _) in &trace {
            custom_headers.remove(name);
        }
        let mut request = self.request(reqwest::Method::POST, auth_token, custom_headers);
        ensure(&mut request.headers, ACCEPT, ACCEPT_BOTH);
        for (name, value) in trace {
            request.headers.append(name, value);
        }
        let session_attached = session_id.is_some();
        if let Some(session_id) = session_id {
            self.session_id.saw(&session_id);
            request = request.header(SESSION_ID, &session_id);
        }
        let discover = message.discover_id();
        // Notifications and replies await nothing: whatever a 2xx carries is fine.
        let awaits_no_response = !message.awaits_answer();
        let body = heavy::encode(message)
            .await
            .map_err(|error| StreamableHttpError::Io(error.into()))?;
        ensure(&mut request.headers, CONTENT_TYPE, JSON_MIME_TYPE);
        request.body = Some(body);
        let response = self.send(&uri, request).await?;
        if session_attached && response.status() == StatusCode::BAD_REQUEST {
            return Err(self.session_rejection(&uri, response).await);
        }
        if let Some(discover_id) = rejected_discover(discover, session_attached, &response) {
            return Ok(self
                .legacy_discover_answer(&uri, discover_id, response)
                .await
                .into());
        }
        if rejects_with_json_rpc(&response, session_attached) {
            return self
                .json_rpc_rejection(&uri, response)
                .await
                .map(Posted::from);
        }
        self.check_status("POST", &uri, &response, session_attached)?;

        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(Posted::Accepted);
        }
        let new_session = header_str(response.headers(), SESSION_ID);
        if let Some(new_session) = &new_session {
            self.session_id.saw(new_session);
        }
        // Read in place: only an answer of another type keeps it (its error).
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|value| value.to_str().ok());
        let (sse, json) = match content_type {
            // The usual ones, exactly, without taking parameters apart.
            Some(Some(EVENT_STREAM_MIME_TYPE)) => (true, false),
            Some(Some(JSON_MIME_TYPE)) => (false, true),
            Some(Some(ct)) => (
                media_type_is(ct, EVENT_STREAM_MIME_TYPE),
                media_type_is(ct, JSON_MIME_TYPE),
            ),
            _ => (false, false),
        };
        match () {
            () if sse => {
                let events = LimitedEvents::new(body_chunks(response), limits.max_sse_event_size);
                Ok(Posted::Sse(
                    crate::http::events::Events::new(events).boxed(),
                    new_session,
                ))
            }
            () if json => {
                let body = read_bounded(response, limits.max_json_response_size).await?;
                match heavy::decode(body, crate::codec::answers::message).await {
                    Ok(parsed) => Ok(Posted::Json(parsed, new_session)),
                    Err(_) if awaits_no_response => Ok(Posted::Accepted),
                    Err(error) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                        format!("response is not JSON-RPC: {error}"),
                    ))),
                }
            }
            () if awaits_no_response => Ok(Posted::Accepted),
            () => Err(StreamableHttpError::UnexpectedContentType(header_str(
                response.headers(),
                CONTENT_TYPE,
            ))),
        }
    }
}

/// The headers every POST of a message carries, for a sender that keeps
/// its headers made (`session::direct`): with them in place, a POST appends
/// nothing to its copy of them (each append to a copied map grows it).
pub(crate) fn with_post_headers(headers: &mut HeaderMap) {
    headers.append(ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
    headers.append(CONTENT_TYPE, HeaderValue::from_static(JSON_MIME_TYPE));
}

/// `name: value` appended, unless it is there already (see
/// [`with_post_headers`]).
fn ensure(headers: &mut HeaderMap, name: HeaderName, value: &'static str) {
    if !headers
        .get_all(&name)
        .iter()
        .any(|present| present.as_bytes() == value.as_bytes())
    {
        headers.append(name, HeaderValue::from_static(value));
    }
}

/// Posting a message written by us (a call by hand, `crate::codec::request`):
/// rmcp's client trait takes only its own messages. Our client, and it
/// wrapped for OAuth.
pub(crate) trait PostOutgoing:
    StreamableHttpClient<Error = reqwest::Error> + Clone + Send + Sync + 'static
{
    fn post_outgoing(
        &self,
        uri: Arc<str>,
        message: Outgoing,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HeaderMap,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<Posted, HttpError>> + Send;
}

impl<C: PostOutgoing, S: TokenSource + 'static> PostOutgoing for TokenClient<C, S> {
    async fn post_outgoing(
        &self,
        uri: Arc<str>,
        message: Outgoing,
        session_id: Option<Arc<str>>,
        _: Option<String>,
        custom_headers: HeaderMap,
        limits: StreamableHttpResponseLimits,
    ) -> Result<Posted, HttpError> {
        self.authorized(|token| {
            self.inner().post_outgoing(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }
}

#[cfg(test)]
mod post_header_tests {
    use super::*;

    fn values(headers: &HeaderMap, name: HeaderName) -> Vec<&str> {
        headers
            .get_all(name)
            .iter()
            .map(|value| value.to_str().unwrap())
            .collect()
    }

    /// A POST carries `Accept` and `Content-Type` once each, whether its
    /// sender's headers have them made or not, and beside a configured
    /// `Accept` of another value.
    #[test]
    fn a_post_carries_its_headers_once_whoever_made_them() {
        let mut made = HeaderMap::new();
        with_post_headers(&mut made);
        let mut configured = HeaderMap::new();
        configured.append(ACCEPT, HeaderValue::from_static("application/json"));
        for (mut headers, accept) in [
            (HeaderMap::new(), vec![ACCEPT_BOTH]),
            (made, vec![ACCEPT_BOTH]),
            (configured, vec!["application/json", ACCEPT_BOTH]),
        ] {
            ensure(&mut headers, ACCEPT, ACCEPT_BOTH);
            ensure(&mut headers, CONTENT_TYPE, JSON_MIME_TYPE);
            assert_eq!(values(&headers, ACCEPT), accept);
            assert_eq!(values(&headers, CONTENT_TYPE), [JSON_MIME_TYPE]);
        }
    }
}
