//! The fleet (docs/FLEET.md): supervisors that share what they learn about
//! an upstream. Two registries in this process, each with its own
//! connection to one real test server, joined through the in-process store
//! (on paused time, so windows end exactly) and through a real
//! `redis-server` (real time: Redis is another process).

mod support;

use std::{sync::Arc, time::Duration};

use actix::{Actor, Addr};
use mcp_supervisor::{
    CallOutcome, ConnectionState,
    config::FleetKey,
    events::ConnectionEvent,
    fleet::{LocalStore, Refusal, Seal, StoreHealth},
    registry::{CallTool, FleetOverview, Registry, Status},
};
use mcp_test_support::{
    Fault, FaultRule, Match, RedisServer, TestServer, TestServerOptions, eventually,
};
use support::*;

/// Short parks for paused time (it moves only when every task waits).
const QUARANTINE: &str = "[supervisor]\ncall_timeout = \"30s\"\n\
     [supervisor.quarantine]\nbase_cooldown = \"200ms\"\nmax_cooldown = \"20s\"\nretire_after = 3\n";
/// Parks that outlast a Redis restart, for real time.
const QUARANTINE_REAL: &str = "[supervisor]\ncall_timeout = \"30s\"\n\
     [supervisor.quarantine]\nbase_cooldown = \"5s\"\nmax_cooldown = \"20s\"\nretire_after = 3\n";

/// How long a test on a real Redis waits for news to cross it (another
/// process; real time): generous for a loaded machine. How soon it arrives
/// is printed, not asserted.
const ACROSS_REDIS: Duration = Duration::from_secs(10);

/// Two registries (two "nodes") with connection `a` to `upstream`, sharing
/// `store`, each with a log of its events.
async fn two_nodes(
    upstream: &TestServer,
    fleet: &str,
    store: Option<LocalStore>,
) -> [(Addr<Registry>, EventLog); 2] {
    let node = |name: &str| {
        let fleet = fleet.replace("NODE", name);
        let quarantine = if store.is_some() {
            QUARANTINE
        } else {
            QUARANTINE_REAL
        };
        let toml = format!(
            "{quarantine}{fleet}{}",
            http_connection("a", &upstream.url(), "")
        );
        match &store {
            Some(store) => Registry::with_fleet_store(config(&toml), Arc::new(store.clone())),
            None => Registry::new(config(&toml)),
        }
        .start()
    };
    let nodes = [node("one"), node("two")];
    let mut out = Vec::new();
    for registry in nodes {
        let log = EventLog::default();
        log.subscribe(&registry).await;
        out.push((registry, log));
    }
    out.try_into().unwrap_or_else(|_| unreachable!())
}

/// Asserts `check` comes true within `within`.
async fn until<F, Fut>(what: &str, within: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    assert!(
        mcp_test_support::wait_until_async(within, check).await,
        "{what}: not within {within:?}"
    );
}

fn parked(log: &EventLog) -> usize {
    log.events()
        .iter()
        .filter(|event| matches!(event, ConnectionEvent::Parked { .. }))
        .count()
}

async fn state(registry: &Addr<Registry>) -> ConnectionState {
    registry.send(Status).await.unwrap()[0].state
}

fn unavailable(outcome: &CallOutcome) -> String {
    match outcome {
        CallOutcome::Unavailable { message, .. } => message.clone(),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// A park on one node parks the connection on the other, which then sends
/// the upstream nothing until it ends; a reset on either revives both.
#[test]
fn a_park_on_one_node_parks_every_node_and_a_reset_revives_every_node() {
    run_paused(|| async {
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let store = LocalStore::default();
        let [(one, _), (two, two_log)] = two_nodes(&upstream, "", Some(store)).await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(503),
        ));
        let first = unavailable(&call(&one, "a", "echo", echo_args()).await);
        assert!(
            first.contains("temporarily unavailable (kind=server, status=503)"),
            "{first}"
        );
        assert_eq!(upstream.requests("initialize"), 3);

        eventually!(parked(&two_log) == 1, Duration::from_millis(50));
        assert_eq!(state(&two).await, ConnectionState::Parked);
        let on_two = unavailable(&call(&two, "a", "echo", echo_args()).await);
        assert!(
            on_two.contains("temporarily unavailable (kind=server, status=503)"),
            "{on_two}"
        );
        assert_eq!(
            upstream.requests("initialize"),
            3,
            "the parked node sent nothing"
        );

        // A person resets it on node two: both are usable at once.
        upstream.faults().clear();
        reset(&two, "a").await;
        until("node one revived", Duration::from_millis(50), || async {
            state(&one).await != ConnectionState::Parked
        })
        .await;
        assert_eq!(echo_text(&one, "a").await, "hi");
        assert_eq!(echo_text(&two, "a").await, "hi");
    });
}

