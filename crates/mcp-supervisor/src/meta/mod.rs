//! The five meta-tools (docs/SUPERVISION.md, "Meta-tools") for agents that
//! discover tools on demand: `list_mcps`, `search_mcp_tools`,
//! `get_mcp_tool_schema`, `describe_mcp`, `call_mcp`. Each answers a
//! `CallToolResult`; errors are text results with `isError: true`, never a
//! protocol error, so the agent can read and recover.
//!
//! Layout: [`search`] holds the pure search scoring; this file the tool
//! definitions and the dispatcher over the registry's messages.

pub mod search;

use std::{sync::Arc, time::Duration};

use actix::Addr;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::{
    CallOutcome,
    codec::json_check::{self, Unreadable},
    registry::{CallTool, ListConnections, ListTools, Registry, unknown_connection_message},
};

/// The meta-tools' names.
pub const LIST_MCPS: &str = "list_mcps";
pub const SEARCH_MCP_TOOLS: &str = "search_mcp_tools";
pub const GET_MCP_TOOL_SCHEMA: &str = "get_mcp_tool_schema";
pub const DESCRIBE_MCP: &str = "describe_mcp";
pub const CALL_MCP: &str = "call_mcp";

/// How long `list_mcps` waits for catalogs still loading before showing
/// `tool_count: null`: it must never block on a slow upstream.
pub const CATALOG_WAIT: Duration = Duration::from_millis(250);

/// Whether `name` is one of the meta-tools.
pub fn is_meta_tool(name: &str) -> bool {
    matches!(
        name,
        LIST_MCPS | SEARCH_MCP_TOOLS | GET_MCP_TOOL_SCHEMA | DESCRIBE_MCP | CALL_MCP
    )
}

/// The meta-tools as MCP tool definitions (for `tools/list`).
pub fn definitions() -> Vec<Tool> {
    let connection =
        json!({"type": "string", "description": "The MCP connection's name (see list_mcps)."});
    let read_only = ToolAnnotations::new().read_only(true);
    vec![
        Tool::new(
            LIST_MCPS,
            "List the MCP connections available, with their purpose, state and tool count.",
            schema(json!({}), &[]),
        )
        .annotate(read_only.clone()),
        Tool::new(
            SEARCH_MCP_TOOLS,
            "Search one MCP connection's tools by keywords; returns matching tool names and descriptions.",
            schema(
                json!({
                    "connection": connection,
                    "query": {"type": "string", "description": "Keywords, separated by spaces."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "At most this many matches (default 8)."}
                }),
                &["connection", "query"],
            ),
        )
        .annotate(read_only.clone()),
        Tool::new(
            GET_MCP_TOOL_SCHEMA,
            "Get one tool's full description and input schema, to call it correctly.",
            schema(
                json!({"connection": connection, "tool": {"type": "string"}}),
                &["connection", "tool"],
            ),
        )
        .annotate(read_only.clone()),
        Tool::new(
            DESCRIBE_MCP,
            "Describe one MCP connection: its purpose, state, every tool with its description, and \
             the prompts and resources it offers (use those with prompts/get and resources/read).",
            schema(json!({"connection": connection}), &["connection"]),
        )
        .annotate(read_only),
        Tool::new(
            CALL_MCP,
            "Call a tool on an MCP connection. `arguments` is a JSON object (or a string holding one).",
            schema(
                json!({
                    "connection": connection,
                    "tool": {"type": "string"},
                    "arguments": {"description": "The tool's arguments: a JSON object, a string holding one, or null."}
                }),
                &["connection", "tool"],
            ),
        ),
    ]
}

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut object = JsonObject::new();
    object.insert("type".into(), json!("object"));
    object.insert("properties".into(), properties);
    if !required.is_empty() {
        object.insert("required".into(), json!(required));
    }
    Arc::new(object)
}

