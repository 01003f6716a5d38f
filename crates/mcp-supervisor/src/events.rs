//! Transitions of a connection's state, published to subscribers (SPEC §7).

use std::time::Duration;

use actix::Message;

use crate::failure::Failure;

/// One state transition of one connection. Each is published exactly once.
#[derive(Message, Debug, Clone, PartialEq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum ConnectionEvent {
    /// A session is being built (first use, or a rebuild after a failure).
    Connecting { connection: String },
    /// A session is up. `revived` when this ended a park.
    Ready { connection: String, revived: bool },
    /// The connection refuses work for `cooldown`; `attempt` is the attempt
    /// whose failure ended the operation.
    Parked {
        connection: String,
        failure: Failure,
        cooldown: Duration,
        attempt: u32,
    },
    /// The first use after a park's cooldown: the session is being rebuilt.
    Revived { connection: String },
    /// Permanently unavailable until reload or reset.
    Retired {
        connection: String,
        reason: String,
        failure: Option<Failure>,
    },
    /// The connection actor died and was rebuilt from config.
    Restarted { connection: String, restarts: u32 },
    /// The connection was stopped (shutdown, or removed by a reload).
    Stopped { connection: String },
    /// The upstream's tool list changed; the cached catalog was dropped.
    ToolsChanged { connection: String },
}

impl ConnectionEvent {
    /// The connection this event is about.
    pub fn connection(&self) -> &str {
        match self {
            ConnectionEvent::Connecting { connection }
            | ConnectionEvent::Ready { connection, .. }
            | ConnectionEvent::Parked { connection, .. }
            | ConnectionEvent::Revived { connection }
            | ConnectionEvent::Retired { connection, .. }
            | ConnectionEvent::Restarted { connection, .. }
            | ConnectionEvent::Stopped { connection }
            | ConnectionEvent::ToolsChanged { connection } => connection,
        }
    }
}
