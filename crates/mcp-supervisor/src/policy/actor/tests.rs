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

/// Reports an exhausted connect operation (the last attempt failing).
async fn exhaust(policy: &Addr<QuarantinePolicy>, connection: &str) -> Decision {
    policy
        .send(ReportFailure {
            connection: connection.to_owned(),
            failure: server_failure(),
            phase: Phase::Connect,
            attempt: 3,
            max_attempts: 3,
            call_retry_allowed: false,
            remaining: Duration::from_secs(60),
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
fn parks_thirty_then_sixty_then_retires() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["a"])).await.unwrap();
        assert_eq!(exhaust(&policy, "a").await, park(30));
        let parked = state(&policy, "a").await;
        assert_eq!(parked.parks, 1);
        let until = parked.parked_until.unwrap();
        assert_eq!(until - Instant::now(), Duration::from_secs(30));
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(exhaust(&policy, "a").await, park(60));
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert_eq!(exhaust(&policy, "a").await, Decision::Retire);
        let retired = state(&policy, "a").await;
        assert_eq!(retired.parked_until, None);
        assert_eq!(retired.parks, 2);
    });
}

#[test]
fn a_success_in_between_resets_the_count() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["a"])).await.unwrap();
        for _ in 0..5 {
            assert_eq!(exhaust(&policy, "a").await, park(30));
            tokio::time::sleep(Duration::from_secs(31)).await;
            assert_eq!(exhaust(&policy, "a").await, park(60));
            policy
                .send(ReportSuccess {
                    connection: "a".into(),
                })
                .await
                .unwrap();
            let after = state(&policy, "a").await;
            assert_eq!((after.parks, after.parked_until), (0, None));
        }
    });
}

#[test]
fn rate_limit_parks_do_not_count() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        let mut failure = Failure::from_status(429, Some(Duration::from_secs(5)));
        failure.not_run = true;
        for _ in 0..4 {
            let decision = policy
                .send(ReportFailure {
                    connection: "a".into(),
                    failure: failure.clone(),
                    phase: Phase::Call,
                    attempt: 3,
                    max_attempts: 3,
                    call_retry_allowed: false,
                    remaining: Duration::from_secs(60),
                })
                .await
                .unwrap();
            assert_eq!(
                decision,
                Decision::Park {
                    cooldown: Duration::from_secs(5),
                    counts: false
                }
            );
            tokio::time::sleep(Duration::from_secs(6)).await;
        }
        let after = state(&policy, "a").await;
        assert_eq!(after.parks, 0, "rate-limit parks are not strikes");
    });
}

#[test]
fn reset_clears_strikes_and_the_park() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        assert_eq!(exhaust(&policy, "a").await, park(30));
        let parked = state(&policy, "a").await;
        assert_eq!(parked.parks, 1);
        assert!(parked.parked_until.is_some());
        policy
            .send(ResetConnection {
                connection: "a".into(),
            })
            .await
            .unwrap();
        assert_eq!(state(&policy, "a").await, ConnectionPolicyState::default());
        // A fresh start: the next exhausted operation is a first park again.
        assert_eq!(exhaust(&policy, "a").await, park(30));
    });
}

#[test]
fn the_guard_holds_while_most_are_parked_and_lets_go_after() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["a", "b", "c", "d"])).await.unwrap();
        // a: two counting parks, cooldowns over.
        assert_eq!(exhaust(&policy, "a").await, park(30));
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(exhaust(&policy, "a").await, park(60));
        tokio::time::sleep(Duration::from_secs(61)).await;
        // b and c park now: with a, 3 of 4 are failing.
        assert_eq!(exhaust(&policy, "b").await, park(30));
        assert_eq!(exhaust(&policy, "c").await, park(30));
        assert_eq!(exhaust(&policy, "a").await, park(120), "guard must hold");
        // Once b and c recover, a's next exhausted operation retires it.
        tokio::time::sleep(Duration::from_secs(121)).await;
        assert_eq!(exhaust(&policy, "a").await, Decision::Retire);
    });
}

#[test]
fn a_lone_failing_connection_still_retires() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["only"])).await.unwrap();
        for expected in [park(30), park(60), Decision::Retire] {
            assert_eq!(exhaust(&policy, "only").await, expected);
            tokio::time::sleep(Duration::from_secs(301)).await;
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
            // The deciding connection c0 reaches two parks, cooldowns over.
            exhaust(&policy, "c0").await;
            tokio::time::sleep(Duration::from_secs(31)).await;
            exhaust(&policy, "c0").await;
            tokio::time::sleep(Duration::from_secs(61)).await;
            for name in all.iter().skip(1).take(parked) {
                exhaust(&policy, name).await;
            }
            seen.set(exhaust(&policy, "c0").await == Decision::Retire);
        });
        let guard_should_hold = parked >= 1 && (parked + 1) * 2 > total;
        prop_assert_eq!(retired.get(), !guard_should_hold);
    }
}

#[test]
fn reports_during_a_park_add_no_strike() {
    run_paused(|| async {
        let policy = QuarantinePolicy::new(PolicySettings::defaults()).start();
        policy.send(names(&["a"])).await.unwrap();
        assert_eq!(exhaust(&policy, "a").await, park(30));
        tokio::time::sleep(Duration::from_secs(10)).await;
        // Two more callers' failures arrive while parked: same park, no strike.
        for _ in 0..2 {
            assert_eq!(
                exhaust(&policy, "a").await,
                Decision::Park {
                    cooldown: Duration::from_secs(20),
                    counts: false
                }
            );
        }
        let parked = state(&policy, "a").await;
        assert_eq!(parked.parks, 1);
    });
}