/// What the caller of a meta-tool may see and use, by upstream names: the
/// gateway's access rules (docs/SECURITY.md). What it may not is, to the
/// meta-tools, not there: a connection it reaches nothing of is unknown,
/// and a tool it may not use is not found, described or called.
pub trait Sees: Send + Sync {
    /// Whether the caller may see and use everything (no rules): what it
    /// is told need not be filtered.
    fn everything(&self) -> bool;
    /// Whether anything of `connection` is the caller's to use.
    fn connection(&self, connection: &str) -> bool;
    fn tool(&self, connection: &str, tool: &str) -> bool;
    fn prompt(&self, connection: &str, prompt: &str) -> bool;
    fn resource(&self, connection: &str, uri: &str) -> bool;
}

/// A caller who may see and use everything (no access rules).
#[derive(Debug, Clone, Copy, Default)]
pub struct Everything;

impl Sees for Everything {
    fn everything(&self) -> bool {
        true
    }
    fn connection(&self, _: &str) -> bool {
        true
    }
    fn tool(&self, _: &str, _: &str) -> bool {
        true
    }
    fn prompt(&self, _: &str, _: &str) -> bool {
        true
    }
    fn resource(&self, _: &str, _: &str) -> bool {
        true
    }
}

/// Runs one meta-tool for a caller who may use everything. Unknown names
/// and bad arguments are error results.
pub async fn call(
    registry: &Addr<Registry>,
    tool: &str,
    arguments: Option<JsonObject>,
) -> CallToolResult {
    call_as(registry, tool, arguments, &Everything).await
}

/// Runs one meta-tool for a caller who `sees` what it may (see [`call`]).
pub async fn call_as(
    registry: &Addr<Registry>,
    tool: &str,
    arguments: Option<JsonObject>,
    sees: &dyn Sees,
) -> CallToolResult {
    let arguments = arguments.unwrap_or_default();
    let answer = match tool {
        LIST_MCPS => list_mcps(registry, sees).await,
        SEARCH_MCP_TOOLS => search_mcp_tools(registry, &arguments, sees).await,
        GET_MCP_TOOL_SCHEMA => get_mcp_tool_schema(registry, &arguments, sees).await,
        DESCRIBE_MCP => describe_mcp(registry, &arguments, sees).await,
        CALL_MCP => return call_mcp(registry, &arguments, sees).await,
        other => Err(format!("Unknown meta-tool '{other}'.")),
    };
    match answer {
        Ok(value) => CallToolResult::success(vec![ContentBlock::text(value.to_string())]),
        Err(message) => error(message),
    }
}

fn error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Turns a supervisor outcome into what an agent sees: upstream results pass
/// through unchanged; everything else is a text error with the outcome's message
/// (docs/SUPERVISION.md, "What agents read").
pub fn outcome_result(outcome: CallOutcome) -> CallToolResult {
    match outcome {
        CallOutcome::Success(result) | CallOutcome::ToolError(result) => result,
        other => error(other.message().unwrap_or("The call failed.").to_owned()),
    }
}

fn string_arg<'a>(arguments: &'a JsonObject, key: &str) -> Result<&'a str, String> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("Missing required string argument '{key}'."))
}

async fn list_mcps(registry: &Addr<Registry>, sees: &dyn Sees) -> Result<Value, String> {
    let mut connections = registry.send(ListConnections).await.map_err(stopped)?;
    connections.retain(|summary| sees.connection(&summary.name));
    // Start (or join) every catalog load, but wait only a short bound.
    let loads = connections.iter().map(|summary| {
        let load = registry.send(ListTools {
            connection: summary.name.clone(),
        });
        async move {
            match tokio::time::timeout(CATALOG_WAIT, load).await {
                Ok(Ok(Ok(catalog))) => Some(
                    catalog
                        .tools
                        .iter()
                        .filter(|tool| sees.tool(&catalog.connection, &tool.name))
                        .count(),
                ),
                _ => None,
            }
        }
    });
    let counts = futures::future::join_all(loads).await;
    // States after the loads: a connection that just connected shows `ready`.
    let mut connections = registry.send(ListConnections).await.map_err(stopped)?;
    connections.retain(|summary| sees.connection(&summary.name));
    let rows: Vec<Value> = connections
        .into_iter()
        .zip(counts)
        .map(|(summary, count)| {
            let mut row = json!({
                "id": summary.name,
                "name": summary.name,
                "description": summary.description,
                // The registry's count is of every tool: only for a caller
                // who may see them all.
                "tool_count": count.or(summary.tool_count.filter(|_| sees.everything())),
                "state": summary.state.as_str(),
                "dead": summary.dead,
            });
            if summary.needs_login {
                // Only where it is so: what an agent tells its user.
                row["needs_login"] = json!(format!(
                    "a person must run `mcp-supervisor login {}` on the supervisor's host",
                    summary.name
                ));
            }
            row
        })
        .collect();
    Ok(json!({ "connections": rows }))
}

