//! The spans: a SERVER span per request the gateway serves, a CLIENT span
//! per attempt sent upstream, and what the supervisor decided on both.
//!
//! Each also records its duration in the convention's histogram (over OTLP
//! when installed) and in the `/metrics` copy ([`super::durations`], always).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::Either;
use http::HeaderMap;
use opentelemetry::{
    Context, KeyValue,
    context::{FutureExt as _, WithContext},
    trace::{Link, Span as _, SpanKind, Status, TraceContextExt, Tracer},
};
use rmcp::model::{ClientRequest, ErrorData, RequestId, ServerResult};
use tokio::time::Instant;

use super::{durations, has_span, installed, propagate, semconv as sc};
use crate::{
    CallOutcome, Failure,
    call::UpstreamRequest,
    config::{CAPTURE_MAX_BYTES, Transport},
    policy::Decision,
    tool_answer::Answer,
};

/// Who a request's spans hang under: the gateway's SERVER span, or a
/// library caller's own span. Empty when telemetry is off or there is no
/// parent (the CLIENT spans are then roots of their own traces).
#[derive(Clone, Debug, Default)]
pub struct TraceParent(Option<Context>);

impl TraceParent {
    /// No parent.
    pub fn none() -> Self {
        TraceParent(None)
    }

    /// The caller's current span: its `tracing` span when the subscriber has
    /// a `tracing-opentelemetry` layer, else the attached OpenTelemetry
    /// context. Empty (and free) when telemetry is not installed.
    pub fn current() -> Self {
        if installed().is_none() {
            return TraceParent(None);
        }
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let from_tracing = tracing::Span::current().context();
        if has_span(&from_tracing) {
            return TraceParent(Some(from_tracing));
        }
        let attached = Context::current();
        TraceParent(has_span(&attached).then_some(attached))
    }

    /// The context attached to the running task (the gateway's SERVER span).
    pub(crate) fn attached() -> Self {
        if installed().is_none() {
            return TraceParent(None);
        }
        let attached = Context::current();
        TraceParent(has_span(&attached).then_some(attached))
    }

    /// The trace's id in hex, when there is a trace.
    pub(crate) fn trace_id(&self) -> Option<String> {
        use opentelemetry::trace::TraceContextExt as _;
        let context = self.0.as_ref()?;
        Some(context.span().span_context().trace_id().to_string())
    }

    /// The connection refused the request without sending it: its state and
    /// the decision that stands, on the parent span.
    pub(crate) fn refused(
        &self,
        state: &'static str,
        decision: Option<&Decision>,
        outcome: &CallOutcome,
    ) {
        let Some(cx) = &self.0 else { return };
        let span = cx.span();
        let mut attributes = vec![KeyValue::new(sc::CONNECTION_STATE, state)];
        if let Some(decision) = decision {
            attributes.push(KeyValue::new(sc::POLICY_DECISION, decision_label(decision)));
        }
        if let CallOutcome::Unavailable {
            failure,
            retry_in: Some(retry_in),
            ..
        } = outcome
        {
            attributes.push(KeyValue::new(sc::FAILURE_KIND, failure.kind.as_str()));
            attributes.push(KeyValue::new(sc::RETRY_AFTER, retry_in.as_secs_f64()));
        }
        span.add_event(sc::EVENT_REFUSED, attributes.clone());
        span.set_attributes(attributes);
    }

    /// How the gateway's request ended when the supervisor answered instead
    /// of the upstream: the error type its SERVER span ends with.
    pub(crate) fn answered_instead(&self, outcome: &CallOutcome) {
        let Some(cx) = &self.0 else { return };
        if let Some(verdict) = cx.get::<Verdict>() {
            verdict.set(outcome_error_type(outcome));
        }
    }

    /// The called tool's contract hash, on the gateway's SERVER span.
    pub(crate) fn contract(&self, sha256: &str) {
        if let Some(cx) = &self.0 {
            cx.span()
                .set_attribute(KeyValue::new(sc::TOOL_CONTRACT, sha256.to_owned()));
        }
    }

    /// The time the request waited for a slot on its connection.
    pub(crate) fn queued(&self, wait: Duration) {
        if let Some(cx) = &self.0 {
            cx.span()
                .set_attribute(KeyValue::new(sc::QUEUE_WAIT, wait.as_secs_f64()));
        }
    }

