//! The direct path: a plain `tools/call`, answered by the gateway's POST
//! handler without rmcp's server (docs/DECISIONS.md #78, #81).
//!
//! On the gateway hop rmcp's server costs a call more than everything else
//! the gateway does: the session worker (or, for a 2026-07-28 request, a
//! service built for the one request), a handler task, the request's own
//! channel and SSE stream. For the calls where it adds nothing to what the
//! gateway does itself, the POST handler answers them, through the same
//! supervised path and the same spine (`tool_call::answer`, which the
//! handler's `call_tool` runs too). A call takes the direct path when all
//! of these hold, and goes through rmcp otherwise:
//!
//! - a 2025 session's call ([`DirectCalls::admit`](super::direct_sessions::DirectCalls::admit)): its client declared no
//!   sampling, elicitation or roots, so no request can go back to it during
//!   the call (its log messages still reach it, on its session); the body
//!   holds one `tools/call` with only `name`, `arguments` and a
//!   progress token and trace context in `_meta` (rmcp's client sends a
//!   token with every request; no task; others' `_meta` keys are passed
//!   over, a reserved one it does not read is rmcp's); no `Mcp-*` header
//!   but the session id and the session's own protocol version;
//! - a 2026-07-28 client's call ([`StatelessCall`]): no session id; a
//!   body holding one `tools/call` with only `name`, `arguments` and a
//!   `_meta` of the client's context (protocol version 2026-07-28,
//!   capabilities, optionally its info and a log level) and optionally a
//!   progress token and trace context (others' keys passed over, as for
//!   2025): no task, no `inputResponses` or `requestState` (a retry goes
//!   to rmcp); the SEP-2243 headers `MCP-Protocol-Version`,
//!   `Mcp-Method` and `Mcp-Name` each once and equal to the body, and no
//!   other `Mcp-*` header; a tool whose name travels in a header as it is
//!   and whose input schema marks no argument for a header;
//! - either way: not a meta-tool; `Host`/`Origin` allowed, JSON in, JSON and
//!   SSE accepted.
//!
//! A large body (one that waited for a large-request permit) is read on a
//! blocking thread, and its answer holds the permit until it is sent, as on
//! rmcp's path; taking the direct path spares it rmcp's parse, which holds
//! several buffered copies of the arguments at once (docs/DECISIONS.md #109).
//!
//! What rmcp's server does for such a call, the direct path does too:
//!
//! - the answer is shaped as rmcp shapes a handler's answer for the client's
//!   protocol generation, and a 2026-07-28 client's protocol error gets the
//!   HTTP status rmcp gives it ([`Generation`]);
//! - the upstream's progress (and, for a 2026-07-28 request that asked for a
//!   log level, its log messages) comes first, with the client's token, on
//!   the answer's own event stream (plain JSON when nothing comes before the
//!   answer, as `answer.rs` makes of rmcp's stream);
//! - an upstream's question to a 2026-07-28 client makes the answer
//!   `input_required`, the upstream request waiting for the client's retry
//!   (`mrtr`);
//! - `notifications/cancelled` for a 2025 call cancels it upstream, as does
//!   the client going away, or the gateway ending its sessions;
//! - a 2025 call counts as activity for the session's idle timeout;
//! - a call still running after rmcp's SSE keep-alive interval is answered
//!   as an event stream with the same keep-alives, then its answer.
//!
//! What it does not: a long call's stream has no event ids, so a client
//! whose connection drops cannot resume it; the call is cancelled instead.

// Logging is deprecated by SEP-2577 (protocol 2026-07-28), yet a 2026-07-28
// request may still ask for log messages at a level: we relay them.
#![allow(deprecated)]

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolResponse, ClientCapabilities, ErrorCode, ErrorData, LoggingLevel, ProgressToken,
    ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerResult,
};
use tokio_util::sync::CancellationToken;

use super::{
    answer::Before,
    direct_sessions::{DirectSession, plain},
    downstream::{DownstreamRequest, Origin},
    mrtr::Answering,
    state::GatewayState,
    tool_call,
    tool_call::Called,
};
use crate::{
    access::Caller,
    call::{Arguments, ToolCall},
    codec::{
        mcp_headers,
        posted::{self, PostedCall},
    },
    generation::Generation,
    telemetry::{
        propagate::TraceFields,
        spans::{Ending, Served, ServerSpan, Target as SpanTarget, is_tool_error},
    },
    tool_answer::{Answer, Message},
};

