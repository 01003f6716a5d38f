//! Stdio sessions against real child processes: the in-repo `mcp-test-server`
//! (flags for misbehavior, `--pid-file` to watch its processes), the
//! `mcp-demo-server`, and small `sh` scripts for children that never get as
//! far as MCP.
//!
//! Both binaries must be built first (`cargo build -p mcp-test-support
//! -p mcp-demo-server --bins`; `make test` does it). Bounds are generous:
//! these tests check that processes end, not how fast.
//!
//! Two tests re-execute this test binary as a helper process (selected by an
//! environment variable, see [`helper_dir`]): one to look commands up beside
//! "the current executable", one to `kill -9` a process holding sessions,
//! and one to check logs with a process-wide subscriber
//! ([`support::capture_logs`]).

mod support;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use mcp_supervisor::{
    FailureKind,
    config::StdioTransport,
    session::{Session, SessionHandler, open_stdio},
};
use mcp_test_support::{test_server_binary, wait_until};
use secrecy::SecretString;
use support::capture_logs;
use tokio::time::Instant;

/// Bound for a process to be gone once it has been killed.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// Names the child may see from our environment (docs/CONFIG.md, `env`).
const INHERITED: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "TERM", "SHELL", "LOGNAME"];

fn transport(command: impl Into<String>, args: &[&str]) -> StdioTransport {
    StdioTransport {
        command: command.into(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        env: Vec::new(),
        cwd: None,
    }
}

fn path_arg(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

fn test_server() -> String {
    path_arg(&test_server_binary()).to_owned()
}

fn demo_server() -> PathBuf {
    let path = test_server_binary().with_file_name("mcp-demo-server");
    assert!(
        path.is_file(),
        "{} not found; run `cargo build -p mcp-demo-server`",
        path.display()
    );
    path
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

async fn open(transport: &StdioTransport) -> Session {
    match open_stdio("test", transport, SessionHandler::default(), deadline()).await {
        Ok(session) => session,
        Err(failure) => panic!("opening failed: {failure}"),
    }
}

async fn echo(session: &Session, text: &str) -> String {
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), text.into());
    let result = session
        .call_tool("echo", Some(arguments), deadline())
        .await
        .expect("echo answers");
    let value = serde_json::to_value(&result.content).unwrap();
    value[0]["text"].as_str().expect("a text result").to_owned()
}

/// Running means: `/proc/PID` exists and is not a zombie (a zombie has
/// exited; it only waits for its parent, or init, to reap it).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.trim_start().chars().next());
        !matches!(state, Some('Z' | 'X') | None)
    })
}

async fn assert_gone(pids: &[u32]) {
    let gone = wait_until(GONE_WITHIN, || pids.iter().all(|pid| !running(*pid))).await;
    let left: Vec<_> = pids.iter().filter(|pid| running(**pid)).collect();
    assert!(gone, "still running after {GONE_WITHIN:?}: {left:?}");
}

/// Waits for a pid file the child writes (atomically) and reads it.
async fn read_pid(path: &Path) -> u32 {
    assert!(
        wait_until(Duration::from_secs(30), || path.exists()).await,
        "{} was never written",
        path.display()
    );
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[tokio::test]
async fn lists_tools_and_calls_echo_then_closes_without_leftovers() {
    let session = open(&transport(test_server(), &[])).await;
    let tools = session.list_tools(deadline()).await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "echo"));
    assert_eq!(echo(&session, "hello over stdio").await, "hello over stdio");

    let child = session.child().expect("a stdio session owns its child");
    let pid = child.pid();
    assert_eq!(child.pgid(), pid, "the child leads its own group");
    assert!(child.is_alive());
    assert!(!session.is_closed());
    session.close(Duration::from_secs(5)).await;
    assert_gone(&[pid]).await;
}

#[tokio::test]
async fn the_demo_server_answers_echo() {
    let session = open(&transport(path_arg(&demo_server()), &[])).await;
    assert_eq!(echo(&session, "demo").await, "demo");
    let pid = session.child().unwrap().pid();
    session.close(Duration::from_secs(5)).await;
    assert_gone(&[pid]).await;
}

