//! A request's way to its connection's actor: the connection must exist, a
//! `tools/call` must name an allowlisted tool the catalog lists (a tool
//! outside them does not exist), and how it may be retried follows
//! `retry_calls` and the tool's annotations (docs/SUPERVISION.md, "Never
//! twice"). The `CallTool` and `Forward` handlers.

use std::{sync::Arc, time::Duration};

use actix::{Context, Handler, ResponseFuture};
use futures::{FutureExt, future::BoxFuture};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, Tool};

use super::{
    CallTool, Forward, Registry,
    entries::{not_ready, stopped},
};
use crate::{
    CallOutcome, Failure, FailureKind, Forwarded,
    config::RetryCalls,
    connection::{CallRetry, ConnectionForward},
    heavy::SharedRequest,
    session::DownstreamLink,
    telemetry::TraceParent,
};

impl Registry {
    fn unknown_connection(&self, connection: &str) -> CallOutcome {
        CallOutcome::Rejected {
            failure: Failure::new(FailureKind::Protocol, "unknown connection"),
            message: unknown_connection_message(connection, &self.names()),
        }
    }
}

/// What a caller naming a connection that does not exist is told: the names
/// that do exist, or that there are none.
pub(crate) fn unknown_connection_message(connection: &str, names: &[String]) -> String {
    if names.is_empty() {
        format!("Unknown MCP connection '{connection}'. No connections are configured.")
    } else {
        format!(
            "Unknown MCP connection '{connection}'. Available connections: {}.",
            names.join(", ")
        )
    }
}

fn unknown_tool(connection: &str, tool: &str) -> CallOutcome {
    CallOutcome::Rejected {
        failure: Failure::new(FailureKind::Protocol, "unknown tool"),
        message: format!(
            "Unknown tool '{tool}' on MCP connection '{connection}'. Call search_mcp_tools, \
             then get_mcp_tool_schema."
        ),
    }
}

impl Handler<CallTool> for Registry {
    type Result = ResponseFuture<CallOutcome>;

    fn handle(&mut self, msg: CallTool, ctx: &mut Context<Self>) -> Self::Result {
        let mut params = CallToolRequestParams::new(msg.tool.clone());
        params.arguments = msg.arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let (connection, tool) = (msg.connection.clone(), msg.tool.clone());
        let forwarded = self.forward(
            msg.connection,
            Arc::new(request),
            msg.timeout,
            (None, msg.trace),
            false,
            ctx,
        );
        Box::pin(async move { CallOutcome::of_call(&connection, &tool, forwarded.await) })
    }
}

impl Handler<Forward> for Registry {
    type Result = ResponseFuture<Forwarded>;

    fn handle(&mut self, msg: Forward, ctx: &mut Context<Self>) -> Self::Result {
        Box::pin(self.forward(
            msg.connection,
            msg.request,
            None,
            (msg.link, msg.trace),
            true,
            ctx,
        ))
    }
}

