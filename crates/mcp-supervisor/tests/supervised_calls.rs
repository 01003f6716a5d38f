//! Calls through the registry and connection actors to the test server over
//! real loopback HTTP: outcomes, request counts reaching the server, states.

mod support;

use std::time::Duration;

use actix::Actor;
use mcp_supervisor::{
    CallOutcome, ConnectionState, Failure, FailureKind,
    registry::{ListConnections, ListTools, Registry, Shutdown, Status},
};
use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions};
use serde_json::json;
use support::*;

async fn server() -> TestServer {
    TestServer::start(TestServerOptions::legacy())
        .await
        .unwrap()
}

/// The failure and message of a `Rejected` outcome; any other fails the test.
fn rejection(outcome: CallOutcome) -> (Failure, String) {
    let CallOutcome::Rejected { failure, message } = outcome else {
        panic!("{outcome:?}")
    };
    (failure, message)
}

#[test]
fn a_call_succeeds_and_the_catalog_is_loaded_once() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry("", "").await;
        for _ in 0..3 {
            assert_eq!(echo_text(&registry, "a").await, "hi");
        }
        assert_eq!(upstream.requests("initialize"), 1);
        assert_eq!(upstream.requests("tools/list"), 1);
        assert_eq!(upstream.tool_calls("echo"), 3);
        let status = registry.send(Status).await.unwrap();
        assert_eq!(status[0].state, ConnectionState::Ready);
        assert_eq!(status[0].calls.ok, 3);
        registry.send(Shutdown).await.unwrap();
    });
}

#[test]
fn a_tool_error_is_a_value_not_a_failure() {
    run(|| async {
        let (_upstream, registry) = upstream_and_registry("", "").await;
        let outcome = call(&registry, "a", "fail", args(&[("message", json!("nope"))])).await;
        assert!(matches!(outcome, CallOutcome::ToolError(_)), "{outcome:?}");
        assert_eq!(text_of(&outcome), "nope");
        let status = registry.send(Status).await.unwrap();
        assert_eq!(
            (status[0].state, status[0].calls.tool_error),
            (ConnectionState::Ready, 1)
        );
    });
}

#[test]
fn unknown_connections_and_tools_are_refused_before_any_io() {
    run(|| async {
        let upstream = server().await;
        let toml = http_connection("a", &upstream.url(), "allowed_tools = [\"echo\"]")
            + &http_connection("b", &upstream.url(), "");
        let registry = Registry::new(config(&toml)).start();
        let (_, message) = rejection(call(&registry, "nope", "echo", None).await);
        assert_eq!(
            message,
            "Unknown MCP connection 'nope'. Available connections: a, b."
        );
        // Outside the allowlist: refused with no I/O at all.
        let (_, message) = rejection(call(&registry, "a", "add", None).await);
        assert_eq!(
            message,
            "Unknown tool 'add' on MCP connection 'a'. Call search_mcp_tools, then get_mcp_tool_schema."
        );
        assert_eq!(upstream.requests("initialize"), 0);
        // Not in the upstream's catalog: refused before any tools/call.
        let outcome = call(&registry, "b", "no_such_tool", None).await;
        assert!(
            matches!(outcome, CallOutcome::Rejected { .. }),
            "{outcome:?}"
        );
        assert_eq!(upstream.requests("tools/call"), 0);
        // The allowlist is applied by us, whatever the server lists.
        let catalog = registry
            .send(ListTools {
                connection: "a".into(),
            })
            .await
            .unwrap()
            .unwrap();
        let names: Vec<_> = catalog.tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, vec!["echo"]);
    });
}

