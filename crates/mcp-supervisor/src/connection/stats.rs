//! Per-connection numbers for `/status`, `/metrics` and the dashboard: a
//! connection's [`History`] (counters) and [`Recent`] (its last calls and
//! failures, and a five-minute latency window), which outlive any one actor.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use crate::{
    failure::Phase,
    failure::{Failure, FailureKind},
    outcome::OutcomeKind,
    policy::Decision,
};

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
    /// Probes sent while parked (docs/SUPERVISION.md, "Probes").
    pub probes: u64,
}

impl History {
    pub(crate) fn failed(&mut self, failure: &Failure) {
        self.last_failure = Some((failure.clone(), SystemTime::now()));
        *self.failures.entry(failure.kind.as_str()).or_default() += 1;
    }
}

/// A connection's [`History`] and [`Recent`], shared by the registry (which
/// reads them), the connection's current actor (which writes what it
/// decides) and its requests, which count their own ends
/// ([`SharedHistory::ended`]). Two locks: a status snapshot clones the
/// counters, never the records.
#[derive(Debug, Clone, Default)]
pub struct SharedHistory(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    history: Mutex<History>,
    recent: Mutex<Recent>,
    /// Moves whenever anything a status shows may have changed (a call
    /// admitted or finished, a failure, a state change): a reader that saw
    /// the same number need not ask again.
    moved: AtomicU64,
}

impl SharedHistory {
    /// The history, to read or update. Updates are a few integer writes, so
    /// the lock is never held across a wait.
    pub fn lock(&self) -> MutexGuard<'_, History> {
        unpoisoned(&self.0.history)
    }

    /// The recent records, to read or add to (never held across a wait).
    pub fn recent(&self) -> MutexGuard<'_, Recent> {
        unpoisoned(&self.0.recent)
    }

    /// A request ended: a call's outcome and duration counted and kept
    /// among the recent calls.
    pub(crate) fn ended(&self, call: Option<CallDone>) {
        self.moved();
        let Some(call) = call else { return };
        {
            let mut history = self.lock();
            history.calls.count(call.kind);
            history.durations.record(call.elapsed);
        }
        let record = CallRecord {
            at: SystemTime::now(),
            tool: call.tool.into_boxed_str(),
            kind: call.kind,
            attempts: call.attempts,
            latency: call.elapsed,
            queued: call.queued,
            caller: call.caller,
        };
        self.recent().called(record, Instant::now());
    }

    /// Says that what a status shows may have changed.
    pub(crate) fn moved(&self) {
        self.0.moved.fetch_add(1, Ordering::Relaxed);
    }

    /// How often it moved so far.
    pub fn generation(&self) -> u64 {
        self.0.moved.load(Ordering::Relaxed)
    }
}

/// A panic while holding either lock (the actor's injected panic is not one)
/// leaves counts and records that are still valid.
fn unpoisoned<T>(lock: &Mutex<T>) -> MutexGuard<'_, T> {
    lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How a `tools/call` ended, for the counters and the recent calls.
#[derive(Debug)]
pub(crate) struct CallDone {
    pub(crate) kind: OutcomeKind,
    /// From admission to answer.
    pub(crate) elapsed: Duration,
    /// The upstream's name for the tool.
    pub(crate) tool: String,
    /// Attempts sent (0: answered before any).
    pub(crate) attempts: u32,
    /// Waiting for a slot.
    pub(crate) queued: Duration,
    /// Who called ([`CallRecord::caller`]).
    pub(crate) caller: Option<Arc<str>>,
}

/// Calls kept per connection for the dashboard.
pub const RECENT_CALLS: usize = 50;
/// Failures kept per connection for the dashboard.
pub const RECENT_FAILURES: usize = 20;

/// One `tools/call` as the dashboard lists it: never its arguments or result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    pub at: SystemTime,
    /// The upstream's name for the tool.
    pub tool: Box<str>,
    pub kind: OutcomeKind,
    /// Attempts sent upstream (0: refused before any, e.g. while parked).
    pub attempts: u32,
    /// From admission to answer.
    pub latency: Duration,
    /// Waiting for a free slot (`max_concurrency`).
    pub queued: Duration,
    /// Who called, as the gateway's credentials named them (`user:…`,
    /// `client:…`); `None` when they name nobody, or for a library caller.
    pub caller: Option<Arc<str>>,
}

/// One failed attempt and what the policy decided about it.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureRecord {
    pub at: SystemTime,
    pub kind: FailureKind,
    pub status: Option<u16>,
    pub phase: Phase,
    pub attempt: u32,
    /// Written by us ([`Failure::reason`]), never a response body.
    pub reason: String,
    pub decision: Decision,
    /// The connection was already parked or retired: the decision that stood,
    /// not a new one.
    pub standing: bool,
}

impl FailureRecord {
    pub(crate) fn new(
        failure: &Failure,
        phase: Phase,
        attempt: u32,
        decision: Decision,
        standing: bool,
    ) -> Self {
        FailureRecord {
            at: SystemTime::now(),
            kind: failure.kind,
            status: failure.status,
            phase,
            attempt,
            reason: failure.reason.clone(),
            decision,
            standing,
        }
    }
}

