//! One connection as the dashboard shows it ([`Row`]): every cell already
//! worded, so the page and the live updates show the same text, made in one
//! place.

use std::{
    fmt::Write,
    time::{Duration, SystemTime},
};

use serde::Serialize;

use super::html::epoch_ms;
use crate::{
    ConnectionState, OutcomeKind,
    admin::status::rfc3339,
    connection::stats::{LATENCY_SLOTS, LatencySummary},
    registry::ConnectionStatus,
};

/// A connection's row. The live feed sends the rows that changed; the page's
/// script writes each field into the elements marked `data-field="…"`
/// inside the element marked `data-conn="<name>"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Row {
    pub(crate) name: String,
    /// The state's wire name, or `held` during a `Retry-After` window (the
    /// badge's colour).
    pub(crate) state: &'static str,
    pub(crate) badge: String,
    /// The end of a park or `Retry-After` hold, in ms since the epoch.
    pub(crate) until: Option<u64>,
    pub(crate) transport: &'static str,
    pub(crate) protocol: String,
    pub(crate) tools: String,
    pub(crate) in_flight: usize,
    pub(crate) queued: usize,
    pub(crate) ok: u64,
    pub(crate) errors: u64,
    pub(crate) last_failure: String,
    pub(crate) oauth: String,
    pub(crate) p50: String,
    pub(crate) p99: String,
    /// The latency chart: an SVG polyline's `points`.
    pub(crate) spark: String,
    #[serde(skip)]
    pub(crate) rank: Rank,
    #[serde(skip)]
    pub(crate) needs_login: bool,
}

/// Where a row sorts: problems first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    Retired,
    NeedsLogin,
    Parked,
    Held,
    Fine,
}

/// The width and height of a latency chart.
pub(crate) const SPARK_SIZE: (u32, u32) = (100, 20);

/// `12.3 ms`, `850 µs`, `2.4 s`.
pub(crate) fn duration_text(duration: Duration) -> String {
    let micros = duration.as_micros();
    if micros < 1_000 {
        format!("{micros} µs")
    } else if micros < 10_000 {
        format!("{:.1} ms", micros as f64 / 1e3)
    } else if micros < 1_000_000 {
        format!("{} ms", micros / 1_000)
    } else {
        format!("{:.1} s", micros as f64 / 1e6)
    }
}

/// `in 27 s`, `in 3 min 5 s` (from `now`; `now` if past).
pub(crate) fn remaining_text(until: SystemTime, now: SystemTime) -> String {
    let left = until.duration_since(now).unwrap_or_default().as_secs();
    match left {
        0..60 => format!("in {left} s"),
        _ => format!("in {} min {} s", left / 60, left % 60),
    }
}

impl Row {
    pub(crate) fn from_status(status: &ConnectionStatus) -> Row {
        let needs_login = status.needs_login();
        let held = status
            .held_until
            .filter(|_| status.state != ConnectionState::Parked);
        let (state, rank) = match status.state {
            ConnectionState::Retired => ("retired", Rank::Retired),
            ConnectionState::Parked => ("parked", Rank::Parked),
            _ if held.is_some() => ("held", Rank::Held),
            other => (other.as_str(), Rank::Fine),
        };
        let rank = if needs_login {
            rank.min(Rank::NeedsLogin)
        } else {
            rank
        };
        let badge = match (status.state, status.retired_reason) {
            (ConnectionState::Retired, Some(reason)) => format!("retired: {}", reason.as_str()),
            _ if held.is_some() => "held (Retry-After)".to_owned(),
            (other, _) => other.as_str().to_owned(),
        };
        let calls = &status.calls;
        let errors = OutcomeKind::ALL
            .into_iter()
            .filter(|kind| *kind != OutcomeKind::Ok)
            .map(|kind| calls.get(kind))
            .sum();
        let last_failure = match &status.last_failure {
            Some((failure, at)) => match failure.status {
                Some(code) => format!("{} (HTTP {code}) at {}", failure.kind, rfc3339(*at)),
                None => format!("{} at {}", failure.kind, rfc3339(*at)),
            },
            None => "—".to_owned(),
        };
        let (p50, p99, spark) = match &status.latency {
            Some(latency) => (
                duration_text(latency.p50),
                duration_text(latency.p99),
                spark_points(latency),
            ),
            None => ("—".to_owned(), "—".to_owned(), String::new()),
        };
        Row {
            name: status.name.clone(),
            state,
            badge,
            until: status.parked_until.or(held).map(epoch_ms),
            transport: status.transport,
            protocol: status.protocol.clone().unwrap_or_else(|| "—".to_owned()),
            tools: status
                .tool_count
                .map_or_else(|| "not loaded".to_owned(), |count| count.to_string()),
            in_flight: status.in_flight,
            queued: status.queued,
            ok: calls.ok,
            errors,
            last_failure,
            oauth: oauth_text(status, needs_login),
            p50,
            p99,
            spark,
            rank,
            needs_login,
        }
    }
}

