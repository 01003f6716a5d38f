//! The pure decision function: (kind × phase × attempt × call safety × park
//! count × time left) → what to do next. No clocks, no randomness, no state: the
//! actor supplies all of those, so every row of the retry table
//! (docs/SUPERVISION.md, "Retries") is a table test here.

use std::time::Duration;

use super::schedule::PolicySettings;
use crate::failure::{Failure, FailureKind, Phase};

/// What the policy is asked about: one failed attempt and its circumstances.
#[derive(Clone, Debug)]
pub struct Situation<'a> {
    pub failure: &'a Failure,
    pub phase: Phase,
    /// 1-based number of the attempt that just failed.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The call may be repeated without duplicating a side effect: the tool is
    /// annotated `readOnlyHint`/`idempotentHint` or `retry_calls = "always"`.
    /// (A failure that provably never reached the tool is retried regardless;
    /// see `Failure::not_run`.)
    pub call_retry_allowed: bool,
    /// Parks since the last success, not counting the one this may cause.
    pub parks: u32,
    /// Time left until the operation's deadline.
    pub remaining: Duration,
    /// More than half of all connections are parked right now: suspect the local
    /// network and never retire by park count (auth retirements still happen).
    pub guard_active: bool,
    /// In `[0, 1)`: how much of the allowed jitter to add to a backoff wait.
    pub jitter_unit: f64,
}

/// What to do after a failed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Dispose the session if the failure was session-level, wait, try again.
    Retry { after: Duration },
    /// Answer the caller `Rejected`; the session is fine and kept.
    Reject,
    /// Stop here without parking: answer with what is known. Used for a call
    /// that may already have run and must not be repeated.
    GiveUp,
    /// Refuse all work for `cooldown`, then revive on first use. `counts`
    /// says whether this park moved the connection toward retirement.
    Park { cooldown: Duration, counts: bool },
    /// Permanently unavailable until reload or reset.
    Retire,
}

/// Decides what follows one failed attempt (docs/SUPERVISION.md, "Retries" and
/// "Park, retire, revive").
pub fn decide(settings: &PolicySettings, s: &Situation<'_>) -> Decision {
    let failure = s.failure;
    match (failure.kind, s.phase) {
        (FailureKind::Auth | FailureKind::NeedsLogin, _) => Decision::Retire,
        (FailureKind::Permission, Phase::Connect) => Decision::Retire,
        (FailureKind::Permission | FailureKind::Protocol, Phase::Call) => Decision::Reject,
        (FailureKind::RateLimit, _) => rate_limited(settings, s),
        // Nothing to retry: it came of listings, not of a request.
        (FailureKind::ContractChurn, _) => exhausted(settings, s.parks, s.guard_active),
        (_, phase) => {
            let retry_allowed = phase == Phase::Connect || s.call_retry_allowed || failure.not_run;
            if !retry_allowed {
                return Decision::GiveUp;
            }
            if s.attempt >= s.max_attempts {
                return exhausted(settings, s.parks, s.guard_active);
            }
            let wait = wait_before_retry(settings, s);
            if wait >= s.remaining {
                // The caller's budget ran out, not the connection's attempts.
                return Decision::GiveUp;
            }
            Decision::Retry { after: wait }
        }
    }
}

/// A session died while idle (child exited, stream closed for good), or
/// the upstream's contracts kept changing: it parks like an exhausted
/// operation and counts toward retirement
/// (docs/SUPERVISION.md, "Park, retire, revive"), with no
/// eager reconnect.
pub fn decide_idle_death(settings: &PolicySettings, parks: u32, guard_active: bool) -> Decision {
    exhausted(settings, parks, guard_active)
}

/// Attempts ran out on failures that count: park, or retire on the
/// `retire_after`-th park unless the mass-retirement guard holds.
fn exhausted(settings: &PolicySettings, parks: u32, guard_active: bool) -> Decision {
    let n = parks.saturating_add(1);
    if settings.cooldowns.retires(n) && !guard_active {
        return Decision::Retire;
    }
    Decision::Park {
        cooldown: settings.cooldowns.cooldown(n),
        counts: true,
    }
}

/// 429: wait what the upstream asked (or backoff) and retry while attempts and
/// the deadline allow; otherwise park until then without a strike, because the
/// upstream is healthy, only busy.
fn rate_limited(settings: &PolicySettings, s: &Situation<'_>) -> Decision {
    let wait = wait_before_retry(settings, s);
    if s.attempt < s.max_attempts && wait < s.remaining {
        return Decision::Retry { after: wait };
    }
    let cooldown = s
        .failure
        .retry_after
        .unwrap_or(settings.cooldowns.base())
        .min(settings.cooldowns.max());
    Decision::Park {
        cooldown,
        counts: false,
    }
}

/// Exactly `Retry-After` when given (capped at `max_cooldown`), else backoff.
fn wait_before_retry(settings: &PolicySettings, s: &Situation<'_>) -> Duration {
    match s.failure.retry_after {
        Some(after) => after.min(settings.cooldowns.max()),
        None => settings.backoff.delay(s.attempt, s.jitter_unit),
    }
}

#[cfg(test)]
mod tests;
