//! Connection reuse per upstream origin, with a fallback for upstreams where
//! reuse stalls.
//!
//! Reusing pooled TCP connections is much faster and lighter than a new
//! connection per request, except against a server that leaves Nagle on
//! (no `TCP_NODELAY`) and writes its response headers and body as two small
//! segments: on a reused connection the body then waits for our delayed ACK,
//! about 40 ms per request. A fresh connection starts in quick-ACK mode and
//! escapes it, which is why rmcp's default (a connection per request) does not
//! see the stall. We cannot fix third-party servers, so the first session to an
//! origin probes it with a few `ping`s; if they stall, every later request to
//! that origin goes through a client that never reuses connections. A ping
//! answered late while the process itself ran late (many sessions starting
//! at once) does not count (docs/DECISIONS.md #84).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU8, Ordering},
    },
    time::Duration,
};

use super::plain::{LanePool, PlainLane};

/// The two HTTP clients all HTTP connections share, and what each origin
/// was found to need.
#[derive(Clone)]
pub struct HttpClients {
    pooled: reqwest::Client,
    fresh: reqwest::Client,
    /// Stands in for `pooled` on `http://` origins, when set.
    plain: Option<PlainLane>,
    origins: Arc<Mutex<HashMap<String, Arc<OriginReuse>>>>,
}

impl std::fmt::Debug for HttpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClients").finish_non_exhaustive()
    }
}

impl HttpClients {
    /// Shares `pooled` for origins where reuse works and `fresh` (which should
    /// not keep idle connections) for origins where it stalls.
    pub fn new(pooled: reqwest::Client, fresh: reqwest::Client) -> Self {
        HttpClients {
            pooled,
            fresh,
            plain: None,
            origins: Arc::default(),
        }
    }

    /// Sends requests to `http://` origins where reuse works by `plain`
    /// instead of the pooled reqwest client (see [`PlainLane`]).
    pub(crate) fn with_plain_lane(mut self, plain: Option<PlainLane>) -> Self {
        self.plain = plain;
        self
    }

    /// The plain-HTTP lane for a request to `origin` (an `http://` one), if
    /// it takes one: the lane is set, and reuse does not stall there (a
    /// stalling origin gets a connection per request, which the fresh
    /// reqwest client gives).
    pub(crate) fn plain_lane(&self, origin: &OriginReuse) -> Option<&PlainLane> {
        match origin.verdict() {
            Reuse::Stalls => None,
            Reuse::Unknown | Reuse::Works => self.plain.as_ref(),
        }
    }

    /// The reuse state of `url`'s origin (scheme, host, port), created on
    /// first use.
    pub fn origin(&self, url: &reqwest::Url) -> Arc<OriginReuse> {
        let name = url.origin().ascii_serialization();
        let mut origins = self
            .origins
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        origins
            .entry(name.clone())
            .or_insert_with(|| {
                Arc::new(OriginReuse {
                    name,
                    state: AtomicU8::new(UNKNOWN),
                    lane_pool: Arc::default(),
                })
            })
            .clone()
    }

    /// The client to send a request to an origin in state `origin` with.
    pub(crate) fn for_origin(&self, origin: &OriginReuse) -> &reqwest::Client {
        match origin.verdict() {
            Reuse::Stalls => &self.fresh,
            Reuse::Unknown | Reuse::Works => &self.pooled,
        }
    }

    /// The pooled client (for requests whose URL could not be parsed: reqwest
    /// reports the error).
    pub(crate) fn pooled(&self) -> &reqwest::Client {
        &self.pooled
    }
}

/// What is known about reusing connections to one origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// Not probed yet (or being probed): reuse.
    Unknown,
    /// Probed: reused connections answer promptly.
    Works,
    /// Probed: reused connections stall; use a connection per request.
    Stalls,
}

/// One origin's [`Reuse`] state, shared by every session to it.
#[derive(Debug)]
pub struct OriginReuse {
    /// `scheme://host:port`: no path, query or credentials, safe to log.
    name: String,
    state: AtomicU8,
    /// The origin's idle connections on the plain-HTTP lane (an `http://`
    /// origin's), shared by every session to it.
    lane_pool: Arc<LanePool>,
}

const UNKNOWN: u8 = 0;
const PROBING: u8 = 1;
const WORKS: u8 = 2;
const STALLS: u8 = 3;

impl OriginReuse {
    /// `scheme://host:port` of the origin.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its idle connections on the plain-HTTP lane.
    pub(crate) fn lane_pool(&self) -> &Arc<LanePool> {
        &self.lane_pool
    }

    /// The current verdict.
    pub fn verdict(&self) -> Reuse {
        match self.state.load(Ordering::Relaxed) {
            WORKS => Reuse::Works,
            STALLS => Reuse::Stalls,
            _ => Reuse::Unknown,
        }
    }

    /// Claims the one probe of this origin; `None` when it was probed or is
    /// being probed by another session.
    pub(crate) fn claim_probe(self: &Arc<Self>) -> Option<ProbeClaim> {
        self.state
            .compare_exchange(UNKNOWN, PROBING, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| ProbeClaim {
                origin: self.clone(),
                settled: false,
            })
    }
}

