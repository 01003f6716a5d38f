//! Interoperability with MCP servers nobody here wrote, through the public
//! registry API, over both transports:
//!
//! - `@modelcontextprotocol/server-everything` (the reference TypeScript server,
//!   on the TypeScript SDK), over stdio and streamable HTTP;
//! - `tests/interop/python_server.py`, a small FastMCP server on the official
//!   Python SDK, over stdio and streamable HTTP.
//!
//! Both are pinned and installed under `.tools/` by `scripts/install-test-deps.sh`
//! (`make test` runs it first; see docs/TESTING.md). A missing install fails the
//! test with a message saying so: these tests are never skipped.
//!
//! Bounds are generous (slow 2-core CI): the tests check that every call comes
//! back as a value and that connections recover, never how fast.

mod support;

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use actix::{Actor, Addr};
use mcp_supervisor::{
    CallOutcome, ConnectionState, FailureKind,
    connection::CallCounts,
    registry::{Catalog, ListTools, Registry, Shutdown, Status},
};
use nix::{sys::signal, unistd::Pid};
use serde_json::json;
use support::*;

// ---- Where the installed servers are ------------------------------------------

const INSTALL_HINT: &str = "run `scripts/install-test-deps.sh` from the repository root (`make test` \
     does it first) to install the pinned interop servers; see docs/TESTING.md";

/// A path under the repository's `.tools/`, which must exist.
fn installed(relative: &str) -> PathBuf {
    let tools = repo_root().join(".tools");
    assert!(
        tools.is_dir(),
        "{} is missing: {INSTALL_HINT}",
        tools.display()
    );
    let path = tools.join(relative);
    assert!(
        path.exists(),
        "{} is missing (an incomplete install?): {INSTALL_HINT}",
        path.display()
    );
    path
}

fn utf8(path: &Path) -> String {
    path.to_str()
        .expect("repository paths are UTF-8")
        .to_owned()
}

