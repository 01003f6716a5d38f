//! The MCP server itself: a fixed set of tools with known behavior, built
//! on rmcp's `ServerHandler` and tool router, a small resource and prompt
//! surface (two documents, one template, one prompt with a completable
//! argument), plus the shared control state tests use to observe and steer
//! it.

// Sampling and resource subscriptions are deprecated by SEP-2577 (protocol
// 2026-07-28); 2025-era clients and servers use them, and the supervisor
// relays them, so the test server offers them.
#![allow(deprecated)]

use std::{
    collections::BTreeSet,
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
        CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
        CompleteResult, CompletionInfo, ContentBlock, CreateMessageRequestParams, DiscoverResult,
        ErrorCode, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
        ReadResourceResponse, ReadResourceResult, Reference, Resource, ResourceContents,
        ResourceTemplate, ResourceUpdatedNotificationParam, Role, SamplingMessage,
        ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool,
        UnsubscribeRequestParams,
    },
    schemars,
    service::{NotificationContext, Peer, RequestContext, SubscriptionContext, SubscriptionSink},
    tool, tool_handler, tool_router,
};
use serde::Deserialize;

use crate::{
    counters::{Counted, Counters, Counts},
    extra_tools,
    fault::FaultHandle,
    seen_trace::SeenTrace,
};

/// How many calls' trace context a test server keeps.
pub const SEEN_TRACES: usize = 1000;

/// How many calls' arguments [`ServerControl::seen_arguments`] keeps.
pub const SEEN_ARGUMENTS: usize = 16;

/// Arguments this long or longer are not kept (a benchmark's large calls
/// would cost the server a copy each).
pub const SEEN_ARGUMENTS_MAX_BYTES: usize = 64 * 1024;
/// Which protocol generations a test server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Speaks {
    /// Both, like any rmcp server: `initialize` opens a 2025 session,
    /// `server/discover` and per-request `_meta` are 2026-07-28.
    #[default]
    Both = 0,
    /// Like a 2025-era server: no `server/discover` (a JSON-RPC error,
    /// `-32600`, with HTTP 200), so a client falls back to `initialize` and
    /// a session, which may send the client requests (sampling) and take
    /// `resources/subscribe`.
    Legacy = 1,
    /// Like a server that speaks only 2026-07-28: `initialize` is an unknown
    /// method (-32601).
    Modern = 2,
}

impl Speaks {
    /// Every value, in the order the command line lists them.
    pub const ALL: [Speaks; 3] = [Speaks::Both, Speaks::Legacy, Speaks::Modern];

    fn from_u8(value: u8) -> Self {
        Self::ALL
            .into_iter()
            .find(|speaks| *speaks as u8 == value)
            .unwrap_or_default()
    }
}

/// Name of the tool that is hidden until [`ServerControl::set_late_tool`]
/// enables it.
pub const LATE_TOOL: &str = "late_tool";

/// Name of the tool that asks the client for sampling; hidden until
/// [`ServerControl::set_sampling_tool`] enables it (so the default tool
/// count stays what other tests expect).
pub const SAMPLING_TOOL: &str = "ask_sampling";

/// The static resources: URI and text.
pub const RESOURCES: [(&str, &str); 2] = [
    ("test://doc/readme", "Read me first."),
    ("test://doc/changelog", "Nothing changed yet."),
];

/// The resource template; any `{name}` without `/` reads as
/// [`template_text`].
pub const RESOURCE_TEMPLATE: &str = "test://doc/{name}";

/// The prompt; its required argument is [`PROMPT_ARGUMENT`].
pub const PROMPT: &str = "greet";

/// The argument of [`PROMPT`], completed from [`PROMPT_COMPLETIONS`].
pub const PROMPT_ARGUMENT: &str = "name";

/// What `completion/complete` offers for [`PROMPT_ARGUMENT`] (filtered by
/// the typed prefix).
pub const PROMPT_COMPLETIONS: [&str; 3] = ["alice", "albert", "bob"];

/// The text of a resource read through [`RESOURCE_TEMPLATE`] that is not
/// one of [`RESOURCES`].
pub fn template_text(name: &str) -> String {
    format!("Document {name}.")
}

