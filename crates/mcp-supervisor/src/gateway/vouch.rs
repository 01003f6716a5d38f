//! A forwarded request's voucher (docs/FLEET.md, "Sessions across nodes").
//!
//! A node that forwards a request to the node holding its session has
//! already checked the caller (the bearer token). It does not pass the
//! client's `Authorization` on: the bearer stays with the node it was
//! sent to. Instead it vouches for the request in [`FORWARDED`]:
//! `{from}.{at}.{nonce}.{mac}`, `at` the time in milliseconds, `nonce` 12
//! random bytes and `mac` the first 16 bytes of HMAC-SHA256 over the two
//! nodes' names, `at`, the nonce, the method and the session id (not the
//! path: a proxy in front of the other node may change it) and the caller
//! the forwarding node identified ([`CALLER`], when there is one), both in
//! unpadded base64url, keyed from the fleet key and namespace. The holding
//! node takes a request with a voucher that names it, is at most
//! [`VALID_FOR`] old, whose MAC is right and that it has not taken before,
//! in place of the bearer check; a request that carries the mark otherwise
//! (a client forging it, a voucher for another node or request, an old one,
//! one replayed by someone who saw it pass) is refused with 401.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::http::{HeaderName, HeaderValue, Method};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::{access::Caller, config::FleetKey};

/// Marks a request one node forwarded to another, with its voucher.
pub(super) const FORWARDED: HeaderName = HeaderName::from_static("mcp-supervisor-forwarded");

/// The caller of a forwarded request, as the forwarding node identified it
/// (its credentials stay there): the [`Caller`] as base64url JSON, covered
/// by the voucher's MAC, so no client can name itself someone else.
pub(super) const CALLER: HeaderName = HeaderName::from_static("mcp-supervisor-caller");

/// The access token the forwarded request's caller came with, when it came
/// with one (a [`crate::access::Subject`]): the node holding the session
/// exchanges it for a connection acting on the caller's behalf
/// (docs/SECURITY.md). Covered by the voucher's MAC; sent only between
/// the fleet's nodes, which are that token's audience alike.
pub(super) const SUBJECT: HeaderName = HeaderName::from_static("mcp-supervisor-subject");

/// `caller` as the value of [`CALLER`].
pub(super) fn caller_header(caller: &Caller) -> HeaderValue {
    let json = serde_json::to_vec(caller).expect("a caller serializes");
    HeaderValue::from_str(&URL_SAFE_NO_PAD.encode(json)).expect("base64url is header-safe")
}

/// The caller a [`CALLER`] value names; `None` if it names none readably.
pub(super) fn caller_of_header(value: &str) -> Option<Caller> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(value).ok()?).ok()
}

/// How far a voucher's time may be from the holder's clock: the forward
/// takes milliseconds; the rest is the clocks' difference.
pub(super) const VALID_FOR: Duration = Duration::from_secs(30);

/// What the vouchers' key is derived with, the namespace after it.
const PURPOSE: &[u8] = b"mcp-supervisor/forwarded-requests/v1";
const MAC_BYTES: usize = 16;
const NONCE_BYTES: usize = 12;

/// Why a forwarded request was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Forged {
    /// Not `{from}.{at}.{mac}`, or another node's voucher.
    Malformed,
    /// Made more than [`VALID_FOR`] away from now.
    Expired,
    /// The MAC does not match this request.
    Mismatch,
    /// Taken before: a voucher vouches for one request.
    Replayed,
}

/// This node's vouchers: made for requests it forwards, checked on those
/// forwarded to it.
pub(super) struct Vouchers {
    node: String,
    mac: Hmac<Sha256>,
    /// The vouchers taken (their MACs) and when each was made, until it
    /// would be refused as expired anyway.
    taken: Mutex<Taken>,
}

#[derive(Default)]
struct Taken {
    at: HashMap<[u8; MAC_BYTES], u64>,
    /// How many there were after the last sweep: the next sweeps when
    /// twice as many (and at least a thousand) are held.
    swept: usize,
}

impl Taken {
    /// Whether the voucher `mac`, made `at`, is taken for the first time
    /// at `now` (all milliseconds).
    fn first(&mut self, mac: [u8; MAC_BYTES], at: u64, now: u64) -> bool {
        if self.at.len() >= (self.swept * 2).max(1024) {
            let valid_for = VALID_FOR.as_millis() as u64;
            self.at.retain(|_, at| at.saturating_add(valid_for) >= now);
            self.swept = self.at.len();
        }
        self.at.insert(mac, at).is_none()
    }
}

