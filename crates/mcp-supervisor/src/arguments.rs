//! A call's arguments held outside its params, so that the megabytes a
//! call may carry are neither copied for each attempt nor parsed when the
//! gateway only passes them on (docs/DECISIONS.md #111, #112).
//!
//! They travel in the request's extensions as [`SharedArguments`], its
//! params' `arguments` left empty:
//!
//! - an attempt shares the arguments of the request it was made from
//!   ([`SharedRequest::attempt`](crate::heavy::SharedRequest::attempt));
//! - a plain call on the gateway's direct path keeps its client's JSON as it
//!   came, checked (an object every reader reads alike, `crate::codec::json_check`)
//!   but never parsed.
//!
//! The HTTP lane writes them from there ([`SharedArguments`] is
//! `Serialize`); everything else that writes a request, rmcp's client above
//! all, gets it whole from [`attached`]. Readers ask [`arguments_of`] or
//! [`arguments_json`].

use std::{borrow::Cow, sync::Arc};

use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject};
use serde::{Serialize, Serializer};
use serde_json::{Value, value::RawValue};

use crate::{
    codec::json_check::Checked,
    heavy::{HEAVY_BYTES, drop_off_thread, off_thread},
};

/// A call's arguments, held outside its params (see the module).
#[derive(Debug, Clone)]
pub(crate) enum SharedArguments {
    /// Those of the request an attempt was made from.
    Shared {
        request: Arc<ClientRequest>,
        /// Whether copying them is work for a blocking thread.
        heavy: bool,
    },
    /// A client's JSON object, as it was sent.
    Raw(Arc<RawValue>),
}

impl SharedArguments {
    /// The arguments parsed: borrowed when they already are.
    fn parsed(&self) -> Option<Cow<'_, JsonObject>> {
        match self {
            SharedArguments::Shared { request, .. } => shared_of(request).map(Cow::Borrowed),
            SharedArguments::Raw(raw) => serde_json::from_str(raw.get()).ok().map(Cow::Owned),
        }
    }

    /// Whether parsing or copying them is work for a blocking thread.
    fn heavy(&self) -> bool {
        match self {
            SharedArguments::Shared { heavy, .. } => *heavy,
            SharedArguments::Raw(raw) => raw.get().len() >= HEAVY_BYTES,
        }
    }
}

impl From<Checked> for SharedArguments {
    fn from(checked: Checked) -> Self {
        SharedArguments::Raw(Arc::from(checked.into_raw()))
    }
}

fn shared_of(request: &ClientRequest) -> Option<&JsonObject> {
    match request {
        ClientRequest::CallToolRequest(call) => call.params.arguments.as_ref(),
        _ => None,
    }
}

impl Serialize for SharedArguments {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SharedArguments::Shared { request, .. } => shared_of(request).serialize(serializer),
            SharedArguments::Raw(raw) => raw.serialize(serializer),
        }
    }
}

/// `call`'s arguments, wherever they are; parsed for the reader if they
/// came raw.
pub(crate) fn arguments_of(call: &CallToolRequest) -> Option<Cow<'_, JsonObject>> {
    match &call.params.arguments {
        Some(arguments) => Some(Cow::Borrowed(arguments)),
        None => call
            .extensions
            .get::<SharedArguments>()
            .and_then(SharedArguments::parsed),
    }
}

/// `call`'s arguments as JSON text (`null` when it has none); raw ones as
/// they came.
pub(crate) fn arguments_json(call: &CallToolRequest) -> Cow<'_, str> {
    if call.params.arguments.is_none()
        && let Some(SharedArguments::Raw(raw)) = call.extensions.get::<SharedArguments>()
    {
        return Cow::Borrowed(raw.get());
    }
    let text = serde_json::to_string(&arguments_of(call));
    Cow::Owned(text.unwrap_or_else(|_| "null".to_owned()))
}

/// Why [`attached`] could not make a request whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotAttached {
    /// The runtime shut down before the arguments were copied.
    ShuttingDown,
    /// Raw arguments did not parse. It cannot happen (they were checked at
    /// the door, `crate::codec::json_check`); if it did, it is the caller's
    /// request that is at fault, never the upstream.
    Unreadable,
}

/// `request` whole, arguments held outside its params (if any) put back in
/// (copied or parsed off the thread when heavy), for whatever writes it
/// other than the HTTP lane.
pub(crate) async fn attached(mut request: ClientRequest) -> Result<ClientRequest, NotAttached> {
    let ClientRequest::CallToolRequest(call) = &mut request else {
        return Ok(request);
    };
    let Some(shared) = call.extensions.remove::<SharedArguments>() else {
        return Ok(request);
    };
    let arguments = if shared.heavy() {
        off_thread(move || shared.parsed().map(Cow::into_owned))
            .await
            .ok_or(NotAttached::ShuttingDown)?
    } else {
        shared.parsed().map(Cow::into_owned)
    };
    call.params.arguments = Some(arguments.ok_or(NotAttached::Unreadable)?);
    Ok(request)
}