/// The text of the only message of [`PROMPT`].
pub fn prompt_text(name: &str) -> String {
    format!("Say hello to {name}.")
}

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
    /// Do not declare `tools.listChanged` nor `resources.subscribe` in
    /// `initialize` (a server that never announces changes, so a client has
    /// no reason to open the standalone stream).
    pub no_list_changed: bool,
    /// List this many more tools after the fixed ones: `extra_000`,
    /// `extra_001`, … with varied descriptions (a quarter mention a
    /// "ledger"), each echoing its `text` like `echo`; for a client's
    /// listing or search over many tools.
    pub extra_tools: usize,
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
    /// The `behavior.extra_tools` extra tools, built once.
    extra_tools: Vec<Tool>,
    /// Whether `late_tool` is listed and callable.
    late_tool: AtomicBool,
    /// Whether [`SAMPLING_TOOL`] is listed and callable.
    sampling_tool: AtomicBool,
    /// Which protocol generations the server answers ([`Speaks`]).
    speaks: std::sync::atomic::AtomicU8,
    /// Every initialized client session, to send `tools/list_changed` to.
    /// Closed ones are pruned on each notification round.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Sessions that subscribed to resources, with the URIs they hold.
    subscribers: Mutex<Vec<Subscriber>>,
    /// Open `subscriptions/listen` streams (protocol 2026-07-28 clients,
    /// which have no session): list changes and resource updates go there.
    listeners: Mutex<Vec<SubscriptionSink>>,
    /// Calls of one tool held until released ([`ServerControl::hold`]).
    hold: Hold,
    /// The trace context of every `tools/call` that reached the handler.
    /// The arguments of the last [`SEEN_ARGUMENTS`] HTTP calls, as sent.
    seen_arguments: Mutex<std::collections::VecDeque<String>>,
    /// Every distinct `Authorization` header value the server was sent.
    seen_authorizations: Mutex<std::collections::BTreeSet<String>>,
    /// Bearer tokens answered with an error status from now on
    /// ([`ServerControl::revoke`], [`ServerControl::limit`]).
    revoked: Mutex<std::collections::BTreeMap<String, u16>>,
    /// The last [`SEEN_TRACES`] calls' trace context.
    seen_traces: Mutex<std::collections::VecDeque<SeenTrace>>,
    /// Tools listed with a merge patch applied ([`ServerControl::redefine`]).
    redefined: Mutex<std::collections::BTreeMap<String, serde_json::Value>>,
}

/// A tool whose calls wait, once received, until the test lets them go.
#[derive(Debug)]
struct Hold {
    tool: Mutex<Option<String>>,
    /// One permit per call let go.
    release: tokio::sync::Semaphore,
    /// Calls waiting right now.
    waiting: std::sync::atomic::AtomicUsize,
}

/// One session's resource subscriptions.
#[derive(Debug)]
struct Subscriber {
    peer: Peer<RoleServer>,
    uris: Arc<Mutex<BTreeSet<String>>>,
}

impl ServerControl {
    /// Control state with the given behavior and no count file.
    pub fn new(behavior: ServerBehavior) -> Self {
        Self::with_counters(behavior, Counters::default())
    }

    /// Control state that also appends one line per received request to
    /// `count_file` (`method`, or `tools/call:NAME`, then
    /// ` traceparent=VALUE` when the call's `_meta` carried one).
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
                extra_tools: extra_tools::tools(behavior.extra_tools),
                behavior,
                late_tool: AtomicBool::new(false),
                sampling_tool: AtomicBool::new(false),
                speaks: std::sync::atomic::AtomicU8::new(Speaks::Both as u8),
                peers: Mutex::new(Vec::new()),
                subscribers: Mutex::new(Vec::new()),
                listeners: Mutex::new(Vec::new()),
                hold: Hold {
                    tool: Mutex::new(None),
                    release: tokio::sync::Semaphore::new(0),
                    waiting: std::sync::atomic::AtomicUsize::new(0),
                },
                seen_traces: Mutex::new(std::collections::VecDeque::new()),
                seen_arguments: Mutex::new(std::collections::VecDeque::new()),
                seen_authorizations: Mutex::default(),
                revoked: Mutex::default(),
                redefined: Mutex::default(),
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

