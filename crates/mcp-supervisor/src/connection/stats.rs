//! Per-connection numbers for `/status` and `/metrics`: a connection's
//! [`History`], which outlives any one actor.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, SystemTime},
};

use crate::{failure::Failure, outcome::OutcomeKind};

/// What a connection has done since the process started: counts only grow
/// (Prometheus counters must be monotonic). Owned by the registry's entry
/// for the connection, written by its connection actor: a reset or a
/// restart replaces the actor, never the history (docs/ARCHITECTURE.md,
/// "Who owns what").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub calls: CallCounts,
    pub durations: DurationHistogram,
    pub failures: FailuresByKind,
    pub last_failure: Option<(Failure, SystemTime)>,
    /// Every park, counting toward retirement or not.
    pub parks: u64,
}

impl History {
    pub(crate) fn failed(&mut self, failure: &Failure) {
        self.last_failure = Some((failure.clone(), SystemTime::now()));
        *self.failures.entry(failure.kind.as_str()).or_default() += 1;
    }
}

/// A connection's [`History`], shared by the registry (which reads it) and
/// the connection's current actor (the one writer).
#[derive(Debug, Clone, Default)]
pub struct SharedHistory(Arc<Mutex<History>>);

impl SharedHistory {
    /// The history, to read or update. Updates are a few integer writes, so
    /// the lock is never held across a wait.
    pub fn lock(&self) -> MutexGuard<'_, History> {
        // A panic while holding it (the actor's injected panic is not one)
        // leaves counts that are still valid.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Upper bounds (seconds) of the call-duration histogram buckets.
pub const DURATION_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

/// A cumulative-friendly histogram of call durations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DurationHistogram {
    /// `buckets[i]` counts calls that took at most `DURATION_BUCKETS[i]` seconds
    /// and more than the previous bound (not cumulative; encoders sum them).
    pub buckets: [u64; DURATION_BUCKETS.len()],
    /// Calls longer than the last bound.
    pub overflow: u64,
    pub sum_seconds: f64,
    pub count: u64,
}

impl DurationHistogram {
    pub fn record(&mut self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        self.sum_seconds += seconds;
        self.count += 1;
        match DURATION_BUCKETS.iter().position(|bound| seconds <= *bound) {
            Some(index) => self.buckets[index] += 1,
            None => self.overflow += 1,
        }
    }
}

/// Failures seen by attempts, by `FailureKind` wire name.
pub type FailuresByKind = BTreeMap<&'static str, u64>;

/// Counters of call outcomes, one per [`OutcomeKind`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub ok: u64,
    pub tool_error: u64,
    pub rejected: u64,
    pub unavailable: u64,
    pub busy: u64,
    pub timed_out: u64,
}

impl CallCounts {
    pub(crate) fn count(&mut self, kind: OutcomeKind) {
        *self.counter(kind) += 1;
    }

    /// The count of `kind`.
    pub fn get(&self, kind: OutcomeKind) -> u64 {
        match kind {
            OutcomeKind::Ok => self.ok,
            OutcomeKind::ToolError => self.tool_error,
            OutcomeKind::Rejected => self.rejected,
            OutcomeKind::Unavailable => self.unavailable,
            OutcomeKind::Busy => self.busy,
            OutcomeKind::TimedOut => self.timed_out,
        }
    }

    fn counter(&mut self, kind: OutcomeKind) -> &mut u64 {
        match kind {
            OutcomeKind::Ok => &mut self.ok,
            OutcomeKind::ToolError => &mut self.tool_error,
            OutcomeKind::Rejected => &mut self.rejected,
            OutcomeKind::Unavailable => &mut self.unavailable,
            OutcomeKind::Busy => &mut self.busy,
            OutcomeKind::TimedOut => &mut self.timed_out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_their_bucket() {
        let mut histogram = DurationHistogram::default();
        histogram.record(Duration::from_micros(500));
        histogram.record(Duration::from_millis(30));
        histogram.record(Duration::from_secs(100));
        assert_eq!(histogram.buckets[0], 1);
        assert_eq!(histogram.buckets[4], 1, "30 ms is in the ≤50 ms bucket");
        assert_eq!((histogram.overflow, histogram.count), (1, 3));
        assert!((histogram.sum_seconds - 100.0305).abs() < 1e-9);
    }

    #[test]
    fn each_kind_is_counted_under_its_own_key() {
        for kind in OutcomeKind::ALL {
            let mut counts = CallCounts::default();
            counts.count(kind);
            for other in OutcomeKind::ALL {
                assert_eq!(counts.get(other), u64::from(other == kind), "{kind:?}");
            }
        }
    }
}
