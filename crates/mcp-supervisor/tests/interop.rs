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
    CallOutcome, FailureKind,
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

fn everything_stdio(name: &str, extra: &str) -> String {
    stdio_connection(name, "node", &[&everything_entry(), "stdio"], extra)
}

fn python_stdio(name: &str, extra: &str) -> String {
    stdio_connection(name, &venv_python(), &[&python_server_script()], extra)
}

fn mcp_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

/// server-everything over streamable HTTP on `port` (it reads `PORT`; the
/// endpoint is `/mcp`).
async fn start_everything_http(port: u16) -> ChildProcess {
    let mut command = Command::new("node");
    command
        .arg(everything_entry())
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let mut child = ChildProcess::spawn("server-everything (streamableHttp)", command);
    child.wait_for_port(port, LISTEN_BOUND).await;
    child
}

/// The Python SDK server over streamable HTTP on `127.0.0.1:port/mcp`.
async fn start_python_http(port: u16) -> ChildProcess {
    let mut command = Command::new(venv_python());
    command
        .arg(python_server_script())
        .arg("--http")
        .arg(port.to_string());
    let mut child = ChildProcess::spawn("python_server.py --http", command);
    child.wait_for_port(port, LISTEN_BOUND).await;
    child
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
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
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

/// A tool missing from the upstream's catalog is refused with the §9 text,
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

    let echo = bounded_call(
        registry,
        connection,
        "echo",
        args(&[("message", json!("hello interop"))]),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_success(&echo, "Echo: hello interop");
    let sum = bounded_call(
        registry,
        connection,
        "get-sum",
        args(&[("a", json!(2)), ("b", json!(3))]),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_success(&sum, "The sum of 2 and 3 is 5.");
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
    let wrong_type = bounded_call(
        registry,
        connection,
        "get-sum",
        args(&[("a", json!("two")), ("b", json!(3))]),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_tool_error(&wrong_type, "Invalid arguments for tool get-sum");
    let missing = bounded_call(registry, connection, "echo", None, UP_CALL_TIMEOUT).await;
    expect_tool_error(&missing, "Invalid arguments for tool echo");

    unknown_tool_is_refused_without_a_call(registry, connection).await;

    let status = connection_status(registry, connection).await;
    assert_eq!(status.state, "ready");
    assert_eq!((status.calls.ok, status.calls.tool_error), (3, 2));
}

#[test]
fn server_everything_over_stdio() {
    let toml = with_settings(RELAXED, &everything_stdio("everything", ""));
    run(|| async move {
        let registry = Registry::new(config(&toml)).start();
        exercise_everything(&registry, "everything").await;
        registry.send(Shutdown).await.unwrap();
    });
}

#[test]
fn server_everything_over_streamable_http() {
    run(|| async {
        let port = free_loopback_port();
        let _upstream = start_everything_http(port).await;
        let toml = with_settings(RELAXED, &http_connection("everything", &mcp_url(port), ""));
        let registry = Registry::new(config(&toml)).start();
        exercise_everything(&registry, "everything").await;
        registry.send(Shutdown).await.unwrap();
    });
}

// ---- The Python SDK server -----------------------------------------------------

/// The checks run against `python_server.py` on either transport.
async fn exercise_python(registry: &Addr<Registry>, connection: &str) {
    let catalog = catalog(registry, connection).await;
    let mut names = tool_names(&catalog);
    names.sort();
    assert_eq!(names, ["divide", "greet", "server_pid"]);
    assert_eq!(read_only(&catalog, "server_pid"), Some(true));
    assert_eq!(read_only(&catalog, "divide"), None);

    let greet = bounded_call(
        registry,
        connection,
        "greet",
        args(&[("name", json!("Ada"))]),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_success(&greet, "Hello, Ada!");
    let quarter = bounded_call(
        registry,
        connection,
        "divide",
        args(&[("a", json!(1)), ("b", json!(4))]),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_success(&quarter, "0.25");

    // A tool that raises: FastMCP answers `isError: true` with the exception text.
    let by_zero = bounded_call(
        registry,
        connection,
        "divide",
        args(&[("a", json!(1)), ("b", json!(0))]),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_tool_error(&by_zero, "cannot divide by zero");
    // Bad arguments: FastMCP validates with pydantic inside the tool call and
    // also answers `isError: true` (not a JSON-RPC error), so ToolError again.
    let wrong_type = bounded_call(
        registry,
        connection,
        "divide",
        args(&[("a", json!("one")), ("b", json!(2))]),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_tool_error(&wrong_type, "validation error");
    let missing = bounded_call(registry, connection, "greet", None, UP_CALL_TIMEOUT).await;
    expect_tool_error(&missing, "validation error");

    unknown_tool_is_refused_without_a_call(registry, connection).await;

    let status = connection_status(registry, connection).await;
    assert_eq!(status.state, "ready");
    assert_eq!((status.calls.ok, status.calls.tool_error), (2, 3));
}

#[test]
fn python_sdk_server_over_stdio() {
    let toml = with_settings(RELAXED, &python_stdio("python", ""));
    run(|| async move {
        let registry = Registry::new(config(&toml)).start();
        exercise_python(&registry, "python").await;
        registry.send(Shutdown).await.unwrap();
    });
}

#[test]
fn python_sdk_server_over_streamable_http() {
    run(|| async {
        let port = free_loopback_port();
        let _upstream = start_python_http(port).await;
        let toml = with_settings(RELAXED, &http_connection("python", &mcp_url(port), ""));
        let registry = Registry::new(config(&toml)).start();
        exercise_python(&registry, "python").await;
        registry.send(Shutdown).await.unwrap();
    });
}

// ---- Killing upstreams mid-run -------------------------------------------------

/// One probe call and the text it answers when the upstream is up.
#[derive(Clone, Copy)]
struct Probe {
    tool: &'static str,
    arguments: fn() -> Option<serde_json::Map<String, serde_json::Value>>,
    expected: &'static str,
}

const EVERYTHING_PROBE: Probe = Probe {
    tool: "echo",
    arguments: || args(&[("message", json!("still there?"))]),
    expected: "Echo: still there?",
};

const PYTHON_PROBE: Probe = Probe {
    tool: "greet",
    arguments: || args(&[("name", json!("again"))]),
    expected: "Hello, again!",
};

/// While the upstream is down: each call is answered, within its budget, with
/// a value that says so (never a success, never a hang).
async fn calls_while_down(registry: &Addr<Registry>, connection: &str, probe: Probe) {
    let mut unavailable = 0;
    for _ in 0..4 {
        let outcome = bounded_call(
            registry,
            connection,
            probe.tool,
            (probe.arguments)(),
            DOWN_CALL_TIMEOUT,
        )
        .await;
        match outcome {
            CallOutcome::Unavailable { .. } => unavailable += 1,
            CallOutcome::TimedOut { .. } => {}
            other => panic!("the upstream is down, yet the call gave {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(unavailable > 0, "no call was answered Unavailable");
    let status = connection_status(registry, connection).await;
    assert!(
        status.calls.unavailable > 0 && status.last_failure.is_some(),
        "{status:?}"
    );
}

/// Calls until one succeeds (no `Reset`: the connection revives by itself after
/// its cooldown). Until then each call must be answered with `Unavailable`
/// (parked, or the revive failed); anything else fails the test.
async fn calls_until_recovered(registry: &Addr<Registry>, connection: &str, probe: Probe) {
    let deadline = tokio::time::Instant::now() + RECOVERY_BOUND;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        let outcome = bounded_call(
            registry,
            connection,
            probe.tool,
            (probe.arguments)(),
            UP_CALL_TIMEOUT,
        )
        .await;
        match &outcome {
            CallOutcome::Success(_) => {
                assert_eq!(text_of(&outcome), probe.expected);
                // And it stays up.
                let again = bounded_call(
                    registry,
                    connection,
                    probe.tool,
                    (probe.arguments)(),
                    UP_CALL_TIMEOUT,
                )
                .await;
                expect_success(&again, probe.expected);
                assert_eq!(connection_status(registry, connection).await.state, "ready");
                return;
            }
            CallOutcome::Unavailable { .. } | CallOutcome::TimedOut { .. } => {}
            other => panic!("while recovering, the call gave {other:?}"),
        }
        last = Some(outcome);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no successful call within {RECOVERY_BOUND:?} of the restart; last: {last:?}");
}

/// An HTTP upstream killed mid-run: calls are answered with values while it is
/// down; restarted on the same port, the connection revives on its own.
async fn http_upstream_killed_and_restarted<F, Fut>(start: F, probe: Probe)
where
    F: Fn(u16) -> Fut,
    Fut: std::future::Future<Output = ChildProcess>,
{
    let port = free_loopback_port();
    let mut upstream = start(port).await;
    let toml = with_settings(FAST_RECOVERY, &http_connection("up", &mcp_url(port), ""));
    let registry = Registry::new(config(&toml)).start();
    let first = bounded_call(
        &registry,
        "up",
        probe.tool,
        (probe.arguments)(),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_success(&first, probe.expected);

    upstream.kill();
    calls_while_down(&registry, "up", probe).await;
    let status = connection_status(&registry, "up").await;
    assert_eq!(
        status.last_failure.map(|(failure, _)| failure.kind),
        Some(FailureKind::Transport),
        "connection refused is a transport failure"
    );

    let _restarted = start(port).await;
    calls_until_recovered(&registry, "up", probe).await;
    registry.send(Shutdown).await.unwrap();
}

#[test]
fn server_everything_over_http_killed_then_restarted_recovers() {
    run(|| http_upstream_killed_and_restarted(start_everything_http, EVERYTHING_PROBE));
}

#[test]
fn python_sdk_server_over_http_killed_then_restarted_recovers() {
    run(|| http_upstream_killed_and_restarted(start_python_http, PYTHON_PROBE));
}

/// An HTTP upstream restarted while the connection is idle (no call sees it
/// down): the session the connection holds is unknown to the new process. The
/// Python SDK answers such a request 404 (as the MCP spec says; rmcp then
/// re-initializes), server-everything answers 400 "No valid session ID". Either
/// way the connection must come back without a `Reset`.
async fn http_upstream_restarted_while_idle<F, Fut>(start: F, probe: Probe)
where
    F: Fn(u16) -> Fut,
    Fut: std::future::Future<Output = ChildProcess>,
{
    let port = free_loopback_port();
    let mut upstream = start(port).await;
    let toml = with_settings(FAST_RECOVERY, &http_connection("up", &mcp_url(port), ""));
    let registry = Registry::new(config(&toml)).start();
    let first = bounded_call(
        &registry,
        "up",
        probe.tool,
        (probe.arguments)(),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_success(&first, probe.expected);

    upstream.kill();
    let _restarted = start(port).await;
    calls_until_recovered(&registry, "up", probe).await;
    registry.send(Shutdown).await.unwrap();
}

#[test]
fn server_everything_over_http_restarted_while_idle_recovers() {
    run(|| http_upstream_restarted_while_idle(start_everything_http, EVERYTHING_PROBE));
}

#[test]
fn python_sdk_server_over_http_restarted_while_idle_recovers() {
    run(|| http_upstream_restarted_while_idle(start_python_http, PYTHON_PROBE));
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

/// A stdio upstream killed mid-run: calls are answered with values (the next
/// one may already be served by a fresh child), and after the cooldown a call
/// succeeds on a new child; the killed one does not linger, and shutdown leaves
/// no child behind.
async fn stdio_child_killed(connection_toml: impl Fn(&str) -> String, probe: Probe) {
    let marker = unique_marker();
    let extra = format!("env = {{ INTEROP_MARKER = {} }}", toml_string(&marker));
    let toml = with_settings(FAST_RECOVERY, &connection_toml(&extra));
    let registry = Registry::new(config(&toml)).start();
    let first = bounded_call(
        &registry,
        "up",
        probe.tool,
        (probe.arguments)(),
        UP_CALL_TIMEOUT,
    )
    .await;
    expect_success(&first, probe.expected);
    let killed = the_child(&marker).await;

    signal::kill(Pid::from_raw(killed), signal::Signal::SIGKILL).expect("kill the child");
    assert!(
        gone(killed).await,
        "the killed child {killed} was not reaped"
    );
    // Every call gives a value. Which one depends on timing: `Unavailable`
    // (the death was noticed and the connection parked), `TimedOut`, or a
    // success from a fresh child once the cooldown has passed.
    for _ in 0..4 {
        let outcome = bounded_call(
            &registry,
            "up",
            probe.tool,
            (probe.arguments)(),
            DOWN_CALL_TIMEOUT,
        )
        .await;
        match &outcome {
            CallOutcome::Success(_) => assert_eq!(text_of(&outcome), probe.expected),
            CallOutcome::Unavailable { .. } | CallOutcome::TimedOut { .. } => {}
            other => panic!("after the kill, the call gave {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    run(|| stdio_child_killed(|extra| everything_stdio("up", extra), EVERYTHING_PROBE));
}

#[test]
fn python_sdk_server_over_stdio_killed_child_is_replaced() {
    run(|| async {
        stdio_child_killed(|extra| python_stdio("up", extra), PYTHON_PROBE).await;
    });
}

/// The Python server reports its own pid: the child the supervisor talks to is
/// the one the test sees, and a revive really starts a new process.
#[test]
fn python_sdk_server_over_stdio_reports_a_new_pid_after_a_kill() {
    let marker = unique_marker();
    let extra = format!("env = {{ INTEROP_MARKER = {} }}", toml_string(&marker));
    let toml = with_settings(FAST_RECOVERY, &python_stdio("up", &extra));
    run(|| async move {
        let registry = Registry::new(config(&toml)).start();
        let pid_of = |outcome: &CallOutcome| -> i32 {
            text_of(outcome)
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("server_pid answers a number: {outcome:?}"))
        };
        let first = bounded_call(&registry, "up", "server_pid", None, UP_CALL_TIMEOUT).await;
        let killed = pid_of(&first);
        assert_eq!(the_child(&marker).await, killed);
        signal::kill(Pid::from_raw(killed), signal::Signal::SIGKILL).expect("kill the child");
        assert!(
            gone(killed).await,
            "the killed child {killed} was not reaped"
        );

        let deadline = tokio::time::Instant::now() + RECOVERY_BOUND;
        let fresh = loop {
            // `server_pid` is read-only, so the supervisor may retry it on a
            // rebuilt session within the call.
            let outcome = bounded_call(&registry, "up", "server_pid", None, UP_CALL_TIMEOUT).await;
            match &outcome {
                CallOutcome::Success(_) => break pid_of(&outcome),
                CallOutcome::Unavailable { .. } | CallOutcome::TimedOut { .. } => {}
                other => panic!("after the kill, the call gave {other:?}"),
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no success within {RECOVERY_BOUND:?}; last: {outcome:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_ne!(fresh, killed);
        assert_eq!(the_child(&marker).await, fresh);
        registry.send(Shutdown).await.unwrap();
        assert!(gone(fresh).await, "the child {fresh} outlived the shutdown");
    });
}
