//! The MCP headers of streamable HTTP, spelled once: the session id, the
//! protocol version, and SEP-2243's standard headers (`Mcp-Method`,
//! `Mcp-Name`, and `Mcp-Param-*` for the arguments a tool's input schema
//! marks with `x-mcp-header`). Both sides use them: the direct client
//! (`session/direct.rs`) stamps them, the gateway's direct path
//! (`gateway/direct.rs`) checks them.

use http::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestMethod, ClientRequest, ConstString, JsonObject};
use serde_json::Value;

use crate::call::UpstreamRequest;

pub(crate) const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub(crate) const METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub(crate) const NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Every MCP header's name starts with it (lower case, as `http` keeps
/// names).
pub(crate) const PREFIX: &str = "mcp-";

/// The HTTP status a 2026-07-28 server answers a request's JSON-RPC error
/// `code` with (rmcp's `jsonrpc_http_status`): a few protocol errors are
/// 4xx, the rest 200. A 2025 server answers every error with 200.
pub(crate) fn per_request_status(code: rmcp::model::ErrorCode) -> http::StatusCode {
    use rmcp::model::ErrorCode;
    match code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => http::StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => http::StatusCode::NOT_FOUND,
        _ => http::StatusCode::OK,
    }
}

/// What `Mcp-Param-*` headers start with.
const PARAM_PREFIX: &str = "mcp-param-";

/// How a value that cannot travel bare is wrapped: `=?base64?…?=`.
const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// Whether `value` is a plain header value: printable ASCII without spaces,
/// not looking like the Base64 wrapping. A stricter test than `encoded`'s
/// (which also sends inner spaces as they are): where a header must simply
/// equal the body's value.
pub(crate) fn bare_header_value(value: &str) -> bool {
    !value.is_empty()
        && value.bytes().all(|b| (0x21..=0x7e).contains(&b))
        && !(value.starts_with(BASE64_PREFIX) && value.ends_with(BASE64_SUFFIX))
}

/// The SEP-2243 headers of a 2026-07-28 request, as rmcp's client builds
/// them: `Mcp-Method`; `Mcp-Name` for the methods that name something; and
/// for a tool whose input schema (`schema`) marks arguments with
/// `x-mcp-header`, an `Mcp-Param-*` header for each such argument given
/// (`arguments`: the call's, `None` for any other request; read only when
/// there is a `schema`).
pub(crate) fn request_headers(
    request: &UpstreamRequest,
    schema: Option<&JsonObject>,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = Vec::with_capacity(2);
    // A call's method is a constant: no copy of it per call.
    let (method, name) = match request {
        UpstreamRequest::Call(call) => (
            Ok(HeaderValue::from_static(
                <CallToolRequestMethod as ConstString>::VALUE,
            )),
            Some(&*call.name),
        ),
        UpstreamRequest::Relayed(request) => (
            HeaderValue::from_str(request.request().method()),
            name_of(request.request()),
        ),
    };
    if let Ok(method) = method {
        headers.push((METHOD, method));
    }
    if let Some(name) = name.and_then(encoded) {
        headers.push((NAME, name));
    }
    if let Some(schema) = schema
        && let Some(arguments) = request.call().and_then(|call| call.arguments.parsed())
    {
        for (path, _, header) in annotated(schema) {
            let Some(header) = header.as_str().filter(|header| !header.is_empty()) else {
                continue;
            };
            let Some(first) = path.first().and_then(|key| arguments.get(*key)) else {
                continue;
            };
            let Some(argument) = path[1..]
                .iter()
                .try_fold(first, |value, key| value.get(key))
            else {
                continue;
            };
            let text = match argument {
                Value::String(text) => text.clone(),
                Value::Bool(flag) => flag.to_string(),
                Value::Number(number) => number.to_string(),
                _ => continue,
            };
            let name = HeaderName::try_from(format!("{PARAM_PREFIX}{header}"));
            if let (Ok(name), Some(value)) = (name, encoded(&text)) {
                headers.push((name, value));
            }
        }
    }
    headers
}

/// What a request's `Mcp-Name` carries: a tool's or prompt's name, a
/// resource's URI, a task's id.
fn name_of(request: &ClientRequest) -> Option<&str> {
    Some(match request {
        ClientRequest::CallToolRequest(call) => &call.params.name,
        ClientRequest::GetPromptRequest(get) => &get.params.name,
        ClientRequest::ReadResourceRequest(read) => &read.params.uri,
        ClientRequest::SubscribeRequest(subscribe) => &subscribe.params.uri,
        ClientRequest::UnsubscribeRequest(unsubscribe) => &unsubscribe.params.uri,
        ClientRequest::GetTaskRequest(get) => &get.params.task_id,
        ClientRequest::UpdateTaskRequest(update) => &update.params.task_id,
        ClientRequest::CancelTaskRequest(cancel) => &cancel.params.task_id,
        _ => return None,
    })
}