#[tokio::test]
async fn the_child_sees_only_the_inherited_minimum_and_its_configured_env() {
    let mut config = transport(test_server(), &[]);
    config.env = vec![(
        "MCP_STDIO_TEST_CONFIGURED".to_owned(),
        SecretString::from("configured-value"),
    )];
    let session = open(&config).await;
    let pid = session.child().unwrap().pid();

    // The environment the child was started with, exactly as exec saw it.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let vars: Vec<(String, String)> = environ
        .split(|&byte| byte == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (name, value) = entry.split_once('=').unwrap_or((&entry, ""));
            (name.to_owned(), value.to_owned())
        })
        .collect();
    assert!(vars.contains(&(
        "MCP_STDIO_TEST_CONFIGURED".to_owned(),
        "configured-value".to_owned()
    )));
    let names: BTreeSet<&str> = vars.iter().map(|(name, _)| name.as_str()).collect();
    let unexpected: Vec<_> = names
        .iter()
        .filter(|name| !INHERITED.contains(name) && **name != "MCP_STDIO_TEST_CONFIGURED")
        .collect();
    assert!(
        unexpected.is_empty(),
        "leaked into the child: {unexpected:?}"
    );
    // Every variable of ours outside the allowlist (cargo sets CARGO_* for
    // tests) stayed behind; the allowlisted ones came along.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        assert_eq!(
            names.contains(name.as_ref()),
            INHERITED.contains(&name.as_ref()),
            "{name}"
        );
    }
    session.close(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn bare_commands_are_looked_up_on_the_childs_path() {
    let binary = test_server_binary();
    let dir = binary.parent().unwrap();
    let mut config = transport(binary.file_name().unwrap().to_str().unwrap(), &[]);
    // Only the configured PATH holds the server.
    config.env = vec![("PATH".to_owned(), SecretString::from(path_arg(dir)))];
    let session = open(&config).await;
    assert_eq!(echo(&session, "found on PATH").await, "found on PATH");
    session.close(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn relative_commands_are_resolved_against_cwd() {
    let binary = test_server_binary();
    let mut config = transport("./mcp-test-server", &[]);
    config.cwd = Some(binary.parent().unwrap().to_owned());
    let session = open(&config).await;
    assert_eq!(echo(&session, "relative").await, "relative");
    session.close(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_missing_command_is_a_transport_failure_that_never_ran() {
    for command in ["mcp-stdio-test-no-such-command", "/no/such/dir/server"] {
        let failure = open_stdio(
            "test",
            &transport(command, &["--secret-arg"]),
            SessionHandler::default(),
            deadline(),
        )
        .await
        .unwrap_err();
        assert_eq!(failure.kind, FailureKind::Transport, "{failure}");
        assert!(failure.not_run, "{failure}");
        assert!(failure.reason.contains(command), "{failure}");
        assert!(!format!("{failure:?}").contains("secret-arg"));
    }

    let mut config = transport(test_server(), &[]);
    config.cwd = Some("/no/such/dir".into());
    let failure = open_stdio("test", &config, SessionHandler::default(), deadline())
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transport, "{failure}");
    assert!(failure.not_run, "{failure}");
}

#[tokio::test]
async fn a_child_exiting_before_initialize_fails_as_transport_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // The shell leaves a grandchild in its group (stdio detached, so the
    // exit is seen as EOF at once), then exits without a word of MCP.
    let script =
        r#"echo $$ > "$1"; sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "$1.child"; exit 3"#;
    let failure = open_stdio(
        "test",
        &transport("sh", &["-c", script, "sh", path_arg(&pid_file)]),
        SessionHandler::default(),
        deadline(),
    )
    .await
    .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transport, "{failure}");

    let pid = read_pid(&pid_file).await;
    let grandchild = read_pid(&with_suffix(&pid_file, ".child")).await;
    assert_gone(&[pid, grandchild]).await;
}

#[tokio::test]
async fn a_handshake_that_never_answers_times_out_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let deadline = Instant::now() + Duration::from_secs(2);
    let failure = open_stdio(
        "test",
        &transport(
            "sh",
            &[
                "-c",
                r#"echo $$ > "$1"; exec sleep 1000"#,
                "sh",
                path_arg(&pid_file),
            ],
        ),
        SessionHandler::default(),
        deadline,
    )
    .await
    .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Timeout, "{failure}");
    // timeout_at answers at the deadline; the slack is for a slow machine.
    assert!(Instant::now() < deadline + Duration::from_secs(5));
    assert_gone(&[read_pid(&pid_file).await]).await;
}

#[tokio::test]
async fn close_ends_a_child_that_ignores_stdin_eof_and_sigterm_and_its_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let args = [
        "--ignore-stdin-close",
        "--ignore-sigterm",
        "--spawn-grandchild",
        "--pid-file",
        path_arg(&pid_file),
    ];
    let session = open(&transport(test_server(), &args)).await;
    let pid = read_pid(&pid_file).await;
    let grandchild = read_pid(&with_suffix(&pid_file, ".child")).await;
    assert_eq!(session.child().unwrap().pid(), pid);
    assert!(running(pid) && running(grandchild));

    // Shorter than rmcp's own stdin-EOF and SIGTERM waits (3 s each): the
    // final group kill is what ends this child.
    session.close(Duration::from_secs(1)).await;
    assert_gone(&[pid, grandchild]).await;
}

