//! A connection's standing and the fixed vocabularies that describe it,
//! each rendered in one place for `/status`, `/metrics` and the agent-facing
//! texts.

use std::fmt;

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
}