/// Arguments with this many JSON values or more make a request heavy: it is
/// copied and dropped off the thread. Small requests, nearly all of them,
/// pay for a walk of at most this many values.
pub(crate) const HEAVY_VALUES: usize = 4096;

/// A request that may be sent more than once (another attempt, another
/// input round), shared rather than copied; a heavy one is copied for an
/// attempt and freed off the thread.
#[derive(Debug, Clone)]
pub(crate) struct SharedRequest {
    /// Always `Some` but while dropping.
    request: Option<Arc<ClientRequest>>,
    heavy: bool,
}

impl SharedRequest {
    pub(crate) fn new(request: impl Into<Arc<ClientRequest>>) -> Self {
        let request = request.into();
        let heavy = match request.as_ref() {
            ClientRequest::CallToolRequest(call) => call
                .params
                .arguments
                .as_ref()
                .is_some_and(|arguments| is_heavy(arguments.values())),
            _ => false,
        };
        SharedRequest {
            request: Some(request),
            heavy,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<ClientRequest> {
        self.request.as_ref().expect("only taken in drop")
    }

    /// The request, to change (copied first if someone else still holds it).
    pub(crate) fn make_mut(&mut self) -> &mut ClientRequest {
        Arc::make_mut(self.request.as_mut().expect("only taken in drop"))
    }

    /// The request to send for one attempt, to stamp with the attempt's
    /// `_meta`. A call's arguments are not copied: the attempt holds them
    /// shared ([`SharedArguments`]), the HTTP lane writes them from there,
    /// and [`attached`] copies them in for
    /// anything else.
    pub(crate) fn attempt(&self) -> ClientRequest {
        let shared = self.shared();
        let ClientRequest::CallToolRequest(call) = shared.as_ref() else {
            return ClientRequest::clone(shared);
        };
        if call.params.arguments.is_none() {
            return ClientRequest::clone(shared);
        }
        // Every field but the arguments (the params are `non_exhaustive`,
        // so there is no `..` to copy them with).
        let mut params = CallToolRequestParams::new(call.params.name.clone());
        params.meta.clone_from(&call.params.meta);
        params
            .input_responses
            .clone_from(&call.params.input_responses);
        params.request_state.clone_from(&call.params.request_state);
        let mut attempt = CallToolRequest::new(params);
        attempt.extensions = call.extensions.clone();
        attempt.extensions.insert(SharedArguments::Shared {
            request: Arc::clone(shared),
            heavy: self.heavy,
        });
        ClientRequest::CallToolRequest(attempt)
    }
}

impl Drop for SharedRequest {
    fn drop(&mut self) {
        if let Some(request) = self.request.take().filter(|_| self.heavy) {
            drop_off_thread(request);
        }
    }
}

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
mod tests {
    use serde_json::json;

    use super::*;

    fn values(count: usize) -> Value {
        json!({ "pad": (0..count - 2).collect::<Vec<_>>() })
    }

    #[test]
    fn heaviness_counts_nested_values_and_stops_at_the_bound() {
        assert!(!is_heavy([&values(HEAVY_VALUES - 1)]));
        assert!(is_heavy([&values(HEAVY_VALUES)]));
        assert!(is_heavy([&values(HEAVY_VALUES * 100)]));
        let nested = json!([[{"a": [1, 2]}, {"b": {"c": 3}}]]);
        assert!(!is_heavy([&nested]));
    }

    fn call(arguments: Value) -> ClientRequest {
        let mut params = rmcp::model::CallToolRequestParams::new("echo");
        params.arguments = arguments.as_object().cloned();
        ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params))
    }

    #[tokio::test]
    async fn a_shared_request_is_copied_whole_and_changed_without_touching_other_holders() {
        let small = SharedRequest::new(call(json!({"text": "hi"})));
        assert!(!small.heavy);
        let mut heavy = SharedRequest::new(call(values(HEAVY_VALUES + 1)));
        assert!(heavy.heavy, "large arguments make a heavy request");
        let copy = attached(heavy.attempt()).await.unwrap();
        assert_eq!(
            serde_json::to_value(&copy).unwrap(),
            serde_json::to_value(heavy.shared().as_ref()).unwrap(),
            "copied whole"
        );

        let held = Arc::clone(heavy.shared());
        let ClientRequest::CallToolRequest(changed) = heavy.make_mut() else {
            unreachable!()
        };
        changed.params.request_state = Some("round 2".into());
        let ClientRequest::CallToolRequest(before) = held.as_ref() else {
            unreachable!()
        };
        assert_eq!(
            before.params.request_state, None,
            "another holder's copy changed"
        );
        let ClientRequest::CallToolRequest(after) = heavy.shared().as_ref() else {
            unreachable!()
        };
        assert_eq!(after.params.request_state.as_deref(), Some("round 2"));
        let ping = ClientRequest::PingRequest(rmcp::model::PingRequest::default());
        assert!(!SharedRequest::new(ping).heavy);
    }
}
