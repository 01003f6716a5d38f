//! Probes (docs/SUPERVISION.md, "Probes"): a connection parked for a failure
//! is asked in the background whether its upstream is back, and revived at
//! once when it is, with no client call; a failed probe adds no strike; the
//! probes back off, stop at `max_probes` and never go past the park's end;
//! `probe = "off"`, a rate-limit park and a retirement are never probed.
//!
//! HTTP tests run on the paused clock (`run_paused`): every timer fires when
//! the test's clock says. The stdio test runs in real time (its upstream is a
//! child process).

mod support;

use std::time::Duration;

use actix::Addr;
use mcp_supervisor::{
    CallOutcome, ConnectionState, FailureKind,
    events::ConnectionEvent,
    registry::{ConnectionStatus, Registry, Status},
};
use mcp_test_support::{Fault, FaultRule, Match, TestServer, test_server_binary};
use support::*;

/// The only connection's status.
async fn status(registry: &Addr<Registry>) -> ConnectionStatus {
    registry.send(Status).await.unwrap().remove(0)
}

/// Parks `a` with `initialize` answering 503 until told otherwise (three
/// attempts, then the first park).
async fn parked_by_503(settings: &str, extra: &str) -> (TestServer, Addr<Registry>, EventLog) {
    let (upstream, registry) = upstream_and_registry(settings, extra).await;
    let log = EventLog::default();
    log.subscribe(&registry).await;
    upstream.faults().push(FaultRule::always(
        Match::method("initialize"),
        Fault::status(503),
    ));
    match call(&registry, "a", "echo", echo_args()).await {
        CallOutcome::Unavailable { failure, .. } => assert_eq!(failure.kind, FailureKind::Server),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(status(&registry).await.state, ConnectionState::Parked);
    assert_eq!(upstream.requests("initialize"), 3);
    (upstream, registry, log)
}

/// `a` after a call met `initialize` answering `code` on every attempt
/// (429 without `Retry-After`: parked for `rate_limit`; 401: retired).
async fn refused_with(code: u16) -> (TestServer, Addr<Registry>) {
    let (upstream, registry) = upstream_and_registry("", "").await;
    upstream.faults().push(FaultRule::always(
        Match::method("initialize"),
        Fault::status(code),
    ));
    let outcome = call(&registry, "a", "echo", echo_args()).await;
    assert!(
        matches!(outcome, CallOutcome::Unavailable { .. }),
        "{outcome:?}"
    );
    (upstream, registry)
}

/// The parks' cooldowns and revivals in `log`, in order.
fn standing(log: &EventLog) -> Vec<String> {
    log.events()
        .into_iter()
        .filter_map(|event| match event {
            ConnectionEvent::Parked { cooldown, .. } => {
                Some(format!("parked {}s", cooldown.as_secs()))
            }
            ConnectionEvent::Revived { .. } => Some("revived".into()),
            ConnectionEvent::Ready { revived: true, .. } => Some("ready".into()),
            ConnectionEvent::Retired { reason, .. } => Some(format!("retired {reason}")),
            _ => None,
        })
        .collect()
}

#[test]
fn an_upstream_back_after_8_s_is_ready_within_5_s_with_no_call_and_no_strike() {
    run_paused(|| async {
        // Retired at the second park: a strike per failed probe would
        // retire it here.
        let settings = "[supervisor.quarantine]\nretire_after = 2\n";
        let (upstream, registry, log) = parked_by_503(settings, "").await;
        let parked_at = tokio::time::Instant::now();

        // 503 for 8 s (probes at 2 s and 6 s fail), then healthy.
        tokio::time::sleep(Duration::from_secs(8)).await;
        assert_eq!(upstream.requests("initialize"), 5, "two probes so far");
        let parked = status(&registry).await;
        assert_eq!((parked.state, parked.parks), (ConnectionState::Parked, 1));
        upstream.faults().clear();
        let recovered = tokio::time::Instant::now();
        while status(&registry).await.state != ConnectionState::Ready {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let back = recovered.elapsed();
        assert!(
            back <= Duration::from_secs(5),
            "ready {back:?} after recovery"
        );
        // The third probe, 5 s after the second (the cap), revived it (the
        // loop above looks every 100 ms).
        let revived = parked_at.elapsed();
        assert!(revived > ms(11_000) && revived <= ms(11_100), "{revived:?}");
        let now = status(&registry).await;
        assert_eq!((now.probes, now.parks), (3, 1));
        assert_eq!(upstream.requests("initialize"), 6);
        assert_eq!(upstream.requests("tools/call"), 0, "no call was needed");
        assert_eq!(standing(&log), ["parked 30s", "revived", "ready"]);

        // A session with calls is the one the probe brought.
        assert_eq!(echo_text(&registry, "a").await, "hi");
    });
}

#[test]
fn probes_back_off_and_never_go_past_the_park_or_max_probes() {
    run_paused(|| async {
        // A 10 s park, probes 1 s, 2 s, 4 s apart: at 1, 3, 7 s; the next
        // would be at 11 s, after the park.
        let settings = "[supervisor]\nprobe_after = \"1s\"\nprobe_every = \"4s\"\n\
                        [supervisor.quarantine]\nbase_cooldown = \"10s\"\n";
        let (upstream, registry, _log) = parked_by_503(settings, "").await;
        let parked_at = tokio::time::Instant::now();
        for (at, probes) in [(900, 0), (1_100, 1), (2_900, 1), (3_100, 2), (7_100, 3)] {
            tokio::time::sleep_until(parked_at + ms(at)).await;
            assert_eq!(upstream.requests("initialize"), 3 + probes, "at {at} ms");
        }
        tokio::time::sleep(Duration::from_millis(9_800)).await;
        assert_eq!(upstream.requests("initialize"), 6, "none past the park");
        assert_eq!(status(&registry).await.probes, 3);

        // `max_probes` stops them sooner.
        let settings = "[supervisor]\nprobe_after = \"1s\"\nmax_probes = 2\n";
        let (upstream, registry, _log) = parked_by_503(settings, "").await;
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert_eq!(upstream.requests("initialize"), 5);
        assert_eq!(status(&registry).await.state, ConnectionState::Parked);
    });
}

/// A longer park taken on from the fleet while parked (another node parked
/// it later) is the same outage: the probes made so far count towards
/// `max_probes`, so the upstream is not probed afresh by every park that
/// reaches the node.
#[test]
fn a_longer_park_from_the_fleet_does_not_start_the_probes_again() {
    use mcp_supervisor::fleet::{Learned, News, Shared};

    run_paused(|| async {
        let settings = "[supervisor]\nprobe_after = \"1s\"\nprobe_every = \"1s\"\n\
                        max_probes = 2\n[supervisor.quarantine]\nbase_cooldown = \"10s\"\n";
        let (upstream, registry, _log) = parked_by_503(settings, "").await;
        tokio::time::sleep(ms(1_100)).await;
        assert_eq!(upstream.requests("initialize"), 4, "the first probe");

        let longer = Shared::Parked {
            until: std::time::SystemTime::now() + Duration::from_secs(20),
            failure: mcp_supervisor::Failure::new(FailureKind::Server, "parked on another node"),
            strikes: 1,
        };
        registry
            .send(Learned {
                connection: "a".into(),
                news: News::Standing(longer),
            })
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(15)).await;
        assert_eq!(status(&registry).await.state, ConnectionState::Parked);
        assert_eq!(
            upstream.requests("initialize"),
            5,
            "one more probe, then max_probes"
        );
        assert_eq!(status(&registry).await.probes, 2);
    });
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn probe_off_on_a_connection_leaves_the_park_to_its_end() {
    run_paused(|| async {
        let (upstream, registry, _log) = parked_by_503("", "probe = \"off\"\n").await;
        upstream.faults().clear();
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert_eq!(upstream.requests("initialize"), 3, "no probe");
        assert_eq!(status(&registry).await.state, ConnectionState::Parked);
        // The first use after the park revives it, as before.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
    });
}

#[test]
fn a_rate_limit_park_and_a_retirement_are_never_probed() {
    run_paused(|| async {
        let (upstream, registry) = refused_with(429).await;
        let parked = status(&registry).await;
        assert_eq!(parked.state, ConnectionState::Parked);
        let sent = upstream.requests("initialize");
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert_eq!(
            upstream.requests("initialize"),
            sent,
            "the upstream asked for quiet"
        );
        assert_eq!(status(&registry).await.probes, 0);

        // 401: retired at once, never probed.
        let (upstream, registry) = refused_with(401).await;
        assert_eq!(status(&registry).await.state, ConnectionState::Retired);
        let sent = upstream.requests("initialize");
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(upstream.requests("initialize"), sent);
    });
}

#[test]
fn a_stdio_child_that_died_idle_is_restarted_by_a_probe() {
    run(|| async {
        // The child is killed while idle: its death parks the connection.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let command = test_server_binary().display().to_string();
        let toml = format!(
            "[supervisor]\nprobe_after = \"300ms\"\n{}",
            stdio_connection(
                "a",
                &command,
                &["--pid-file", pid_file.to_str().unwrap()],
                ""
            )
        );
        let registry = mcp_supervisor::registry::Registry::new(config(&toml));
        let registry = actix::Actor::start(registry);
        let log = EventLog::default();
        log.subscribe(&registry).await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        let first = std::fs::read_to_string(&pid_file).unwrap();
        let killed = std::process::Command::new("kill")
            .args(["-9", first.trim()])
            .status()
            .unwrap();
        assert!(killed.success());
        mcp_test_support::eventually!(
            standing(&log).starts_with(&["parked 30s".into(), "revived".into(), "ready".into()]),
            Duration::from_secs(10)
        );
        assert!(status(&registry).await.probes >= 1);
        let dead = log.events().into_iter().find_map(|event| match event {
            ConnectionEvent::Parked { failure, .. } => Some(failure.kind),
            _ => None,
        });
        assert_eq!(dead, Some(FailureKind::Transport));
        // A new child answers.
        assert_ne!(std::fs::read_to_string(&pid_file).unwrap(), first);
        assert_eq!(echo_text(&registry, "a").await, "hi");
    });
}

/// Three nodes of a fleet over `redis`, each with connection `a` to
/// `upstream` and `settings` (a `[supervisor]` table), all joined.
async fn three_nodes(
    redis: &mcp_test_support::RedisServer,
    upstream: &TestServer,
    settings: &str,
) -> [Addr<Registry>; 3] {
    let node = |name: &str| {
        let toml = format!(
            "{settings}[fleet]\nredis = \"{}\"\nnode = \"{name}\"\nnamespace = \"p\"\nkey_file = {}\n{}",
            redis.url(),
            toml_string(&fleet_key_file().to_string_lossy()),
            http_connection("a", &upstream.url(), ""),
        );
        actix::Actor::start(Registry::new(config(&toml)))
    };
    let nodes = [node("n1"), node("n2"), node("n3")];
    for registry in &nodes {
        joined_fleet(registry).await;
    }
    nodes
}

/// Parks `a` on `nodes[0]` with `initialize` answering 503, and waits
/// until every node has taken the park on.
async fn park_everywhere(upstream: &TestServer, nodes: &[Addr<Registry>]) {
    upstream.faults().push(FaultRule::always(
        Match::method("initialize"),
        Fault::status(503),
    ));
    let outcome = call(&nodes[0], "a", "echo", echo_args()).await;
    assert!(
        matches!(outcome, CallOutcome::Unavailable { .. }),
        "{outcome:?}"
    );
    for registry in nodes {
        let parked = mcp_test_support::wait_until_async(Duration::from_secs(5), || async {
            status(registry).await.state == ConnectionState::Parked
        })
        .await;
        assert!(parked, "the park reached every node");
    }
}

/// Waits until `a` is ready on every node, at most `within`.
async fn ready_everywhere(nodes: &[Addr<Registry>], within: Duration) {
    for registry in nodes {
        let ready = mcp_test_support::wait_until_async(within, || async {
            status(registry).await.state == ConnectionState::Ready
        })
        .await;
        assert!(ready, "every node ready within {within:?}");
    }
}

/// Three nodes over a real `redis-server`, one upstream answering 503:
/// one node probes for the fleet at a time (the lease), and when the
/// upstream recovers, every node is ready within 5 s without a call.
#[test]
fn in_a_fleet_one_node_probes_at_a_time_and_a_recovery_revives_every_node() {
    run(|| async {
        let redis = mcp_test_support::RedisServer::start().unwrap();
        let upstream = TestServer::start(mcp_test_support::TestServerOptions::legacy())
            .await
            .unwrap();
        let settings = "[supervisor]\nprobe_after = \"500ms\"\nprobe_every = \"1s\"\n";
        let nodes = three_nodes(&redis, &upstream, settings).await;
        park_everywhere(&upstream, &nodes).await;
        let parked_at = std::time::Instant::now();
        let before = upstream.requests("initialize");

        tokio::time::sleep(Duration::from_secs(4)).await;
        let probes = upstream.requests("initialize") - before;
        let elapsed = parked_at.elapsed().as_secs_f64();
        let mut told = 0;
        for registry in &nodes {
            told += status(registry).await.probes;
        }
        eprintln!("{probes} probes in {elapsed:.1} s from three nodes");
        // One per second for the fleet (slots at 0.5, 1.5, 2.5, 3.5 s, one
        // more on a slow machine), not one per second per node.
        assert!(
            (3..=(elapsed as u64 + 2)).contains(&probes),
            "{probes} probes in {elapsed:.1} s"
        );
        assert_eq!(told, probes, "each probe counted on the node that sent it");

        upstream.faults().clear();
        let recovered = std::time::Instant::now();
        ready_everywhere(&nodes, Duration::from_secs(5)).await;
        eprintln!(
            "every node ready {:?} after the recovery",
            recovered.elapsed()
        );
        assert_eq!(upstream.requests("tools/call"), 0, "no call was needed");
        for registry in &nodes {
            assert_eq!(echo_text(registry, "a").await, "hi");
        }
    });
}

/// Without probes, a park's end on three nodes: the first uses of all
/// three at once send one attempt to the upstream, not one per node; when
/// it answers, the two others are revived by the news, with no call.
#[test]
fn in_a_fleet_the_first_use_after_a_park_tries_once_for_every_node() {
    run(|| async {
        let redis = mcp_test_support::RedisServer::start().unwrap();
        let upstream = TestServer::start(mcp_test_support::TestServerOptions::legacy())
            .await
            .unwrap();
        let settings = "[supervisor]\nprobe = \"off\"\nmax_attempts = 1\n\
                        [supervisor.quarantine]\nbase_cooldown = \"2s\"\n";
        let nodes = three_nodes(&redis, &upstream, settings).await;
        park_everywhere(&upstream, &nodes).await;
        tokio::time::sleep(Duration::from_millis(2_100)).await;

        // Still failing: three first uses at once, one attempt.
        let before = upstream.requests("initialize");
        let calls = nodes
            .iter()
            .map(|registry| call(registry, "a", "echo", echo_args()));
        for outcome in futures::future::join_all(calls).await {
            assert!(
                matches!(outcome, CallOutcome::Unavailable { .. }),
                "{outcome:?}"
            );
        }
        assert_eq!(
            upstream.requests("initialize") - before,
            1,
            "one node tried"
        );

        // Healthy again: after the next park, one node's call revives all.
        upstream.faults().clear();
        for registry in &nodes {
            let over = mcp_test_support::wait_until_async(Duration::from_secs(10), || async {
                let now = status(registry).await;
                now.parked_until
                    .is_none_or(|until| until <= std::time::SystemTime::now())
            })
            .await;
            assert!(over, "the park ends");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(echo_text(&nodes[1], "a").await, "hi");
        ready_everywhere(&nodes, Duration::from_secs(5)).await;
        assert_eq!(
            upstream.tool_calls("echo"),
            1,
            "the others were revived without a call"
        );
    });
}

/// The fleet's word that the upstream is back (`revived`) ends a park a
/// probe would end, at once and with a session of this node's own; a
/// rate-limit park of this node runs on to its time.
#[test]
fn news_of_a_revival_ends_a_failure_park_but_not_a_rate_limit_one() {
    use mcp_supervisor::fleet::{Learned, News};

    run_paused(|| async {
        let revived = || Learned {
            connection: "a".into(),
            news: News::Revived,
        };
        let (upstream, registry, _log) = parked_by_503("", "probe = \"off\"\n").await;
        upstream.faults().clear();
        registry.send(revived()).await.unwrap();
        let ready = mcp_test_support::wait_until_async(Duration::from_secs(1), || async {
            status(&registry).await.state == ConnectionState::Ready
        })
        .await;
        assert!(ready, "revived by the news, without a call");
        assert_eq!(upstream.requests("initialize"), 4, "its own session");

        let (upstream, registry) = refused_with(429).await;
        let sent = upstream.requests("initialize");
        registry.send(revived()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(status(&registry).await.state, ConnectionState::Parked);
        assert_eq!(upstream.requests("initialize"), sent);
    });
}
