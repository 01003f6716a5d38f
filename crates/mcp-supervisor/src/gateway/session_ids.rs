//! Session ids that name the node holding the session, for a gateway in a
//! fleet (docs/FLEET.md, "Sessions across nodes"; docs/DECISIONS.md #96).
//!
//! A 2025-era session lives in one process: its upstream sessions, its open
//! stream, the requests it waits on. Behind a load balancer without
//! affinity, its next request may reach another node, which must know where
//! to send it without asking anyone. So the id says so, and proves it:
//! `{node}.{random}.{mac}`, `random` 16 random bytes and `mac` the first 16
//! bytes of HMAC-SHA256 over `{node}.{random}`, both in unpadded base64url
//! (no `.` in either, so a node name with dots still splits). The MAC's key
//! is derived from the fleet key, so only a node of this fleet can make an
//! id that another node forwards; a client cannot make one point elsewhere.
//!
//! Without `[fleet]` the gateway keeps rmcp's own ids (UUIDs) and none of
//! this runs.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::config::FleetKey;

/// Bytes of randomness, and of the truncated MAC.
const RANDOM_BYTES: usize = 16;
const MAC_BYTES: usize = 16;
/// Their length in unpadded base64url.
const ENCODED: usize = 22;

/// What the session ids' key is derived with, so the fleet key's other uses
/// never share a key with this one.
const PURPOSE: &[u8] = b"mcp-supervisor/gateway-session-ids/v1";

/// Who holds the session an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holder<'a> {
    /// This node, by the name in the id (its MAC is not checked: the
    /// node's own session map decides, and a made-up id is not in it).
    Here,
    /// Another node of the fleet: its name, with a valid MAC.
    Node(&'a str),
    /// Nobody we know of: not an id of this shape, or a MAC that does not
    /// match. Handled as an unknown session.
    Unknown,
}

/// Mints and reads this node's session ids.
pub(super) struct SessionIds {
    node: String,
    /// HMAC keyed once with the derived key, cloned per use.
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for SessionIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionIds")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl SessionIds {
    pub(super) fn new(node: &str, key: &FleetKey) -> Self {
        let derived = key.derive(PURPOSE);
        SessionIds {
            node: node.to_owned(),
            mac: <Hmac<Sha256> as KeyInit>::new_from_slice(&derived)
                .expect("HMAC takes a key of any length"),
        }
    }

    /// A new session id of this node.
    pub(super) fn mint(&self) -> String {
        let random = URL_SAFE_NO_PAD.encode(rand::random::<[u8; RANDOM_BYTES]>());
        let mac = URL_SAFE_NO_PAD.encode(self.mac_of(&self.node, &random));
        format!("{}.{random}.{mac}", self.node)
    }

