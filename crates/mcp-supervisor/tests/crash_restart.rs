//! A connection actor that panics is restarted from config within the restart
//! budget, its callers get values, other connections are untouched; past the
//! budget the connection retires with `crash_loop`.

mod support;

use actix::Actor;
use mcp_supervisor::{
    CallOutcome, ConnectionState, RetireReason,
    events::ConnectionEvent,
    registry::{CrashConnection, Registry, Status},
};
use mcp_test_support::{TestServer, TestServerOptions, eventually};
use serde_json::json;
use support::*;

fn echo() -> Option<serde_json::Map<String, serde_json::Value>> {
    args(&[("text", json!("hi"))])
}

async fn restarts_of(registry: &actix::Addr<Registry>, name: &str) -> u32 {
    let status = registry.send(Status).await.unwrap();
    status
        .iter()
        .find(|s| s.name == name)
        .map_or(0, |s| s.restarts)
}

#[test]
fn a_panicked_connection_actor_is_restarted_and_others_are_untouched() {
    run(|| async {
        let a = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let b = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let toml = http_connection("a", &a.url(), "") + &http_connection("b", &b.url(), "");
        let registry = Registry::new(config(&toml)).start();
        let log = EventLog::default();
        log.subscribe(&registry).await;
        assert_eq!(text_of(&call(&registry, "a", "echo", echo()).await), "hi");

        // A call in flight on `a` when its actor panics still gets a value.
        let in_flight = actix_rt::spawn({
            let registry = registry.clone();
            async move { call(&registry, "a", "sleep", args(&[("ms", json!(500))])).await }
        });
        eventually!(a.tool_calls("sleep") == 1);
        registry
            .send(CrashConnection {
                connection: "a".into(),
            })
            .await
            .unwrap();
        for i in 0..10 {
            let outcome = call(
                &registry,
                "b",
                "add",
                args(&[("a", json!(i)), ("b", json!(1))]),
            )
            .await;
            assert_eq!(text_of(&outcome), (i + 1).to_string());
        }
        let outcome = in_flight.await.unwrap();
        assert!(
            matches!(
                outcome,
                CallOutcome::Success(_) | CallOutcome::Unavailable { .. }
            ),
            "{outcome:?}"
        );

        // Restarted from config; calls work again.
        restarted(&registry, "a", 1).await;
        assert_eq!(restarts_of(&registry, "a").await, 1);
        assert_eq!(text_of(&call(&registry, "a", "echo", echo()).await), "hi");
        let restarts: Vec<_> = log
            .events()
            .into_iter()
            .filter(|e| matches!(e, ConnectionEvent::Restarted { .. }))
            .collect();
        assert_eq!(
            restarts,
            vec![ConnectionEvent::Restarted {
                connection: "a".into(),
                restarts: 1
            }]
        );
    });
}

#[test]
fn a_crash_loop_past_the_budget_retires_the_connection() {
    run(|| async {
        let a = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let toml = "[supervisor]\nrestart_budget = { restarts = 2, within = \"60s\" }\n".to_owned()
            + &http_connection("a", &a.url(), "");
        let registry = Registry::new(config(&toml)).start();
        for expected in 1..=2 {
            registry
                .send(CrashConnection {
                    connection: "a".into(),
                })
                .await
                .unwrap();
            restarted(&registry, "a", expected).await;
            assert_eq!(restarts_of(&registry, "a").await, expected);
        }
        registry
            .send(CrashConnection {
                connection: "a".into(),
            })
            .await
            .unwrap();
        retired(&registry, "a").await;
        let status = registry.send(Status).await.unwrap();
        assert_eq!(status[0].retired_reason, Some(RetireReason::CrashLoop));
        let outcome = call(&registry, "a", "echo", echo()).await;
        let CallOutcome::Unavailable { message, .. } = outcome else {
            panic!("{outcome:?}")
        };
        assert!(message.contains("will not be retried"), "{message}");
        assert_eq!(
            a.requests("initialize"),
            0,
            "a retired connection does no I/O"
        );
    });
}

