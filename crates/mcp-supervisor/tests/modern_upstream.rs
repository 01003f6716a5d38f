//! Upstreams of both protocol generations, over real loopback HTTP: the
//! connection discovers what an upstream speaks (`server/discover` first,
//! `initialize` as the fallback), remembers it, and keeps every supervision
//! rule for both.

mod support;

use std::time::Duration;

use actix::Actor;
use mcp_supervisor::{
    CallOutcome, ConnectionState, FailureKind,
    registry::{ListTools, Registry, Status},
};
use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions};
use serde_json::json;
use support::*;

/// The protocol version `status` shows for connection `a`.
async fn protocol(registry: &actix::Addr<Registry>) -> Option<String> {
    let statuses = registry.send(Status).await.unwrap();
    statuses
        .into_iter()
        .find(|s| s.name == "a")
        .unwrap()
        .protocol
}

async fn upstream(options: TestServerOptions) -> (TestServer, actix::Addr<Registry>) {
    configured(options, "").await
}

/// An upstream, and a registry whose connection `a` to it has `extra` set.
async fn configured(
    options: TestServerOptions,
    extra: &str,
) -> (TestServer, actix::Addr<Registry>) {
    let upstream = TestServer::start(options).await.unwrap();
    let settings = "[supervisor.quarantine]\nbase_cooldown = \"1s\"\n";
    let toml = format!("{settings}{}", http_connection("a", &upstream.url(), extra));
    (upstream, Registry::new(config(&toml)).start())
}

#[test]
fn a_2026_upstream_is_reached_with_discover_and_never_initialize() {
    run(|| async {
        let (upstream, registry) = upstream(TestServerOptions::default()).await;
        for _ in 0..3 {
            assert_eq!(echo_text(&registry, "a").await, "hi");
        }
        // (The first connect to an origin also times a few `server/discover`
        // round trips: the connection-reuse probe, docs/DECISIONS.md #28.)
        assert!(upstream.requests("server/discover") >= 1);
        assert_eq!(upstream.requests("initialize"), 0);
        assert_eq!(upstream.tool_calls("echo"), 3);
        assert_eq!(protocol(&registry).await.as_deref(), Some("2026-07-28"));
    });
}

/// The first connect probes with `server/discover`; a 2025-era server refuses
/// it and gets `initialize`. A rebuilt session starts with `initialize`
/// straight away: what the upstream speaks is remembered per connection.
#[test]
fn a_2025_upstream_is_found_out_once_and_remembered() {
    run(|| async {
        let (upstream, registry) = upstream(TestServerOptions::legacy()).await;
        assert_eq!(
            protocol(&registry).await,
            None,
            "not known before connecting"
        );
        assert_eq!(echo_text(&registry, "a").await, "hi");
        assert_eq!(protocol(&registry).await.as_deref(), Some("2025-11-25"));
        assert_eq!(upstream.requests("server/discover"), 1);
        assert_eq!(upstream.requests("initialize"), 1);
        // A dropped connection mid-call breaks the session; a read-only
        // call is retried on a new one.
        upstream.faults().push(FaultRule::once(
            Match::tool("lookup"),
            Fault::DropConnection,
        ));
        let outcome = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        assert_eq!(text_of(&outcome), "value-of-k");
        assert_eq!(
            upstream.requests("initialize"),
            2,
            "a new session was built"
        );
        assert_eq!(
            upstream.requests("server/discover"),
            1,
            "without probing again"
        );
    });
}

/// `protocol = "2025-11-25"` pins the generation: a server that speaks both
/// gets a session with `initialize` and is never asked `server/discover`;
/// a rebuilt session is pinned too.
#[test]
fn a_pinned_2025_protocol_opens_sessions_with_initialize() {
    run(|| async {
        let (upstream, registry) =
            configured(TestServerOptions::default(), "protocol = \"2025-11-25\"").await;
        assert_eq!(
            protocol(&registry).await.as_deref(),
            Some("2025-11-25"),
            "a pin is shown before the first session"
        );
        assert_eq!(echo_text(&registry, "a").await, "hi");
        assert_eq!(protocol(&registry).await.as_deref(), Some("2025-11-25"));
        upstream.faults().push(FaultRule::once(
            Match::tool("lookup"),
            Fault::DropConnection,
        ));
        let outcome = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        assert_eq!(text_of(&outcome), "value-of-k");
        assert_eq!(upstream.requests("initialize"), 2, "a session per build");
        assert_eq!(upstream.requests("server/discover"), 0);
    });
}

