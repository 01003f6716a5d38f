//! A request's way to its connection's actor: the connection must exist, a
//! `tools/call` must name an allowlisted tool the catalog lists (a tool
//! outside them does not exist), and how it may be retried follows
//! `retry_calls` and the tool's annotations (docs/SUPERVISION.md, "Never
//! twice"). The `CallTool` and `Forward` handlers.

use foldhash::HashMap;
use std::{
    sync::{Arc, RwLock},
    time::Duration,
};

use actix::{Addr, Context, Handler, MessageResult, ResponseFuture};
use futures::{FutureExt, future::BoxFuture};
use rmcp::model::Tool;

use super::{
    CallTool, Catalog, Forward, Registry, ShareRoutes,
    entries::{CatalogFetch, Entry, not_ready, stopped},
};
use crate::{
    CallOutcome, Failure, FailureKind, Forwarded,
    call::{ToolCall, UpstreamRequest},
    config::{ConnectionConfig, RetryCalls},
    connection::{Bypass, CallContext, CallRetry, ConnectionActor, ConnectionForward},
    session::DownstreamLink,
    telemetry::TraceParent,
};

impl Registry {
    fn unknown_connection(&self, connection: &str) -> CallOutcome {
        CallOutcome::Rejected {
            failure: Failure::new(FailureKind::Protocol, "unknown connection").with_not_run(),
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
        failure: Failure::new(FailureKind::Protocol, "unknown tool").with_not_run(),
        message: format!(
            "Unknown tool '{tool}' on MCP connection '{connection}'. Call search_mcp_tools, \
             then get_mcp_tool_schema."
        ),
    }
}

/// A call of a tool whose contract the book holds: answered at once, the
/// upstream never asked (docs/CONTRACTS.md, "What a hold does").
fn held_tool(message: &str) -> CallOutcome {
    CallOutcome::Rejected {
        failure: Failure::new(FailureKind::Protocol, "tool held: its contract changed")
            .with_not_run(),
        message: message.to_owned(),
    }
}

impl Handler<CallTool> for Registry {
    type Result = ResponseFuture<CallOutcome>;

    fn handle(&mut self, msg: CallTool, ctx: &mut Context<Self>) -> Self::Result {
        let (connection, tool) = (msg.connection.clone(), msg.tool.clone());
        let asked = Asked {
            connection: msg.connection,
            request: ToolCall::new(msg.tool, msg.arguments).into(),
            timeout: msg.timeout,
            link: None,
            trace: msg.trace,
            pass_errors: false,
        };
        let forwarded = self.forward(asked, ctx);
        Box::pin(async move { CallOutcome::of_call(&connection, &tool, forwarded.await) })
    }
}

impl Handler<Forward> for Registry {
    type Result = ResponseFuture<Forwarded>;

    fn handle(&mut self, msg: Forward, ctx: &mut Context<Self>) -> Self::Result {
        Box::pin(self.forward(Asked::forwarded(msg), ctx))
    }
}

/// A request as asked of the registry (or sent on a [`Route`]).
struct Asked {
    connection: String,
    request: UpstreamRequest,
    /// Overrides the connection's `call_timeout` (the library's `CallTool`).
    timeout: Option<Duration>,
    link: Option<DownstreamLink>,
    trace: TraceParent,
    /// Pass the upstream's JSON-RPC errors on as they are (proxying); without,
    /// a rejected call is the supervisor's `Rejected` text.
    pass_errors: bool,
}

impl Asked {
    /// The gateway's proxying of `msg`.
    fn forwarded(msg: Forward) -> Self {
        Asked {
            connection: msg.connection,
            request: msg.request,
            timeout: None,
            link: msg.link,
            trace: msg.trace,
            pass_errors: true,
        }
    }
}

impl Registry {
    /// Routes one request to its connection's actor (started lazily). A
    /// `tools/call` is checked against the allowlist and the catalog first
    /// (a tool outside them does not exist), and is retried only when safe;
    /// every other request is a read or idempotent, so retry-safe.
    fn forward(&mut self, asked: Asked, ctx: &mut Context<Self>) -> BoxFuture<'static, Forwarded> {
        let Some(entry) = self.entries.get(&asked.connection) else {
            let refused = self.unknown_connection(&asked.connection);
            return std::future::ready(Forwarded::Refused(refused)).boxed();
        };
        // Refused before any I/O: a tool outside the allowlist does not exist.
        let checked = match Checked::new(asked, &entry.config) {
            Ok(checked) => checked,
            Err(refused) => return refused,
        };
        let Some(actor) = self.actor(&checked.connection, ctx) else {
            return std::future::ready(Forwarded::Refused(
                self.unknown_connection(&checked.connection),
            ))
            .boxed();
        };
        let bypass = entry_bypass(self, &checked.connection);
        let catalog = match checked.request.tool() {
            Some(_) => self.catalog(&checked.connection, ctx),
            None => None,
        };
        checked.send((Arc::new(actor), bypass), catalog)
    }
}

