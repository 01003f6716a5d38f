//! One test row per cell of the retry table (docs/SUPERVISION.md, "Retries"),
//! plus the deadline and guard rules.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::failure::{Failure, FailureKind};

const MINUTE: Duration = Duration::from_secs(60);

fn failure(kind: FailureKind) -> Failure {
    Failure::new(kind, "test")
}

fn situation(failure: &Failure, phase: Phase, attempt: u32) -> Situation<'_> {
    Situation {
        failure,
        phase,
        attempt,
        max_attempts: 3,
        call_retry_allowed: false,
        parks: 0,
        remaining: MINUTE,
        guard_active: false,
        jitter_unit: 0.0,
    }
}

fn decide_default(s: &Situation<'_>) -> Decision {
    decide(&PolicySettings::defaults(), s)
}

fn park(secs: u64, counts: bool) -> Decision {
    Decision::Park {
        cooldown: Duration::from_secs(secs),
        counts,
    }
}

fn retry_ms(ms: u64) -> Decision {
    Decision::Retry {
        after: Duration::from_millis(ms),
    }
}

#[test]
fn auth_and_needs_login_retire_now_in_both_phases() {
    for kind in [FailureKind::Auth, FailureKind::NeedsLogin] {
        let f = failure(kind);
        for phase in [Phase::Connect, Phase::Call] {
            for attempt in 1..=3 {
                let mut s = situation(&f, phase, attempt);
                s.call_retry_allowed = true;
                s.guard_active = true; // the guard never saves an auth failure
                assert_eq!(
                    decide_default(&s),
                    Decision::Retire,
                    "{kind} {phase:?} {attempt}"
                );
            }
        }
    }
}

#[test]
fn permission_retires_on_connect_and_rejects_a_call() {
    let f = failure(FailureKind::Permission);
    assert_eq!(
        decide_default(&situation(&f, Phase::Connect, 1)),
        Decision::Retire
    );
    let mut s = situation(&f, Phase::Call, 1);
    s.call_retry_allowed = true;
    assert_eq!(decide_default(&s), Decision::Reject);
}

#[test]
fn protocol_retries_connect_then_parks_and_rejects_a_call() {
    let f = failure(FailureKind::Protocol);
    assert_eq!(
        decide_default(&situation(&f, Phase::Connect, 1)),
        retry_ms(500)
    );
    assert_eq!(
        decide_default(&situation(&f, Phase::Connect, 2)),
        retry_ms(1000)
    );
    assert_eq!(
        decide_default(&situation(&f, Phase::Connect, 3)),
        park(30, true)
    );
    let mut call = situation(&f, Phase::Call, 1);
    call.call_retry_allowed = true;
    assert_eq!(decide_default(&call), Decision::Reject);
}

#[test]
fn rate_limit_waits_exactly_retry_after_in_both_phases() {
    let mut f = failure(FailureKind::RateLimit);
    f.retry_after = Some(Duration::from_secs(2));
    for phase in [Phase::Connect, Phase::Call] {
        let s = situation(&f, phase, 1);
        assert_eq!(decide_default(&s), retry_ms(2000), "{phase:?}");
    }
}

#[test]
fn rate_limit_without_retry_after_uses_backoff() {
    let f = failure(FailureKind::RateLimit);
    assert_eq!(
        decide_default(&situation(&f, Phase::Call, 2)),
        retry_ms(1000)
    );
}

#[test]
fn rate_limit_that_does_not_fit_the_deadline_parks_at_once_without_a_strike() {
    let mut f = failure(FailureKind::RateLimit);
    f.retry_after = Some(Duration::from_secs(90));
    let s = situation(&f, Phase::Call, 1);
    assert_eq!(decide_default(&s), park(90, false));
}

