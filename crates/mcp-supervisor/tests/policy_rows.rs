//! The retry table (docs/SUPERVISION.md, "Retries"), row by row, over real
//! loopback HTTP: for each kind of failure in each phase, the test server is
//! driven into it and the test asserts the caller's value, how many requests
//! reached the server, and the connection's resulting state. (`unknown` has
//! no natural trigger in a real server; its row is covered by the pure
//! decision table in `policy::decide::tests`.)

mod support;

use std::time::Duration;

use actix::{Actor, Addr};
use mcp_supervisor::{
    CallOutcome, FailureKind,
    registry::{Registry, Status},
};
use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions};
use serde_json::json;
use support::*;

/// One connection `a` to a fresh test server, with `extra` connection keys.
async fn setup(extra: &str) -> (TestServer, Addr<Registry>) {
    let upstream = TestServer::start(TestServerOptions::legacy())
        .await
        .unwrap();
    let registry = Registry::new(config(&http_connection("a", &upstream.url(), extra))).start();
    (upstream, registry)
}

async fn state(registry: &Addr<Registry>) -> (&'static str, u64) {
    let status = registry.send(Status).await.unwrap();
    (status[0].state.as_str(), status[0].parks)
}

fn kind_of(outcome: &CallOutcome) -> (&'static str, Option<FailureKind>) {
    match outcome {
        CallOutcome::Rejected { failure, .. } | CallOutcome::Unavailable { failure, .. } => {
            (outcome.label(), Some(failure.kind))
        }
        other => (other.label(), None),
    }
}

fn tool_args(tool: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    match tool {
        "echo" => args(&[("text", json!("hi"))]),
        "lookup" => args(&[("key", json!("k"))]),
        "delete_item" => args(&[("id", json!("1"))]),
        _ => None,
    }
}

/// Loads the catalog first, so the fault hits the call itself.
async fn warm(upstream: &TestServer, registry: &Addr<Registry>) {
    assert_eq!(
        text_of(&call(registry, "a", "echo", tool_args("echo")).await),
        "hi"
    );
    assert_eq!(upstream.requests("initialize"), 1);
}

#[test]
fn auth_while_connecting_retires_at_once() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(401),
        ));
        let outcome = call(&registry, "a", "echo", tool_args("echo")).await;
        assert_eq!(kind_of(&outcome), ("unavailable", Some(FailureKind::Auth)));
        assert!(
            outcome
                .message()
                .unwrap()
                .ends_with("it will not be retried.")
        );
        assert_eq!(upstream.requests("initialize"), 1, "no retry");
        assert_eq!(state(&registry).await, ("retired", 0));
    });
}

#[test]
fn auth_on_a_call_retires_at_once() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(401)));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        assert_eq!(kind_of(&outcome), ("unavailable", Some(FailureKind::Auth)));
        assert_eq!(upstream.tool_calls("lookup"), 1);
        assert_eq!(state(&registry).await.0, "retired");
    });
}

#[test]
fn permission_while_connecting_retires() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(403),
        ));
        let outcome = call(&registry, "a", "echo", tool_args("echo")).await;
        assert_eq!(
            kind_of(&outcome),
            ("unavailable", Some(FailureKind::Permission))
        );
        assert_eq!(upstream.requests("initialize"), 1);
        assert_eq!(state(&registry).await.0, "retired");
    });
}

#[test]
fn permission_on_a_call_is_rejected_and_the_session_kept() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream
            .faults()
            .push(FaultRule::once(Match::tool("lookup"), Fault::status(403)));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        assert_eq!(
            kind_of(&outcome),
            ("rejected", Some(FailureKind::Permission))
        );
        assert_eq!(
            upstream.tool_calls("lookup"),
            1,
            "a rejection is never retried"
        );
        assert_eq!(state(&registry).await, ("ready", 0));
        assert_eq!(upstream.requests("initialize"), 1, "same session");
    });
}

#[test]
fn protocol_while_connecting_is_retried_then_parks() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(400),
        ));
        let outcome = call(&registry, "a", "echo", tool_args("echo")).await;
        assert_eq!(
            kind_of(&outcome),
            ("unavailable", Some(FailureKind::Protocol))
        );
        assert_eq!(upstream.requests("initialize"), 3, "max_attempts");
        assert_eq!(state(&registry).await, ("parked", 1));
    });
}

#[test]
fn protocol_on_a_call_is_rejected_and_the_session_kept() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream.faults().push(FaultRule::once(
            Match::tool("lookup"),
            Fault::status(422).with_jsonrpc_body(),
        ));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        assert_eq!(kind_of(&outcome), ("rejected", Some(FailureKind::Protocol)));
        assert_eq!(upstream.tool_calls("lookup"), 1);
        assert_eq!(state(&registry).await, ("ready", 0));
    });
}

