//! The gateway's rmcp `ServerHandler`: one MCP server in front of every
//! supervised upstream. Upstream results pass through unchanged; supervisor
//! outcomes become text results with `isError: true` and the §8 messages.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};

use actix::Addr;
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
        PaginatedRequestParams, ResultType, ServerCapabilities, ServerConfig, Tool,
    },
    service::{NotificationContext, Peer, RequestContext},
};

use super::naming;
use crate::{
    config::Expose,
    meta,
    registry::{CallTool, ListConnections, ListTools, Registry},
};

/// How long `tools/list` waits for one upstream's catalog; a slower one is
/// left out of this listing (it appears once loaded and the list is re-read).
pub const CATALOG_WAIT: Duration = Duration::from_secs(5);

/// Downstream sessions remembered for `tools/list_changed`; more are served
/// but not notified (a bound against clients that never close sessions).
const MAX_DOWNSTREAM_SESSIONS: usize = 4096;

/// State shared by every downstream session of the gateway.
#[derive(Debug)]
pub struct GatewayState {
    registry: Addr<Registry>,
    expose: Expose,
    /// Exposed name → (connection, tool), refreshed by every listing.
    index: RwLock<HashMap<String, (String, String)>>,
    /// Downstream sessions, for forwarding `tools/list_changed`.
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

impl GatewayState {
    pub fn new(registry: Addr<Registry>, expose: Expose) -> Arc<Self> {
        Arc::new(GatewayState {
            registry,
            expose,
            index: RwLock::new(HashMap::new()),
            peers: Mutex::new(Vec::new()),
        })
    }

    fn namespaced(&self) -> bool {
        matches!(self.expose, Expose::Namespaced | Expose::Both)
    }

    fn meta(&self) -> bool {
        matches!(self.expose, Expose::Meta | Expose::Both)
    }

    /// Remembers a downstream session (once: when it is initialized). Peers
    /// have no identity to compare, so registering on every request would
    /// grow the list by one entry per call and send duplicate notifications.
    fn register(&self, peer: &Peer<RoleServer>) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.retain(|known| !known.is_transport_closed());
        if peers.len() < MAX_DOWNSTREAM_SESSIONS {
            peers.push(peer.clone());
        }
    }

    /// Tells every downstream session that the tool list changed.
    pub async fn notify_tools_changed(&self) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            // A downstream that went away just misses the notification.
            let _ = peer.notify_tool_list_changed().await;
        }
    }

    /// Every exposed tool, refreshing the name index.
    async fn tools(&self) -> Vec<Tool> {
        let mut tools = Vec::new();
        if self.namespaced() {
            tools.extend(self.namespaced_tools().await);
        }
        if self.meta() {
            tools.extend(meta::definitions());
        }
        tools
    }

    async fn namespaced_tools(&self) -> Vec<Tool> {
        let Ok(connections) = self.registry.send(ListConnections).await else {
            return Vec::new();
        };
        let loads = connections.into_iter().filter(|c| !c.dead).map(|summary| {
            let load = self.registry.send(ListTools {
                connection: summary.name.clone(),
            });
            async move {
                match tokio::time::timeout(CATALOG_WAIT, load).await {
                    Ok(Ok(Ok(catalog))) => Some(catalog),
                    _ => None,
                }
            }
        });
        let catalogs = futures::future::join_all(loads).await;
        let mut index = HashMap::new();
        let mut tools = Vec::new();
        for catalog in catalogs.into_iter().flatten() {
            for tool in &catalog.tools {
                let name = naming::namespaced(&catalog.connection, &tool.name);
                index.insert(
                    name.clone(),
                    (catalog.connection.clone(), tool.name.to_string()),
                );
                let mut exposed = tool.clone();
                exposed.name = name.into();
                tools.push(exposed);
            }
        }
        *self.index.write().unwrap_or_else(|p| p.into_inner()) = index;
        tools
    }

    /// (connection, tool) behind an exposed name. A name not in the index
    /// (the client called without listing, or the list changed) triggers one
    /// fresh listing; a name still unknown after it is not a tool.
    async fn resolve(&self, name: &str) -> Option<(String, String)> {
        if let Some(found) = self.lookup(name) {
            return Some(found);
        }
        self.namespaced_tools().await;
        self.lookup(name)
    }

    fn lookup(&self, name: &str) -> Option<(String, String)> {
        self.index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }
}

/// One downstream session's handler (rmcp makes one per session).
#[derive(Debug, Clone)]
pub struct GatewayHandler {
    state: Arc<GatewayState>,
}

impl GatewayHandler {
    pub fn new(state: Arc<GatewayState>) -> Self {
        GatewayHandler { state }
    }
}

/// A tool result as the downstream session's protocol needs it. Results from
/// a 2025-era upstream carry no `resultType`, which protocol 2026-07-28
/// requires on every result (clients such as the Python SDK 2.x refuse one
/// without it); an absent field means `complete`. rmcp removes `complete`
/// again for a downstream session on an older protocol version.
fn downstream(mut result: CallToolResult) -> CallToolResponse {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result.into()
}

fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown tool '{name}'."), None)
}

impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mcp-supervisor",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Tools of several MCP servers, supervised. Namespaced tools are named \
             {connection}__{tool}; the meta-tools (list_mcps, search_mcp_tools, \
             get_mcp_tool_schema, describe_mcp, call_mcp) discover and call tools on demand.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.state.tools().await))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        if self.state.meta() && meta::is_meta_tool(name) {
            let result = meta::call(&self.state.registry, name, request.arguments).await;
            return Ok(downstream(result));
        }
        if !self.state.namespaced() {
            return Err(unknown_tool(name));
        }
        let Some((connection, tool)) = self.state.resolve(name).await else {
            return Err(unknown_tool(name));
        };
        let outcome = self
            .state
            .registry
            .send(CallTool {
                connection,
                tool,
                arguments: request.arguments,
                timeout: None,
            })
            .await
            .map_err(|_| ErrorData::internal_error("the supervisor is shutting down", None))?;
        Ok(downstream(meta::outcome_result(outcome)))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.state.register(&context.peer);
    }
}
