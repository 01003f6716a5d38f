//! The MCP server itself: a fixed set of tools with known behavior, built
//! on rmcp's `ServerHandler` and tool router, plus the shared control state
//! tests use to observe and steer it.

use std::{
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, tool::ToolCallContext, wrapper::Parameters},
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    schemars,
    service::{NotificationContext, Peer, RequestContext},
    tool, tool_handler, tool_router,
};
use serde::Deserialize;

use crate::{
    counters::{Counters, Counts},
    fault::FaultHandle,
};

/// Name of the tool that is hidden until [`ServerControl::set_late_tool`]
/// enables it.
pub const LATE_TOOL: &str = "late_tool";

/// Exit code of the process when `exit_on_tool` (or the stdio
/// `--exit-after`) fires, so a test can tell it from a crash.
pub const EXIT_CODE: i32 = 3;

/// Server-side misbehavior that is not an HTTP fault: it lives in the tool
/// handler, so it works over stdio as well as HTTP.
#[derive(Debug, Clone, Default)]
pub struct ServerBehavior {
    /// Added before every tool call.
    pub delay: Duration,
    /// Calls to this tool never return.
    pub hang_tool: Option<String>,
    /// A call to this tool exits the whole process with [`EXIT_CODE`]
    /// while the call is in flight (meant for the stdio binary).
    pub exit_on_tool: Option<String>,
    /// Do not declare `tools.listChanged` in `initialize` (a server that
    /// never announces tool changes).
    pub no_list_changed: bool,
}

/// Shared, cloneable state of one test server: counters, fault script,
/// the `late_tool` switch and the connected clients.
#[derive(Debug, Clone)]
pub struct ServerControl {
    inner: Arc<ControlInner>,
}

#[derive(Debug)]
struct ControlInner {
    counters: Counters,
    faults: FaultHandle,
    behavior: ServerBehavior,
    /// Whether `late_tool` is listed and callable.
    late_tool: AtomicBool,
    /// Every initialized client session, to send `tools/list_changed` to.
    /// Closed ones are pruned on each notification round.
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

impl ServerControl {
    /// Control state with the given behavior and no count file.
    pub fn new(behavior: ServerBehavior) -> Self {
        Self::with_counters(behavior, Counters::default())
    }

    /// Control state that also appends one line per received request to
    /// `count_file` (`method`, or `tools/call:NAME`).
    pub fn with_count_file(behavior: ServerBehavior, count_file: &Path) -> std::io::Result<Self> {
        Ok(Self::with_counters(
            behavior,
            Counters::with_count_file(count_file)?,
        ))
    }

    fn with_counters(behavior: ServerBehavior, counters: Counters) -> Self {
        Self {
            inner: Arc::new(ControlInner {
                counters,
                faults: FaultHandle::default(),
                behavior,
                late_tool: AtomicBool::new(false),
                peers: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The fault script applied by the HTTP fault layer.
    pub fn faults(&self) -> &FaultHandle {
        &self.inner.faults
    }

    /// Messages received with this JSON-RPC method, faulted ones included.
    pub fn requests(&self, method: &str) -> u64 {
        self.inner.counters.requests(method)
    }

    /// `tools/call` requests received for this tool, faulted ones included.
    pub fn tool_calls(&self, tool: &str) -> u64 {
        self.inner.counters.tool_calls(tool)
    }

    /// Calls of this tool whose body ran to the end.
    pub fn completed_calls(&self, tool: &str) -> u64 {
        self.inner.counters.completed_calls(tool)
    }

    /// Most tool calls executing at once since the last [`reset_peak`](Self::reset_peak).
    pub fn in_flight_peak(&self) -> usize {
        self.inner.counters.in_flight_peak()
    }

    /// Starts a new peak measurement from the calls executing now.
    pub fn reset_peak(&self) {
        self.inner.counters.reset_peak();
    }

    /// A copy of every counter.
    pub fn counts(&self) -> Counts {
        self.inner.counters.snapshot()
    }

    /// Whether `late_tool` is currently listed.
    pub fn late_tool_enabled(&self) -> bool {
        self.inner.late_tool.load(Ordering::SeqCst)
    }

    /// Lists (or hides) `late_tool`. On a change, every connected client is
    /// sent `notifications/tools/list_changed`; this returns once they are
    /// handed to the sessions.
    pub async fn set_late_tool(&self, enabled: bool) {
        if self.inner.late_tool.swap(enabled, Ordering::SeqCst) == enabled {
            return;
        }
        let peers = {
            let mut peers = self.lock_peers();
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "cannot send tools/list_changed to a client");
            }
        }
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    fn register_peer(&self, peer: Peer<RoleServer>) {
        let mut peers = self.lock_peers();
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(peer);
    }

    fn lock_peers(&self) -> std::sync::MutexGuard<'_, Vec<Peer<RoleServer>>> {
        self.inner.peers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for ServerControl {
    fn default() -> Self {
        Self::new(ServerBehavior::default())
    }
}

/// Arguments of `echo`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// Text to send back.
    pub text: String,
}

/// Arguments of `add`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// First addend.
    pub a: f64,
    /// Second addend.
    pub b: f64,
}

/// Arguments of `sleep`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SleepArgs {
    /// How long to sleep, in milliseconds.
    pub ms: u64,
}

/// Arguments of `lookup`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LookupArgs {
    /// Key to look up.
    pub key: String,
    /// Milliseconds the lookup takes (a slow read-only tool); 0 when absent.
    #[serde(default)]
    pub ms: u64,
}

/// Arguments of `delete_item`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DeleteItemArgs {
    /// Item to delete.
    pub id: String,
}