fn oauth_text(status: &ConnectionStatus, needs_login: bool) -> String {
    let Some(oauth) = &status.oauth else {
        return "—".to_owned();
    };
    if needs_login {
        return "needs login".to_owned();
    }
    let grant = if oauth.by_itself {
        "client credentials"
    } else {
        "logged in"
    };
    match oauth.expires_at {
        Some(at) => format!("{grant}, token expires {}", rfc3339(at)),
        None => grant.to_owned(),
    }
}

/// The chart of each slot's median, on a log scale from the window's
/// fastest to its slowest (empty slots are skipped).
fn spark_points(latency: &LatencySummary) -> String {
    let (width, height) = SPARK_SIZE;
    let logs: Vec<(usize, f64)> = latency
        .points
        .iter()
        .enumerate()
        .filter_map(|(slot, point)| Some((slot, point.as_ref()?.as_secs_f64().max(1e-6).ln())))
        .collect();
    let low = logs.iter().map(|(_, l)| *l).fold(f64::INFINITY, f64::min);
    let high = logs
        .iter()
        .map(|(_, l)| *l)
        .fold(f64::NEG_INFINITY, f64::max);
    let span = high - low;
    let step = f64::from(width) / (LATENCY_SLOTS - 1) as f64;
    let mut points = String::new();
    for (slot, log) in &logs {
        // All at one level: draw it mid-height.
        let y = if high - low < 1e-6 {
            f64::from(height) / 2.0
        } else {
            f64::from(height - 2) * (1.0 - (log - low) / span) + 1.0
        };
        if logs.len() == 1 {
            // One slot: a short level line, so it shows.
            let _ = write!(
                points,
                "{:.0},{y:.0} ",
                (*slot as f64 - 1.0).max(0.0) * step
            );
        }
        let _ = write!(points, "{:.0},{y:.0} ", *slot as f64 * step);
    }
    points.pop();
    points
}

