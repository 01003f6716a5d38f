//! A canary token used for real (the upstream requires it) never appears in
//! any log line at trace level, nor in any status, event, outcome or Debug.

mod support;

use std::sync::{Arc, Mutex};

use actix::Actor;
use mcp_supervisor::registry::{ListConnections, Registry, Status};
use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions};
use serde_json::json;
use support::*;

const CANARY: &str = "CANARY-trace-9d2e-SECRET";

#[test]
fn the_canary_never_reaches_a_log_line_status_or_debug_output() {
    // Global: lines logged on other threads (blocking work, helper threads)
    // are caught too.
    let captured = capture_logs();
    let debug_dump = Arc::new(Mutex::new(String::new()));
    let dump = debug_dump.clone();

    run(move || async move {
        let upstream = TestServer::start(TestServerOptions {
            require_bearer: Some(CANARY.to_owned()),
            ..TestServerOptions::default()
        })
        .await
        .unwrap();
        let toml = http_connection(
            "a",
            &upstream.url(),
            &format!(
                "auth = {{ kind = \"bearer\", token = \"{CANARY}\" }}\nheaders = {{ \"X-Api-Key\" = \"{CANARY}\" }}"
            ),
        ) + &http_connection(
            "wrong",
            &upstream.url(),
            "auth = { kind = \"bearer\", token = \"not-the-canary\" }",
        );
        let config = config(&toml);
        let registry = Registry::new(config.clone()).start();
        let log = EventLog::default();
        log.subscribe(&registry).await;

        let mut outcomes = Vec::new();
        outcomes.push(call(&registry, "a", "echo", args(&[("text", json!("hi"))])).await);
        assert_eq!(
            text_of(&outcomes[0]),
            "hi",
            "the token was sent and accepted"
        );
        for fault in [
            Fault::status(500).with_jsonrpc_body(),
            Fault::status(403),
            Fault::DropConnection,
        ] {
            upstream
                .faults()
                .push(FaultRule::once(Match::tool("echo"), fault));
            outcomes.push(call(&registry, "a", "echo", args(&[("text", json!("x"))])).await);
        }
        // A wrong token: 401, retired.
        outcomes.push(call(&registry, "wrong", "echo", None).await);
        reset(&registry, "a").await;
        outcomes.push(call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await);

        let status = registry.send(Status).await.unwrap();
        let summaries = registry.send(ListConnections).await.unwrap();
        *dump.lock().unwrap() = format!(
            "{config:?}\n{outcomes:?}\n{status:?}\n{summaries:?}\n{:?}",
            log.events()
        );
        registry
            .send(mcp_supervisor::registry::Shutdown)
            .await
            .unwrap();
    });

    let logs = captured.text();
    assert!(
        logs.contains("TRACE") || logs.contains("DEBUG"),
        "trace logging was captured"
    );
    assert!(
        !logs.contains(CANARY),
        "canary in logs:\n{}",
        logs_around(&logs)
    );
    let dump = debug_dump.lock().unwrap();
    assert!(
        dump.contains("retired") || dump.contains("Retired"),
        "{dump}"
    );
    assert!(!dump.contains(CANARY), "canary in Debug output: {dump}");
}

fn logs_around(logs: &str) -> String {
    logs.lines()
        .filter(|line| line.contains(CANARY))
        .take(5)
        .collect::<Vec<_>>()
        .join("\n")
}

/// With `[fleet]`: neither the upstream's token, nor the Redis password,
/// nor the fleet key reaches a log line, a status, a Debug output or a value
/// kept in Redis, while a park and a reset cross the store.
#[test]
fn the_fleets_secrets_never_reach_a_log_line_status_or_redis() {
    const PASSWORD: &str = "CANARY-redis-77f1-SECRET";
    const KEY: &str = "Q0FOQVJZLWZsZWV0LWtleS0wMTIzNDU2Nzg5YWJjZGU=";
    let captured = capture_logs();
    let dump = Arc::new(Mutex::new(String::new()));
    let out = dump.clone();
    let redis = mcp_test_support::RedisServer::start_with_password(PASSWORD).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pw"), format!("{PASSWORD}\n")).unwrap();
    std::fs::write(dir.path().join("key"), format!("{KEY}\n")).unwrap();
    let fleet = format!(
        "[fleet]\nredis = \"{}\"\npassword_file = {}\nkey_file = {}\nnode = \"canary\"\n",
        redis.url(),
        toml_string(&dir.path().join("pw").to_string_lossy()),
        toml_string(&dir.path().join("key").to_string_lossy()),
    );
    run(move || async move {
        let upstream = TestServer::start(TestServerOptions {
            require_bearer: Some(CANARY.to_owned()),
            ..TestServerOptions::legacy()
        })
        .await
        .unwrap();
        let toml = format!(
            "[supervisor.quarantine]\nbase_cooldown = \"30s\"\n{fleet}{}",
            http_connection(
                "a",
                &upstream.url(),
                &format!("auth = {{ kind = \"bearer\", token = \"{CANARY}\" }}"),
            )
        );
        let config = config(&toml);
        let registry = Registry::new(config.clone()).start();
        assert!(
            mcp_test_support::wait_until_async(std::time::Duration::from_secs(10), || async {
                registry
                    .send(mcp_supervisor::registry::FleetOverview)
                    .await
                    .unwrap()
                    .is_some_and(|view| view.store.as_str() == "up")
            })
            .await,
            "joined the fleet"
        );
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
        let parked = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        // Everything kept in Redis now, read with Redis's own protocol.
        let mut kept = String::new();
        assert!(
            mcp_test_support::wait_until(std::time::Duration::from_secs(2), || {
                let keys = redis.query(&["KEYS", "*"]).unwrap();
                let mcp_test_support::redis::Reply::List(keys) = keys else {
                    return false;
                };
                kept = keys
                    .iter()
                    .map(|key| {
                        let key = key.text().unwrap_or_default();
                        let value = redis.query(&["GET", key]).unwrap();
                        format!("{key} = {}\n", value.text().unwrap_or_default())
                    })
                    .collect();
                !keys.is_empty()
            })
            .await,
            "the park was kept in Redis"
        );
        reset(&registry, "a").await;
        let status = registry.send(Status).await.unwrap();
        let fleet = registry
            .send(mcp_supervisor::registry::FleetOverview)
            .await
            .unwrap();
        let json = mcp_supervisor::admin::status_json(&status, fleet.as_ref());
        *out.lock().unwrap() =
            format!("{config:?}\n{parked:?}\n{status:?}\n{fleet:?}\n{json}\n{kept}");
        registry
            .send(mcp_supervisor::registry::Shutdown)
            .await
            .unwrap();
    });
    let logs = captured.text();
    assert!(logs.contains("joined the fleet"), "the fleet ran");
    for secret in [CANARY, PASSWORD, KEY] {
        assert!(!logs.contains(secret), "{secret} in logs");
        assert!(
            !dump.lock().unwrap().contains(secret),
            "{secret} in a status or Debug output"
        );
    }
    let dump = dump.lock().unwrap();
    assert!(dump.contains("temporarily unavailable"), "{dump}");
    assert!(
        dump.contains("\"kind\":\"parked\""),
        "the park was kept in Redis: {dump}"
    );
}
