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
//!   came, checked (an object every reader reads alike, `crate::json_check`)
//!   but never parsed.
//!
//! The HTTP lane writes them from there ([`SharedArguments`] is
//! `Serialize`); everything else that writes a request, rmcp's client above
//! all, gets it whole from [`attached`]. Readers ask [`arguments_of`] or
//! [`arguments_json`].

use std::{borrow::Cow, sync::Arc};

use rmcp::model::{CallToolRequest, ClientRequest, JsonObject};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::{
    heavy::{HEAVY_BYTES, off_thread},
    json_check::{self, Unreadable},
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
    /// `raw` as a call's arguments, if it is a JSON object every later
    /// reader reads alike (`crate::json_check`); why not otherwise.
    pub(crate) fn raw(raw: Box<RawValue>) -> Result<Self, Unreadable> {
        json_check::arguments(raw.get())?;
        Ok(SharedArguments::Raw(Arc::from(raw)))
    }

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
    /// the door, `crate::json_check`); if it did, it is the caller's
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
