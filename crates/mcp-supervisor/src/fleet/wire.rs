//! What nodes tell each other through the store, and how a message from the
//! store is checked before anything acts on it (docs/FLEET.md, "On the wire").
//!
//! One JSON object per message, the same text as a key's value and as a
//! pub/sub message: `{"v":1,"node":"…","kind":"parked",…}`. A message that
//! does not parse, has another schema version, names an unknown failure kind
//! or reason, or carries a deadline further out than any window this fleet
//! can set is refused ([`Refusal`]); nothing else in the process sees it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::{Deadline, Failure, FailureKind, RetireReason};

/// The schema version this build writes and reads.
pub const VERSION: u32 = 1;

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
    /// `node` is alive (sent every heartbeat), with what it knows and where
    /// its gateway is reached.
    Alive {
        parked: u32,
        retired: u32,
        gateway: Option<url::Url>,
    },
}

/// A message and the node that sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub node: String,
    pub told: Told,
}

/// Why a message from the store was not acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
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
}

impl Refusal {
    /// Every refusal, in metrics order.
    pub const ALL: [Refusal; 5] = [
        Refusal::Malformed,
        Refusal::UnknownVersion,
        Refusal::UnknownName,
        Refusal::TooFar,
        Refusal::Unsealed,
    ];

    /// The metrics label and log word.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::UnknownVersion => "unknown_version",
            Refusal::UnknownName => "unknown_name",
            Refusal::TooFar => "too_far",
            Refusal::Unsealed => "unsealed",
        }
    }
}

/// The JSON form.
#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    node: String,
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
    /// The message as stored and published.
    pub fn encode(&self) -> String {
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
            what,
        };
        // Only strings and integers: serializing cannot fail.
        serde_json::to_string(&wire).unwrap_or_default()
    }

    /// Checks and reads a message from the store. `furthest` is the latest
    /// deadline a message may carry: now plus the longest window and the
    /// tolerated skew.
    pub fn decode(bytes: &[u8], furthest: SystemTime) -> Result<Message, Refusal> {
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

    fn far() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(4_000_000_000)
    }

    fn park() -> Message {
        let mut failure = Failure::new(FailureKind::RateLimit, "HTTP 429");
        failure.status = Some(429);
        Message {
            node: "gw-1".into(),
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
            park().encode(),
            r#"{"v":1,"node":"gw-1","kind":"parked","connection":"github","until_ms":1800000000123,"failure":{"kind":"rate_limit","status":429,"reason":"HTTP 429"},"strikes":2}"#
        );
    }

    #[test]
    fn every_message_reads_back_as_written() {
        let furthest = UNIX_EPOCH + Duration::from_millis(1_800_000_000_123);
        let retired = Message {
            node: "a.b_c-1".into(),
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
            told: Told::Reset {
                connection: "x".into(),
            },
        };
        let alive = Message {
            node: "n".into(),
            told: Told::Alive {
                parked: 3,
                retired: 1,
                gateway: Some(url::Url::parse("http://10.0.0.5:7300/").unwrap()),
            },
        };
        for message in [park(), retired, held, crash, reset, alive] {
            let read = Message::decode(message.encode().as_bytes(), furthest);
            assert_eq!(read, Ok(message));
        }
    }

    #[test]
    fn bad_input_is_refused_with_its_reason() {
        let ok = park().encode();
        let cases: [(String, Refusal); 9] = [
            ("not json".into(), Refusal::Malformed),
            ("{}".into(), Refusal::Malformed),
            (ok.replace(r#""v":1"#, r#""v":2"#), Refusal::UnknownVersion),
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
                Message::decode(text.as_bytes(), far()),
                Err(refusal),
                "{text}"
            );
        }
        // Further out than the furthest window this fleet can set.
        let near = UNIX_EPOCH + Duration::from_millis(1_800_000_000_000);
        assert_eq!(Message::decode(ok.as_bytes(), near), Err(Refusal::TooFar));
    }
}
