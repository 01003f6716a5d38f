//! Whether a message from the store is fresh (docs/FLEET.md, "On the
//! wire"): its MAC proves a node of this fleet wrote it, not that it writes
//! it now. Anyone who can write to the store can write an old message
//! again: a heartbeat that sends forwarded requests to a gateway long gone,
//! a park or a retirement a person has since reset.
//!
//! So every message carries when it was sent and its node's sequence
//! number, under the MAC, and a node refuses:
//!
//! - a message heard as it is sent (pub/sub) that was sent more than
//!   [`MAX_AGE`] ago, or further ahead than the clock skew allows
//!   ([`Refusal::Stale`]);
//! - one whose sequence number its node has used already
//!   ([`Refusal::Replayed`]);
//! - a standing or reset of a connection older, by more than the clock
//!   skew, than the newest already taken for that connection
//!   ([`Refusal::Stale`]); this holds for the standings read back from the
//!   store too (a retirement stays kept for as long as it lasts, so those
//!   are not held to [`MAX_AGE`]);
//! - a standing read back from the store that is not strictly newer than
//!   the last reset taken of its connection ([`Refusal::Stale`]): the skew
//!   is for messages heard as they are sent, and would otherwise let a
//!   retirement kept just before a reset come back whenever the node
//!   reads the store again (a reconnect). A park another node really made
//!   just after a reset, under a clock behind, is missed that way; the
//!   node learns it from its own calls.
//!
//! What is left: a node that starts after a reset, whose store a writer
//! has put the reset retirement back into, takes that retirement (it has
//! seen nothing newer of the connection). The store's ACL is the guard
//! there (docs/FLEET.md, "Redis").

use std::{
    collections::HashMap,
    time::{Duration, SystemTime},
};

use super::wire::{MAX_AGE, Message, Refusal, Told};

/// How a message reached this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Heard {
    /// As it was sent (pub/sub).
    Sent,
    /// Read back from what the store keeps.
    Kept,
}

/// What this node has taken from each node and of each connection.
#[derive(Debug, Default)]
pub(super) struct Freshness {
    /// The last sequence number taken from each node.
    last_seq: HashMap<String, u64>,
    /// When the newest standing or reset taken of each connection was sent.
    newest: HashMap<String, SystemTime>,
    /// When the newest reset or revival taken (or sent) of each connection
    /// was sent: a park kept from before it is over.
    reset: HashMap<String, SystemTime>,
}

impl Freshness {
    /// Notes a standing or reset this node sends: what is older of its
    /// connection is stale from now on here too.
    pub(super) fn sent(&mut self, message: &Message) {
        if let Some(connection) = connection_of(message) {
            latest(&mut self.newest, connection, message.at);
            if matches!(message.told, Told::Reset { .. } | Told::Revived { .. }) {
                latest(&mut self.reset, connection, message.at);
            }
        }
    }

    /// Takes `message`, heard `how` at `now`, if it is fresh; `skew` is the
    /// tolerated difference between nodes' clocks.
    pub(super) fn take(
        &mut self,
        message: &Message,
        how: Heard,
        now: SystemTime,
        skew: Duration,
    ) -> Result<(), Refusal> {
        if how == Heard::Sent {
            let too_old = now
                .checked_sub(MAX_AGE)
                .is_some_and(|then| message.at < then);
            if too_old || message.at > now + skew {
                return Err(Refusal::Stale);
            }
            if self
                .last_seq
                .get(&message.node)
                .is_some_and(|&last| message.seq <= last)
            {
                return Err(Refusal::Replayed);
            }
        }
        if let Some(connection) = connection_of(message) {
            let older = |of: &HashMap<String, SystemTime>, by: Duration| {
                of.get(connection)
                    .is_some_and(|&newest| message.at + by < newest)
            };
            let kept_standing = how == Heard::Kept && matches!(message.told, Told::Standing { .. });
            let before_a_reset = kept_standing
                && self
                    .reset
                    .get(connection)
                    .is_some_and(|&reset| message.at <= reset);
            if older(&self.newest, skew) || before_a_reset {
                return Err(Refusal::Stale);
            }
        }
        self.sent(message);
        if how == Heard::Sent {
            self.last_seq.insert(message.node.clone(), message.seq);
        }
        Ok(())
    }
}

/// Moves `connection`'s time in `of` to `at` if that is later.
fn latest(of: &mut HashMap<String, SystemTime>, connection: &str, at: SystemTime) {
    match of.get_mut(connection) {
        Some(newest) => *newest = (*newest).max(at),
        None => {
            of.insert(connection.to_owned(), at);
        }
    }
}

