//! An answer written for a client: the usual `tools/call` answer, a tool's
//! text blocks, by hand ([`plain_answer`]), anything else by serde, its
//! twin (docs/DECISIONS.md #143); and an answer as an event of an event
//! stream. The test holds the hand-written bytes to serde's.

use bytes::Bytes;
use rmcp::model::{ServerJsonRpcMessage, ServerResult};

/// `message` as JSON: the usual answer, a tool's text blocks, written
/// here (rmcp's types serialize it through serde's derive at several times
/// the cost); anything else by serde (docs/DECISIONS.md #143).
pub(crate) fn encoded(message: &ServerJsonRpcMessage) -> Vec<u8> {
    plain_answer(message).unwrap_or_else(|| serde_json::to_vec(message).unwrap_or_default())
}

/// A tool's answer of plain text blocks, structured content and `_meta`,
/// written as serde writes it
/// (`encoded`'s test holds the two to the same bytes); `None` for any other
/// message. The fields are those rmcp 3.11's `CallToolResult` and
/// `TextContent` have (both `non_exhaustive`): one a later rmcp adds must
/// be added here, or the answer taken only when it is unset.
pub(crate) fn plain_answer(message: &ServerJsonRpcMessage) -> Option<Vec<u8>> {
    let ServerJsonRpcMessage::Response(response) = message else {
        return None;
    };
    let ServerResult::CallToolResult(result) = &response.result else {
        return None;
    };
    let mut texts = Vec::with_capacity(result.content.len());
    for block in &result.content {
        match block {
            rmcp::model::ContentBlock::Text(text)
                if text.meta.is_none() && text.annotations.is_none() =>
            {
                texts.push(text.text.as_str());
            }
            _ => return None,
        }
    }
    let mut out = Vec::with_capacity(96 + texts.iter().map(|text| text.len() + 32).sum::<usize>());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut out, &response.id).ok()?;
    out.extend_from_slice(br#","result":{"#);
    if let Some(result_type) = &result.result_type {
        out.extend_from_slice(br#""resultType":"#);
        serde_json::to_writer(&mut out, result_type).ok()?;
        out.push(b',');
    }
    out.extend_from_slice(br#""content":["#);
    for (at, text) in texts.iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"type":"text","text":"#);
        serde_json::to_writer(&mut out, text).ok()?;
        out.push(b'}');
    }
    out.push(b']');
    if let Some(structured) = &result.structured_content {
        out.extend_from_slice(br#","structuredContent":"#);
        serde_json::to_writer(&mut out, structured).ok()?;
    }
    match result.is_error {
        Some(true) => out.extend_from_slice(br#","isError":true"#),
        Some(false) => out.extend_from_slice(br#","isError":false"#),
        None => {}
    }
    if let Some(meta) = &result.meta {
        out.extend_from_slice(br#","_meta":"#);
        serde_json::to_writer(&mut out, meta).ok()?;
    }
    out.extend_from_slice(b"}}");
    Some(out)
}

/// `message` as one event of an event stream (`data: …`, a blank line).
pub(crate) fn event(message: &ServerJsonRpcMessage) -> Bytes {
    let mut event = b"data: ".to_vec();
    event.extend(encoded(message));
    event.extend_from_slice(b"\n\n");
    event.into()
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ErrorData, RequestId};

    use super::*;

    /// The usual answers are written by hand, byte for byte as serde
    /// writes them; anything else is serde's.
    #[test]
    fn answers_are_written_as_serde_writes_them() {
        use rmcp::model::{CallToolResult, ContentBlock, ResultType, TextContent};
        let texts = |texts: &[&str]| texts.iter().map(|text| ContentBlock::text(*text)).collect();
        let mut typed = CallToolResult::success(texts(&["a \"q\" \u{1}\n é", ""]));
        typed.result_type = Some(ResultType::COMPLETE);
        let mut unflagged = CallToolResult::success(vec![]);
        unflagged.is_error = None;
        let mut structured = CallToolResult::success(texts(&["{\"n\": 1}"]));
        structured.structured_content = Some(serde_json::json!({"n": 1, "a": [1.5, null, "é\""]}));
        let mut with_meta = CallToolResult::success(texts(&["m"]));
        with_meta.meta = Some(rmcp::model::MetaObject(
            serde_json::json!({"io.modelcontextprotocol/serverInfo": {"name": "s"}})
                .as_object()
                .unwrap()
                .clone(),
        ));
        structured.meta = with_meta.meta.clone();
        let plain = [
            CallToolResult::success(texts(&["hello"])),
            CallToolResult::error(texts(&["no", "twice"])),
            typed,
            unflagged,
            structured,
            with_meta,
        ];
        let mut annotated = TextContent::new("t");
        annotated.meta = Some(Default::default());
        let others = [
            CallToolResult::success(vec![ContentBlock::Text(annotated)]),
            CallToolResult::success(vec![ContentBlock::image("AA==", "image/png")]),
        ];
        for (results, by_hand) in [(plain.to_vec(), true), (others.to_vec(), false)] {
            for (result, id) in results.into_iter().zip([
                RequestId::Number(-7),
                RequestId::String("s\"1".into()),
                RequestId::Number(0),
                RequestId::String("".into()),
                RequestId::Number(5),
                RequestId::Number(6),
            ]) {
                let message =
                    ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), id);
                let serde = serde_json::to_vec(&message).unwrap();
                assert_eq!(plain_answer(&message).is_some(), by_hand, "{message:?}");
                assert_eq!(
                    String::from_utf8(encoded(&message)).unwrap(),
                    String::from_utf8(serde).unwrap()
                );
            }
        }
        let error = ServerJsonRpcMessage::error(
            ErrorData::internal_error("x", None),
            Some(RequestId::Number(1)),
        );
        assert!(plain_answer(&error).is_none(), "an error is serde's");
    }
}