/// `value` as a header value, Base64-wrapped when it cannot travel as it is
/// (rmcp's rule: a space or tab at either end, a control or non-ASCII
/// character, or what looks like the wrapping itself).
fn encoded(value: &str) -> Option<HeaderValue> {
    use base64::{Engine, prelude::BASE64_STANDARD};
    let edge = |byte: Option<&u8>| matches!(byte, Some(b' ' | b'\t'));
    let wrap = !value.is_empty()
        && (edge(value.as_bytes().first())
            || edge(value.as_bytes().last())
            || value.chars().any(|c| !(' '..='~').contains(&c))
            || (value.starts_with(BASE64_PREFIX) && value.ends_with(BASE64_SUFFIX)));
    if wrap {
        let wrapped = format!(
            "{BASE64_PREFIX}{}{BASE64_SUFFIX}",
            BASE64_STANDARD.encode(value)
        );
        HeaderValue::from_str(&wrapped).ok()
    } else {
        HeaderValue::from_str(value).ok()
    }
}

/// The `x-mcp-header` annotations of a schema: for every property reached
/// from the root through `properties` keys alone that has one, its path,
/// its schema and the annotation.
fn annotated(schema: &JsonObject) -> Vec<(Vec<&str>, &Value, &Value)> {
    fn walk<'a>(
        properties: Option<&'a Value>,
        path: &mut Vec<&'a str>,
        out: &mut Vec<(Vec<&'a str>, &'a Value, &'a Value)>,
    ) {
        let Some(Value::Object(properties)) = properties else {
            return;
        };
        for (name, property) in properties {
            path.push(name);
            if let Some(header) = property.get("x-mcp-header") {
                out.push((path.clone(), property, header));
            }
            walk(property.get("properties"), path, out);
            path.pop();
        }
    }
    let mut found = Vec::new();
    walk(schema.get("properties"), &mut Vec::new(), &mut found);
    found
}

/// Why a tool's `x-mcp-header` annotations are unusable, as rmcp's client
/// judges them before it lists the tool (it leaves such tools out): each
/// must be a non-empty HTTP token, unique regardless of case, on a
/// `string`, `integer` or `boolean` property reached from the root through
/// `properties` keys alone.
pub(crate) fn unusable_annotations(schema: &JsonObject) -> Option<String> {
    if schema.contains_key("x-mcp-header") {
        return Some("x-mcp-header must annotate a property, not the schema root".to_owned());
    }
    if off_chain(schema, true) {
        return Some("x-mcp-header must sit on a `properties`-only path from the root".to_owned());
    }
    let mut seen = std::collections::HashSet::new();
    for (path, definition, header) in annotated(schema) {
        let property = path.join(".");
        let Value::String(header) = header else {
            return Some(format!(
                "property `{property}`: x-mcp-header must be a string"
            ));
        };
        if header.is_empty() {
            return Some(format!(
                "property `{property}`: x-mcp-header must not be empty"
            ));
        }
        if HeaderName::try_from(header.as_str()).is_err() {
            return Some(format!(
                "property `{property}`: x-mcp-header `{header}` is not a valid HTTP token"
            ));
        }
        if !seen.insert(header.to_ascii_lowercase()) {
            return Some(format!(
                "property `{property}`: duplicate x-mcp-header `{header}` (case-insensitive)"
            ));
        }
        if !matches!(
            definition.get("type").and_then(Value::as_str),
            Some("string" | "integer" | "boolean")
        ) {
            return Some(format!(
                "property `{property}`: x-mcp-header requires a string, integer or boolean"
            ));
        }
    }
    None
}

