//! The park sequence over real HTTP, with cooldowns injected through config
//! (base 200 ms instead of 30 s): park, longer park, retire; a success resets;
//! subscribers see each transition exactly once; parked/retired do no I/O.
//!
//! The clock is paused (`run_paused`): it moves only when every task waits,
//! so a cooldown ends exactly when the test's clock says, whatever the load,
//! and the test can look at both sides of its end.

mod support;

use std::time::Duration;

use actix::Addr;
use mcp_supervisor::{
    CallOutcome, ConnectionState, FailureKind, RetireReason,
    events::ConnectionEvent,
    registry::{Registry, Status},
};
use mcp_test_support::{Fault, FaultRule, Match, TestServer};
use serde_json::json;
use support::*;

const QUARANTINE: &str =
    "[supervisor.quarantine]\nbase_cooldown = \"200ms\"\nmax_cooldown = \"5s\"\nretire_after = 3\n";

/// A test server, a registry with [`QUARANTINE`] and connection `a` to it, and
/// a log of the registry's events from the start.
async fn parkable_connection() -> (TestServer, Addr<Registry>, EventLog) {
    let (upstream, registry) = upstream_and_registry(QUARANTINE, "").await;
    let log = EventLog::default();
    log.subscribe(&registry).await;
    (upstream, registry, log)
}

/// Drops the noise of `Connecting`/`Ready`, keeps the transitions under test.
fn transitions(log: &EventLog) -> Vec<String> {
    log.events()
        .into_iter()
        .filter_map(|event| match event {
            ConnectionEvent::Parked { cooldown, .. } => {
                Some(format!("parked {}ms", cooldown.as_millis()))
            }
            ConnectionEvent::Revived { .. } => Some("revived".into()),
            ConnectionEvent::Retired { reason, .. } => Some(format!("retired {reason}")),
            ConnectionEvent::Ready { revived, .. } => Some(format!("ready revived={revived}")),
            _ => None,
        })
        .collect()
}

/// The message of an `echo` call on `a` answered `Unavailable` (parked or
/// retired); any other answer fails the test.
async fn unavailable_echo(registry: &Addr<Registry>) -> String {
    match call(registry, "a", "echo", echo_args()).await {
        CallOutcome::Unavailable { message, .. } => message,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// Sleeps `cooldown` less 1 ms: the connection must still be parked.
async fn sleep_to_just_before(cooldown: Duration) {
    tokio::time::sleep(cooldown - Duration::from_millis(1)).await;
}

#[test]
fn park_longer_park_then_retire_and_no_io_while_parked_or_retired() {
    run_paused(|| async {
        let (upstream, registry, log) = parkable_connection().await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(503),
        ));

        let first = unavailable_echo(&registry).await;
        assert!(first.contains("temporarily unavailable (kind=server, status=503)"));
        assert_eq!(upstream.requests("initialize"), 3);

        // Parked for the whole 200 ms: answered at once, nothing reaches
        // the upstream.
        let parked_at = tokio::time::Instant::now();
        let during = unavailable_echo(&registry).await;
        assert!(during.contains("temporarily unavailable"));
        assert_eq!(parked_at.elapsed(), Duration::ZERO, "answered at once");
        sleep_to_just_before(Duration::from_millis(200)).await;
        let still = unavailable_echo(&registry).await;
        assert!(still.contains("temporarily unavailable"));
        assert_eq!(upstream.requests("initialize"), 3);

        // The cooldown over, the next call revives: three more attempts
        // fail, and the park doubles.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let second = unavailable_echo(&registry).await;
        assert!(second.contains("temporarily unavailable"));
        assert_eq!(upstream.requests("initialize"), 6);

        sleep_to_just_before(Duration::from_millis(400)).await;
        let still = unavailable_echo(&registry).await;
        assert!(still.contains("temporarily unavailable"));
        assert_eq!(upstream.requests("initialize"), 6);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let third = unavailable_echo(&registry).await;
        assert_eq!(
            third,
            "MCP connection 'a' is unavailable (kind=server, status=503); it will not be retried."
        );
        assert_eq!(upstream.requests("initialize"), 9);

        // Retired: no I/O at all, even long after (past `max_cooldown`,
        // when a park would have ended).
        tokio::time::sleep(Duration::from_secs(6)).await;
        let after = unavailable_echo(&registry).await;
        assert!(after.contains("will not be retried"));
        assert_eq!(upstream.requests("initialize"), 9);
        assert_eq!(upstream.requests("tools/list"), 0);
        assert_eq!(upstream.requests("tools/call"), 0);
        let status = registry.send(Status).await.unwrap();
        assert_eq!(
            (status[0].state, status[0].dead),
            (ConnectionState::Retired, true)
        );
        assert_eq!(
            status[0].retired_reason,
            Some(RetireReason::Failure(FailureKind::Server))
        );

        // Each transition published exactly once, in order.
        mcp_test_support::eventually!(transitions(&log).len() >= 5);
        assert_eq!(
            transitions(&log),
            vec![
                "parked 200ms",
                "revived",
                "parked 400ms",
                "revived",
                "retired server"
            ]
        );

        // Reset brings it back once the upstream is healthy.
        upstream.faults().clear();
        reset(&registry, "a").await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
    });
}

