use rmcp::model::{MetaObject, PingRequest, ReadResourceRequest, ReadResourceRequestParams};
use serde_json::json;

use super::*;

fn values(count: usize) -> Value {
    json!({ "pad": (0..count - 2).collect::<Vec<_>>() })
}

fn object(value: Value) -> JsonObject {
    value.as_object().cloned().unwrap()
}

fn raw(text: &str) -> Arguments {
    Arguments::raw(Arc::from(RawValue::from_string(text.to_owned()).unwrap()))
}

#[test]
fn heaviness_counts_nested_values_and_stops_at_the_bound() {
    assert!(!is_heavy([&values(HEAVY_VALUES - 1)]));
    assert!(is_heavy([&values(HEAVY_VALUES)]));
    assert!(is_heavy([&values(HEAVY_VALUES * 100)]));
    let nested = json!([[{"a": [1, 2]}, {"b": {"c": 3}}]]);
    assert!(!is_heavy([&nested]));
}

#[test]
fn heaviness_is_found_once_for_parsed_arguments_and_by_size_for_raw_ones() {
    assert!(!Arguments::default().heavy());
    assert!(!Arguments::from(object(json!({"text": "hi"}))).heavy());
    assert!(Arguments::from(object(values(HEAVY_VALUES + 1))).heavy());
    assert!(!raw(r#"{"a":1}"#).heavy());
    let long = format!(r#"{{"pad":"{}"}}"#, "x".repeat(HEAVY_BYTES));
    assert!(raw(&long).heavy());
}

/// Another attempt or input round shares the arguments (no copy), and what
/// a round changes does not reach another holder.
#[test]
fn attempts_share_the_arguments_and_rounds_change_only_their_own_copy() {
    let first = UpstreamRequest::from(ToolCall::new(
        "echo",
        object(json!({"text": "hi", "n": [1, 2]})),
    ));
    let mut round = first.clone();
    let (Some(a), Some(b)) = (first.call(), round.call()) else {
        unreachable!()
    };
    let (Some(Cow::Borrowed(a)), Some(Cow::Borrowed(b))) =
        (a.arguments.parsed(), b.arguments.parsed())
    else {
        panic!("parsed arguments are borrowed")
    };
    assert!(std::ptr::eq(a, b), "the attempt copied the arguments");

    let mut answers = InputResponses::new();
    answers.insert("ask".into(), json!({"action": "decline"}));
    assert!(round.set_inputs(answers, Some("round 2".into())));
    assert_eq!(first.call().unwrap().request_state, None);
    assert_eq!(
        round.call().unwrap().request_state.as_deref(),
        Some("round 2")
    );

    let mut ping = UpstreamRequest::from(ClientRequest::PingRequest(PingRequest::default()));
    assert!(!ping.set_inputs(InputResponses::new(), None));
    let read = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
        ReadResourceRequestParams::new("file:///a"),
    ));
    let first = UpstreamRequest::from(read);
    let mut again = first.clone();
    assert!(again.set_inputs(InputResponses::new(), Some("s".into())));
    let state = |request: &UpstreamRequest| match request.relayed() {
        Some(ClientRequest::ReadResourceRequest(read)) => read.params.request_state.clone(),
        _ => unreachable!(),
    };
    assert_eq!(state(&first), None, "another holder's copy changed");
    assert_eq!(state(&again).as_deref(), Some("s"));
}

/// rmcp's client gets the call whole, heavy or not, raw or parsed.
#[tokio::test]
async fn rmcp_gets_the_call_whole() {
    for arguments in [
        Arguments::from(object(json!({"text": "hi"}))),
        Arguments::from(object(values(HEAVY_VALUES + 1))),
        raw(r#"{"z":1.0,"b":{"c":"é"}}"#),
    ] {
        let expected = arguments.parsed().map(Cow::into_owned);
        let mut call = ToolCall::new("t", arguments);
        call.request_state = Some("s".into());
        let ClientRequest::CallToolRequest(whole) =
            UpstreamRequest::from(call).into_rmcp().await.unwrap()
        else {
            unreachable!()
        };
        assert_eq!(whole.params.arguments, expected);
        assert_eq!(whole.params.request_state.as_deref(), Some("s"));
    }
    let none = UpstreamRequest::from(ToolCall::new("t", Arguments::default()));
    let ClientRequest::CallToolRequest(whole) = none.into_rmcp().await.unwrap() else {
        unreachable!()
    };
    assert_eq!(whole.params.arguments, None);
}

/// Raw arguments that are not an object cannot become rmcp's: the
/// caller's fault, said as such (the door lets none through).
#[tokio::test]
async fn raw_arguments_that_are_no_object_are_the_callers_fault() {
    let call = UpstreamRequest::from(ToolCall::new("t", raw("[1]")));
    assert_eq!(call.into_rmcp().await.err(), Some(NotAttached::Unreadable));
}

#[test]
fn raw_arguments_read_as_they_came() {
    let sent = r#"{"z":1.0,"a":[1e2, 12345678901234567890]}"#;
    assert_eq!(raw(sent).json(), sent);
    assert_eq!(Arguments::default().json(), "null");
    assert_eq!(
        Arguments::from(object(json!({"a": 1}))).json(),
        r#"{"a":1}"#
    );
    assert_eq!(raw(sent).parsed().unwrap()["z"], json!(1.0));
}

/// rmcp's request `_meta` (params, legacy and typed maps) is one map in a
/// [`ToolCall`], merged as rmcp merges them on the wire.
#[test]
fn an_rmcp_call_becomes_one_tool_call() {
    let mut params = CallToolRequestParams::new("search");
    params.meta = Some(RequestMetaObject(MetaObject(object(
        json!({"own": 1, "shared": "params"}),
    ))));
    params.arguments = Some(object(json!({"q": "x"})));
    let mut call = CallToolRequest::new(params);
    call.extensions
        .insert(MetaObject(object(json!({"shared": "legacy", "l": 2}))));
    call.extensions
        .insert(RequestMetaObject(MetaObject(object(json!({"l": "typed"})))));
    let UpstreamRequest::Call(ours) = ClientRequest::CallToolRequest(call).into() else {
        panic!("a call is a ToolCall")
    };
    assert_eq!(&*ours.name, "search");
    assert_eq!(
        serde_json::to_value(&ours.meta).unwrap(),
        json!({"own": 1, "shared": "legacy", "l": "typed"})
    );
    assert_eq!(ours.arguments.json(), r#"{"q":"x"}"#);
}

/// Every `tools/call` becomes a [`ToolCall`]: none is relayed past the
/// rules a call must pass.
#[test]
fn every_call_is_a_tool_call() {
    let call =
        || ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("t")));
    let request = UpstreamRequest::from(call());
    assert_eq!(request.tool(), Some("t"));
    assert!(request.relayed().is_none());
    let ping = UpstreamRequest::from(ClientRequest::PingRequest(PingRequest::default()));
    assert_eq!(ping.tool(), None);
    assert_eq!(ping.method(), "ping");
}

/// Heavy arguments are freed on a blocking thread by their last holder
/// only: the other holders' drops start nothing.
#[test]
fn heavy_arguments_are_freed_off_the_thread_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let started = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&started);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .on_thread_start(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    runtime.block_on(async {
        let heavy = Arguments::from(object(values(HEAVY_VALUES + 1)));
        let copies: Vec<Arguments> = (0..5).map(|_| heavy.clone()).collect();
        drop(copies);
        assert_eq!(
            started.load(Ordering::SeqCst),
            0,
            "a holder that was not the last started a thread"
        );
        drop(heavy);
    });
    drop(runtime);
    assert_eq!(
        started.load(Ordering::SeqCst),
        1,
        "the last holder frees them on a blocking thread"
    );
}