/// `connection`'s current bypass (closed when it has no actor).
fn entry_bypass(registry: &Registry, connection: &str) -> Bypass {
    registry
        .entries
        .get(connection)
        .map(|entry| entry.bypass.clone())
        .unwrap_or_default()
}

/// A request checked against its connection's config, on its way to the
/// connection's actor: the same way whether the registry sends it or the
/// gateway does on a [`Route`].
struct Checked {
    connection: String,
    request: UpstreamRequest,
    /// What it is sent under, but for its retry rule (known once the
    /// catalog names the tool). Every wait the request makes counts
    /// against its budget: the catalog, the admission queue, connecting,
    /// retries.
    deadline: tokio::time::Instant,
    budget: Duration,
    link: Option<DownstreamLink>,
    trace: TraceParent,
    pass_errors: bool,
    retry_calls: RetryCalls,
}

impl Checked {
    /// `asked` under its connection's `config`, or its refusal (a tool
    /// outside the allowlist does not exist), ready to be answered.
    fn new(
        asked: Asked,
        config: &ConnectionConfig,
    ) -> Result<Checked, BoxFuture<'static, Forwarded>> {
        let budget = asked.timeout.unwrap_or(config.call_timeout);
        if let Some(tool) = asked.request.tool()
            && !config.allows_tool(tool)
        {
            let refused = unknown_tool(&asked.connection, tool);
            return Err(std::future::ready(Forwarded::Refused(refused)).boxed());
        }
        Ok(Checked {
            connection: asked.connection,
            request: asked.request,
            deadline: tokio::time::Instant::now() + budget,
            budget,
            link: asked.link,
            trace: asked.trace,
            pass_errors: asked.pass_errors,
            retry_calls: config.retry_calls,
        })
    }

    /// Sends it to `actor` once the catalog (for a call) names its tool:
    /// through its `bypass` when it is open and a slot free, else through
    /// its mailbox.
    fn send(
        self,
        (actor, bypass): (Arc<Addr<ConnectionActor>>, Bypass),
        catalog: Option<CatalogFetch>,
    ) -> BoxFuture<'static, Forwarded> {
        let Checked {
            connection,
            request,
            deadline,
            budget,
            link,
            trace,
            pass_errors,
            retry_calls,
        } = self;
        crate::boxed::in_place(move || async move {
            let retry = match (request.tool(), catalog) {
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
                        return Forwarded::Refused(match catalog.held_tool(tool) {
                            Some(message) => held_tool(message),
                            None => unknown_tool(&connection, tool),
                        });
                    };
                    call_retry(retry_calls, tool)
                }
                (Some(_), None) => return Forwarded::Refused(stopped(&connection).into()),
                (None, _) => CallRetry::Safe,
            };
            let forward = ConnectionForward {
                request,
                context: CallContext {
                    deadline,
                    budget,
                    retry,
                    link,
                    trace,
                },
                pass_errors,
            };
            let forward = match bypass.enter(forward, &actor) {
                // Run in a task of its own on the actor's thread, as the
                // actor runs it: the caller going away does not end it.
                Ok((run, pass_errors)) => {
                    let running = crate::boxed::in_place(|| run.forwarded(pass_errors));
                    return match actix_rt::spawn(running).await {
                        Ok(forwarded) => forwarded,
                        Err(_) => Forwarded::Refused(stopped(&connection).into()),
                    };
                }
                Err(forward) => forward,
            };
            match actor.send(forward).await {
                Ok(forwarded) => forwarded,
                // The actor died mid-request; the registry restarts it. The
                // caller still gets a value.
                Err(_) => Forwarded::Refused(stopped(&connection).into()),
            }
        })
    }
}

