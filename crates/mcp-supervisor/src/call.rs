//! A request on its way to an upstream, in the supervisor's own types, from
//! the gateway's door (or the library's `CallTool`) to the upstream's
//! socket (docs/ARCHITECTURE.md, "One call, end to end").
//!
//! - [`UpstreamRequest`]: a [`ToolCall`], or any other request relayed as
//!   rmcp types it. The registry, the connection and its operation carry
//!   it; rmcp's `ClientRequest` is made of it only where rmcp's client
//!   sends it (`UpstreamRequest::into_rmcp`), and the HTTP lane writes a
//!   call from it by hand (`crate::codec::request`).
//! - [`ToolCall`]: a `tools/call`'s fields, each in one place.
//! - [`Arguments`]: a call's arguments, parsed or as the client sent them,
//!   shared (never copied) between the attempts and input rounds of one
//!   call; whether they are heavy is [`Arguments::heavy`]
//!   (docs/DECISIONS.md, "The fast path").
//!
//! What a call is sent under (its deadline, budget, retry rule, downstream
//! link and trace) is its `crate::connection::CallContext`.

use std::{borrow::Cow, sync::Arc};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, GetMeta, InputResponses, JsonObject,
    MetaObject, RequestMetaObject,
};
use serde::{Serialize, Serializer};
use serde_json::{Value, value::RawValue};

use crate::heavy::{HEAVY_BYTES, drop_off_thread, off_thread};

/// A request to send upstream.
#[derive(Debug, Clone)]
pub enum UpstreamRequest {
    /// A `tools/call`.
    Call(ToolCall),
    /// Any other request (`resources/read`, `prompts/get`, …), as rmcp types
    /// it.
    Relayed(Relayed),
}

/// A request other than a `tools/call`, as rmcp types it; shared, as an
/// attempt or input round sends it again. Made only by
/// [`UpstreamRequest::from`], which makes every call a [`ToolCall`]: no
/// call reaches a connection without its rules (the allowlist, the
/// catalog, its retry rule).
#[derive(Debug, Clone)]
pub struct Relayed(Arc<ClientRequest>);

impl Relayed {
    pub fn request(&self) -> &ClientRequest {
        &self.0
    }

    /// To change (copied first if another attempt still holds it).
    fn make_mut(&mut self) -> &mut ClientRequest {
        Arc::make_mut(&mut self.0)
    }

    pub(crate) fn into_request(self) -> ClientRequest {
        Arc::unwrap_or_clone(self.0)
    }
}

/// A `tools/call`: what is sent upstream, in the upstream's names.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The upstream's name for the tool (shared: a call's request is cloned
    /// for each attempt and round).
    pub name: Arc<str>,
    pub arguments: Arguments,
    /// Its `_meta`: what the caller sets, then what each attempt adds (a
    /// progress token, trace context). A 2026-07-28 session's client
    /// context, written as encoded once (`codec::request`), wins over what
    /// it held before the session stamped it, as rmcp merges them.
    pub meta: Option<RequestMetaObject>,
    /// The answers to an upstream's last input round, and the state it
    /// asked to be sent back (a multi-round call, SEP-2322).
    pub input_responses: Option<InputResponses>,
    pub request_state: Option<String>,
}

/// A call's arguments: none, parsed, or a client's JSON object as it came
/// (checked at the door, `crate::codec::json_check`, never parsed on the
/// direct path). Cloning shares them; a heavy parsed object is freed off the
/// thread.
#[derive(Debug, Clone, Default)]
pub struct Arguments(Held);

#[derive(Debug, Clone, Default)]
enum Held {
    #[default]
    None,
    Parsed {
        object: Arc<JsonObject>,
        /// Whether copying or freeing it is work for a blocking thread.
        heavy: bool,
    },
    Raw(Arc<RawValue>),
}

/// Why [`UpstreamRequest::into_rmcp`] could not make rmcp's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotAttached {
    /// The runtime shut down before the arguments were copied.
    ShuttingDown,
    /// Raw arguments did not parse. It cannot happen (they were checked at
    /// the door); if it did, it is the caller's request that is at fault,
    /// never the upstream.
    Unreadable,
}

impl Arguments {
    /// A client's JSON object as it came; only a checked one
    /// (`crate::codec::json_check::Checked`) is taken.
    pub(crate) fn raw(raw: Arc<RawValue>) -> Self {
        Arguments(Held::Raw(raw))
    }

    pub fn is_none(&self) -> bool {
        matches!(self.0, Held::None)
    }

    /// The length of raw arguments' text (0 for others).
    pub(crate) fn raw_len(&self) -> usize {
        match &self.0 {
            Held::Raw(raw) => raw.get().len(),
            _ => 0,
        }
    }