/// server-everything's CLI: `node dist/index.js [stdio|sse|streamableHttp]`.
fn everything_entry() -> String {
    utf8(&installed(
        "node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    ))
}

fn venv_python() -> String {
    utf8(&installed("venv/bin/python"))
}

fn python_server_script() -> String {
    let script = repo_root().join("tests/interop/python_server.py");
    assert!(script.is_file(), "{} is missing", script.display());
    utf8(&script)
}

// ---- Configs and upstream processes -------------------------------------------

/// Timeouts for the tool checks: generous, nothing here is expected to fail.
const RELAXED: &str = r#"
[supervisor]
connect_timeout = "30s"
call_timeout = "30s"
list_timeout = "30s"
"#;

/// For the kill/restart tests: a short call budget so a dead upstream is
/// answered quickly, short cooldowns so the revive comes soon, and no
/// retirement however many parks the outage takes.
const FAST_RECOVERY: &str = r#"
[supervisor]
connect_timeout = "20s"
call_timeout = "5s"
list_timeout = "20s"

[supervisor.quarantine]
base_cooldown = "300ms"
max_cooldown = "1s"
retire_after = 1000
"#;

/// Per-call budget of the calls made while an upstream is down.
const DOWN_CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// Per-call budget of the calls that should succeed (a revive may spawn a
/// process and initialize within it).
const UP_CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// Longer than any call may take to be answered: beyond it, a call "hangs".
const ANSWER_BOUND: Duration = Duration::from_secs(60);
/// How long a restarted upstream may take before calls succeed again.
const RECOVERY_BOUND: Duration = Duration::from_secs(60);
/// How long a server may take to listen on its port.
const LISTEN_BOUND: Duration = Duration::from_secs(60);

/// A call's arguments.
type Arguments = Option<serde_json::Map<String, serde_json::Value>>;

fn with_settings(settings: &str, connection: &str) -> String {
    format!("{settings}\n{connection}")
}

/// A value unique to this test process and call, planted in a stdio child's
/// environment so the test can find that child in `/proc`.
fn unique_marker() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn mcp_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

/// The third-party servers under test; each runs over stdio and over
/// streamable HTTP.
#[derive(Clone, Copy, Debug)]
enum Server {
    /// `@modelcontextprotocol/server-everything`.
    Everything,
    /// `tests/interop/python_server.py`.
    Python,
}

/// How the supervisor reaches the server.
#[derive(Clone, Copy, Debug)]
enum Transport {
    Stdio,
    StreamableHttp,
}

impl Server {
    /// The connection name of the tool checks.
    fn name(self) -> &'static str {
        match self {
            Self::Everything => "everything",
            Self::Python => "python",
        }
    }

    /// `[connections.NAME]` running this server as a stdio child, plus `extra`.
    fn stdio(self, name: &str, extra: &str) -> String {
        match self {
            Self::Everything => {
                stdio_connection(name, "node", &[&everything_entry(), "stdio"], extra)
            }
            Self::Python => {
                stdio_connection(name, &venv_python(), &[&python_server_script()], extra)
            }
        }
    }

    /// This server over streamable HTTP on `127.0.0.1:port/mcp`, once it
    /// listens (server-everything reads `PORT`; the Python server takes
    /// `--http PORT`).
    async fn start_http(self, port: u16) -> ChildProcess {
        let (label, command) = match self {
            Self::Everything => {
                let mut command = Command::new("node");
                command
                    .arg(everything_entry())
                    .arg("streamableHttp")
                    .env("PORT", port.to_string());
                ("server-everything (streamableHttp)", command)
            }
            Self::Python => {
                let mut command = Command::new(venv_python());
                command
                    .arg(python_server_script())
                    .arg("--http")
                    .arg(port.to_string());
                ("python_server.py --http", command)
            }
        };
        let mut child = ChildProcess::spawn(label, command);
        child.wait_for_port(port, LISTEN_BOUND).await;
        child
    }

    /// The call the kill/restart tests make.
    fn probe(self) -> Probe {
        match self {
            Self::Everything => Probe {
                tool: "echo",
                arguments: || args(&[("message", json!("still there?"))]),
                expected: "Echo: still there?",
            },
            Self::Python => Probe {
                tool: "greet",
                arguments: || args(&[("name", json!("again"))]),
                expected: "Hello, again!",
            },
        }
    }

    /// The tool checks of this server, on `connection`.
    async fn exercise(self, registry: &Addr<Registry>, connection: &str) {
        match self {
            Self::Everything => exercise_everything(registry, connection).await,
            Self::Python => exercise_python(registry, connection).await,
        }
    }
}

// ---- Registry helpers ----------------------------------------------------------

async fn catalog(registry: &Addr<Registry>, connection: &str) -> std::sync::Arc<Catalog> {
    let listed = answered_within(
        ANSWER_BOUND,
        "ListTools",
        registry.send(ListTools {
            connection: connection.into(),
        }),
    )
    .await
    .expect("the registry answers");
    listed.unwrap_or_else(|unavailable| panic!("ListTools {connection}: {unavailable:?}"))
}

fn tool_names(catalog: &Catalog) -> Vec<String> {
    catalog
        .tools
        .iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

fn read_only(catalog: &Catalog, tool: &str) -> Option<bool> {
    catalog
        .tools
        .iter()
        .find(|candidate| candidate.name == tool)
        .unwrap_or_else(|| panic!("'{tool}' is listed"))
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.read_only_hint)
}

async fn counts(registry: &Addr<Registry>, connection: &str) -> CallCounts {
    connection_status(registry, connection).await.calls
}

async fn connection_status(
    registry: &Addr<Registry>,
    connection: &str,
) -> mcp_supervisor::registry::ConnectionStatus {
    registry
        .send(Status)
        .await
        .expect("the registry answers")
        .into_iter()
        .find(|status| status.name == connection)
        .unwrap_or_else(|| panic!("'{connection}' has a status"))
}

/// A call that must come back (as any value) within [`ANSWER_BOUND`].
async fn bounded_call(
    registry: &Addr<Registry>,
    connection: &str,
    tool: &str,
    arguments: Arguments,
    timeout: Duration,
) -> CallOutcome {
    answered_within(
        ANSWER_BOUND,
        &format!("call {connection}.{tool}"),
        call_with_timeout(registry, connection, tool, arguments, timeout),
    )
    .await
}

fn expect_success(outcome: &CallOutcome, expected: &str) {
    assert!(
        matches!(outcome, CallOutcome::Success(_)),
        "expected success, got {outcome:?}"
    );
    assert_eq!(text_of(outcome), expected);
}

/// Asserts a tool error whose text contains `needle`; returns the text.
fn expect_tool_error(outcome: &CallOutcome, needle: &str) -> String {
    assert!(
        matches!(outcome, CallOutcome::ToolError(_)),
        "expected a tool error, got {outcome:?}"
    );
    let text = text_of(outcome);
    assert!(text.contains(needle), "{needle:?} not in {text:?}");
    text
}

/// What a call of the tool checks must answer.
#[derive(Debug)]
enum Expect {
    /// A success with exactly this text.
    Success(&'static str),
    /// A tool error whose text contains this.
    ToolError(&'static str),
}

/// Makes each call (`tool`, `arguments`) in turn, within [`UP_CALL_TIMEOUT`],
/// and checks its answer.
async fn expect_answers(
    registry: &Addr<Registry>,
    connection: &str,
    calls: Vec<(&str, Arguments, Expect)>,
) {
    for (tool, arguments, expect) in calls {
        let outcome = bounded_call(registry, connection, tool, arguments, UP_CALL_TIMEOUT).await;
        match expect {
            Expect::Success(expected) => expect_success(&outcome, expected),
            Expect::ToolError(needle) => {
                expect_tool_error(&outcome, needle);
            }
        }
    }
}

/// A tool missing from the upstream's catalog is refused with the unknown-tool
/// text (docs/SUPERVISION.md, "What agents read"),
/// before any I/O: the connection's call counters (which count every call that
/// reaches the connection actor) do not move.
async fn unknown_tool_is_refused_without_a_call(registry: &Addr<Registry>, connection: &str) {
    let before = counts(registry, connection).await;
    let outcome = bounded_call(registry, connection, "no_such_tool", None, UP_CALL_TIMEOUT).await;
    let CallOutcome::Rejected { failure, message } = &outcome else {
        panic!("expected a rejection, got {outcome:?}")
    };
    assert_eq!(failure.kind, FailureKind::Protocol);
    assert_eq!(
        message,
        &format!(
            "Unknown tool 'no_such_tool' on MCP connection '{connection}'. Call \
             search_mcp_tools, then get_mcp_tool_schema."
        )
    );
    assert_eq!(
        counts(registry, connection).await,
        before,
        "no call was sent"
    );
}

/// The end of the tool checks: an unknown tool is refused without a call, and
/// the connection is still ready, having counted `ok` successes and
/// `tool_error` tool errors.
async fn unknown_tool_refused_and_still_ready(
    registry: &Addr<Registry>,
    connection: &str,
    ok: u64,
    tool_error: u64,
) {
    unknown_tool_is_refused_without_a_call(registry, connection).await;

    let status = connection_status(registry, connection).await;
    assert_eq!(status.state, ConnectionState::Ready);
    assert_eq!((status.calls.ok, status.calls.tool_error), (ok, tool_error));
}

/// `server`'s tool checks over `transport`, on a registry of its own.
async fn tool_checks(server: Server, transport: Transport) {
    let name = server.name();
    // An HTTP upstream lives until the checks are done.
    let (_upstream, connection) = match transport {
        Transport::Stdio => (None, server.stdio(name, "")),
        Transport::StreamableHttp => {
            let port = free_loopback_port();
            let upstream = server.start_http(port).await;
            (Some(upstream), http_connection(name, &mcp_url(port), ""))
        }
    };
    let registry = Registry::new(config(&with_settings(RELAXED, &connection))).start();
    server.exercise(&registry, name).await;
    registry.send(Shutdown).await.unwrap();
}

// ---- server-everything ---------------------------------------------------------

/// The checks run against server-everything on either transport.
async fn exercise_everything(registry: &Addr<Registry>, connection: &str) {
    let catalog = catalog(registry, connection).await;
    let names = tool_names(&catalog);
    for expected in ["echo", "get-sum", "get-structured-content"] {
        assert!(names.iter().any(|name| name == expected), "{names:?}");
    }
    // Its annotations reach us (the retry policy reads them).
    assert_eq!(read_only(&catalog, "echo"), Some(true));

    expect_answers(
        registry,
        connection,
        vec![
            (
                "echo",
                args(&[("message", json!("hello interop"))]),
                Expect::Success("Echo: hello interop"),
            ),
            (
                "get-sum",
                args(&[("a", json!(2)), ("b", json!(3))]),
                Expect::Success("The sum of 2 and 3 is 5."),
            ),
        ],
    )
    .await;
    // structuredContent passes through untouched.
    let structured = bounded_call(
        registry,
        connection,
        "get-structured-content",
        args(&[("location", json!("New York"))]),
        UP_CALL_TIMEOUT,
    )
    .await;
    let CallOutcome::Success(result) = &structured else {
        panic!("expected success, got {structured:?}")
    };
    assert!(
        result
            .structured_content
            .as_ref()
            .is_some_and(|content| content.get("temperature").is_some()),
        "{result:?}"
    );

    // Bad arguments: the TypeScript SDK validates them against the input schema
    // and answers a tool result with `isError: true` (not a JSON-RPC -32602
    // error), so they arrive as ToolError, and the session is kept.
    expect_answers(
        registry,
        connection,
        vec![
            (
                "get-sum",
                args(&[("a", json!("two")), ("b", json!(3))]),
                Expect::ToolError("Invalid arguments for tool get-sum"),
            ),
            (
                "echo",
                None,
                Expect::ToolError("Invalid arguments for tool echo"),
            ),
        ],
    )
    .await;

    unknown_tool_refused_and_still_ready(registry, connection, 3, 2).await;
}

#[test]
fn server_everything_over_stdio() {
    run(|| tool_checks(Server::Everything, Transport::Stdio));
}

#[test]
fn server_everything_over_streamable_http() {
    run(|| tool_checks(Server::Everything, Transport::StreamableHttp));
}

// ---- The Python SDK server -----------------------------------------------------

/// The checks run against `python_server.py` on either transport.
async fn exercise_python(registry: &Addr<Registry>, connection: &str) {
    let catalog = catalog(registry, connection).await;
    let mut names = tool_names(&catalog);
    names.sort();
    assert_eq!(
        names,
        ["divide", "greet", "profile", "rug_pull", "server_pid"]
    );
    assert_eq!(read_only(&catalog, "server_pid"), Some(true));
    assert_eq!(read_only(&catalog, "divide"), None);

    expect_answers(
        registry,
        connection,
        vec![
            (
                "greet",
                args(&[("name", json!("Ada"))]),
                Expect::Success("Hello, Ada!"),
            ),
            (
                "divide",
                args(&[("a", json!(1)), ("b", json!(4))]),
                Expect::Success("0.25"),
            ),
            // A tool that raises: FastMCP answers `isError: true` with the
            // exception text.
            (
                "divide",
                args(&[("a", json!(1)), ("b", json!(0))]),
                Expect::ToolError("cannot divide by zero"),
            ),
            // Bad arguments: FastMCP validates with pydantic inside the tool call
            // and also answers `isError: true` (not a JSON-RPC error), so
            // ToolError again.
            (
                "divide",
                args(&[("a", json!("one")), ("b", json!(2))]),
                Expect::ToolError("validation error"),
            ),
            ("greet", None, Expect::ToolError("validation error")),
        ],
    )
    .await;

    unknown_tool_refused_and_still_ready(registry, connection, 2, 3).await;
}

#[test]
fn python_sdk_server_over_stdio() {
    run(|| tool_checks(Server::Python, Transport::Stdio));
}

#[test]
fn python_sdk_server_over_streamable_http() {
    run(|| tool_checks(Server::Python, Transport::StreamableHttp));
}

// ---- Killing upstreams mid-run -------------------------------------------------

/// One probe call and the text it answers when the upstream is up.
#[derive(Clone, Copy)]
struct Probe {
    tool: &'static str,
    arguments: fn() -> Arguments,
    expected: &'static str,
}

impl Probe {
    /// The probe call on `connection`, with a per-call budget of `timeout`.
    async fn call(
        self,
        registry: &Addr<Registry>,
        connection: &str,
        timeout: Duration,
    ) -> CallOutcome {
        bounded_call(registry, connection, self.tool, (self.arguments)(), timeout).await
    }
}

/// Four probe calls, 100 ms apart, each with the budget of a call to a killed
/// upstream ([`DOWN_CALL_TIMEOUT`]): each is answered, within its budget, with a
/// value that says so (never a hang): `Unavailable` or `TimedOut`, or, when
/// `fresh_child_may_answer` (a stdio connection may already have started a new
/// child), a success with the probe's text. Returns how many were `Unavailable`.
async fn calls_after_the_kill(
    registry: &Addr<Registry>,
    connection: &str,
    probe: Probe,
    fresh_child_may_answer: bool,
) -> usize {
    let mut unavailable = 0;
    for _ in 0..4 {
        let outcome = probe.call(registry, connection, DOWN_CALL_TIMEOUT).await;
        match &outcome {
            CallOutcome::Unavailable { .. } => unavailable += 1,
            CallOutcome::TimedOut { .. } => {}
            CallOutcome::Success(_) if fresh_child_may_answer => {
                assert_eq!(text_of(&outcome), probe.expected);
            }
            other => panic!("after the kill, the call gave {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unavailable
}

/// Calls `tool` every 200 ms until a call succeeds (no `Reset`: the connection
/// revives by itself after its cooldown) and returns that success. Until then
/// each call must be answered with `Unavailable` (parked, or the revive failed)
/// or `TimedOut`; anything else, or no success within [`RECOVERY_BOUND`], fails
/// the test, saying `when` it happened.
async fn first_success(
    registry: &Addr<Registry>,
    connection: &str,
    tool: &str,
    arguments: fn() -> Arguments,
    when: &str,
) -> CallOutcome {
    let deadline = tokio::time::Instant::now() + RECOVERY_BOUND;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        let outcome = bounded_call(registry, connection, tool, arguments(), UP_CALL_TIMEOUT).await;
        match &outcome {
            CallOutcome::Success(_) => return outcome,
            CallOutcome::Unavailable { .. } | CallOutcome::TimedOut { .. } => {}
            other => panic!("{when}, the call gave {other:?}"),
        }
        last = Some(outcome);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no successful call within {RECOVERY_BOUND:?} ({when}); last: {last:?}");
}

/// Calls until one succeeds, with the probe's text; the next one succeeds too
/// and the connection is ready.
async fn calls_until_recovered(registry: &Addr<Registry>, connection: &str, probe: Probe) {
    let outcome = first_success(
        registry,
        connection,
        probe.tool,
        probe.arguments,
        "while recovering",
    )
    .await;
    assert_eq!(text_of(&outcome), probe.expected);
    // And it stays up.
    let again = probe.call(registry, connection, UP_CALL_TIMEOUT).await;
    expect_success(&again, probe.expected);
    assert_eq!(
        connection_status(registry, connection).await.state,
        ConnectionState::Ready
    );
}

/// `server` over streamable HTTP, and a registry (with [`FAST_RECOVERY`])
/// whose connection `up` has served a first probe call: the port, the server
/// process and the registry.
async fn http_upstream_in_use(server: Server) -> (u16, ChildProcess, Addr<Registry>) {
    let port = free_loopback_port();
    let upstream = server.start_http(port).await;
    let toml = with_settings(FAST_RECOVERY, &http_connection("up", &mcp_url(port), ""));
    let registry = Registry::new(config(&toml)).start();
    let probe = server.probe();
    let first = probe.call(&registry, "up", UP_CALL_TIMEOUT).await;
    expect_success(&first, probe.expected);
    (port, upstream, registry)
}

/// An HTTP upstream killed mid-run: calls are answered with values while it is
/// down; restarted on the same port, the connection revives on its own.
async fn http_upstream_killed_and_restarted(server: Server) {
    let (port, mut upstream, registry) = http_upstream_in_use(server).await;
    upstream.kill();
    let unavailable = calls_after_the_kill(&registry, "up", server.probe(), false).await;
    assert!(unavailable > 0, "no call was answered Unavailable");
    let status = connection_status(&registry, "up").await;
    assert!(
        status.calls.unavailable > 0 && status.last_failure.is_some(),
        "{status:?}"
    );
    assert_eq!(
        status.last_failure.map(|(failure, _)| failure.kind),
        Some(FailureKind::Transport),
        "connection refused is a transport failure"
    );

    let _restarted = server.start_http(port).await;
    calls_until_recovered(&registry, "up", server.probe()).await;
    registry.send(Shutdown).await.unwrap();
}

#[test]
fn server_everything_over_http_killed_then_restarted_recovers() {
    run(|| http_upstream_killed_and_restarted(Server::Everything));
}

#[test]
fn python_sdk_server_over_http_killed_then_restarted_recovers() {
    run(|| http_upstream_killed_and_restarted(Server::Python));
}

/// An HTTP upstream restarted while the connection is idle (no call sees it
/// down): the session the connection holds is unknown to the new process. The
/// Python SDK answers such a request 404 (as the MCP spec says; rmcp then
/// re-initializes), server-everything answers 400 "No valid session ID". Either
/// way the connection must come back without a `Reset`.
async fn http_upstream_restarted_while_idle(server: Server) {
    let (port, mut upstream, registry) = http_upstream_in_use(server).await;
    upstream.kill();
    let _restarted = server.start_http(port).await;
    calls_until_recovered(&registry, "up", server.probe()).await;
    registry.send(Shutdown).await.unwrap();
}

#[test]
fn server_everything_over_http_restarted_while_idle_recovers() {
    run(|| http_upstream_restarted_while_idle(Server::Everything));
}

#[test]
fn python_sdk_server_over_http_restarted_while_idle_recovers() {
    run(|| http_upstream_restarted_while_idle(Server::Python));
}

/// Processes (of this user) whose environment holds `INTEROP_MARKER=marker`:
/// the stdio children of one connection.
fn pids_with_marker(marker: &str) -> Vec<i32> {
    let needle = format!("INTEROP_MARKER={marker}");
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|byte| *byte == 0)
            .any(|variable| variable == needle.as_bytes())
            && alive(pid)
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}

/// Running (not gone, not a zombie waiting to be reaped).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// The single live stdio child carrying `marker`, waiting for it to appear.
async fn the_child(marker: &str) -> i32 {
    let mut pids = Vec::new();
    let found = mcp_test_support::wait_until(Duration::from_secs(30), || {
        pids = pids_with_marker(marker);
        pids.len() == 1
    })
    .await;
    assert!(
        found,
        "expected one child with marker {marker}, found {pids:?}"
    );
    pids[0]
}

async fn gone(pid: i32) -> bool {
    mcp_test_support::wait_until(Duration::from_secs(30), || !alive(pid)).await
}

/// SIGKILLs the stdio child `pid` and waits until it has been reaped.
async fn kill_child(pid: i32) {
    signal::kill(Pid::from_raw(pid), signal::Signal::SIGKILL).expect("kill the child");
    assert!(gone(pid).await, "the killed child {pid} was not reaped");
}

/// A registry (with [`FAST_RECOVERY`]) whose connection `up` runs `server` as a
/// stdio child marked with the returned marker (see [`the_child`]).
fn marked_stdio_registry(server: Server) -> (String, Addr<Registry>) {
    let marker = unique_marker();
    let extra = format!("env = {{ INTEROP_MARKER = {} }}", toml_string(&marker));
    let toml = with_settings(FAST_RECOVERY, &server.stdio("up", &extra));
    (marker, Registry::new(config(&toml)).start())
}

/// A stdio upstream killed mid-run: calls are answered with values (the next
/// one may already be served by a fresh child), and after the cooldown a call
/// succeeds on a new child; the killed one does not linger, and shutdown leaves
/// no child behind.
async fn stdio_child_killed(server: Server) {
    let (marker, registry) = marked_stdio_registry(server);
    let probe = server.probe();
    let first = probe.call(&registry, "up", UP_CALL_TIMEOUT).await;
    expect_success(&first, probe.expected);
    let killed = the_child(&marker).await;

    kill_child(killed).await;
    // Every call gives a value. Which one depends on timing: `Unavailable`
    // (the death was noticed and the connection parked), `TimedOut`, or a
    // success from a fresh child once the cooldown has passed.
    calls_after_the_kill(&registry, "up", probe, true).await;
    let status = connection_status(&registry, "up").await;
    assert!(status.last_failure.is_some(), "{status:?}");

    calls_until_recovered(&registry, "up", probe).await;
    let fresh = the_child(&marker).await;
    assert_ne!(fresh, killed, "a fresh child serves the calls");

    registry.send(Shutdown).await.unwrap();
    assert!(gone(fresh).await, "the child {fresh} outlived the shutdown");
}

#[test]
fn server_everything_over_stdio_killed_child_is_replaced() {
    run(|| stdio_child_killed(Server::Everything));
}

#[test]
fn python_sdk_server_over_stdio_killed_child_is_replaced() {
    run(|| stdio_child_killed(Server::Python));
}

/// The Python server reports its own pid: the child the supervisor talks to is
/// the one the test sees, and a revive really starts a new process.
#[test]
fn python_sdk_server_over_stdio_reports_a_new_pid_after_a_kill() {
    run(|| async {
        let (marker, registry) = marked_stdio_registry(Server::Python);
        let pid_of = |outcome: &CallOutcome| -> i32 {
            text_of(outcome)
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("server_pid answers a number: {outcome:?}"))
        };
        let first = bounded_call(&registry, "up", "server_pid", None, UP_CALL_TIMEOUT).await;
        let killed = pid_of(&first);
        assert_eq!(the_child(&marker).await, killed);
        kill_child(killed).await;

        // `server_pid` is read-only, so the supervisor may retry it on a
        // rebuilt session within the call.
        let fresh =
            pid_of(&first_success(&registry, "up", "server_pid", || None, "after the kill").await);
        assert_ne!(fresh, killed);
        assert_eq!(the_child(&marker).await, fresh);
        registry.send(Shutdown).await.unwrap();
        assert!(gone(fresh).await, "the child {fresh} outlived the shutdown");
    });
}

/// The Python SDK's FastMCP server changes a tool's description and tells
/// nobody (its `rug_pull` tool edits `greet` in its tool manager): with
/// `[contracts]`, the gateway's relist finds it and holds `greet`, whose
/// call is answered without reaching the server; the rest still works.
#[test]
fn a_fastmcp_tool_changed_silently_is_held_on_the_next_relist() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("mcp-supervisor.lock");
        let config = config(&format!(
            "[supervisor]\nrelist = \"200ms\"\n{}\n[contracts]\nlock = {}\n",
            Server::Python.stdio("python", ""),
            toml_string(&lock.display().to_string())
        ));
        let registry = Registry::new(config).start();
        let probe = Server::Python.probe();
        let first = bounded_call(
            &registry,
            "python",
            probe.tool,
            (probe.arguments)(),
            UP_CALL_TIMEOUT,
        )
        .await;
        expect_success(&first, probe.expected);
        let pulled = bounded_call(&registry, "python", "rug_pull", None, UP_CALL_TIMEOUT).await;
        expect_success(&pulled, "changed");
        let held = mcp_test_support::wait_until_async(Duration::from_secs(20), || {
            let registry = registry.clone();
            async move {
                let outcome = bounded_call(
                    &registry,
                    "python",
                    probe.tool,
                    (probe.arguments)(),
                    UP_CALL_TIMEOUT,
                )
                .await;
                outcome
                    .message()
                    .is_some_and(|said| said.contains("is held"))
            }
        })
        .await;
        assert!(held, "greet is held after a relist");
        let outcome = bounded_call(
            &registry,
            "python",
            probe.tool,
            (probe.arguments)(),
            UP_CALL_TIMEOUT,
        )
        .await;
        let said = outcome.message().unwrap_or_default();
        assert!(said.contains("(description)"), "{said}");
        let pid = bounded_call(&registry, "python", "server_pid", None, UP_CALL_TIMEOUT).await;
        assert!(matches!(pid, CallOutcome::Success(_)), "{pid:?}");
        let _ = registry.send(Shutdown).await;
    });
}