impl std::fmt::Debug for Vouchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vouchers")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// The request a voucher is for. `Debug` shows no subject token.
#[derive(Clone, Copy)]
pub(super) struct Forward<'a> {
    pub(super) method: &'a Method,
    pub(super) session: &'a str,
    /// Its [`CALLER`] value; empty for none (a node that sends none is
    /// vouched for as before callers travelled).
    pub(super) caller: &'a str,
    /// Its [`SUBJECT`] value; empty for none.
    pub(super) subject: &'a str,
}

impl std::fmt::Debug for Forward<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forward")
            .field("method", self.method)
            .field("session", &self.session)
            .field("caller", &self.caller)
            .field(
                "subject",
                &(!self.subject.is_empty()).then_some("[REDACTED]"),
            )
            .finish()
    }
}

impl Vouchers {
    pub(super) fn new(node: &str, key: &FleetKey, namespace: &str) -> Self {
        let purpose = [PURPOSE, b"\0", namespace.as_bytes()].concat();
        Vouchers {
            node: node.to_owned(),
            mac: <Hmac<Sha256> as KeyInit>::new_from_slice(&key.derive(&purpose))
                .expect("HMAC takes a key of any length"),
            taken: Mutex::default(),
        }
    }

    /// The voucher of this node for `request`, forwarded to `to` at `now`.
    pub(super) fn vouch(&self, to: &str, request: Forward<'_>, now: SystemTime) -> HeaderValue {
        let at = millis(now);
        let nonce = rand::random::<[u8; NONCE_BYTES]>();
        let mac = self.mac_of(&self.node, to, at, &nonce, request);
        HeaderValue::from_str(&format!(
            "{}.{at}.{}.{}",
            self.node,
            URL_SAFE_NO_PAD.encode(nonce),
            URL_SAFE_NO_PAD.encode(mac)
        ))
        .expect("node names, digits and base64url are header-safe")
    }

