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
    /// A node reloaded its config: every node re-reads its own.
    Reload,
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
    Reload,
    Alive {
        parked: u32,
        retired: u32,
        gateway: Option<String>,
    },
}

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
            Told::Reload => WireWhat::Reload,
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
        // Only strings and integers: serializing cannot fail.
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
            WireWhat::Reload => Told::Reload,
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
mod tests {
    use super::*;

    /// Computed outside this code: see [`a_known_message_has_a_known_mac`].
    const KNOWN_MAC: &str = "L2siMnPBlZL46Z55_qcJyg";

    fn far() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(4_000_000_000)
    }

    fn park() -> Message {
        let mut failure = Failure::new(FailureKind::RateLimit, "HTTP 429");
        failure.status = Some(429);
        Message {
            node: "gw-1".into(),
            at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_000),
            seq: 1_799_999_990_000_001,
            told: Told::Standing {
                connection: "github".into(),
                shared: Shared::Parked {
                    until: UNIX_EPOCH + Duration::from_millis(1_800_000_000_123),
                    failure,
                    strikes: 2,
                },
            },
        }
    }

    /// The wire form is a contract between builds: written out here.
    #[test]
    fn a_park_is_written_as_documented() {
        assert_eq!(
            park().json(),
            r#"{"v":2,"node":"gw-1","at":1799999999000,"seq":1799999990000001,"kind":"parked","connection":"github","until_ms":1800000000123,"failure":{"kind":"rate_limit","status":429,"reason":"HTTP 429"},"strikes":2}"#
        );
    }

    #[test]
    fn every_message_reads_back_as_written() {
        let furthest = UNIX_EPOCH + Duration::from_millis(1_800_000_000_123);
        let retired = Message {
            node: "a.b_c-1".into(),
            at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
            seq: 42,
            told: Told::Standing {
                connection: "x".into(),
                shared: Shared::Retired {
                    reason: RetireReason::Failure(FailureKind::NeedsLogin),
                    failure: None,
                },
            },
        };
        let held = Message {
            node: "n".into(),
            at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
            seq: 42,
            told: Told::Standing {
                connection: "x".into(),
                shared: Shared::Held {
                    until: furthest,
                    failure: Failure::new(FailureKind::RateLimit, "HTTP 429"),
                },
            },
        };
        let crash = Message {
            node: "n".into(),
            at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
            seq: 42,
            told: Told::Standing {
                connection: "x".into(),
                shared: Shared::Retired {
                    reason: RetireReason::CrashLoop,
                    failure: Some(Failure::new(FailureKind::Auth, "HTTP 401")),
                },
            },
        };
        let reset = Message {
            node: "n".into(),
            at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
            seq: 42,
            told: Told::Reset {
                connection: "x".into(),
            },
        };
        let alive = Message {
            node: "n".into(),
            at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
            seq: 42,
            told: Told::Alive {
                parked: 3,
                retired: 1,
                gateway: Some(url::Url::parse("http://10.0.0.5:7300/").unwrap()),
            },
        };
        let reload = Message {
            node: "n".into(),
            at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
            seq: 42,
            told: Told::Reload,
        };
        let seal = Seal::new(&FleetKey::new([7; 32]), "t");
        for message in [park(), retired, held, crash, reset, reload, alive] {
            let read = Message::decode(message.encode(&seal).as_bytes(), furthest, &seal);
            assert_eq!(read, Ok(message));
        }
    }

    /// The MAC of a known message under a known key and namespace,
    /// computed outside this code (Python: `hmac.new(hmac.new(key,
    /// b"mcp-supervisor/fleet-messages/v2\0t", sha256).digest(), json,
    /// sha256).digest()[:16]`, base64url without padding): a change of the
    /// derivation, the truncation or the encoding fails here.
    #[test]
    fn a_known_message_has_a_known_mac() {
        let seal = Seal::new(&FleetKey::new([7; 32]), "t");
        let sealed = park().encode(&seal);
        let (mac, json) = sealed.split_once('.').unwrap();
        assert_eq!(json, park().json());
        assert_eq!(mac, KNOWN_MAC);
    }

    /// Only the fleet's key, in its namespace, makes a MAC its nodes
    /// accept, and the MAC covers every byte.
    #[test]
    fn a_message_without_this_fleets_mac_is_refused() {
        let seal = Seal::new(&FleetKey::new([7; 32]), "t");
        let other = Seal::new(&FleetKey::new([8; 32]), "t");
        let sealed = park().encode(&seal);
        assert_eq!(Message::decode(sealed.as_bytes(), far(), &seal), Ok(park()));
        let tampered = sealed.replace(r#""strikes":2"#, r#""strikes":0"#);
        let unsealed = park().json();
        let other_namespace = Seal::new(&FleetKey::new([7; 32]), "u");
        for text in [
            park().encode(&other),
            park().encode(&other_namespace),
            tampered,
            unsealed,
            String::new(),
            "x".repeat(23),
        ] {
            assert_eq!(
                Message::decode(text.as_bytes(), far(), &seal),
                Err(Refusal::Unauthenticated),
                "{text}"
            );
        }
    }

    #[test]
    fn bad_input_is_refused_with_its_reason() {
        let ok = park().json();
        let cases: [(String, Refusal); 9] = [
            ("not json".into(), Refusal::Malformed),
            ("{}".into(), Refusal::Malformed),
            (ok.replace(r#""v":2"#, r#""v":1"#), Refusal::UnknownVersion),
            (ok.replace(r#""parked""#, r#""frozen""#), Refusal::Malformed),
            (ok.replace("rate_limit", "meteor"), Refusal::UnknownName),
            (ok.replace(r#""github""#, r#""a__b""#), Refusal::UnknownName),
            (ok.replace(r#""gw-1""#, r#""a b""#), Refusal::UnknownName),
            (ok.replace("HTTP 429", "a\\nb"), Refusal::Malformed),
            (
                ok.replace(r#""strikes":2"#, r#""strikes":2,"extra":1"#),
                Refusal::Malformed,
            ),
        ];
        for (text, refusal) in cases {
            assert_eq!(
                Message::decode_json(text.as_bytes(), far()),
                Err(refusal),
                "{text}"
            );
        }
        // Further out than the furthest window this fleet can set.
        let near = UNIX_EPOCH + Duration::from_millis(1_800_000_000_000);
        assert_eq!(
            Message::decode_json(ok.as_bytes(), near),
            Err(Refusal::TooFar)
        );
    }
}