/// `Ok` if `connection` is configured and the caller `sees` it; otherwise
/// the message naming those that are.
async fn known_connection(
    registry: &Addr<Registry>,
    connection: &str,
    sees: &dyn Sees,
) -> Result<(), String> {
    let mut known = registry.send(ListConnections).await.map_err(stopped)?;
    known.retain(|summary| sees.connection(&summary.name));
    if known.iter().any(|summary| summary.name == connection) {
        return Ok(());
    }
    let names: Vec<String> = known.into_iter().map(|summary| summary.name).collect();
    Err(unknown_connection_message(connection, &names))
}

async fn catalog(
    registry: &Addr<Registry>,
    connection: &str,
    sees: &dyn Sees,
) -> Result<Arc<crate::registry::Catalog>, String> {
    known_connection(registry, connection, sees).await?;
    registry
        .send(ListTools {
            connection: connection.to_owned(),
        })
        .await
        .map_err(stopped)?
        .map_err(|unavailable| unavailable.message)
}

async fn search_mcp_tools(
    registry: &Addr<Registry>,
    arguments: &JsonObject,
    sees: &dyn Sees,
) -> Result<Value, String> {
    let connection = string_arg(arguments, "connection")?;
    let query = string_arg(arguments, "query")?;
    let limit = arguments.get("limit").and_then(Value::as_i64);
    let catalog = catalog(registry, connection, sees).await?;
    let tools = visible_tools(&catalog, sees);
    let matches: Vec<Value> = search::search(&tools, query, limit)
        .into_iter()
        .map(|tool| json!({"name": tool.name, "description": tool.description}))
        .collect();
    Ok(json!({"connection": connection, "query": query, "matches": matches}))
}

async fn get_mcp_tool_schema(
    registry: &Addr<Registry>,
    arguments: &JsonObject,
    sees: &dyn Sees,
) -> Result<Value, String> {
    let connection = string_arg(arguments, "connection")?;
    let tool_name = string_arg(arguments, "tool")?;
    let catalog = catalog(registry, connection, sees).await?;
    let tool = catalog
        .tool(tool_name)
        .filter(|tool| sees.tool(connection, &tool.name))
        .ok_or_else(|| unknown_tool(connection, tool_name))?;
    Ok(json!({
        "connection": connection,
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": tool.annotations,
    }))
}

async fn describe_mcp(
    registry: &Addr<Registry>,
    arguments: &JsonObject,
    sees: &dyn Sees,
) -> Result<Value, String> {
    let connection = string_arg(arguments, "connection")?;
    let catalog = catalog(registry, connection, sees).await?;
    let summary = registry
        .send(ListConnections)
        .await
        .map_err(stopped)?
        .into_iter()
        .find(|summary| summary.name == connection);
    let tools: Vec<Value> = catalog
        .tools
        .iter()
        .filter(|tool| sees.tool(connection, &tool.name))
        .map(|tool| json!({"name": tool.name, "description": tool.description}))
        .collect();
    // Prompts and resources are used with the MCP methods (prompts/get,
    // resources/read), not through call_mcp; listed so an agent knows they exist.
    let prompts: Vec<Value> = catalog
        .prompts
        .iter()
        .filter(|prompt| sees.prompt(connection, &prompt.name))
        .map(|prompt| {
            let arguments: Vec<&str> = prompt
                .arguments
                .iter()
                .flatten()
                .map(|argument| argument.name.as_str())
                .collect();
            json!({"name": prompt.name, "description": prompt.description, "arguments": arguments})
        })
        .collect();
    let resources: Vec<Value> = catalog
        .resources
        .iter()
        .filter(|resource| sees.resource(connection, &resource.uri))
        .map(|resource| {
            json!({"uri": resource.uri, "name": resource.name, "description": resource.description})
        })
        .chain(catalog.templates.iter().filter(|template| sees.resource(connection, &template.uri_template)).map(|template| {
            json!({"uriTemplate": template.uri_template, "name": template.name, "description": template.description})
        }))
        .collect();
    Ok(json!({
        "name": connection,
        "description": summary.as_ref().and_then(|s| s.description.clone()),
        "state": summary.as_ref().map(|s| s.state.as_str()),
        "tools": tools,
        "prompts": prompts,
        "resources": resources,
    }))
}

