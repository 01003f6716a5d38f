//! An answer written for a client: the usual `tools/call` answer, a tool's
//! text blocks, by hand (`write_plain`), anything else by serde, its
//! twin (docs/DECISIONS.md #143); and an answer as an event of an event
//! stream. The test holds the hand-written bytes to serde's.

use bytes::Bytes;
use rmcp::model::{CallToolResult, ContentBlock, RequestId, ServerJsonRpcMessage, ServerResult};
use serde_json::value::RawValue;

use crate::{heavy::Encode, tool_answer::Message};

/// `message` as JSON: the usual answer, a tool's text blocks, written
/// here (rmcp's types serialize it through serde's derive at several times
/// the cost); anything else by serde (docs/DECISIONS.md #143).
pub(crate) fn encoded(message: &impl Encode) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.size_hint());
    match message.encode(&mut out) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

/// An answer to a client writes itself as [`encoded`] writes it, for
/// `heavy::encode` (a large one is written, and dropped, off the thread).
impl Encode for ServerJsonRpcMessage {
    fn encode<W: std::io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
        match plain(self) {
            Some((id, result)) => write_plain(id, (result, None), writer),
            None => serde_json::to_writer(writer, self),
        }
    }

    /// A tool answer's texts and room for the rest.
    fn size_hint(&self) -> usize {
        let ServerJsonRpcMessage::Response(response) = self else {
            return 0;
        };
        let ServerResult::CallToolResult(result) = &response.result else {
            return 0;
        };
        texts_size(result)
    }
}

/// A tool's answer with its structured content kept as text is written
/// with that text as it came (docs/DECISIONS.md #184), by hand when its
/// blocks are plain text, else as rmcp's type.
impl Encode for Message {
    fn encode<W: std::io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
        match self {
            Message::Rmcp(message) => message.encode(writer),
            Message::Tool(id, answer) => {
                let (result, structured) = answer.parts();
                if plain_blocks(result) {
                    write_plain(id, (result, structured), writer)
                } else {
                    self.clone().into_rmcp().encode(writer)
                }
            }
        }
    }

    fn size_hint(&self) -> usize {
        match self {
            Message::Rmcp(message) => message.size_hint(),
            Message::Tool(_, answer) => {
                let (result, structured) = answer.parts();
                texts_size(result) + structured.map_or(0, |raw| raw.get().len() + 24)
            }
        }
    }
}

/// About how long a tool answer's JSON is: its texts and room for the rest.
fn texts_size(result: &CallToolResult) -> usize {
    let texts = result.content.iter().filter_map(ContentBlock::as_text);
    texts.map(|text| text.text.len() + 32).sum::<usize>() + 96
}

/// A tool's answer of plain text blocks, structured content and `_meta`,
/// written as serde writes it (`encoded`'s test holds the two to the same
/// bytes); `None` for any other message. What [`encoded`] writes for it,
/// apart, for the tests and the fuzz target.
#[cfg(any(test, feature = "twins"))]
pub(crate) fn plain_answer(message: &ServerJsonRpcMessage) -> Option<Vec<u8>> {
    let (id, result) = plain(message)?;
    let mut out = Vec::with_capacity(message.size_hint());
    write_plain(id, (result, None), &mut out).ok()?;
    Some(out)
}

/// The id and result of a tool's answer written by hand: text blocks with
/// nothing but their text. The fields are those rmcp 3.11's
/// `CallToolResult` and `TextContent` have (both `non_exhaustive`): one a
/// later rmcp adds must be added here, or the answer taken only when it is
/// unset.
fn plain(message: &ServerJsonRpcMessage) -> Option<(&RequestId, &CallToolResult)> {
    let ServerJsonRpcMessage::Response(response) = message else {
        return None;
    };
    let ServerResult::CallToolResult(result) = &response.result else {
        return None;
    };
    plain_blocks(result).then_some((&response.id, result))
}

/// Whether a tool's answer holds only text blocks with nothing but text.
fn plain_blocks(result: &CallToolResult) -> bool {
    result.content.iter().all(|block| {
        matches!(block, ContentBlock::Text(text) if text.meta.is_none() && text.annotations.is_none())
    })
}

