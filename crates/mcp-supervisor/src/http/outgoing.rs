//! A message to the upstream as JSON, written without rmcp's detour for a
//! `tools/call`.
//!
//! rmcp serializes a request's params by first turning them into a
//! `serde_json::Value` (to merge the `_meta` its extensions carry with the
//! params' own), then writing that tree: a whole copy of the arguments, and
//! on the gateway hop the largest single cost of encoding a call
//! (docs/DECISIONS.md #108). Owning the message, [`Outgoing`] makes the same
//! merge on the `_meta` map alone, with rmcp's precedence (the params' own
//! `_meta` first, then the extensions' legacy [`MetaObject`], then their
//! [`RequestMetaObject`], each later one winning a key), and writes the
//! params with their own `Serialize`. The JSON means the same; only the
//! order of the params' keys may differ. Every other message is rmcp's.

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, JsonObject,
    JsonRpcMessage, JsonRpcRequest, MetaObject, RequestId, RequestMetaObject,
};
use std::{io, sync::Arc};

use serde_json::value::RawValue;

use crate::{arguments::SharedArguments, heavy::Encode};

/// A message on its way to the upstream.
pub(super) enum Outgoing {
    /// A `tools/call`, written by us.
    Call(Call),
    /// Anything else, written by rmcp.
    Other(ClientJsonRpcMessage),
}

/// A `tools/call`: its `_meta` merged from its params and extensions (but
/// for the session's [`Stamp`], written as it was encoded), its arguments in
/// its params or still shared with the request it was made from.
pub(super) struct Call {
    id: RequestId,
    /// Without their `_meta`, which is `meta` and `stamp`.
    params: CallToolRequestParams,
    meta: Option<JsonObject>,
    stamp: Option<Stamp>,
    shared: Option<SharedArguments>,
}

impl From<ClientJsonRpcMessage> for Outgoing {
    fn from(message: ClientJsonRpcMessage) -> Self {
        match message {
            JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: ClientRequest::CallToolRequest(mut call),
                ..
            }) => {
                let stamp = call.extensions.remove::<Stamp>();
                let shared = call.extensions.remove::<SharedArguments>();
                let (params, meta) = merged(call, stamp.as_ref());
                Outgoing::Call(Call {
                    id,
                    params,
                    meta,
                    stamp,
                    shared,
                })
            }
            other => Outgoing::Other(other),
        }
    }
}

/// `call`'s params without their `_meta`, and the `_meta` they and the
/// call's extensions carry merged, as rmcp merges them on the wire. A
/// `stamp` is merged where rmcp's client
/// puts its context, at the start of the extensions' `RequestMetaObject`:
/// it wins over the params' own `_meta` and the legacy `MetaObject`, and
/// loses to what the `RequestMetaObject` holds.
fn merged(
    call: CallToolRequest,
    stamp: Option<&Stamp>,
) -> (CallToolRequestParams, Option<JsonObject>) {
    let CallToolRequest {
        mut params,
        mut extensions,
        ..
    } = call;
    let own = params.meta.take().map(|meta| meta.0.0);
    let legacy = extensions.remove::<MetaObject>().map(|meta| meta.0);
    let typed = extensions
        .remove::<RequestMetaObject>()
        .map(|meta| meta.0.0);
    if legacy.is_none() && typed.is_none() && stamp.is_none() {
        return (params, own);
    }
    let mut meta: JsonObject = own.unwrap_or_default();
    meta.extend(legacy.into_iter().flatten());
    for (key, _) in stamp.iter().flat_map(|stamp| stamp.entries.iter()) {
        meta.remove(key);
    }
    meta.extend(typed.into_iter().flatten());
    (params, Some(meta))
}

/// `_meta` entries encoded once, for every request of a session: a
/// 2026-07-28 client's context (protocol version, client info and
/// capabilities), a few hundred bytes of JSON that would otherwise be
/// copied into each call's `_meta` and written again. Carried in a call's
/// extensions (see `session::stateless`).
#[derive(Debug, Clone)]
pub(crate) struct Stamp {
    entries: Arc<[(String, Box<RawValue>)]>,
    /// The entries as written in an object: `"key":value,…`.
    written: Arc<str>,
}