    /// Whether parsing, copying or freeing them is work for a blocking
    /// thread: 4,096 JSON values or more, or raw text of 256 KiB or more
    /// (`HEAVY_VALUES`, `crate::heavy::HEAVY_BYTES`).
    pub fn heavy(&self) -> bool {
        self.0.heavy()
    }

    /// Parsed: borrowed when they already are; `None` when there are none
    /// (or raw ones that do not parse).
    pub fn parsed(&self) -> Option<Cow<'_, JsonObject>> {
        match &self.0 {
            Held::None => None,
            Held::Parsed { object, .. } => Some(Cow::Borrowed(object)),
            Held::Raw(raw) => serde_json::from_str(raw.get()).ok().map(Cow::Owned),
        }
    }

    /// As JSON text (`null` when there are none); raw ones as they came.
    pub fn json(&self) -> Cow<'_, str> {
        match &self.0 {
            Held::Raw(raw) => Cow::Borrowed(raw.get()),
            _ => Cow::Owned(serde_json::to_string(self).unwrap_or_else(|_| "null".to_owned())),
        }
    }

    /// An owned object, copied (or parsed) off the thread when heavy.
    async fn into_object(mut self) -> Result<Option<JsonObject>, NotAttached> {
        let held = std::mem::take(&mut self.0);
        let owned = |held: Held| match held {
            Held::None => Ok(None),
            Held::Parsed { object, .. } => Ok(Some(Arc::unwrap_or_clone(object))),
            Held::Raw(raw) => serde_json::from_str(raw.get())
                .map(Some)
                .map_err(|_| NotAttached::Unreadable),
        };
        if held.heavy() {
            off_thread(move || owned(held))
                .await
                .ok_or(NotAttached::ShuttingDown)?
        } else {
            owned(held)
        }
    }
}

impl Held {
    fn heavy(&self) -> bool {
        match self {
            Held::None => false,
            Held::Parsed { heavy, .. } => *heavy,
            Held::Raw(raw) => raw.get().len() >= HEAVY_BYTES,
        }
    }
}

impl From<JsonObject> for Arguments {
    /// Found heavy or not once, here.
    fn from(object: JsonObject) -> Self {
        let heavy = is_heavy(object.values());
        Arguments(Held::Parsed {
            object: Arc::new(object),
            heavy,
        })
    }
}

impl From<Option<JsonObject>> for Arguments {
    fn from(object: Option<JsonObject>) -> Self {
        object.map(Arguments::from).unwrap_or_default()
    }
}

impl Drop for Arguments {
    /// Heavy arguments are freed on a blocking thread, by whichever holder
    /// lets them go last (the others only count down).
    fn drop(&mut self) {
        if let Held::Parsed {
            object,
            heavy: true,
        } = std::mem::take(&mut self.0)
            && let Some(last) = Arc::into_inner(object)
        {
            drop_off_thread(last);
        }
    }
}

impl Serialize for Arguments {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Held::None => serializer.serialize_none(),
            Held::Parsed { object, .. } => object.serialize(serializer),
            Held::Raw(raw) => raw.serialize(serializer),
        }
    }
}

impl ToolCall {
    pub fn new(name: impl Into<Arc<str>>, arguments: impl Into<Arguments>) -> Self {
        ToolCall {
            name: name.into(),
            arguments: arguments.into(),
            meta: None,
            input_responses: None,
            request_state: None,
        }
    }

    /// rmcp's params for it, its arguments copied in (off the thread when
    /// heavy).
    async fn into_params(self) -> Result<CallToolRequestParams, NotAttached> {
        let mut params = CallToolRequestParams::new(self.name.to_string());
        params.arguments = self.arguments.into_object().await?;
        params.meta = self.meta;
        params.input_responses = self.input_responses;
        params.request_state = self.request_state;
        Ok(params)
    }
}

impl From<CallToolRequestParams> for ToolCall {
    fn from(params: CallToolRequestParams) -> Self {
        ToolCall {
            name: params.name.into(),
            arguments: params.arguments.into(),
            meta: params.meta,
            input_responses: params.input_responses,
            request_state: params.request_state,
        }
    }
}

impl From<ToolCall> for UpstreamRequest {
    fn from(call: ToolCall) -> Self {
        UpstreamRequest::Call(call)
    }
}

impl From<ClientRequest> for UpstreamRequest {
    fn from(request: ClientRequest) -> Self {
        match request {
            ClientRequest::CallToolRequest(call) => {
                // rmcp's own `_meta` (its extensions) joins the params', as
                // rmcp merges them on the wire: the legacy map, then the
                // typed one, each later one winning a key.
                let mut extensions = call.extensions;
                let mut call = ToolCall::from(call.params);
                let legacy = extensions.remove::<MetaObject>().map(|meta| meta.0);
                let typed = extensions
                    .remove::<RequestMetaObject>()
                    .map(|meta| meta.0.0);
                if legacy.is_some() || typed.is_some() {
                    let meta = &mut call.meta.get_or_insert_default().0.0;
                    meta.extend(legacy.into_iter().flatten());
                    meta.extend(typed.into_iter().flatten());
                }
                UpstreamRequest::Call(call)
            }
            other => UpstreamRequest::Relayed(Relayed(Arc::new(other))),
        }
    }
}

