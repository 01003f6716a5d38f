//! Timing values for the policy, each built through a validating constructor so
//! an invalid schedule (zero base, max below base) cannot exist.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// Why a schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    #[error("{0} must be greater than zero")]
    Zero(&'static str),
    #[error("{max} must not be smaller than {base}")]
    MaxBelowBase {
        base: &'static str,
        max: &'static str,
    },
}

/// Backoff between attempts: `min(max, base · 2^(n-1))` plus up to `jitter` of it.
///
/// The exponential schedule itself comes from `backon` (the maintained
/// successor of `backoff`); the jitter is ours because backon's jitter adds up
/// to 100 % of the delay and ours at most 10 % (docs/DECISIONS.md #1).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryBackoff {
    base: Duration,
    max: Duration,
    /// Fraction of the delay added at most as jitter, in `[0, 1]`.
    jitter: f64,
}

impl RetryBackoff {
    /// The default (docs/SUPERVISION.md, "Retries"): 0.5 s doubling, capped at
    /// 8 s, up to 10 % jitter.
    pub fn defaults() -> Self {
        RetryBackoff {
            base: Duration::from_millis(500),
            max: Duration::from_secs(8),
            jitter: 0.1,
        }
    }

    /// A validated backoff; `jitter` is clamped into `[0, 1]`.
    pub fn try_new(base: Duration, max: Duration, jitter: f64) -> Result<Self, ScheduleError> {
        if base.is_zero() {
            return Err(ScheduleError::Zero("backoff base"));
        }
        if max < base {
            return Err(ScheduleError::MaxBelowBase {
                base: "backoff base",
                max: "backoff max",
            });
        }
        Ok(RetryBackoff {
            base,
            max,
            jitter: if jitter.is_finite() {
                jitter.clamp(0.0, 1.0)
            } else {
                0.0
            },
        })
    }

    /// The un-jittered wait after failed attempt `attempt` (1-based).
    pub fn base_delay(&self, attempt: u32) -> Duration {
        ExponentialBuilder::new()
            .with_min_delay(self.base)
            .with_max_delay(self.max)
            .with_factor(2.0)
            .without_max_times()
            .build()
            .nth(attempt.saturating_sub(1) as usize)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// The wait after failed attempt `attempt`, with `unit` in `[0, 1)` choosing
    /// how much of the allowed jitter to add (the caller owns randomness, so
    /// tests can pin it).
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let base = self.base_delay(attempt);
        base + base.mul_f64(self.jitter * unit.clamp(0.0, 1.0))
    }
}

/// Park cooldowns: the n-th park since the last success lasts
/// `base · 2^(n-1)`, capped at `max`; the `retire_after`-th park retires instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cooldowns {
    base: Duration,
    max: Duration,
    retire_after: u32,
}

impl Cooldowns {
    /// A validated cooldown schedule.
    pub fn try_new(
        base: Duration,
        max: Duration,
        retire_after: u32,
    ) -> Result<Self, ScheduleError> {
        if base.is_zero() {
            return Err(ScheduleError::Zero("base_cooldown"));
        }
        if max < base {
            return Err(ScheduleError::MaxBelowBase {
                base: "base_cooldown",
                max: "max_cooldown",
            });
        }
        if retire_after == 0 {
            return Err(ScheduleError::Zero("retire_after"));
        }
        Ok(Cooldowns {
            base,
            max,
            retire_after,
        })
    }

    /// How long park number `n` (1-based) lasts.
    pub fn cooldown(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(1).min(32);
        self.base
            .checked_mul(1u32 << doublings.min(31))
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// Whether park number `n` retires the connection instead.
    pub fn retires(&self, n: u32) -> bool {
        n >= self.retire_after
    }

    pub fn base(&self) -> Duration {
        self.base
    }

    pub fn max(&self) -> Duration {
        self.max
    }

    pub fn retire_after(&self) -> u32 {
        self.retire_after
    }
}

/// Everything the decision function needs to know about timing.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySettings {
    pub backoff: RetryBackoff,
    pub cooldowns: Cooldowns,
}

impl PolicySettings {
    /// The defaults: 0.5 s..8 s backoff, 30 s..5 m cooldowns, the 3rd park
    /// retires (docs/SUPERVISION.md, docs/CONFIG.md `[supervisor.quarantine]`).
    pub fn defaults() -> Self {
        PolicySettings {
            backoff: RetryBackoff::defaults(),
            cooldowns: Cooldowns {
                base: Duration::from_secs(30),
                max: Duration::from_secs(300),
                retire_after: 3,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn spec_backoff_sequence() {
        let backoff = RetryBackoff::defaults();
        let secs: Vec<f64> = (1..=6)
            .map(|n| backoff.base_delay(n).as_secs_f64())
            .collect();
        assert_eq!(secs, vec![0.5, 1.0, 2.0, 4.0, 8.0, 8.0]);
    }

    #[test]
    fn invalid_schedules_are_refused() {
        let s = Duration::from_secs;
        assert_eq!(
            Cooldowns::try_new(Duration::ZERO, s(1), 3),
            Err(ScheduleError::Zero("base_cooldown"))
        );
        assert!(Cooldowns::try_new(s(10), s(5), 3).is_err());
        assert!(Cooldowns::try_new(s(1), s(5), 0).is_err());
        assert!(RetryBackoff::try_new(Duration::ZERO, s(1), 0.1).is_err());
        assert!(RetryBackoff::try_new(s(2), s(1), 0.1).is_err());
    }

    proptest! {
        #[test]
        fn jitter_stays_within_ten_percent(attempt in 1u32..40, unit in 0.0f64..1.0) {
            let backoff = RetryBackoff::defaults();
            let base = backoff.base_delay(attempt);
            let delay = backoff.delay(attempt, unit);
            prop_assert!(delay >= base);
            prop_assert!(delay <= base + base / 10);
            prop_assert!(base <= Duration::from_secs(8));
        }

        #[test]
        fn cooldown_doubles_until_capped(
            base_ms in 1u64..100_000,
            factor in 1u64..64,
            n in 1u32..100,
        ) {
            let base = Duration::from_millis(base_ms);
            let max = base * factor as u32;
            let cooldowns = Cooldowns::try_new(base, max, 3).unwrap();
            let this = cooldowns.cooldown(n);
            let next = cooldowns.cooldown(n + 1);
            prop_assert!(this <= max);
            prop_assert!(this >= base);
            // Doubles exactly until the cap, then stays at the cap.
            prop_assert_eq!(next, (this * 2).min(max));
        }
    }
}
