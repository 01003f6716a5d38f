//! Shared helpers for the supervisor's integration tests: configs pointing at
//! test servers, running inside an actix system, collecting events.

#![allow(dead_code, unreachable_pub)]

pub mod raw;

use std::{
    future::Future,
    path::Path,
    sync::{Arc, Mutex},
};

use actix::{Actor, Addr, Context, Handler};
use mcp_supervisor::{
    CallOutcome,
    config::{Config, HttpTransport},
    events::ConnectionEvent,
    failure::Failure,
    http::{HttpClients, HttpRecorder},
    registry::{CallTool, Registry, Reset, Subscribe},
    session::{Session, SessionHandler, open_http},
};
use mcp_test_support::{TestServer, TestServerOptions};
use serde_json::json;

/// Runs `body` inside a fresh actix system (real time).
pub fn run<F: Future<Output = ()> + 'static>(body: impl FnOnce() -> F) {
    actix_rt::System::new().block_on(body());
}

/// Runs `body` inside a fresh actix system whose tokio clock is paused: time
/// moves only when every task waits on a timer (tokio's auto-advance), so
/// deadlines, cooldowns and backoffs pass in order and at once, however
/// loaded the machine is, and a test can measure them exactly with
/// `tokio::time::Instant`. Only for tests whose every party (registry, test
/// servers, clients) runs on this runtime: a separate process or thread
/// would have its answers overtaken by a clock that jumps whenever this
/// runtime is idle.
pub fn run_paused<F: Future<Output = ()> + 'static>(body: impl FnOnce() -> F) {
    run_paused_with(|_| {}, body);
}

/// [`run_paused`] on a runtime `configure` adjusts further (blocking-pool
/// limits or hooks).
pub fn run_paused_with<F: Future<Output = ()> + 'static>(
    configure: impl FnOnce(&mut tokio::runtime::Builder) + Send + 'static,
    body: impl FnOnce() -> F,
) {
    let system = actix_rt::System::with_tokio_rt(move || {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        builder.enable_all().start_paused(true);
        configure(&mut builder);
        builder.build().expect("a paused current-thread runtime")
    });
    system.block_on(body());
}

/// Every log line and span this process emits, from every thread (the
/// actors' thread, `spawn_blocking` threads, the stdio guardian's thread),
/// at every level, from the first call on; a secret check reads it whole.
///
/// Installed once, as the process's global subscriber (and as `log`'s, for
/// dependencies that log through it): a per-thread subscriber misses every
/// other thread, and per-thread subscribers in concurrent tests race on
/// tracing's callsite-interest cache and drop events. So only for a test
/// binary or helper process that runs one such test.
pub fn capture_logs() -> LogCapture {
    static CAPTURE: std::sync::OnceLock<LogCapture> = std::sync::OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            use tracing_subscriber::util::SubscriberInitExt;
            let capture = LogCapture::default();
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                // Span fields too: a span's fields are exported by many
                // subscribers (OpenTelemetry) even when no event is logged
                // inside it.
                .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
                .with_ansi(false)
                .with_writer(capture.clone())
                .finish()
                .try_init()
                .expect("no other global subscriber in this process");
            capture
        })
        .clone()
}

/// What [`capture_logs`] has captured so far.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for LogCapture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCapture {
    type Writer = LogCapture;
    fn make_writer(&'a self) -> LogCapture {
        self.clone()
    }
}

