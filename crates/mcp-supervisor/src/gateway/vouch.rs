//! A forwarded request's voucher (docs/FLEET.md, "Sessions across nodes").
//!
//! A node that forwards a request to the node holding its session has
//! already checked the caller (the bearer token). It does not pass the
//! client's `Authorization` on: the bearer stays with the node it was
//! sent to. Instead it vouches for the request in [`FORWARDED`]:
//! `{from}.{at}.{mac}`, `at` the time in milliseconds and `mac` the first
//! 16 bytes of HMAC-SHA256 over the two nodes' names, `at`, the method and
//! the session id (not the path: a proxy in front of the other node may
//! change it), in unpadded base64url, keyed
//! from the fleet key and namespace. The holding node takes a request with
//! a voucher that names it, is at most [`VALID_FOR`] old and whose MAC is
//! right in place of the bearer check; a request that carries the mark
//! otherwise (a client forging it, a voucher for another node or request,
//! or an old one) is refused with 401.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderName, HeaderValue, Method};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::config::FleetKey;

/// Marks a request one node forwarded to another, with its voucher.
pub(super) const FORWARDED: HeaderName = HeaderName::from_static("mcp-supervisor-forwarded");

/// How far a voucher's time may be from the holder's clock: the forward
/// takes milliseconds; the rest is the clocks' difference.
pub(super) const VALID_FOR: Duration = Duration::from_secs(30);

/// What the vouchers' key is derived with, the namespace after it.
const PURPOSE: &[u8] = b"mcp-supervisor/forwarded-requests/v1";
const MAC_BYTES: usize = 16;

/// Why a forwarded request was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Forged {
    /// Not `{from}.{at}.{mac}`, or another node's voucher.
    Malformed,
    /// Made more than [`VALID_FOR`] away from now.
    Expired,
    /// The MAC does not match this request.
    Mismatch,
}

/// This node's vouchers: made for requests it forwards, checked on those
/// forwarded to it.
pub(super) struct Vouchers {
    node: String,
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for Vouchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vouchers")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// The request a voucher is for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Forward<'a> {
    pub(super) method: &'a Method,
    pub(super) session: &'a str,
}

impl Vouchers {
    pub(super) fn new(node: &str, key: &FleetKey, namespace: &str) -> Self {
        let purpose = [PURPOSE, b"\0", namespace.as_bytes()].concat();
        Vouchers {
            node: node.to_owned(),
            mac: <Hmac<Sha256> as KeyInit>::new_from_slice(&key.derive(&purpose))
                .expect("HMAC takes a key of any length"),
        }
    }

    /// The voucher of this node for `request`, forwarded to `to` at `now`.
    pub(super) fn vouch(&self, to: &str, request: Forward<'_>, now: SystemTime) -> HeaderValue {
        let at = millis(now);
        let mac = URL_SAFE_NO_PAD.encode(self.mac_of(&self.node, to, at, request));
        HeaderValue::from_str(&format!("{}.{at}.{mac}", self.node))
            .expect("node names, digits and base64url are header-safe")
    }

    /// Whether `voucher` is another node's for `request`, forwarded here,
    /// made close enough to `now`.
    pub(super) fn check(
        &self,
        voucher: &HeaderValue,
        request: Forward<'_>,
        now: SystemTime,
    ) -> Result<(), Forged> {
        let text = voucher.to_str().map_err(|_| Forged::Malformed)?;
        let (rest, mac) = text.rsplit_once('.').ok_or(Forged::Malformed)?;
        let (from, at) = rest.rsplit_once('.').ok_or(Forged::Malformed)?;
        let at: u64 = at.parse().map_err(|_| Forged::Malformed)?;
        let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| Forged::Malformed)?;
        if from == self.node || mac.len() != MAC_BYTES {
            return Err(Forged::Malformed);
        }
        let made = UNIX_EPOCH + Duration::from_millis(at);
        let apart = now
            .duration_since(made)
            .unwrap_or_else(|early| early.duration());
        if apart > VALID_FOR {
            return Err(Forged::Expired);
        }
        let expected = self.mac_of(from, &self.node, at, request);
        if bool::from(mac.ct_eq(&expected)) {
            Ok(())
        } else {
            Err(Forged::Mismatch)
        }
    }

    fn mac_of(&self, from: &str, to: &str, at: u64, request: Forward<'_>) -> [u8; MAC_BYTES] {
        let mut mac = self.mac.clone();
        for part in [
            from.as_bytes(),
            to.as_bytes(),
            at.to_string().as_bytes(),
            request.method.as_str().as_bytes(),
            request.session.as_bytes(),
        ] {
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

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_800_000_000_000 + ms)
    }

    #[test]
    fn a_voucher_is_taken_by_the_node_it_names_for_its_request_only() {
        let (one, two) = (
            Vouchers::new("one", &key(1), "t"),
            Vouchers::new("two", &key(1), "t"),
        );
        let post = Forward {
            method: &Method::POST,
            session: "two.a.b",
        };
        let voucher = one.vouch("two", post, at(0));
        assert!(voucher.to_str().unwrap().starts_with("one.1800000000000."));
        assert_eq!(two.check(&voucher, post, at(5_000)), Ok(()));
        assert_eq!(
            two.check(&voucher, post, at(0) - Duration::from_secs(5)),
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
        ];
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
        for text in [
            "1",
            "one.x.AAAA",
            "one.1800000000000",
            "",
            "one.1800000000000.!!",
        ] {
            let value = HeaderValue::from_str(text).unwrap();
            assert_eq!(
                two.check(&value, post, at(1)),
                Err(Forged::Malformed),
                "{text}"
            );
        }
    }
}