/// Whether `schema` holds an `x-mcp-header` anywhere but on the `properties`
/// chain from the root (`on_chain`: whether `schema` itself is on it).
fn off_chain(schema: &JsonObject, on_chain: bool) -> bool {
    fn any_value(value: &Value, on_chain: bool) -> bool {
        value
            .as_object()
            .is_some_and(|map| map.values().any(|schema| within(schema, on_chain)))
    }
    fn within(value: &Value, on_chain: bool) -> bool {
        match value {
            Value::Object(schema) => off_chain(schema, on_chain),
            Value::Array(items) => items.iter().any(|item| within(item, false)),
            _ => false,
        }
    }
    schema.iter().any(|(key, value)| match key.as_str() {
        "x-mcp-header" => !on_chain,
        "properties" => any_value(value, on_chain),
        "$defs" | "definitions" | "dependencies" | "dependentSchemas" | "patternProperties" => {
            any_value(value, false)
        }
        // Instance data or property names, not schemas.
        "default" | "const" | "enum" | "examples" | "dependentRequired" => false,
        _ => within(value, false),
    })
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

    fn headers_of(request: &ClientRequest, schema: Option<&JsonObject>) -> Vec<(String, String)> {
        request_headers(&request.clone().into(), schema)
            .into_iter()
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn request(value: serde_json::Value) -> ClientRequest {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_request_names_its_method_and_what_it_acts_on() {
        let cases = [
            (
                json!({"method": "tools/call", "params": {"name": "echo"}}),
                pairs(&[("mcp-method", "tools/call"), ("mcp-name", "echo")]),
            ),
            (
                json!({"method": "prompts/get", "params": {"name": "greet"}}),
                pairs(&[("mcp-method", "prompts/get"), ("mcp-name", "greet")]),
            ),
            (
                json!({"method": "resources/read", "params": {"uri": "file:///a b"}}),
                pairs(&[
                    ("mcp-method", "resources/read"),
                    ("mcp-name", "file:///a b"),
                ]),
            ),
            (
                json!({"method": "tasks/get", "params": {"taskId": "t1"}}),
                pairs(&[("mcp-method", "tasks/get"), ("mcp-name", "t1")]),
            ),
            (
                json!({"method": "tools/list"}),
                pairs(&[("mcp-method", "tools/list")]),
            ),
            // What cannot travel bare is wrapped, as rmcp wraps it.
            (
                json!({"method": "tools/call", "params": {"name": "naïve"}}),
                pairs(&[
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "=?base64?bmHDr3Zl?="),
                ]),
            ),
            (
                json!({"method": "tools/call", "params": {"name": " x"}}),
                pairs(&[
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "=?base64?IHg=?="),
                ]),
            ),
        ];
        for (value, expected) in cases {
            let mut value = value;
            value["jsonrpc"] = json!("2.0");
            value["id"] = json!(1);
            assert_eq!(
                headers_of(&request(value.clone()), None),
                expected,
                "{value}"
            );
        }
    }

    #[test]
    fn marked_arguments_given_as_primitives_become_param_headers() {
        let tool = schema(json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry"},
            "where": {"type": "object", "properties": {
                "zone": {"type": "string", "x-mcp-header": "Zone"}}},
            "missing": {"type": "string", "x-mcp-header": "Missing"},
            "plain": {"type": "string"}
        }}));
        let call = request(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "arguments": {"region": "eu", "count": 3, "dry": true,
                "where": {"zone": "zé"}, "plain": "p"}}}));
        let mut headers = headers_of(&call, Some(&tool));
        headers.sort();
        assert_eq!(
            headers,
            pairs(&[
                ("mcp-method", "tools/call"),
                ("mcp-name", "t"),
                ("mcp-param-count", "3"),
                ("mcp-param-dry", "true"),
                ("mcp-param-region", "eu"),
                ("mcp-param-zone", "=?base64?esOp?="),
            ])
        );
    }

    #[test]
    fn unusable_annotations_are_told_as_rmcp_tells_them() {
        let usable = [
            json!({"type": "object"}),
            json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": "A"},
                "b": {"type": "object", "properties": {
                    "c": {"type": "integer", "x-mcp-header": "C"}}}}}),
            // Property names and instance data are not schemas.
            json!({"type": "object", "dependentRequired": {"x-mcp-header": ["a"]},
                "default": {"x-mcp-header": "D"}}),
        ];
        for value in usable {
            assert_eq!(
                unusable_annotations(&schema(value.clone())),
                None,
                "{value}"
            );
        }
        let unusable = [
            json!({"type": "object", "x-mcp-header": "Root"}),
            json!({"type": "object", "$defs": {"a": {"type": "string", "x-mcp-header": "A"}}}),
            json!({"type": "object", "properties": {"list": {"type": "array",
                "items": {"type": "string", "x-mcp-header": "Item"}}}}),
            json!({"type": "object", "anyOf": [{"properties": {
                "a": {"type": "string", "x-mcp-header": "A"}}}]}),
            json!({"type": "object", "properties": {"a": {"type": "object", "x-mcp-header": "A"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": 7}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": "Bad Header"}}}),
            json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": "Same"},
                "b": {"type": "string", "x-mcp-header": "same"}}}),
        ];
        for value in unusable {
            assert!(
                unusable_annotations(&schema(value.clone())).is_some(),
                "{value}"
            );
        }
    }
}
