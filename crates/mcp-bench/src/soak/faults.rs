//! The fault scheduler: cycles every failure kind over the faulty upstreams,
//! one window at a time, with a quiet gap after each so the connection
//! recovers (its park ends) before the next kind.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::Soak;

/// Every failure the soak injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum FaultKind {
    /// `bouncer` stopped (SIGTERM): connections refused; restarted on the
    /// same port after the window.
    Refused,
    /// `bouncer` killed (SIGKILL) with calls in flight: the connection is
    /// cut mid-request, before the tool answered.
    KilledMidCall,
    /// `flaky` never answers calls.
    Hang,
    /// `flaky` runs the call, then cuts the body (`drop_connection`).
    CutAfterRun,
    /// `flaky` runs the call, then answers 502 (`status_after_run`).
    StatusAfterRun,
    /// `flaky` answers 500 without running the call.
    Status500,
    /// 502.
    Status502,
    /// 503.
    Status503,
    /// 429 with `Retry-After: 1`.
    RetryAfterSeconds,
    /// 429 with `Retry-After` as an HTTP date 2 s ahead.
    RetryAfterDate,
    /// 429 without `Retry-After`.
    TooManyRequests,
    /// 404 for the session (`expire_session`), a few times in the window.
    SessionExpired,
    /// 401 with `WWW-Authenticate: Bearer` on every request (retires the
    /// connection; reset through the admin API after the window).
    Unauthorized,
    /// 403 on every request (reset after the window too).
    Forbidden,
    /// 200 with a body that is not JSON-RPC.
    Garbage,
    /// Every call delayed 1.5 s: slow, but within the 3 s deadline.
    SlowUnderDeadline,
    /// Every call delayed 5 s: past the deadline.
    SlowOverDeadline,
    /// stdio `crasher` exits in the middle of a call to `add`.
    StdioCrash,
    /// stdio `stubborn` (ignores SIGTERM) is reset through the admin API, so
    /// the supervisor has to kill it.
    StdioIgnoresSigterm,
}

impl FaultKind {
    pub(crate) const ALL: [FaultKind; 19] = [
        FaultKind::Refused,
        FaultKind::KilledMidCall,
        FaultKind::Hang,
        FaultKind::CutAfterRun,
        FaultKind::StatusAfterRun,
        FaultKind::Status500,
        FaultKind::Status502,
        FaultKind::Status503,
        FaultKind::RetryAfterSeconds,
        FaultKind::RetryAfterDate,
        FaultKind::TooManyRequests,
        FaultKind::SessionExpired,
        FaultKind::Unauthorized,
        FaultKind::Forbidden,
        FaultKind::Garbage,
        FaultKind::SlowUnderDeadline,
        FaultKind::SlowOverDeadline,
        FaultKind::StdioCrash,
        FaultKind::StdioIgnoresSigterm,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            FaultKind::Refused => "refused (upstream stopped)",
            FaultKind::KilledMidCall => "cut before the answer (upstream killed mid-call)",
            FaultKind::Hang => "hang",
            FaultKind::CutAfterRun => "cut mid-body after the tool ran",
            FaultKind::StatusAfterRun => "502 after the tool ran",
            FaultKind::Status500 => "500",
            FaultKind::Status502 => "502",
            FaultKind::Status503 => "503",
            FaultKind::RetryAfterSeconds => "429 Retry-After: seconds",
            FaultKind::RetryAfterDate => "429 Retry-After: HTTP date",
            FaultKind::TooManyRequests => "429 without Retry-After",
            FaultKind::SessionExpired => "404 session expired",
            FaultKind::Unauthorized => "401",
            FaultKind::Forbidden => "403",
            FaultKind::Garbage => "garbage body",
            FaultKind::SlowUnderDeadline => "slow, under the deadline (1.5 s)",
            FaultKind::SlowOverDeadline => "slow, over the deadline (5 s)",
            FaultKind::StdioCrash => "stdio child crashes mid-call",
            FaultKind::StdioIgnoresSigterm => "stdio child ignores SIGTERM (reset)",
        }
    }

    /// The fault script for `flaky`, for the kinds injected there.
    fn script(self) -> Option<Value> {
        let calls = json!({"method": "tools/call"});
        let status = |code: u16| json!({"kind": "status", "status": code});
        let (when, fault) = match self {
            FaultKind::Hang => (calls, json!({"kind": "hang"})),
            FaultKind::CutAfterRun => (calls, json!({"kind": "drop_connection"})),
            FaultKind::StatusAfterRun => {
                (calls, json!({"kind": "status_after_run", "status": 502}))
            }
            FaultKind::Status500 => (calls, status(500)),
            FaultKind::Status502 => (calls, status(502)),
            FaultKind::Status503 => (calls, status(503)),
            FaultKind::RetryAfterSeconds => (
                calls,
                json!({"kind": "status", "status": 429, "retry_after": {"seconds": 1}}),
            ),
            FaultKind::RetryAfterDate => (
                calls,
                json!({"kind": "status", "status": 429,
                       "retry_after": {"date": http_date(SystemTime::now() + Duration::from_secs(2))}}),
            ),
            FaultKind::TooManyRequests => (calls, status(429)),
            FaultKind::SessionExpired => {
                return Some(
                    json!([{"when": calls, "fault": {"kind": "expire_session"}, "times": 1}]),
                );
            }
            FaultKind::Unauthorized => (
                json!("any"),
                json!({"kind": "status", "status": 401, "www_authenticate": "Bearer"}),
            ),
            FaultKind::Forbidden => (json!("any"), status(403)),
            FaultKind::Garbage => (calls, json!({"kind": "garbage"})),
            FaultKind::SlowUnderDeadline => (calls, json!({"kind": "delay", "ms": 1500})),
            FaultKind::SlowOverDeadline => (calls, json!({"kind": "delay", "ms": 5000})),
            FaultKind::Refused
            | FaultKind::KilledMidCall
            | FaultKind::StdioCrash
            | FaultKind::StdioIgnoresSigterm => return None,
        };
        Some(json!([{"when": when, "fault": fault}]))
    }
}

