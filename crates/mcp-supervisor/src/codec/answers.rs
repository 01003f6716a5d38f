//! An upstream's answer, read: the data of an event-stream event, and the
//! JSON-RPC message in it. The usual `tools/call` answer is read by hand
//! ([`plain_tool_answer`], its structured content kept as text:
//! `crate::tool_answer`), then straight into its type by serde
//! ([`tool_answer`]), and anything else as rmcp reads it; the tests hold the
//! hand reading to the straight one, and the straight one to rmcp's.

use rmcp::model::{RequestId, ServerJsonRpcMessage, ServerResult};
use sse_stream::Sse;

use super::json_scan::Scan;
use crate::tool_answer::{Message, ToolAnswer};

/// The JSON-RPC message of an event's `data`, as [`read_message`] reads it,
/// as rmcp's type.
pub(crate) async fn read_event(data: String) -> Option<ServerJsonRpcMessage> {
    read_message(data).await.map(Message::into_rmcp)
}

/// The JSON-RPC message of an event's `data`, read as [`message`] reads
/// it: here if it is small, else on a blocking thread (a large answer's
/// reading would hold the thread every connection and client shares).
/// `None` (skipped, as rmcp skips it) when it is not JSON-RPC.
pub(crate) async fn read_message(data: String) -> Option<Message> {
    if data.len() < crate::heavy::HEAVY_BYTES {
        return skipped_unless_read(message(data.as_bytes()));
    }
    skipped_unless_read(crate::heavy::decode(data.into_bytes(), message).await)
}

/// A message read, or an event that is not JSON-RPC skipped, as rmcp does.
fn skipped_unless_read<T>(read: serde_json::Result<T>) -> Option<T> {
    read.inspect_err(|error| tracing::debug!(%error, "skipping an event that is not JSON-RPC"))
        .ok()
}

/// An answer, sent as JSON or as an event's data: the usual tool answer by
/// hand when it plainly is one (its structured content kept as text), else
/// straight into its type, else as rmcp reads it; what is not JSON-RPC is
/// an error, as rmcp's reading tells it.
pub(crate) fn message(body: &[u8]) -> serde_json::Result<Message> {
    let Ok(data) = std::str::from_utf8(body) else {
        return serde_json::from_slice(body).map(Message::Rmcp);
    };
    if let Some(plain) = plain_tool_answer(data) {
        return Ok(plain);
    }
    match tool_answer(data) {
        Some(straight) => Ok(Message::Rmcp(straight)),
        None => serde_json::from_slice(body).map(Message::Rmcp),
    }
}

/// The data of an event that carries JSON-RPC (blank and `message` events,
/// as rmcp reads them).
pub(crate) fn payload(event: Sse) -> Option<String> {
    if !matches!(event.event.as_deref(), None | Some("" | "message")) {
        return None;
    }
    event.data.filter(|data| !data.is_empty())
}

/// `data` read as a `tools/call` result, if that is what it is: the common
/// answer, parsed straight into its type. Read as rmcp reads a message, it
/// is buffered and tried against each type of two untagged unions in turn
/// (the message kinds, then about twenty result types ahead of
/// `CallToolResult`), a failed attempt building an error message each time:
/// more CPU than the rest of the answer's way through the gateway. Taken
/// only for a result whose fields are all `CallToolResult`'s, which no
/// type ahead of it accepts (or rmcp could not call tools at all); anything
/// else is read as rmcp reads it. One pass over `data`: the result's fields
/// are read as rmcp's `CallToolResult` reads them, with its two checks (a
/// `resultType` other than `complete` is not one; nor is a result with none
/// of `content`, `structuredContent` and `isError`).
fn tool_answer(data: &str) -> Option<ServerJsonRpcMessage> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Answer {
        jsonrpc: rmcp::model::JsonRpcVersion2_0,
        #[serde(deserialize_with = "crate::ids::id")]
        id: RequestId,
        result: Fields,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Fields {
        #[serde(default)]
        result_type: Option<rmcp::model::ResultType>,
        content: Option<Vec<Block>>,
        /// A present `null` is kept, as rmcp keeps it.
        #[serde(default, deserialize_with = "present")]
        structured_content: Option<serde_json::Value>,
        is_error: Option<bool>,
        #[serde(rename = "_meta")]
        meta: Option<rmcp::model::MetaObject>,
    }
    fn present<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<serde_json::Value>, D::Error> {
        serde::Deserialize::deserialize(deserializer).map(Some)
    }
    let Answer {
        jsonrpc,
        id,
        result: fields,
    } = serde_json::from_str(data).ok()?;
    if fields
        .result_type
        .as_ref()
        .is_some_and(|result_type| !result_type.is_complete())
        || (fields.content.is_none()
            && fields.structured_content.is_none()
            && fields.is_error.is_none())
    {
        return None;
    }
    let mut result = rmcp::model::CallToolResult::default();
    result.result_type = fields.result_type;
    result.content = fields
        .content
        .map(|blocks| blocks.into_iter().map(|block| block.0).collect())
        .unwrap_or_default();
    result.structured_content = fields.structured_content;
    result.is_error = fields.is_error;
    result.meta = fields.meta;
    Some(ServerJsonRpcMessage::Response(
        rmcp::model::JsonRpcResponse {
            jsonrpc,
            id,
            result: ServerResult::CallToolResult(result),
        },
    ))
}

