//! What the gateway answers a client when a request comes back from the
//! supervisor as a value: the upstream's result as the client's protocol
//! needs it, the upstream's own error, or the supervisor's refusal (a tool
//! call's as an `isError` text result, anything else's as a JSON-RPC error
//! carrying the same text).

use rmcp::{
    ErrorData,
    model::{CallToolResponse, CallToolResult, ErrorCode, ResultType, ServerResult},
};

use crate::{
    CallOutcome, FailureKind, Forwarded, gateway::tool_call::Called, meta, tool_answer::ToolAnswer,
};

/// A result as the downstream session's protocol needs it: results from a
/// 2025-era upstream carry no `resultType`, which protocol 2026-07-28
/// requires on every result (clients such as the Python SDK 2.x refuse one
/// without it); an absent field means `complete`. rmcp removes `complete`
/// again for a downstream session on an older protocol version.
pub(super) fn complete(result_type: &mut Option<ResultType>) {
    result_type.get_or_insert(ResultType::COMPLETE);
}

pub(super) fn downstream(mut result: CallToolResult) -> CallToolResponse {
    complete(&mut result.result_type);
    result.into()
}

/// A tool's answer kept with its structured content as text, as
/// [`downstream`] makes rmcp's.
fn downstream_kept(mut answer: ToolAnswer) -> Called {
    complete(&mut answer.result_mut().result_type);
    Called::Tool(answer)
}

pub(in crate::gateway) fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown tool '{name}'."), None)
}

pub(super) fn unknown_prompt(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown prompt '{name}'."), None)
}

pub(super) fn unknown_resource(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("Resource not found: {uri}"),
        Some(serde_json::json!({ "uri": uri })),
    )
}

/// A 2026-07-28 "resource not found": -32602 naming the URI (SEP-2164).
pub(super) fn is_resource_not_found(error: &ErrorData) -> bool {
    error.code == ErrorCode::INVALID_PARAMS
        && error
            .data
            .as_ref()
            .is_some_and(|data| data.get("uri").is_some())
}

/// JSON-RPC code for the supervisor's refusals of non-tool requests (an
/// implementation-defined server error): the connection is unavailable,
/// busy, or rejected the request in the supervisor's words.
const SUPERVISOR_REFUSED: ErrorCode = ErrorCode(-32000);
/// JSON-RPC code for a request that was not answered in time (the code the
/// MCP SDKs use for a request timeout).
const TIMED_OUT: ErrorCode = ErrorCode(-32001);

/// The answer to a non-tool request: the upstream's result of the expected
/// kind, the upstream's own error, or the supervisor's refusal as an error
/// carrying its message.
pub(super) fn answer<T>(
    forwarded: Forwarded,
    pick: impl FnOnce(ServerResult) -> Option<T>,
) -> Result<T, ErrorData> {
    let result = match forwarded {
        Forwarded::Answered(result) => *result,
        Forwarded::Tool(answer) => answer.into(),
        Forwarded::Error(error) => return Err(error),
        Forwarded::Refused(outcome) => return Err(refusal(&outcome)),
    };
    let shown = format!("{result:?}");
    pick(result).ok_or_else(|| {
        tracing::debug!(result = %shown, "unexpected result");
        unexpected()
    })
}

pub(super) fn unexpected() -> ErrorData {
    ErrorData::internal_error("the upstream answered with an unexpected result", None)
}

fn refusal(outcome: &CallOutcome) -> ErrorData {
    let message = outcome
        .message()
        .unwrap_or("The request failed.")
        .to_owned();
    let code = match outcome {
        CallOutcome::TimedOut { .. } => TIMED_OUT,
        // The request as the upstream refused it; an upstream's answer
        // that could not be read is not the request's fault.
        CallOutcome::Rejected { failure, .. }
            if failure.kind == FailureKind::Protocol && !failure.unreadable_answer() =>
        {
            ErrorCode::INVALID_PARAMS
        }
        _ => SUPERVISOR_REFUSED,
    };
    ErrorData::new(code, message, None)
}

/// The answer to a tool call: the upstream's result or its own JSON-RPC
/// error, or the supervisor's outcome as an `isError` text result.
pub(in crate::gateway) fn tool_result(forwarded: Forwarded) -> Result<Called, ErrorData> {
    let outcome = match forwarded {
        Forwarded::Answered(result) => match *result {
            ServerResult::CallToolResult(result) => {
                return Ok(Called::Response(downstream(result)));
            }
            _ => CallOutcome::Rejected {
                failure: crate::Failure::new(FailureKind::Protocol, "unexpected result"),
                message: "The upstream answered the call with an unexpected result.".to_owned(),
            },
        },
        Forwarded::Tool(answer) => return Ok(downstream_kept(answer)),
        Forwarded::Error(error) => return Err(error),
        Forwarded::Refused(outcome) => outcome,
    };
    Ok(Called::Response(downstream(meta::outcome_result(outcome))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Failure;

    fn rejected(failure: Failure) -> CallOutcome {
        CallOutcome::Rejected {
            failure,
            message: "m".to_owned(),
        }
    }

    #[test]
    fn a_request_the_upstream_refused_is_invalid_params_and_an_unreadable_answer_is_not() {
        for (failure, code) in [
            (Failure::from_status(400, None), ErrorCode::INVALID_PARAMS),
            (
                Failure::new(FailureKind::Protocol, "JSON-RPC error -32602").with_not_run(),
                ErrorCode::INVALID_PARAMS,
            ),
            (
                Failure::new(FailureKind::Protocol, "unexpected server response"),
                SUPERVISOR_REFUSED,
            ),
            (Failure::from_status(403, None), SUPERVISOR_REFUSED),
        ] {
            let error = refusal(&rejected(failure.clone()));
            assert_eq!(error.code, code, "{failure:?}");
            assert_eq!(error.message, "m");
        }
    }
}