/// A plain `tools/call`, as the direct path answers it.
#[derive(Debug)]
pub(super) struct PlainCall {
    id: RequestId,
    /// In the client's names; its arguments as the client sent them (an
    /// object), never parsed here.
    tool: ToolCall,
    /// The client's progress token, when it sent one.
    progress: Option<ProgressToken>,
    /// The trace context in its `_meta` (SEP-414), when it has one.
    trace: Option<Box<TraceFields>>,
}

impl From<PostedCall> for PlainCall {
    fn from(posted: PostedCall) -> Self {
        let PostedCall {
            id,
            name,
            arguments,
            progress,
            trace,
        } = posted;
        PlainCall {
            id,
            tool: ToolCall::new(name, arguments.map(Arguments::from).unwrap_or_default()),
            progress,
            trace: TraceFields::boxed(trace.traceparent, trace.tracestate, trace.baggage),
        }
    }
}

impl PlainCall {
    /// Its SERVER span, parented by its `_meta` or `headers`, from the
    /// `client` address and `caller`.
    pub(super) fn span(
        &self,
        headers: &HeaderMap,
        (session, protocol): (Option<&str>, Option<&str>),
        (client, caller): (Option<std::net::IpAddr>, &Caller),
    ) -> ServerSpan {
        ServerSpan::start(Served {
            method: "tools/call",
            target: SpanTarget::Tool(&self.tool.name),
            id: Some(&self.id),
            meta: self
                .trace
                .as_deref()
                .map(|trace| trace as &dyn opentelemetry::propagation::Extractor),
            headers: Some(headers),
            session,
            protocol,
            stdio: false,
            client,
            caller: Some(caller),
        })
    }
}

impl DirectSession {
    /// The answer to `call`, through the supervisor, and the messages that
    /// go before it (its progress); `cancelled` (or dropping the future)
    /// cancels it upstream. A cancelled call has no answer, as through rmcp,
    /// which closes a cancelled request's stream.
    pub(super) fn answer(
        self: Arc<Self>,
        state: Arc<GatewayState>,
        (call, span, caller): (PlainCall, ServerSpan, Arc<Caller>),
        cancelled: CancellationToken,
    ) -> (BoxFuture<'static, Option<Message>>, Before) {
        let (before, messages) = Before::channel();
        let PlainCall {
            id,
            tool,
            progress,
            trace: _,
        } = call;
        let answer = crate::boxed::in_place(move || async move {
            self.calls().insert(id.clone(), cancelled.clone());
            let _in_progress = InProgress {
                session: &self,
                id: id.clone(),
                _cancel: cancelled.clone().drop_guard(),
            };
            let answered = span
                .run(self.respond(
                    &state,
                    (id.clone(), tool, &caller),
                    progress,
                    before,
                    cancelled.clone(),
                ))
                .await;
            end(span, &answered, &cancelled);
            (!cancelled.is_cancelled()).then(|| Message::answer(answered, id))
        });
        (answer, messages)
    }

    async fn respond(
        &self,
        state: &Arc<GatewayState>,
        (id, tool, caller): (RequestId, ToolCall, &Arc<Caller>),
        progress: Option<ProgressToken>,
        before: super::answer::BeforeSender,
        cancelled: CancellationToken,
    ) -> Result<Answer, ErrorData> {
        let downstream = (&self.downstream, caller.clone());
        let answering = Answering::OnSession(Box::new(move |connection| {
            DownstreamRequest::direct(downstream, id, connection, cancelled, progress, before)
        }));
        let response = tool_call::answer(state, tool, answering, caller).await;
        let tasks = self
            .info()
            .is_some_and(|info| info.capabilities.supports_tasks());
        Generation::Sessions.shape(response, tasks)
    }
}