#[test]
fn permission_and_protocol_failures_are_rejections_and_keep_the_session() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry("", "").await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        upstream
            .faults()
            .push(FaultRule::once(Match::tool("echo"), Fault::status(403)));
        let (failure, message) = rejection(call(&registry, "a", "echo", echo_args()).await);
        assert_eq!(
            (failure.kind, failure.status),
            (FailureKind::Permission, Some(403))
        );
        assert!(message.starts_with("MCP connection 'a' rejected this call (status=403)"));
        // An upstream that refuses the request as invalid (400 + JSON-RPC error).
        upstream.faults().push(FaultRule::once(
            Match::tool("echo"),
            Fault::status(400).with_jsonrpc_body(),
        ));
        let (failure, message) = rejection(call(&registry, "a", "echo", echo_args()).await);
        assert_eq!(
            (failure.kind, failure.status),
            (FailureKind::Protocol, Some(400))
        );
        assert!(
            message.contains("rejected this call as invalid (status=400)"),
            "{message}"
        );
        // An answer that is not JSON-RPC: the upstream's fault, and the
        // text says so rather than blame the request.
        upstream
            .faults()
            .push(FaultRule::once(Match::tool("echo"), Fault::Garbage));
        let (failure, message) = rejection(call(&registry, "a", "echo", echo_args()).await);
        assert_eq!(
            (failure.kind, failure.status),
            (FailureKind::Protocol, None)
        );
        assert!(
            message.starts_with(
                "MCP connection 'a' answered this call with something that is not an MCP answer"
            ) && message.contains("a fault of the server, not of the request")
                && !message.contains("malformed"),
            "{message}"
        );
        // Arguments the tool cannot take: rmcp's router answers a tool error.
        let outcome = call(&registry, "a", "add", args(&[("a", json!("x"))])).await;
        assert!(matches!(outcome, CallOutcome::ToolError(_)), "{outcome:?}");
        // Same session throughout: no re-initialize, no retries.
        assert_eq!(echo_text(&registry, "a").await, "hi");
        assert_eq!(upstream.requests("initialize"), 1);
        assert_eq!(upstream.tool_calls("echo"), 5);
    });
}

#[test]
fn a_503_on_a_read_only_call_is_retried_then_parks_and_the_park_does_no_io() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry("", "").await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
        let outcome = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        let CallOutcome::Unavailable {
            failure,
            retry_in,
            message,
        } = outcome
        else {
            panic!("{outcome:?}")
        };
        assert_eq!(
            (failure.kind, failure.status),
            (FailureKind::Server, Some(503))
        );
        assert_eq!(retry_in, Some(Duration::from_secs(30)));
        assert_eq!(
            message,
            "MCP connection 'a' is temporarily unavailable (kind=server, status=503); \
             retrying in about 30 seconds."
        );
        assert_eq!(
            upstream.tool_calls("lookup"),
            3,
            "max_attempts reached the server"
        );
        let status = registry.send(Status).await.unwrap();
        assert_eq!(
            (status[0].state, status[0].parks),
            (ConnectionState::Parked, 1)
        );
        assert!(status[0].parked_until.is_some());
        // Parked: answered at once, nothing reaches the server.
        let before = upstream.counts();
        let outcome = call(&registry, "a", "echo", echo_args()).await;
        assert!(
            matches!(outcome, CallOutcome::Unavailable { .. }),
            "{outcome:?}"
        );
        assert_eq!(upstream.counts().requests, before.requests);
    });
}

#[test]
fn a_non_idempotent_call_that_times_out_runs_once_and_may_have_run() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry("", "call_timeout = \"1500ms\"").await;
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("delete_item"), Fault::Hang));
        let outcome = call(&registry, "a", "delete_item", args(&[("id", json!("7"))])).await;
        let CallOutcome::TimedOut {
            message,
            may_have_run,
        } = outcome
        else {
            panic!("{outcome:?}")
        };
        assert!(may_have_run);
        assert_eq!(
            message,
            "MCP connection 'a' did not answer 'delete_item' within 2 seconds; the call may have run."
        );
        assert_eq!(upstream.tool_calls("delete_item"), 1, "never duplicated");
        mcp_test_support::eventually!(upstream.requests("notifications/cancelled") >= 1);
    });
}

