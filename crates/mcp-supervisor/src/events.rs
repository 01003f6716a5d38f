//! What happens to a connection, published to subscribers: its state
//! transitions (docs/ARCHITECTURE.md, "A connection's state machine") and what
//! its upstream announces outside any request.

// Logging is deprecated by SEP-2577 (protocol 2026-07-28); 2025-era servers
// still log, and the gateway relays it.
#![allow(deprecated)]

use std::time::Duration;

use actix::Message;
use rmcp::model::LoggingMessageNotificationParam;

use crate::failure::Failure;

/// Which of an upstream's lists changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
}

impl ListKind {
    pub const ALL: [ListKind; 3] = [ListKind::Tools, ListKind::Prompts, ListKind::Resources];
}

/// One event of one connection. Each is published exactly once.
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
        /// When the park ends.
        until: crate::Deadline,
        attempt: u32,
        /// Counting parks since the last success, this one included (the
        /// next park's length follows from it).
        strikes: u32,
    },
    /// The upstream asked to be left alone until `until` (`Retry-After` on
    /// a 429): no request is sent to it before then, by this process or (with
    /// `[fleet]`) any other; calls that can wait that long wait, the others
    /// are answered at once. The session is kept.
    Held {
        connection: String,
        failure: Failure,
        until: crate::Deadline,
    },
    /// The first use after a park's cooldown: the session is being rebuilt.
    Revived { connection: String },
    /// Permanently unavailable until reload or reset.
    Retired {
        connection: String,
        reason: crate::RetireReason,
        failure: Option<Failure>,
    },
    /// The connection actor died and was rebuilt from config.
    Restarted { connection: String, restarts: u32 },
    /// The connection was stopped (shutdown, or removed by a reload).
    Stopped { connection: String },
    /// The upstream says its list of `list` changed; the catalog is being
    /// reloaded.
    ListChanged { connection: String, list: ListKind },
    /// A reloaded catalog differs from the one before it in `lists` (after
    /// the upstream said a list changed, or after its session was built
    /// again): what downstream clients must be told.
    CatalogChanged {
        connection: String,
        lists: Vec<ListKind>,
    },
    /// The upstream says a resource it serves changed (`resources/updated`).
    ResourceUpdated { connection: String, uri: String },
    /// The upstream logged a message (`notifications/message`); `reached`
    /// are the downstream sessions (opaque keys) that already have it.
    Log {
        connection: String,
        message: LoggingMessageNotificationParam,
        reached: Vec<usize>,
    },
}

impl ConnectionEvent {
    /// The connection this event is about.
    pub fn connection(&self) -> &str {
        match self {
            ConnectionEvent::Connecting { connection }
            | ConnectionEvent::Ready { connection, .. }
            | ConnectionEvent::Parked { connection, .. }
            | ConnectionEvent::Held { connection, .. }
            | ConnectionEvent::Revived { connection }
            | ConnectionEvent::Retired { connection, .. }
            | ConnectionEvent::Restarted { connection, .. }
            | ConnectionEvent::Stopped { connection }
            | ConnectionEvent::ListChanged { connection, .. }
            | ConnectionEvent::CatalogChanged { connection, .. }
            | ConnectionEvent::ResourceUpdated { connection, .. }
            | ConnectionEvent::Log { connection, .. } => connection,
        }
    }
}
