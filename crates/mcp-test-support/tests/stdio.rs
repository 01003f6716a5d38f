//! The `mcp-test-server` binary as a real child process: over stdio with
//! rmcp's `TokioChildProcess`, with raw JSON-RPC lines for the flags that
//! break the protocol on purpose, and in `--http` mode.

use std::{
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    time::Duration,
};

use mcp_test_support::{eventually, stdio::GARBAGE_LINE};
use rmcp::{
    ServiceExt as _,
    model::{CallToolRequestParams, ClientConfig},
    transport::TokioChildProcess,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-test-server");

/// Generous bound for any single step on a slow, busy machine.
const STEP: Duration = Duration::from_secs(15);

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args).kill_on_drop(true);
    command
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn rmcp_client_lists_and_calls_over_stdio_and_requests_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let count_file = dir.path().join("count");
    let transport =
        TokioChildProcess::new(command(&["--count-file", count_file.to_str().unwrap()])).unwrap();
    let client = tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed");

    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "echo"));
    let arguments = json!({"text": "over stdio"}).as_object().unwrap().clone();
    let result = tokio::time::timeout(
        STEP,
        client.call_tool(CallToolRequestParams::new("echo").with_arguments(arguments)),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        result.content[0].as_text().unwrap().text.as_str(),
        "over stdio"
    );

    eventually!(read_lines(&count_file).len() >= 4);
    assert_eq!(
        read_lines(&count_file),
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call:echo"
        ]
    );
    client.cancel().await.unwrap();
}

/// `--extra-tools N` lists N more tools after the fixed ones; they echo.
#[tokio::test]
async fn extra_tools_are_listed_after_the_fixed_ones_and_echo() {
    let transport = TokioChildProcess::new(command(&["--extra-tools", "12"])).unwrap();
    let client = tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    let first_extra = names.iter().position(|name| name.starts_with("extra_"));
    let (fixed, extra) = names.split_at(first_extra.expect("extra tools listed"));
    assert!(fixed.contains(&"echo"), "{names:?}");
    let expected: Vec<String> = (0..12).map(|i| format!("extra_{i:03}")).collect();
    assert_eq!(extra, expected, "the extra tools, in order, last");
    let ledgers = tools
        .iter()
        .filter(|tool| {
            tool.description
                .as_deref()
                .unwrap_or_default()
                .contains("ledger")
        })
        .count();
    assert!(
        (1..12).contains(&ledgers),
        "{ledgers} of 12 mention a ledger"
    );

    let arguments = json!({"text": "from the tail"})
        .as_object()
        .unwrap()
        .clone();
    let call = CallToolRequestParams::new("extra_007").with_arguments(arguments);
    let result = tokio::time::timeout(STEP, client.call_tool(call))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        result.content[0].as_text().unwrap().text.as_str(),
        "from the tail"
    );
    let beyond = CallToolRequestParams::new("extra_012")
        .with_arguments(json!({"text": "x"}).as_object().unwrap().clone());
    let error = tokio::time::timeout(STEP, client.call_tool(beyond))
        .await
        .unwrap()
        .unwrap_err();
    assert!(error.to_string().contains("tool not found"), "{error}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn plain_stdio_server_exits_cleanly_when_stdin_closes() {
    let transport = TokioChildProcess::new(command(&["--delay-ms", "1"])).unwrap();
    let client = tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .unwrap()
        .unwrap();
    let arguments = json!({"a": 40, "b": 2}).as_object().unwrap().clone();
    let result = client
        .call_tool(CallToolRequestParams::new("add").with_arguments(arguments))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text.as_str(), "42");
    client.cancel().await.unwrap();

    let mut raw = RawChild::spawn(&[]).await;
    drop(raw.stdin.take());
    assert!(raw.wait().await.success());
}

