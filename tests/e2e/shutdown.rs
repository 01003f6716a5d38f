//! SIGTERM to `mcp-supervisor serve` with stdio upstreams: the process exits 0
//! within `shutdown_timeout` (plus a margin) and leaves no child behind — not
//! even a child that ignores SIGTERM and stdin close, nor the grandchildren
//! the upstreams started (checked in /proc).

use std::{path::Path, time::Duration};

use e2e::{HttpUpstream, SdkClient, Served, bin, stdio_connection};
use rmcp::{
    ServiceExt,
    model::CallToolRequestParams,
    service::{RoleClient, RunningService},
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);
/// Slack for a slow 2-core machine; the assertion is "bounded", not "fast".
const MARGIN: Duration = Duration::from_secs(20);

/// Alive: /proc/PID exists and is not a zombie (a zombie has exited; init
/// reaps it once its parent is gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// SIGKILLs whatever recorded process is still alive when the test ends, so a
/// failing run leaves nothing behind either.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in self.0.iter().copied().filter(|pid| alive(*pid)) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

async fn call(client: &Client, name: &str, arguments: Value) -> String {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = arguments.as_object().cloned();
    let result = client.call_tool(params).await.expect("a tool result");
    result.content[0]
        .as_text()
        .expect("text content")
        .text
        .clone()
}