/// `data` read by hand, when the hand reading answers, beside serde's
/// reading (as `Debug` text), for the fuzz target `codec`.
#[cfg(feature = "twins")]
pub(crate) fn twins(data: &str) -> Option<(String, Option<String>)> {
    let plain = plain_tool_answer(data)?.into_rmcp();
    Some((
        format!("{plain:?}"),
        tool_answer(data).map(|answer| format!("{answer:?}")),
    ))
}

/// `data` read by hand and written for the client by hand (its structured
/// content as it came), beside `data` read and written by serde, each read
/// back as JSON; `None` when the hand reading does not answer, or rmcp's
/// does not read it. For the fuzz target `codec`.
#[cfg(feature = "twins")]
pub(crate) fn passed_twins(data: &str) -> Option<(serde_json::Value, serde_json::Value)> {
    let read_back = |bytes: &[u8]| {
        if memchr::memchr2(b'\n', b'\r', bytes).is_some() {
            // It would cut an event stream's `data:` line.
            return serde_json::Value::String("a line break".to_owned());
        }
        serde_json::from_slice(bytes)
            .unwrap_or_else(|error| serde_json::Value::String(format!("not JSON: {error}")))
    };
    let hand = plain_tool_answer(data)?;
    let rmcp: ServerJsonRpcMessage = serde_json::from_str(data).ok()?;
    Some((
        read_back(&super::reply::encoded(&hand)),
        read_back(&serde_json::to_vec(&rmcp).ok()?),
    ))
}

/// `data` read as the usual tool answer, when it plainly is one: text
/// blocks (`type` and `text` only), structured content (the SDKs' typed
/// tools send both), `isError`, `resultType: complete`, `_meta`, each once, read by
/// hand (`json_scan`) for what [`tool_answer`] costs through serde
/// (docs/DECISIONS.md #142). Its structured content is kept as text when
/// every reader reads it alike (`json_check::value`, docs/DECISIONS.md
/// #184), else read into a tree. `None` for anything else, which
/// [`tool_answer`] then reads.
fn plain_tool_answer(data: &str) -> Option<Message> {
    let mut scan = Scan::new(data.as_bytes());
    let (mut jsonrpc, mut id, mut result) = (false, None, None);
    scan.object(|scan, key| {
        match key {
            b"jsonrpc" => scan.literal_once(&mut jsonrpc, b"2.0")?,
            b"id" if id.is_none() => id = Some(scan.id()?),
            b"result" if result.is_none() => result = Some(plain_tool_result(scan)?),
            _ => return None,
        }
        Some(())
    })?;
    scan.end()?;
    let (true, Some(id), Some(result)) = (jsonrpc, id, result) else {
        return None;
    };
    Some(Message::Tool(id, result))
}