/// The tools of `catalog` the caller `sees`.
fn visible_tools(catalog: &crate::registry::Catalog, sees: &dyn Sees) -> Vec<Tool> {
    catalog
        .tools
        .iter()
        .filter(|tool| sees.tool(&catalog.connection, &tool.name))
        .cloned()
        .collect()
}

fn unknown_tool(connection: &str, tool: &str) -> String {
    format!(
        "Unknown tool '{tool}' on MCP connection '{connection}'. Call search_mcp_tools, then \
         get_mcp_tool_schema."
    )
}

async fn call_mcp(
    registry: &Addr<Registry>,
    arguments: &JsonObject,
    sees: &dyn Sees,
) -> CallToolResult {
    let (connection, tool) = match (
        string_arg(arguments, "connection"),
        string_arg(arguments, "tool"),
    ) {
        (Ok(connection), Ok(tool)) => (connection, tool),
        (Err(message), _) | (_, Err(message)) => return error(message),
    };
    // A tool the caller may not use is answered as one its connection does
    // not have, and a connection it reaches nothing of as one not
    // configured: what it may not use is not there.
    if !sees.tool(connection, tool) {
        return error(match known_connection(registry, connection, sees).await {
            Ok(()) => unknown_tool(connection, tool),
            Err(message) => message,
        });
    }
    let tool_arguments = match tool_arguments(arguments.get("arguments")) {
        Ok(tool_arguments) => tool_arguments,
        // An unknown connection is the first thing wrong with the call.
        Err(why) => {
            return error(match known_connection(registry, connection, sees).await {
                Ok(()) => invalid_arguments(connection, tool, why),
                Err(message) => message,
            });
        }
    };
    let outcome = registry
        .send(CallTool {
            connection: connection.to_owned(),
            tool: tool.to_owned(),
            arguments: Some(tool_arguments),
            timeout: None,
            trace: crate::telemetry::TraceParent::attached(),
        })
        .await;
    match outcome {
        Ok(outcome) => outcome_result(outcome),
        Err(mailbox) => error(stopped(mailbox)),
    }
}

/// `call_mcp`'s `arguments`: an object, a string holding one, or nothing.
/// A string's text passes the door's check first (`json_check`), as a
/// call's arguments do at the gateway's door: serde would read what no
/// upstream reads alike (nesting the upstream's envelope takes past its
/// parser's limit, a key twice) and the upstream's refusal would be taken
/// for its failure. The error names the reason, or (`None`) that nothing
/// usable was given.
fn tool_arguments(arguments: Option<&Value>) -> Result<JsonObject, Option<Unreadable>> {
    match arguments {
        None | Some(Value::Null) => Ok(JsonObject::new()),
        Some(Value::Object(object)) => Ok(object.clone()),
        Some(Value::String(text)) => match json_check::arguments(text) {
            Ok(()) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(object)) => Ok(object),
                _ => Err(None),
            },
            Err(Unreadable::Syntax | Unreadable::NotAnObject) => Err(None),
            Err(why) => Err(Some(why)),
        },
        Some(_) => Err(None),
    }
}

fn invalid_arguments(connection: &str, tool: &str, why: Option<Unreadable>) -> String {
    match why {
        None => format!(
            "Invalid arguments for '{connection}'.{tool}: expected a JSON object of argument \
             names to values, or none. Call get_mcp_tool_schema for the schema."
        ),
        Some(why) => format!(
            "Invalid arguments for '{connection}'.{tool}: {}.",
            why.reason()
        ),
    }
}

fn stopped(_: actix::MailboxError) -> String {
    "The MCP supervisor is shutting down.".to_owned()
}
