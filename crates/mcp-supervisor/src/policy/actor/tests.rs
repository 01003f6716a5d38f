//! The actor with paused time: park sequences, resets, and the guard.

use std::{future::Future, time::Duration};

use actix::{Actor, Addr};
use proptest::prelude::*;

use super::*;

/// Runs `body` on an actix system whose tokio clock is paused, so cooldowns
/// pass instantly and deterministically.
fn run_paused<F: Future<Output = ()> + 'static>(body: impl FnOnce() -> F) {
    let system = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
    });
    system.block_on(body());
}

fn server_failure() -> Failure {
    Failure::from_status(500, None)
}

/// Reports an exhausted connect operation (the last attempt failing) of a
/// connection with `parks` strikes.
async fn exhaust(policy: &Addr<QuarantinePolicy>, connection: &str, parks: u32) -> Decision {
    policy
        .send(ReportFailure {
            connection: connection.to_owned(),
            failure: server_failure(),
            phase: Phase::Connect,
            attempt: 3,
            max_attempts: 3,
            call_retry_allowed: false,
            remaining: Duration::from_secs(60),
            parks,
        })
        .await
        .unwrap()
}

async fn state(policy: &Addr<QuarantinePolicy>, connection: &str) -> ConnectionPolicyState {
    policy
        .send(PolicySnapshot {
            connection: connection.to_owned(),
        })
        .await
        .unwrap()
        .unwrap()
}

fn park(secs: u64) -> Decision {
    Decision::Park {
        cooldown: Duration::from_secs(secs),
        counts: true,
    }
}

fn names(list: &[&str]) -> RegisterConnections {
    RegisterConnections(list.iter().map(|s| s.to_string()).collect())
}

#[test]
fn decides_by_the_strikes_it_is_told_and_sees_the_park() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["a"])).await.unwrap();
        assert_eq!(exhaust(&policy, "a", 0).await, park(30));
        let parked = state(&policy, "a").await.parked_until.unwrap();
        assert_eq!(parked.remaining(), Duration::from_secs(30));
        assert_eq!(exhaust(&policy, "a", 1).await, park(60));
        assert_eq!(exhaust(&policy, "a", 2).await, Decision::Retire);
        assert_eq!(state(&policy, "a").await.parked_until, None);
    });
}

#[test]
fn a_rate_limit_park_is_no_strike() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        let mut failure = Failure::from_status(429, Some(Duration::from_secs(5)));
        failure.not_run = true;
        let decision = policy
            .send(ReportFailure {
                connection: "a".into(),
                failure,
                phase: Phase::Call,
                attempt: 3,
                max_attempts: 3,
                call_retry_allowed: false,
                remaining: Duration::from_secs(60),
                parks: 2,
            })
            .await
            .unwrap();
        assert_eq!(
            decision,
            Decision::Park {
                cooldown: Duration::from_secs(5),
                counts: false
            },
            "not even at the retiring park"
        );
    });
}

#[test]
fn reset_clears_the_park() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        assert_eq!(exhaust(&policy, "a", 0).await, park(30));
        assert!(state(&policy, "a").await.parked_until.is_some());
        policy
            .send(ResetConnection {
                connection: "a".into(),
            })
            .await
            .unwrap();
        assert_eq!(state(&policy, "a").await, ConnectionPolicyState::default());
    });
}

/// The guard's view follows what the connections' actors did: a park to its
/// real end, a revival, a retirement.
#[test]
fn the_guards_view_follows_the_connections_events() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["a"])).await.unwrap();
        let until = Deadline::after(Duration::from_secs(45));
        policy
            .send(ConnectionEvent::Parked {
                connection: "a".into(),
                failure: server_failure(),
                cooldown: Duration::from_secs(45),
                until,
                attempt: 3,
                strikes: 1,
            })
            .await
            .unwrap();
        assert_eq!(state(&policy, "a").await.parked_until, Some(until));
        policy
            .send(ConnectionEvent::Revived {
                connection: "a".into(),
            })
            .await
            .unwrap();
        assert_eq!(state(&policy, "a").await.parked_until, None);
        // A connection the policy does not know is not added by an event.
        policy
            .send(ConnectionEvent::Stopped {
                connection: "gone".into(),
            })
            .await
            .unwrap();
        let unknown = policy
            .send(PolicySnapshot {
                connection: "gone".into(),
            })
            .await
            .unwrap();
        assert_eq!(unknown, None);
    });
}

#[test]
fn the_guard_holds_while_most_are_parked_and_lets_go_after() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["a", "b", "c", "d"])).await.unwrap();
        // b and c park now: with a at its retiring park, 3 of 4 are failing.
        assert_eq!(exhaust(&policy, "b", 0).await, park(30));
        assert_eq!(exhaust(&policy, "c", 0).await, park(30));
        assert_eq!(exhaust(&policy, "a", 2).await, park(120), "guard must hold");
        // Once b and c recover, a's next exhausted operation retires it.
        tokio::time::sleep(Duration::from_secs(121)).await;
        assert_eq!(exhaust(&policy, "a", 3).await, Decision::Retire);
    });
}

#[test]
fn a_lone_failing_connection_still_retires() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["only"])).await.unwrap();
        for (parks, expected) in [(0, park(30)), (1, park(60)), (2, Decision::Retire)] {
            assert_eq!(exhaust(&policy, "only", parks).await, expected);
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// With `total` connections of which `parked` others are in a cooldown, a
    /// connection at its retiring park retires iff the guard does not hold:
    /// the guard holds exactly while more than half (counting it) are parked.
    #[test]
    fn guard_holds_while_more_than_half_are_parked(total in 1usize..9, parked_seed in 0usize..9) {
        let parked = parked_seed % total; // other connections parked, < total
        let retired = std::rc::Rc::new(std::cell::Cell::new(false));
        let seen = retired.clone();
        run_paused(move || async move {
            let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
            let all: Vec<String> = (0..total).map(|i| format!("c{i}")).collect();
            policy.send(RegisterConnections(all.clone())).await.unwrap();
            for name in all.iter().skip(1).take(parked) {
                exhaust(&policy, name, 0).await;
            }
            // The deciding connection c0 is at its retiring park.
            seen.set(exhaust(&policy, "c0", 2).await == Decision::Retire);
        });
        let guard_should_hold = parked >= 1 && (parked + 1) * 2 > total;
        prop_assert_eq!(retired.get(), !guard_should_hold);
    }
}