#[tokio::test]
async fn a_clean_close_still_ends_the_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let args = ["--spawn-grandchild", "--pid-file", path_arg(&pid_file)];
    let session = open(&transport(test_server(), &args)).await;
    let pid = read_pid(&pid_file).await;
    let grandchild = read_pid(&with_suffix(&pid_file, ".child")).await;
    session.close(Duration::from_secs(10)).await;
    assert_gone(&[pid, grandchild]).await;
}

#[tokio::test]
async fn dropping_a_session_kills_the_whole_group() {
    // A well-behaved child exits on stdin EOF, but only the group kill on
    // drop ends its grandchild; a stubborn one needs that kill for itself too.
    for stubborn in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let mut args = vec!["--spawn-grandchild", "--pid-file", path_arg(&pid_file)];
        if stubborn {
            args.extend(["--ignore-stdin-close", "--ignore-sigterm"]);
        }
        let session = open(&transport(test_server(), &args)).await;
        let pid = read_pid(&pid_file).await;
        let grandchild = read_pid(&with_suffix(&pid_file, ".child")).await;
        drop(session);
        assert_gone(&[pid, grandchild]).await;
    }
}

#[tokio::test]
async fn a_child_that_dies_is_seen_as_closed_and_not_alive() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let args = ["--exit-on-tool", "echo", "--pid-file", path_arg(&pid_file)];
    let session = open(&transport(test_server(), &args)).await;
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), "bye".into());
    let failure = session
        .call_tool("echo", Some(arguments), deadline())
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transport, "{failure}");
    assert!(wait_until(GONE_WITHIN, || session.is_closed()).await);
    let child = session.child().unwrap();
    assert!(wait_until(GONE_WITHIN, || !child.is_alive()).await);
    session.close(Duration::from_secs(1)).await;
}

/// Part of [`log_helper`]: the child's stderr is logged, line by line, bounded.
async fn stderr_lines_reach_the_debug_log_bounded() {
    let capture = capture_logs();
    // One normal line and one 100 kB line without a break, then the server.
    let script = r#"echo "hello from stderr" >&2
head -c 100000 /dev/zero | tr '\0' x >&2; echo >&2
exec "$1""#;
    let session = open(&transport("sh", &["-c", script, "sh", &test_server()])).await;
    assert_eq!(echo(&session, "ok").await, "ok");
    session.close(Duration::from_secs(5)).await;

    let logged = wait_until(GONE_WITHIN, || capture.text().contains("[…truncated]")).await;
    let logs = capture.text();
    assert!(logged, "stderr never logged:\n{logs}");
    let hello = logs.lines().find(|line| line.contains("hello from stderr"));
    assert!(
        hello.is_some_and(
            |line| line.contains("upstream stderr") && line.contains("connection=test")
        ),
        "{hello:?}"
    );
    let longest = logs.lines().map(str::len).max().unwrap_or(0);
    assert!(
        longest < 5_000,
        "a stderr line was not bounded: {longest} bytes"
    );
}

/// Part of [`log_helper`]: the canary check (docs/SUPERVISION.md, "Secrets and
/// bad input") for stdio arguments and env.
async fn no_argument_or_env_value_reaches_logs_debug_or_failures() {
    let capture = capture_logs();

    let dir = tempfile::tempdir().unwrap();
    let count_file = dir.path().join("canary-arg-7f3a9");
    let mut config = transport(test_server(), &["--count-file", path_arg(&count_file)]);
    config.env = vec![(
        "UPSTREAM_TOKEN".to_owned(),
        SecretString::from("canary-env-c41d2"),
    )];
    let session = open(&config).await;
    assert_eq!(echo(&session, "ok").await, "ok");
    let debug = format!("{session:?} {config:?}");
    session.close(Duration::from_secs(5)).await;

    config.command = "mcp-stdio-test-no-such-command".to_owned();
    let failure = open_stdio("test", &config, SessionHandler::default(), deadline())
        .await
        .unwrap_err();

    let logs = capture.text();
    assert!(logs.contains("started stdio upstream"), "capture works");
    for text in [logs, debug, format!("{failure} {failure:?}")] {
        assert!(
            !text.contains("canary-arg-7f3a9"),
            "argument leaked: {text}"
        );
        assert!(
            !text.contains("canary-env-c41d2"),
            "env value leaked: {text}"
        );
    }
}

/// Where a helper process started by a test below writes its results, when
/// this binary runs as one. Outside of that, the helper "tests" do nothing.
fn helper_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).map(PathBuf::from)
}

const BESIDE_EXE_HELPER: &str = "MCP_STDIO_TEST_BESIDE_EXE_HELPER";
const ORPHAN_HELPER: &str = "MCP_STDIO_TEST_ORPHAN_HELPER";
const LOG_HELPER: &str = "MCP_STDIO_TEST_LOG_HELPER";