/// A 2026-07-28 client's plain `tools/call`: no session, its client's
/// context in `_meta` (see the module doc).
#[derive(Debug)]
pub(super) struct StatelessCall {
    call: PlainCall,
    capabilities: ClientCapabilities,
    log_level: Option<LoggingLevel>,
}

impl From<posted::StatelessCall> for StatelessCall {
    fn from(posted: posted::StatelessCall) -> Self {
        StatelessCall {
            call: PlainCall::from(posted.call),
            capabilities: posted.capabilities,
            log_level: posted.log_level,
        }
    }
}

impl StatelessCall {
    /// `body` as a 2026-07-28 client's plain call (see [`posted`]).
    pub(super) fn read(body: &[u8]) -> Option<StatelessCall> {
        posted::StatelessCall::read(body).map(StatelessCall::from)
    }

    /// The tool it calls, by its exposed name.
    pub(super) fn name(&self) -> &str {
        &self.call.tool.name
    }

    /// Whether it may take the direct path with `headers`: plain ones (see
    /// [`plain`]) and SEP-2243's standard headers exactly as rmcp would
    /// accept them for this call (each once: this protocol version,
    /// `tools/call`, the tool's name as it is), and no other MCP header. The
    /// `Host`/`Origin` allowlist, and whether the tool marks arguments for
    /// headers, are the caller's to check.
    pub(super) fn takes(&self, headers: &HeaderMap) -> bool {
        let name = self.name();
        if !plain(headers) || !mcp_headers::bare_header_value(name) {
            return false;
        }
        let expected = [
            (
                mcp_headers::PROTOCOL_VERSION,
                ProtocolVersion::V_2026_07_28.as_str(),
            ),
            (mcp_headers::METHOD, "tools/call"),
            (mcp_headers::NAME, name),
        ];
        let mut seen = [false; 3];
        for (header, value) in headers {
            let Some(slot) = expected.iter().position(|(known, _)| known == header) else {
                if header.as_str().starts_with(mcp_headers::PREFIX) {
                    return false;
                }
                continue;
            };
            if seen[slot] || value.as_bytes() != expected[slot].1.as_bytes() {
                return false;
            }
            seen[slot] = true;
        }
        seen == [true; 3]
    }

    /// Its answer, through the supervisor, and the messages that go before
    /// it (progress, log messages at the level it asked for); `gone` (or
    /// dropping the future) cancels it upstream, and a cancelled call has no
    /// answer. An upstream's question makes the answer `input_required`, as
    /// through rmcp (`mrtr`); the client's retry with its answers goes to
    /// rmcp, which hands them over.
    /// Its SERVER span (see [`PlainCall::span`]).
    pub(super) fn span(
        &self,
        headers: &HeaderMap,
        from: (Option<std::net::IpAddr>, &Caller),
    ) -> ServerSpan {
        self.call.span(
            headers,
            (None, Some(ProtocolVersion::V_2026_07_28.as_str())),
            from,
        )
    }

    pub(super) fn answer(
        self,
        state: Arc<GatewayState>,
        (span, caller): (ServerSpan, Arc<Caller>),
        gone: CancellationToken,
    ) -> (BoxFuture<'static, Option<Message>>, Before) {
        let (before, messages) = Before::channel();
        let StatelessCall {
            call:
                PlainCall {
                    id,
                    tool,
                    progress,
                    trace: _,
                },
            capabilities,
            log_level,
        } = self;
        let answer = crate::boxed::in_place(move || async move {
            let tasks = capabilities.supports_tasks();
            let origin = Origin::answered(
                (id.clone(), caller.clone()),
                capabilities,
                progress,
                log_level,
                before,
            );
            let response = span
                .run(tool_call::answer(
                    &state,
                    tool,
                    Answering::InRounds {
                        origin,
                        gone: &gone,
                    },
                    &caller,
                ))
                .await;
            let answered = Generation::Stateless.shape(response, tasks);
            end(span, &answered, &gone);
            (!gone.is_cancelled()).then(|| Message::answer(answered, id))
        });
        (answer, messages)
    }
}

