//! 2025-era sessions across a fleet (docs/FLEET.md, "Sessions across
//! nodes"): three `serve` processes behind HAProxy with round robin and no
//! affinity (`e2e::fleet::Fleet`), so a session's requests land on every
//! node and all but the holder's must be forwarded to it.
//!
//! - the Python SDK 2.x in legacy mode lists, calls a tool with progress
//!   and answers an elicitation (its answer is a POST of its own, landing
//!   on another node than the call's stream), and never sees "session not
//!   found"; HAProxy's statistics show every node answered;
//! - the Inspector's CLI (legacy era; one session per invocation) lists and
//!   calls;
//! - a forged id, an id another fleet's key signed for a node of the same
//!   name, a tampered id and an ended session's id are 404 on every node,
//!   as an unknown session is, and no node forwards them (its count of
//!   forwarded requests says so); so is a session whose node has stopped.

use std::time::Duration;

use e2e::{
    SdkClient,
    fleet::{Fleet, delete, initialize, ping, post},
    inspector, run_bounded,
};
use serde_json::{Value, json};

/// Bounds a client run; each request is bounded by the client itself.
const RUN_BOUND: Duration = Duration::from_secs(300);

/// Every node's name, as HAProxy's statistics list them.
const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

fn step<'a>(output: &'a Value, id: &str) -> &'a Value {
    output["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["id"] == id)
        .unwrap_or_else(|| panic!("no step {id} in {output:#}"))
}

