//! What nodes tell each other through the store, and how a message from the
//! store is checked before anything acts on it (docs/FLEET.md, "On the wire").
//!
//! One JSON object per message, the same text as a key's value and as a
//! pub/sub message, behind its MAC:
//! `{mac}.{"v":2,"node":"…","at":…,"seq":…,"kind":"parked",…}` (the first
//! 16 bytes of HMAC-SHA256 over the JSON, keyed from the fleet key and the
//! namespace, in base64url). A message whose MAC is wrong (not written by a
//! node of this fleet and namespace), that does not parse, has another
//! schema version, names an unknown failure kind or reason, or carries a
//! deadline further out than any window this fleet can set is refused
//! ([`Refusal`]); so is one that is not fresh (`freshness.rs`): sent too
//! long ago, a sequence number its node has used already, or older than
//! what is already known of its connection. Nothing else in the process
//! sees it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::{Deadline, Failure, FailureKind, RetireReason, config::FleetKey};

/// The schema version this build writes and reads.
pub const VERSION: u32 = 2;

/// How old a message heard as it is sent may be (its `at`): the store
/// passes messages on at once, and a node that was away tells its standings
/// again, afresh, when it is back.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// A connection's standing as the fleet shares it.
#[derive(Debug, Clone, PartialEq)]
pub enum Shared {
    /// Refuses work until `until`; `strikes` counting parks since its last
    /// success (the next park's length follows from it).
    Parked {
        until: SystemTime,
        failure: Failure,
        strikes: u32,
    },
    /// The upstream asked to be left alone until `until` (`Retry-After`):
    /// nothing is sent to it before then; the session is kept.
    Held { until: SystemTime, failure: Failure },
    /// Does no I/O until a reset.
    Retired {
        reason: RetireReason,
        failure: Option<Failure>,
    },
}

impl Shared {
    /// When it ends by itself (a retirement never does).
    pub fn until(&self) -> Option<SystemTime> {
        match self {
            Shared::Parked { until, .. } | Shared::Held { until, .. } => Some(*until),
            Shared::Retired { .. } => None,
        }
    }

    /// The name `/status` shows for it.
    pub fn label(&self) -> &'static str {
        match self {
            Shared::Parked { .. } => "parked",
            Shared::Held { .. } => "held",
            Shared::Retired { .. } => "retired",
        }
    }

    /// Its deadline on this process's clock.
    pub fn deadline(&self) -> Option<Deadline> {
        self.until().map(Deadline::at)
    }
}

/// One message between nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum Told {
    /// `connection`'s standing changed on `node`.
    Standing { connection: String, shared: Shared },
    /// A person reset `connection` on some node: every node forgets its
    /// standing.
    Reset { connection: String },
    /// A probe (or the first use after a park) found `connection`'s
    /// upstream back on some node: every node revives it.
    Revived { connection: String },
    /// A node reloaded its config: every node re-reads its own.
    Reload,
    /// A node saw `connection`'s contracts change (docs/CONTRACTS.md):
    /// every node lists it again now, and holds what it finds changed.
    ContractsChanged { connection: String },
    /// A person approved these contracts of `connection` on a node: every
    /// node approves the same definitions.
    ContractsApproved {
        connection: String,
        approved: Vec<crate::contracts::Contract>,
    },
    /// `node` is alive (sent every heartbeat), with what it knows and where
    /// its gateway is reached.
    Alive {
        parked: u32,
        retired: u32,
        gateway: Option<url::Url>,
    },
}

/// A message, the node that sent it, when, and its place in that node's
/// sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub node: String,
    /// When it was sent, on its node's clock (to the millisecond).
    pub at: SystemTime,
    /// Its node's sequence number: each message a node sends has a higher
    /// one than the last, across restarts (it starts at the process's
    /// start time in microseconds).
    pub seq: u64,
    pub told: Told,
}