    /// From now on, calls of `tool` wait once received (counted in
    /// [`held`](Self::held)) until [`release`](Self::release) lets them go.
    pub fn hold(&self, tool: &str) {
        *lock(&self.inner.hold.tool) = Some(tool.to_owned());
    }

    /// Lets `calls` held calls (or calls still to come) go on.
    pub fn release(&self, calls: usize) {
        self.inner.hold.release.add_permits(calls);
    }

    /// Calls waiting in [`hold`](Self::hold) right now.
    pub fn held(&self) -> usize {
        self.inner.hold.waiting.load(Ordering::SeqCst)
    }

    async fn wait_if_held(&self, tool: &str) {
        let hold = &self.inner.hold;
        if lock(&hold.tool).as_deref() != Some(tool) {
            return;
        }
        let (_waiting, _) = Counted::enter(&hold.waiting);
        if let Ok(permit) = hold.release.acquire().await {
            permit.forget();
        }
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

    /// The trace context of the `tools/call`s that reached the tool
    /// handler (calls answered by an injected HTTP fault never do), in
    /// arrival order: the last [`SEEN_TRACES`] (a server under a benchmark's
    /// load keeps no more).
    pub fn seen_traces(&self) -> Vec<SeenTrace> {
        lock(&self.inner.seen_traces).iter().cloned().collect()
    }

    /// The `arguments` of the last [`SEEN_ARGUMENTS`] `tools/call`s that
    /// reached the HTTP front, as the bytes of the body held them (key
    /// order, number text, duplicate keys and all), oldest first; arguments
    /// of [`SEEN_ARGUMENTS_MAX_BYTES`] or more are not kept.
    pub fn seen_arguments(&self) -> Vec<String> {
        lock(&self.inner.seen_arguments).iter().cloned().collect()
    }

    /// Every distinct `Authorization` header value the server was sent
    /// (what a caller's credentials must never be among, when the gateway
    /// is between).
    pub fn seen_authorizations(&self) -> Vec<String> {
        lock(&self.inner.seen_authorizations)
            .iter()
            .cloned()
            .collect()
    }

    /// Answers every request with `Authorization: Bearer TOKEN` from now on
    /// with `401`, as a server does whose credential was revoked.
    pub fn revoke(&self, token: &str) {
        lock(&self.inner.revoked).insert(token.to_owned(), 401);
    }

    /// Answers every request with `Authorization: Bearer TOKEN` from now on
    /// with `429` and `Retry-After: 7`, as a server does that limits that
    /// credential.
    pub fn limit(&self, token: &str) {
        lock(&self.inner.revoked).insert(token.to_owned(), 429);
    }

    /// The status `token` is answered with, if it was revoked or limited.
    pub(crate) fn refusal_of(&self, token: &str) -> Option<u16> {
        lock(&self.inner.revoked).get(token).copied()
    }

    pub(crate) fn saw_authorization(&self, value: &str) {
        let mut seen = lock(&self.inner.seen_authorizations);
        if !seen.contains(value) {
            seen.insert(value.to_owned());
        }
    }

    pub(crate) fn saw_arguments(&self, raw: &str) {
        if raw.len() >= SEEN_ARGUMENTS_MAX_BYTES {
            return;
        }
        let mut seen = lock(&self.inner.seen_arguments);
        if seen.len() == SEEN_ARGUMENTS {
            seen.pop_front();
        }
        seen.push_back(raw.to_owned());
    }

    /// Lists `tool` (or the prompt, by its name) with `patch` merged into its definition from now on (an
    /// RFC 7396 merge patch: objects merge, `null` removes a field), telling
    /// nobody: an upstream changing a tool silently. `None` lists it as
    /// built again. Calls of the tool work as before.
    pub fn redefine(&self, tool: &str, patch: Option<serde_json::Value>) {
        let mut redefined = lock(&self.inner.redefined);
        match patch {
            Some(patch) => redefined.insert(tool.to_owned(), patch),
            None => redefined.remove(tool),
        };
    }

    /// [`ServerControl::redefine`], then `notifications/tools/list_changed`
    /// to every connected client.
    pub async fn redefine_and_announce(&self, tool: &str, patch: Option<serde_json::Value>) {
        self.redefine(tool, patch);
        self.notify_tools_changed().await;
    }

    /// `tool` as listed now: redefined, or as built.
    fn as_listed(&self, tool: Tool) -> Tool {
        let name = tool.name.to_string();
        self.patched(&name, tool)
    }

    /// The item named `name` (a tool or the prompt: `redefine` takes
    /// either name) as listed now.
    fn patched<T: serde::Serialize + serde::de::DeserializeOwned>(&self, name: &str, item: T) -> T {
        let Some(patch) = lock(&self.inner.redefined).get(name).cloned() else {
            return item;
        };
        let mut value = serde_json::to_value(&item).unwrap_or_default();
        merge(&mut value, patch);
        serde_json::from_value(value).unwrap_or(item)
    }

    /// Whether `late_tool` is currently listed.
    pub fn late_tool_enabled(&self) -> bool {
        self.inner.late_tool.load(Ordering::SeqCst)
    }

    /// Lists (or hides) `late_tool`. On a change, every connected client is
    /// sent `notifications/tools/list_changed`; this returns once they are
    /// handed to the sessions.
    pub async fn set_late_tool(&self, enabled: bool) {
        if self.inner.late_tool.swap(enabled, Ordering::SeqCst) != enabled {
            self.notify_tools_changed().await;
        }
    }

    /// Tells every connected client that the tool list changed, though
    /// nothing did (as a server does that builds its tools afresh for each
    /// request, or announces too eagerly).
    pub async fn announce_tools_changed(&self) {
        self.notify_tools_changed().await;
    }

    /// Whether [`SAMPLING_TOOL`] is currently listed.
    pub fn sampling_tool_enabled(&self) -> bool {
        self.inner.sampling_tool.load(Ordering::SeqCst)
    }

    /// Lists (or hides) [`SAMPLING_TOOL`], like [`set_late_tool`](Self::set_late_tool).
    /// Enable it before a client lists the tools to have it in the first
    /// listing.
    pub async fn set_sampling_tool(&self, enabled: bool) {
        if self.inner.sampling_tool.swap(enabled, Ordering::SeqCst) != enabled {
            self.notify_tools_changed().await;
        }
    }

    /// Which protocol generations the server answers (see [`Speaks`]).
    pub fn speaks(&self) -> Speaks {
        Speaks::from_u8(self.inner.speaks.load(Ordering::SeqCst))
    }

    /// Sets which protocol generations the server answers; applies to
    /// sessions started afterwards.
    pub fn set_speaks(&self, speaks: Speaks) {
        self.inner.speaks.store(speaks as u8, Ordering::SeqCst);
    }

    /// `true`: the server answers like a 2025-era server ([`Speaks::Legacy`]);
    /// `false`: both generations.
    pub fn set_legacy_only(&self, legacy: bool) {
        self.set_speaks(if legacy { Speaks::Legacy } else { Speaks::Both });
    }

    /// Sends `notifications/resources/updated` for `uri` to every live
    /// session subscribed to it (`resources/subscribe`) and every open
    /// `subscriptions/listen` stream that asked for it; returns how many
    /// were sent.
    pub async fn notify_resource_updated(&self, uri: &str) -> usize {
        let peers: Vec<Peer<RoleServer>> = {
            let mut subscribers = self.lock_subscribers();
            subscribers.retain(|subscriber| !subscriber.peer.is_transport_closed());
            subscribers
                .iter()
                .filter(|subscriber| lock(&subscriber.uris).contains(uri))
                .map(|subscriber| subscriber.peer.clone())
                .collect()
        };
        let mut sent = 0;
        for peer in peers {
            let params = ResourceUpdatedNotificationParam::new(uri.to_owned());
            match peer.notify_resource_updated(params).await {
                Ok(()) => sent += 1,
                Err(error) => {
                    tracing::debug!(%error, "cannot send resources/updated to a client");
                }
            }
        }
        for listener in self.listeners() {
            let wanted = listener
                .accepted()
                .resource_subscriptions
                .as_ref()
                .is_some_and(|uris| uris.iter().any(|wanted| wanted == uri));
            if !wanted {
                continue;
            }
            match listener.notify_resource_updated(uri.to_owned()).await {
                Ok(()) => sent += 1,
                Err(error) => {
                    tracing::debug!(%error, "cannot send resources/updated to a listener");
                }
            }
        }
        sent
    }

    /// Open `subscriptions/listen` streams.
    pub fn listening(&self) -> usize {
        lock(&self.inner.listeners).len()
    }

    fn listeners(&self) -> Vec<SubscriptionSink> {
        lock(&self.inner.listeners).clone()
    }

    /// Tells every connected client that the tool list changed.
    async fn notify_tools_changed(&self) {
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
        for listener in self.listeners() {
            if listener.accepted().tools_list_changed != Some(true) {
                continue;
            }
            if let Err(error) = listener.notify_tool_list_changed().await {
                tracing::debug!(%error, "cannot send tools/list_changed to a listener");
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
        lock(&self.inner.peers)
    }

    fn lock_subscribers(&self) -> std::sync::MutexGuard<'_, Vec<Subscriber>> {
        lock(&self.inner.subscribers)
    }

    /// Remembers a session's subscription set (once per session).
    fn register_subscriber(&self, peer: Peer<RoleServer>, uris: Arc<Mutex<BTreeSet<String>>>) {
        let mut subscribers = self.lock_subscribers();
        subscribers.retain(|subscriber| !subscriber.peer.is_transport_closed());
        subscribers.push(Subscriber { peer, uris });
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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

/// Arguments of [`SAMPLING_TOOL`].
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AskSamplingArgs {
    /// The user message to ask the client's model about.
    pub prompt: String,
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
    /// Built once per process and shared: a 2026-07-28 client's every
    /// request is served by an instance of its own, and building the router
    /// (schemas, name checks) cost more than the request.
    tool_router: Arc<ToolRouter<Self>>,
    /// Whether this session's client is registered for `list_changed`
    /// notifications: on `notifications/initialized`, or on its first
    /// request if that is handled first (notifications and requests are
    /// handled concurrently).
    registered: Arc<AtomicBool>,
    /// URIs this session subscribed to.
    subscriptions: Arc<Mutex<BTreeSet<String>>>,
    /// Whether `subscriptions` is registered with the control state.
    subscriber: Arc<AtomicBool>,
}

static ROUTER: std::sync::OnceLock<Arc<ToolRouter<TestMcpServer>>> = std::sync::OnceLock::new();

impl TestMcpServer {
    /// A handler reporting to (and steered by) `control`.
    pub fn new(control: ServerControl) -> Self {
        Self {
            control,
            tool_router: Arc::clone(ROUTER.get_or_init(|| Arc::new(Self::tool_router()))),
            registered: Arc::new(AtomicBool::new(false)),
            subscriptions: Arc::default(),
            subscriber: Arc::new(AtomicBool::new(false)),
        }
    }

    fn register(&self, peer: &Peer<RoleServer>) {
        if !self.registered.swap(true, Ordering::SeqCst) {
            self.control.register_peer(peer.clone());
        }
    }

    fn tool_visible(&self, name: &str) -> bool {
        match name {
            LATE_TOOL => self.control.late_tool_enabled(),
            SAMPLING_TOOL => self.control.sampling_tool_enabled(),
            _ => true,
        }
    }

    /// The extra tool `name` names, if it is one ([`ServerBehavior::extra_tools`]).
    fn extra_tool(&self, name: &str) -> Option<&Tool> {
        let extra = &self.control.inner.extra_tools;
        extra_tools::index(name, extra.len()).map(|index| &extra[index])
    }
}

/// The contents of a resource, or `resource_not_found` naming the URI.
fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let text = match RESOURCES.iter().find(|(known, _)| *known == uri) {
        Some((_, text)) => (*text).to_owned(),
        None => match template_name(uri) {
            Some(name) => template_text(name),
            None => {
                return Err(ErrorData::resource_not_found(
                    format!("Resource not found: {uri}"),
                    Some(serde_json::json!({ "uri": uri })),
                ));
            }
        },
    };
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type("text/plain"),
    ]))
}