/// A connection's last calls and failures, and its call latencies over the
/// last five minutes. The window is allocated on the first call, so a
/// connection never used costs nothing.
#[derive(Debug, Default)]
pub struct Recent {
    calls: VecDeque<CallRecord>,
    failures: VecDeque<FailureRecord>,
    latency: Option<Box<LatencyWindow>>,
}

impl Recent {
    /// Records a finished call (one that ran also goes into the latency window).
    pub(crate) fn called(&mut self, record: CallRecord, now: Instant) {
        if record.attempts > 0 {
            self.latency
                .get_or_insert_with(|| Box::new(LatencyWindow::new(now)))
                .record(record.latency, now);
        }
        push_bounded(&mut self.calls, record, RECENT_CALLS);
    }

    pub(crate) fn failed(&mut self, record: FailureRecord) {
        push_bounded(&mut self.failures, record, RECENT_FAILURES);
    }

    /// The calls kept, newest first.
    pub fn calls(&self) -> impl Iterator<Item = &CallRecord> {
        self.calls.iter().rev()
    }

    /// The failures kept, newest first.
    pub fn failures(&self) -> impl Iterator<Item = &FailureRecord> {
        self.failures.iter().rev()
    }

    /// Latency over the last five minutes (`None` without a call in them).
    pub fn latency(&self, now: Instant) -> Option<LatencySummary> {
        self.latency.as_ref()?.summary(now)
    }
}

fn push_bounded<T>(ring: &mut VecDeque<T>, item: T, cap: usize) {
    if ring.len() == cap {
        ring.pop_front();
    }
    ring.push_back(item);
}

/// Length of one slot of the latency window.
pub const LATENCY_SLOT: Duration = Duration::from_secs(30);
/// Slots in the latency window: 10 × 30 s = five minutes.
pub const LATENCY_SLOTS: usize = 10;
/// Log buckets per slot: ×√2 from 50 µs (±19 %), the last open-ended (≥ 26 s).
const LATENCY_BUCKETS: usize = 40;
const FIRST_BUCKET_MICROS: f64 = 50.0;

/// Call latencies in [`LATENCY_SLOTS`] slots of [`LATENCY_SLOT`], each a
/// log-bucket histogram: about 1.7 KB, whatever the call rate.
#[derive(Debug)]
struct LatencyWindow {
    origin: Instant,
    /// `slots[i]` holds slot number `numbers[i]` (a slot is reused once its
    /// number is more than a window old).
    numbers: [u64; LATENCY_SLOTS],
    slots: [[u32; LATENCY_BUCKETS]; LATENCY_SLOTS],
}

/// Latency over the last five minutes, for the dashboard.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    pub calls: u64,
    pub p50: Duration,
    pub p99: Duration,
    /// Each slot's median, oldest first (`None`: no call in that slot).
    pub points: [Option<Duration>; LATENCY_SLOTS],
}

impl LatencyWindow {
    fn new(origin: Instant) -> Self {
        LatencyWindow {
            origin,
            numbers: [u64::MAX; LATENCY_SLOTS],
            slots: [[0; LATENCY_BUCKETS]; LATENCY_SLOTS],
        }
    }

    fn slot_number(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.origin);
        elapsed.as_secs() / LATENCY_SLOT.as_secs()
    }

    fn record(&mut self, latency: Duration, now: Instant) {
        let number = self.slot_number(now);
        let index = (number % LATENCY_SLOTS as u64) as usize;
        if self.numbers[index] != number {
            self.numbers[index] = number;
            self.slots[index] = [0; LATENCY_BUCKETS];
        }
        let bucket = &mut self.slots[index][bucket_of(latency)];
        *bucket = bucket.saturating_add(1);
    }

    fn summary(&self, now: Instant) -> Option<LatencySummary> {
        let current = self.slot_number(now);
        let mut total = [0u64; LATENCY_BUCKETS];
        let mut points = [None; LATENCY_SLOTS];
        for (age, point) in points.iter_mut().rev().enumerate() {
            let Some(number) = current.checked_sub(age as u64) else {
                break;
            };
            let index = (number % LATENCY_SLOTS as u64) as usize;
            if self.numbers[index] != number {
                continue;
            }
            let slot = self.slots[index].map(u64::from);
            *point = quantile(&slot, 0.5);
            for (sum, count) in total.iter_mut().zip(slot) {
                *sum += count;
            }
        }
        Some(LatencySummary {
            calls: total.iter().sum(),
            p50: quantile(&total, 0.5)?,
            p99: quantile(&total, 0.99)?,
            points,
        })
    }
}

fn bucket_of(latency: Duration) -> usize {
    let micros = latency.as_secs_f64() * 1e6;
    if micros <= FIRST_BUCKET_MICROS {
        return 0;
    }
    // Bucket i holds latencies up to 50 µs × √2^i.
    let index = (2.0 * (micros / FIRST_BUCKET_MICROS).log2()).ceil();
    (index as usize).min(LATENCY_BUCKETS - 1)
}

