//! The hand-written JSON steps beside their serde twins, for the fuzz
//! target `codec` (feature `twins`; never in the shipped binary). Each
//! function answers what both readings make of the same input, and the
//! target holds them to one answer (docs/TESTING.md, "Fuzzing").

use crate::codec::json_check::{self, Unreadable};

/// The verdicts on `bytes` as a call's arguments: the one-pass check that
/// runs, then its twin composed of serde's readings.
pub fn arguments(bytes: &[u8]) -> (Result<(), &'static str>, Result<(), &'static str>) {
    let name = |verdict: Result<(), Unreadable>| verdict.map_err(Unreadable::as_str);
    (
        name(json_check::check(bytes)),
        name(json_check::by_serde(bytes)),
    )
}

/// A posted `tools/call` read by hand, when the hand reading answers, and
/// read fully by serde, each as `Debug` text: as a 2025 session's message
/// and as a 2026-07-28 client's call.
pub fn posted_call(body: &[u8]) -> Vec<(String, String)> {
    crate::codec::posted::twins(body)
}

/// An upstream's event stream read by hand (`http::events`) and by
/// `sse_stream`, each item as `Debug` text, with `data` as the stream: whole,
/// and cut into chunks of 1 to 7 bytes (the sizes taken from its own bytes).
pub fn event_stream(data: &[u8]) -> Vec<(Vec<String>, Vec<String>)> {
    let mut cut = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let at = (usize::from(rest[0]) % 7 + 1).min(rest.len());
        cut.push(bytes::Bytes::copy_from_slice(&rest[..at]));
        rest = &rest[at..];
    }
    [vec![bytes::Bytes::copy_from_slice(data)], cut]
        .into_iter()
        .map(|chunks| crate::http::event_twins(&chunks))
        .collect()
}

/// An upstream's tool answer read by hand, when the hand reading answers,
/// and read by serde (`None`: serde does not read it as one), each as
/// `Debug` text.
pub fn tool_answer(data: &str) -> Option<(String, Option<String>)> {
    crate::codec::answers::twins(data)
}

/// An upstream's tool answer passed to the client by hand (its structured
/// content as the upstream wrote it) and by serde, each read back as JSON:
/// `data` as the answer, and as its structured content.
pub fn passed_answer(data: &[u8]) -> Vec<(serde_json::Value, serde_json::Value)> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Vec::new();
    };
    let wrapped = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[],"structuredContent":{text}}}}}"#
    );
    [text, wrapped.as_str()]
        .into_iter()
        .filter_map(crate::codec::answers::passed_twins)
        .collect()
}

/// An answer written by hand and by serde, when the hand writes it: the
/// message `data` holds, or else a tool's answer with `data` as its text
/// (so any bytes reach the writer's escaping).
pub fn reply(data: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    use rmcp::model::{
        CallToolResult, ContentBlock, RequestId, ServerJsonRpcMessage, ServerResult,
    };
    let message = serde_json::from_slice::<ServerJsonRpcMessage>(data).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(data).into_owned();
        let result = CallToolResult::success(vec![ContentBlock::text(text)]);
        let id = RequestId::Number(i64::try_from(data.len()).unwrap_or(i64::MAX));
        ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), id)
    });
    let hand = crate::codec::reply::plain_answer(&message)?;
    Some((hand, serde_json::to_vec(&message).ok()?))
}

/// A `tools/call` to an upstream written by hand and by rmcp, each read
/// back as JSON: with `data` as its arguments when they are an object
/// (held raw, as the gateway holds a client's, and parsed, as rmcp's
/// client holds them), else as its name; a 2026-07-28 client context in
/// `_meta`. `None` when the two need not agree (rmcp could not write it).
pub fn upstream_call(data: &[u8]) -> Option<Vec<(serde_json::Value, serde_json::Value)>> {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest,
        NumberOrString, ProgressToken, ProtocolVersion, RequestId, RequestMetaObject,
    };
    use serde_json::value::RawValue;

    use crate::{
        call::{Arguments, ToolCall},
        codec::request::{Outgoing, Stamp, Stamped},
        heavy::Encode,
    };
    let context = RequestMetaObject::with_client_context(
        ProtocolVersion::V_2026_07_28,
        Default::default(),
        Default::default(),
    );
    let stamp = Stamp::new(&context).ok()?;
    // The attempt's progress token, as rmcp's client puts it in `_meta`.
    let token = ProgressToken(NumberOrString::Number(7));
    let mut with_token = context.clone();
    with_token.set_progress_token(token.clone());
    let text = std::str::from_utf8(data).ok();
    let checked = text
        .and_then(|text| RawValue::from_string(text.to_owned()).ok())
        .and_then(|raw| json_check::Checked::new(raw).ok());
    let (name, held, parsed) = match (text, checked) {
        (Some(text), Some(checked)) => {
            let parsed: rmcp::model::JsonObject = serde_json::from_str(text).ok()?;
            ("t".to_owned(), Arguments::from(checked), Some(parsed))
        }
        _ => (
            String::from_utf8_lossy(data).into_owned(),
            Arguments::default(),
            None,
        ),
    };
    let id = RequestId::Number(i64::try_from(data.len()).unwrap_or(i64::MAX));
    let mut params = CallToolRequestParams::new(name.clone());
    params.arguments = parsed.clone();
    let mut call = CallToolRequest::new(params);
    call.extensions.insert(with_token);
    let rmcp_text = serde_json::to_vec(&ClientJsonRpcMessage::request(
        ClientRequest::CallToolRequest(call),
        id.clone(),
    ))
    .ok()?;
    let rmcp: serde_json::Value = serde_json::from_slice(&rmcp_text).ok()?;
    let mut answers = Vec::new();
    for arguments in [held, Arguments::from(parsed)] {
        let outgoing = Outgoing::request(
            ToolCall::new(name.clone(), arguments).into(),
            id.clone(),
            Stamped {
                context: Some(stamp.clone()),
                token: Some(token.clone()),
            },
        );
        let mut written = Vec::new();
        outgoing.encode(&mut written).ok()?;
        answers.push((serde_json::from_slice(&written).ok()?, rmcp.clone()));
    }
    Some(answers)
}

#[cfg(test)]
mod tests {
    /// The fuzz target's twin compares something: both holdings of the
    /// arguments, and names of any bytes.
    #[test]
    fn the_fuzz_twin_writes_both_holdings_beside_rmcp() {
        let pairs = super::upstream_call(br#"{"a":[1,2.5,"\u00e9"],"b":{"c":null}}"#).unwrap();
        assert_eq!(pairs.len(), 2);
        for (hand, rmcp) in pairs {
            assert_eq!(hand, rmcp);
            assert_eq!(hand["params"]["arguments"]["a"][2], "é");
            assert!(hand["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].is_string());
            assert_eq!(hand["params"]["_meta"]["progressToken"], 7);
        }
        let named = super::upstream_call(b"not json \"q\"").unwrap();
        assert_eq!(named[0].0["params"]["name"], "not json \"q\"");
        assert_eq!(named[0].0, named[0].1);
    }
}