/// This test binary's `test` as a helper process: `exe` is the binary (or a
/// link to it), `env` its extra variables.
fn helper_command(exe: &Path, test: &str, env: &[(&str, &Path)]) -> std::process::Command {
    let mut command = std::process::Command::new(exe);
    command
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// Runs a helper to completion and asserts it succeeded and got as far as
/// writing `ok` into `dir`; its output is shown only when it did not.
fn run_helper(exe: &Path, test: &str, dir: &Path, env: &[(&str, &Path)]) {
    let output = helper_command(exe, test, env).output().unwrap();
    let shown = || {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    };
    assert!(
        output.status.success(),
        "helper {test} failed:\n{}",
        shown()
    );
    assert!(
        dir.join("ok").exists(),
        "helper {test} never ran:\n{}",
        shown()
    );
}

/// Helper process of [`bare_commands_are_found_beside_the_current_executable`].
#[tokio::test]
async fn beside_exe_helper() {
    let Some(dir) = helper_dir(BESIDE_EXE_HELPER) else {
        return;
    };
    let session = open(&transport("mcp-demo-server", &[])).await;
    assert_eq!(echo(&session, "beside").await, "beside");
    session.close(Duration::from_secs(5)).await;
    std::fs::write(dir.join("ok"), "ok").unwrap();
}

#[test]
fn bare_commands_are_found_beside_the_current_executable() {
    // A directory holding (links to) this test binary and the demo server,
    // run with a PATH where the demo server is not.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = dir.path().join("stdio-sessions-helper");
    link_or_copy(&std::env::current_exe().unwrap(), &exe);
    link_or_copy(&demo_server(), &dir.path().join("mcp-demo-server"));
    let empty = tempfile::tempdir().unwrap();

    run_helper(
        &exe,
        "beside_exe_helper",
        dir.path(),
        &[(BESIDE_EXE_HELPER, dir.path()), ("PATH", empty.path())],
    );
}

fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

/// Helper process of [`kill_9_of_the_supervisor_leaves_no_child`]: holds
/// stdio sessions to children that ignore stdin EOF and SIGTERM and have each
/// started a grandchild (`sleep 1000`, which ignores stdin), writes all their
/// pids, then waits to be killed.
#[tokio::test]
async fn orphan_helper() {
    let Some(dir) = helper_dir(ORPHAN_HELPER) else {
        return;
    };
    let mut sessions = Vec::new();
    let mut pids = Vec::new();
    for n in 0..2 {
        let pid_file = dir.join(format!("child{n}"));
        let pid_file = pid_file.to_str().unwrap();
        let args = [
            "--ignore-stdin-close",
            "--ignore-sigterm",
            "--spawn-grandchild",
            "--pid-file",
            pid_file,
        ];
        let session = open(&transport(test_server(), &args)).await;
        pids.push(session.child().unwrap().pid().to_string());
        let grandchild = std::fs::read_to_string(format!("{pid_file}.child"))
            .expect("the child wrote its grandchild's pid before answering initialize");
        pids.push(grandchild.trim().to_owned());
        sessions.push(session);
    }
    let tmp = dir.join("pids.tmp");
    std::fs::write(&tmp, pids.join(" ")).unwrap();
    std::fs::rename(&tmp, dir.join("pids")).unwrap();
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn kill_9_of_the_supervisor_leaves_no_child() {
    /// Kills the helper if the test fails before it does.
    struct Helper(std::process::Child);
    impl Drop for Helper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut helper = Helper(
        helper_command(&exe, "orphan_helper", &[(ORPHAN_HELPER, dir.path())])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pids_file = dir.path().join("pids");
    let written = wait_until(Duration::from_secs(60), || {
        pids_file.exists() || helper.0.try_wait().ok().flatten().is_some()
    })
    .await;
    assert!(
        written && pids_file.exists(),
        "the helper never opened its sessions"
    );
    let pids: Vec<u32> = std::fs::read_to_string(&pids_file)
        .unwrap()
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 4, "two children and their grandchildren");
    assert!(pids.iter().all(|pid| running(*pid)));

    // SIGKILL: no destructor, no close, no runtime shutdown in the helper.
    // The children die of their parent-death signal; the grandchildren
    // (which ignore stdin EOF) only through the guardian.
    helper.0.kill().unwrap();
    helper.0.wait().unwrap();
    assert_gone(&pids).await;
}

/// Helper process of [`logs_hold_no_secret_and_bounded_stderr`].
#[tokio::test]
async fn log_helper() {
    let Some(dir) = helper_dir(LOG_HELPER) else {
        return;
    };
    no_argument_or_env_value_reaches_logs_debug_or_failures().await;
    stderr_lines_reach_the_debug_log_bounded().await;
    std::fs::write(dir.join("ok"), "ok").unwrap();
}

#[test]
fn logs_hold_no_secret_and_bounded_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    run_helper(&exe, "log_helper", dir.path(), &[(LOG_HELPER, dir.path())]);
}
