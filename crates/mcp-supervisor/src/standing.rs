//! A connection's standing and the fixed vocabularies that describe it,
//! each rendered in one place for `/status`, `/metrics` and the agent-facing
//! texts.

use std::fmt;

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
}
