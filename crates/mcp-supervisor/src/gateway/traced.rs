//! The rmcp path's SERVER spans: the gateway's handler serves each request
//! that goes upstream (and each listing) inside a span of its own; the
//! direct path starts its own (`direct.rs`). Off (no telemetry), this only
//! times the request for `/metrics`.

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolResponse, ProtocolVersion},
    service::RequestContext,
};

use crate::{
    codec::mcp_headers,
    listener::Peer,
    telemetry::{
        propagate,
        spans::{Ending, Served, ServerSpan, Target},
    },
};

/// The SERVER span of a request rmcp handed over with `context` (no HTTP
/// request parts: served over stdio).
pub(super) fn span(
    method: &str,
    target: Target<'_>,
    context: &RequestContext<RoleServer>,
) -> ServerSpan {
    let parts = context.extensions.get::<http::request::Parts>();
    let headers = parts.map(|parts| &parts.headers);
    let session = headers
        .and_then(|headers| headers.get(&mcp_headers::SESSION_ID))
        .and_then(|value| value.to_str().ok());
    let protocol = context
        .protocol_version()
        .or_else(|| context.meta.protocol_version());
    let meta = propagate::meta_carrier(&context.meta.0.0);
    ServerSpan::start(Served {
        method,
        target,
        id: Some(&context.id),
        meta: Some(&meta),
        headers,
        session,
        protocol: protocol.as_ref().map(ProtocolVersion::as_str),
        stdio: parts.is_none(),
        client: parts.and_then(|parts| parts.extensions.get::<Peer>().map(|peer| peer.0)),
        caller: parts
            .and_then(|parts| {
                parts
                    .extensions
                    .get::<std::sync::Arc<crate::access::Caller>>()
            })
            .map(|caller| &**caller),
    })
}

/// Runs `work` inside `span` (its context attached, so what it sends
/// upstream hangs under it) and ends the span with how it ended.
pub(super) async fn within<T>(
    span: ServerSpan,
    work: impl Future<Output = Result<T, ErrorData>>,
    is_error: impl FnOnce(&T) -> bool,
) -> Result<T, ErrorData> {
    let answer = span.run(work).await;
    span.end(Ending::of(&answer, is_error));
    answer
}

/// Whether a call's answer is a tool's error.
pub(super) fn call_failed(response: &CallToolResponse) -> bool {
    matches!(response, CallToolResponse::Complete(result) if result.is_error == Some(true))
}

/// For answers that cannot be a tool's error.
pub(super) fn never<T>(_: &T) -> bool {
    false
}