/// The ways to the connections that need nothing of the registry but a
/// look-up: a running actor and a loaded catalog, under the config they run
/// with. The registry is their one writer (`Registry::reroute`, on every
/// change to any of the three); the gateway reads them to send a request
/// straight to the connection's actor, sparing it the registry's mailbox
/// (docs/DECISIONS.md #118). A connection without a route (not started, its
/// catalog loading, just restarted) is reached through the registry, as
/// before.
#[derive(Debug, Clone, Default)]
pub struct Routes(Arc<RwLock<HashMap<String, Route>>>);

/// One connection's way, as the registry last wrote it.
#[derive(Debug, Clone)]
pub struct Route {
    /// Shared: a request past the mailbox needs no address of its own.
    actor: Arc<Addr<ConnectionActor>>,
    bypass: Bypass,
    config: Arc<ConnectionConfig>,
    catalog: Arc<Catalog>,
}

impl Route {
    /// Sends `msg` on this route, exactly as the registry would.
    pub fn forward(self, msg: Forward) -> BoxFuture<'static, Forwarded> {
        match Checked::new(Asked::forwarded(msg), &self.config) {
            Ok(checked) => checked.send(
                (self.actor, self.bypass),
                Some(CatalogFetch::Ready(self.catalog)),
            ),
            Err(refused) => refused,
        }
    }
}

impl Routes {
    /// `connection`'s route, if it has one whose actor still runs; without,
    /// a request is the registry's.
    pub fn get(&self, connection: &str) -> Option<Route> {
        let table = self.0.read().unwrap_or_else(|p| p.into_inner());
        table
            .get(connection)
            .filter(|route| route.actor.connected())
            .cloned()
    }

    /// Whether `connection` has a route now.
    pub fn has(&self, connection: &str) -> bool {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(connection)
    }

    /// Writes (or clears) `connection`'s route.
    pub(super) fn set(&self, connection: &str, route: Option<Route>) {
        let mut table = self.0.write().unwrap_or_else(|p| p.into_inner());
        match route {
            Some(route) => {
                table.insert(connection.to_owned(), route);
            }
            None => {
                table.remove(connection);
            }
        }
    }

    /// Replaces every route.
    pub(super) fn set_all(&self, routes: HashMap<String, Route>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = routes;
    }
}

impl Handler<ShareRoutes> for Registry {
    type Result = MessageResult<ShareRoutes>;

    fn handle(&mut self, _: ShareRoutes, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.routes.clone())
    }
}

impl Registry {
    /// Writes `connection`'s route from its entry as it is now: called
    /// wherever its actor, catalog or config changes.
    pub(super) fn reroute(&self, connection: &str) {
        let route = self
            .entries
            .get(connection)
            .and_then(|entry| self.route_of(entry));
        self.routes.set(connection, route);
    }

    /// Writes every route again (a reload, the shutdown).
    pub(super) fn reroute_all(&self) {
        self.routes.set_all(
            self.entries
                .iter()
                .filter_map(|(name, entry)| Some((name.clone(), self.route_of(entry)?)))
                .collect(),
        );
    }

    fn route_of(&self, entry: &Entry) -> Option<Route> {
        if self.shutting_down {
            return None;
        }
        Some(Route {
            actor: Arc::new(entry.actor.clone()?),
            bypass: entry.bypass.clone(),
            config: entry.config.clone(),
            catalog: entry.loaded_catalog()?,
        })
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
