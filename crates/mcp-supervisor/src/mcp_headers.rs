//! The MCP headers of streamable HTTP, spelled once: the session id, the
//! protocol version, and SEP-2243's standard headers (`Mcp-Method`,
//! `Mcp-Name`, and `Mcp-Param-*` for the arguments a tool's input schema
//! marks with `x-mcp-header`). Both sides use them: the upstream lane
//! (`session/stateless.rs`) stamps them, the gateway's direct path
//! (`gateway/direct.rs`) checks them.

use http::HeaderName;
use rmcp::model::JsonObject;

pub(crate) const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub(crate) const METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub(crate) const NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Every MCP header's name starts with it (lower case, as `http` keeps
/// names).
pub(crate) const PREFIX: &str = "mcp-";

/// Whether `value` goes into a header as it is (rmcp Base64-wraps the rest).
pub(crate) fn bare_header_value(value: &str) -> bool {
    !value.is_empty()
        && value.bytes().all(|b| (0x21..=0x7e).contains(&b))
        && !(value.starts_with("=?base64?") && value.ends_with("?="))
}

/// Whether a tool's input schema marks any argument for a header.
pub(crate) fn promotes_headers(schema: &JsonObject) -> bool {
    fn marks(value: &serde_json::Value) -> bool {
        match value {
            serde_json::Value::Object(object) => object
                .iter()
                .any(|(key, value)| key == "x-mcp-header" || marks(value)),
            serde_json::Value::Array(items) => items.iter().any(marks),
            _ => false,
        }
    }
    schema
        .iter()
        .any(|(key, value)| key == "x-mcp-header" || marks(value))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: serde_json::Value) -> JsonObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn bare_values_and_header_promoting_schemas_are_told_apart() {
        assert!(bare_header_value("echo"));
        assert!(bare_header_value("up__get-weather.v2"));
        for name in ["", "with space", "naïve", "=?base64?ZWNobw==?="] {
            assert!(!bare_header_value(name), "{name:?}");
        }
        assert!(!promotes_headers(&schema(
            json!({"type": "object", "properties": {"region": {"type": "string"}}})
        )));
        assert!(promotes_headers(&schema(json!({"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}))));
    }
}