/// `429 Retry-After: 10` on one node: until the window ends, no node sends
/// the upstream anything; a call that can wait waits and then goes
/// through, one that cannot is answered at once.
#[test]
fn a_retry_after_window_holds_every_node() {
    run_paused(|| async {
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, _), (two, two_log)] =
            two_nodes(&upstream, "", Some(LocalStore::default())).await;
        // Both nodes have a session before the 429.
        assert_eq!(echo_text(&one, "a").await, "hi");
        assert_eq!(echo_text(&two, "a").await, "hi");
        upstream.faults().push(FaultRule::once(
            Match::tool("echo"),
            Fault::status(429).with_retry_after_secs(10),
        ));
        let started = tokio::time::Instant::now();
        let waiting_one = actix::spawn({
            let one = one.clone();
            async move { echo_text(&one, "a").await }
        });
        eventually!(
            two_log
                .events()
                .iter()
                .any(|event| matches!(event, ConnectionEvent::Held { .. })),
            Duration::from_millis(50)
        );
        assert_eq!(upstream.tool_calls("echo"), 3, "two calls before, one 429");

        // Cannot wait 10 s: answered at once, nothing sent.
        let impatient = two
            .send(CallTool {
                connection: "a".into(),
                tool: "echo".into(),
                arguments: echo_args(),
                timeout: Some(Duration::from_secs(2)),
                trace: mcp_supervisor::telemetry::TraceParent::current(),
            })
            .await
            .unwrap();
        let message = unavailable(&impatient);
        assert!(message.contains("kind=rate_limit, status=429"), "{message}");
        // Can wait: goes through after the window, as does node one's retry.
        let patient = echo_text(&two, "a").await;
        assert_eq!(patient, "hi");
        assert!(
            started.elapsed() >= Duration::from_millis(9_900),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(waiting_one.await.unwrap(), "hi");
        assert_eq!(
            upstream.tool_calls("echo"),
            5,
            "nothing else during the window"
        );
    });
}

/// A 401 on one node retires the connection everywhere: every node answers
/// "will not be retried" and the upstream sees nothing more.
#[test]
fn an_authorization_failure_on_one_node_retires_every_node() {
    run_paused(|| async {
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, _), (two, two_log)] =
            two_nodes(&upstream, "", Some(LocalStore::default())).await;
        upstream.faults().push(FaultRule::always(
            Match::method("initialize"),
            Fault::status(401),
        ));
        let first = unavailable(&call(&one, "a", "echo", echo_args()).await);
        assert!(first.contains("will not be retried"), "{first}");
        let before = upstream.requests("initialize");
        eventually!(
            two_log
                .events()
                .iter()
                .any(|event| matches!(event, ConnectionEvent::Retired { .. })),
            Duration::from_millis(50)
        );
        let on_two = unavailable(&call(&two, "a", "echo", echo_args()).await);
        assert_eq!(
            on_two,
            "MCP connection 'a' is unavailable (kind=auth, status=401); it will not be retried."
        );
        assert_eq!(upstream.requests("initialize"), before);
    });
}

/// `lookup` (read-only, so retried) answers 503 until its attempts run
/// out: the connection parks on `node`.
async fn park_by_lookups(upstream: &TestServer, node: &Addr<Registry>) {
    upstream
        .faults()
        .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
    let outcome = call(
        node,
        "a",
        "lookup",
        args(&[("key", serde_json::json!("k"))]),
    )
    .await;
    let message = unavailable(&outcome);
    assert!(
        message.contains("temporarily unavailable (kind=server, status=503)"),
        "{message}"
    );
    assert_eq!(state(node).await, ConnectionState::Parked);
}

/// The `[fleet]` table of a node (`NODE` is replaced by its name) on
/// `redis`, with a key file of 32 bytes (kept until the process ends).
fn redis_fleet(redis: &RedisServer) -> String {
    format!(
        "[fleet]\nredis = \"{}\"\nnode = \"NODE\"\nnamespace = \"t\"\nkey_file = {}\n",
        redis.url(),
        toml_string(&fleet_key_file().to_string_lossy())
    )
}

/// Waits until every node has joined the fleet (its store is up).
async fn joined(nodes: &[&Addr<Registry>]) {
    for node in nodes {
        until(
            "a node joined the fleet",
            Duration::from_secs(10),
            || async { matches!(store_health(node).await, StoreHealth::Up { .. }) },
        )
        .await;
    }
}