/// A call with a large argument is encoded off the actors' thread before it
/// is posted (docs/ARCHITECTURE.md "Threads"). When its deadline passes during
/// that encode, the call is never posted: rmcp drops a request's POST when the
/// request is cancelled, so the cancellation sent upstream cannot overtake a
/// call that would then run unasked.
///
/// The order is made, not hoped for: the clock is paused, and the blocking
/// thread the encode runs on is held (its start hook waits) until the
/// deadline has passed and the caller has had its answer.
#[test]
fn a_call_whose_deadline_passes_while_its_large_body_is_encoded_is_never_sent() {
    let gate = BlockingGate::default();
    let hook = gate.clone();
    run_paused_with(
        // One blocking thread: work queued after the encode runs after it.
        move |runtime| {
            runtime
                .max_blocking_threads(1)
                .on_thread_start(move || hook.hold_if_armed());
        },
        || async move {
            let (upstream, registry) = upstream_and_registry("", "").await;
            assert_eq!(echo_text(&registry, "a").await, "hi", "a warm session");
            assert_eq!(
                gate.threads_started(),
                0,
                "a blocking thread already runs: the encode would not start one to hold"
            );
            // 330,000 control characters: one JSON value (copied on the
            // actors' thread), encoded as 2 MB of `\u0001`, over the size
            // that moves an encode to a blocking thread.
            let large = args(&[
                ("ms", json!(200)),
                ("padding", json!("\u{1}".repeat(330_000))),
            ]);
            gate.arm();
            let answer = actix_rt::spawn({
                let registry = registry.clone();
                async move {
                    call_with_timeout(&registry, "a", "sleep", large, Duration::from_secs(1)).await
                }
            });
            gate.started().await;
            // The encode is waiting on its thread: its deadline passes now.
            tokio::time::advance(Duration::from_secs(2)).await;
            let outcome = answer.await.unwrap();
            assert!(
                matches!(outcome, CallOutcome::TimedOut { .. }),
                "{outcome:?}"
            );
            gate.release();
            // Queued behind the encode on the one blocking thread: when this
            // has run, the encode has finished.
            tokio::task::spawn_blocking(|| ()).await.unwrap();
            // Time moves on only once every task waits: a POST sent after the
            // encode would have reached the upstream and its 200 ms tool ended.
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(
                upstream.tool_calls("sleep"),
                0,
                "the call was posted after all"
            );
            assert_eq!(upstream.tool_calls("echo"), 1);
            assert_eq!(echo_text(&registry, "a").await, "hi", "the session is kept");
        },
    );
}

/// Holds the first blocking-pool thread the runtime starts once armed, from
/// its start hook (before it runs any work), until released; tells the test
/// when it holds one.
#[derive(Clone, Default)]
struct BlockingGate(std::sync::Arc<GateState>);

#[derive(Default)]
struct GateState {
    threads_started: std::sync::atomic::AtomicUsize,
    armed: std::sync::atomic::AtomicBool,
    holding: tokio::sync::Notify,
    released: std::sync::Mutex<bool>,
    release: std::sync::Condvar,
}

impl BlockingGate {
    fn threads_started(&self) -> usize {
        self.0
            .threads_started
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    fn arm(&self) {
        self.0
            .armed
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Returns once a thread is held.
    async fn started(&self) {
        self.0.holding.notified().await;
    }

    fn release(&self) {
        *self.0.released.lock().unwrap() = true;
        self.0.release.notify_all();
    }

    /// The runtime's thread-start hook.
    fn hold_if_armed(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.0.threads_started.fetch_add(1, SeqCst);
        if !self.0.armed.swap(false, SeqCst) {
            return;
        }
        self.0.holding.notify_one();
        let mut released = self.0.released.lock().unwrap();
        while !*released {
            released = self.0.release.wait(released).unwrap();
        }
    }
}

/// An attempt that is still running is not a failure: a read-only tool slower
/// than a third of the deadline gets the whole of it and runs once (with equal
/// attempt shares it was cut at 1 s and re-sent until the deadline passed).
#[test]
fn a_slow_read_only_call_gets_the_whole_deadline_and_runs_once() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry("", "call_timeout = \"3s\"").await;
        let slow = args(&[("key", json!("k")), ("ms", json!(1800))]);
        let outcome = call(&registry, "a", "lookup", slow).await;
        assert_eq!(text_of(&outcome), "value-of-k");
        assert_eq!(
            upstream.tool_calls("lookup"),
            1,
            "never re-sent while running"
        );
        assert_eq!(upstream.completed_calls("lookup"), 1);
        assert_eq!(upstream.requests("notifications/cancelled"), 0);
    });
}

