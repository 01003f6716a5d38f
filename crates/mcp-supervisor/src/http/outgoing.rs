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
use serde::{Serialize, Serializer};

use crate::arguments::SharedArguments;

/// A message on its way to the upstream.
pub(super) enum Outgoing {
    /// A `tools/call`, its `_meta` merged into its params, its arguments
    /// there or still shared with the request it was made from.
    Call {
        id: RequestId,
        params: CallToolRequestParams,
        shared: Option<SharedArguments>,
    },
    /// Anything else, written by rmcp.
    Other(ClientJsonRpcMessage),
}

impl From<ClientJsonRpcMessage> for Outgoing {
    fn from(message: ClientJsonRpcMessage) -> Self {
        match message {
            JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: ClientRequest::CallToolRequest(mut call),
                ..
            }) => Outgoing::Call {
                id,
                shared: call.extensions.remove::<SharedArguments>(),
                params: merged(call),
            },
            other => Outgoing::Other(other),
        }
    }
}

/// `call`'s params with the `_meta` its extensions carry merged in, as
/// rmcp merges them on the wire.
fn merged(call: CallToolRequest) -> CallToolRequestParams {
    let CallToolRequest {
        mut params,
        mut extensions,
        ..
    } = call;
    let legacy = extensions.remove::<MetaObject>().map(|meta| meta.0);
    let typed = extensions
        .remove::<RequestMetaObject>()
        .map(|meta| meta.0.0);
    if legacy.is_none() && typed.is_none() {
        return params;
    }
    let mut meta: JsonObject = params.meta.take().map(|meta| meta.0.0).unwrap_or_default();
    meta.extend(legacy.into_iter().flatten());
    meta.extend(typed.into_iter().flatten());
    params.meta = Some(RequestMetaObject(MetaObject(meta)));
    params
}

/// `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":…}`.
#[derive(Serialize)]
struct CallEnvelope<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'static str,
    params: Params<'a>,
}

/// A call's params, with the arguments they share added.
#[derive(Serialize)]
struct Params<'a> {
    #[serde(flatten)]
    params: &'a CallToolRequestParams,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a SharedArguments>,
}

impl Serialize for Outgoing {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Outgoing::Call { id, params, shared } => CallEnvelope {
                jsonrpc: "2.0",
                id,
                method: "tools/call",
                params: Params {
                    params,
                    // Only an attempt shares them, and it has none of its own.
                    arguments: shared.as_ref(),
                },
            }
            .serialize(serializer),
            Outgoing::Other(message) => message.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{GetMeta, InputResponses, NumberOrString, ProgressToken};
    use serde_json::{Value, json, value::RawValue};

    use super::*;
    use crate::{
        arguments::{arguments_of, attached},
        heavy::SharedRequest,
    };

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
        let ours = serde_json::to_value(Outgoing::from(message)).unwrap();
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
        let ours = serde_json::to_value(Outgoing::from(wire(attempt.clone()))).unwrap();
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
        let sent = r#"{"z":1.0,"a":[1e2, 12345678901234567890123],"b":{"c":"é"}}"#;
        let raw = SharedArguments::raw(RawValue::from_string(sent.to_owned()).unwrap()).unwrap();
        assert!(SharedArguments::raw(RawValue::from_string("[1]".into()).unwrap()).is_none());
        let mut call = CallToolRequest::new(CallToolRequestParams::new("t"));
        call.extensions.insert(raw);
        let request = ClientRequest::CallToolRequest(call);
        let message = ClientJsonRpcMessage::Request(JsonRpcRequest::new(
            NumberOrString::Number(5),
            request.clone(),
        ));
        let written = serde_json::to_string(&Outgoing::from(message)).unwrap();
        assert!(
            written.contains(&format!(r#""arguments":{sent}"#)),
            "{written}"
        );
        let ClientRequest::CallToolRequest(whole) = attached(request).await.unwrap() else {
            unreachable!()
        };
        assert_eq!(whole.params.arguments.unwrap()["b"]["c"], "é");
    }

    #[test]
    fn other_messages_are_written_by_rmcp() {
        let message = ClientJsonRpcMessage::Request(JsonRpcRequest::new(
            NumberOrString::Number(3),
            ClientRequest::ListToolsRequest(Default::default()),
        ));
        let rmcp = serde_json::to_string(&message).unwrap();
        let ours = serde_json::to_string(&Outgoing::from(message)).unwrap();
        assert_eq!(ours, rmcp);
    }
}