    fn context(&self) -> Option<&Context> {
        self.0.as_ref()
    }
}

/// The policy's decision as the span attribute says it.
pub(crate) fn decision_label(decision: &Decision) -> &'static str {
    match decision {
        Decision::Retry { .. } => "retry",
        Decision::Reject => "reject",
        Decision::GiveUp => "give_up",
        Decision::Park { .. } => "park",
        Decision::Retire => "retire",
    }
}

/// `error.type` of an answer the supervisor gave instead of the upstream.
pub(crate) fn outcome_error_type(outcome: &CallOutcome) -> &'static str {
    match outcome {
        CallOutcome::Success(_) => "",
        CallOutcome::ToolError(_) => sc::TOOL_ERROR,
        CallOutcome::Rejected { failure, .. } | CallOutcome::Unavailable { failure, .. } => {
            failure.kind.as_str()
        }
        CallOutcome::Busy { .. } => "busy",
        CallOutcome::TimedOut { .. } => "timeout",
    }
}

/// The error type a SERVER span ends with when the supervisor answered (set
/// from deep inside the request; read when the span ends).
#[derive(Clone, Debug, Default)]
struct Verdict(Arc<Mutex<Option<&'static str>>>);

impl Verdict {
    fn set(&self, error_type: &'static str) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(error_type);
    }

    fn get(&self) -> Option<&'static str> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What a span's name names after the method.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    None,
    Tool(&'a str),
    Prompt(&'a str),
}

impl<'a> Target<'a> {
    pub(crate) fn of(request: &'a UpstreamRequest) -> Self {
        match request {
            UpstreamRequest::Call(call) => Target::Tool(&call.name),
            UpstreamRequest::Relayed(relayed) => match relayed.request() {
                ClientRequest::GetPromptRequest(get) => Target::Prompt(&get.params.name),
                _ => Target::None,
            },
        }
    }

    fn name(self, method: &str) -> String {
        match self {
            Target::None => method.to_owned(),
            Target::Tool(name) | Target::Prompt(name) => format!("{method} {name}"),
        }
    }

    /// The target as the duration metrics name it (the tool or prompt).
    fn metric_attribute(self) -> Option<KeyValue> {
        match self {
            Target::None => None,
            Target::Tool(name) => Some(KeyValue::new(sc::GEN_AI_TOOL_NAME, name.to_owned())),
            Target::Prompt(name) => Some(KeyValue::new(sc::GEN_AI_PROMPT_NAME, name.to_owned())),
        }
    }

    fn attributes(self, into: &mut Vec<KeyValue>) {
        match self {
            Target::None => {}
            Target::Tool(name) => {
                into.push(KeyValue::new(sc::GEN_AI_TOOL_NAME, name.to_owned()));
                into.push(KeyValue::new(sc::GEN_AI_OPERATION_NAME, sc::EXECUTE_TOOL));
            }
            Target::Prompt(name) => {
                into.push(KeyValue::new(sc::GEN_AI_PROMPT_NAME, name.to_owned()));
            }
        }
    }
}

/// How a request ended, as its span records it.
#[derive(Debug)]
pub(crate) enum Ending<'a> {
    /// Answered with a result (`is_error`: the tool's own error).
    Answered { is_error: bool },
    /// Answered with a JSON-RPC error.
    Error(&'a ErrorData),
    /// The client went away, or cancelled it.
    Cancelled,
}

impl<'a> Ending<'a> {
    pub(crate) fn of<T>(
        answer: &'a Result<T, ErrorData>,
        is_error: impl FnOnce(&T) -> bool,
    ) -> Self {
        match answer {
            Ok(result) => Ending::Answered {
                is_error: is_error(result),
            },
            Err(error) => Ending::Error(error),
        }
    }
}

/// Whether a result is a tool's error (`isError: true`).
pub(crate) fn is_tool_error(result: &ServerResult) -> bool {
    matches!(result, ServerResult::CallToolResult(r) if r.is_error == Some(true))
}

/// A request the gateway serves, as its SERVER span describes it.
pub(crate) struct Served<'a> {
    pub(crate) method: &'a str,
    pub(crate) target: Target<'a>,
    pub(crate) id: Option<&'a RequestId>,
    pub(crate) meta: Option<&'a dyn opentelemetry::propagation::Extractor>,
    pub(crate) headers: Option<&'a HeaderMap>,
    pub(crate) session: Option<&'a str>,
    pub(crate) protocol: Option<&'a str>,
    /// Served over stdio (`pipe`), else HTTP.
    pub(crate) stdio: bool,
    pub(crate) client: Option<IpAddr>,
    /// Who the caller is, as the gateway identified it.
    pub(crate) caller: Option<&'a crate::access::Caller>,
}

/// A request the gateway serves: its span (when telemetry is on) and its
/// duration.
#[derive(Debug)]
pub(crate) struct ServerSpan {
    otel: Option<(Context, Verdict)>,
    started: Instant,
    method: durations::Value,
    /// The tool or prompt, for the duration metric (telemetry on only).
    target: Option<KeyValue>,
}

impl ServerSpan {
    pub(crate) fn start(served: Served<'_>) -> ServerSpan {
        let started = Instant::now();
        let method = durations::method(served.method);
        let Some(telemetry) = installed() else {
            return ServerSpan {
                otel: None,
                started,
                method,
                target: None,
            };
        };
        let target = served.target.metric_attribute();
        let incoming = propagate::incoming(&telemetry.propagator, served.meta, served.headers);
        let parent = incoming.parent.unwrap_or_default();
        let links = incoming
            .link
            .map(|link| vec![Link::with_context(link)])
            .unwrap_or_default();
        let tracer = telemetry.sdk_tracer();
        let mut span = tracer
            .span_builder(served.target.name(served.method))
            .with_kind(SpanKind::Server)
            .with_links(links)
            .start_with_context(tracer, &parent);
        // Attributes only for a span that is recorded (sampled in).
        if span.is_recording() {
            let mut attributes = Vec::with_capacity(10);
            attributes.push(KeyValue::new(sc::MCP_METHOD_NAME, method_value(&method)));
            served.target.attributes(&mut attributes);
            if let Some(id) = served.id {
                attributes.push(KeyValue::new(sc::JSONRPC_REQUEST_ID, id.to_string()));
            }
            if let Some(session) = served.session {
                attributes.push(KeyValue::new(sc::MCP_SESSION_ID, hashed(session)));
            }
            if let Some(protocol) = served.protocol {
                attributes.push(KeyValue::new(sc::MCP_PROTOCOL_VERSION, protocol.to_owned()));
            }
            if served.stdio {
                attributes.push(KeyValue::new(sc::NETWORK_TRANSPORT, "pipe"));
            } else {
                attributes.push(KeyValue::new(sc::NETWORK_TRANSPORT, "tcp"));
                attributes.push(KeyValue::new(sc::NETWORK_PROTOCOL_NAME, "http"));
            }
            if let Some(client) = served.client {
                attributes.push(KeyValue::new(sc::CLIENT_ADDRESS, client.to_string()));
            }
            if let Some(caller) = served.caller {
                if let Some(user) = &caller.user {
                    attributes.push(KeyValue::new(sc::USER_ID, user.clone()));
                }
                if let Some(client) = &caller.client {
                    attributes.push(KeyValue::new(sc::MCP_CLIENT_ID, client.clone()));
                }
                if !caller.groups.is_empty() {
                    let groups = caller.groups.iter().cloned().map(Into::into).collect();
                    attributes.push(KeyValue::new(
                        sc::USER_ROLES,
                        opentelemetry::Value::Array(opentelemetry::Array::String(groups)),
                    ));
                }
            }
            span.set_attributes(attributes);
        }
        let verdict = Verdict::default();
        let cx = parent.with_span(span).with_value(verdict.clone());
        ServerSpan {
            otel: Some((cx, verdict)),
            started,
            method,
            target,
        }
    }

    /// `work`, run within this span's context (what it sends upstream hangs
    /// under it); without telemetry, as it is: attaching an empty context
    /// at each of its polls cost a call some 200 instructions for nothing
    /// (docs/DECISIONS.md #139).
    ///
    /// Not an `async fn`: one would hold `work` twice (as its argument and
    /// as what it awaits) and move it once more at its first poll; `work`
    /// is a request's whole future (docs/DECISIONS.md #146).
    pub(crate) fn run<F: Future>(&self, work: F) -> Either<WithContext<F>, F> {
        match &self.otel {
            Some((cx, _)) => Either::Left(work.with_context(cx.clone())),
            None => Either::Right(work),
        }
    }

    pub(crate) fn end(self, ending: Ending<'_>) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let verdict = self.otel.as_ref().and_then(|(_, verdict)| verdict.get());
        let (error_type, code) = error_type(&ending, verdict);
        durations::server(&self.method, error_type.as_deref(), elapsed);
        let Some((cx, _)) = self.otel else { return };
        let span = cx.span();
        let mut metric = vec![KeyValue::new(
            sc::MCP_METHOD_NAME,
            method_value(&self.method),
        )];
        metric.extend(self.target);
        if let Some(code) = code {
            span.set_attribute(KeyValue::new(sc::RPC_RESPONSE_STATUS_CODE, code.clone()));
            metric.push(KeyValue::new(sc::RPC_RESPONSE_STATUS_CODE, code));
        }
        if let Some(error_type) = error_type {
            span.set_attribute(KeyValue::new(sc::ERROR_TYPE, error_type.clone()));
            span.set_status(Status::error(status_text(&ending, &error_type)));
            metric.push(KeyValue::new(sc::ERROR_TYPE, error_type));
        }
        span.end();
        if let Some(telemetry) = installed() {
            telemetry
                .instruments
                .server_operation
                .record(elapsed, &metric);
        }
    }
}

/// `error.type` and the JSON-RPC code of an ending.
fn error_type(
    ending: &Ending<'_>,
    verdict: Option<&'static str>,
) -> (Option<String>, Option<String>) {
    match ending {
        Ending::Answered { is_error: false } => (None, None),
        Ending::Answered { is_error: true } => {
            (Some(verdict.unwrap_or(sc::TOOL_ERROR).to_owned()), None)
        }
        Ending::Error(error) => {
            let code = error.code.0.to_string();
            (Some(code.clone()), Some(code))
        }
        Ending::Cancelled => (Some("cancelled".to_owned()), None),
    }
}

/// The span status text: the JSON-RPC message (cut short), or the error type.
fn status_text(ending: &Ending<'_>, error_type: &str) -> String {
    match ending {
        Ending::Error(error) => cut(&error.message, 256),
        _ => error_type.to_owned(),
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A session id as `mcp.session.id` shows it: the first 16 hex digits of
/// its SHA-256 (the id itself lets its holder talk in the session).
fn hashed(session: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(session.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Where a connection's upstream is, as CLIENT spans describe it.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamPeer {
    /// The connection's name.
    connection: Arc<str>,
    /// Its answered calls' duration series (`durations`).
    calls: durations::ConnectionCalls,
    stdio: bool,
    address: Option<String>,
    port: Option<u16>,
}

impl UpstreamPeer {
    /// The connection's name, shared.
    pub(crate) fn connection(&self) -> &Arc<str> {
        &self.connection
    }

    pub(crate) fn of(connection: &str, transport: &Transport) -> Self {
        let connection: Arc<str> = connection.into();
        match transport {
            Transport::Stdio(_) => UpstreamPeer {
                connection,
                calls: Default::default(),
                stdio: true,
                address: None,
                port: None,
            },
            Transport::Http(http) => {
                let url = url::Url::parse(&http.url).ok();
                UpstreamPeer {
                    connection,
                    calls: Default::default(),
                    stdio: false,
                    address: url.as_ref().and_then(|u| u.host_str().map(str::to_owned)),
                    port: url.as_ref().and_then(url::Url::port_or_known_default),
                }
            }
        }
    }

    fn attributes(&self, into: &mut Vec<KeyValue>) {
        if self.stdio {
            into.push(KeyValue::new(sc::NETWORK_TRANSPORT, "pipe"));
            return;
        }
        into.push(KeyValue::new(sc::NETWORK_TRANSPORT, "tcp"));
        into.push(KeyValue::new(sc::NETWORK_PROTOCOL_NAME, "http"));
        if let Some(address) = &self.address {
            into.push(KeyValue::new(sc::SERVER_ADDRESS, address.clone()));
        }
        if let Some(port) = self.port {
            into.push(KeyValue::new(sc::SERVER_PORT, i64::from(port)));
        }
    }
}

/// A method name as an attribute value: the served methods are static
/// strings (no allocation per request).
fn method_value(method: &durations::Value) -> opentelemetry::Value {
    match method {
        durations::Value::Static(text) => opentelemetry::Value::from(*text),
        other => opentelemetry::Value::from(other.as_str().to_owned()),
    }
}

/// One attempt sent upstream.
#[derive(Debug)]
pub(crate) struct ClientSpan {
    otel: Option<Context>,
    started: Instant,
    method: durations::Value,
    peer: Arc<UpstreamPeer>,
    /// The tool or prompt, for the duration metric (telemetry on only).
    target: Option<KeyValue>,
}

/// What a CLIENT span starts from.
#[derive(Debug)]
pub(crate) struct Attempt<'a> {
    pub(crate) parent: &'a TraceParent,
    pub(crate) request: &'a UpstreamRequest,
    pub(crate) peer: &'a Arc<UpstreamPeer>,
    pub(crate) number: u32,
    pub(crate) protocol: Option<&'a str>,
    /// Time waited out in the upstream's `Retry-After` before it.
    pub(crate) held: Duration,
}

impl ClientSpan {
    pub(crate) fn start(attempt: Attempt<'_>) -> ClientSpan {
        let started = Instant::now();
        let method = durations::method(attempt.request.method());
        let peer = attempt.peer.clone();
        let Some(telemetry) = installed() else {
            return ClientSpan {
                otel: None,
                started,
                method,
                peer,
                target: None,
            };
        };
        let target = Target::of(attempt.request);
        let parent = attempt.parent.context().cloned().unwrap_or_default();
        let tracer = telemetry.sdk_tracer();
        let mut span = tracer
            .span_builder(target.name(method.as_str()))
            .with_kind(SpanKind::Client)
            .start_with_context(tracer, &parent);
        if span.is_recording() {
            let mut attributes = Vec::with_capacity(12);
            attributes.push(KeyValue::new(sc::MCP_METHOD_NAME, method_value(&method)));
            attributes.push(KeyValue::new(
                sc::CONNECTION,
                attempt.peer.connection.clone(),
            ));
            attributes.push(KeyValue::new(sc::ATTEMPT, i64::from(attempt.number)));
            target.attributes(&mut attributes);
            attempt.peer.attributes(&mut attributes);
            if let Some(protocol) = attempt.protocol {
                attributes.push(KeyValue::new(sc::MCP_PROTOCOL_VERSION, protocol.to_owned()));
            }
            if !attempt.held.is_zero() {
                attributes.push(KeyValue::new(sc::HELD, attempt.held.as_secs_f64()));
            }
            if telemetry.capture_content
                && let Some(call) = attempt.request.call()
            {
                let arguments = call.arguments.json();
                attributes.push(KeyValue::new(
                    sc::GEN_AI_TOOL_CALL_ARGUMENTS,
                    cut(&arguments, CAPTURE_MAX_BYTES),
                ));
            }
            span.set_attributes(attributes);
        }
        ClientSpan {
            otel: Some(parent.with_span(span)),
            started,
            method,
            peer,
            target: target.metric_attribute(),
        }
    }

    /// Writes this attempt's context into the request's `_meta` (the HTTP
    /// client mirrors it into headers).
    pub(crate) fn inject(&self, request: &mut UpstreamRequest) {
        let (Some(cx), Some(telemetry)) = (&self.otel, installed()) else {
            return;
        };
        if !cx.span().span_context().is_valid() {
            return;
        }
        propagate::inject(&telemetry.propagator, cx, &mut request.meta_mut().0.0);
    }

    /// The upstream answered (the content a tool's answer carries is
    /// captured when configured; its structured content never is).
    pub(crate) fn answered(self, answer: &Answer) {
        let called = match answer {
            Answer::Result(result) => match &**result {
                ServerResult::CallToolResult(result) => Some(result),
                _ => None,
            },
            Answer::Tool(answer) => Some(answer.parts().0),
        };
        let tool_error = called.is_some_and(|result| result.is_error == Some(true));
        let error_type = tool_error.then_some(sc::TOOL_ERROR);
        self.end(error_type, |span| {
            if let Some(answer) = called
                && installed().is_some_and(|t| t.capture_content)
                && let Ok(text) = serde_json::to_string(&answer.content)
            {
                span.set_attribute(KeyValue::new(
                    sc::GEN_AI_TOOL_CALL_RESULT,
                    cut(&text, CAPTURE_MAX_BYTES),
                ));
            }
        });
    }

    /// The attempt failed, and the policy decided `decision`.
    pub(crate) fn failed(
        self,
        failure: &Failure,
        upstream: Option<&ErrorData>,
        decision: Option<&Decision>,
    ) {
        let code = upstream.map(|error| error.code.0.to_string());
        let error_type = code
            .clone()
            .unwrap_or_else(|| failure.kind.as_str().to_owned());
        let kind = failure.kind.as_str();
        let not_run = failure.not_run;
        let status = failure.status;
        let retry_after = failure.retry_after;
        self.end_owned(Some(error_type), |span| {
            span.set_attribute(KeyValue::new(sc::FAILURE_KIND, kind));
            span.set_attribute(KeyValue::new(sc::FAILURE_NOT_RUN, not_run));
            if let Some(code) = code {
                span.set_attribute(KeyValue::new(sc::RPC_RESPONSE_STATUS_CODE, code));
            }
            if let Some(status) = status {
                span.set_attribute(KeyValue::new(sc::HTTP_STATUS, i64::from(status)));
            }
            if let Some(after) = retry_after {
                span.set_attribute(KeyValue::new(sc::RETRY_AFTER, after.as_secs_f64()));
            }
            let Some(decision) = decision else { return };
            span.set_attribute(KeyValue::new(sc::POLICY_DECISION, decision_label(decision)));
            match decision {
                Decision::Retry { after } => {
                    span.set_attribute(KeyValue::new(sc::RETRY_BACKOFF, after.as_secs_f64()));
                }
                Decision::Park { cooldown, .. } => span.add_event(
                    sc::EVENT_PARK,
                    vec![KeyValue::new(sc::COOLDOWN, cooldown.as_secs_f64())],
                ),
                Decision::Retire => span.add_event(sc::EVENT_RETIRE, vec![]),
                Decision::Reject | Decision::GiveUp => {}
            }
        });
    }

    /// The caller cancelled the request.
    pub(crate) fn cancelled(self) {
        self.end(Some("cancelled"), |_| {});
    }

    fn end(
        self,
        error_type: Option<&'static str>,
        more: impl FnOnce(&opentelemetry::trace::SpanRef<'_>),
    ) {
        self.end_owned(error_type.map(str::to_owned), more);
    }

    fn end_owned(
        self,
        error_type: Option<String>,
        more: impl FnOnce(&opentelemetry::trace::SpanRef<'_>),
    ) {
        let elapsed = self.started.elapsed().as_secs_f64();
        durations::client(
            &self.method,
            error_type.as_deref(),
            (&self.peer.connection, &self.peer.calls),
            elapsed,
        );
        let Some(cx) = self.otel else { return };
        let span = cx.span();
        more(&span);
        let mut metric = vec![
            KeyValue::new(sc::MCP_METHOD_NAME, method_value(&self.method)),
            KeyValue::new(sc::CONNECTION, self.peer.connection.clone()),
        ];
        metric.extend(self.target);
        if let Some(error_type) = error_type {
            span.set_attribute(KeyValue::new(sc::ERROR_TYPE, error_type.clone()));
            span.set_status(Status::error(error_type.clone()));
            metric.push(KeyValue::new(sc::ERROR_TYPE, error_type));
        }
        span.end();
        if let Some(telemetry) = installed() {
            telemetry
                .instruments
                .client_operation
                .record(elapsed, &metric);
        }
    }
}

/// An upstream session ended after `lasted`.
pub(crate) fn client_session_ended(peer: &UpstreamPeer, protocol: Option<&str>, lasted: Duration) {
    durations::client_session(&peer.connection, lasted.as_secs_f64());
    let Some(telemetry) = installed() else { return };
    let mut attributes = vec![KeyValue::new(sc::CONNECTION, peer.connection.clone())];
    peer.attributes(&mut attributes);
    if let Some(protocol) = protocol {
        attributes.push(KeyValue::new(sc::MCP_PROTOCOL_VERSION, protocol.to_owned()));
    }
    telemetry
        .instruments
        .client_session
        .record(lasted.as_secs_f64(), &attributes);
}
