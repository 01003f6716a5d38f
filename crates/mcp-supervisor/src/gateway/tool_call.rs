//! The gateway's spine: one way from a client's call of an upstream's tool
//! to its answer, for the rmcp handler and the direct path alike. Routed by
//! the tool's exposed name, sent in the upstream's, the upstream's
//! questions answered the client's way (`mrtr`), the answer shaped for a
//! call (docs/ARCHITECTURE.md, "One call, end to end").

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{
        CallToolRequestMethod, CallToolResponse, CallToolResult, ConstString, JsonObject,
        ServerResult,
    },
};

use super::{
    directory::{Target, ToolRoute},
    handler::{tool_result, unknown_tool},
    mrtr::{self, Answering, Exchange},
    rights::Use,
    state::GatewayState,
};
use crate::{
    access::{Caller, Item},
    call::{ToolCall, UpstreamRequest},
    meta,
    tool_answer::ToolAnswer,
};

/// A tool call's answer for its client: rmcp's type, or a tool's answer
/// with its structured content kept as the upstream wrote it
/// (`crate::tool_answer`), which the direct path writes as it came.
#[derive(Debug)]
pub(super) enum Called {
    Response(CallToolResponse),
    Tool(ToolAnswer),
}

impl From<Called> for CallToolResponse {
    /// The answer as rmcp's server takes it: structured content kept as
    /// text is read into a tree.
    fn from(called: Called) -> Self {
        match called {
            Called::Response(response) => response,
            Called::Tool(answer) => CallToolResponse::Complete(answer.into_result()),
        }
    }
}

/// `caller`'s answer to `call` (in the client's names), the upstream's
/// questions answered the client's way; -32602 for a tool the gateway does
/// not expose, and for one `caller` may not use (alike: a hidden tool is
/// not there). The use is recorded in the audit log with its outcome.
pub(super) async fn answer(
    state: &Arc<GatewayState>,
    call: ToolCall,
    answering: Answering<'_>,
    caller: &Arc<Caller>,
) -> Result<Called, ErrorData> {
    let (route, request, used) = upstream_call(state, call, caller).await?;
    let target = &route.target;
    let _started = match state.rights.start_call(caller) {
        Ok(started) => started,
        Err(refused) => {
            used.end("limited");
            return Ok(Called::Response(CallToolResponse::Complete(refused)));
        }
    };
    let answered = async {
        let exchange = mrtr::exchange(state, target, request, answering).await?;
        call_response(state, (target, caller), exchange)
    }
    .await;
    used.end(outcome(&answered));
    answered
}

/// `caller`'s call of the meta-tool `name`: what it reveals is what the
/// caller may see, and `call_mcp`, which calls a tool, is decided (and
/// audited) and limited as a call of that tool by its exposed name.
pub(super) async fn meta(
    state: &Arc<GatewayState>,
    caller: &Arc<Caller>,
    name: &str,
    arguments: Option<JsonObject>,
) -> CallToolResult {
    let directory = state.current();
    let mut used = None;
    let mut _started = None;
    if name == meta::CALL_MCP {
        used = state
            .rights
            .decide_meta_call(caller, &directory, arguments.as_ref());
        if used.as_ref().is_none_or(|used| used.allowed()) {
            match state.rights.start_call(caller) {
                Ok(started) => _started = started,
                Err(refused) => {
                    if let Some(used) = used {
                        used.end("limited");
                    }
                    return refused;
                }
            }
        }
    }
    let sees = state.rights.sees(caller.clone(), directory);
    let result = meta::call_as(&state.registry, name, arguments, &sees).await;
    if let Some(used) = used {
        used.end(if result.is_error == Some(true) {
            "tool_error"
        } else {
            "ok"
        });
    }
    result
}

/// A call of an upstream's tool (not a meta-tool), in the client's names:
/// where it goes, the call to send there in the upstream's, and its use
/// decided; -32602 for a tool the gateway does not expose or `caller` may
/// not use.
async fn upstream_call<'a>(
    state: &'a Arc<GatewayState>,
    mut call: ToolCall,
    caller: &'a Caller,
) -> Result<(Arc<ToolRoute>, UpstreamRequest, Use<'a>), ErrorData> {
    if !state.namespaced() {
        return Err(unknown_tool(&call.name));
    }
    let name = &call.name;
    let Some(route) = state.route(|d| d.tool_route(name).cloned()).await else {
        return Err(unknown_tool(name));
    };
    let target = &route.target;
    let mut used = state.rights.decide(
        caller,
        CallToolRequestMethod::VALUE,
        Item::tool(&target.connection, name),
    );
    if !used.allowed() {
        state.hidden().await;
        return Err(unknown_tool(name));
    }
    if let Some(sha256) = &route.contract {
        used.contract(Some(sha256));
        crate::telemetry::TraceParent::attached().contract(sha256);
    }
    call.name = Arc::from(target.name.as_str());
    call.meta = None;
    Ok((route, call.into(), used))
}

/// What came of a call, for the audit log.
fn outcome(answered: &Result<Called, ErrorData>) -> &'static str {
    match answered {
        Ok(Called::Response(CallToolResponse::Complete(result)))
            if result.is_error == Some(true) =>
        {
            "tool_error"
        }
        Ok(Called::Tool(answer)) if answer.is_error() => "tool_error",
        Ok(Called::Response(CallToolResponse::InputRequired(_))) => "input_required",
        Ok(Called::Response(CallToolResponse::Task(_))) => "task",
        Ok(_) => "ok",
        Err(_) => "error",
    }
}

/// The answer to a call of `target` once its round is over.
fn call_response(
    state: &GatewayState,
    (target, caller): (&Target, &Arc<Caller>),
    exchange: Exchange,
) -> Result<Called, ErrorData> {
    match exchange {
        Exchange::Done(forwarded) => match forwarded.answered_as(|result| match result {
            ServerResult::CreateTaskResult(task) => Ok(task),
            other => Err(Box::new(other)),
        }) {
            Ok(task) => {
                // The upstream runs it as a task (SEP-2663): its `tasks/*`
                // requests must find their way back to this connection.
                state.remember_task(&task.task.task_id, &target.connection, caller.clone());
                Ok(Called::Response(CallToolResponse::Task(task)))
            }
            Err(forwarded) => tool_result(forwarded),
        },
        Exchange::InputRequired(asked) => {
            Ok(Called::Response(CallToolResponse::InputRequired(asked)))
        }
    }
}