/// The right to probe an origin. Dropped unsettled (the probe was cut short),
/// it hands the probe back so a later session tries again.
pub(crate) struct ProbeClaim {
    origin: Arc<OriginReuse>,
    settled: bool,
}

impl ProbeClaim {
    pub(crate) fn settle(mut self, verdict: Reuse) {
        let state = match verdict {
            Reuse::Works => WORKS,
            Reuse::Stalls => STALLS,
            Reuse::Unknown => UNKNOWN,
        };
        self.origin.state.store(state, Ordering::Release);
        self.settled = true;
    }
}

impl Drop for ProbeClaim {
    fn drop(&mut self) {
        if !self.settled {
            self.origin.state.store(UNKNOWN, Ordering::Release);
        }
    }
}

/// How many `ping`s a probe sends at most.
pub(crate) const PROBE_PINGS: usize = 4;
/// A loopback or LAN ping answered this late on a reused connection is the
/// delayed-ACK stall (40 ms on Linux), not the server thinking.
pub(crate) const STALL_THRESHOLD: Duration = Duration::from_millis(30);
/// Stalled pings that settle the verdict. The first request after
/// `initialize` often escapes (the connection is still in quick-ACK mode), so
/// one fast ping proves nothing; two slow ones are the pattern.
const STALLS_NEEDED: usize = 2;
/// How late the prober's own runtime may run a timer while a ping is out,
/// for the ping's time to be the connection's (a stall is 40 ms of an idle
/// wait; a busy process or machine delays everything, the ping included).
const RUNTIME_LAG: Duration = Duration::from_millis(10);

/// What one probe `ping` showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ping {
    /// Answered after `round_trip`, while the prober's runtime ran its
    /// timers up to `lag` late.
    Answered { round_trip: Duration, lag: Duration },
    /// An error, or no answer in time.
    Unanswered,
}

/// The verdict from the pings sent so far (in order), or `None` while
/// another ping is needed. Anything but a clear stall keeps reuse: a ping
/// that fails (or a server that does not answer pings) settles `Works` at
/// once, and so does a probe whose [`PROBE_PINGS`] pings showed no stall. A
/// ping answered while the runtime ran late proves nothing about the
/// connection and is not counted either way. Pure, so every timing case is
/// tested with made-up timings rather than real round trips.
pub(crate) fn probe_verdict(pings: &[Ping]) -> Option<Reuse> {
    let mut round_trips = Vec::with_capacity(pings.len());
    for ping in pings {
        match *ping {
            Ping::Answered { round_trip, lag } if lag < RUNTIME_LAG => round_trips.push(round_trip),
            Ping::Answered { .. } => {}
            Ping::Unanswered => return Some(Reuse::Works),
        }
    }
    stall_verdict(&round_trips).or((pings.len() >= PROBE_PINGS).then_some(Reuse::Works))
}

