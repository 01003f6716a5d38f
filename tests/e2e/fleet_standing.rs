//! Three `serve` nodes with `[fleet]` on a real `redis-server` (and HAProxy
//! in front, `e2e::fleet`), one `mcp-test-server` upstream whose faults and
//! counts the test drives over HTTP: what one node learns, every node acts
//! on. Each node is called directly, on a session of its own, so the
//! upstream's counts say which node sent what.

use std::time::{Duration, Instant};

use e2e::{
    HttpUpstream,
    fleet::{Fleet, initialize, post},
    toml_string,
};
use mcp_test_support::wait_until_async;
use serde_json::{Value, json};

/// How long a test waits for what it waits for, across processes (three
/// nodes, Redis, the upstream) on a loaded machine: the promptness is the
/// library tests' (crates/mcp-supervisor/tests/fleet.rs), and printed here.
const WITHIN: Duration = Duration::from_secs(20);

/// The upstream as connection `t`, with fast parks (the quarantine is the
/// nodes' `[supervisor]`, which this table cannot set; the defaults apply).
async fn fleet() -> (Fleet, String) {
    let upstream = HttpUpstream::start();
    let base = upstream.url.trim_end_matches("/mcp").to_owned();
    let connection = format!(
        "[connections.t]\ntransport = \"http\"\nurl = {}\n",
        toml_string(&upstream.url)
    );
    (Fleet::start_with(connection, Some(upstream)).await, base)
}

async fn set_faults(base: &str, faults: Value) {
    let status = reqwest::Client::new()
        .post(format!("{base}/_control/faults"))
        .json(&faults)
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "{status}");
}

async fn counts(base: &str) -> Value {
    reqwest::get(format!("{base}/_control/counts"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn echo_calls(base: &str) -> u64 {
    counts(base).await["tool_calls"]["echo"]
        .as_u64()
        .unwrap_or(0)
}

/// A `tools/call` of `echo` in `session` at `url`: the answer's text (the
/// tool's, or the supervisor's message).
async fn echo(url: &str, session: &str) -> String {
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let (status, body) = post(url, Some(session), &call).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Each node's state of connection `t` in its `/status`.
async fn states(fleet: &Fleet) -> Vec<String> {
    let mut states = Vec::new();
    for node in &fleet.nodes {
        let status = node.status().await;
        states.push(
            status["connections"][0]["state"]
                .as_str()
                .unwrap_or("?")
                .to_owned(),
        );
    }
    states
}

async fn until(what: &str, within: Duration, check: impl AsyncFn() -> bool) {
    assert!(
        wait_until_async(within, || check()).await,
        "{what}: not within {within:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_on_one_node_holds_the_whole_fleet() {
    let (fleet, base) = fleet().await;
    let mut sessions = Vec::new();
    for node in &fleet.nodes {
        let session = initialize(&node.gateway_url).await;
        assert!(echo(&node.gateway_url, &session).await.contains("hi"));
        sessions.push(session);
    }
    assert_eq!(echo_calls(&base).await, 3);
    set_faults(
        &base,
        json!([{"when": {"tool": "echo"}, "fault": {"kind": "status", "status": 429,
            "retry_after": {"seconds": 10}}, "times": 1}]),
    )
    .await;
    let started = Instant::now();
    let call = |i: usize| {
        let (url, session) = (fleet.nodes[i].gateway_url.clone(), sessions[i].clone());
        tokio::spawn(async move {
            let answer = echo(&url, &session).await;
            (answer, started.elapsed())
        })
    };
    // Node 1 first: its call meets the 429, and the others learn the window.
    let mut calls = vec![call(0)];
    until("node 1's call met the 429", WITHIN, async || {
        echo_calls(&base).await == 4
    })
    .await;
    until("the other nodes hold the window", WITHIN, async || {
        let mut held = true;
        for node in &fleet.nodes[1..] {
            held &= node.status().await["connections"][0]["held_until"].is_string();
        }
        held
    })
    .await;
    calls.extend([call(1), call(2)]);
    // Until the window ends (10 s after the 429, so at least 10 s after
    // `started`), nothing more reaches the upstream from any node: the fault
    // answered 429 once, so a call sent meanwhile would be answered at once.
    for call in calls {
        let (answer, ended) = call.await.unwrap();
        assert!(answer.contains("hi"), "{answer}");
        assert!(
            ended >= Duration::from_millis(9_500),
            "answered after {ended:?}"
        );
    }
    assert_eq!(
        echo_calls(&base).await,
        7,
        "each node's call, once, after the window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_on_one_node_retires_every_node_and_a_reset_on_another_revives_them() {
    let (fleet, base) = fleet().await;
    let sessions: Vec<String> = {
        let mut sessions = Vec::new();
        for node in &fleet.nodes {
            sessions.push(initialize(&node.gateway_url).await);
        }
        sessions
    };
    set_faults(
        &base,
        json!([{"when": {"tool": "echo"}, "fault": {"kind": "status", "status": 401}}]),
    )
    .await;
    let first = echo(&fleet.nodes[0].gateway_url, &sessions[0]).await;
    assert!(first.contains("will not be retried"), "{first}");
    assert_eq!(echo_calls(&base).await, 1);
    until("every node retired it", WITHIN, async || {
        states(&fleet).await.iter().all(|state| state == "retired")
    })
    .await;
    for (node, session) in fleet.nodes.iter().zip(&sessions).skip(1) {
        let answer = echo(&node.gateway_url, session).await;
        assert!(
            answer.contains(
                "MCP connection 't' is unavailable (kind=auth, status=401); it will not be retried."
            ),
            "{answer}"
        );
    }
    assert_eq!(echo_calls(&base).await, 1, "no node sent anything more");

    // Fixed upstream; a person resets it on node 3: every node is usable.
    set_faults(&base, json!([])).await;
    let reset = reqwest::Client::new()
        .post(format!("{}/connections/t/reset", fleet.nodes[2].admin_url))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert!(reset.status().is_success(), "{}", reset.status());
    until("every node revived", WITHIN, async || {
        states(&fleet).await.iter().all(|state| state != "retired")
    })
    .await;
    for (node, session) in fleet.nodes.iter().zip(&sessions) {
        assert!(echo(&node.gateway_url, session).await.contains("hi"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_run_then_restarted() {
    let (mut fleet, base) = fleet().await;
    let mut sessions = Vec::new();
    for node in &fleet.nodes {
        sessions.push(initialize(&node.gateway_url).await);
    }
    fleet.redis.stop();
    until("every node saw Redis go", WITHIN, async || {
        let mut down = true;
        for node in &fleet.nodes {
            down &= node.status().await["fleet"]["store"]["state"] == "down";
        }
        down
    })
    .await;
    for _ in 0..3 {
        for (node, session) in fleet.nodes.iter().zip(&sessions) {
            let answer = echo(&node.gateway_url, session).await;
            assert!(
                answer.contains("hi"),
                "a healthy upstream works without Redis: {answer}"
            );
        }
    }
    assert_eq!(echo_calls(&base).await, 9);
    fleet.redis.restart().unwrap();
    let back = Instant::now();
    until("every node is back in the fleet", WITHIN, async || {
        let mut up = true;
        for node in &fleet.nodes {
            let status = node.status().await;
            up &= status["fleet"]["store"]["state"] == "up";
        }
        up
    })
    .await;
    eprintln!("converged {:?} after Redis returned", back.elapsed());
}