/// Why a message from the store was not acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// No MAC, or a MAC this fleet's key did not make: not written by a
    /// node of this fleet.
    Unauthenticated,
    /// Not JSON, or not the shape of any message.
    Malformed,
    /// Another schema version (a newer or older build).
    UnknownVersion,
    /// A failure kind, retire reason or connection name this build does not know.
    UnknownName,
    /// A deadline further out than the longest window plus the tolerated
    /// clock skew.
    TooFar,
    /// Shared OAuth tokens that do not open with the fleet key (tampered,
    /// sealed for another connection or fleet, or garbage): ignored
    /// (`super::tokens`).
    Unsealed,
    /// Sent longer ago than [`MAX_AGE`] (or further ahead than the clock
    /// skew), or older than what is known already of its connection: an
    /// old message written again.
    Stale,
    /// A sequence number its node has used already: a message heard again.
    Replayed,
}

impl Refusal {
    /// Every refusal, in metrics order.
    pub const ALL: [Refusal; 8] = [
        Refusal::Unauthenticated,
        Refusal::Malformed,
        Refusal::UnknownVersion,
        Refusal::UnknownName,
        Refusal::TooFar,
        Refusal::Unsealed,
        Refusal::Stale,
        Refusal::Replayed,
    ];

    /// The metrics label and log word.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::Malformed => "malformed",
            Refusal::UnknownVersion => "unknown_version",
            Refusal::UnknownName => "unknown_name",
            Refusal::TooFar => "too_far",
            Refusal::Unsealed => "unsealed",
            Refusal::Stale => "stale",
            Refusal::Replayed => "replayed",
        }
    }
}

/// What the messages' MAC key is derived with, the namespace after it: a
/// message of one fleet's namespace does not open in another's that shares
/// the key and the store.
const PURPOSE: &[u8] = b"mcp-supervisor/fleet-messages/v2";
/// Bytes of the truncated MAC, and their length in unpadded base64url.
const MAC_BYTES: usize = 16;
const MAC_ENCODED: usize = 22;

/// Signs and checks the fleet's messages with a key derived from the fleet
/// key.
#[derive(Clone)]
pub struct Seal(Hmac<Sha256>);

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal([REDACTED])")
    }
}

impl Seal {
    /// The seal of the fleet whose key is `key`, in `namespace`.
    pub fn new(key: &FleetKey, namespace: &str) -> Self {
        let purpose = [PURPOSE, b"\0", namespace.as_bytes()].concat();
        Seal(
            <Hmac<Sha256> as KeyInit>::new_from_slice(&key.derive(&purpose))
                .expect("HMAC takes a key of any length"),
        )
    }

    fn mac(&self, text: &[u8]) -> [u8; MAC_BYTES] {
        let mut mac = self.0.clone();
        mac.update(text);
        let full = mac.finalize().into_bytes();
        let mut truncated = [0; MAC_BYTES];
        truncated.copy_from_slice(&full[..MAC_BYTES]);
        truncated
    }

    /// `{mac}.{text}`.
    pub fn seal(&self, text: &str) -> String {
        format!(
            "{}.{text}",
            URL_SAFE_NO_PAD.encode(self.mac(text.as_bytes()))
        )
    }

    /// The text behind a right MAC.
    pub fn open<'a>(&self, sealed: &'a [u8]) -> Result<&'a [u8], Refusal> {
        let (mac, text) = (sealed.get(..MAC_ENCODED), sealed.get(MAC_ENCODED + 1..));
        let (Some(mac), Some(text)) = (mac, text) else {
            return Err(Refusal::Unauthenticated);
        };
        if sealed.get(MAC_ENCODED) != Some(&b'.') {
            return Err(Refusal::Unauthenticated);
        }
        let presented = URL_SAFE_NO_PAD
            .decode(mac)
            .map_err(|_| Refusal::Unauthenticated)?;
        if bool::from(presented.ct_eq(&self.mac(text))) {
            Ok(text)
        } else {
            Err(Refusal::Unauthenticated)
        }
    }
}

/// The JSON form.
#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    node: String,
    /// When it was sent, in milliseconds since the epoch.
    at: u64,
    seq: u64,
    #[serde(flatten)]
    what: WireWhat,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum WireWhat {
    Parked {
        connection: String,
        until_ms: u64,
        failure: WireFailure,
        strikes: u32,
    },
    Held {
        connection: String,
        until_ms: u64,
        failure: WireFailure,
    },
    Retired {
        connection: String,
        reason: String,
        failure: Option<WireFailure>,
    },
    Reset {
        connection: String,
    },
    Revived {
        connection: String,
    },
    Reload,
    ContractsChanged {
        connection: String,
    },
    ContractsApproved {
        connection: String,
        approved: Vec<WireContract>,
    },
    Alive {
        parked: u32,
        retired: u32,
        gateway: Option<String>,
    },
}