/// A tool's result of text blocks, read by [`plain_tool_answer`].
fn plain_tool_result(scan: &mut Scan<'_>) -> Option<ToolAnswer> {
    let mut result = rmcp::model::CallToolResult::default();
    let (mut content, mut complete, mut meta) = (None, false, false);
    let (mut structured, mut kept) = (false, None);
    scan.object(|scan, key| {
        match key {
            // Its `_meta` (a 2026-07-28 SDK's server info, say), kept.
            b"_meta" if !std::mem::replace(&mut meta, true) => {
                result.meta = serde_json::from_str(scan.value_text()?.get()).ok()?;
            }
            b"content" if content.is_none() => {
                let mut blocks = Vec::new();
                scan.array(|scan| {
                    blocks.push(plain_text_block(scan)?);
                    Some(())
                })?;
                content = Some(blocks);
            }
            b"structuredContent" if !std::mem::replace(&mut structured, true) => {
                // Kept whatever it is, `null` too (as rmcp keeps it); as
                // text when it can be passed on as it is.
                let raw = scan.value_text()?;
                if passes_as_text(raw.get()) {
                    kept = Some(raw.to_owned());
                } else {
                    result.structured_content = Some(serde_json::from_str(raw.get()).ok()?);
                }
            }
            b"isError" if result.is_error.is_none() => result.is_error = Some(scan.boolean()?),
            b"resultType" => scan.literal_once(&mut complete, b"complete")?,
            _ => return None,
        }
        Some(())
    })?;
    // rmcp's check: a result has content, structured content or `isError`.
    if content.is_none() && !structured && result.is_error.is_none() {
        return None;
    }
    result.content = content.unwrap_or_default();
    result.result_type = complete.then_some(rmcp::model::ResultType::COMPLETE);
    Some(ToolAnswer::new(result, kept))
}

/// Whether structured content (one JSON value) may pass to the client as
/// the upstream wrote it: every reader reads it alike (`json_check::value`),
/// and it breaks no line. An answer may go out as an event stream's `data:`
/// line, which a line break would cut; JSON has one only as whitespace
/// between tokens (a string escapes it), so a value written over several
/// lines is read into a tree and written again on one.
fn passes_as_text(value: &str) -> bool {
    memchr::memchr2(b'\n', b'\r', value.as_bytes()).is_none()
        && super::json_check::value(value).is_ok()
}

/// A text block with nothing but `type` and `text`.
fn plain_text_block(scan: &mut Scan<'_>) -> Option<rmcp::model::ContentBlock> {
    let (mut text, mut typed) = (None, false);
    scan.object(|scan, key| {
        match key {
            b"type" => scan.literal_once(&mut typed, b"text")?,
            b"text" if text.is_none() => text = Some(scan.string()?),
            _ => return None,
        }
        Some(())
    })?;
    let text = text.filter(|_| typed)?;
    Some(rmcp::model::ContentBlock::Text(
        rmcp::model::TextContent::new(text),
    ))
}

/// A content block of a tool's answer. rmcp reads every block as a tagged
/// union, buffering its fields to find its `type` first (the largest part
/// of reading a short answer); here a block is read in one pass: a text
/// block, the common one, straight into rmcp's `TextContent` with the
/// fields rmcp reads for it (others ignored, as rmcp ignores them), and any
/// other block from the fields read, as rmcp reads it.
struct Block(rmcp::model::ContentBlock);

impl<'de> serde::Deserialize<'de> for Block {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BlockFields)
    }
}

/// A block's key: the two a text block is told by, or any other.
enum BlockKey {
    Type,
    Text,
    Other(String),
}

impl<'de> serde::Deserialize<'de> for BlockKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Named;
        impl serde::de::Visitor<'_> for Named {
            type Value = BlockKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<BlockKey, E> {
                Ok(match key {
                    "type" => BlockKey::Type,
                    "text" => BlockKey::Text,
                    other => BlockKey::Other(other.to_owned()),
                })
            }
        }
        deserializer.deserialize_identifier(Named)
    }
}

struct BlockFields;