impl Stamp {
    pub(crate) fn new(meta: &RequestMetaObject) -> serde_json::Result<Self> {
        let entries = meta
            .0
            .0
            .iter()
            .map(|(key, value)| Ok((key.clone(), serde_json::value::to_raw_value(value)?)))
            .collect::<serde_json::Result<Vec<_>>>()?;
        let mut written = Vec::new();
        for (key, value) in &entries {
            if !written.is_empty() {
                written.push(b',');
            }
            serde_json::to_writer(&mut written, key)?;
            written.push(b':');
            written.extend_from_slice(value.get().as_bytes());
        }
        Ok(Stamp {
            entries: entries.into(),
            written: String::from_utf8(written)
                .map_err(serde::ser::Error::custom)?
                .into(),
        })
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(key, _)| key.as_str())
    }
}

impl Encode for Outgoing {
    fn encode<W: io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
        match self {
            Outgoing::Call(call) => call.encode(writer),
            Outgoing::Other(message) => serde_json::to_writer(writer, message),
        }
    }
}

impl Call {
    /// `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":…}`, written
    /// in pieces: the params' `_meta` (its merged map, then the stamp's
    /// entries the map does not hold, as encoded), the params' own fields
    /// by their `Serialize`, and the arguments they share.
    fn encode<W: io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
        let raw =
            |writer: &mut W, bytes: &[u8]| writer.write_all(bytes).map_err(serde_json::Error::io);
        raw(writer, br#"{"jsonrpc":"2.0","id":"#)?;
        serde_json::to_writer(&mut *writer, &self.id)?;
        raw(writer, br#","method":"tools/call","params":{"#)?;
        // No `_meta` at all: none is written (an empty one is, as rmcp
        // writes it).
        let has_meta = self.meta.is_some() || self.stamp.is_some();
        if has_meta {
            raw(writer, br#""_meta":"#)?;
            self.encode_meta(writer)?;
        }
        let mut own = Inner::new(&mut *writer, has_meta);
        serde_json::to_writer(&mut own, &self.params)?;
        let comma = own.finish()?;
        // Only an attempt shares them, and it has none of its own.
        if let Some(shared) = &self.shared {
            raw(
                writer,
                if comma {
                    br#","arguments":"#
                } else {
                    br#""arguments":"#
                },
            )?;
            serde_json::to_writer(&mut *writer, shared)?;
        }
        raw(writer, b"}}")
    }

    fn encode_meta<W: io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
        let mut first = true;
        let mut next = |writer: &mut W| {
            let separator: &[u8] = if std::mem::take(&mut first) {
                b""
            } else {
                b","
            };
            writer.write_all(separator).map_err(serde_json::Error::io)
        };
        writer.write_all(b"{").map_err(serde_json::Error::io)?;
        for (key, value) in self.meta.iter().flatten() {
            next(writer)?;
            serde_json::to_writer(&mut *writer, key)?;
            writer.write_all(b":").map_err(serde_json::Error::io)?;
            serde_json::to_writer(&mut *writer, value)?;
        }
        if let Some(stamp) = &self.stamp {
            let held = |key: &str| self.meta.as_ref().is_some_and(|map| map.contains_key(key));
            if !stamp.keys().any(held) {
                if !stamp.written.is_empty() {
                    next(writer)?;
                    writer
                        .write_all(stamp.written.as_bytes())
                        .map_err(serde_json::Error::io)?;
                }
            } else {
                for (key, value) in stamp.entries.iter().filter(|(key, _)| !held(key)) {
                    next(writer)?;
                    serde_json::to_writer(&mut *writer, key)?;
                    writer.write_all(b":").map_err(serde_json::Error::io)?;
                    writer
                        .write_all(value.get().as_bytes())
                        .map_err(serde_json::Error::io)?;
                }
            }
        }
        writer.write_all(b"}").map_err(serde_json::Error::io)
    }
}

/// Writes a JSON object's members without its braces, after a comma when
/// something was written before them: the params' own fields, spliced into
/// the params object being written.
struct Inner<'w, W> {
    writer: &'w mut W,
    /// Whether a member was written before these.
    after: bool,
    /// The object's opening brace was seen.
    opened: bool,
    /// One of its members has been written.
    started: bool,
    /// The last byte seen, held back: the object's closing brace in the end.
    held: Option<u8>,
}

