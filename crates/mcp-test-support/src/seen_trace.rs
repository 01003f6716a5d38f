//! The trace context a `tools/call` arrived with, as the test server saw
//! it: the `_meta.traceparent` of the request (SEP-414) and, over HTTP, the
//! `traceparent` header. Tests of trace propagation compare them with the
//! spans an OTLP collector got ([`crate::otlp`]).

use rmcp::{RoleServer, model::CallToolRequestParams, service::RequestContext};

/// The W3C trace context one `tools/call` arrived with
/// ([`crate::ServerControl::seen_traces`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenTrace {
    /// The tool called.
    pub tool: String,
    /// `params._meta.traceparent` (SEP-414), over any transport.
    pub meta: Option<String>,
    /// The HTTP request's `traceparent` header; always `None` over stdio.
    pub header: Option<String>,
}

impl SeenTrace {
    pub(crate) fn of(
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Self {
        // rmcp moves the incoming `_meta` into the context; the params keep
        // it only when a request was built in process.
        let meta = context
            .meta
            .get_traceparent()
            .or_else(|| request.meta.as_ref()?.get_traceparent())
            .map(str::to_owned);
        // The streamable HTTP server hands the request's head over with
        // each message.
        let header = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get(TRACEPARENT))
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        Self {
            tool: request.name.to_string(),
            meta,
            header,
        }
    }
}

/// The W3C Trace Context header, and its `_meta` key.
const TRACEPARENT: &str = "traceparent";