#[test]
fn a_success_in_between_resets_the_park_count() {
    run_paused(|| async {
        let (upstream, registry, log) = parkable_connection().await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        for round in 0..3 {
            // A read-only call failing 503 three times parks the connection.
            upstream.faults().set(vec![FaultRule::always(
                Match::tool("lookup"),
                Fault::status(503),
            )]);
            let outcome = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
            let CallOutcome::Unavailable { failure, .. } = &outcome else {
                panic!("{outcome:?}")
            };
            assert_eq!(failure.kind, FailureKind::Server, "round {round}");
            upstream.faults().clear();
            // Past the 200 ms park.
            tokio::time::sleep(Duration::from_millis(200)).await;
            // The revive succeeds: strikes reset.
            assert_eq!(echo_text(&registry, "a").await, "hi", "round {round}");
        }
        assert_eq!(upstream.tool_calls("lookup"), 9);
        let parks: Vec<String> = transitions(&log)
            .into_iter()
            .filter(|t| t.starts_with("parked"))
            .collect();
        assert_eq!(
            parks,
            vec!["parked 200ms"; 3],
            "never escalated: each park followed a success"
        );
    });
}

/// A call's own success resets the strikes, not only a revive's listing:
/// strikes the fleet told of with a park that had already ended (nothing
/// here parked, so nothing is rebuilt or listed again) are forgotten once
/// a call succeeds, and the next park is a first one.
#[test]
fn a_calls_own_success_resets_the_strikes() {
    use mcp_supervisor::fleet::{Learned, News, Shared};
    run_paused(|| async {
        let (upstream, registry, log) = parkable_connection().await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        let ended = Shared::Parked {
            until: std::time::SystemTime::now() - Duration::from_secs(1),
            failure: mcp_supervisor::Failure::new(FailureKind::Server, "parked on another node"),
            strikes: 2,
        };
        registry
            .send(Learned {
                connection: "a".into(),
                news: News::Standing(ended),
            })
            .await
            .unwrap();
        // Taken on before this call is admitted (the same mailbox), and
        // forgotten with its success.
        assert_eq!(echo_text(&registry, "a").await, "hi");
        upstream.faults().set(vec![FaultRule::always(
            Match::tool("lookup"),
            Fault::status(503),
        )]);
        let outcome = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        assert!(
            matches!(outcome, CallOutcome::Unavailable { .. }),
            "{outcome:?}"
        );
        assert_eq!(
            parks(&log),
            vec![(FailureKind::Server, Duration::from_millis(200), 1)],
            "a first park: the call's success forgot the fleet's strikes"
        );
    });
}

/// Several callers fail together on one failed rebuild: one park, one
/// strike (the connection actor answers the later reports with the park it
/// already has), so the next park is the second, not a later one.
#[test]
fn callers_failing_together_make_one_park_and_one_strike() {
    run_paused(|| async {
        let (upstream, registry) = upstream_and_registry(
            &format!("{QUARANTINE}[supervisor]\n"),
            "max_concurrent_calls = 8\n",
        )
        .await;
        let log = EventLog::default();
        log.subscribe(&registry).await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(503),
        ));
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let registry = registry.clone();
                actix_rt::spawn(async move { unavailable_echo(&registry).await })
            })
            .collect();
        for caller in callers {
            caller.await.unwrap();
        }
        mcp_test_support::eventually!(!transitions(&log).is_empty());
        assert_eq!(transitions(&log), vec!["parked 200ms"]);
        assert_eq!(registry.send(Status).await.unwrap()[0].parks, 1);
        // The cooldown over, the next exhausted operation is the second park.
        tokio::time::sleep(Duration::from_millis(200)).await;
        unavailable_echo(&registry).await;
        mcp_test_support::eventually!(transitions(&log).len() >= 3);
        assert_eq!(
            transitions(&log),
            vec!["parked 200ms", "revived", "parked 400ms"]
        );
    });
}