/// An approved contract as shared: its fields (the hash is computed again
/// from them, never taken from the message).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireContract {
    kind: String,
    name: String,
    contract: serde_json::Map<String, serde_json::Value>,
}

/// Most contracts one approval may carry.
const MAX_APPROVED: usize = 10_000;

/// A failure as shared: its kind, status and our own short reason (never a
/// response body, URL or header: see [`Failure`]).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireFailure {
    kind: String,
    status: Option<u16>,
    reason: String,
}

/// Longest reason text accepted from the store.
const MAX_REASON: usize = 512;

impl Message {
    /// The message as stored and published, sealed.
    pub fn encode(&self, seal: &Seal) -> String {
        seal.seal(&self.json())
    }

    /// Checks and reads a message from the store: its MAC first, then as
    /// [`Message::decode_json`].
    pub fn decode(bytes: &[u8], furthest: SystemTime, seal: &Seal) -> Result<Message, Refusal> {
        Message::decode_json(seal.open(bytes)?, furthest)
    }

    /// The JSON text of the message.
    pub fn json(&self) -> String {
        let what = match &self.told {
            Told::Standing { connection, shared } => {
                let connection = connection.clone();
                match shared {
                    Shared::Parked {
                        until,
                        failure,
                        strikes,
                    } => WireWhat::Parked {
                        connection,
                        until_ms: millis(*until),
                        failure: WireFailure::from(failure),
                        strikes: *strikes,
                    },
                    Shared::Held { until, failure } => WireWhat::Held {
                        connection,
                        until_ms: millis(*until),
                        failure: WireFailure::from(failure),
                    },
                    Shared::Retired { reason, failure } => WireWhat::Retired {
                        connection,
                        reason: reason.as_str().to_owned(),
                        failure: failure.as_ref().map(WireFailure::from),
                    },
                }
            }
            Told::Reset { connection } => WireWhat::Reset {
                connection: connection.clone(),
            },
            Told::Revived { connection } => WireWhat::Revived {
                connection: connection.clone(),
            },
            Told::Reload => WireWhat::Reload,
            Told::ContractsChanged { connection } => WireWhat::ContractsChanged {
                connection: connection.clone(),
            },
            Told::ContractsApproved {
                connection,
                approved,
            } => WireWhat::ContractsApproved {
                connection: connection.clone(),
                approved: approved
                    .iter()
                    .map(|contract| WireContract {
                        kind: contract.kind.as_str().to_owned(),
                        name: contract.name.clone(),
                        contract: (*contract.form).clone(),
                    })
                    .collect(),
            },
            Told::Alive {
                parked,
                retired,
                gateway,
            } => WireWhat::Alive {
                parked: *parked,
                retired: *retired,
                gateway: gateway.as_ref().map(ToString::to_string),
            },
        };
        let wire = Wire {
            v: VERSION,
            node: self.node.clone(),
            at: millis(self.at),
            seq: self.seq,
            what,
        };
        // Strings, integers and JSON values: serializing cannot fail.
        serde_json::to_string(&wire).unwrap_or_default()
    }

