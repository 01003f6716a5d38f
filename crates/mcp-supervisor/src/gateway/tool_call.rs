//! The gateway's spine: one way from a client's call of an upstream's tool
//! to its answer, for the rmcp handler and the direct path alike. Routed by
//! the tool's exposed name, sent in the upstream's, the upstream's
//! questions answered the client's way (`mrtr`), the answer shaped for a
//! call (docs/ARCHITECTURE.md, "One call, end to end").

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{CallToolResponse, ServerResult},
};

use super::{
    directory::Target,
    handler::{tool_result, unknown_tool},
    mrtr::{self, Answering, Exchange},
    state::GatewayState,
};
use crate::{
    Forwarded,
    call::{ToolCall, UpstreamRequest},
};

/// The answer to `call` (in the client's names), the upstream's questions
/// answered the client's way; -32602 for a tool the gateway does not
/// expose.
pub(super) async fn answer(
    state: &Arc<GatewayState>,
    call: ToolCall,
    answering: Answering<'_>,
) -> Result<CallToolResponse, ErrorData> {
    let (target, request) = upstream_call(state, call).await?;
    let exchange = mrtr::exchange(state, &target, request, answering).await?;
    call_response(state, &target, exchange)
}

/// A call of an upstream's tool (not a meta-tool), in the client's names:
/// where it goes, and the call to send there in the upstream's; -32602 for
/// a tool the gateway does not expose.
async fn upstream_call(
    state: &Arc<GatewayState>,
    mut call: ToolCall,
) -> Result<(Target, UpstreamRequest), ErrorData> {
    if !state.namespaced() {
        return Err(unknown_tool(&call.name));
    }
    let name = &call.name;
    let Some(target) = state.route(|d| d.tool(name).cloned()).await else {
        return Err(unknown_tool(name));
    };
    call.name = target.name.clone().into();
    call.meta = None;
    Ok((target, call.into()))
}

/// The answer to a call of `target` once its round is over.
fn call_response(
    state: &GatewayState,
    target: &Target,
    exchange: Exchange,
) -> Result<CallToolResponse, ErrorData> {
    match exchange {
        Exchange::Done(Forwarded::Answered(ServerResult::CreateTaskResult(task))) => {
            // The upstream runs it as a task (SEP-2663): its `tasks/*`
            // requests must find their way back to this connection.
            state.remember_task(&task.task.task_id, &target.connection);
            Ok(CallToolResponse::Task(task))
        }
        Exchange::Done(forwarded) => tool_result(forwarded),
        Exchange::InputRequired(asked) => Ok(CallToolResponse::InputRequired(asked)),
    }
}