/// Applies `patch` to `target` as an RFC 7396 merge patch.
fn merge(target: &mut serde_json::Value, patch: serde_json::Value) {
    use serde_json::Value;
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(fields) = target {
        for (key, value) in patch {
            if value.is_null() {
                fields.remove(&key);
            } else {
                merge(fields.entry(key).or_insert(Value::Null), value);
            }
        }
    }
}

/// The `{name}` of a URI [`RESOURCE_TEMPLATE`] expands to.
fn template_name(uri: &str) -> Option<&str> {
    let name = uri.strip_prefix("test://doc/")?;
    (!name.is_empty() && !name.contains(['/', '?', '#'])).then_some(name)
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
        self.control.counters().record_deleted_id(&id);
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

    #[tool(
        description = "Ask the client's model (sampling/createMessage) about `prompt`; answers \
                       the text it sampled, or a tool error carrying why it could not."
    )]
    async fn ask_sampling(
        &self,
        peer: Peer<RoleServer>,
        Parameters(AskSamplingArgs { prompt }): Parameters<AskSamplingArgs>,
    ) -> CallToolResult {
        let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 100);
        let asked = tokio::time::timeout(SAMPLING_PATIENCE, peer.create_message(params)).await;
        match asked {
            Ok(Ok(result)) => {
                let text = result
                    .message
                    .content
                    .first()
                    .and_then(|content| content.as_text())
                    .map(|text| text.text.clone())
                    .unwrap_or_default();
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            Ok(Err(error)) => CallToolResult::error(vec![ContentBlock::text(format!(
                "sampling failed: {error}"
            ))]),
            Err(_) => CallToolResult::error(vec![ContentBlock::text(
                "sampling failed: the client did not answer in time",
            )]),
        }
    }
}