#[test]
fn rate_limit_while_connecting_waits_retry_after_then_succeeds() {
    // Paused time: the only wait is the one Retry-After asks for.
    run_paused(|| async {
        let (upstream, registry) = setup("").await;
        upstream.faults().push(FaultRule::once(
            Match::method("initialize"),
            Fault::status(429).with_retry_after_secs(1),
        ));
        let started = tokio::time::Instant::now();
        assert_eq!(
            text_of(&call(&registry, "a", "echo", tool_args("echo")).await),
            "hi"
        );
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(1),
            "waited Retry-After"
        );
        assert_eq!(upstream.requests("initialize"), 2);
        assert_eq!(state(&registry).await, ("ready", 0));
    });
}

#[test]
fn rate_limit_on_an_unsafe_call_waits_and_retries_because_it_never_ran() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream.faults().push(FaultRule::once(
            Match::tool("delete_item"),
            Fault::status(429).with_retry_after_secs(1),
        ));
        let outcome = call(&registry, "a", "delete_item", tool_args("delete_item")).await;
        assert_eq!(text_of(&outcome), "deleted 1");
        assert_eq!(upstream.tool_calls("delete_item"), 2);
        assert_eq!(
            upstream.completed_calls("delete_item"),
            1,
            "ran exactly once"
        );
    });
}

#[test]
fn rate_limit_past_the_deadline_parks_at_once_without_a_strike() {
    run(|| async {
        let (upstream, registry) = setup("call_timeout = \"5s\"").await;
        warm(&upstream, &registry).await;
        upstream.faults().push(FaultRule::always(
            Match::tool("lookup"),
            Fault::status(429).with_retry_after_secs(120),
        ));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        let CallOutcome::Unavailable {
            failure, retry_in, ..
        } = &outcome
        else {
            panic!("{outcome:?}")
        };
        assert_eq!(failure.kind, FailureKind::RateLimit);
        assert_eq!(*retry_in, Some(Duration::from_secs(120)));
        assert_eq!(upstream.tool_calls("lookup"), 1, "parked at once");
        assert_eq!(state(&registry).await, ("parked", 1));
    });
}

#[test]
fn rate_limit_exhausted_parks_until_retry_after() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream.faults().push(FaultRule::always(
            Match::tool("lookup"),
            Fault::status(429).with_retry_after_secs(0),
        ));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        assert_eq!(
            kind_of(&outcome),
            ("unavailable", Some(FailureKind::RateLimit))
        );
        assert_eq!(upstream.tool_calls("lookup"), 3);
    });
}

#[test]
fn server_error_while_connecting_is_retried_then_parks() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(500),
        ));
        let outcome = call(&registry, "a", "echo", tool_args("echo")).await;
        assert_eq!(
            kind_of(&outcome),
            ("unavailable", Some(FailureKind::Server))
        );
        assert_eq!(upstream.requests("initialize"), 3);
        assert_eq!(state(&registry).await, ("parked", 1));
    });
}

#[test]
fn server_error_on_an_unsafe_call_is_not_retried() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream.faults().push(FaultRule::always(
            Match::tool("delete_item"),
            Fault::status(500),
        ));
        let outcome = call(&registry, "a", "delete_item", tool_args("delete_item")).await;
        assert_eq!(
            kind_of(&outcome),
            ("unavailable", Some(FailureKind::Server))
        );
        assert!(
            outcome
                .message()
                .unwrap()
                .contains("did not retry it because it may already have run")
        );
        assert_eq!(upstream.tool_calls("delete_item"), 1, "never duplicated");
        assert_eq!(
            state(&registry).await,
            ("ready", 0),
            "one failure does not park"
        );
    });
}

#[test]
fn server_error_on_a_safe_call_is_retried_then_parks() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(500)));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        assert_eq!(
            kind_of(&outcome),
            ("unavailable", Some(FailureKind::Server))
        );
        assert_eq!(upstream.tool_calls("lookup"), 3);
        assert_eq!(state(&registry).await, ("parked", 1));
    });
}

/// Any answer to a non-idempotent call other than a refusal (429, 401/403,
/// a JSON-RPC rejection) means it may have run: a 503 that came after the
/// tool ran must not make the supervisor run it again.
#[test]
fn a_503_after_an_unsafe_call_ran_is_not_retried() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream.faults().push(FaultRule::once(
            Match::tool("delete_item"),
            Fault::StatusAfterRun(503),
        ));
        let outcome = call(&registry, "a", "delete_item", tool_args("delete_item")).await;
        let CallOutcome::Unavailable { message, .. } = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(
            message,
            "MCP connection 'a' failed this call (kind=server, status=503) and did not retry it \
             because it may already have run; check its effect before calling again."
        );
        assert_eq!(upstream.tool_calls("delete_item"), 1, "never duplicated");
        assert_eq!(upstream.completed_calls("delete_item"), 1);
    });
}