/// A child spoken to with hand-written JSON-RPC lines.
struct RawChild {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl RawChild {
    async fn spawn(args: &[&str]) -> Self {
        let mut child = command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn line(&mut self) -> Option<String> {
        tokio::time::timeout(STEP, self.stdout.next_line())
            .await
            .expect("no line from the child")
            .unwrap()
    }

    /// Sends `initialize` and `notifications/initialized`.
    async fn initialize(&mut self) {
        self.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        )
        .await;
        let answer: Value = serde_json::from_str(&self.line().await.unwrap()).unwrap();
        assert_eq!(answer["id"], 1);
        assert!(answer["result"]["capabilities"]["tools"].is_object());
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    async fn call(&mut self, id: u64, tool: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": {"text": "x"}}}))
            .await;
    }

    async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(STEP, self.child.wait())
            .await
            .expect("child did not exit")
            .unwrap()
    }

    /// Still running after `grace`?
    async fn alive_after(&mut self, grace: Duration) -> bool {
        tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
    }
}

#[tokio::test]
async fn garbage_on_tool_writes_a_non_json_line() {
    let mut raw = RawChild::spawn(&["--garbage-on-tool", "echo"]).await;
    raw.initialize().await;
    raw.call(2, "echo").await;
    assert_eq!(raw.line().await.unwrap(), GARBAGE_LINE);
    // Other tools still answer.
    raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "lookup", "arguments": {"key": "a"}}}))
        .await;
    let answer: Value = serde_json::from_str(&raw.line().await.unwrap()).unwrap();
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["content"][0]["text"], "value-of-a");
}

#[tokio::test]
async fn exit_after_n_answers_exits_with_code_3() {
    let mut raw = RawChild::spawn(&["--exit-after", "2"]).await;
    raw.initialize().await;
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    let answer: Value = serde_json::from_str(&raw.line().await.unwrap()).unwrap();
    assert_eq!(answer["id"], 2);
    assert_eq!(raw.wait().await.code(), Some(3));
    assert_eq!(raw.line().await, None, "stdout closed");
}

#[tokio::test]
async fn exit_on_tool_exits_mid_call() {
    let dir = tempfile::tempdir().unwrap();
    let count_file = dir.path().join("count");
    let mut raw = RawChild::spawn(&[
        "--exit-on-tool",
        "delete_item",
        "--count-file",
        count_file.to_str().unwrap(),
    ])
    .await;
    raw.initialize().await;
    raw.call(2, "delete_item").await;
    assert_eq!(raw.wait().await.code(), Some(3));
    assert_eq!(raw.line().await, None, "no answer was written");
    assert_eq!(
        read_lines(&count_file).last().map(String::as_str),
        Some("tools/call:delete_item")
    );
}

#[tokio::test]
async fn hang_tool_never_answers_but_others_do() {
    let mut raw = RawChild::spawn(&["--hang-tool", "echo"]).await;
    raw.initialize().await;
    raw.call(2, "echo").await;
    raw.call(3, "set_value").await; // wrong arguments: an error answer, promptly
    let answer: Value = serde_json::from_str(&raw.line().await.unwrap()).unwrap();
    assert_eq!(answer["id"], 3, "the hung call must not answer first");
    let nothing = tokio::time::timeout(Duration::from_millis(300), raw.stdout.next_line()).await;
    assert!(nothing.is_err(), "the hung call answered: {nothing:?}");
}