/// The verdict from the round-trip times of the pings counted so far, or
/// `None` while more pings are needed.
fn stall_verdict(round_trips: &[Duration]) -> Option<Reuse> {
    let slow = round_trips
        .iter()
        .filter(|rtt| **rtt >= STALL_THRESHOLD)
        .count();
    let fast = round_trips.len() - slow;
    if slow >= STALLS_NEEDED {
        Some(Reuse::Stalls)
    } else if fast > PROBE_PINGS - STALLS_NEEDED {
        Some(Reuse::Works)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Duration = Duration::from_micros(300);
    const SLOW: Duration = Duration::from_millis(41);

    #[test]
    fn two_stalled_pings_mean_reuse_stalls() {
        assert_eq!(stall_verdict(&[FAST, SLOW]), None);
        assert_eq!(stall_verdict(&[FAST, SLOW, SLOW]), Some(Reuse::Stalls));
        assert_eq!(stall_verdict(&[SLOW, SLOW]), Some(Reuse::Stalls));
    }

    #[test]
    fn three_prompt_pings_mean_reuse_works() {
        assert_eq!(stall_verdict(&[FAST, FAST]), None);
        assert_eq!(stall_verdict(&[FAST, FAST, FAST]), Some(Reuse::Works));
        assert_eq!(stall_verdict(&[FAST, SLOW, FAST, FAST]), Some(Reuse::Works));
    }

    /// A ping answered after `round_trip` with the runtime on time.
    fn answered(round_trip: Duration) -> Ping {
        Ping::Answered {
            round_trip,
            lag: Duration::ZERO,
        }
    }

    /// A ping answered after `round_trip` while the runtime ran `lag` late.
    fn late(round_trip: Duration, lag: Duration) -> Ping {
        Ping::Answered { round_trip, lag }
    }

    #[test]
    fn a_probe_needs_pings_until_the_pattern_shows() {
        assert_eq!(probe_verdict(&[]), None);
        assert_eq!(probe_verdict(&[answered(FAST)]), None);
        assert_eq!(probe_verdict(&[answered(SLOW)]), None);
        assert_eq!(
            probe_verdict(&[answered(FAST), answered(FAST), answered(FAST)]),
            Some(Reuse::Works)
        );
        assert_eq!(
            probe_verdict(&[answered(SLOW), answered(SLOW)]),
            Some(Reuse::Stalls)
        );
    }

    #[test]
    fn the_stall_threshold_is_30_ms() {
        let just_under = Duration::from_millis(30) - Duration::from_micros(1);
        let at = Duration::from_millis(30);
        assert_eq!(
            probe_verdict(&[answered(just_under), answered(just_under)]),
            None
        );
        assert_eq!(
            probe_verdict(&[answered(at), answered(at)]),
            Some(Reuse::Stalls)
        );
    }

    #[test]
    fn a_ping_answered_while_the_runtime_ran_late_is_not_counted() {
        let busy = Duration::from_millis(40);
        // Slow pings on a runtime 40 ms late: no evidence, reuse kept.
        let all_late = [late(SLOW, busy); PROBE_PINGS];
        assert_eq!(probe_verdict(&all_late[..3]), None);
        assert_eq!(probe_verdict(&all_late), Some(Reuse::Works));
        // Just under the lag allowed counts; at it, not.
        let tolerated = RUNTIME_LAG - Duration::from_micros(1);
        assert_eq!(
            probe_verdict(&[late(SLOW, tolerated), late(SLOW, tolerated)]),
            Some(Reuse::Stalls)
        );
        assert_eq!(
            probe_verdict(&[late(SLOW, RUNTIME_LAG), late(SLOW, RUNTIME_LAG)]),
            None
        );
        // Late pings in between do not hide two that stalled on time.
        assert_eq!(
            probe_verdict(&[
                late(SLOW, busy),
                answered(SLOW),
                late(FAST, busy),
                answered(SLOW)
            ]),
            Some(Reuse::Stalls)
        );
    }

    #[test]
    fn an_unanswered_ping_keeps_reuse_at_once() {
        assert_eq!(probe_verdict(&[Ping::Unanswered]), Some(Reuse::Works));
        assert_eq!(
            probe_verdict(&[answered(SLOW), Ping::Unanswered]),
            Some(Reuse::Works)
        );
    }

    #[test]
    fn four_pings_without_a_clear_stall_keep_reuse() {
        assert_eq!(
            probe_verdict(&[answered(SLOW), answered(FAST), answered(FAST)]),
            None
        );
        assert_eq!(
            probe_verdict(&[
                answered(SLOW),
                answered(FAST),
                answered(FAST),
                answered(FAST)
            ]),
            Some(Reuse::Works)
        );
    }

    #[test]
    fn a_probe_is_claimed_once_and_handed_back_if_unsettled() {
        let origin = HttpClients::new(reqwest::Client::new(), reqwest::Client::new())
            .origin(&reqwest::Url::parse("http://127.0.0.1:9/").unwrap());
        let claim = origin.claim_probe().expect("first claim");
        assert!(origin.claim_probe().is_none(), "one probe at a time");
        drop(claim);
        assert_eq!(origin.verdict(), Reuse::Unknown);
        origin
            .claim_probe()
            .expect("claim again")
            .settle(Reuse::Stalls);
        assert_eq!(origin.verdict(), Reuse::Stalls);
        assert!(
            origin.claim_probe().is_none(),
            "settled origins are not re-probed"
        );
    }

    #[test]
    fn only_origins_where_reuse_does_not_stall_take_the_plain_lane() {
        let lane = PlainLane::new(Duration::from_secs(1), Duration::from_secs(1));
        let clients =
            HttpClients::new(reqwest::Client::new(), reqwest::Client::new()).with_plain_lane(lane);
        let origin = clients.origin(&reqwest::Url::parse("http://127.0.0.1:9/").unwrap());
        assert_eq!(lane.is_some(), clients.plain_lane(&origin).is_some());
        origin.claim_probe().unwrap().settle(Reuse::Works);
        assert_eq!(lane.is_some(), clients.plain_lane(&origin).is_some());
        let stalling = clients.origin(&reqwest::Url::parse("http://127.0.0.1:10/").unwrap());
        stalling.claim_probe().unwrap().settle(Reuse::Stalls);
        assert!(
            clients.plain_lane(&stalling).is_none(),
            "a stalling origin gets a connection per request, from reqwest's fresh client"
        );
        let without = HttpClients::new(reqwest::Client::new(), reqwest::Client::new());
        assert!(without.plain_lane(&origin).is_none());
    }

    #[test]
    fn origins_are_keyed_by_scheme_host_and_port() {
        let clients = HttpClients::new(reqwest::Client::new(), reqwest::Client::new());
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        let a = clients.origin(&url("http://127.0.0.1:9000/mcp"));
        let b = clients.origin(&url("http://127.0.0.1:9000/other?key=1"));
        let c = clients.origin(&url("http://127.0.0.1:9001/mcp"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