    /// Whether `voucher` is another node's for `request`, forwarded here,
    /// made close enough to `now`, and not taken before.
    pub(super) fn check(
        &self,
        voucher: &HeaderValue,
        request: Forward<'_>,
        now: SystemTime,
    ) -> Result<(), Forged> {
        let text = voucher.to_str().map_err(|_| Forged::Malformed)?;
        let (rest, mac) = text.rsplit_once('.').ok_or(Forged::Malformed)?;
        let (rest, nonce) = rest.rsplit_once('.').ok_or(Forged::Malformed)?;
        let (from, at) = rest.rsplit_once('.').ok_or(Forged::Malformed)?;
        let at: u64 = at.parse().map_err(|_| Forged::Malformed)?;
        let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| Forged::Malformed)?;
        let nonce = URL_SAFE_NO_PAD
            .decode(nonce)
            .map_err(|_| Forged::Malformed)?;
        let (Ok(mac), Ok(nonce)) = (
            <[u8; MAC_BYTES]>::try_from(mac),
            <[u8; NONCE_BYTES]>::try_from(nonce),
        ) else {
            return Err(Forged::Malformed);
        };
        if from == self.node {
            return Err(Forged::Malformed);
        }
        let made = UNIX_EPOCH + Duration::from_millis(at);
        let apart = now
            .duration_since(made)
            .unwrap_or_else(|early| early.duration());
        if apart > VALID_FOR {
            return Err(Forged::Expired);
        }
        let expected = self.mac_of(from, &self.node, at, &nonce, request);
        if !bool::from(mac.ct_eq(&expected)) {
            return Err(Forged::Mismatch);
        }
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        if taken.first(mac, at, millis(now)) {
            Ok(())
        } else {
            Err(Forged::Replayed)
        }
    }

    fn mac_of(
        &self,
        from: &str,
        to: &str,
        at: u64,
        nonce: &[u8; NONCE_BYTES],
        request: Forward<'_>,
    ) -> [u8; MAC_BYTES] {
        let mut mac = self.mac.clone();
        let at = at.to_string();
        let mut parts: Vec<&[u8]> = vec![
            from.as_bytes(),
            to.as_bytes(),
            at.as_bytes(),
            nonce,
            request.method.as_str().as_bytes(),
            request.session.as_bytes(),
        ];
        // A voucher without a caller reads as it did before callers
        // travelled, so nodes of both kinds vouch for each other.
        if !request.caller.is_empty() {
            parts.push(request.caller.as_bytes());
        }
        // Tagged: a subject without a caller never reads as a caller.
        if !request.subject.is_empty() {
            parts.push(b"subject");
            parts.push(request.subject.as_bytes());
        }
        for part in parts {
            // Each part's length first: no two lists of parts read alike.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        let full = mac.finalize().into_bytes();
        let mut truncated = [0; MAC_BYTES];
        truncated.copy_from_slice(&full[..MAC_BYTES]);
        truncated
    }
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> FleetKey {
        FleetKey::new([byte; 32])
    }

    /// Two nodes of one fleet.
    fn pair() -> (Vouchers, Vouchers) {
        (
            Vouchers::new("one", &key(1), "t"),
            Vouchers::new("two", &key(1), "t"),
        )
    }

    /// A POST of a session node two holds.
    const POST: Forward<'static> = Forward {
        method: &Method::POST,
        session: "two.a.b",
        caller: "",
        subject: "",
    };

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_800_000_000_000 + ms)
    }

    #[test]
    fn a_voucher_is_taken_by_the_node_it_names_for_its_request_only() {
        let (one, two) = pair();
        let post = POST;
        let voucher = one.vouch("two", post, at(0));
        assert!(voucher.to_str().unwrap().starts_with("one.1800000000000."));
        assert_eq!(two.check(&voucher, post, at(5_000)), Ok(()));
        assert_eq!(
            two.check(&voucher, post, at(5_001)),
            Err(Forged::Replayed),
            "once only"
        );
        let early = one.vouch("two", post, at(0));
        assert_ne!(early, voucher, "two vouchers in one millisecond differ");
        assert_eq!(
            two.check(&early, post, at(0) - Duration::from_secs(5)),
            Ok(())
        );

        let other_requests = [
            Forward {
                method: &Method::DELETE,
                ..post
            },
            Forward {
                session: "two.a.c",
                ..post
            },
            Forward {
                caller: "eyJ2aWEiOiJrZXkifQ",
                ..post
            },
            Forward {
                subject: "another-callers-token",
                ..post
            },
        ];
        // A caller moved into the subject's place does not verify either.
        let with_caller = Forward {
            caller: "eyJ2aWEiOiJrZXkifQ",
            ..post
        };
        let vouched = one.vouch("two", with_caller, at(0));
        let moved = Forward {
            subject: "eyJ2aWEiOiJrZXkifQ",
            ..post
        };
        assert_eq!(two.check(&vouched, moved, at(1)), Err(Forged::Mismatch));
        for other in other_requests {
            assert_eq!(
                two.check(&voucher, other, at(1)),
                Err(Forged::Mismatch),
                "{other:?}"
            );
        }
        assert_eq!(two.check(&voucher, post, at(31_000)), Err(Forged::Expired));
        assert_eq!(
            one.check(&voucher, post, at(1)),
            Err(Forged::Malformed),
            "its own"
        );
        let three = Vouchers::new("three", &key(1), "t");
        assert_eq!(
            three.check(&voucher, post, at(1)),
            Err(Forged::Mismatch),
            "for another node"
        );
        for (key, namespace) in [(key(2), "t"), (key(1), "u")] {
            let stranger = Vouchers::new("one", &key, namespace);
            let forged = stranger.vouch("two", post, at(0));
            assert_eq!(two.check(&forged, post, at(1)), Err(Forged::Mismatch));
        }
        let nonce = "AAAAAAAAAAAAAAAA";
        let mac = "AAAAAAAAAAAAAAAAAAAAAA";
        for text in [
            "1",
            &format!("one.x.{nonce}.{mac}"),
            "one.1800000000000",
            &format!("one.1800000000000.{mac}"),
            "",
            &format!("one.1800000000000.{nonce}.!!"),
            &format!("one.1800000000000.!!.{mac}"),
            &format!("one.1800000000000.AAAA.{mac}"),
            &format!("one.1800000000000.{nonce}.AAAA"),
        ] {
            let value = HeaderValue::from_str(text).unwrap();
            assert_eq!(
                two.check(&value, post, at(1)),
                Err(Forged::Malformed),
                "{text}"
            );
        }
    }

    /// A voucher is held as taken while it could still be taken; after
    /// that, it is refused as expired and forgotten.
    #[test]
    fn taken_vouchers_are_forgotten_once_expired() {
        let (one, two) = pair();
        let post = POST;
        let first = one.vouch("two", post, at(0));
        assert_eq!(two.check(&first, post, at(0)), Ok(()));
        // One every 30 ms for 90 s: a thousand at a time are valid.
        for n in 0..3_000 {
            let now = at(40_000 + 30 * n);
            let voucher = one.vouch("two", post, now);
            assert_eq!(two.check(&voucher, post, now), Ok(()));
        }
        let held = two.taken.lock().unwrap().at.len();
        assert!(held < 3_000, "the expired were swept: {held}");
        assert_eq!(two.check(&first, post, at(40_000)), Err(Forged::Expired));
    }
}