/// A hung read-only call is not retried: it holds the whole deadline, so there
/// is no time left for another attempt, and it runs once.
#[test]
fn a_hung_read_only_call_times_out_at_the_deadline_and_runs_once() {
    run_paused(|| async {
        let (upstream, registry) = upstream_and_registry("", "call_timeout = \"1500ms\"").await;
        upstream
            .faults()
            .push(FaultRule::once(Match::tool("lookup"), Fault::Hang));
        // Paused time: only the waits the call makes move the clock.
        let started = tokio::time::Instant::now();
        let outcome = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        assert!(
            matches!(outcome, CallOutcome::TimedOut { .. }),
            "{outcome:?}"
        );
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(1500),
            "answered at the deadline, not before or after"
        );
        assert_eq!(upstream.tool_calls("lookup"), 1);
    });
}

/// A retry follows a failed attempt, with the time left.
#[test]
fn a_read_only_call_whose_attempt_failed_is_retried() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry("", "call_timeout = \"6s\"").await;
        upstream.faults().push(FaultRule::once(
            Match::tool("lookup"),
            Fault::DropConnection,
        ));
        let outcome = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        assert_eq!(text_of(&outcome), "value-of-k");
        assert_eq!(upstream.tool_calls("lookup"), 2);
    });
}

/// Listing follows the same rule: a `tools/list` slower than a third of
/// `list_timeout` is answered, once, on the same session.
#[test]
fn a_slow_tool_listing_gets_the_whole_deadline_and_is_sent_once() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry("", "list_timeout = \"3s\"").await;
        upstream.faults().push(FaultRule::once(
            Match::method("tools/list"),
            Fault::delay(Duration::from_millis(1500)),
        ));
        let listed = registry
            .send(ListTools {
                connection: "a".into(),
            })
            .await
            .unwrap();
        assert!(listed.is_ok(), "{listed:?}");
        assert_eq!(upstream.requests("tools/list"), 1);
        assert_eq!(upstream.requests("initialize"), 1, "the session is kept");
    });
}

#[test]
fn peak_in_flight_equals_max_concurrent_calls_and_overflow_is_busy() {
    run(|| async {
        let (upstream, registry) =
            upstream_and_registry("", "max_concurrent_calls = 2\nmax_queued_calls = 3").await;
        // Load the catalog first so all calls race for slots, not the catalog.
        assert_eq!(echo_text(&registry, "a").await, "hi");
        let calls: Vec<_> = (0..8)
            .map(|_| call(&registry, "a", "sleep", args(&[("ms", json!(400))])))
            .collect();
        let outcomes = futures::future::join_all(calls).await;
        let busy = outcomes
            .iter()
            .filter(|o| matches!(o, CallOutcome::Busy { .. }))
            .count();
        let ok = outcomes
            .iter()
            .filter(|o| matches!(o, CallOutcome::Success(_)))
            .count();
        assert_eq!((ok, busy), (5, 3), "{outcomes:?}");
        assert_eq!(upstream.in_flight_peak(), 2);
        let CallOutcome::Busy { message } = outcomes
            .iter()
            .find(|o| matches!(o, CallOutcome::Busy { .. }))
            .unwrap()
        else {
            unreachable!()
        };
        assert_eq!(
            message,
            "MCP connection 'a' is busy (3 calls waiting); retry shortly."
        );
    });
}