#[tokio::test]
async fn ignore_stdin_close_keeps_running() {
    let mut raw = RawChild::spawn(&["--ignore-stdin-close"]).await;
    raw.initialize().await;
    drop(raw.stdin.take());
    assert!(raw.alive_after(Duration::from_millis(300)).await);
    raw.child.kill().await.unwrap();
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

fn pid_from(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn process_exists(pid: u32) -> bool {
    // A zombie still has a /proc entry; look at its state.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test]
async fn ignore_sigterm_survives_sigterm_and_pid_files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut raw = RawChild::spawn(&[
        "--ignore-sigterm",
        "--spawn-grandchild",
        "--pid-file",
        pid_file.to_str().unwrap(),
    ])
    .await;
    let child_pid_file = PathBuf::from(format!("{}.child", pid_file.display()));
    eventually!(pid_file.exists() && child_pid_file.exists());
    let pid = pid_from(&pid_file);
    let grandchild = pid_from(&child_pid_file);
    assert_eq!(Some(pid), raw.child.id());
    assert!(process_exists(grandchild));

    signal(pid, "-TERM");
    assert!(raw.alive_after(Duration::from_millis(300)).await);
    raw.initialize().await; // still serving

    raw.child.kill().await.unwrap();
    signal(grandchild, "-KILL");
    eventually!(!process_exists(grandchild));
}

#[tokio::test]
async fn sigterm_stops_a_default_server() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut raw = RawChild::spawn(&["--pid-file", pid_file.to_str().unwrap()]).await;
    eventually!(pid_file.exists());
    signal(pid_from(&pid_file), "-TERM");
    assert!(!raw.wait().await.success());
}

#[tokio::test]
async fn http_mode_prints_its_url_and_takes_faults_over_http() {
    let mut child = command(&["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(STEP, stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let url = first
        .strip_prefix("listening on ")
        .expect("announces its url")
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"));
    let base = url.trim_end_matches("/mcp");
    let http = reqwest::Client::builder().timeout(STEP).build().unwrap();

    let rules = json!([{"when": {"method": "tools/call"},
                        "fault": {"kind": "status", "status": 503, "retry_after": {"seconds": 1}}}]);
    let set = http
        .post(format!("{base}/_control/faults"))
        .json(&rules)
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 204);
    for id in 1..=2 {
        let response = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "echo", "arguments": {"text": "x"}}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 503);
    }
    let counts: Value = http
        .get(format!("{base}/_control/counts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(counts["requests"]["tools/call"], 2);
    assert_eq!(counts["tool_calls"]["echo"], 2);

    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.clone());
    let client = tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .unwrap()
        .unwrap();
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    client.cancel().await.unwrap();

    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

#[tokio::test]
async fn sigusr1_lists_late_tool_and_notifies_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut raw = RawChild::spawn(&["--pid-file", pid_file.to_str().unwrap()]).await;
    raw.initialize().await;
    eventually!(pid_file.exists());
    let pid = pid_from(&pid_file);
    // A round trip, so the session is surely registered for notifications.
    raw.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .await;
    let listed: Value = serde_json::from_str(&raw.line().await.unwrap()).unwrap();
    assert_eq!(listed["id"], 9);

    signal(pid, "-USR1");
    let note: Value = serde_json::from_str(&raw.line().await.unwrap()).unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "late_tool", "arguments": {}}}))
        .await;
    let answer: Value = serde_json::from_str(&raw.line().await.unwrap()).unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "late");

    signal(pid, "-USR2");
    let note: Value = serde_json::from_str(&raw.line().await.unwrap()).unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
}

#[test]
fn test_server_binary_finds_the_built_binary() {
    let found = mcp_test_support::test_server_binary();
    assert_eq!(
        found.canonicalize().unwrap(),
        Path::new(BIN).canonicalize().unwrap()
    );
}

/// Over stdio the count file is the only window on a call's `_meta`: a
/// traced call's line carries its `traceparent`.
#[tokio::test]
async fn the_count_file_shows_the_traceparent_of_a_traced_call() {
    use rmcp::model::RequestParamsMeta as _;

    const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let dir = tempfile::tempdir().unwrap();
    let count_file = dir.path().join("count");
    let transport =
        TokioChildProcess::new(command(&["--count-file", count_file.to_str().unwrap()])).unwrap();
    let client = tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed");
    let arguments = json!({"text": "traced"}).as_object().unwrap().clone();
    let mut traced = CallToolRequestParams::new("echo").with_arguments(arguments.clone());
    traced.set_traceparent(TRACEPARENT);
    for params in [
        traced,
        CallToolRequestParams::new("echo").with_arguments(arguments),
    ] {
        tokio::time::timeout(STEP, client.call_tool(params))
            .await
            .unwrap()
            .unwrap();
    }
    eventually!(read_lines(&count_file).len() >= 4);
    let lines = read_lines(&count_file);
    let calls: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|line| line.starts_with("tools/call"))
        .collect();
    assert_eq!(
        calls,
        [
            format!("tools/call:echo traceparent={TRACEPARENT}").as_str(),
            "tools/call:echo"
        ]
    );
    client.cancel().await.unwrap();
}
