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
/// read fully by serde, each as `Debug` text.
pub fn posted_call(body: &[u8]) -> Option<(String, String)> {
    crate::codec::posted::twins(body)
}

/// An upstream's tool answer read by hand, when the hand reading answers,
/// and read by serde (`None`: serde does not read it as one), each as
/// `Debug` text.
pub fn tool_answer(data: &str) -> Option<(String, Option<String>)> {
    crate::codec::answers::twins(data)
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
