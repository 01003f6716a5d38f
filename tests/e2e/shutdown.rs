//! SIGTERM to `mcp-supervisor serve` with stdio upstreams: the process exits 0
//! within `shutdown_timeout` (plus a margin) and leaves no child behind — not
//! even a child that ignores SIGTERM and stdin close, nor the grandchildren
//! the upstreams started (checked in /proc).

use std::{path::Path, time::Duration};

use e2e::{HttpUpstream, Served, bin, stdio_connection};
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

async fn in_flight(admin_url: &str, connection: &str) -> u64 {
    let status: Value = reqwest::get(format!("{admin_url}/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    status["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == connection)
        .and_then(|c| c["in_flight"].as_u64())
        .unwrap_or(0)
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
    let mut waited = 0;
    while in_flight(&served.admin_url, "stubborn").await == 0 {
        waited += 1;
        assert!(waited < 300, "the hung call never showed as in flight");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

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

/// SIGTERM with calls in flight: no new connection is accepted, a call that
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
    let mut waited = 0;
    while in_flight(&served.admin_url, "up").await < 2 {
        waited += 1;
        assert!(waited < 300, "the calls never showed as in flight");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let started = std::time::Instant::now();
    served.signal("TERM");
    // The listener is closed first: before the calls in flight are answered.
    let mut refused = false;
    while !refused && !endless.is_finished() && started.elapsed() < Duration::from_secs(60) {
        let gateway = served.gateway_url.trim_start_matches("http://");
        let address = gateway.split('/').next().unwrap();
        refused = tokio::net::TcpStream::connect(address).await.is_err();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "still accepting connections after SIGTERM");

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