#[test]
fn containment_one_broken_upstream_does_not_disturb_another() {
    run(|| async {
        let bad = server().await;
        let good = server().await;
        let toml =
            http_connection("bad", &bad.url(), "") + &http_connection("good", &good.url(), "");
        let registry = Registry::new(config(&toml)).start();
        assert_eq!(echo_text(&registry, "bad").await, "hi");
        bad.faults().push(FaultRule::always(
            Match::tool("sleep"),
            Fault::DropConnection,
        ));
        bad.faults()
            .push(FaultRule::always(Match::tool("echo"), Fault::Garbage));
        let bad_calls = async {
            let mut outcomes = Vec::new();
            for _ in 0..3 {
                outcomes.push(call(&registry, "bad", "sleep", args(&[("ms", json!(50))])).await);
                outcomes.push(call(&registry, "bad", "echo", echo_args()).await);
            }
            outcomes
        };
        let good_calls = async {
            let mut outcomes = Vec::new();
            for i in 0..20 {
                outcomes.push(
                    call(
                        &registry,
                        "good",
                        "add",
                        args(&[("a", json!(i)), ("b", json!(1))]),
                    )
                    .await,
                );
            }
            outcomes
        };
        let (bad_outcomes, good_outcomes) = futures::join!(bad_calls, good_calls);
        assert!(
            bad_outcomes
                .iter()
                .all(|o| !matches!(o, CallOutcome::Success(_))),
            "{bad_outcomes:?}"
        );
        for (i, outcome) in good_outcomes.iter().enumerate() {
            assert_eq!(text_of(outcome), (i + 1).to_string());
        }
        let names: Vec<_> = registry
            .send(ListConnections)
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.state))
            .collect();
        assert_eq!(names[1], ("good".to_owned(), ConnectionState::Ready));
    });
}

#[test]
fn shutdown_with_a_hung_call_is_bounded_and_the_caller_gets_a_value() {
    run_paused(|| async {
        let (upstream, registry) = upstream_and_registry(
            "[supervisor]\nshutdown_timeout = \"1s\"\n",
            "call_timeout = \"60s\"",
        )
        .await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("delete_item"), Fault::Hang));
        let hung = actix_rt::spawn({
            let registry = registry.clone();
            async move { call(&registry, "a", "delete_item", args(&[("id", json!("1"))])).await }
        });
        mcp_test_support::eventually!(upstream.tool_calls("delete_item") == 1);
        // Paused time: the clock moves only by the waits shutdown makes.
        let started = tokio::time::Instant::now();
        registry.send(Shutdown).await.unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(5), hung)
            .await
            .expect("the hung caller is resolved")
            .unwrap();
        let took = started.elapsed();
        assert!(
            took <= Duration::from_secs(1),
            "shutdown took {took:?}, more than shutdown_timeout"
        );
        let CallOutcome::Unavailable { message, .. } = outcome else {
            panic!("{outcome:?}")
        };
        assert!(message.contains("was stopped"), "{message}");
    });
}

/// Every wait a call makes fits inside its own deadline: a catalog that
/// takes `list_timeout` (30 s) to load, or a session that takes
/// `connect_timeout` (30 s) to build, does not hold a 1.5 s call past 1.5 s.
#[test]
fn a_call_waiting_on_its_catalog_or_session_answers_by_its_deadline() {
    run_paused(|| async {
        for slow in ["tools/list", "initialize"] {
            let (upstream, registry) = upstream_and_registry("", "call_timeout = \"1500ms\"").await;
            upstream
                .faults()
                .push(FaultRule::always(Match::method(slow), Fault::Hang));
            let started = tokio::time::Instant::now();
            let outcome = call(&registry, "a", "echo", echo_args()).await;
            let elapsed = started.elapsed();
            let CallOutcome::Unavailable { message, .. } = outcome else {
                panic!("{slow}: {outcome:?}")
            };
            assert_eq!(
                message, "MCP connection 'a' was not ready within 2 seconds; the call did not run.",
                "{slow}"
            );
            // Paused time: the call's own deadline, exactly.
            assert_eq!(elapsed, Duration::from_millis(1500), "{slow}");
            assert_eq!(upstream.tool_calls("echo"), 0, "{slow}");
        }
    });
}