/// The progress a `test_tool_with_progress` call reported to the client.
fn progress_of(output: &Value, id: &str) -> Vec<(f64, f64, String)> {
    let step = step(output, id);
    assert_eq!(step["is_error"], false, "{id}: {step}");
    step["progress"]
        .as_array()
        .unwrap_or_else(|| panic!("{id}: no progress recorded: {step}"))
        .iter()
        .map(|update| {
            (
                update[0].as_f64().unwrap(),
                update[1].as_f64().unwrap(),
                update[2].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn python_sdk_2_legacy_lists_calls_with_progress_and_answers_an_elicitation_across_nodes() {
    let fleet = Fleet::start().await;
    let plan = json!([
        {"id": "progress", "op": "call_tool", "name": "test_tool_with_progress", "progress": true},
        {
            "id": "elicitation",
            "op": "call_tool",
            "name": "test_elicitation",
            "arguments": {"message": "Who are you?"}
        },
        {"id": "tools", "op": "list_tools"},
        {"id": "progress-again", "op": "call_tool", "name": "test_tool_with_progress", "progress": true},
        {"id": "simple", "op": "call_tool", "name": "test_simple_text"},
    ]);
    let run = run_bounded(
        &mut SdkClient::V2Legacy.command(&fleet.url(), &["--plan", &plan.to_string()], &[]),
        RUN_BOUND,
    );
    let logs = || {
        fleet
            .nodes
            .iter()
            .map(|node| node.stderr())
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    assert_eq!(run.code, Some(0), "{run:?}\nnodes:\n{}", logs());
    // How the SDK reports a 404 for its session: "Session terminated".
    let said = run.all_output();
    for lost in [
        "Session not found",
        "Session terminated",
        "Session termination failed",
    ] {
        assert!(!said.contains(lost), "{lost:?}: {run:?}");
    }
    let output: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(output["protocol_version"], "2025-11-25");
    let expected = [
        (0.0, 100.0, "Completed step 0 of 100".to_owned()),
        (50.0, 100.0, "Completed step 50 of 100".to_owned()),
        (100.0, 100.0, "Completed step 100 of 100".to_owned()),
    ];
    assert_eq!(progress_of(&output, "progress"), expected);
    assert_eq!(progress_of(&output, "progress-again"), expected);

    let elicitation = &output["elicitation_requests"];
    assert_eq!(
        elicitation.as_array().map(Vec::len),
        Some(1),
        "{elicitation}"
    );
    assert_eq!(elicitation[0]["message"], "Who are you?");
    let elicited = step(&output, "elicitation");
    assert_eq!(elicited["is_error"], false, "{elicited}");
    let text = elicited["text"][0].as_str().unwrap();
    assert!(
        text.starts_with("User response: action=accept, content=")
            && text.contains(r#""username":"python-client""#),
        "{text}"
    );

    let tools: Vec<&str> = step(&output, "tools")["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    for name in [
        "test_tool_with_progress",
        "test_elicitation",
        "test_simple_text",
    ] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }
    assert_eq!(
        step(&output, "simple")["text"][0],
        "This is a simple text response for testing."
    );

    // One session, and every node answered some of its requests: the
    // balancer spread them, so most were forwarded to the holder.
    let answered = fleet.proxy.answered_by_node().await;
    let names: Vec<&str> = answered.iter().map(|(node, _)| node.as_str()).collect();
    assert_eq!(names, NODES);
    assert!(
        answered.iter().all(|(_, count)| *count > 0),
        "not every node got requests: {answered:?}"
    );
}

#[tokio::test]
async fn inspector_cli_lists_and_calls_across_nodes() {
    let fleet = Fleet::start().await;
    let home = tempfile::tempdir().unwrap();
    let url = fleet.url();
    let cli = |method: &str, extra: &[&str]| -> Value {
        let mut args = vec![
            "--cli",
            "--protocol-era",
            "legacy",
            "--format",
            "json",
            "--method",
            method,
            "--transport",
            "http",
            "--server-url",
            &url,
        ];
        args.extend_from_slice(extra);
        let run = inspector(home.path(), &args);
        assert_eq!(run.code, Some(0), "{method}: {run:?}");
        assert!(
            !run.all_output()
                .to_lowercase()
                .contains("session not found"),
            "{method}: {run:?}"
        );
        let output: Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|error| panic!("{method}: not JSON ({error}): {run:?}"));
        output["result"].clone()
    };
    // Each invocation is a session of its own (initialize, initialized, the
    // request, and its end): several, so each node holds some and forwards
    // to the others.
    for _ in 0..3 {
        let tools = cli("tools/list", &[]);
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {tools}"))
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect();
        for name in [
            "test_simple_text",
            "test_tool_with_progress",
            "test_elicitation",
        ] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        let called = cli("tools/call", &["--tool-name", "test_simple_text"]);
        assert_eq!(called["isError"], false, "{called}");
        assert_eq!(
            called["content"][0]["text"],
            "This is a simple text response for testing."
        );
    }
}

#[tokio::test]
async fn forged_foreign_tampered_and_ended_session_ids_are_unknown_sessions_everywhere() {
    let fleet = Fleet::start().await;
    let url = fleet.url();
    let session = initialize(&url).await;
    let holder = session.split('.').next().unwrap().to_owned();
    assert!(NODES.contains(&holder.as_str()), "{session}");
    // Three in a row reach each node once (round robin): all answer it.
    for _ in 0..3 {
        assert_eq!(post(&url, Some(&session), &ping()).await.0, 200);
    }

    let other = NODES.iter().find(|node| **node != holder).unwrap();
    let (_, rest) = session.split_once('.').unwrap();
    let mut tampered = session.clone().into_bytes();
    let at = holder.len() + 1;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let stranger = fleet.stranger(other);
    let foreign = initialize(&stranger.gateway_url).await;
    assert!(foreign.starts_with(&format!("{other}.")), "{foreign}");
    let unknown = [
        // Another fleet's key, for a name that is a member here.
        foreign,
        // A made-up MAC.
        format!("{other}.{}.{}", "A".repeat(22), "B".repeat(22)),
        // The holder's id, made to name another node.
        format!("{other}.{rest}"),
        String::from_utf8(tampered).unwrap(),
    ];
    // Each node says how many requests it forwarded: none of these may be
    // (a node that took a forged id for another's would forward it, and
    // the other node's 404 would hide it).
    let forwarded_before = forwarded(&fleet).await;
    for id in &unknown {
        for node in &fleet.nodes {
            let (status, body) = post(&node.gateway_url, Some(id), &ping()).await;
            assert_eq!(
                (status, body.as_str()),
                (404, "Not Found: Session not found"),
                "{id} at {}",
                node.gateway_url
            );
        }
    }
    assert_eq!(
        forwarded(&fleet).await,
        forwarded_before,
        "no node forwarded a forged, foreign or tampered id"
    );
    // The real one still works on every node, then ends, and is unknown
    // everywhere after that (the holder's answer, forwarded back).
    for node in &fleet.nodes {
        assert_eq!(
            post(&node.gateway_url, Some(&session), &ping()).await.0,
            200
        );
    }
    assert_eq!(delete(&url, &session).await, 200);
    for node in &fleet.nodes {
        let (status, body) = post(&node.gateway_url, Some(&session), &ping()).await;
        assert_eq!(
            (status, body.as_str()),
            (404, "Not Found: Session not found")
        );
        assert_eq!(delete(&node.gateway_url, &session).await, 404);
    }
}

/// Requests each node forwarded to another so far
/// (`mcp_supervisor_gateway_forwarded_total{reason="to_holder"}`).
async fn forwarded(fleet: &Fleet) -> Vec<u64> {
    let mut counts = Vec::new();
    for node in &fleet.nodes {
        let metrics = reqwest::get(format!("http://{}/metrics", node.admin_address()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let line = metrics
            .lines()
            .find(|line| {
                line.starts_with(
                    "mcp_supervisor_gateway_forwarded_total{what=\"request\",reason=\"to_holder\"}",
                )
            })
            .unwrap_or_else(|| panic!("no forwarded count in:\n{metrics}"));
        counts.push(line.rsplit(' ').next().unwrap().parse().unwrap());
    }
    counts
}

#[tokio::test]
async fn a_session_whose_node_has_stopped_is_an_unknown_session() {
    let mut fleet = Fleet::start().await;
    let session = initialize(&fleet.nodes[0].gateway_url).await;
    assert!(session.starts_with("node-1."), "{session}");
    assert_eq!(
        post(&fleet.nodes[1].gateway_url, Some(&session), &ping())
            .await
            .0,
        200
    );
    assert_eq!(
        fleet.nodes[0].terminate(Duration::from_secs(30)),
        Some(0),
        "node-1 stops"
    );
    // Still listed by the others for a few seconds (its address refuses
    // connections), then no longer: 404 either way, never a hang or a 5xx.
    for node in &fleet.nodes[1..] {
        let (status, body) = post(&node.gateway_url, Some(&session), &ping()).await;
        assert_eq!(
            (status, body.as_str()),
            (404, "Not Found: Session not found"),
            "at {}:\n{}",
            node.gateway_url,
            node.stderr()
        );
    }
}