/// The `sha256` of `[gateway.keys.NAME]` for `key`: its SHA-256 in hex.
pub fn key_digest(key: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A config from TOML text (no env, no token files).
pub fn config(toml: &str) -> Config {
    Config::from_toml_str(toml, Path::new("test.toml"), &|_| None)
        .unwrap_or_else(|error| panic!("test config is valid: {error}"))
}

/// An HTTP session to `url` opened directly (no registry or actor), given
/// 20 s to connect.
pub async fn open_http_session(
    url: &str,
    clients: HttpClients,
    recorder: HttpRecorder,
) -> Result<Session, Failure> {
    let transport = HttpTransport {
        url: url.to_owned(),
        auth: None,
        headers: Vec::new(),
        on_behalf: None,
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    open_http(
        &transport,
        clients,
        recorder,
        SessionHandler::default(),
        deadline,
    )
    .await
}

/// `[connections.NAME]` for an HTTP upstream at `url`, plus extra keys.
pub fn http_connection(name: &str, url: &str, extra: &str) -> String {
    format!("[connections.{name}]\ntransport = \"http\"\nurl = \"{url}\"\n{extra}\n")
}

pub fn args(
    pairs: &[(&str, serde_json::Value)],
) -> Option<serde_json::Map<String, serde_json::Value>> {
    Some(
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect(),
    )
}

pub async fn call(
    registry: &Addr<Registry>,
    connection: &str,
    tool: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
) -> CallOutcome {
    send_call(registry, connection, tool, arguments, None).await
}

/// `CallTool`, with the connection's call timeout unless `timeout` is given.
async fn send_call(
    registry: &Addr<Registry>,
    connection: &str,
    tool: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    timeout: Option<std::time::Duration>,
) -> CallOutcome {
    registry
        .send(CallTool {
            connection: connection.into(),
            trace: mcp_supervisor::telemetry::TraceParent::current(),
            tool: tool.into(),
            arguments,
            timeout,
        })
        .await
        .expect("the registry answers")
}

/// The text of a successful result's first content item.
pub fn text_of(outcome: &CallOutcome) -> String {
    match outcome {
        CallOutcome::Success(result) | CallOutcome::ToolError(result) => result
            .content
            .first()
            .and_then(|content| content.as_text())
            .map(|text| text.text.clone())
            .unwrap_or_default(),
        other => panic!("expected an upstream result, got {other:?}"),
    }
}

/// A test server with default options, and a started registry whose only
/// connection, `a`, points at it: `settings` (e.g. a `[supervisor]` table),
/// then `[connections.a]` with `extra` keys.
pub async fn upstream_and_registry(settings: &str, extra: &str) -> (TestServer, Addr<Registry>) {
    let upstream = TestServer::start(TestServerOptions::legacy())
        .await
        .unwrap();
    let toml = format!("{settings}{}", http_connection("a", &upstream.url(), extra));
    let registry = Registry::new(config(&toml)).start();
    (upstream, registry)
}

/// `{"text": "hi"}`, the arguments of the test server's `echo` calls.
pub fn echo_args() -> Option<serde_json::Map<String, serde_json::Value>> {
    args(&[("text", json!("hi"))])
}

/// The text `connection`'s `echo` answers to [`echo_args`] (`"hi"` when the call
/// goes through; a panic when there is no upstream result).
pub async fn echo_text(registry: &Addr<Registry>, connection: &str) -> String {
    text_of(&call(registry, connection, "echo", echo_args()).await)
}

/// Sends `Reset` for `connection`, which must be known.
pub async fn reset(registry: &Addr<Registry>, connection: &str) {
    registry
        .send(Reset {
            connection: connection.into(),
        })
        .await
        .unwrap()
        .unwrap();
}

/// Records every event it is sent.
#[derive(Default, Clone)]
pub struct EventLog(pub Arc<Mutex<Vec<ConnectionEvent>>>);

impl EventLog {
    pub fn events(&self) -> Vec<ConnectionEvent> {
        self.0.lock().unwrap().clone()
    }

    pub async fn subscribe(&self, registry: &Addr<Registry>) {
        let recorder = EventRecorder(self.clone()).start();
        registry
            .send(Subscribe(recorder.recipient()))
            .await
            .unwrap();
    }
}

struct EventRecorder(EventLog);

impl Actor for EventRecorder {
    type Context = Context<Self>;
}

impl Handler<ConnectionEvent> for EventRecorder {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, _: &mut Context<Self>) {
        self.0.0.lock().unwrap().push(event);
    }
}

// ---- Added for the interop tests (real third-party servers as child processes).

/// A TOML basic string holding `text` (JSON string escapes are valid TOML).
/// A fleet key file (32 bytes, base64) shared by the tests of a binary,
/// kept until the process ends.
#[allow(dead_code)]
pub fn fleet_key_file() -> &'static std::path::Path {
    static KEY: std::sync::OnceLock<tempfile::NamedTempFile> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            file.path(),
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n",
        )
        .unwrap();
        file
    })
    .path()
}

