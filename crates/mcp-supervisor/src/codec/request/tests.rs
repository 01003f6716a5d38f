use rmcp::model::{
    CallToolRequest, CallToolRequestParams, InputResponses, MetaObject, NumberOrString,
};
use serde_json::{Value, json};

use super::*;
use crate::{
    call::{Arguments, ToolCall},
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

fn message(call: CallToolRequest, id: RequestId) -> ClientJsonRpcMessage {
    ClientJsonRpcMessage::Request(JsonRpcRequest::new(
        id,
        ClientRequest::CallToolRequest(call),
    ))
}

/// A call as rmcp would put it on the wire, and as [`Outgoing`] does.
fn both(call: CallToolRequest, id: RequestId) -> (Value, Value) {
    let message = message(call, id);
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

/// The attempt's progress token is written once, first, over one the
/// call's own `_meta` holds (counted in the text: a JSON reader keeps one
/// of two keys alike without a word).
#[test]
fn the_attempts_progress_token_is_written_once_over_the_calls_own() {
    let mut call = ToolCall::new("t", Arguments::default());
    call.meta = Some(RequestMetaObject(MetaObject(object(
        json!({"progressToken": "the call's", "other": 1}),
    ))));
    let stamped = Stamped {
        context: None,
        token: Some(rmcp::model::ProgressToken(NumberOrString::Number(5))),
    };
    let text = text(Outgoing::request(
        call.into(),
        NumberOrString::Number(1),
        stamped,
    ));
    assert_eq!(text.matches(r#""progressToken""#).count(), 1, "{text}");
    assert!(
        text.contains(r#""_meta":{"progressToken":5,"other":1}"#),
        "{text}"
    );
}

/// A client's arguments kept as sent are written as sent.
#[test]
fn raw_arguments_are_written_as_they_came() {
    let sent = r#"{"z":1.0,"a":[1e2, 12345678901234567890],"b":{"c":"é"}}"#;
    let raw =
        Arguments::from(Checked::new(RawValue::from_string(sent.to_owned()).unwrap()).unwrap());
    let call = ToolCall::new("t", raw);
    let written = text(Outgoing::request(
        call.into(),
        NumberOrString::Number(5),
        Stamped::default(),
    ));
    assert!(
        written.contains(&format!(r#""arguments":{sent}"#)),
        "{written}"
    );
    let read: Value = serde_json::from_str(&written).unwrap();
    assert_eq!(read["params"]["arguments"]["b"]["c"], "é");
}

/// A session's stamp, encoded once, writes what rmcp writes when its
/// client merges its context into the request: under what the call's own
/// `_meta` holds (here another client's capabilities and a progress token).
#[test]
fn an_encoded_stamp_means_what_rmcp_would_write() {
    let context = object(json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "gw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
    }));
    let stamp = RequestMetaObject(MetaObject(context.clone()));
    let typed = object(json!({
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "progressToken": 3,
    }));
    let params = CallToolRequestParams::new("t").with_arguments(object(json!({"a": 1})));
    let mut plain = CallToolRequest::new(params.clone());
    let mut meta = stamp.clone();
    meta.0.0.extend(typed.clone());
    plain.extensions.insert(meta);
    let (rmcp, _) = both(plain, NumberOrString::Number(4));

    let mut call = ToolCall::from(params);
    call.meta = Some(RequestMetaObject(MetaObject(typed)));
    let ours = written(Outgoing::request(
        call.into(),
        NumberOrString::Number(4),
        Stamped {
            context: Some(Stamp::new(&stamp).unwrap()),
            token: None,
        },
    ));
    assert_eq!(ours, rmcp);
    let meta = &ours["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "gw");
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"sampling": {}})
    );
}

/// The common call: a stamp none of whose keys the call's own `_meta`
/// holds is written as it was encoded, in one piece.
#[test]
fn a_stamp_the_call_does_not_touch_is_written_as_encoded() {
    let stamp = RequestMetaObject(MetaObject(object(json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "gw \"q\"", "version": "1"},
    }))));
    let encoded = Stamp::new(&stamp).unwrap();
    for progress in [None, Some(8)] {
        let mut params = CallToolRequestParams::new("t").with_arguments(object(json!({"a": [1]})));
        params.request_state = Some("s".into());
        let mut plain = CallToolRequest::new(params.clone());
        let mut meta = stamp.clone();
        let mut call = ToolCall::from(params);
        if let Some(token) = progress {
            meta.0.0.insert("progressToken".into(), json!(token));
            call.meta = Some(RequestMetaObject(MetaObject(object(
                json!({"progressToken": token}),
            ))));
        }
        plain.extensions.insert(meta);
        let (rmcp, _) = both(plain, NumberOrString::Number(9));
        let text = text(Outgoing::request(
            call.into(),
            NumberOrString::Number(9),
            Stamped {
                context: Some(encoded.clone()),
                token: None,
            },
        ));
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