async fn store_health(registry: &Addr<Registry>) -> StoreHealth {
    registry.send(FleetOverview).await.unwrap().unwrap().store
}

/// Through a real Redis: a park is shared, the other node is listed, and
/// the park's key is in Redis with its expiry; a successful call costs
/// Redis nothing.
#[test]
fn through_redis_a_park_is_shared_and_a_success_costs_no_command() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, _), (two, two_log)] = two_nodes(&upstream, &redis_fleet(&redis), None).await;
        joined(&[&one, &two]).await;
        until("node two saw node one", Duration::from_secs(10), || async {
            two.send(FleetOverview)
                .await
                .unwrap()
                .unwrap()
                .nodes
                .iter()
                .any(|n| n.node == "one")
        })
        .await;

        assert_eq!(echo_text(&one, "a").await, "hi");
        let before = redis.commands_processed().unwrap();
        for _ in 0..20 {
            assert_eq!(echo_text(&one, "a").await, "hi");
        }
        let after = redis.commands_processed().unwrap();
        // Only the INFO itself and at most a few heartbeats (one per node
        // per second) in between, never one per call.
        assert!(after - before <= 1 + 2 * 3, "{before} -> {after}");

        park_by_lookups(&upstream, &one).await;
        eventually!(parked(&two_log) >= 1, ACROSS_REDIS);
        let key = redis.query(&["GET", "t:standing:a"]).unwrap();
        let value = key.text().expect("the park is kept in Redis").to_owned();
        assert!(
            value.contains(r#""kind":"parked""#) && value.contains(r#""node":"one""#),
            "{value}"
        );
        let ttl = redis.query(&["PTTL", "t:standing:a"]).unwrap();
        assert!(
            matches!(ttl, mcp_test_support::redis::Reply::Int(ms) if ms > 0 && ms <= 5_000),
            "{ttl:?}"
        );
    });
}

/// Now, in the wire's milliseconds.
fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Garbage on the channel is refused, counted and harms nothing.
#[test]
fn bad_messages_from_the_store_are_refused_and_counted() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, _), _] = two_nodes(&upstream, &redis_fleet(&redis), None).await;
        joined(&[&one]).await;
        // Sealed with the fleet's key (as a node of this fleet, or someone
        // with its key, would write it), each wrong in its own way; and one
        // not sealed at all.
        let seal = Seal::new(&FleetKey::new(*b"0123456789abcdef0123456789abcdef"), "t");
        let now = now_ms();
        let mut messages: Vec<String> = [
            "not json".to_owned(),
            format!(r#"{{"v":9,"node":"x","at":{now},"seq":1,"kind":"reset","connection":"a"}}"#),
            format!(r#"{{"v":2,"node":"x","at":{now},"seq":2,"kind":"retired","connection":"a","reason":"meteor","failure":null}}"#),
            format!(r#"{{"v":2,"node":"x","at":{now},"seq":3,"kind":"parked","connection":"a","until_ms":99999999999999,"failure":{{"kind":"server","status":503,"reason":"x"}},"strikes":1}}"#),
        ]
        .iter()
        .map(|text| seal.seal(text))
        .collect();
        messages.push(format!(
            r#"{{"v":2,"node":"x","at":{now},"seq":4,"kind":"reset","connection":"a"}}"#
        ));
        // Sealed for another namespace with the same key.
        let elsewhere = Seal::new(&FleetKey::new(*b"0123456789abcdef0123456789abcdef"), "u");
        messages.push(elsewhere.seal(&format!(
            r#"{{"v":2,"node":"x","at":{now},"seq":5,"kind":"reset","connection":"a"}}"#
        )));
        for message in &messages {
            redis.query(&["PUBLISH", "t:events", message]).unwrap();
        }
        until("six refusals", Duration::from_secs(10), || async {
            let view = one.send(FleetOverview).await.unwrap().unwrap();
            view.refused.iter().map(|(_, n)| n).sum::<u64>() == 6
        })
        .await;
        let view = one.send(FleetOverview).await.unwrap().unwrap();
        assert_eq!(
            view.refused,
            vec![
                (Refusal::Unauthenticated, 2),
                (Refusal::Malformed, 1),
                (Refusal::UnknownVersion, 1),
                (Refusal::UnknownName, 1),
                (Refusal::TooFar, 1),
                (Refusal::Unsealed, 0),
                (Refusal::Stale, 0),
                (Refusal::Replayed, 0),
            ]
        );
        assert_eq!(state(&one).await, ConnectionState::Idle);
        assert_eq!(echo_text(&one, "a").await, "hi");
    });
}

