//! What the HTTP servers' own protections did: connections and sessions
//! closed to make room, clients turned away, and (in a fleet) requests
//! forwarded to the node holding their session. Counted where it happens,
//! read by `/metrics` (docs/SUPERVISION.md, "Metrics").

use std::sync::atomic::{AtomicU64, Ordering};

/// One thing a protection can do to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// At `max_connections`, a connection with no request in progress was
    /// closed to admit a new one.
    ConnectionEvicted,
    /// At `max_connections` with every connection busy: a new connection
    /// was answered 503.
    ConnectionRefused,
    /// At `max_sessions`, the least recently used idle session was ended to
    /// admit a new one.
    SessionEvictedAtCap,
    /// A client at `max_sessions_per_client` opened another session; its own
    /// least recently used idle session was ended.
    SessionEvictedAtClientQuota,
    /// At `max_sessions` with every session busy: `initialize` got 503.
    SessionRefusedAtCap,
    /// A client at `max_sessions_per_client` with all of them busy:
    /// `initialize` got 503.
    SessionRefusedAtClientQuota,
    /// While draining for shutdown, a new session or session-less request
    /// got 503.
    RefusedWhileDraining,
    /// A `tools/call` whose arguments not every reader reads alike got
    /// `-32602` at the door (docs/RELIABILITY.md).
    UnreadableArguments,
    /// A request marked as forwarded by a node of the fleet without that
    /// node's valid voucher got 401 (docs/FLEET.md).
    ForgedForwarding,
    /// A request of a session another node holds was forwarded there.
    ForwardedOut,
    /// A request another node forwarded here, with its voucher, was taken.
    ForwardedIn,
    /// A session quiet for `session_rest_after` gave up rmcp's session
    /// until its next request (docs/DECISIONS.md #178).
    SessionRested,
    /// A resting session's request restored it.
    SessionRestored,
}

/// How a [`Protection`] shows in `/metrics`: which family, and its `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `mcp_supervisor_gateway_evictions_total{what, reason}`.
    Evictions,
    /// `mcp_supervisor_gateway_refusals_total{reason}`.
    Refusals,
    /// `mcp_supervisor_gateway_forwarded_total{what, reason}`.
    Forwards,
    /// `mcp_supervisor_gateway_rests_total{what, reason}`.
    Rests,
}

impl Protection {
    pub const ALL: [Protection; 13] = [
        Protection::ConnectionEvicted,
        Protection::ConnectionRefused,
        Protection::SessionEvictedAtCap,
        Protection::SessionEvictedAtClientQuota,
        Protection::SessionRefusedAtCap,
        Protection::SessionRefusedAtClientQuota,
        Protection::RefusedWhileDraining,
        Protection::UnreadableArguments,
        Protection::ForgedForwarding,
        Protection::ForwardedOut,
        Protection::ForwardedIn,
        Protection::SessionRested,
        Protection::SessionRestored,
    ];

    /// The family it is counted in.
    pub fn family(self) -> Family {
        match self {
            Protection::ConnectionEvicted
            | Protection::SessionEvictedAtCap
            | Protection::SessionEvictedAtClientQuota => Family::Evictions,
            Protection::ConnectionRefused
            | Protection::SessionRefusedAtCap
            | Protection::SessionRefusedAtClientQuota
            | Protection::RefusedWhileDraining
            | Protection::UnreadableArguments
            | Protection::ForgedForwarding => Family::Refusals,
            Protection::ForwardedOut | Protection::ForwardedIn => Family::Forwards,
            Protection::SessionRested | Protection::SessionRestored => Family::Rests,
        }
    }

    /// What was evicted or turned away: the `what` label.
    pub fn what(self) -> &'static str {
        match self {
            Protection::ConnectionEvicted | Protection::ConnectionRefused => "connection",
            Protection::SessionEvictedAtCap
            | Protection::SessionEvictedAtClientQuota
            | Protection::SessionRefusedAtCap
            | Protection::SessionRefusedAtClientQuota
            | Protection::SessionRested
            | Protection::SessionRestored => "session",
            // A new session, or a session-less request.
            Protection::RefusedWhileDraining
            | Protection::UnreadableArguments
            | Protection::ForgedForwarding
            | Protection::ForwardedOut
            | Protection::ForwardedIn => "request",
        }
    }

    /// The limit or state behind it: the `reason` label.
    pub fn reason(self) -> &'static str {
        match self {
            Protection::ConnectionEvicted | Protection::ConnectionRefused => "max_connections",
            Protection::SessionEvictedAtCap | Protection::SessionRefusedAtCap => "max_sessions",
            Protection::SessionEvictedAtClientQuota | Protection::SessionRefusedAtClientQuota => {
                "max_sessions_per_client"
            }
            Protection::RefusedWhileDraining => "draining",
            Protection::UnreadableArguments => "unreadable_arguments",
            Protection::ForgedForwarding => "forged_forwarding",
            Protection::ForwardedOut => "to_holder",
            Protection::ForwardedIn => "from_node",
            Protection::SessionRested => "quiet",
            Protection::SessionRestored => "request",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A counter per [`Protection`]; shared by a server and `/metrics`.
#[derive(Debug, Default)]
pub struct Tallies([AtomicU64; Protection::ALL.len()]);

impl Tallies {
    pub fn count(&self, protection: Protection) {
        self.0[protection.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// How often `protection` happened so far.
    pub fn get(&self, protection: Protection) -> u64 {
        self.0[protection.index()].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protection_has_its_own_counter() {
        let tallies = Tallies::default();
        tallies.count(Protection::SessionEvictedAtCap);
        tallies.count(Protection::SessionEvictedAtCap);
        tallies.count(Protection::RefusedWhileDraining);
        for protection in Protection::ALL {
            let expected = match protection {
                Protection::SessionEvictedAtCap => 2,
                Protection::RefusedWhileDraining => 1,
                _ => 0,
            };
            assert_eq!(tallies.get(protection), expected, "{protection:?}");
        }
    }
}