/// Ends a direct call's SERVER span with how it ended.
fn end(span: ServerSpan, answered: &Result<Answer, ErrorData>, cancelled: &CancellationToken) {
    if cancelled.is_cancelled() {
        span.end(Ending::Cancelled);
    } else {
        span.end(Ending::of(answered, |answer| match answer {
            Answer::Result(result) => is_tool_error(result),
            Answer::Tool(answer) => answer.is_error(),
        }));
    }
}

/// A direct call in progress: forgotten when it ends; cancelled upstream if
/// it ends unanswered (the client went away).
struct InProgress<'a> {
    session: &'a DirectSession,
    id: RequestId,
    _cancel: tokio_util::sync::DropGuard,
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        self.session.calls().remove(&self.id);
    }
}

/// How rmcp's server shapes a direct call's answer, and picks its HTTP
/// status, for the client's generation.
impl Generation {
    /// What rmcp's server makes of a handler's `tools/call` answer
    /// (`handler/server.rs`): a task only for a client that declared tasks;
    /// for a 2025 peer no `input_required`, no `resultType: complete`, and
    /// structured output only as an object; for a 2026-07-28 one, caching
    /// hints filled in and "resource not found" as -32602. A tool's answer
    /// with its structured content kept as text stays so (a tool's answer
    /// has no caching hints), but for a 2025 peer's whose structured content
    /// is not an object, which rmcp's shaping moves into its text.
    pub(super) fn shape(
        self,
        response: Result<Called, ErrorData>,
        tasks: bool,
    ) -> Result<Answer, ErrorData> {
        let response = match response {
            Ok(Called::Tool(answer))
                if self == Generation::Sessions && answer.structured_not_an_object() =>
            {
                Ok(CallToolResponse::Complete(answer.into_result()))
            }
            Ok(Called::Tool(mut answer)) => {
                if self == Generation::Sessions {
                    legacy(answer.result_mut());
                }
                return Ok(Answer::Tool(answer));
            }
            Ok(Called::Response(response)) => Ok(response),
            Err(error) => Err(error),
        };
        self.shape_rmcp(response, tasks).map(Answer::from)
    }

    /// [`Generation::shape`] for rmcp's type.
    fn shape_rmcp(
        self,
        response: Result<CallToolResponse, ErrorData>,
        tasks: bool,
    ) -> Result<ServerResult, ErrorData> {
        let shaped = response.and_then(|response| {
            if matches!(response, CallToolResponse::Task(_)) && !tasks {
                return Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                ));
            }
            let mut result = ServerResult::from(response);
            match self {
                Generation::Stateless => result.fill_missing_cache_hints(),
                Generation::Sessions => {
                    if matches!(result, ServerResult::InputRequiredResult(_)) {
                        return Err(ErrorData::invalid_request(
                            "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                            None,
                        ));
                    }
                    legacy_shape(&mut result);
                }
            }
            Ok(result)
        });
        shaped.map_err(|mut error| {
            if self == Generation::Stateless && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            error
        })
    }
}

/// What rmcp's server makes of a result for a 2025 peer: no `resultType:
/// complete`, structured output only as an object.
fn legacy_shape(result: &mut ServerResult) {
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
}

/// [`legacy_shape`] for a tool's answer whose structured content (kept
/// apart, as an object) is not in `result`.
fn legacy(result: &mut rmcp::model::CallToolResult) {
    let mut shaped = ServerResult::CallToolResult(std::mem::take(result));
    legacy_shape(&mut shaped);
    if let ServerResult::CallToolResult(shaped) = shaped {
        *result = shaped;
    }
}

impl Generation {
    /// The HTTP status of `message` answered as JSON: rmcp's server answers
    /// a 2026-07-28 request's protocol errors with a 4xx status
    /// (`jsonrpc_http_status` in its `tower.rs`), a 2025 one's with 200.
    pub(super) fn status(self, message: &Message) -> StatusCode {
        let Message::Rmcp(ServerJsonRpcMessage::Error(error)) = message else {
            return StatusCode::OK;
        };
        match self {
            Generation::Sessions => StatusCode::OK,
            Generation::Stateless => {
                crate::codec::mcp_headers::per_request_status(error.error.code)
            }
        }
    }
}

mod path;
pub(super) use path::{DirectPath, Post};

#[cfg(test)]
mod tests;