/// The crash loop's retirement is the connection actor's, like any other:
/// subscribers are told once, with its reason.
#[test]
fn a_crash_loop_is_told_once() {
    run(|| async {
        let a = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let toml = "[supervisor]\nrestart_budget = { restarts = 1, within = \"60s\" }\n".to_owned()
            + &http_connection("a", &a.url(), "");
        let registry = Registry::new(config(&toml)).start();
        let log = EventLog::default();
        log.subscribe(&registry).await;
        crash(&registry, "a").await;
        restarted(&registry, "a", 1).await;
        crash(&registry, "a").await;
        retired(&registry, "a").await;
        let retirements = || {
            log.events()
                .into_iter()
                .filter(|event| matches!(event, ConnectionEvent::Retired { .. }))
                .collect::<Vec<_>>()
        };
        mcp_test_support::eventually!(!retirements().is_empty());
        assert_eq!(
            retirements(),
            vec![ConnectionEvent::Retired {
                connection: "a".into(),
                reason: RetireReason::CrashLoop,
                failure: None,
            }]
        );
    });
}

/// Strikes belong to the connection, not to one actor: a park counted
/// before a crash still counts after it, so the next park is the second.
#[test]
fn a_restarted_actor_keeps_its_strikes() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry(
            "[supervisor.quarantine]\nbase_cooldown = \"200ms\"\nmax_cooldown = \"5s\"\n",
            "",
        )
        .await;
        let log = EventLog::default();
        log.subscribe(&registry).await;
        upstream.faults().push(mcp_test_support::FaultRule::always(
            mcp_test_support::Match::method("initialize"),
            mcp_test_support::Fault::status(503),
        ));
        let _ = call(&registry, "a", "echo", echo()).await;
        crash(&registry, "a").await;
        restarted(&registry, "a", 1).await;
        // The park was handed over; once it is over, the next exhausted
        // operation parks again: for the second time.
        let parks = || {
            log.events()
                .into_iter()
                .filter_map(|event| match event {
                    ConnectionEvent::Parked { cooldown, .. } => Some(cooldown),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let parked_again = || async {
            let _ = call(&registry, "a", "echo", echo()).await;
            parks().len() >= 2
        };
        assert!(
            mcp_test_support::wait_until_async(WITHIN, parked_again).await,
            "{:?}",
            log.events()
        );
        assert_eq!(
            parks()[..2],
            [
                std::time::Duration::from_millis(200),
                std::time::Duration::from_millis(400)
            ],
            "{:?}",
            log.events()
        );
    });
}

async fn status_of(
    registry: &actix::Addr<Registry>,
    name: &str,
) -> mcp_supervisor::registry::ConnectionStatus {
    let status = registry.send(Status).await.unwrap();
    status.into_iter().find(|s| s.name == name).unwrap()
}

async fn crash(registry: &actix::Addr<Registry>, name: &str) {
    registry
        .send(CrashConnection {
            connection: name.into(),
        })
        .await
        .unwrap();
}

/// How long a restart or retirement, done by message, may take to show on a
/// loaded machine (it shows in milliseconds).
const WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits (bounded) until `name` has been restarted `restarts` times.
async fn restarted(registry: &actix::Addr<Registry>, name: &str, restarts: u32) {
    let done = || async { restarts_of(registry, name).await >= restarts };
    assert!(
        mcp_test_support::wait_until_async(WITHIN, done).await,
        "'{name}' was not restarted {restarts} time(s)"
    );
}

/// Waits (bounded) until `name` is retired.
async fn retired(registry: &actix::Addr<Registry>, name: &str) {
    let done = || async { status_of(registry, name).await.state == ConnectionState::Retired };
    assert!(
        mcp_test_support::wait_until_async(WITHIN, done).await,
        "'{name}' was not retired: {:?}",
        status_of(registry, name).await
    );
}