/// Each park's failure kind, cooldown and strike count, in order.
fn parks(log: &EventLog) -> Vec<(FailureKind, Duration, u32)> {
    log.events()
        .into_iter()
        .filter_map(|event| match event {
            ConnectionEvent::Parked {
                failure,
                cooldown,
                strikes,
                ..
            } => Some((failure.kind, cooldown, strikes)),
            _ => None,
        })
        .collect()
}

/// A rate limit parks for its `Retry-After` but is no strike: each 429 that
/// outlasts the attempts parks the connection for 1 s (parked, answered at
/// once, nothing sent meanwhile), and after four of them the first server
/// failure is still a first park.
#[test]
fn rate_limit_parks_add_no_strike() {
    run_paused(|| async {
        let (upstream, registry, log) = parkable_connection().await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(429).with_retry_after_secs(1),
        ));
        for round in 0..4 {
            let message = unavailable_echo(&registry).await;
            assert!(
                message.contains("temporarily unavailable (kind=rate_limit, status=429)"),
                "{message}"
            );
            let status = &registry.send(Status).await.unwrap()[0];
            assert_eq!(status.state, ConnectionState::Parked, "round {round}");
            assert_eq!(status.parks, round + 1);
            // Parked: answered at once, and the upstream hears nothing.
            let sent = upstream.requests("initialize");
            let asked = tokio::time::Instant::now();
            let during = unavailable_echo(&registry).await;
            assert!(during.contains("kind=rate_limit, status=429"), "{during}");
            assert_eq!(asked.elapsed(), Duration::ZERO, "answered at once");
            assert_eq!(upstream.requests("initialize"), sent, "round {round}");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        upstream.faults().clear();
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(503),
        ));
        unavailable_echo(&registry).await;
        mcp_test_support::eventually!(transitions(&log).iter().any(|t| t == "parked 200ms"));
        let one_second = Duration::from_secs(1);
        assert_eq!(
            parks(&log),
            vec![
                (FailureKind::RateLimit, one_second, 0),
                (FailureKind::RateLimit, one_second, 0),
                (FailureKind::RateLimit, one_second, 0),
                (FailureKind::RateLimit, one_second, 0),
                (FailureKind::Server, Duration::from_millis(200), 1),
            ]
        );
        assert!(
            !transitions(&log).iter().any(|t| t.starts_with("retired")),
            "{:?}",
            transitions(&log)
        );
    });
}