/// The upper bound of bucket `index`.
fn bucket_bound(index: usize) -> Duration {
    Duration::from_secs_f64(FIRST_BUCKET_MICROS * 2f64.powf(index as f64 / 2.0) / 1e6)
}

/// The `q` quantile of `buckets`, as its bucket's upper bound (`None` if empty).
fn quantile(buckets: &[u64; LATENCY_BUCKETS], q: f64) -> Option<Duration> {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    buckets.iter().enumerate().find_map(|(index, count)| {
        seen += count;
        (seen >= rank).then(|| bucket_bound(index))
    })
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

    fn call(tool: &str, latency_ms: u64, attempts: u32) -> CallRecord {
        CallRecord {
            at: SystemTime::now(),
            tool: tool.into(),
            kind: OutcomeKind::Ok,
            attempts,
            latency: Duration::from_millis(latency_ms),
            queued: Duration::ZERO,
            caller: None,
        }
    }

    #[test]
    fn latency_quantiles_are_within_a_bucket() {
        let start = Instant::now();
        let mut recent = Recent::default();
        for _ in 0..98 {
            recent.called(call("t", 10, 1), start);
        }
        recent.called(call("t", 400, 1), start);
        recent.called(call("t", 400, 1), start);
        let summary = recent.latency(start).expect("calls were made");
        assert_eq!(summary.calls, 100);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        assert!(
            (10.0..=10.0 * 1.42).contains(&ms(summary.p50)),
            "{summary:?}"
        );
        assert!(
            (400.0..=400.0 * 1.42).contains(&ms(summary.p99)),
            "{summary:?}"
        );
        assert!(summary.points[LATENCY_SLOTS - 1].is_some());
        assert!(
            summary.points[..LATENCY_SLOTS - 1]
                .iter()
                .all(Option::is_none)
        );
    }

    #[test]
    fn latencies_older_than_the_window_are_forgotten() {
        let start = Instant::now();
        let mut recent = Recent::default();
        recent.called(call("t", 900, 1), start);
        let later = start + LATENCY_SLOT * 3;
        recent.called(call("t", 5, 1), later);
        let summary = recent.latency(later).unwrap();
        assert_eq!(summary.calls, 2);
        assert_eq!(summary.points.iter().flatten().count(), 2);
        let much_later = start + LATENCY_SLOT * (LATENCY_SLOTS as u32 + 1);
        let summary = recent.latency(much_later).unwrap();
        assert_eq!(
            summary.calls, 1,
            "the first call's slot is over five minutes old"
        );
        assert!(recent.latency(start + LATENCY_SLOT * 20).is_none());
        // A slot reused after a window holds only its new calls.
        recent.called(call("t", 5, 1), start + LATENCY_SLOT * 20);
        assert_eq!(recent.latency(start + LATENCY_SLOT * 20).unwrap().calls, 1);
    }

    #[test]
    fn refused_calls_are_listed_but_not_timed() {
        let now = Instant::now();
        let mut recent = Recent::default();
        recent.called(call("t", 0, 0), now);
        assert_eq!(recent.calls().count(), 1);
        assert!(recent.latency(now).is_none());
    }

    #[test]
    fn the_records_are_bounded_and_newest_first() {
        let now = Instant::now();
        let mut recent = Recent::default();
        for n in 0..RECENT_CALLS + 7 {
            recent.called(call(&format!("t{n}"), 1, 1), now);
        }
        let failure = Failure::new(FailureKind::Server, "HTTP 503");
        for n in 0..RECENT_FAILURES + 3 {
            recent.failed(FailureRecord::new(
                &failure,
                Phase::Call,
                n as u32,
                Decision::Reject,
                false,
            ));
        }
        assert_eq!(recent.calls().count(), RECENT_CALLS);
        assert_eq!(
            &*recent.calls().next().unwrap().tool,
            format!("t{}", RECENT_CALLS + 6)
        );
        assert_eq!(recent.failures().count(), RECENT_FAILURES);
        assert_eq!(
            recent.failures().next().unwrap().attempt,
            RECENT_FAILURES as u32 + 2
        );
    }

    #[test]
    fn buckets_grow_by_root_two() {
        assert_eq!(bucket_of(Duration::from_micros(10)), 0);
        assert_eq!(bucket_of(Duration::from_micros(50)), 0);
        assert_eq!(bucket_of(Duration::from_micros(51)), 1);
        assert_eq!(bucket_of(Duration::from_micros(100)), 2);
        assert_eq!(bucket_of(Duration::from_secs(3600)), LATENCY_BUCKETS - 1);
        for index in 1..LATENCY_BUCKETS - 1 {
            let bound = bucket_bound(index);
            assert_eq!(bucket_of(bound.mul_f64(0.999)), index, "{index}");
            assert_eq!(bucket_of(bound.mul_f64(1.001)), index + 1, "{index}");
        }
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
