//! Writing a request to the upstream: a `tools/call` by hand, anything
//! else by rmcp.
//!
//! rmcp serializes a request's params by first turning them into a
//! `serde_json::Value` (to merge the `_meta` its extensions carry with the
//! params' own), then writing that tree: a whole copy of the arguments, and
//! on the gateway hop the largest single cost of encoding a call
//! (docs/DECISIONS.md, "The fast path"). [`Outgoing`] writes a
//! [`ToolCall`]'s fields in place instead: its `_meta`, then the session's
//! [`Stamp`] for the keys that map does not hold, as encoded once; its
//! arguments as they are held (a client's raw JSON as it came). The JSON
//! means what rmcp's would; only the order of the params' keys may differ.
//! Its twin is rmcp's serialization of the same request
//! (`crate::twins::upstream_call`).

use std::{io, sync::Arc};

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonObject, JsonRpcMessage, JsonRpcRequest, ProgressToken,
    RequestId, RequestMetaObject,
};
use serde_json::value::RawValue;

use crate::{
    call::{ToolCall, UpstreamRequest},
    heavy::Encode,
};

/// A message on its way to the upstream.
#[derive(Clone)]
pub(crate) enum Outgoing {
    /// A `tools/call`, written by us.
    Call(CallMessage),
    /// Anything else, written by rmcp.
    Other(ClientJsonRpcMessage),
}

/// A `tools/call` as request `id`, with what its session stamps on it.
#[derive(Clone)]
pub(crate) struct CallMessage {
    id: RequestId,
    call: ToolCall,
    stamped: Stamped,
}

/// What a call carries beside its `_meta` once its session stamped it,
/// each written into its `_meta` as it is encoded: the session's client
/// context ([`Stamp`], 2026-07-28) and the attempt's progress token (which
/// wins over one the call's map holds; kept out of it, the map of a call
/// that holds nothing else is never made).
#[derive(Clone, Debug, Default)]
pub(crate) struct Stamped {
    pub(crate) context: Option<Stamp>,
    pub(crate) token: Option<ProgressToken>,
}

impl Outgoing {
    /// `request` as request `id`; a call with what its session `stamped`
    /// (any other request holds it in its `_meta`).
    pub(crate) fn request(request: UpstreamRequest, id: RequestId, stamped: Stamped) -> Self {
        match request {
            UpstreamRequest::Call(call) => Outgoing::Call(CallMessage { id, call, stamped }),
            UpstreamRequest::Relayed(request) => {
                Outgoing::Other(ClientJsonRpcMessage::request(request.into_request(), id))
            }
        }
    }

    /// Its `_meta` (where trace context is), if it is a request.
    pub(crate) fn meta(&self) -> Option<&JsonObject> {
        match self {
            Outgoing::Call(call) => call.call.meta.as_ref().map(|meta| &meta.0.0),
            Outgoing::Other(JsonRpcMessage::Request(request)) => {
                Some(&rmcp::model::GetMeta::get_meta(&request.request).0.0)
            }
            Outgoing::Other(_) => None,
        }
    }

    /// Whether an answer is awaited (it is a request).
    pub(crate) fn awaits_answer(&self) -> bool {
        matches!(
            self,
            Outgoing::Call(_) | Outgoing::Other(JsonRpcMessage::Request(_))
        )
    }

    /// The id of a `server/discover` request.
    pub(crate) fn discover_id(&self) -> Option<RequestId> {
        match self {
            Outgoing::Other(JsonRpcMessage::Request(request))
                if matches!(request.request, ClientRequest::DiscoverRequest(_)) =>
            {
                Some(request.id.clone())
            }
            _ => None,
        }
    }
}

impl From<ClientJsonRpcMessage> for Outgoing {
    /// A message rmcp's client sends: its calls written by us too.
    fn from(message: ClientJsonRpcMessage) -> Self {
        match message {
            JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: request @ ClientRequest::CallToolRequest(_),
                ..
            }) => Outgoing::request(request.into(), id, Stamped::default()),
            other => Outgoing::Other(other),
        }
    }
}