    /// Checks and reads a message's JSON. `furthest` is the latest deadline
    /// a message may carry: now plus the longest window and the tolerated
    /// skew.
    pub fn decode_json(bytes: &[u8], furthest: SystemTime) -> Result<Message, Refusal> {
        #[derive(Deserialize)]
        struct Version {
            v: u32,
        }
        let version: Version = serde_json::from_slice(bytes).map_err(|_| Refusal::Malformed)?;
        if version.v != VERSION {
            return Err(Refusal::UnknownVersion);
        }
        let wire: Wire = serde_json::from_slice(bytes).map_err(|_| Refusal::Malformed)?;
        if crate::config::fleet_name(wire.node.clone()).is_err() {
            return Err(Refusal::UnknownName);
        }
        let until = |ms: u64| {
            let at = UNIX_EPOCH + Duration::from_millis(ms);
            if at > furthest {
                Err(Refusal::TooFar)
            } else {
                Ok(at)
            }
        };
        let told = match wire.what {
            WireWhat::Parked {
                connection,
                until_ms,
                failure,
                strikes,
            } => Told::Standing {
                shared: Shared::Parked {
                    until: until(until_ms)?,
                    failure: failure.read()?,
                    strikes,
                },
                connection: checked_name(connection)?,
            },
            WireWhat::Held {
                connection,
                until_ms,
                failure,
            } => Told::Standing {
                shared: Shared::Held {
                    until: until(until_ms)?,
                    failure: failure.read()?,
                },
                connection: checked_name(connection)?,
            },
            WireWhat::Retired {
                connection,
                reason,
                failure,
            } => Told::Standing {
                shared: Shared::Retired {
                    reason: retire_reason(&reason)?,
                    failure: failure.map(WireFailure::read).transpose()?,
                },
                connection: checked_name(connection)?,
            },
            WireWhat::Reset { connection } => Told::Reset {
                connection: checked_name(connection)?,
            },
            WireWhat::Revived { connection } => Told::Revived {
                connection: checked_name(connection)?,
            },
            WireWhat::Reload => Told::Reload,
            WireWhat::ContractsChanged { connection } => Told::ContractsChanged {
                connection: checked_name(connection)?,
            },
            WireWhat::ContractsApproved {
                connection,
                approved,
            } => {
                if approved.len() > MAX_APPROVED {
                    return Err(Refusal::Malformed);
                }
                let approved = approved
                    .into_iter()
                    .map(|item| {
                        let kind = crate::contracts::ItemKind::named(&item.kind)
                            .ok_or(Refusal::UnknownName)?;
                        Ok(crate::contracts::Contract::from_form(
                            kind,
                            &item.name,
                            item.contract,
                        ))
                    })
                    .collect::<Result<_, Refusal>>()?;
                Told::ContractsApproved {
                    connection: checked_name(connection)?,
                    approved,
                }
            }
            WireWhat::Alive {
                parked,
                retired,
                gateway,
            } => Told::Alive {
                parked,
                retired,
                gateway: gateway.map(|text| gateway_url(&text)).transpose()?,
            },
        };
        Ok(Message {
            node: wire.node,
            at: UNIX_EPOCH + Duration::from_millis(wire.at),
            seq: wire.seq,
            told,
        })
    }
}

/// A node's gateway address: an `http(s)` URL with a host and nothing secret.
fn gateway_url(text: &str) -> Result<url::Url, Refusal> {
    crate::config::http_url_ok(text)
        .then(|| url::Url::parse(text).ok())
        .flatten()
        .ok_or(Refusal::Malformed)
}

fn checked_name(name: String) -> Result<String, Refusal> {
    crate::config::connection_name_ok(&name)
        .then_some(name)
        .ok_or(Refusal::UnknownName)
}

fn retire_reason(text: &str) -> Result<RetireReason, Refusal> {
    if text == RetireReason::CrashLoop.as_str() {
        return Ok(RetireReason::CrashLoop);
    }
    failure_kind(text).map(RetireReason::Failure)
}

fn failure_kind(text: &str) -> Result<FailureKind, Refusal> {
    FailureKind::ALL
        .into_iter()
        .find(|kind| kind.as_str() == text)
        .ok_or(Refusal::UnknownName)
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    })
}

impl From<&Failure> for WireFailure {
    fn from(failure: &Failure) -> Self {
        WireFailure {
            kind: failure.kind.as_str().to_owned(),
            status: failure.status,
            reason: failure.reason.clone(),
        }
    }
}

impl WireFailure {
    fn read(self) -> Result<Failure, Refusal> {
        if self.reason.len() > MAX_REASON || self.reason.chars().any(char::is_control) {
            return Err(Refusal::Malformed);
        }
        let mut failure = Failure::new(failure_kind(&self.kind)?, self.reason);
        failure.status = self.status;
        Ok(failure)
    }
}

#[cfg(test)]
mod tests;