    /// Who holds the session `id` names.
    pub(super) fn holder<'a>(&self, id: &'a str) -> Holder<'a> {
        let Some((named, mac)) = id.rsplit_once('.') else {
            return Holder::Unknown;
        };
        let Some((node, random)) = named.rsplit_once('.') else {
            return Holder::Unknown;
        };
        if node == self.node {
            return Holder::Here;
        }
        if node.is_empty() || random.len() != ENCODED || mac.len() != ENCODED {
            return Holder::Unknown;
        }
        let Ok(presented) = URL_SAFE_NO_PAD.decode(mac) else {
            return Holder::Unknown;
        };
        let expected = self.mac_of(node, random);
        if bool::from(presented.ct_eq(&expected)) {
            Holder::Node(node)
        } else {
            Holder::Unknown
        }
    }

    /// The truncated MAC of `{node}.{random}`.
    fn mac_of(&self, node: &str, random: &str) -> [u8; MAC_BYTES] {
        let mut mac = self.mac.clone();
        mac.update(node.as_bytes());
        mac.update(b".");
        mac.update(random.as_bytes());
        let full = mac.finalize().into_bytes();
        let mut truncated = [0; MAC_BYTES];
        truncated.copy_from_slice(&full[..MAC_BYTES]);
        truncated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(node: &str, key: u8) -> SessionIds {
        SessionIds::new(node, &FleetKey::new([key; 32]))
    }

    #[test]
    fn an_id_names_its_node_and_every_node_of_the_fleet_reads_it() {
        let (a, b) = (ids("node-a", 1), ids("node-b", 1));
        let id = a.mint();
        assert!(id.starts_with("node-a."), "{id}");
        assert_eq!(id.len(), "node-a".len() + 2 + 2 * ENCODED, "{id}");
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
        assert_eq!(a.holder(&id), Holder::Here);
        assert_eq!(b.holder(&id), Holder::Node("node-a"));
        assert_ne!(a.mint(), id, "each id is new");
    }

    #[test]
    fn a_node_name_with_dots_still_splits() {
        let id = ids("eu.node-1", 7).mint();
        assert_eq!(ids("us.node-2", 7).holder(&id), Holder::Node("eu.node-1"));
        assert_eq!(ids("eu.node-1", 7).holder(&id), Holder::Here);
        assert_eq!(ids("node-1", 7).holder(&id), Holder::Node("eu.node-1"));
    }

    #[test]
    fn another_key_a_changed_part_or_another_shape_is_unknown() {
        let b = ids("node-b", 1);
        // Minted with another fleet's key.
        let foreign = ids("node-a", 2).mint();
        assert_eq!(b.holder(&foreign), Holder::Unknown);
        // A valid id made to name another node, or with its random part changed.
        let id = ids("node-a", 1).mint();
        let (_, rest) = id.split_once('.').unwrap();
        assert_eq!(b.holder(&format!("node-c.{rest}")), Holder::Unknown);
        let mut flipped = id.clone().into_bytes();
        let at = "node-a.".len();
        flipped[at] = if flipped[at] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            b.holder(std::str::from_utf8(&flipped).unwrap()),
            Holder::Unknown
        );
        for odd in [
            "",
            "0b6f2c1e-3d4a-4f5e-9a8b-7c6d5e4f3a2b",
            "node-a..",
            ".abc.def",
            "node-a.short.short",
            &format!("node-a.{}.{}", "A".repeat(ENCODED), "!".repeat(ENCODED)),
        ] {
            assert_eq!(b.holder(odd), Holder::Unknown, "{odd:?}");
        }
    }

    /// Known answers, computed once outside this code (Python's `hmac`
    /// and `hashlib`) from the format docs/FLEET.md states, for the fleet key
    /// of 32 bytes 0x01 and the node `node-a`: the derived key, and an id
    /// whose random part and MAC each hold `-` or `_`. A change of the
    /// derivation's label, of what the MAC covers, of its truncation or of
    /// the encoding fails here, and ids minted before it would stop being
    /// read by the nodes that took it.
    const KNOWN_DERIVED: &str = "b67bed6484f806057da0511e24f4856024959fa3e06b691a6c67e2937a0f9555";
    const KNOWN_ID: &str = "node-a.ttX0EzJRcI-uzewLKklohw.Yxb-iucyVskZISNgTaY_Yw";

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    #[test]
    fn a_known_id_is_read_and_minted_ids_have_its_format() {
        let key = FleetKey::new([1; 32]);
        assert_eq!(hex(&key.derive(PURPOSE)), KNOWN_DERIVED);
        assert_eq!(ids("node-b", 1).holder(KNOWN_ID), Holder::Node("node-a"));
        assert_eq!(ids("node-a", 1).holder(KNOWN_ID), Holder::Here);
        let (named, mac) = KNOWN_ID.rsplit_once('.').unwrap();
        let (node, random) = named.split_once('.').unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.encode(ids(node, 1).mac_of(node, random)),
            mac
        );

        // Fresh ids: `node-a.`, 16 bytes and the first 16 bytes of
        // HMAC-SHA256 (under the known derived key) over `node-a.{random}`,
        // both in unpadded base64url. A hundred, so that some random part
        // holds the bytes other encodings would write as `+` or `/`.
        let derived: Vec<u8> = (0..32)
            .map(|at| u8::from_str_radix(&KNOWN_DERIVED[2 * at..2 * at + 2], 16).unwrap())
            .collect();
        let base64url = |part: &str| {
            part.len() == ENCODED
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        let minting = ids("node-a", 1);
        for _ in 0..100 {
            let id = minting.mint();
            let parts: Vec<&str> = id.split('.').collect();
            let [node, random, mac] = parts.as_slice() else {
                panic!("{id}");
            };
            assert_eq!(*node, "node-a");
            assert!(base64url(random) && base64url(mac), "{id}");
            assert_eq!(URL_SAFE_NO_PAD.decode(random).unwrap().len(), 16, "{id}");
            let mut expected = <Hmac<Sha256> as KeyInit>::new_from_slice(&derived).unwrap();
            expected.update(format!("node-a.{random}").as_bytes());
            let expected = expected.finalize().into_bytes();
            assert_eq!(URL_SAFE_NO_PAD.encode(&expected[..16]), *mac, "{id}");
        }
    }

    #[test]
    fn the_key_is_not_in_debug() {
        let text = format!("{:?}", ids("node-a", 0x41));
        assert_eq!(text, "SessionIds { node: \"node-a\", .. }");
    }
}