/// How long [`SAMPLING_TOOL`] waits for the client's answer.
const SAMPLING_PATIENCE: Duration = Duration::from_secs(60);

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TestMcpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_resources()
            .enable_completions();
        let capabilities = if self.control.inner.behavior.no_list_changed {
            capabilities.build()
        } else {
            capabilities
                .enable_tool_list_changed()
                .enable_resources_subscribe()
                .build()
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
            .chain(self.control.inner.extra_tools.iter().cloned())
            .map(|tool| self.control.as_listed(tool))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if let Some(tool) = self.extra_tool(name) {
            return Some(tool.clone());
        }
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
        {
            let mut seen = lock(&self.control.inner.seen_traces);
            if seen.len() == SEEN_TRACES {
                seen.pop_front();
            }
            seen.push_back(SeenTrace::of(&request, &context));
        }
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
        self.control.wait_if_held(&name).await;
        if !behavior.delay.is_zero() {
            tokio::time::sleep(behavior.delay).await;
        }
        let result = if self.extra_tool(&name).is_some() {
            extra_tools::call(request.arguments.as_ref()).map(Into::into)
        } else {
            self.tool_router
                .call(ToolCallContext::new(self, request, context))
                .await
        };
        if result.is_ok() {
            counters.record_completed(&name);
        }
        result
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.register(&context.peer);
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        if self.control.speaks() == Speaks::Modern {
            // `initialize` does not exist in protocol 2026-07-28.
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "Method not found: initialize",
                None,
            ));
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        if self.control.speaks() == Speaks::Legacy {
            // What a 2025-era server says to a request before `initialize`.
            return Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                "Bad Request: Server not initialized",
                None,
            ));
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Everything asked for; rmcp narrows it to the declared capabilities.
        Some(requested.clone())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = subscription.sink().clone();
        lock(&self.control.inner.listeners).push(sink.clone());
        subscription.cancelled().await;
        lock(&self.control.inner.listeners).retain(|open| open.id() != sink.id());
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = RESOURCES
            .iter()
            .map(|(uri, _)| {
                let name = uri.rsplit('/').next().unwrap_or(uri);
                Resource::new(*uri, name).with_mime_type("text/plain")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(RESOURCE_TEMPLATE, "doc")
                .with_description("Any document by name")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        read(&request.uri).map(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        read(&request.uri)?;
        lock(&self.subscriptions).insert(request.uri);
        if !self.subscriber.swap(true, Ordering::SeqCst) {
            self.control
                .register_subscriber(context.peer.clone(), self.subscriptions.clone());
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        lock(&self.subscriptions).remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let argument = PromptArgument::new(PROMPT_ARGUMENT)
            .with_description("Who to greet")
            .with_required(true);
        let prompt = Prompt::new(PROMPT, Some("Greet someone by name"), Some(vec![argument]));
        Ok(ListPromptsResult::with_all_items(vec![
            self.control.patched(PROMPT, prompt),
        ]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != PROMPT {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        }
        let name = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get(PROMPT_ARGUMENT))
            .and_then(|name| name.as_str())
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("missing argument `{PROMPT_ARGUMENT}`"), None)
            })?;
        let message = PromptMessage::new_text(Role::User, prompt_text(name));
        Ok(GetPromptResult::new(vec![message])
            .with_description("A greeting")
            .into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let candidates: Vec<String> = match &request.r#ref {
            Reference::Prompt(prompt)
                if prompt.name == PROMPT && request.argument.name == PROMPT_ARGUMENT =>
            {
                PROMPT_COMPLETIONS.iter().map(|&c| c.to_owned()).collect()
            }
            Reference::Resource(resource)
                if resource.uri == RESOURCE_TEMPLATE && request.argument.name == "name" =>
            {
                RESOURCES
                    .iter()
                    .filter_map(|(uri, _)| template_name(uri).map(str::to_owned))
                    .collect()
            }
            _ => Vec::new(),
        };
        let values: Vec<String> = candidates
            .into_iter()
            .filter(|candidate| candidate.starts_with(request.argument.value.as_str()))
            .collect();
        let total = u32::try_from(values.len()).unwrap_or(u32::MAX);
        let mut completion = CompletionInfo::new(values)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        completion.total = Some(total);
        completion.has_more = Some(false);
        Ok(CompleteResult::new(completion))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_read_by_uri_and_template() {
        let text = |uri: &str| match read(uri).unwrap().contents.as_slice() {
            [
                ResourceContents::TextResourceContents {
                    uri: named, text, ..
                },
            ] => {
                assert_eq!(named, uri);
                text.clone()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(text("test://doc/readme"), "Read me first.");
        assert_eq!(text("test://doc/notes"), template_text("notes"));
        for unknown in ["test://doc/", "test://doc/a/b", "test://other/x"] {
            let error = read(unknown).unwrap_err();
            assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND, "{unknown}");
            assert_eq!(error.data, Some(serde_json::json!({ "uri": unknown })));
        }
    }

    #[test]
    fn extra_tools_come_after_the_fixed_ones_and_only_when_asked() {
        let plain = TestMcpServer::new(ServerControl::default());
        assert!(plain.extra_tool("extra_000").is_none());
        assert!(plain.get_tool("extra_000").is_none());
        let behavior = ServerBehavior {
            extra_tools: 3,
            ..ServerBehavior::default()
        };
        let server = TestMcpServer::new(ServerControl::new(behavior));
        assert_eq!(server.get_tool("extra_002").unwrap().name, "extra_002");
        assert!(server.get_tool("extra_003").is_none());
        assert!(server.get_tool("echo").is_some());
    }

    #[test]
    fn the_hidden_tools_stay_hidden_until_enabled() {
        let control = ServerControl::default();
        let server = TestMcpServer::new(control.clone());
        assert!(server.tool_visible("echo"));
        assert!(!server.tool_visible(LATE_TOOL));
        assert!(!server.tool_visible(SAMPLING_TOOL));
        control.inner.sampling_tool.store(true, Ordering::SeqCst);
        assert!(server.tool_visible(SAMPLING_TOOL));
        assert!(server.tool_router.get(SAMPLING_TOOL).is_some());
    }

    /// A 2026-07-28 request gets an instance of its own: they share one
    /// router rather than building it each time.
    #[test]
    fn instances_share_one_tool_router() {
        let control = ServerControl::default();
        let first = TestMcpServer::new(control.clone());
        let second = TestMcpServer::new(control);
        assert!(Arc::ptr_eq(&first.tool_router, &second.tool_router));
        assert!(first.tool_router.get("echo").is_some());
    }
}
