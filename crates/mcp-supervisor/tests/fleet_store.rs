//! The fleet's store primitives on a real `redis-server` (docs/FLEET.md,
//! "OAuth tokens across nodes"): the renewal lock every node of a fleet
//! takes before it asks for new tokens (`Store::try_lock`, `Store::unlock`,
//! `SET key holder NX PX ttl` and a compare-and-delete script). Each "node"
//! is a `RedisStore` of its own (its own connection), and what Redis holds
//! is read back with the test's own RESP client
//! (`mcp_test_support::redis`), not the supervisor's.
//!
//! Real time: Redis expires keys on its own clock, in another process.

use std::time::{Duration, Instant};

use mcp_supervisor::{
    config::{FleetKey, FleetSettings},
    fleet::{RedisStore, Store},
};
use mcp_test_support::{RedisServer, redis::Reply, wait_until_async};

/// A node's store on `redis`, namespace `t`.
fn store(redis: &RedisServer, node: &str) -> RedisStore {
    RedisStore::new(&FleetSettings {
        redis: url::Url::parse(&redis.url()).unwrap(),
        password: None,
        key: FleetKey::new([7; 32]),
        node: node.to_owned(),
        namespace: "t".to_owned(),
        max_clock_skew: Duration::from_secs(2),
        advertise: None,
    })
    .unwrap()
}

/// What Redis holds under `key` (the full key, namespace included).
fn held(redis: &RedisServer, key: &str) -> Reply {
    redis.query(&["GET", key]).unwrap()
}

fn holder(name: &str) -> Reply {
    Reply::Text(name.to_owned())
}

const TTL: Duration = Duration::from_secs(10);

/// Sixteen attempts at once from two nodes (eight each, each its own
/// holder), five times over: each time exactly one takes the lock, and the
/// lock names it.
#[tokio::test]
async fn a_lock_is_taken_once_across_two_holders() {
    let redis = RedisServer::start().unwrap();
    let (one, two) = (store(&redis, "one"), store(&redis, "two"));
    for round in 0..5 {
        let nodes = [&one, &two];
        let attempts = (0..16).map(|n| {
            let node = nodes[n % 2];
            let name = format!("holder-{round}-{n}");
            async move {
                let taken = node.try_lock("lock:oauth:a", &name, TTL).await.unwrap();
                (n, name, taken)
            }
        });
        let results = futures::future::join_all(attempts).await;
        let winners: Vec<&(usize, String, bool)> =
            results.iter().filter(|(_, _, taken)| *taken).collect();
        let [(n, name, _)] = winners.as_slice() else {
            panic!("round {round}: not one winner: {results:?}");
        };
        assert_eq!(held(&redis, "t:lock:oauth:a"), holder(name));
        // Per key: another connection's lock is free.
        assert!(one.try_lock("lock:oauth:b", "other", TTL).await.unwrap());
        one.unlock("lock:oauth:b", "other").await.unwrap();
        // Released by its holder, through the node that took it.
        nodes[n % 2].unlock("lock:oauth:a", name).await.unwrap();
        assert_eq!(held(&redis, "t:lock:oauth:a"), Reply::Nil);
    }
}

/// Only the holder releases a lock: another node's `unlock` (with its own
/// holder id) leaves it held and still refused to others.
#[tokio::test]
async fn only_its_holder_releases_a_lock() {
    let redis = RedisServer::start().unwrap();
    let (one, two) = (store(&redis, "one"), store(&redis, "two"));
    assert!(
        one.try_lock("lock:oauth:a", "holder-one", TTL)
            .await
            .unwrap()
    );
    two.unlock("lock:oauth:a", "holder-two").await.unwrap();
    assert_eq!(held(&redis, "t:lock:oauth:a"), holder("holder-one"));
    assert!(
        !two.try_lock("lock:oauth:a", "holder-two", TTL)
            .await
            .unwrap()
    );

    one.unlock("lock:oauth:a", "holder-one").await.unwrap();
    assert_eq!(held(&redis, "t:lock:oauth:a"), Reply::Nil);
    assert!(
        two.try_lock("lock:oauth:a", "holder-two", TTL)
            .await
            .unwrap()
    );
    assert_eq!(held(&redis, "t:lock:oauth:a"), holder("holder-two"));
}

/// A lock lives its TTL on Redis's clock (`PX`, in milliseconds): a 10 s
/// lock has between 5 and 10 s left; a short one is refused to others until it
/// expires, then taken; and the first holder, late, does not release the
/// lock another took after it expired.
#[tokio::test]
async fn a_lock_expires_after_its_ttl_on_the_stores_clock() {
    let redis = RedisServer::start().unwrap();
    let (one, two) = (store(&redis, "one"), store(&redis, "two"));
    assert!(
        one.try_lock("lock:oauth:long", "holder-one", TTL)
            .await
            .unwrap()
    );
    let left = redis.query(&["PTTL", "t:lock:oauth:long"]).unwrap();
    assert!(
        matches!(left, Reply::Int(ms) if ms > 5_000 && ms <= 10_000),
        "{left:?}"
    );

    let short = Duration::from_millis(300);
    let taken_at = Instant::now();
    assert!(
        one.try_lock("lock:oauth:a", "holder-one", short)
            .await
            .unwrap()
    );
    // Taken by another once Redis has expired it, and not before: the
    // attempt that takes it ends at least the TTL after the lock was asked
    // for (a bound a slow machine cannot break).
    let expired = wait_until_async(Duration::from_secs(10), || async {
        two.try_lock("lock:oauth:a", "holder-two", TTL)
            .await
            .unwrap()
    })
    .await;
    assert!(expired, "the lock never expired");
    assert!(
        taken_at.elapsed() >= short,
        "taken after {:?}, before its TTL",
        taken_at.elapsed()
    );
    one.unlock("lock:oauth:a", "holder-one").await.unwrap();
    assert_eq!(held(&redis, "t:lock:oauth:a"), holder("holder-two"));
}