impl Registry {
    /// Routes one request to its connection's actor (started lazily). A
    /// `tools/call` is checked against the allowlist and the catalog first
    /// (a tool outside them does not exist), and is retried only when safe;
    /// every other request is a read or idempotent, so retry-safe. With
    /// `pass_errors` (proxying) the upstream's JSON-RPC errors are answered as
    /// they are; without (the library's `CallTool`, `call_mcp`), a rejected
    /// call is the supervisor's `Rejected` text.
    fn forward(
        &mut self,
        connection: String,
        request: Arc<ClientRequest>,
        timeout: Option<Duration>,
        (link, trace): (Option<DownstreamLink>, TraceParent),
        pass_errors: bool,
        ctx: &mut Context<Self>,
    ) -> BoxFuture<'static, Forwarded> {
        // Found heavy or not once, here; a heavy request refused anywhere
        // on its way is freed off the thread too.
        let request = SharedRequest::new(request);
        let Some(entry) = self.entries.get(&connection) else {
            return std::future::ready(Forwarded::Refused(self.unknown_connection(&connection)))
                .boxed();
        };
        let budget = timeout.unwrap_or(entry.config.call_timeout);
        // Every wait the request makes counts against its budget: the
        // catalog, the admission queue, connecting, retries.
        let deadline = tokio::time::Instant::now() + budget;
        let retry_calls = entry.config.retry_calls;
        let tool = match request.shared().as_ref() {
            ClientRequest::CallToolRequest(call) => Some(call.params.name.to_string()),
            _ => None,
        };
        // Refused before any I/O: a tool outside the allowlist does not exist.
        if let Some(tool) = &tool
            && !entry.config.allows_tool(tool)
        {
            return std::future::ready(Forwarded::Refused(unknown_tool(&connection, tool))).boxed();
        }
        let Some(actor) = self.actor(&connection, ctx) else {
            return std::future::ready(Forwarded::Refused(self.unknown_connection(&connection)))
                .boxed();
        };
        let catalog = match tool {
            Some(_) => self.catalog(&connection, ctx),
            None => None,
        };
        async move {
            let retry = match (&tool, catalog) {
                (Some(tool), Some(catalog)) => {
                    let catalog =
                        match tokio::time::timeout_at(deadline, catalog.get(&connection)).await {
                            Ok(Ok(catalog)) => catalog,
                            Ok(Err(unavailable)) => {
                                return Forwarded::Refused(unavailable.into());
                            }
                            Err(_) => {
                                return Forwarded::Refused(not_ready(&connection, budget).into());
                            }
                        };
                    let Some(tool) = catalog.tool(tool) else {
                        return Forwarded::Refused(unknown_tool(&connection, tool));
                    };
                    call_retry(retry_calls, tool)
                }
                (Some(_), None) => return Forwarded::Refused(stopped(&connection).into()),
                (None, _) => CallRetry::Safe,
            };
            let forward = ConnectionForward {
                request,
                deadline,
                budget,
                retry,
                link,
                pass_errors,
                trace,
            };
            match actor.send(forward).await {
                Ok(forwarded) => forwarded,
                // The actor died mid-request; the registry restarts it. The
                // caller still gets a value.
                Err(_) => Forwarded::Refused(stopped(&connection).into()),
            }
        }
        .boxed()
    }
}

/// Whether the tool's annotations say a repeat cannot duplicate a side effect.
pub fn retry_safe(tool: &Tool) -> bool {
    tool.annotations.as_ref().is_some_and(|annotations| {
        annotations.read_only_hint == Some(true) || annotations.idempotent_hint == Some(true)
    })
}

/// How a `tools/call` of `tool` may be retried under `retry_calls`.
pub(crate) fn call_retry(retry_calls: RetryCalls, tool: &Tool) -> CallRetry {
    match retry_calls {
        RetryCalls::Always => CallRetry::Safe,
        RetryCalls::Never => CallRetry::Never,
        RetryCalls::Safe if retry_safe(tool) => CallRetry::Safe,
        RetryCalls::Safe => CallRetry::OnlyIfNotRun,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(annotations: serde_json::Value) -> Tool {
        serde_json::from_value(json!({
            "name": "t", "inputSchema": {"type": "object"}, "annotations": annotations,
        }))
        .unwrap()
    }

    #[test]
    fn a_call_is_retried_as_retry_calls_and_the_tools_annotations_say() {
        let read_only = tool(json!({"readOnlyHint": true}));
        let idempotent = tool(json!({"idempotentHint": true}));
        let plain = tool(json!({}));
        for (retry_calls, tool, expected) in [
            (RetryCalls::Always, &plain, CallRetry::Safe),
            (RetryCalls::Never, &read_only, CallRetry::Never),
            (RetryCalls::Safe, &read_only, CallRetry::Safe),
            (RetryCalls::Safe, &idempotent, CallRetry::Safe),
            (RetryCalls::Safe, &plain, CallRetry::OnlyIfNotRun),
        ] {
            assert_eq!(call_retry(retry_calls, tool), expected, "{retry_calls:?}");
        }
    }
}