/// The connection a standing or a reset is about.
fn connection_of(message: &Message) -> Option<&String> {
    match &message.told {
        Told::Standing { connection, .. }
        | Told::Reset { connection }
        | Told::Revived { connection } => Some(connection),
        // Not standings: an older one heard later does no harm (a relist,
        // an approval of the definitions it carries).
        Told::Reload
        | Told::Alive { .. }
        | Told::ContractsChanged { .. }
        | Told::ContractsApproved { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    const SKEW: Duration = Duration::from_secs(2);

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    fn message(node: &str, sent: u64, seq: u64, told: Told) -> Message {
        Message {
            node: node.into(),
            at: at(sent),
            seq,
            told,
        }
    }

    fn reset(node: &str, sent: u64, seq: u64) -> Message {
        message(
            node,
            sent,
            seq,
            Told::Reset {
                connection: "a".into(),
            },
        )
    }

    fn alive(node: &str, sent: u64, seq: u64) -> Message {
        let told = Told::Alive {
            parked: 0,
            retired: 0,
            gateway: None,
        };
        message(node, sent, seq, told)
    }

    #[test]
    fn a_message_heard_again_is_replayed() {
        let mut fresh = Freshness::default();
        assert_eq!(
            fresh.take(&alive("n", 100, 7), Heard::Sent, at(100), SKEW),
            Ok(())
        );
        assert_eq!(
            fresh.take(&alive("n", 100, 7), Heard::Sent, at(101), SKEW),
            Err(Refusal::Replayed)
        );
        assert_eq!(
            fresh.take(&alive("n", 101, 6), Heard::Sent, at(101), SKEW),
            Err(Refusal::Replayed),
            "an older number"
        );
        assert_eq!(
            fresh.take(&alive("n", 101, 8), Heard::Sent, at(101), SKEW),
            Ok(())
        );
        assert_eq!(
            fresh.take(&alive("m", 101, 1), Heard::Sent, at(101), SKEW),
            Ok(()),
            "each node its own sequence"
        );
    }

    #[test]
    fn a_message_sent_long_ago_or_ahead_of_the_skew_is_stale() {
        let mut fresh = Freshness::default();
        let max_age = MAX_AGE.as_secs();
        assert_eq!(
            fresh.take(
                &alive("n", 100, 1),
                Heard::Sent,
                at(100 + max_age + 1),
                SKEW
            ),
            Err(Refusal::Stale)
        );
        assert_eq!(
            fresh.take(&alive("n", 100, 2), Heard::Sent, at(100 + max_age), SKEW),
            Ok(()),
            "just within"
        );
        assert_eq!(
            fresh.take(&alive("n", 103, 3), Heard::Sent, at(100), SKEW),
            Err(Refusal::Stale),
            "3 s ahead"
        );
        // A refused message takes nothing: its number is still free.
        assert_eq!(
            fresh.take(&alive("n", 101, 3), Heard::Sent, at(101), SKEW),
            Ok(())
        );
    }

    #[test]
    fn what_is_older_than_the_newest_of_its_connection_is_stale_however_it_comes() {
        let mut fresh = Freshness::default();
        assert_eq!(
            fresh.take(&reset("b", 200, 1), Heard::Sent, at(200), SKEW),
            Ok(())
        );
        let park = message(
            "a",
            190,
            50,
            Told::Standing {
                connection: "a".into(),
                shared: super::super::Shared::Retired {
                    reason: crate::RetireReason::CrashLoop,
                    failure: None,
                },
            },
        );
        assert_eq!(
            fresh.take(&park, Heard::Kept, at(300), SKEW),
            Err(Refusal::Stale)
        );
        assert_eq!(
            fresh.take(&park, Heard::Sent, at(200), SKEW),
            Err(Refusal::Stale)
        );
        // Within the skew of the newest: another node's clock.
        let close = message("a", 199, 51, park.told.clone());
        assert_eq!(fresh.take(&close, Heard::Sent, at(200), SKEW), Ok(()));
        // Read back from the store, a standing kept within the skew
        // before the reset is not taken: it would come back at every
        // reconnect.
        assert_eq!(
            fresh.take(&close, Heard::Kept, at(300), SKEW),
            Err(Refusal::Stale)
        );
        let at_the_reset = message("a", 200, 53, park.told.clone());
        assert_eq!(
            fresh.take(&at_the_reset, Heard::Kept, at(300), SKEW),
            Err(Refusal::Stale)
        );
        // Kept standings are not held to the age limit.
        let later = message("a", 250, 52, park.told.clone());
        assert_eq!(fresh.take(&later, Heard::Kept, at(10_000), SKEW), Ok(()));
        // Nor is anything after a reset held to that rule when heard sent.
        let mut fresh = Freshness::default();
        assert_eq!(
            fresh.take(&reset("b", 200, 1), Heard::Sent, at(200), SKEW),
            Ok(())
        );
        assert_eq!(fresh.take(&close, Heard::Sent, at(200), SKEW), Ok(()));
    }

    /// A revival ends the fleet's park as a reset does: the park kept
    /// from before it is over, read back at a reconnect or not.
    #[test]
    fn a_park_kept_from_before_a_revival_is_stale() {
        let mut fresh = Freshness::default();
        let revived = message(
            "b",
            200,
            1,
            Told::Revived {
                connection: "a".into(),
            },
        );
        assert_eq!(fresh.take(&revived, Heard::Sent, at(200), SKEW), Ok(()));
        let park = message(
            "a",
            199,
            50,
            Told::Standing {
                connection: "a".into(),
                shared: super::super::Shared::Parked {
                    until: at(230),
                    failure: crate::Failure::new(crate::FailureKind::Server, "HTTP 503"),
                    strikes: 1,
                },
            },
        );
        assert_eq!(
            fresh.take(&park, Heard::Kept, at(201), SKEW),
            Err(Refusal::Stale)
        );
        // A park after it is a new one.
        let again = message("a", 201, 51, park.told.clone());
        assert_eq!(fresh.take(&again, Heard::Kept, at(202), SKEW), Ok(()));
    }
}
