//! The gateway's JSON-RPC intake, the parsing half: a POSTed body becomes a
//! `ClientJsonRpcMessage` exactly the way rmcp's streamable HTTP server reads
//! it (`serde_json::from_slice`, `transport/common/server_side_http.rs`)
//! before the gateway's handler sees anything.
//!
//! Invariants:
//! - parsing never panics, whatever the bytes;
//! - what parses serializes again, and that JSON parses again to the same
//!   JSON (one normalisation pass at most: the message rmcp hands the
//!   gateway is the same whether it came from the client or from a re-send).
//!
//! Not for documents that repeat a key in an object: rmcp parses a request
//! whose params repeat a key (`{"name": "a", "x": 1, "name": "b"}`) as a
//! *custom* request, because serde refuses a duplicate struct field, and the
//! gateway answers it "method not found"; re-serialized, the keys are unique
//! and the same request parses as the standard one. RFC 8259 leaves repeated
//! names undefined, so that is a quirk of rmcp's, not a bug of ours (found by
//! this target; see docs/TESTING.md, "Fuzzing").

use std::{collections::HashSet, fmt};

use rmcp::model::ClientJsonRpcMessage;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

pub fn run(data: &[u8]) {
    let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(data) else {
        return;
    };
    if serde_json::from_slice::<UniqueKeys>(data).is_err() {
        return;
    }
    let first = serde_json::to_value(&message).unwrap_or_else(|error| {
        panic!("a parsed message does not serialize: {error}\n{message:?}")
    });
    let again: ClientJsonRpcMessage =
        serde_json::from_value(first.clone()).unwrap_or_else(|error| {
            panic!("a parsed message, serialized, does not parse again: {error}\n{first}")
        });
    let second = serde_json::to_value(&again).expect("serializes");
    assert_eq!(
        first, second,
        "serialize(parse(serialize(m))) differs from serialize(m)\nparsed: {message:?}\nthen: {again:?}"
    );
}

/// Deserializes any JSON, failing on an object that repeats a key.
struct UniqueKeys;

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeys)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(UniqueKeys)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(UniqueKeys)
    }

    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(UniqueKeys)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key) {
                return Err(de::Error::custom("a repeated key"));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }
}