#[test]
fn rate_limit_exhausted_parks_until_last_retry_after_or_base_without_a_strike() {
    let mut f = failure(FailureKind::RateLimit);
    f.retry_after = Some(Duration::from_secs(7));
    let mut s = situation(&f, Phase::Connect, 3);
    s.parks = 2; // would retire if it counted
    assert_eq!(decide_default(&s), park(7, false));
    let plain = failure(FailureKind::RateLimit);
    let mut s = situation(&plain, Phase::Call, 3);
    s.parks = 2;
    assert_eq!(decide_default(&s), park(30, false));
}

#[test]
fn retry_after_is_capped_at_max_cooldown() {
    let mut f = failure(FailureKind::RateLimit);
    f.retry_after = Some(Duration::from_secs(86_400));
    let mut s = situation(&f, Phase::Call, 1);
    s.remaining = Duration::from_secs(100_000);
    assert_eq!(decide_default(&s), retry_ms(300_000));
    s.attempt = 3;
    assert_eq!(decide_default(&s), park(300, false));
}

#[test]
fn transient_kinds_retry_on_connect_then_park_counting() {
    for kind in [
        FailureKind::Server,
        FailureKind::Timeout,
        FailureKind::Transport,
        FailureKind::Unknown,
    ] {
        let f = failure(kind);
        assert_eq!(
            decide_default(&situation(&f, Phase::Connect, 1)),
            retry_ms(500),
            "{kind}"
        );
        assert_eq!(
            decide_default(&situation(&f, Phase::Connect, 2)),
            retry_ms(1000),
            "{kind}"
        );
        assert_eq!(
            decide_default(&situation(&f, Phase::Connect, 3)),
            park(30, true),
            "{kind}"
        );
    }
}

#[test]
fn transient_kinds_retry_a_call_only_when_safe() {
    for kind in [
        FailureKind::Server,
        FailureKind::Timeout,
        FailureKind::Transport,
        FailureKind::Unknown,
    ] {
        let f = failure(kind);
        let unsafe_call = situation(&f, Phase::Call, 1);
        assert_eq!(decide_default(&unsafe_call), Decision::GiveUp, "{kind}");
        let mut safe_call = situation(&f, Phase::Call, 1);
        safe_call.call_retry_allowed = true;
        assert_eq!(decide_default(&safe_call), retry_ms(500), "{kind}");
        safe_call.attempt = 3;
        assert_eq!(decide_default(&safe_call), park(30, true), "{kind}");
    }
}

#[test]
fn a_call_that_provably_did_not_run_is_retried_even_when_unsafe() {
    let refused = failure(FailureKind::Transport).with_not_run();
    assert_eq!(
        decide_default(&situation(&refused, Phase::Call, 1)),
        retry_ms(500)
    );
    let mut unavailable = Failure::from_status(503, Some(Duration::from_secs(1)));
    assert!(
        !unavailable.not_run,
        "a 503 may come after the work was done"
    );
    unavailable.not_run = true;
    assert_eq!(
        decide_default(&situation(&unavailable, Phase::Call, 1)),
        retry_ms(1000)
    );
    unavailable.not_run = false;
    assert_eq!(
        decide_default(&situation(&unavailable, Phase::Call, 1)),
        Decision::GiveUp
    );
}

#[test]
fn a_wait_past_the_deadline_stops_retrying() {
    let f = failure(FailureKind::Server);
    let mut s = situation(&f, Phase::Connect, 1);
    s.remaining = Duration::from_millis(400);
    assert_eq!(decide_default(&s), Decision::GiveUp);
}

#[test]
fn park_sequence_thirty_sixty_then_retire() {
    let f = failure(FailureKind::Transport);
    let mut s = situation(&f, Phase::Connect, 3);
    assert_eq!(decide_default(&s), park(30, true));
    s.parks = 1;
    assert_eq!(decide_default(&s), park(60, true));
    s.parks = 2;
    assert_eq!(decide_default(&s), Decision::Retire);
}