#[tokio::test]
async fn sigterm_exits_0_within_the_bound_and_leaves_no_stdio_child_or_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let server = bin("mcp-test-server");
    let pid_file = |name: &str| dir.path().join(format!("{name}.pid"));
    // stubborn: ignores SIGTERM and stdin close, and hangs its `sleep` tool;
    // deaf: ignores stdin close only; plain: exits when stdin closes.
    let upstreams: [(&str, &[&str]); 3] = [
        (
            "stubborn",
            &[
                "--ignore-sigterm",
                "--ignore-stdin-close",
                "--hang-tool",
                "sleep",
            ],
        ),
        ("deaf", &["--ignore-stdin-close"]),
        ("plain", &[]),
    ];
    let mut config = format!(
        "[supervisor]\nshutdown_timeout = \"{}s\"\n",
        SHUTDOWN_TIMEOUT.as_secs()
    );
    for (name, flags) in upstreams {
        let pid_file = pid_file(name);
        let mut args = vec![
            "--spawn-grandchild",
            "--pid-file",
            pid_file.to_str().unwrap(),
        ];
        args.extend(flags);
        config += &stdio_connection(name, &server, &args, "");
    }
    let mut served = Served::start(&config);
    let client: Client = ()
        .serve(StreamableHttpClientTransport::from_uri(
            served.gateway_url.as_str(),
        ))
        .await
        .expect("the gateway answers initialize");

    // A call on each starts every child.
    let mut pids = Vec::new();
    for (name, _) in upstreams {
        let echoed = call(&client, &format!("{name}__echo"), json!({"text": name})).await;
        assert_eq!(echoed, name);
        // `--pid-file P` also writes the grandchild's pid to `P.child`.
        let child_file = dir.path().join(format!("{name}.pid.child"));
        let (pid, grandchild) = (read_pid(&pid_file(name)), read_pid(&child_file));
        let (Some(pid), Some(grandchild)) = (pid, grandchild) else {
            panic!("{name}: pid files missing after a call ({pid:?}, {grandchild:?})");
        };
        pids.extend([pid, grandchild]);
    }
    let _cleanup = KillOnDrop(pids.clone());
    assert!(pids.iter().all(|pid| alive(*pid)), "{pids:?}");

    // A call that never returns is in flight when the signal comes.
    let hung = tokio::spawn(async move {
        let mut params = CallToolRequestParams::new("stubborn__sleep");
        params.arguments = json!({"ms": 1}).as_object().cloned();
        let _ = client.call_tool(params).await;
    });
    served
        .wait_for_in_flight("stubborn", 1, Duration::from_secs(30))
        .await;

    let started = std::time::Instant::now();
    served.signal("TERM");
    let mut exit = None;
    while started.elapsed() < SHUTDOWN_TIMEOUT + MARGIN {
        if let Ok(Some(status)) = served.child.try_wait() {
            exit = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Some(exit) = exit else {
        panic!(
            "still running {:?} after SIGTERM (shutdown_timeout {SHUTDOWN_TIMEOUT:?}):\n{}",
            started.elapsed(),
            served.stderr()
        );
    };
    assert_eq!(exit.code(), Some(0), "{exit:?}\n{}", served.stderr());
    hung.abort();

    // Every child and grandchild is gone (generous bound: exited processes
    // are reaped by init, which may take a moment on a loaded machine).
    let gone_by = std::time::Instant::now() + Duration::from_secs(30);
    while pids.iter().any(|pid| alive(*pid)) && std::time::Instant::now() < gone_by {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Vec<u32> = pids.iter().copied().filter(|pid| alive(*pid)).collect();
    assert!(
        left.is_empty(),
        "still alive after the supervisor exited: {left:?} of {pids:?}\n{}",
        served.stderr()
    );
    assert!(!served.stderr().contains("panicked"), "{}", served.stderr());
}

/// The signal handlers are in place by the time the process says where it
/// listens: SIGHUP right then is a reload (not death by the default action),
/// and SIGTERM right then a graceful exit 0.
#[test]
fn signals_right_after_the_listening_lines_are_handled() {
    let config = stdio_connection("demo", &bin("mcp-demo-server"), &[], "");
    let mut served = Served::start(&config);
    served.signal("HUP");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        matches!(served.child.try_wait(), Ok(None)),
        "SIGHUP right after start killed the process: {:?}\n{}",
        served.child.try_wait(),
        served.stderr()
    );
    assert_eq!(
        served.terminate(SHUTDOWN_TIMEOUT + MARGIN),
        Some(0),
        "{}",
        served.stderr()
    );

    let mut served = Served::start(&config);
    assert_eq!(
        served.terminate(Duration::from_secs(10) + MARGIN),
        Some(0),
        "SIGTERM right after start: {}",
        served.stderr()
    );
}

/// SIGTERM with calls in flight: the gateway drains (a new session is
/// refused with 503 and `Retry-After`, `/readyz` answers 503), a call that
/// ends within `shutdown_timeout` gets its real answer, and one that would
/// run longer gets the supervisor's value, not a stream cut short; then the
/// process exits 0.
#[tokio::test]
async fn sigterm_lets_calls_in_flight_finish_and_answers_the_rest() {
    let upstream = HttpUpstream::start();
    let mut served = Served::start(&format!(
        "[supervisor]\nshutdown_timeout = \"{}s\"\n\
         [connections.up]\ntransport = \"http\"\nurl = \"{}\"\n",
        SHUTDOWN_TIMEOUT.as_secs(),
        upstream.url
    ));
    let client: Client = ()
        .serve(StreamableHttpClientTransport::from_uri(
            served.gateway_url.as_str(),
        ))
        .await
        .expect("the gateway answers initialize");
    let peer = client.peer().clone();
    let sleep = |ms: u64| {
        let peer = peer.clone();
        tokio::spawn(async move {
            let mut params = CallToolRequestParams::new("up__sleep");
            params.arguments = json!({ "ms": ms }).as_object().cloned();
            peer.call_tool(params).await
        })
    };
    let quick = sleep(1_500);
    let endless = sleep(600_000);
    served
        .wait_for_in_flight("up", 2, Duration::from_secs(30))
        .await;

    served.signal("TERM");
    assert_draining(&served).await;

    let quick = quick.await.unwrap().expect("the quick call is answered");
    assert_eq!(
        quick.content[0].as_text().map(|t| t.text.as_str()),
        Some("slept 1500"),
        "{quick:?}"
    );
    let endless = endless
        .await
        .unwrap()
        .expect("the endless call is answered with a value");
    assert_eq!(endless.is_error, Some(true), "{endless:?}");
    let text = &endless.content[0].as_text().unwrap().text;
    assert!(text.contains("shutting down"), "{text}");

    let code = served.terminate(SHUTDOWN_TIMEOUT * 2 + MARGIN);
    assert_eq!(code, Some(0), "{}", served.stderr());
}

/// After SIGTERM, while calls are in flight: `/readyz` answers 503 and a new
/// session is refused with 503, `Retry-After` and a JSON-RPC error (the
/// drain turns new clients away at once, on a connection of their own).
async fn assert_draining(served: &Served) {
    let http = reqwest::Client::new();
    let ready = || http.get(format!("{}/readyz", served.admin_url)).send();
    // The signal is handled at once, but asynchronously.
    let mut status = ready().await.unwrap().status();
    for _ in 0..100 {
        if status == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        status = ready().await.unwrap().status();
    }
    assert_eq!(status, 503, "/readyz while draining");
    let refused = http
        .post(&served.gateway_url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            r#"{"jsonrpc":"2.0","id":"late","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["id"], "late", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down"),
        "{error}"
    );
}

/// The live processes whose parent is `pid` (from /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|candidate| {
            std::fs::read_to_string(format!("/proc/{candidate}/stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .filter(|child| alive(*child))
        .collect()
}

/// A rolling restart as the Python SDK 2.x sees it: SIGTERM arrives while
/// its `call_tool` waits on a 1.5 s tool. The SDK, which has not listed the
/// tools, lists them right after the answer (to check the result's output
/// schema), on a new connection: the drain serves that too, so `call_tool`
/// returns the result without raising, in either protocol generation. The
/// process then exits within `shutdown_timeout`, leaving no child.
#[tokio::test]
async fn sigterm_mid_call_serves_the_sdk_clients_follow_up_then_exits() {
    const PATIENCE: Duration = Duration::from_secs(10);
    for sdk in [SdkClient::V2Auto, SdkClient::V2Legacy] {
        let mut served = Served::start(&format!(
            "[supervisor]\nshutdown_timeout = \"{}s\"\n{}",
            PATIENCE.as_secs(),
            stdio_connection("up", &bin("mcp-test-server"), &[], "")
        ));
        let dir = tempfile::tempdir().unwrap();
        let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
        let mut client = sdk
            .command(
                &served.gateway_url,
                &["--no-list"],
                &[("up__sleep", json!({ "ms": 1_500 }))],
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("the venv's python runs");
        served
            .wait_for_in_flight("up", 1, Duration::from_secs(30))
            .await;
        // The upstream's child (and the guardian) are up by now.
        let children = children_of(served.child.id());
        assert!(
            !children.is_empty(),
            "{sdk:?}: the stdio upstream has no process"
        );
        let _kill = KillOnDrop(children.clone());
        let signalled = std::time::Instant::now();
        served.signal("TERM");
        assert_draining(&served).await;

        let status = tokio::task::spawn_blocking(move || {
            e2e::wait_bounded(&mut client, Duration::from_secs(120))
        })
        .await
        .unwrap();
        let (out, err) = (
            std::fs::read_to_string(&stdout).unwrap_or_default(),
            std::fs::read_to_string(&stderr).unwrap_or_default(),
        );
        assert_eq!(
            status.and_then(|status| status.code()),
            Some(0),
            "{sdk:?}: the client failed:\n{err}\n{out}\nsupervisor:\n{}",
            served.stderr()
        );
        let output: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(output["protocol_version"], sdk.protocol());
        assert_eq!(output["calls"][0]["text"][0], "slept 1500", "{output}");

        let code = served.terminate(PATIENCE + MARGIN);
        assert_eq!(code, Some(0), "{sdk:?}: {}", served.stderr());
        assert!(
            signalled.elapsed() < PATIENCE,
            "{sdk:?}: exited {:?} after SIGTERM, beyond shutdown_timeout",
            signalled.elapsed()
        );
        let left: Vec<u32> = children.into_iter().filter(|pid| alive(*pid)).collect();
        assert!(left.is_empty(), "{sdk:?}: children left behind: {left:?}");
    }
}
