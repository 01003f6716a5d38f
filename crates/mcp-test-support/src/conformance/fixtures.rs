//! Fixed data the conformance scenarios look for: names, texts, the tiny
//! image and audio payloads, and the JSON schemas that must reach the
//! client byte-for-byte.
//!
//! They live in one place because the suite checks several of them from
//! more than one scenario (the image is in a tool, a prompt and a resource),
//! and a typo in any copy would fail only one of those.

use serde_json::{Value, json};

/// A 1x1 PNG (one sea-green pixel), base64. Generated for this server.
pub(crate) const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mPQ6w4HAAH7ARFK28dFAAAAAElFTkSuQmCC";

/// A 4-sample 8 kHz mono 8-bit PCM WAV file, base64. Generated for this
/// server; `tools-call-audio` insists on `audio/wav`.
pub(crate) const WAV_BASE64: &str =
    "UklGRigAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQQAAACAoIBg";

/// Name this server gives itself in `initialize` and `server/discover`.
pub(crate) const SERVER_NAME: &str = "mcp-conformance-server";

/// Logger name on every `notifications/message` this server sends.
pub(crate) const LOGGER: &str = "conformance-server";

/// The resource the subscribe/unsubscribe scenarios subscribe to.
pub(crate) const WATCHED_RESOURCE: &str = "test://watched-resource";

/// Input schema of `json_schema_2020_12_tool`. It exercises the keywords
/// an SDK could strip on the way out (SEP-1613: `$schema`, `$defs`,
/// `additionalProperties`; SEP-2106: `$anchor`, `allOf`/`anyOf`,
/// `if`/`then`/`else`), so it is served as raw JSON, never through a
/// schema generator.
pub(crate) fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string"}
                }
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {
            "properties": {"contactMethod": {"const": "phone"}},
            "required": ["contactMethod"]
        },
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

/// `requestedSchema` of `test_elicitation_sep1034_defaults`: one field per
/// primitive type, each with a default (SEP-1034).
pub(crate) fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active"
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        },
        "required": []
    })
}

/// `requestedSchema` of `test_elicitation_sep1330_enums`: the five enum
/// shapes of SEP-1330 (untitled/titled single, legacy `enumNames`,
/// untitled/titled multi).
pub(crate) fn sep1330_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Pick one",
                "enum": ["option1", "option2", "option3"]
            },
            "titledSingle": {
                "type": "string",
                "description": "Pick one (titled)",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"}
                ]
            },
            "legacyEnum": {
                "type": "string",
                "description": "Pick one (legacy enumNames)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {
                "type": "array",
                "description": "Pick any",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
            },
            "titledMulti": {
                "type": "array",
                "description": "Pick any (titled)",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}
                    ]
                }
            }
        },
        "required": []
    })
}

/// A one-string-field form, the shape of most elicitations here.
pub(crate) fn one_field_form(field: &str, kind: &str) -> Value {
    json!({
        "type": "object",
        "properties": {field: {"type": kind}},
        "required": [field]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_what_their_mime_types_say() {
        // The base64 of the PNG signature and of "RIFF....WAVE".
        assert!(PNG_BASE64.starts_with("iVBORw0KGgo"));
        assert!(WAV_BASE64.starts_with("UklGR") && WAV_BASE64[8..16].eq("AABXQVZF"));
    }

    #[test]
    fn rmcp_accepts_the_elicitation_schemas() {
        for schema in [
            sep1034_schema(),
            sep1330_schema(),
            one_field_form("name", "string"),
        ] {
            serde_json::from_value::<rmcp::model::ElicitationSchema>(schema).unwrap();
        }
    }
}
