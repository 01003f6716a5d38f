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
