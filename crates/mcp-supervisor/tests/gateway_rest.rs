//! Resting sessions (docs/DECISIONS.md #178): a 2025 session quiet for
//! `session_rest_after` gives up rmcp's session and keeps its id, its place
//! under the caps and its client's `initialize`; its next request restores
//! it, unseen by the client. Only a session that can lose nothing rests; a
//! resting one still ends at its idle timeout or its client's `DELETE`.
//! Real loopback HTTP, raw JSON-RPC, a real test server upstream.

mod support;

use std::time::Duration;

use mcp_supervisor::tallies::Protection;
use mcp_test_support::{TestServer, TestServerOptions, eventually};
use serde_json::{Value, json};
use support::{raw::*, *};

/// A test server, and a gateway (`settings` first) whose connection `a`
/// points at it.
async fn gateway(settings: &str) -> (TestServer, ServedGateway) {
    let upstream = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let toml = format!("{settings}{}", http_connection("a", &upstream.url(), ""));
    (upstream, ServedGateway::start(config(&toml)).await)
}

fn add(id: u64, a: u64, b: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "a__add", "arguments": {"a": a, "b": b}}})
}

/// The text of the answer to `message` in `session`, or its HTTP status
/// when it is not a 200.
async fn sum(gateway: &ServedGateway, session: &str, message: &Value) -> Result<String, u16> {
    let answer = post(&http(), &gateway.url, session, message)
        .send()
        .await
        .unwrap();
    if answer.status() != 200 {
        return Err(answer.status().as_u16());
    }
    let last = messages(&answer.text().await.unwrap()).pop().unwrap();
    Ok(last["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{last}"))
        .to_owned())
}

#[test]
fn a_quiet_session_rests_and_its_next_request_restores_it() {
    run(|| async {
        let (_upstream, gateway) = gateway("[gateway]\nsession_rest_after = \"200ms\"\n").await;
        let tallies = gateway.tallies();
        let id = session(&http(), &gateway.url, json!({})).await;
        assert_eq!(sum(&gateway, &id, &add(1, 1, 2)).await, Ok("3".into()));
        assert_eq!(gateway.state.direct_calls(), 1);
        eventually!(tallies.get(Protection::SessionRested) == 1);

        // Restored under the same id, and on the direct path again.
        assert_eq!(sum(&gateway, &id, &add(2, 2, 3)).await, Ok("5".into()));
        assert_eq!(tallies.get(Protection::SessionRestored), 1);
        assert_eq!(sum(&gateway, &id, &add(3, 3, 4)).await, Ok("7".into()));
        assert_eq!(
            gateway.state.direct_calls(),
            2,
            "the first after it went through rmcp"
        );
        let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
        let listed = exchange(&http(), &gateway.url, &id, &list)
            .await
            .pop()
            .unwrap();
        assert!(listed["result"]["tools"].is_array(), "{listed}");

        // Resting again, a DELETE ends it for good.
        eventually!(tallies.get(Protection::SessionRested) == 2);
        let deleted = http()
            .delete(&gateway.url)
            .header("mcp-session-id", &id)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status(), 200);
        assert_eq!(sum(&gateway, &id, &add(5, 1, 1)).await, Err(404));
        assert_eq!(tallies.get(Protection::SessionRestored), 1);
    });
}

#[test]
fn a_session_that_would_lose_something_stays_awake() {
    run(|| async {
        let (_upstream, gateway) = gateway("[gateway]\nsession_rest_after = \"100ms\"\n").await;
        let tallies = gateway.tallies();
        // A client the gateway may ask things of (sampling), and one that
        // set a log level.
        let asks = session(&http(), &gateway.url, json!({"sampling": {}})).await;
        let logs = session(&http(), &gateway.url, json!({})).await;
        let level = json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel",
                           "params": {"level": "debug"}});
        let set = exchange(&http(), &gateway.url, &logs, &level)
            .await
            .pop()
            .unwrap();
        assert!(set.get("result").is_some(), "{set}");
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(tallies.get(Protection::SessionRested), 0);
        assert_eq!(sum(&gateway, &asks, &add(2, 1, 1)).await, Ok("2".into()));
        assert_eq!(sum(&gateway, &logs, &add(3, 1, 2)).await, Ok("3".into()));
        assert_eq!(tallies.get(Protection::SessionRestored), 0);
    });
}

#[test]
fn a_resting_session_still_ends_at_its_idle_timeout() {
    run(|| async {
        let settings = "[gateway]\nsession_rest_after = \"100ms\"\nsession_idle_timeout = \"1s\"\n";
        let (_upstream, gateway) = gateway(settings).await;
        let id = session(&http(), &gateway.url, json!({})).await;
        eventually!(gateway.tallies().get(Protection::SessionRested) == 1);
        tokio::time::sleep(Duration::from_millis(1_600)).await;
        assert_eq!(sum(&gateway, &id, &add(1, 1, 1)).await, Err(404));
    });
}

#[test]
fn resting_sessions_count_under_the_caps() {
    run(|| async {
        let settings = "[gateway]\nsession_rest_after = \"100ms\"\nmax_sessions = 2\n";
        let (_upstream, gateway) = gateway(settings).await;
        let tallies = gateway.tallies();
        let first = session(&http(), &gateway.url, json!({})).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = session(&http(), &gateway.url, json!({})).await;
        eventually!(tallies.get(Protection::SessionRested) == 2);

        // A third ends the least recently used, resting or not (the one
        // client here is at its quota, which is never above the cap).
        let third = session(&http(), &gateway.url, json!({})).await;
        assert_eq!(tallies.get(Protection::SessionEvictedAtClientQuota), 1);
        assert_eq!(sum(&gateway, &first, &add(1, 1, 1)).await, Err(404));
        assert_eq!(sum(&gateway, &second, &add(2, 1, 2)).await, Ok("3".into()));
        assert_eq!(sum(&gateway, &third, &add(3, 1, 3)).await, Ok("4".into()));
    });
}