/// Redis killed: every call is still a value and healthy calls succeed;
/// what a node learns meanwhile reaches the others once Redis is back.
#[test]
fn without_redis_each_node_works_alone_and_they_converge_when_it_returns() {
    run(|| async {
        let mut redis = RedisServer::start().unwrap();
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, _), (two, two_log)] = two_nodes(&upstream, &redis_fleet(&redis), None).await;
        joined(&[&one, &two]).await;
        assert_eq!(echo_text(&one, "a").await, "hi");

        redis.stop();
        until("node one saw Redis go", Duration::from_secs(10), || async {
            matches!(store_health(&one).await, StoreHealth::Down { .. })
        })
        .await;
        let started = tokio::time::Instant::now();
        for _ in 0..10 {
            assert_eq!(echo_text(&one, "a").await, "hi");
            assert_eq!(echo_text(&two, "a").await, "hi");
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );

        // Node one learns of an outage while Redis is away …
        park_by_lookups(&upstream, &one).await;
        assert_eq!(parked(&two_log), 0);

        redis.restart().unwrap();
        let back = std::time::Instant::now();
        eventually!(parked(&two_log) == 1, ACROSS_REDIS);
        eprintln!(
            "the park reached node two {:?} after Redis returned",
            back.elapsed()
        );
        // And both say the store is up again (heard and written to).
        for node in [&one, &two] {
            until("the store is up again", ACROSS_REDIS, || async {
                matches!(store_health(node).await, StoreHealth::Up { .. })
            })
            .await;
        }
    });
}

/// The ACL user docs/FLEET.md recommends is enough for the fleet: a node
/// logged in as it (user in the URL, password from a file) shares a park.
#[test]
fn the_documented_acl_user_is_enough() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let doc = include_str!("../../../docs/FLEET.md");
        let acl = doc
            .lines()
            .map(str::trim)
            .find(|line| line.starts_with("ACL SETUSER mcp-gateway"))
            .expect("FLEET.md shows an ACL SETUSER line")
            .replace("PASSWORD", "fleet-secret")
            .replace("mcp-supervisor:", "t:");
        let args: Vec<&str> = acl.split_whitespace().collect();
        let answer = redis.query(&args).unwrap();
        assert_eq!(answer.text(), Some("OK"), "{answer:?}");
        let password = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(password.path(), "fleet-secret\n").unwrap();
        let fleet = redis_fleet(&redis).replace("redis://", "redis://mcp-gateway@")
            + &format!(
                "password_file = {}\n",
                toml_string(&password.path().to_string_lossy())
            );
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, _), (two, two_log)] = two_nodes(&upstream, &fleet, None).await;
        joined(&[&one, &two]).await;
        park_by_lookups(&upstream, &one).await;
        until("the park reached node two", ACROSS_REDIS, || async {
            parked(&two_log) == 1
        })
        .await;
        // Reset through the store, which needs DEL as this user.
        reset(&two, "a").await;
        until("the reset reached node one", ACROSS_REDIS, || async {
            state(&one).await != ConnectionState::Parked
        })
        .await;
        let health = store_health(&one).await;
        assert!(matches!(health, StoreHealth::Up { .. }), "{health:?}");
    });
}

/// A reload on one node asks every other node to re-read its own config;
/// a reload done because it was asked is not told again (no echo).
#[test]
fn a_reload_on_one_node_reaches_the_others_once() {
    use mcp_supervisor::registry::{CurrentConfig, OnFleetReload, Reload, ReloadAsked};
    run_paused(|| async {
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, _), (two, _)] = two_nodes(&upstream, "", Some(LocalStore::default())).await;
        let (one_tx, mut one_asked) = tokio::sync::mpsc::unbounded_channel();
        let (two_tx, mut two_asked) = tokio::sync::mpsc::unbounded_channel();
        one.send(OnFleetReload(one_tx)).await.unwrap();
        two.send(OnFleetReload(two_tx)).await.unwrap();

        let config = (*one.send(CurrentConfig).await.unwrap()).clone();
        one.send(Reload(config)).await.unwrap();
        let asked = tokio::time::timeout(Duration::from_millis(50), two_asked.recv()).await;
        assert_eq!(asked, Ok(Some(())), "node two was asked to reload");

        // Node two reloads as asked: nobody is asked again.
        let config = (*two.send(CurrentConfig).await.unwrap()).clone();
        two.send(ReloadAsked(config)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(one_asked.try_recv().is_err(), "node one was not asked");
        assert!(two_asked.try_recv().is_err(), "node two was asked once");
    });
}