impl<'w, W: io::Write> Inner<'w, W> {
    fn new(writer: &'w mut W, after: bool) -> Self {
        Inner {
            writer,
            after,
            opened: false,
            started: false,
            held: None,
        }
    }

    /// Whether any member has been written now, these or those before.
    fn finish(self) -> serde_json::Result<bool> {
        match self.held {
            Some(b'}') => Ok(self.after || self.started),
            _ => Err(serde::ser::Error::custom("the params are not an object")),
        }
    }

    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        if !std::mem::replace(&mut self.started, true) && self.after {
            self.writer.write_all(b",")?;
        }
        self.writer.write_all(bytes)
    }
}

impl<W: io::Write> io::Write for Inner<'_, W> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.write_all(bytes).map(|()| bytes.len())
    }

    #[inline]
    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if !self.opened {
            let Some((b'{', rest)) = bytes.split_first() else {
                return Err(io::Error::other("the params are not an object"));
            };
            self.opened = true;
            bytes = rest;
        }
        let Some((&last, body)) = bytes.split_last() else {
            return Ok(());
        };
        if let Some(held) = self.held.take() {
            self.emit(&[held])?;
        }
        self.emit(body)?;
        self.held = Some(last);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{GetMeta, InputResponses, NumberOrString, ProgressToken};
    use serde_json::{Value, json, value::RawValue};

    use super::*;
    use crate::{
        arguments::{SharedRequest, arguments_of, attached},
        codec::json_check::Checked,
    };

    /// What `outgoing` writes, as text.
    fn text(outgoing: Outgoing) -> String {
        let mut bytes = Vec::new();
        outgoing.encode(&mut bytes).unwrap();
        String::from_utf8(bytes).unwrap()
    }

    /// What `outgoing` writes, read back.
    fn written(outgoing: Outgoing) -> Value {
        serde_json::from_str(&text(outgoing)).unwrap()
    }

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    /// A call as rmcp would put it on the wire, and as [`Outgoing`] does.
    fn both(call: CallToolRequest, id: RequestId) -> (Value, Value) {
        let message = ClientJsonRpcMessage::Request(JsonRpcRequest::new(
            id,
            ClientRequest::CallToolRequest(call),
        ));
        let rmcp = serde_json::to_value(&message).unwrap();
        let ours = written(Outgoing::from(message));
        (rmcp, ours)
    }

    #[test]
    fn a_call_means_what_rmcp_would_write() {
        let mut params = CallToolRequestParams::new("search").with_arguments(object(
            json!({"q": "x", "n": [1, 2.5, null], "nested": {"a": "é\"\n"}}),
        ));
        params.meta = Some(RequestMetaObject(MetaObject(object(
            json!({"progressToken": 7, "shared": "params", "only-params": true}),
        ))));
        params.request_state = Some("opaque".into());
        let mut responses = InputResponses::new();
        responses.insert("ask".into(), json!({"action": "decline"}));
        params.input_responses = Some(responses);
        let mut call = CallToolRequest::new(params);
        call.extensions.insert(MetaObject(object(
            json!({"shared": "legacy", "only-legacy": 1, "both-ext": "legacy"}),
        )));
        call.extensions.insert(RequestMetaObject(MetaObject(object(
            json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                   "both-ext": "typed"}),
        ))));
        let (rmcp, ours) = both(call, NumberOrString::Number(41));
        assert_eq!(ours, rmcp);
        // The precedence itself, not only agreement with rmcp.
        assert_eq!(ours["params"]["_meta"]["shared"], "legacy");
        assert_eq!(ours["params"]["_meta"]["both-ext"], "typed");
        assert_eq!(ours["params"]["_meta"]["only-params"], true);
        assert_eq!(ours["method"], "tools/call");
        assert_eq!(ours["jsonrpc"], "2.0");
    }

    #[test]
    fn bare_calls_and_string_ids_agree_too() {
        let (rmcp, ours) = both(
            CallToolRequest::new(CallToolRequestParams::new("echo")),
            NumberOrString::String("req-1".into()),
        );
        assert_eq!(ours, rmcp);
        assert!(ours["params"].get("_meta").is_none());
        assert!(ours["params"].get("arguments").is_none());

        let mut call = CallToolRequest::new(
            CallToolRequestParams::new("echo").with_arguments(object(json!({"text": "hi"}))),
        );
        call.extensions.insert(RequestMetaObject(MetaObject(object(
            json!({"progressToken": "p"}),
        ))));
        let (rmcp, ours) = both(call, NumberOrString::Number(1));
        assert_eq!(ours, rmcp);
        assert_eq!(ours["params"]["_meta"]["progressToken"], "p");
    }

    /// An attempt shares its request's arguments, writes them as the whole
    /// request would be written, and is whole again for rmcp.
    #[tokio::test]
    async fn an_attempt_writes_the_arguments_it_shares_without_copying_them() {
        let mut params = CallToolRequestParams::new("search")
            .with_arguments(object(json!({"q": "x", "n": [1, 2.5], "deep": {"a": "é"}})));
        params.request_state = Some("opaque".into());
        params.meta = Some(RequestMetaObject(MetaObject(object(json!({"own": 1})))));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let shared = SharedRequest::new(request.clone());
        let stamp = |request: &mut ClientRequest| {
            request
                .get_meta_mut()
                .set_progress_token(ProgressToken(NumberOrString::Number(9)));
        };
        let mut whole = request;
        stamp(&mut whole);
        let mut attempt = shared.attempt();
        stamp(&mut attempt);

        let (ClientRequest::CallToolRequest(call), ClientRequest::CallToolRequest(original)) =
            (&attempt, shared.shared().as_ref())
        else {
            unreachable!()
        };
        assert!(call.params.arguments.is_none(), "the arguments were copied");
        let Some(std::borrow::Cow::Borrowed(shared)) = arguments_of(call) else {
            panic!("not shared")
        };
        assert!(std::ptr::eq(
            shared,
            original.params.arguments.as_ref().unwrap()
        ));

        let wire = |request| {
            ClientJsonRpcMessage::Request(JsonRpcRequest::new(NumberOrString::Number(2), request))
        };
        let rmcp = serde_json::to_value(wire(whole.clone())).unwrap();
        let ours = written(Outgoing::from(wire(attempt.clone())));
        assert_eq!(ours, rmcp);
        assert_eq!(ours["params"]["arguments"]["deep"]["a"], "é");

        let again = attached(attempt).await.unwrap();
        let ClientRequest::CallToolRequest(again_call) = &again else {
            unreachable!()
        };
        assert!(again_call.extensions.get::<SharedArguments>().is_none());
        assert_eq!(
            serde_json::to_value(wire(again)).unwrap(),
            rmcp,
            "rmcp writes it whole"
        );
    }

    /// A client's arguments kept as sent are written as sent, and parsed
    /// only for rmcp.
    #[tokio::test]
    async fn raw_arguments_are_written_as_they_came() {
        let sent = r#"{"z":1.0,"a":[1e2, 12345678901234567890],"b":{"c":"é"}}"#;
        let raw = SharedArguments::from(
            Checked::new(RawValue::from_string(sent.to_owned()).unwrap()).unwrap(),
        );
        assert_eq!(
            Checked::new(RawValue::from_string("[1]".into()).unwrap()).err(),
            Some(crate::codec::json_check::Unreadable::NotAnObject)
        );
        let mut call = CallToolRequest::new(CallToolRequestParams::new("t"));
        call.extensions.insert(raw);
        let request = ClientRequest::CallToolRequest(call);
        let message = ClientJsonRpcMessage::Request(JsonRpcRequest::new(
            NumberOrString::Number(5),
            request.clone(),
        ));
        let written = text(Outgoing::from(message));
        assert!(
            written.contains(&format!(r#""arguments":{sent}"#)),
            "{written}"
        );
        let ClientRequest::CallToolRequest(whole) = attached(request).await.unwrap() else {
            unreachable!()
        };
        assert_eq!(whole.params.arguments.unwrap()["b"]["c"], "é");
    }

    /// A session's stamp, encoded once, writes what rmcp writes when its
    /// client merges its context into the request: over the params' own
    /// `_meta` and the legacy `MetaObject`, under what the request's
    /// `RequestMetaObject` holds (here another client's capabilities).
    #[test]
    fn an_encoded_stamp_means_what_rmcp_would_write() {
        let context = object(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "gw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        }));
        let stamp = RequestMetaObject(MetaObject(context.clone()));
        let mut params = CallToolRequestParams::new("t").with_arguments(object(json!({"a": 1})));
        params.meta = Some(RequestMetaObject(MetaObject(object(json!({
            "io.modelcontextprotocol/clientInfo": "params lose",
            "own": true,
        })))));
        let typed = object(json!({
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
            "progressToken": 3,
        }));
        let call = |stamped: bool| {
            let mut call = CallToolRequest::new(params.clone());
            call.extensions.insert(MetaObject(object(json!({
                "io.modelcontextprotocol/protocolVersion": "legacy loses",
            }))));
            let mut meta = RequestMetaObject::new();
            if stamped {
                call.extensions.insert(Stamp::new(&stamp).unwrap());
            } else {
                meta.extend(stamp.clone());
            }
            meta.0.0.extend(typed.clone());
            call.extensions.insert(meta);
            call
        };
        let (rmcp, _) = both(call(false), NumberOrString::Number(4));
        let message = ClientJsonRpcMessage::Request(JsonRpcRequest::new(
            NumberOrString::Number(4),
            ClientRequest::CallToolRequest(call(true)),
        ));
        let ours = written(Outgoing::from(message));
        assert_eq!(ours, rmcp);
        let meta = &ours["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "gw");
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({"sampling": {}})
        );
        assert_eq!(meta["own"], true);
    }

    /// The common call: a stamp none of whose keys the call's own `_meta`
    /// holds is written as it was encoded, in one piece, after the call's
    /// own entries; the params' fields follow, whether the arguments are in
    /// them or shared.
    #[test]
    fn a_stamp_the_call_does_not_touch_is_written_as_encoded() {
        let stamp = RequestMetaObject(MetaObject(object(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "gw \"q\"", "version": "1"},
        }))));
        let encoded = Stamp::new(&stamp).unwrap();
        for progress in [None, Some(8)] {
            let mut params =
                CallToolRequestParams::new("t").with_arguments(object(json!({"a": [1]})));
            params.request_state = Some("s".into());
            let mut call = CallToolRequest::new(params);
            call.extensions.insert(encoded.clone());
            let mut plain = CallToolRequest::new(call.params.clone());
            plain.extensions.insert(stamp.clone());
            if let Some(token) = progress {
                for call in [&mut call, &mut plain] {
                    let mut meta = call
                        .extensions
                        .remove::<RequestMetaObject>()
                        .unwrap_or_default();
                    meta.0.0.insert("progressToken".into(), json!(token));
                    call.extensions.insert(meta);
                }
            }
            let (rmcp, _) = both(plain, NumberOrString::Number(9));
            let message = ClientJsonRpcMessage::Request(JsonRpcRequest::new(
                NumberOrString::Number(9),
                ClientRequest::CallToolRequest(call),
            ));
            let text = text(Outgoing::from(message));
            assert!(text.contains(&*encoded.written), "{text}");
            let ours: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(ours, rmcp, "{text}");
            assert_eq!(ours["params"]["requestState"], "s");
            assert_eq!(ours["params"]["arguments"], json!({"a": [1]}));
        }
    }

    #[test]
    fn other_messages_are_written_by_rmcp() {
        let message = ClientJsonRpcMessage::Request(JsonRpcRequest::new(
            NumberOrString::Number(3),
            ClientRequest::ListToolsRequest(Default::default()),
        ));
        let rmcp = serde_json::to_string(&message).unwrap();
        let ours = text(Outgoing::from(message));
        assert_eq!(ours, rmcp);
    }
}