/// Counters are history: a reset changes the connection's state, never what
/// it has done (Prometheus counters must not go backwards).
#[test]
fn a_reset_keeps_every_counter() {
    run(|| async {
        let (upstream, registry) = upstream_and_registry("", "").await;
        for _ in 0..3 {
            assert_eq!(echo_text(&registry, "a").await, "hi");
        }
        upstream.faults().push(mcp_test_support::FaultRule::always(
            mcp_test_support::Match::tool("lookup"),
            mcp_test_support::Fault::status(503),
        ));
        let parked = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        assert!(
            matches!(parked, CallOutcome::Unavailable { .. }),
            "{parked:?}"
        );
        let before = status_of(&registry, "a").await;
        assert_eq!((before.state, before.parks), (ConnectionState::Parked, 1));
        assert_eq!(before.calls.ok, 3);
        assert!(
            before.failures.get("server").is_some_and(|n| *n >= 1),
            "{before:?}"
        );

        upstream.faults().clear();
        reset(&registry, "a").await;
        let after = status_of(&registry, "a").await;
        assert_eq!(after.state, ConnectionState::Idle);
        assert_eq!(after.parks, before.parks);
        assert_eq!(after.calls, before.calls);
        assert_eq!(after.failures, before.failures);
        assert_eq!(after.durations.count, before.durations.count);

        assert_eq!(echo_text(&registry, "a").await, "hi");
        let later = status_of(&registry, "a").await;
        assert_eq!(later.calls.ok, 4);
    });
}

/// Puts `a` in `state` by failing its `initialize` with `status`, crashes its
/// actor, and checks that the successor is in the same state and refuses a
/// call with no upstream I/O.
async fn a_crash_keeps(status: u16, state: ConnectionState) {
    let (upstream, registry) =
        upstream_and_registry("[supervisor.quarantine]\nbase_cooldown = \"60s\"\n", "").await;
    upstream.faults().push(mcp_test_support::FaultRule::always(
        mcp_test_support::Match::method("initialize"),
        mcp_test_support::Fault::status(status),
    ));
    let failed = call(&registry, "a", "echo", echo()).await;
    assert!(
        matches!(failed, CallOutcome::Unavailable { .. }),
        "{failed:?}"
    );
    assert_eq!(status_of(&registry, "a").await.state, state);
    upstream.faults().clear();
    let initializes = upstream.requests("initialize");

    crash(&registry, "a").await;
    restarted(&registry, "a", 1).await;
    let after = status_of(&registry, "a").await;
    assert_eq!(after.state, state, "{after:?}");
    let refused = call(&registry, "a", "echo", echo()).await;
    assert!(
        matches!(refused, CallOutcome::Unavailable { .. }),
        "{refused:?}"
    );
    assert_eq!(
        upstream.requests("initialize"),
        initializes,
        "no upstream I/O while {state}"
    );
}

/// A park belongs to the connection, not to one actor: an actor that dies
/// while parked hands the park to its successor, which refuses work with no
/// upstream I/O until the cooldown is over.
#[test]
fn a_restarted_actor_keeps_its_park() {
    run(|| a_crash_keeps(503, ConnectionState::Parked));
}

/// A retirement is handed over the same way.
#[test]
fn a_restarted_actor_stays_retired() {
    run(|| a_crash_keeps(401, ConnectionState::Retired));
}

/// Every restart goes through the budget, however soon the next call comes:
/// crashes with a call right after each one (which used to restart the
/// actor on the spot, uncounted) still retire the connection.
#[test]
fn calls_right_after_crashes_do_not_bypass_the_restart_budget() {
    run(|| async {
        let (_upstream, registry) = upstream_and_registry(
            "[supervisor]\nrestart_budget = { restarts = 2, within = \"60s\" }\n",
            "",
        )
        .await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        for _ in 0..3 {
            crash(&registry, "a").await;
            // A value either way: the result, or "stopped" while it restarts.
            let _ = call(&registry, "a", "echo", echo()).await;
        }
        retired(&registry, "a").await;
        let status = status_of(&registry, "a").await;
        assert_eq!(
            (status.state, status.retired_reason, status.restarts),
            (ConnectionState::Retired, Some(RetireReason::CrashLoop), 2),
            "{status:?}"
        );
    });
}