/// Arguments of `set_value`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SetValueArgs {
    /// Key to set.
    pub key: String,
    /// Value to store.
    pub value: String,
}

/// Arguments of `fail`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct FailArgs {
    /// Text of the tool error.
    pub message: String,
}

/// The test MCP server handler. One instance per session (the HTTP service
/// builds one per `initialize`); all instances of a server share one
/// [`ServerControl`].
#[derive(Debug, Clone)]
pub struct TestMcpServer {
    control: ServerControl,
    tool_router: ToolRouter<Self>,
    /// Whether this session's client is registered for `list_changed`
    /// notifications: on `notifications/initialized`, or on its first
    /// request if that is handled first (notifications and requests are
    /// handled concurrently).
    registered: Arc<AtomicBool>,
}

impl TestMcpServer {
    /// A handler reporting to (and steered by) `control`.
    pub fn new(control: ServerControl) -> Self {
        Self {
            control,
            tool_router: Self::tool_router(),
            registered: Arc::new(AtomicBool::new(false)),
        }
    }

    fn register(&self, peer: &Peer<RoleServer>) {
        if !self.registered.swap(true, Ordering::SeqCst) {
            self.control.register_peer(peer.clone());
        }
    }

    fn tool_visible(&self, name: &str) -> bool {
        name != LATE_TOOL || self.control.late_tool_enabled()
    }
}

#[tool_router]
impl TestMcpServer {
    #[tool(description = "Return the given text unchanged.")]
    async fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Add two numbers and return the sum as text.")]
    async fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(description = "Sleep for `ms` milliseconds, then answer \"slept {ms}\".")]
    async fn sleep(&self, Parameters(SleepArgs { ms }): Parameters<SleepArgs>) -> String {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        format!("slept {ms}")
    }

    #[tool(
        description = "Look a key up (read-only, safe to retry); takes `ms` milliseconds when given.",
        annotations(read_only_hint = true)
    )]
    async fn lookup(&self, Parameters(LookupArgs { key, ms }): Parameters<LookupArgs>) -> String {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        format!("value-of-{key}")
    }

    #[tool(
        description = "Delete an item (destructive, never retried).",
        annotations(destructive_hint = true)
    )]
    async fn delete_item(
        &self,
        Parameters(DeleteItemArgs { id }): Parameters<DeleteItemArgs>,
    ) -> String {
        format!("deleted {id}")
    }

    #[tool(
        description = "Set a key to a value (idempotent, safe to retry).",
        annotations(idempotent_hint = true)
    )]
    async fn set_value(
        &self,
        Parameters(SetValueArgs { key: _, value: _ }): Parameters<SetValueArgs>,
    ) -> String {
        "ok".to_owned()
    }

    #[tool(description = "Answer a tool error (isError: true) carrying the message.")]
    async fn fail(&self, Parameters(FailArgs { message }): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(message)])
    }

    #[tool(description = "A tool that only appears once the test enables it.")]
    async fn late_tool(&self) -> String {
        "late".to_owned()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TestMcpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools();
        let capabilities = if self.control.inner.behavior.no_list_changed {
            capabilities.build()
        } else {
            capabilities.enable_tool_list_changed().build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "mcp-test-server",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Test server with predictable tools and injectable faults.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.register(&context.peer);
        let tools = self
            .tool_router
            .list_all()
            .into_iter()
            .filter(|tool| self.tool_visible(&tool.name))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_visible(name)
            .then(|| self.tool_router.get(name).cloned())
            .flatten()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.register(&context.peer);
        let name = request.name.to_string();
        if !self.tool_visible(&name) {
            // The same answer the router gives for any unknown tool.
            return Err(ErrorData::invalid_params("tool not found", None));
        }
        let counters = self.control.counters();
        let _in_flight = counters.enter_call();
        let behavior = &self.control.inner.behavior;
        if behavior.exit_on_tool.as_deref() == Some(name.as_str()) {
            tracing::warn!(tool = %name, "exiting mid-call as configured");
            std::process::exit(EXIT_CODE);
        }
        if behavior.hang_tool.as_deref() == Some(name.as_str()) {
            std::future::pending::<()>().await;
        }
        if !behavior.delay.is_zero() {
            tokio::time::sleep(behavior.delay).await;
        }
        let result = self
            .tool_router
            .call(ToolCallContext::new(self, request, context))
            .await;
        if result.is_ok() {
            counters.record_completed(&name);
        }
        result
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.register(&context.peer);
    }
}