pub fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// `[connections.NAME]` for a stdio upstream running `command` with `args`, plus
/// extra keys.
pub fn stdio_connection(name: &str, command: &str, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|arg| toml_string(arg)).collect();
    format!(
        "[connections.{name}]\ntransport = \"stdio\"\ncommand = {}\nargs = [{}]\n{extra}\n",
        toml_string(command),
        args.join(", ")
    )
}

/// The workspace root (two levels above this crate).
pub fn repo_root() -> std::path::PathBuf {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    root.canonicalize()
        .unwrap_or_else(|error| panic!("{}: {error}", root.display()))
}

/// The interop server on the Python SDK (`tests/interop/python_server.py`,
/// FastMCP) serving streamable HTTP on a free loopback port, once it
/// accepts connections; its MCP URL.
#[allow(dead_code)] // Not every test file uses it.
pub async fn python_http_server() -> (ChildProcess, String) {
    let root = repo_root();
    let python = root.join(".tools/venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/install-test-deps.sh",
        python.display()
    );
    let port = free_loopback_port();
    let mut command = std::process::Command::new(&python);
    command
        .arg(root.join("tests/interop/python_server.py"))
        .arg("--http")
        .arg(port.to_string());
    let mut server = ChildProcess::spawn("python_server.py --http", command);
    server
        .wait_for_port(port, std::time::Duration::from_secs(60))
        .await;
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// `CallTool` with an explicit per-call timeout.
pub async fn call_with_timeout(
    registry: &Addr<Registry>,
    connection: &str,
    tool: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    timeout: std::time::Duration,
) -> CallOutcome {
    send_call(registry, connection, tool, arguments, Some(timeout)).await
}

/// `future`'s output, or a panic naming `what` if it takes longer than `bound`
/// (the "never hangs" half of a call's promise).
pub async fn answered_within<T>(
    bound: std::time::Duration,
    what: &str,
    future: impl Future<Output = T>,
) -> T {
    tokio::time::timeout(bound, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {bound:?}"))
}

/// A loopback TCP port that nothing listens on right now (not every test
/// file uses it).
#[allow(unused_imports)]
pub use mcp_test_support::free_loopback_port;

/// A child process the test started (an upstream server): its stdout and stderr
/// go to a temporary file (shown when something goes wrong), and it is killed
/// and reaped when dropped, so a failing test leaves nothing behind.
#[derive(Debug)]
pub struct ChildProcess {
    label: String,
    child: Option<std::process::Child>,
    log: tempfile::NamedTempFile,
}

impl ChildProcess {
    /// Starts `command` (stdin closed, output captured).
    pub fn spawn(label: &str, mut command: std::process::Command) -> Self {
        let log = tempfile::NamedTempFile::new().expect("a temporary log file");
        let stdout = log.reopen().expect("the log file reopens");
        let stderr = log.reopen().expect("the log file reopens");
        let child = command
            .stdin(std::process::Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|error| panic!("{label}: cannot start {command:?}: {error}"));
        Self {
            label: label.to_owned(),
            child: Some(child),
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, std::process::Child::id)
    }

    /// What the process printed so far (for failure messages).
    pub fn output(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|child| child.try_wait().ok().flatten())
    }

    /// SIGKILL and reap (no-op when already gone).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until `127.0.0.1:port` accepts connections; panics (with the
    /// process's output) if the process exits first or `within` passes.
    pub async fn wait_for_port(&mut self, port: u16, within: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return;
            }
            if let Some(status) = self.exited() {
                panic!(
                    "{} exited ({status}) before listening on port {port}; its output:\n{}",
                    self.label,
                    self.output()
                );
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "{} did not listen on port {port} within {within:?}; its output:\n{}",
                    self.label,
                    self.output()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---- Added for the gateway tests: the gateway served over loopback HTTP.

/// A gateway served with `serve_http` on `127.0.0.1:0` over a fresh registry,
/// with the `ListChangedForwarder` subscribed (so upstream notifications
/// reach downstream clients). Stops serving when dropped.
pub struct ServedGateway {
    pub registry: Addr<Registry>,
    pub state: std::sync::Arc<mcp_supervisor::gateway::GatewayState>,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    shutdown: mcp_supervisor::gateway::GatewayShutdown,
    /// `serve_http`'s task: it serves until the gateway is dropped, so one
    /// that ended before fails the test (in `drop`, with what it returned).
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl ServedGateway {
    /// Serves `config`'s connections with its `[gateway]` settings (`expose`,
    /// `prefix`, …; `listen` is ignored), in its `[fleet]` if it has one.
    /// Must run inside an actix system.
    pub async fn start(config: Config) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::start_on(listener, config).await
    }

    /// [`ServedGateway::start`] on `listener` (bound beforehand, so that its
    /// address can be in `config`, as a fleet node's `advertise`).
    pub async fn start_on(listener: tokio::net::TcpListener, config: Config) -> Self {
        use mcp_supervisor::gateway::{GatewayState, serve_http};

        let registry = Registry::new(config.clone()).start();
        let state = GatewayState::start(&registry, &config)
            .await
            .expect("the audit log opens");
        let url = format!(
            "http://{}{}",
            listener.local_addr().unwrap(),
            config.gateway.path
        );
        let shutdown = mcp_supervisor::gateway::GatewayShutdown::new();
        let (settings, fleet) = (config.gateway.clone(), config.fleet.clone());
        let served = actix_rt::spawn({
            let shutdown = shutdown.clone();
            let state = state.clone();
            async move { serve_http(listener, state, &settings, fleet.as_ref(), shutdown).await }
        });
        Self {
            registry,
            state,
            url,
            shutdown,
            served,
        }
    }

    /// The gateway's evictions and refusals so far.
    pub fn tallies(&self) -> std::sync::Arc<mcp_supervisor::tallies::Tallies> {
        self.shutdown.tallies()
    }

    /// An MCP client session to the gateway over rmcp's streamable HTTP
    /// client, answered by `handler` (its `get_info` declares what the
    /// client can do: sampling, roots, …).
    pub async fn connect<H: rmcp::ClientHandler>(
        &self,
        handler: H,
    ) -> rmcp::service::RunningService<rmcp::service::RoleClient, H> {
        self.connect_with(handler, rmcp::service::ClientLifecycleMode::Initialize)
            .await
    }

    /// Like [`ServedGateway::connect`], starting with `lifecycle` (a
    /// 2026-07-28 client: `server/discover`, no session).
    pub async fn connect_with<H: rmcp::ClientHandler>(
        &self,
        handler: H,
        lifecycle: rmcp::service::ClientLifecycleMode,
    ) -> rmcp::service::RunningService<rmcp::service::RoleClient, H> {
        self.connect_as(handler, lifecycle, None).await
    }

    /// Like [`ServedGateway::connect_with`], presenting `bearer` (a key, a
    /// token) in `Authorization: Bearer` on every request.
    pub async fn connect_as<H: rmcp::ClientHandler>(
        &self,
        handler: H,
        lifecycle: rmcp::service::ClientLifecycleMode,
        bearer: Option<&str>,
    ) -> rmcp::service::RunningService<rmcp::service::RoleClient, H> {
        use rmcp::{
            service::ClientServiceExt,
            transport::{
                StreamableHttpClientTransport,
                streamable_http_client::StreamableHttpClientTransportConfig,
            },
        };

        let transport = StreamableHttpClientTransport::with_client(
            mcp_supervisor::http::RecordingClient::new(
                mcp_supervisor::session::shared_http_client(),
                HttpRecorder::default(),
            ),
            match bearer {
                Some(bearer) => StreamableHttpClientTransportConfig::with_uri(self.url.as_str())
                    .auth_header(bearer),
                None => StreamableHttpClientTransportConfig::with_uri(self.url.as_str()),
            },
        );
        handler
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .unwrap_or_else(|error| panic!("cannot connect to the gateway: {error}"))
    }
}

impl Drop for ServedGateway {
    fn drop(&mut self) {
        use futures::FutureExt as _;
        let ended_early = self
            .served
            .is_finished()
            .then(|| (&mut self.served).now_or_never());
        self.shutdown.end_sessions();
        if let Some(ended) = ended_early
            && !std::thread::panicking()
        {
            panic!("the gateway stopped serving before the test ended: {ended:?}");
        }
    }
}

/// The JSON-RPC error of a failed downstream request (any other failure, or
/// a success, fails the test).
pub fn jsonrpc_error<T: std::fmt::Debug>(
    result: Result<T, rmcp::ServiceError>,
) -> rmcp::model::ErrorData {
    match result {
        Err(rmcp::ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// The first text content of a tool result (empty when there is none).
pub fn text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

/// The OAuth settings of HTTP connection `name`.
pub fn oauth_settings(config: &Config, name: &str) -> mcp_supervisor::config::OAuthSettings {
    use mcp_supervisor::config::{Transport, UpstreamAuth};
    let Transport::Http(http) = &config.connection(name).unwrap().transport else {
        panic!("an http connection");
    };
    let Some(UpstreamAuth::OAuth(settings)) = &http.auth else {
        panic!("an OAuth connection");
    };
    settings.clone()
}

/// Logs in to the OAuth connection of `settings` at `url` as a person
/// would: a "browser" (a task of this test) follows the authorization URL's
/// redirects (the test server approves at once) to the login's loopback
/// listener. The login and the browser's visit must both succeed; the visit
/// is joined, so its failure fails the test.
pub async fn log_in(
    url: &str,
    settings: &mcp_supervisor::config::OAuthSettings,
) -> mcp_supervisor::oauth::LoggedIn {
    let mut visit = None;
    let open = |page: &str| {
        let page = page.to_owned();
        visit = Some(tokio::spawn(async move {
            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            client.get(page).send().await.map(|answer| answer.status())
        }));
    };
    let logged_in =
        mcp_supervisor::oauth::login(url, settings, open, std::time::Duration::from_secs(30)).await;
    let visit = visit.expect("the login opened its authorization URL");
    let status = visit
        .await
        .expect("the browser's visit ran to its end")
        .expect("the browser reached the login's listener");
    assert!(status.is_success(), "the browser's visit: {status}");
    logged_in.expect("the login succeeds")
}

/// Waits until the token in `file` is due for renewal: `lifetime` less a
/// buffer of half of it (1 to 30 s), counted in seconds of the system clock
/// since it was received (the rule rmcp and the supervisor share).
pub async fn until_refresh_is_due(
    file: &mcp_supervisor::oauth::TokenFile,
    lifetime: std::time::Duration,
) {
    let received = file
        .credentials()
        .await
        .unwrap()
        .and_then(|stored| stored.token_received_at)
        .expect("a stored token with its time of receipt");
    let lifetime = lifetime.as_secs();
    let buffer = (lifetime / 2).clamp(1, 30);
    let due =
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(received + lifetime - buffer + 1);
    if let Ok(left) = due.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(left).await;
    }
}

/// Waits (at most 10 s) until `registry` has joined its fleet's store.
#[allow(dead_code)]
pub async fn joined_fleet(registry: &Addr<Registry>) {
    let joined = mcp_test_support::wait_until_async(std::time::Duration::from_secs(10), || async {
        let overview = registry
            .send(mcp_supervisor::registry::FleetOverview)
            .await
            .unwrap()
            .unwrap();
        matches!(
            overview.store,
            mcp_supervisor::fleet::StoreHealth::Up { .. }
        )
    })
    .await;
    assert!(joined, "joined the fleet");
}