/// `protocol = "2026-07-28"` against a server that speaks only 2025: no
/// fallback to `initialize`; the call is answered with a protocol failure.
#[test]
fn a_pinned_2026_protocol_does_not_fall_back() {
    run(|| async {
        let (upstream, registry) =
            configured(TestServerOptions::legacy(), "protocol = \"2026-07-28\"").await;
        let outcome = call(&registry, "a", "echo", args(&[("text", json!("hi"))])).await;
        assert!(
            matches!(&outcome, CallOutcome::Unavailable { failure, .. } if failure.kind == FailureKind::Protocol),
            "{outcome:?}"
        );
        assert_eq!(upstream.requests("initialize"), 0);
        assert!(upstream.requests("server/discover") >= 1);
    });
}

#[test]
fn a_2026_upstream_keeps_the_supervision_rules() {
    // Paused time: the 1 s park cannot end before "no I/O while parked" is
    // checked, however slow the machine, and its end is exact.
    run_paused(|| async {
        let (upstream, registry) = upstream(TestServerOptions::default()).await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        // A 503 on a read-only call is retried, then parks the connection.
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
        let outcome = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        let CallOutcome::Unavailable { message, .. } = outcome else {
            panic!("{outcome:?}")
        };
        assert!(
            message.starts_with(
                "MCP connection 'a' is temporarily unavailable (kind=server, status=503)"
            ),
            "{message}"
        );
        assert_eq!(upstream.tool_calls("lookup"), 3);
        let status = registry.send(Status).await.unwrap();
        assert_eq!(status[0].state, ConnectionState::Parked);
        // While parked: no I/O.
        let before = upstream.counts().requests;
        let outcome = call(&registry, "a", "echo", echo_args()).await;
        assert!(
            matches!(outcome, CallOutcome::Unavailable { .. }),
            "{outcome:?}"
        );
        assert_eq!(upstream.counts().requests, before);
        // After the cooldown it revives with a new discover.
        upstream.faults().clear();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
    });
}

/// A 2026-07-28 upstream announces list changes only on a
/// `subscriptions/listen` stream: the connection holds one open, and the
/// catalog follows the change.
#[test]
fn a_2026_upstreams_list_change_reloads_the_catalog() {
    run(|| async {
        let (upstream, registry) = upstream(TestServerOptions::default()).await;
        let listed = |registry: actix::Addr<Registry>| async move {
            registry
                .send(ListTools {
                    connection: "a".into(),
                })
                .await
                .unwrap()
                .unwrap()
                .tool("late_tool")
                .is_some()
        };
        assert!(!listed(registry.clone()).await);
        assert_eq!(upstream.requests("subscriptions/listen"), 1);
        upstream.control().set_late_tool(true).await;
        let reloaded = mcp_test_support::wait_until_async(Duration::from_secs(10), || {
            listed(registry.clone())
        })
        .await;
        assert!(reloaded, "the catalog did not pick up the new tool");
    });
}

/// A call with no client behind it (the library's `CallTool`) answers what
/// an upstream asks the client as a client without a user would: the
/// elicitation is declined (a 2026-07-28 upstream: an `input_required` round,
/// retried with the upstream's state; a 2025 one: a server-to-client request
/// on the session). Sampling cannot be answered: the caller is told why.
#[test]
fn a_call_without_a_client_answers_what_it_can() {
    run(|| async {
        use mcp_test_support::conformance::{ConformanceHttpServer, ConformanceServer};
        for (generation, server) in [
            ("2026", ConformanceServer::new()),
            ("2025", ConformanceServer::legacy_only()),
        ] {
            let upstream = ConformanceHttpServer::start(([127, 0, 0, 1], 0).into(), server)
                .await
                .unwrap();
            let registry =
                Registry::new(config(&http_connection("c", &upstream.url(), ""))).start();
            let outcome = call(
                &registry,
                "c",
                "test_elicitation",
                args(&[("message", json!("who are you?"))]),
            )
            .await;
            assert_eq!(
                text_of(&outcome),
                "User response: action=decline, content={}",
                "{generation}: {outcome:?}"
            );
            if generation == "2026" {
                let outcome = call(
                    &registry,
                    "c",
                    "test_sampling",
                    args(&[("prompt", json!("2+2?"))]),
                )
                .await;
                let CallOutcome::Rejected { message, .. } = outcome else {
                    panic!("{outcome:?}")
                };
                assert!(
                    message.starts_with(
                        "MCP connection 'c' needs a client to answer 'test_sampling' (it asked \
                         for sampling)"
                    ),
                    "{message}"
                );
            }
        }
    });
}