impl UpstreamRequest {
    /// Its JSON-RPC method.
    pub fn method(&self) -> &str {
        match self {
            UpstreamRequest::Call(_) => "tools/call",
            UpstreamRequest::Relayed(request) => request.request().method(),
        }
    }

    /// The tool a call calls.
    pub fn tool(&self) -> Option<&str> {
        match self {
            UpstreamRequest::Call(call) => Some(&call.name),
            UpstreamRequest::Relayed(_) => None,
        }
    }

    /// The call, if it is one.
    pub fn call(&self) -> Option<&ToolCall> {
        match self {
            UpstreamRequest::Call(call) => Some(call),
            UpstreamRequest::Relayed(_) => None,
        }
    }

    /// The rmcp request it is, for what is not a call.
    pub fn relayed(&self) -> Option<&ClientRequest> {
        match self {
            UpstreamRequest::Call(_) => None,
            UpstreamRequest::Relayed(request) => Some(request.request()),
        }
    }

    /// Its `_meta`, to add to (a relayed request is copied first if
    /// another attempt still holds it).
    pub(crate) fn meta_mut(&mut self) -> &mut RequestMetaObject {
        match self {
            UpstreamRequest::Call(call) => call.meta.get_or_insert_default(),
            UpstreamRequest::Relayed(request) => request.make_mut().get_meta_mut(),
        }
    }

    /// The fields of an input round's retry (SEP-2322): the answers, and
    /// the state the upstream asked back. Only calls, prompts and reads
    /// take rounds; a relayed one is copied first if another attempt still
    /// holds it.
    pub(crate) fn inputs_mut(
        &mut self,
    ) -> Option<(&mut Option<InputResponses>, &mut Option<String>)> {
        match self {
            UpstreamRequest::Call(call) => {
                Some((&mut call.input_responses, &mut call.request_state))
            }
            UpstreamRequest::Relayed(request)
                if matches!(
                    request.request(),
                    ClientRequest::GetPromptRequest(_) | ClientRequest::ReadResourceRequest(_)
                ) =>
            {
                match request.make_mut() {
                    ClientRequest::GetPromptRequest(get) => Some((
                        &mut get.params.input_responses,
                        &mut get.params.request_state,
                    )),
                    ClientRequest::ReadResourceRequest(read) => Some((
                        &mut read.params.input_responses,
                        &mut read.params.request_state,
                    )),
                    _ => None,
                }
            }
            UpstreamRequest::Relayed(_) => None,
        }
    }

    /// Puts the answers to an input round on it, with the state the
    /// upstream asked back; `false` for a request that takes no rounds.
    pub(crate) fn set_inputs(&mut self, answers: InputResponses, state: Option<String>) -> bool {
        let Some((responses, request_state)) = self.inputs_mut() else {
            return false;
        };
        *responses = Some(answers);
        *request_state = state;
        true
    }

    /// rmcp's request, for its client (a call's arguments copied in, off
    /// the thread when heavy).
    pub(crate) async fn into_rmcp(self) -> Result<ClientRequest, NotAttached> {
        match self {
            UpstreamRequest::Call(call) => Ok(ClientRequest::CallToolRequest(
                CallToolRequest::new(call.into_params().await?),
            )),
            UpstreamRequest::Relayed(request) => Ok(request.into_request()),
        }
    }
}

/// Arguments with this many JSON values or more are heavy: copied and
/// dropped off the thread. Small ones, nearly all of them, pay for a walk of
/// at most this many values.
pub(crate) const HEAVY_VALUES: usize = 4096;

/// Whether `values` hold at least [`HEAVY_VALUES`] JSON values, counting
/// every nested one; stops counting there.
pub(crate) fn is_heavy<'a>(values: impl IntoIterator<Item = &'a Value>) -> bool {
    let mut pending: Vec<&Value> = values.into_iter().take(HEAVY_VALUES).collect();
    // Every value is counted when it is queued, so neither the walk nor its
    // queue grows past the bound, however wide an array or object is.
    let mut seen = pending.len();
    while seen < HEAVY_VALUES {
        let Some(value) = pending.pop() else {
            return false;
        };
        match value {
            Value::Array(items) => {
                seen += items.len();
                if seen < HEAVY_VALUES {
                    pending.extend(items);
                }
            }
            Value::Object(fields) => {
                seen += fields.len();
                if seen < HEAVY_VALUES {
                    pending.extend(fields.values());
                }
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests;