/// `_meta` entries encoded once, for every request of a session: a
/// 2026-07-28 client's context (protocol version, client info and
/// capabilities), a few hundred bytes of JSON that would otherwise be
/// copied into each call's `_meta` and written again
/// (`crate::session::direct`).
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

    /// Takes its keys out of `meta`, where it wins over what a call held
    /// before it was stamped (as rmcp's client merges its context).
    pub(crate) fn clear_from(&self, meta: &mut JsonObject) {
        for key in self.keys() {
            meta.remove(key);
        }
    }
}

impl Encode for Outgoing {
    fn encode<W: io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
        match self {
            Outgoing::Call(call) => call.encode(writer),
            Outgoing::Other(message) => serde_json::to_writer(writer, message),
        }
    }

    /// A call's raw arguments and room for the rest.
    fn size_hint(&self) -> usize {
        match self {
            Outgoing::Call(call) => call.call.arguments.raw_len() + 1024,
            Outgoing::Other(_) => 0,
        }
    }
}

/// The `_meta` key of a request's progress token.
const PROGRESS_TOKEN: &str = "progressToken";

fn raw<W: io::Write>(writer: &mut W, bytes: &[u8]) -> serde_json::Result<()> {
    writer.write_all(bytes).map_err(serde_json::Error::io)
}

impl CallMessage {
    /// `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":…}`, the
    /// params written field by field: `_meta` (the call's map, then the
    /// stamp's entries the map does not hold, as encoded), `name`,
    /// `arguments` as held, and an input round's fields.
    fn encode<W: io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
        let call = &self.call;
        raw(writer, br#"{"jsonrpc":"2.0","id":"#)?;
        serde_json::to_writer(&mut *writer, &self.id)?;
        raw(writer, br#","method":"tools/call","params":{"#)?;
        // No `_meta` at all: none is written (an empty one is, as rmcp
        // writes it).
        let stamped = &self.stamped;
        if call.meta.is_some() || stamped.context.is_some() || stamped.token.is_some() {
            raw(writer, br#""_meta":"#)?;
            self.encode_meta(writer)?;
            raw(writer, b",")?;
        }
        raw(writer, br#""name":"#)?;
        serde_json::to_writer(&mut *writer, &call.name)?;
        if !call.arguments.is_none() {
            raw(writer, br#","arguments":"#)?;
            serde_json::to_writer(&mut *writer, &call.arguments)?;
        }
        if let Some(responses) = &call.input_responses {
            raw(writer, br#","inputResponses":"#)?;
            serde_json::to_writer(&mut *writer, responses)?;
        }
        if let Some(state) = &call.request_state {
            raw(writer, br#","requestState":"#)?;
            serde_json::to_writer(&mut *writer, state)?;
        }
        raw(writer, b"}}")
    }

    fn encode_meta<W: io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
        let meta = self.call.meta.as_ref().map(|meta| &meta.0.0);
        let mut first = true;
        let mut next = |writer: &mut W| {
            raw(
                writer,
                if std::mem::take(&mut first) {
                    b""
                } else {
                    b","
                },
            )
        };
        raw(writer, b"{")?;
        let token = self.stamped.token.as_ref();
        if let Some(token) = token {
            next(writer)?;
            raw(writer, br#""progressToken":"#)?;
            serde_json::to_writer(&mut *writer, token)?;
        }
        for (key, value) in meta.into_iter().flatten() {
            if token.is_some() && key == PROGRESS_TOKEN {
                continue;
            }
            next(writer)?;
            serde_json::to_writer(&mut *writer, key)?;
            raw(writer, b":")?;
            serde_json::to_writer(&mut *writer, value)?;
        }
        if let Some(stamp) = &self.stamped.context {
            let held = |key: &str| meta.is_some_and(|map| map.contains_key(key));
            if !stamp.keys().any(held) {
                if !stamp.written.is_empty() {
                    next(writer)?;
                    raw(writer, stamp.written.as_bytes())?;
                }
            } else {
                for (key, value) in stamp.entries.iter().filter(|(key, _)| !held(key)) {
                    next(writer)?;
                    serde_json::to_writer(&mut *writer, key)?;
                    raw(writer, b":")?;
                    raw(writer, value.get().as_bytes())?;
                }
            }
        }
        raw(writer, b"}")
    }
}

#[cfg(test)]
mod tests;