#[test]
fn retry_calls_always_and_never_override_the_annotations() {
    run(|| async {
        let (upstream, registry) = setup("retry_calls = \"always\"").await;
        warm(&upstream, &registry).await;
        upstream.faults().push(FaultRule::once(
            Match::tool("delete_item"),
            Fault::status(500),
        ));
        let outcome = call(&registry, "a", "delete_item", tool_args("delete_item")).await;
        assert_eq!(text_of(&outcome), "deleted 1", "always: retried");
        assert_eq!(upstream.tool_calls("delete_item"), 2);

        let (upstream, registry) = setup("retry_calls = \"never\"").await;
        warm(&upstream, &registry).await;
        upstream
            .faults()
            .push(FaultRule::once(Match::tool("lookup"), Fault::status(503)));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        assert_eq!(
            kind_of(&outcome).0,
            "unavailable",
            "never: not even a 503 is retried"
        );
        assert_eq!(upstream.tool_calls("lookup"), 1);
    });
}

#[test]
fn timeout_while_connecting_is_retried_then_parks() {
    run(|| async {
        let (upstream, registry) = setup("connect_timeout = \"300ms\"").await;
        upstream
            .faults()
            .push(FaultRule::always(Match::method("initialize"), Fault::Hang));
        let outcome = call(&registry, "a", "echo", tool_args("echo")).await;
        assert_eq!(
            kind_of(&outcome),
            ("unavailable", Some(FailureKind::Timeout))
        );
        assert_eq!(upstream.requests("initialize"), 3);
        assert_eq!(state(&registry).await, ("parked", 1));
    });
}

/// A call's attempt may run to the whole deadline, so a timed-out call has no
/// time left for another attempt, safe or not: it ran once.
#[test]
fn timeout_on_calls_runs_once_safe_or_not() {
    run(|| async {
        let (upstream, registry) = setup("call_timeout = \"3s\"").await;
        warm(&upstream, &registry).await;
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("delete_item"), Fault::Hang));
        let outcome = call(&registry, "a", "delete_item", tool_args("delete_item")).await;
        assert!(
            matches!(
                outcome,
                CallOutcome::TimedOut {
                    may_have_run: true,
                    ..
                }
            ),
            "{outcome:?}"
        );
        assert_eq!(upstream.tool_calls("delete_item"), 1);
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::Hang));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        assert!(
            matches!(outcome, CallOutcome::TimedOut { .. }),
            "{outcome:?}"
        );
        assert_eq!(
            upstream.tool_calls("lookup"),
            1,
            "a running attempt is not a failure to retry"
        );
    });
}

#[test]
fn transport_while_connecting_is_retried_then_parks() {
    run(|| async {
        // Bind and drop a listener: nothing listens on that port any more.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let registry = Registry::new(config(&http_connection("a", &url, ""))).start();
        let outcome = call(&registry, "a", "echo", tool_args("echo")).await;
        let CallOutcome::Unavailable { failure, .. } = &outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(failure.kind, FailureKind::Transport);
        assert!(failure.not_run);
        assert_eq!(state(&registry).await, ("parked", 1));
    });
}

#[test]
fn transport_on_calls_unsafe_not_retried_safe_retried() {
    run(|| async {
        let (upstream, registry) = setup("").await;
        warm(&upstream, &registry).await;
        upstream.faults().push(FaultRule::once(
            Match::tool("delete_item"),
            Fault::DropConnection,
        ));
        let outcome = call(&registry, "a", "delete_item", tool_args("delete_item")).await;
        assert_eq!(
            kind_of(&outcome),
            ("unavailable", Some(FailureKind::Transport))
        );
        assert_eq!(
            upstream.completed_calls("delete_item"),
            1,
            "it ran once, never again"
        );
        assert_eq!(upstream.tool_calls("delete_item"), 1);

        upstream.faults().push(FaultRule::once(
            Match::tool("lookup"),
            Fault::DropConnection,
        ));
        let outcome = call(&registry, "a", "lookup", tool_args("lookup")).await;
        assert_eq!(text_of(&outcome), "value-of-k");
        assert_eq!(upstream.tool_calls("lookup"), 2);
        assert_eq!(state(&registry).await.0, "ready");
    });
}