#[test]
fn the_guard_turns_a_retirement_into_one_more_park() {
    let f = failure(FailureKind::Server);
    let mut s = situation(&f, Phase::Connect, 3);
    s.parks = 2;
    s.guard_active = true;
    assert_eq!(decide_default(&s), park(120, true));
    s.parks = 9;
    assert_eq!(decide_default(&s), park(300, true));
}

#[test]
fn idle_death_counts_like_an_exhausted_operation() {
    let settings = PolicySettings::defaults();
    assert_eq!(decide_idle_death(&settings, 0, false), park(30, true));
    assert_eq!(decide_idle_death(&settings, 2, false), Decision::Retire);
    assert_eq!(decide_idle_death(&settings, 2, true), park(120, true));
}

fn any_kind() -> impl Strategy<Value = FailureKind> {
    prop::sample::select(FailureKind::ALL.to_vec())
}

proptest! {
    /// The retire_after-th counting park retires (absent the guard), for any
    /// retire_after, and no earlier park does.
    #[test]
    fn retire_after_th_park_retires(retire_after in 1u32..10, parks in 0u32..12) {
        let settings = PolicySettings {
            cooldowns: crate::policy::Cooldowns::try_new(
                Duration::from_secs(30), Duration::from_secs(300), retire_after).unwrap(),
            ..PolicySettings::defaults()
        };
        let decision = decide_idle_death(&settings, parks, false);
        if parks + 1 >= retire_after {
            prop_assert_eq!(decision, Decision::Retire);
        } else {
            let is_counting_park = matches!(decision, Decision::Park { counts: true, .. });
            prop_assert!(is_counting_park);
        }
    }

    /// While the guard holds, nothing but auth (or permission while connecting) retires.
    #[test]
    fn guard_prevents_park_retirement(
        kind in any_kind(),
        connect in any::<bool>(),
        attempt in 1u32..5,
        parks in 0u32..20,
        safe in any::<bool>(),
        remaining_ms in 0u64..120_000,
    ) {
        let f = failure(kind);
        let phase = if connect { Phase::Connect } else { Phase::Call };
        let s = Situation {
            failure: &f, phase, attempt, max_attempts: 3, call_retry_allowed: safe,
            parks, remaining: Duration::from_millis(remaining_ms), guard_active: true,
            jitter_unit: 0.5,
        };
        let decision = decide_default(&s);
        if decision == Decision::Retire {
            prop_assert!(matches!(kind, FailureKind::Auth | FailureKind::NeedsLogin)
                || (kind == FailureKind::Permission && phase == Phase::Connect));
        }
    }

    /// A retry never waits past the deadline and never exceeds the attempt budget.
    #[test]
    fn retries_fit_the_budget(
        kind in any_kind(),
        attempt in 1u32..6,
        remaining_ms in 0u64..20_000,
        retry_after_ms in proptest::option::of(0u64..30_000),
    ) {
        let mut f = failure(kind);
        f.retry_after = retry_after_ms.map(Duration::from_millis);
        let mut s = situation(&f, Phase::Connect, attempt);
        s.remaining = Duration::from_millis(remaining_ms);
        s.call_retry_allowed = true;
        if let Decision::Retry { after } = decide_default(&s) {
            prop_assert!(after < s.remaining);
            prop_assert!(attempt < s.max_attempts);
        }
    }
}

/// Contracts that keep changing are no request's failure: nothing to retry;
/// the connection parks at once and it counts, up to retirement.
#[test]
fn contract_churn_parks_at_once_and_counts() {
    let f = failure(FailureKind::ContractChurn);
    for phase in [Phase::Connect, Phase::Call] {
        let s = situation(&f, phase, 1);
        assert_eq!(decide_default(&s), park(30, true), "{phase:?}");
    }
    let mut s = situation(&f, Phase::Call, 1);
    s.parks = 2;
    assert_eq!(
        decide_default(&s),
        Decision::Retire,
        "the retire_after-th park"
    );
    s.guard_active = true;
    assert!(
        matches!(decide_default(&s), Decision::Park { .. }),
        "the guard holds"
    );
}