/// The same through a real Redis: a reload on node one reaches node two
/// over the channel; node two's reload as asked is not told again. Redis
/// delivers one publisher's messages in order, so once node one has taken
/// a reset node two sent after reloading, any echo of that reload would
/// have reached node one before it.
#[test]
fn through_redis_a_reload_on_one_node_reaches_the_others_once() {
    use mcp_supervisor::registry::{CurrentConfig, OnFleetReload, Reload, ReloadAsked};
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, _), (two, _)] = two_nodes(&upstream, &redis_fleet(&redis), None).await;
        joined(&[&one, &two]).await;
        let (one_tx, mut one_asked) = tokio::sync::mpsc::unbounded_channel();
        let (two_tx, mut two_asked) = tokio::sync::mpsc::unbounded_channel();
        one.send(OnFleetReload(one_tx)).await.unwrap();
        two.send(OnFleetReload(two_tx)).await.unwrap();

        let before = redis.command_calls("publish").unwrap();
        let config = (*one.send(CurrentConfig).await.unwrap()).clone();
        one.send(Reload(config)).await.unwrap();
        let asked = tokio::time::timeout(ACROSS_REDIS, two_asked.recv()).await;
        assert_eq!(asked, Ok(Some(())), "node two was asked to reload");
        assert!(
            redis.command_calls("publish").unwrap() > before,
            "the reload went through Redis"
        );

        // Node two reloads as asked, then resets `a` (a message of its own
        // after the reload, which node one acts on visibly).
        assert_eq!(echo_text(&one, "a").await, "hi");
        assert_eq!(state(&one).await, ConnectionState::Ready);
        let config = (*two.send(CurrentConfig).await.unwrap()).clone();
        two.send(ReloadAsked(config)).await.unwrap();
        reset(&two, "a").await;
        until("node one took node two's reset", ACROSS_REDIS, || async {
            state(&one).await != ConnectionState::Ready
        })
        .await;
        assert!(one_asked.try_recv().is_err(), "node one was not asked");
        assert!(two_asked.try_recv().is_err(), "node two was asked once");
    });
}

/// A real node's message written into Redis again, and an old one sealed
/// with the fleet's key, are refused and counted (stale, replayed): a park
/// a person has reset does not come back, and a heartbeat from long ago
/// does not point anyone at an old gateway (docs/FLEET.md, "On the wire").
#[test]
fn replayed_and_stale_messages_are_refused_and_counted() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let [(one, one_log), (two, _)] = two_nodes(&upstream, &redis_fleet(&redis), None).await;
        joined(&[&one, &two]).await;
        park_by_lookups(&upstream, &two).await;
        eventually!(parked(&one_log) >= 1, ACROSS_REDIS);
        let captured = redis
            .query(&["GET", "t:standing:a"])
            .unwrap()
            .text()
            .expect("the park is kept")
            .to_owned();
        upstream.faults().clear();
        reset(&one, "a").await;
        until(
            "node two took the reset",
            Duration::from_secs(10),
            || async { state(&two).await != ConnectionState::Parked },
        )
        .await;

        // Node two's own park, published again: its number is used.
        redis.query(&["PUBLISH", "t:events", &captured]).unwrap();
        // An old heartbeat of a node, sealed with the key, pointing
        // elsewhere: sent too long ago.
        let seal = Seal::new(&FleetKey::new(*b"0123456789abcdef0123456789abcdef"), "t");
        let old = now_ms() - 120_000;
        let heartbeat = seal.seal(&format!(
            r#"{{"v":2,"node":"ghost","at":{old},"seq":1,"kind":"alive","parked":0,"retired":0,"gateway":"http://10.9.9.9:7300/"}}"#
        ));
        redis.query(&["PUBLISH", "t:events", &heartbeat]).unwrap();
        until("two refusals", Duration::from_secs(10), || async {
            let view = one.send(FleetOverview).await.unwrap().unwrap();
            view.refused.iter().map(|(_, n)| n).sum::<u64>() == 2
        })
        .await;
        let view = one.send(FleetOverview).await.unwrap().unwrap();
        let count = |refusal| view.refused.iter().find(|(r, _)| *r == refusal).unwrap().1;
        assert_eq!(count(Refusal::Replayed), 1, "{:?}", view.refused);
        assert_eq!(count(Refusal::Stale), 1, "{:?}", view.refused);
        assert!(
            view.nodes.iter().all(|n| n.node != "ghost"),
            "{:?}",
            view.nodes
        );
        assert_ne!(
            state(&one).await,
            ConnectionState::Parked,
            "the reset park stays reset"
        );
        assert_eq!(echo_text(&one, "a").await, "hi");
    });
}