/// Whatever its callers race, a connection that parks takes no more calls:
/// through a real gateway, eight clients call at once (2025 sessions on the
/// direct path, where a ready connection's calls go past its mailbox (its bypass) without
/// a message to its actor) until the connection refuses; once every call in
/// flight has its answer, eight times twenty more are answered without one
/// reaching the upstream.
#[test]
fn a_parked_connection_takes_no_call_whatever_its_callers_race() {
    use std::sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    };
    use support::raw::{exchange, http};

    const CALLERS: u64 = 8;
    run(|| async {
        let upstream = TestServer::start(Default::default()).await.unwrap();
        let quarantine = "[supervisor.quarantine]\nbase_cooldown = \"60s\"\n\
                              max_cooldown = \"120s\"\nretire_after = 5\n";
        // Its calls are retried, so failing ones park it.
        let retried = "retry_calls = \"always\"";
        let toml = format!(
            "{quarantine}{}",
            http_connection("a", &upstream.url(), retried)
        );
        let gateway = ServedGateway::start(config(&toml)).await;
        let client = http();
        let sessions = sessions_that_called(&client, &gateway.url, CALLERS).await;
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("echo"), Fault::status(503)));
        // Every caller calls until one is told the connection refuses.
        let refusing = Arc::new(AtomicBool::new(false));
        let callers = sessions.iter().map(|session| {
            let (client, url, refusing) = (client.clone(), gateway.url.clone(), refusing.clone());
            let session = session.clone();
            actix_rt::spawn(async move {
                let mut id = 2;
                while !refusing.load(Ordering::SeqCst) {
                    let answer = exchange(&client, &url, &session, &echo(id)).await;
                    if answer
                        .last()
                        .unwrap()
                        .to_string()
                        .contains("temporarily unavailable")
                    {
                        refusing.store(true, Ordering::SeqCst);
                    }
                    id += 1;
                }
                (client, url, session)
            })
        });
        let callers = futures::future::join_all(callers).await;
        let status = gateway.registry.send(Status).await.unwrap();
        assert_eq!(status[0].state, ConnectionState::Parked);
        let seen = upstream.tool_calls("echo");
        let again = callers.into_iter().map(|caller| {
            let (client, url, session) = caller.unwrap();
            actix_rt::spawn(async move {
                for id in 100..120 {
                    let answer = exchange(&client, &url, &session, &echo(id)).await;
                    let answer = answer.last().unwrap().to_string();
                    assert!(answer.contains("temporarily unavailable"), "{answer}");
                }
            })
        });
        for caller in futures::future::join_all(again).await {
            caller.unwrap();
        }
        assert_eq!(
            upstream.tool_calls("echo"),
            seen,
            "no call reached the upstream once it refused"
        );
    });
}

/// A connection holding a `Retry-After` window keeps its session, and no
/// call is sent before the window ends: through a real gateway, a call told
/// 429 with `Retry-After: 2` waits to try again, and the calls seven other
/// clients make once the connection holds wait too (none passes the actor's
/// mailbox while the hold lasts), then all are answered.
#[test]
fn a_held_connection_sends_no_call_before_its_window_ends() {
    use support::raw::{exchange, http};
    run(|| async {
        let upstream = TestServer::start(Default::default()).await.unwrap();
        let toml = http_connection("a", &upstream.url(), "retry_calls = \"always\"");
        let gateway = ServedGateway::start(config(&toml)).await;
        let client = http();
        let sessions = sessions_that_called(&client, &gateway.url, 8).await;
        let log = EventLog::default();
        log.subscribe(&gateway.registry).await;
        upstream.faults().push(FaultRule::once(
            Match::tool("echo"),
            Fault::status(429).with_retry_after_secs(2),
        ));
        let call = |session: &String| {
            let (client, url, session) = (client.clone(), gateway.url.clone(), session.clone());
            actix_rt::spawn(async move {
                let answer = exchange(&client, &url, &session, &echo(2)).await;
                answer.last().unwrap().clone()
            })
        };
        let mut calls = vec![call(&sessions[0])];
        let held = |log: &EventLog| {
            log.events()
                .iter()
                .any(|event| matches!(event, ConnectionEvent::Held { .. }))
        };
        while !held(&log) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let held_at = tokio::time::Instant::now();
        calls.extend(sessions[1..].iter().map(call));
        tokio::time::sleep_until(held_at + Duration::from_millis(1200)).await;
        assert_eq!(
            upstream.tool_calls("echo"),
            8 + 1,
            "only the call told to wait reached the upstream inside the window"
        );
        for call in futures::future::join_all(calls).await {
            let answer = call.unwrap();
            assert_eq!(answer["result"]["isError"], false, "{answer}");
        }
        assert_eq!(
            upstream.tool_calls("echo"),
            8 + 1 + 8,
            "all sent once it ended"
        );
    });
}

/// A call of connection `a`'s `echo` through the gateway.
fn echo(id: u64) -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "a__echo", "arguments": {"text": "hi"}}})
}

/// `count` clients' 2025 sessions on the gateway at `url`, each of which
/// has called `a`'s `echo` once with success.
async fn sessions_that_called(client: &reqwest::Client, url: &str, count: u64) -> Vec<String> {
    use support::raw::{exchange, session};
    let mut sessions = Vec::new();
    for _ in 0..count {
        let session = session(client, url, json!({})).await;
        let answer = exchange(client, url, &session, &echo(1)).await;
        assert_eq!(answer.last().unwrap()["result"]["isError"], false);
        sessions.push(session);
    }
    sessions
}