/// How long each fault lasts, and the quiet gap after it.
const WINDOW: Duration = Duration::from_secs(3);
const GAP: Duration = Duration::from_millis(1500);

/// Cycles the kinds until the fault phase ends; returns how often each ran.
pub(crate) async fn schedule(soak: &Soak) -> Vec<(FaultKind, u32)> {
    let mut applied: Vec<(FaultKind, u32)> = FaultKind::ALL.iter().map(|k| (*k, 0)).collect();
    'cycles: loop {
        for (kind, count) in applied.iter_mut() {
            if !soak.in_fault_phase() {
                break 'cycles;
            }
            if let Err(error) = inject(soak, *kind).await {
                eprintln!("mcp-soak: injecting {}: {error:#}", kind.name());
            }
            *count += 1;
            tokio::time::sleep(GAP).await;
        }
    }
    applied
}

/// One window of one kind.
async fn inject(soak: &Soak, kind: FaultKind) -> anyhow::Result<()> {
    if let Some(script) = kind.script() {
        let repeats = if kind == FaultKind::SessionExpired {
            4
        } else {
            1
        };
        for _ in 0..repeats {
            soak.set_flaky_faults(&script).await?;
            tokio::time::sleep(WINDOW / repeats).await;
        }
        soak.set_flaky_faults(&json!([])).await?;
        if matches!(kind, FaultKind::Unauthorized | FaultKind::Forbidden) {
            // An auth failure retires the connection until someone acts.
            soak.admin_post("/connections/flaky/reset").await?;
        }
        return Ok(());
    }
    match kind {
        FaultKind::Refused | FaultKind::KilledMidCall => {
            let signal = if kind == FaultKind::Refused {
                nix::sys::signal::Signal::SIGTERM
            } else {
                nix::sys::signal::Signal::SIGKILL
            };
            soak.bouncer_down(signal).await?;
            tokio::time::sleep(WINDOW).await;
            soak.bouncer_up().await?;
        }
        FaultKind::StdioCrash => {
            // A session of its own for each window: between windows it is
            // idle longer than the gateway's session_idle_timeout.
            let mut mcp = soak.session().await?;
            for _ in 0..3 {
                let reply = mcp.call("crasher__add", json!({"a": 1, "b": 2})).await;
                soak.record("crasher__add", &reply, false);
                tokio::time::sleep(WINDOW / 3).await;
            }
        }
        FaultKind::StdioIgnoresSigterm => {
            soak.admin_post("/connections/stubborn/reset").await?;
            tokio::time::sleep(WINDOW).await;
        }
        _ => {}
    }
    Ok(())
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub(crate) fn http_date(at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = crate::measure::civil_from_days(days as i64);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(http_date(at), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn every_flaky_kind_has_a_script() {
        let on_flaky = FaultKind::ALL
            .iter()
            .filter(|k| k.script().is_some())
            .count();
        assert_eq!(on_flaky, 15);
    }
}