/// A session opened with `key`, from a gateway that knows two keys.
async fn keyed_session(gateway: &ServedGateway, key: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let opened = http()
        .post(&gateway.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {key}"))
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    let id = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(keyed(gateway, key, &id, &initialized).await.0, 202);
    id
}

/// `message` in session `id` with `key`: the status, and the body.
async fn keyed(gateway: &ServedGateway, key: &str, id: &str, message: &Value) -> (u16, String) {
    let answer = post(&http(), &gateway.url, id, message)
        .header("authorization", format!("Bearer {key}"))
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// A resting session serves only the caller who opened it, as an awake
/// one does: another caller's request is answered 404 and restores
/// nothing; the opener's restores it, with the opener's rights.
#[test]
fn a_resting_session_is_restored_only_for_its_opener() {
    const OWNER: &str = "owner-key-CANARY-41aa";
    const OTHER: &str = "other-key-CANARY-93bc";
    run(|| async {
        let upstream = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let toml = format!(
            "[gateway]\nsession_rest_after = \"100ms\"\n\
             [gateway.keys.owner]\nsha256 = \"{}\"\ngroups = [\"adders\"]\n\
             [gateway.keys.other]\nsha256 = \"{}\"\ngroups = [\"others\"]\n\
             [[access]]\nwho = [\"group:adders\"]\nallow = [\"a__add\"]\n\
             [[access]]\nwho = [\"group:others\"]\nallow = [\"a__echo\"]\n{}",
            key_digest(OWNER),
            key_digest(OTHER),
            http_connection("a", &upstream.url(), "")
        );
        let gateway = ServedGateway::start(config(&toml)).await;
        let tallies = gateway.tallies();
        let id = keyed_session(&gateway, OWNER).await;
        eventually!(tallies.get(Protection::SessionRested) == 1);

        let (status, _) = keyed(&gateway, OTHER, &id, &add(1, 1, 1)).await;
        assert_eq!(status, 404, "another caller's request finds no session");
        assert_eq!(tallies.get(Protection::SessionRestored), 0);

        let (status, body) = keyed(&gateway, OWNER, &id, &add(2, 2, 2)).await;
        assert_eq!(status, 200, "{body}");
        let answer = messages(&body).pop().unwrap();
        assert_eq!(answer["result"]["content"][0]["text"], "4", "{answer}");
        assert_eq!(tallies.get(Protection::SessionRestored), 1);
        let echo = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "a__echo", "arguments": {"text": "x"}}});
        let (_, body) = keyed(&gateway, OWNER, &id, &echo).await;
        let denied = messages(&body).pop().unwrap();
        assert!(
            denied.get("error").is_some() || denied["result"]["isError"] == true,
            "the owner's rights, not another's: {denied}"
        );
    });
}

/// Requests that come together to a resting session (an agent's parallel
/// calls after a pause) all get their answer: one restores it, the others
/// wait for it.
#[test]
fn parallel_requests_to_a_resting_session_all_get_their_answer() {
    run(|| async {
        let (_upstream, gateway) = gateway("[gateway]\nsession_rest_after = \"100ms\"\n").await;
        let tallies = gateway.tallies();
        let id = session(&http(), &gateway.url, json!({})).await;
        for round in 1..=3 {
            eventually!(tallies.get(Protection::SessionRested) == round);
            let lists = (0..8).map(|n| {
                let list = json!({"jsonrpc": "2.0", "id": n, "method": "tools/list"});
                let (http, url, id) = (http(), gateway.url.clone(), id.clone());
                async move { post(&http, &url, &id, &list).send().await.unwrap() }
            });
            for answer in futures::future::join_all(lists).await {
                assert_eq!(answer.status(), 200, "round {round}");
                let listed = messages(&answer.text().await.unwrap()).pop().unwrap();
                assert!(listed["result"]["tools"].is_array(), "{listed}");
            }
            assert_eq!(tallies.get(Protection::SessionRestored), round);
        }
        assert_eq!(sum(&gateway, &id, &add(9, 4, 5)).await, Ok("9".into()));
    });
}

/// A session whose client went away from a request still running upstream
/// stays awake until the upstream answers: resting it would cancel the work
/// and lose the answer kept for the client to resume.
#[test]
fn a_session_with_a_request_still_upstream_stays_awake() {
    run(|| async {
        let (_upstream, gateway) = gateway("[gateway]\nsession_rest_after = \"100ms\"\n").await;
        let tallies = gateway.tallies();
        let id = session(&http(), &gateway.url, json!({})).await;
        // An empty `_meta` keeps it on rmcp's path; the client gives up at
        // 200 ms, the upstream sleeps 1.5 s.
        let slow = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "a__sleep", "arguments": {"ms": 1500}, "_meta": {}}});
        let gave_up = post(&http(), &gateway.url, &id, &slow)
            .timeout(Duration::from_millis(200))
            .send()
            .await;
        assert!(gave_up.is_err(), "the client went away");
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(
            tallies.get(Protection::SessionRested),
            0,
            "awake while upstream"
        );
        eventually!(tallies.get(Protection::SessionRested) == 1);
    });
}