/// Writes a [`plain`] answer, field by field as serde writes it; its
/// structured content as the text given, when it is kept as text.
fn write_plain<W: std::io::Write>(
    id: &RequestId,
    (result, kept): (&CallToolResult, Option<&RawValue>),
    out: &mut W,
) -> serde_json::Result<()> {
    fn put<W: std::io::Write>(out: &mut W, bytes: &[u8]) -> serde_json::Result<()> {
        out.write_all(bytes).map_err(serde_json::Error::io)
    }
    put(out, br#"{"jsonrpc":"2.0","id":"#)?;
    serde_json::to_writer(&mut *out, id)?;
    put(out, br#","result":{"#)?;
    if let Some(result_type) = &result.result_type {
        put(out, br#""resultType":"#)?;
        serde_json::to_writer(&mut *out, result_type)?;
        put(out, b",")?;
    }
    put(out, br#""content":["#)?;
    let texts = result.content.iter().filter_map(ContentBlock::as_text);
    for (at, text) in texts.enumerate() {
        if at > 0 {
            put(out, b",")?;
        }
        put(out, br#"{"type":"text","text":"#)?;
        serde_json::to_writer(&mut *out, &text.text)?;
        put(out, b"}")?;
    }
    put(out, b"]")?;
    if let Some(raw) = kept {
        put(out, br#","structuredContent":"#)?;
        put(out, raw.get().as_bytes())?;
    } else if let Some(structured) = &result.structured_content {
        put(out, br#","structuredContent":"#)?;
        serde_json::to_writer(&mut *out, structured)?;
    }
    match result.is_error {
        Some(true) => put(out, br#","isError":true"#)?,
        Some(false) => put(out, br#","isError":false"#)?,
        None => {}
    }
    if let Some(meta) = &result.meta {
        put(out, br#","_meta":"#)?;
        serde_json::to_writer(&mut *out, meta)?;
    }
    put(out, b"}}")
}

/// `message` as one event of an event stream (`data: …`, a blank line).
pub(crate) fn event(message: &impl Encode) -> Bytes {
    event_of(&encoded(message))
}

/// A message's JSON as one event of an event stream.
pub(crate) fn event_of(json: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(json.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(json);
    event.extend_from_slice(b"\n\n");
    event.into()
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ErrorData, RequestId};

    use super::*;

    /// An answer encoded for `heavy::encode` (off the thread when large)
    /// is what [`encoded`] writes, by hand or by serde.
    #[tokio::test]
    async fn an_answer_encodes_itself_as_encoded_writes_it() {
        use rmcp::model::{CallToolResult, ContentBlock};
        let large = "\"x\"".repeat(crate::heavy::HEAVY_BYTES);
        let mut structured = CallToolResult::success(vec![ContentBlock::text("s")]);
        structured.structured_content = Some(serde_json::json!({"pad": [large.clone(), 1.5]}));
        let results = [
            CallToolResult::success(vec![ContentBlock::text("small")]),
            CallToolResult::success(vec![ContentBlock::text(large.clone())]),
            structured,
            CallToolResult::success(vec![ContentBlock::image(large, "image/png")]),
        ];
        for result in results {
            let message = ServerJsonRpcMessage::response(
                ServerResult::CallToolResult(result),
                RequestId::Number(3),
            );
            let written = encoded(&message);
            assert_eq!(crate::heavy::encode(message).await.unwrap(), written);
        }
    }

    /// A tool's answer with its structured content kept as text is written
    /// with that text as it came, and means what serde writes of the same
    /// answer read into a tree; with blocks the hand does not write, it is
    /// serde's, the tree read then.
    #[test]
    fn a_kept_answer_is_written_with_its_structured_content_as_it_came() {
        use rmcp::model::{CallToolResult, ContentBlock};
        use serde_json::value::RawValue;

        use crate::tool_answer::ToolAnswer;
        let structured = r#"{ "b" : [1.5e0, null, "\u00e9"], "a": {}}"#;
        for blocks in [
            vec![ContentBlock::text("t")],
            vec![ContentBlock::image("AA==", "image/png")],
        ] {
            let raw = RawValue::from_string(structured.to_owned()).unwrap();
            let answer = ToolAnswer::new(CallToolResult::success(blocks.clone()), Some(raw));
            let message = Message::Tool(RequestId::Number(4), answer);
            let written = String::from_utf8(encoded(&message)).unwrap();
            let serde = serde_json::to_string(&message.clone().into_rmcp()).unwrap();
            let read = |json: &str| serde_json::from_str::<serde_json::Value>(json).unwrap();
            assert_eq!(read(&written), read(&serde), "{written}");
            let plain = matches!(blocks[0], ContentBlock::Text(_));
            assert_eq!(written.contains(structured), plain, "{written}");
            assert!(message.size_hint() > structured.len());
        }
    }

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
