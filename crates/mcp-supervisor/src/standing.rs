//! A connection's standing and the fixed vocabularies that describe it,
//! each rendered in one place for `/status`, `/metrics` and the agent-facing
//! texts.

use std::{
    fmt,
    time::{Duration, SystemTime},
};

use tokio::time::Instant;

use crate::FailureKind;

/// Where a connection is in its life (docs/SUPERVISION.md, "GET /status").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnectionState {
    /// No live session: never used, or disposed after a failure and not parked.
    Idle,
    /// A session is being built.
    Connecting,
    /// A healthy session.
    Ready,
    /// Refuses all work until its cooldown ends.
    Parked,
    /// Does no I/O until a reset or a reload that changes it.
    Retired,
    /// Shut down, or removed by a reload.
    Stopped,
}

impl ConnectionState {
    /// Every state, in `/status` and metrics order.
    pub const ALL: [ConnectionState; 6] = [
        Self::Idle,
        Self::Connecting,
        Self::Ready,
        Self::Parked,
        Self::Retired,
        Self::Stopped,
    ];

    /// The name `/status`, the metrics `state` label and the meta-tools show.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Connecting => "connecting",
            Self::Ready => "ready",
            Self::Parked => "parked",
            Self::Retired => "retired",
            Self::Stopped => "stopped",
        }
    }
}

impl fmt::Display for ConnectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a connection was retired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetireReason {
    /// A failure retired it: an authorization failure (`needs_login`,
    /// `auth`, `permission`) at once, or any other counting kind on the
    /// `retire_after`-th park.
    Failure(FailureKind),
    /// Its actor died more often than `restart_budget` allows.
    CrashLoop,
}

impl RetireReason {
    /// The name `/status` (`retired_reason`), the `Retired` event and the
    /// logs show: the failure kind's, or `crash_loop`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failure(kind) => kind.as_str(),
            Self::CrashLoop => "crash_loop",
        }
    }

    /// Whether a person must log in before the connection works again
    /// (docs/OAUTH.md): the one place that says so.
    pub fn needs_login(self) -> bool {
        self == Self::Failure(FailureKind::NeedsLogin)
    }
}

impl fmt::Display for RetireReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a park (and so a `Retry-After` window) ends. Its value is a
/// wall-clock time, which `/status` shows and which can leave the process;
/// inside the process it is compared on the monotonic clock it was made
/// from, so a step of the wall clock neither shortens nor stretches a
/// running park (and tests on tokio's paused clock stay exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    wall: SystemTime,
    mono: Instant,
}

/// Where a deadline too far to represent is put: far enough never to come.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl Deadline {
    /// `after` from now.
    pub fn after(after: Duration) -> Self {
        let after = after.min(FAR);
        Deadline {
            wall: SystemTime::now() + after,
            mono: Instant::now() + after,
        }
    }

    /// A deadline known only as a wall-clock time (from another process):
    /// the time left is read once, now (none if it has passed).
    pub fn at(wall: SystemTime) -> Self {
        let left = wall
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
            .min(FAR);
        Deadline {
            wall,
            mono: Instant::now() + left,
        }
    }

    /// The wall-clock time it ends.
    pub fn wall(&self) -> SystemTime {
        self.wall
    }

    /// The time left (none once it has passed).
    pub fn remaining(&self) -> Duration {
        self.mono.saturating_duration_since(Instant::now())
    }

    /// Whether it is still to come.
    pub fn pending(&self) -> bool {
        self.mono > Instant::now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are a contract (`/status`, metrics, `list_mcps`): written
    /// out here, so a renamed or reordered state fails.
    #[test]
    fn each_state_has_its_name() {
        assert_eq!(
            ConnectionState::ALL.map(ConnectionState::as_str),
            [
                "idle",
                "connecting",
                "ready",
                "parked",
                "retired",
                "stopped"
            ]
        );
    }

    #[test]
    fn each_retire_reason_has_its_name() {
        assert_eq!(RetireReason::CrashLoop.as_str(), "crash_loop");
        for kind in FailureKind::ALL {
            assert_eq!(RetireReason::Failure(kind).as_str(), kind.as_str());
        }
        assert_eq!(
            RetireReason::Failure(FailureKind::NeedsLogin).as_str(),
            "needs_login"
        );
    }

    #[test]
    fn only_a_needs_login_retirement_needs_a_login() {
        assert!(RetireReason::Failure(FailureKind::NeedsLogin).needs_login());
        assert!(!RetireReason::Failure(FailureKind::Auth).needs_login());
        assert!(!RetireReason::CrashLoop.needs_login());
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_runs_on_the_monotonic_clock_and_reads_as_wall_time() {
        let deadline = Deadline::after(Duration::from_secs(30));
        let wall = deadline.wall();
        let now = SystemTime::now();
        assert!(
            wall > now && wall <= now + Duration::from_secs(30),
            "{wall:?}"
        );
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(deadline.pending());
        assert_eq!(deadline.remaining(), Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!deadline.pending());
        assert_eq!(deadline.remaining(), Duration::ZERO);
        assert_eq!(deadline.wall(), wall, "its wall time is fixed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_from_wall_time_counts_what_is_left() {
        let soon = Deadline::at(SystemTime::now() + Duration::from_secs(10));
        assert!(soon.remaining() <= Duration::from_secs(10));
        assert!(soon.remaining() > Duration::from_secs(9));
        let past = Deadline::at(SystemTime::now() - Duration::from_secs(10));
        assert!(!past.pending());
        // Absurdly far: capped, never an overflow.
        assert!(Deadline::after(Duration::MAX).pending());
    }
}
