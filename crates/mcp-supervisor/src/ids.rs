//! Request ids and progress tokens (rmcp's `NumberOrString`) read straight
//! from JSON.
//!
//! rmcp reads one through a `serde_json::Value` (a tree first, and for a
//! string a second copy). On the path a call takes (the direct path's
//! reading of a posted call, the straight reading of an upstream's tool
//! answer) they are read here instead, by rmcp's rules: an integer that
//! fits `i64`, written as one or as a float that is exactly an integer
//! below 2^53, or a string. Use with `#[serde(deserialize_with = …)]`.

use rmcp::model::{NumberOrString, ProgressToken};
use serde::{
    Deserializer,
    de::{self, Visitor},
};

/// A request id.
pub(crate) fn id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<NumberOrString, D::Error> {
    deserializer.deserialize_any(Ids)
}

/// A request id that may be absent (`null`, or with `#[serde(default)]`,
/// missing).
pub(crate) fn optional_id<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<NumberOrString>, D::Error> {
    deserializer.deserialize_option(Optional)
}

/// A progress token that may be absent.
pub(crate) fn optional_token<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ProgressToken>, D::Error> {
    optional_id(deserializer).map(|id| id.map(ProgressToken))
}

struct Ids;

impl<'de> Visitor<'de> for Ids {
    type Value = NumberOrString;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a number or a string")
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<NumberOrString, E> {
        Ok(NumberOrString::Number(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<NumberOrString, E> {
        i64::try_from(value)
            .map(NumberOrString::Number)
            .map_err(|_| E::custom("Number too large for i64"))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<NumberOrString, E> {
        // 2^53 itself is left out: 2^53 + 1 parses to the same `f64`.
        const MAX_EXACT: f64 = 9_007_199_254_740_992.0;
        if value.fract() == 0.0 && value.abs() < MAX_EXACT {
            #[allow(clippy::cast_possible_truncation)]
            return Ok(NumberOrString::Number(value as i64));
        }
        Err(E::custom("Expected an integer"))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<NumberOrString, E> {
        Ok(NumberOrString::String(value.into()))
    }
}

struct Optional;

impl<'de> Visitor<'de> for Optional {
    type Value = Option<NumberOrString>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a number, a string or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        id(deserializer).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(serde::Deserialize)]
    struct Ours {
        #[serde(deserialize_with = "id")]
        id: NumberOrString,
    }

    #[derive(serde::Deserialize)]
    struct Rmcps {
        id: NumberOrString,
    }

    #[derive(serde::Deserialize)]
    struct Tokens {
        #[serde(default, deserialize_with = "optional_token")]
        ours: Option<ProgressToken>,
        #[serde(default)]
        rmcps: Option<ProgressToken>,
    }

    /// Every kind of JSON value, and numbers at each of rmcp's edges, read
    /// as rmcp reads them: the same id, or an error for both.
    #[test]
    fn ids_are_read_as_rmcp_reads_them() {
        let values = [
            "0",
            "7",
            "-7",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "18446744073709551616",
            "1.0",
            "1e2",
            "-2.0",
            "1.5",
            "9007199254740991.0",
            "9007199254740992.0",
            "1e300",
            "\"s\"",
            "\"\"",
            "\"é\\n\"",
            "null",
            "true",
            "[1]",
            "{\"a\":1}",
        ];
        for value in values {
            let text = format!("{{\"id\":{value}}}");
            let ours = serde_json::from_str::<Ours>(&text).map(|read| read.id);
            let rmcps = serde_json::from_str::<Rmcps>(&text).map(|read| read.id);
            match (ours, rmcps) {
                (Ok(ours), Ok(rmcps)) => assert_eq!(ours, rmcps, "{value}"),
                (Err(_), Err(_)) => {}
                (ours, rmcps) => panic!("{value}: ours {ours:?}, rmcp's {rmcps:?}"),
            }
            let text = format!("{{\"ours\":{value},\"rmcps\":{value}}}");
            if let Ok(tokens) = serde_json::from_str::<Tokens>(&text) {
                assert_eq!(tokens.ours, tokens.rmcps, "{value}");
            }
        }
        let tokens: Tokens = serde_json::from_value(json!({})).unwrap();
        assert_eq!((tokens.ours, tokens.rmcps), (None, None));
    }
}