/// Rows in dashboard order: problems first, then by name.
pub(crate) fn sorted(statuses: &[ConnectionStatus]) -> Vec<Row> {
    let mut rows: Vec<Row> = statuses.iter().map(Row::from_status).collect();
    rows.sort_by(|a, b| a.rank.cmp(&b.rank).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// How many connections are in each state (the overview's header), every
/// state in [`STATE_ORDER`], zeros included, so a page can update them.
pub(crate) fn counts<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Vec<(&'static str, usize)> {
    let mut counts: Vec<(&'static str, usize)> =
        STATE_ORDER.iter().map(|state| (*state, 0)).collect();
    for row in rows {
        if let Some((_, count)) = counts.iter_mut().find(|(state, _)| *state == row.state) {
            *count += 1;
        }
    }
    counts
}

/// The order states are counted in: problems first.
pub(crate) const STATE_ORDER: [&str; 7] = [
    "retired",
    "parked",
    "held",
    "connecting",
    "ready",
    "idle",
    "stopped",
];

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::{Failure, RetireReason, failure::FailureKind};

    #[test]
    fn problems_sort_first() {
        let mut parked = ConnectionStatus::idle("b", "http");
        parked.state = ConnectionState::Parked;
        parked.parked_until = Some(UNIX_EPOCH + Duration::from_secs(30));
        let mut retired = ConnectionStatus::idle("z", "http");
        retired.state = ConnectionState::Retired;
        retired.retired_reason = Some(RetireReason::Failure(FailureKind::Auth));
        let mut held = ConnectionStatus::idle("c", "http");
        held.state = ConnectionState::Ready;
        held.held_until = Some(UNIX_EPOCH + Duration::from_secs(9));
        let rows = sorted(&[ConnectionStatus::idle("a", "stdio"), parked, held, retired]);
        let names: Vec<_> = rows.iter().map(|row| row.name.as_str()).collect();
        assert_eq!(names, ["z", "b", "c", "a"]);
        assert_eq!(rows[0].badge, "retired: auth");
        assert_eq!((rows[1].state, rows[1].until), ("parked", Some(30_000)));
        assert_eq!((rows[2].state, rows[2].until), ("held", Some(9_000)));
        assert_eq!(rows[2].badge, "held (Retry-After)");
        assert_eq!(
            counts(&rows),
            [
                ("retired", 1),
                ("parked", 1),
                ("held", 1),
                ("connecting", 0),
                ("ready", 0),
                ("idle", 1),
                ("stopped", 0)
            ]
        );
    }

    #[test]
    fn cells_are_worded_once() {
        let mut status = ConnectionStatus::idle("a", "http");
        status.calls.ok = 7;
        status.calls.busy = 2;
        status.calls.timed_out = 1;
        let mut failure = Failure::new(FailureKind::Server, "x");
        failure.status = Some(503);
        status.last_failure = Some((failure, UNIX_EPOCH));
        let row = Row::from_status(&status);
        assert_eq!((row.ok, row.errors), (7, 3));
        assert_eq!(
            row.last_failure,
            "server (HTTP 503) at 1970-01-01T00:00:00Z"
        );
        assert_eq!((row.tools.as_str(), row.p50.as_str()), ("not loaded", "—"));
        assert_eq!(duration_text(Duration::from_micros(850)), "850 µs");
        assert_eq!(duration_text(Duration::from_micros(2_345)), "2.3 ms");
        assert_eq!(duration_text(Duration::from_millis(123)), "123 ms");
        assert_eq!(duration_text(Duration::from_millis(2_400)), "2.4 s");
        let now = UNIX_EPOCH + Duration::from_secs(100);
        assert_eq!(
            remaining_text(now + Duration::from_secs(27), now),
            "in 27 s"
        );
        assert_eq!(
            remaining_text(now + Duration::from_secs(185), now),
            "in 3 min 5 s"
        );
        assert_eq!(remaining_text(UNIX_EPOCH, now), "in 0 s");
    }

    #[test]
    fn the_chart_spans_its_box() {
        let mut points = [None; LATENCY_SLOTS];
        points[0] = Some(Duration::from_millis(1));
        points[LATENCY_SLOTS - 1] = Some(Duration::from_millis(100));
        let latency = LatencySummary {
            calls: 2,
            p50: Duration::from_millis(1),
            p99: Duration::from_millis(100),
            points,
        };
        assert_eq!(spark_points(&latency), "0,19 100,1");
        let mut one = latency;
        one.points = [None; LATENCY_SLOTS];
        one.points[LATENCY_SLOTS - 1] = Some(Duration::from_millis(3));
        assert_eq!(
            spark_points(&one),
            "89,10 100,10",
            "one slot still draws a line"
        );
    }
}