impl<'de> serde::de::Visitor<'de> for BlockFields {
    type Value = Block;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a content block")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
        use serde::de::Error;
        use serde_json::Value;
        let (mut kind, mut text) = (None::<Value>, None::<Value>);
        let mut others = serde_json::Map::new();
        while let Some(key) = map.next_key::<BlockKey>()? {
            match key {
                BlockKey::Type if kind.is_some() => return Err(A::Error::duplicate_field("type")),
                BlockKey::Type => kind = Some(map.next_value()?),
                BlockKey::Text if text.is_some() => return Err(A::Error::duplicate_field("text")),
                BlockKey::Text => text = Some(map.next_value()?),
                BlockKey::Other(key) => {
                    let value = map.next_value()?;
                    if others.contains_key(&key) {
                        return Err(A::Error::custom(format!("duplicate field `{key}`")));
                    }
                    others.insert(key, value);
                }
            }
        }
        if let (Some(Value::String(tag)), Some(Value::String(text))) = (&kind, &mut text)
            && tag == "text"
        {
            let mut content = rmcp::model::TextContent::new(std::mem::take(text));
            let mut take = |field: &str| others.remove(field).unwrap_or(Value::Null);
            content.meta = serde_json::from_value(take("_meta")).map_err(A::Error::custom)?;
            content.annotations =
                serde_json::from_value(take("annotations")).map_err(A::Error::custom)?;
            return Ok(Block(rmcp::model::ContentBlock::Text(content)));
        }
        others.extend(kind.map(|kind| ("type".to_owned(), kind)));
        others.extend(text.map(|text| ("text".to_owned(), text)));
        serde_json::from_value(Value::Object(others))
            .map(Block)
            .map_err(A::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{RequestId, ServerJsonRpcMessage, ServerResult};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_answer_read_straight_is_what_rmcp_reads() {
        let answers = [
            json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hi"}]}}),
            json!({"jsonrpc": "2.0", "id": "s", "result": {"content": [], "isError": true,
                "structuredContent": {"n": 1}, "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/cache": {"ttlMs": 5}}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": [1, 2]}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"structuredContent": null}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"isError": false, "resultType": null}}),
            json!({"jsonrpc": "2.0", "id": 4, "result": {"_meta": {"k": "v"}, "content": [
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "t"}}]}}),
            // Text blocks read straight, among others, with what rmcp keeps
            // of them (and ignores).
            json!({"jsonrpc": "2.0", "id": 5, "result": {"content": [
                {"text": "type last, \"escaped\" é", "type": "text"},
                {"type": "text", "text": "t", "annotations": {"audience": ["user"],
                    "priority": 0.5}, "_meta": {"m": 1}, "unknown": [1]},
                {"type": "resource_link", "uri": "file:///b", "name": "b"},
                {"type": "text", "text": ""}]}}),
        ];
        for answer in answers {
            let data = answer.to_string();
            let straight = tool_answer(&data).expect("read straight");
            let rmcp: ServerJsonRpcMessage = serde_json::from_str(&data).unwrap();
            assert_eq!(
                serde_json::to_value(straight).unwrap(),
                serde_json::to_value(rmcp).unwrap(),
                "{data}"
            );
        }
        // Anything else is left to rmcp's reading.
        let others = [
            json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
                "inputRequests": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "task",
                "task": {"taskId": "t"}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "tools": []}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"_meta": {"k": "v"}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}, "extra": 1}),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}}),
            // A block neither rmcp nor the straight reading takes.
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text"}]}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "video"}]}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": 1}]}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "a",
                "_meta": 1}]}}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1}}),
        ];
        for other in others {
            assert!(tool_answer(&other.to_string()).is_none(), "{other}");
        }
        // A field twice in a block is not read straight: rmcp's reading of
        // the message decides.
        for twice in [
            r#"{"type":"text","text":"a","text":"b"}"#,
            r#"{"type":"text","type":"text","text":"a"}"#,
            r#"{"type":"text","text":"a","_meta":{},"_meta":{}}"#,
        ] {
            let data = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{twice}]}}}}"#);
            assert!(tool_answer(&data).is_none(), "{twice}");
        }
    }

    /// A large event is read off the thread, to what a small one is read
    /// to; a large one that is not JSON-RPC is skipped.
    #[tokio::test]
    async fn a_large_event_is_read_as_a_small_one() {
        let pad: Vec<_> = (0..40_000)
            .map(|k| json!({"k": k, "v": "abcdefgh"}))
            .collect();
        let answer = json!({"jsonrpc": "2.0", "id": 9, "result": {
            "content": [{"type": "text", "text": "t".repeat(1000)}],
            "structuredContent": {"pad": pad}, "isError": false}});
        let data = answer.to_string();
        assert!(data.len() >= crate::heavy::HEAVY_BYTES);
        let read_off = read_event(data.clone()).await.expect("read");
        assert_eq!(
            format!("{read_off:?}"),
            format!("{:?}", message(data.as_bytes()).unwrap().into_rmcp())
        );
        assert!(read_event(format!("[{data}")).await.is_none());
        assert!(read_event("{}".to_owned()).await.is_none());
    }

    /// An answer sent as JSON is read as an event's data is, to what rmcp
    /// reads; a body that is not JSON-RPC is an error.
    #[test]
    fn an_answer_sent_as_json_is_read_as_rmcp_reads_it() {
        for body in [
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "a"}]}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"pad": [{"k": 1}]}, "isError": false}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "no"}}),
        ] {
            let body = body.to_string();
            let rmcp: ServerJsonRpcMessage = serde_json::from_str(&body).unwrap();
            assert_eq!(
                serde_json::to_value(message(body.as_bytes()).unwrap().into_rmcp()).unwrap(),
                serde_json::to_value(rmcp).unwrap()
            );
        }
        for not_json_rpc in [&b"{}"[..], b"[1]", b"\xff", b""] {
            assert!(message(not_json_rpc).is_err());
        }
    }

    /// The usual tool answers are read by hand, as [`tool_answer`] reads
    /// them; every single-byte change to them is read so too, or left to
    /// it.
    #[test]
    fn a_plain_tool_answer_is_read_by_hand_as_straight() {
        let agreed = |data: &str| {
            let plain = format!("{:?}", plain_tool_answer(data)?.into_rmcp());
            assert_eq!(
                Some(plain.clone()),
                tool_answer(data).map(|answer| format!("{answer:?}")),
                "{data}"
            );
            Some(plain)
        };
        let usual = [
            // rmcp's server's answer to a tool that returns a `String`.
            serde_json::to_string(&ServerJsonRpcMessage::response(
                ServerResult::CallToolResult(rmcp::model::CallToolResult::success(vec![
                    rmcp::model::ContentBlock::text("hello"),
                ])),
                RequestId::Number(12),
            ))
            .unwrap(),
            r#" {"result": {"resultType":"complete", "isError" : true, "content":[ {"text":"a\n\"é\u00e9","type":"text"} , {"type":"text","text":""}]},"id":"x","jsonrpc":"2.0"} "#.to_owned(),
            r#"{"jsonrpc":"2.0","id":-3,"result":{"content":[]}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":3,"result":{"isError":false}}"#.to_owned(),
            // FastMCP's answer to a typed tool: text and structured content.
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"{\n  \"n\": 1.5\n}"}],"structuredContent":{"n":1.5,"a":[true,null,"x"]},"isError":false}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":4,"result":{"structuredContent":null}}"#.to_owned(),
            // The TypeScript SDK's 2026-07-28 answer.
            r#"{"result":{"content":[{"type":"text","text":"3"}],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"ts","version":"1.0.0"}}},"jsonrpc":"2.0","id":2}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":5,"result":{"content":[],"_meta":null}}"#.to_owned(),
        ];
        let mut read_here = 0;
        for data in &usual {
            assert!(agreed(data).is_some(), "{data} was not read by hand");
            for variant in crate::codec::json_scan::mutations(data.as_bytes()) {
                if let Ok(variant) = String::from_utf8(variant) {
                    read_here += usize::from(agreed(&variant).is_some());
                }
            }
        }
        assert!(read_here > 100, "{read_here}");
        // Structured content every reader reads alike is kept as the
        // upstream wrote it; any other (a key twice, an integer beyond 64
        // bits) is read into a tree, as the straight reading reads it.
        let kept = |data: &str| match plain_tool_answer(data) {
            Some(Message::Tool(_, answer)) => answer.parts().1.map(|raw| raw.get().to_owned()),
            other => panic!("{data}: {other:?}"),
        };
        for (structured, as_text) in [
            (r#"{ "n" : 1.5e0, "a":[true,null,"\u00e9"]}"#, true),
            ("null", true),
            ("[1,2]", true),
            (r#"{"a":1,"a":2}"#, false),
            // Written over lines, as Python's `json.dumps(indent=2)` writes.
            ("{\n  \"a\": [\r\n1]\n}", false),
            ("{\"a\":\"\\n\"}", true),
            (r#"{"a":123456789012345678901234567890}"#, false),
        ] {
            let data = format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[],"structuredContent":{structured}}}}}"#
            );
            assert!(agreed(&data).is_some(), "{data}");
            assert_eq!(kept(&data).is_some(), as_text, "{data}");
            if as_text {
                assert_eq!(kept(&data).as_deref(), Some(structured));
            }
        }
        // What it does not plainly know is left to the straight reading.
        for other in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{},"structuredContent":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a","_meta":{}}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","data":"","mimeType":"a"}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":{},"_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":{"content":[]}}"#,
        ] {
            assert!(plain_tool_answer(other).is_none(), "{other}");
        }
        // Structured content or `_meta` nested deep enough that serde's
        // limit, counted from the message, may refuse it: not by hand.
        let deep = format!("{}{}", "[".repeat(126), "]".repeat(126));
        for field in ["structuredContent", "_meta"] {
            let data = format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[],"{field}":{{"a":{deep}}}}}}}"#
            );
            assert!(plain_tool_answer(&data).is_none(), "{field}");
        }
    }
}
