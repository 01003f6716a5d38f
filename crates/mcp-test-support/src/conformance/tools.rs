//! The content, logging, progress, error and client-input fixtures: the
//! tools the 2025 scenarios (`tools-call-*`, `elicitation-*`,
//! `server-sse-polling`, `json-schema-2020-12`) call by name.
//!
//! Texts are the ones each scenario's description shows; the scenarios
//! check shapes rather than exact strings, but a reader comparing a run
//! with the suite's documentation should find what they expect.

#![allow(deprecated)] // LoggingLevel: SEP-2577 deprecates logging, the suite still tests it.

use std::time::Duration;

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, LoggingLevel,
        ProgressNotificationParam, ResourceContents,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

use super::{
    ask::{Ask, Gathered, accepted_content, gather, sampled_text},
    fixtures,
    handler::ConformanceServer,
    logging::log,
};

/// Pause between the steps of the logging and progress tools: the
/// scenarios want the notifications spread over the call.
const STEP: Duration = Duration::from_millis(50);

/// How long `test_reconnection` waits for the client to resume the stream
/// it cut before answering anyway.
const RESUME_WAIT: Duration = Duration::from_secs(10);

pub(crate) fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

fn tool_error(message: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message)]).into()
}

/// A required string argument; `None` means the call gets
/// [`missing_argument`] (a tool error the caller can read, not a protocol
/// error).
fn string_argument(request: &CallToolRequestParams, name: &str) -> Option<String> {
    request
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get(name))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn missing_argument(name: &str) -> CallToolResponse {
    tool_error(format!("missing string argument `{name}`"))
}

pub(crate) fn simple_text() -> CallToolResponse {
    text("This is a simple text response for testing.")
}

pub(crate) fn image() -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::image(fixtures::PNG_BASE64, "image/png")]).into()
}

pub(crate) fn audio() -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::audio(fixtures::WAV_BASE64, "audio/wav")]).into()
}

pub(crate) fn embedded_resource() -> CallToolResponse {
    let resource = ResourceContents::text(
        "This is an embedded resource content.",
        "test://embedded-resource",
    )
    .with_mime_type("text/plain");
    CallToolResult::success(vec![ContentBlock::resource(resource)]).into()
}

pub(crate) fn mixed() -> CallToolResponse {
    let resource = ResourceContents::text(
        json!({"test": "data", "value": 123}).to_string(),
        "test://mixed-content-resource",
    )
    .with_mime_type("application/json");
    CallToolResult::success(vec![
        ContentBlock::text("Multiple content types test:"),
        ContentBlock::image(fixtures::PNG_BASE64, "image/png"),
        ContentBlock::resource(resource),
    ])
    .into()
}

pub(crate) async fn with_logging(
    server: &ConformanceServer,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    let steps = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (index, step) in steps.into_iter().enumerate() {
        if index > 0 {
            tokio::time::sleep(STEP).await;
        }
        log(context, &server.session, LoggingLevel::Info, step).await;
    }
    text("Tool with logging executed successfully")
}

pub(crate) async fn with_progress(context: &RequestContext<RoleServer>) -> CallToolResponse {
    let token = context.meta.get_progress_token();
    for (index, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if index > 0 {
            tokio::time::sleep(STEP).await;
        }
        let Some(token) = token.clone() else { continue };
        let update = ProgressNotificationParam::new(token, progress)
            .with_total(100.0)
            .with_message(format!("Completed step {progress} of 100"));
        if let Err(error) = context.peer.notify_progress(update).await {
            tracing::debug!(%error, "progress notification not delivered");
        }
    }
    match token {
        Some(token) => text(format!("Progress reported on token {}", token.0)),
        None => text("No progress token: ran without reporting progress"),
    }
}

pub(crate) fn error() -> CallToolResponse {
    tool_error("This tool intentionally returns an error for testing")
}

/// The HTTP layer cut this call's response stream right after its priming
/// event (see `http.rs`); answering before the client resumes with
/// `Last-Event-ID` would send the result into the closed stream. So wait
/// for the resume, or give up after [`RESUME_WAIT`].
pub(crate) async fn reconnection(
    server: &ConformanceServer,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    if let Some(session_id) = super::http::legacy_session_id(context) {
        let resumed = server.shared.resumed(&session_id);
        if tokio::time::timeout(RESUME_WAIT, resumed.notified())
            .await
            .is_err()
        {
            tracing::warn!(%session_id, "test_reconnection: the client did not resume its stream");
        }
        server.shared.forget_resumed(&session_id);
    }
    text(
        "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
    )
}

pub(crate) async fn sampling(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let Some(prompt) = string_argument(request, "prompt") else {
        return Ok(missing_argument("prompt"));
    };
    let asks = [("completion", Ask::sample(prompt, 100))];
    Ok(
        match gather(context, request.input_responses.as_ref(), &asks, None).await? {
            Gathered::Pending(pending) => pending.into(),
            Gathered::Ready(answers) => {
                let answer = answers.get("completion").map(sampled_text);
                text(format!("LLM response: {}", answer.unwrap_or_default()))
            }
        },
    )
}

/// `test_elicitation`, `test_elicitation_sep1034_defaults` and
/// `test_elicitation_sep1330_enums`: one form, the answer echoed back.
pub(crate) async fn elicitation(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    form: ElicitationForm,
) -> Result<CallToolResponse, ErrorData> {
    let (message, schema, prefix) = match form {
        ElicitationForm::Message => {
            let Some(message) = string_argument(request, "message") else {
                return Ok(missing_argument("message"));
            };
            let schema = json!({
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"}
                },
                "required": ["username", "email"]
            });
            (message, schema, "User response")
        }
        ElicitationForm::Sep1034Defaults => (
            "Please review and update the form fields with defaults".to_owned(),
            fixtures::sep1034_schema(),
            "Elicitation completed",
        ),
        ElicitationForm::Sep1330Enums => (
            "Please select options from the enum fields".to_owned(),
            fixtures::sep1330_schema(),
            "Elicitation completed",
        ),
    };
    let asks = [("form", Ask::elicit(message, schema))];
    Ok(
        match gather(context, request.input_responses.as_ref(), &asks, None).await? {
            Gathered::Pending(pending) => pending.into(),
            Gathered::Ready(answers) => {
                let answer = answers.get("form").cloned().unwrap_or_default();
                let action = answer
                    .get("action")
                    .and_then(Value::as_str)
                    .unwrap_or("none");
                let content = accepted_content(&answer).cloned().unwrap_or(json!({}));
                text(format!("{prefix}: action={action}, content={content}"))
            }
        },
    )
}

/// The three elicitation fixtures.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ElicitationForm {
    /// `test_elicitation`: shows the `message` argument.
    Message,
    /// SEP-1034: every field has a default.
    Sep1034Defaults,
    /// SEP-1330: every enum shape.
    Sep1330Enums,
}

pub(crate) fn json_schema_2020_12(request: &CallToolRequestParams) -> CallToolResponse {
    let arguments = request.arguments.clone().unwrap_or_default();
    text(format!(
        "JSON Schema 2020-12 tool called with: {}",
        Value::Object(arguments)
    ))
}

pub(crate) fn header_param(request: &CallToolRequestParams) -> CallToolResponse {
    match string_argument(request, "region") {
        Some(region) => text(format!("region: {region}")),
        None => missing_argument("region"),
    }
}
