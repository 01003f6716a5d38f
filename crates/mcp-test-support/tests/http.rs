//! The in-process HTTP test server, driven by rmcp's real client and by raw
//! reqwest POSTs, over loopback.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime},
};

use mcp_test_support::{
    Counts, Fault, FaultRule, LATE_TOOL, Match, TestServer, TestServerOptions, eventually,
};
use rmcp::{
    ClientHandler, RoleClient, ServiceExt as _,
    model::{CallToolRequestParams, CallToolResult, ClientConfig},
    service::{MaybeSendFuture, NotificationContext, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};

/// Generous bound for any single step on a slow, busy machine.
const STEP: Duration = Duration::from_secs(15);

type Client = RunningService<RoleClient, ClientConfig>;

async fn connect(url: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed")
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    try_call(client, tool, arguments)
        .await
        .unwrap_or_else(|error| panic!("calling {tool} failed: {error}"))
}

async fn try_call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    tokio::time::timeout(STEP, client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("calling {tool} timed out"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .map(|text| text.text.as_str())
        .collect()
}

/// A raw JSON-RPC POST, as an MCP client would send it.
async fn raw_post(url: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .timeout(STEP)
        .send()
        .await
        .expect("POST failed")
}

fn tools_call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {"text": "x"}}})
}

#[tokio::test]
async fn lists_tools_and_calls_them() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    assert!(server.url().starts_with("http://127.0.0.1:"));
    assert!(server.url().ends_with("/mcp"));
    let client = connect(&server.url()).await;

    let info = client.peer_info().expect("server info");
    let tools_capability = info.capabilities.tools.as_ref().expect("tools capability");
    assert_eq!(tools_capability.list_changed, Some(true));

    let tools = tokio::time::timeout(STEP, client.list_all_tools())
        .await
        .unwrap()
        .unwrap();
    let mut names: Vec<_> = tools.iter().map(|tool| tool.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "add",
            "delete_item",
            "echo",
            "fail",
            "lookup",
            "set_value",
            "sleep"
        ]
    );
    let annotations = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.name == name)
            .and_then(|tool| tool.annotations.clone())
            .unwrap_or_else(|| panic!("{name} has annotations"))
    };
    assert_eq!(annotations("lookup").read_only_hint, Some(true));
    assert_eq!(annotations("delete_item").destructive_hint, Some(true));
    assert_eq!(annotations("set_value").idempotent_hint, Some(true));
    let echo = tools.iter().find(|tool| tool.name == "echo").unwrap();
    assert!(
        echo.input_schema
            .get("properties")
            .unwrap()
            .get("text")
            .is_some()
    );

    let echoed = call(&client, "echo", json!({"text": "hello"})).await;
    assert_eq!(text(&echoed), "hello");
    assert_ne!(echoed.is_error, Some(true));
    assert_eq!(
        text(&call(&client, "add", json!({"a": 2, "b": 3})).await),
        "5"
    );
    assert_eq!(
        text(&call(&client, "lookup", json!({"key": "k"})).await),
        "value-of-k"
    );
    assert_eq!(
        text(&call(&client, "delete_item", json!({"id": "7"})).await),
        "deleted 7"
    );
    assert_eq!(
        text(&call(&client, "set_value", json!({"key": "k", "value": "v"})).await),
        "ok"
    );
    assert_eq!(
        text(&call(&client, "sleep", json!({"ms": 5})).await),
        "slept 5"
    );
    let failed = call(&client, "fail", json!({"message": "boom"})).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), "boom");

    assert_eq!(server.requests("initialize"), 1);
    eventually!(server.requests("notifications/initialized") == 1);
    assert_eq!(server.requests("tools/list"), 1);
    assert_eq!(server.requests("tools/call"), 7);
    assert_eq!(server.tool_calls("echo"), 1);
    assert_eq!(server.completed_calls("echo"), 1);
    assert_eq!(server.completed_calls("fail"), 1);

    client.cancel().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn injected_503_with_retry_after_then_recovers() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    server.faults().push(FaultRule::once(
        Match::Any,
        Fault::status(503).with_retry_after_secs(2),
    ));

    let response = raw_post(&server.url(), tools_call(1, "echo")).await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "2");
    assert!(response.text().await.unwrap().contains("503"));
    assert_eq!(server.requests("tools/call"), 1);
    assert_eq!(server.tool_calls("echo"), 1);
    assert_eq!(server.completed_calls("echo"), 0);
    assert!(server.faults().rules().is_empty(), "one-shot rule used up");

    // The next request reaches rmcp (which wants a session first).
    let response = raw_post(&server.url(), tools_call(2, "echo")).await;
    assert_ne!(response.status(), 503);
    assert_eq!(server.requests("tools/call"), 2);
}

#[tokio::test]
async fn status_faults_carry_dates_jsonrpc_bodies_and_challenges() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let date = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
    server.faults().push(FaultRule::once(
        Match::tool("echo"),
        Fault::status(500)
            .with_retry_after_date(date)
            .with_jsonrpc_body(),
    ));
    server.faults().push(FaultRule::once(
        Match::method("tools/call"),
        Fault::status(401).with_www_authenticate("Bearer error=\"invalid_token\""),
    ));

    // A tools/call of another tool skips the echo rule.
    let response = raw_post(&server.url(), tools_call(1, "add")).await;
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer error=\"invalid_token\""
    );

    let response = raw_post(&server.url(), tools_call(9, "echo")).await;
    assert_eq!(response.status(), 500);
    assert_eq!(
        response.headers()["retry-after"],
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": "injected"}})
    );
}

#[tokio::test]
async fn garbage_hang_and_delay_faults() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    server
        .faults()
        .push(FaultRule::once(Match::tool("echo"), Fault::Garbage));
    let response = raw_post(&server.url(), tools_call(1, "echo")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let body = response.bytes().await.unwrap();
    assert!(serde_json::from_slice::<Value>(&body).is_err());

    server
        .faults()
        .push(FaultRule::once(Match::tool("echo"), Fault::Hang));
    let hung = reqwest::Client::new()
        .post(server.url())
        .header("accept", "application/json, text/event-stream")
        .json(&tools_call(2, "echo"))
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(hung.unwrap_err().is_timeout());

    // A delay only postpones the real answer.
    server.faults().push(FaultRule::once(
        Match::method("initialize"),
        Fault::delay(Duration::from_millis(100)),
    ));
    let client = connect(&server.url()).await;
    assert_eq!(
        text(&call(&client, "echo", json!({"text": "late"})).await),
        "late"
    );
    assert_eq!(server.tool_calls("echo"), 3);
    assert_eq!(server.completed_calls("echo"), 1);
}

#[tokio::test]
async fn drop_connection_runs_the_tool_but_loses_the_answer() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let client = connect(&server.url()).await;
    server.faults().push(FaultRule::once(
        Match::tool("delete_item"),
        Fault::DropConnection,
    ));

    let result = try_call(&client, "delete_item", json!({"id": "1"})).await;
    assert!(
        result.is_err(),
        "expected a transport error, got {result:?}"
    );
    assert_eq!(server.tool_calls("delete_item"), 1);
    assert_eq!(server.completed_calls("delete_item"), 1, "the tool did run");
}

#[tokio::test]
async fn drop_connection_cuts_a_raw_response_short() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    server
        .faults()
        .push(FaultRule::once(Match::Any, Fault::DropConnection));
    let response = raw_post(&server.url(), tools_call(1, "echo")).await;
    assert_eq!(response.status(), 200);
    assert!(response.bytes().await.is_err(), "body must be incomplete");
}

#[tokio::test]
async fn expired_session_gets_404_and_the_client_reinitializes() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let client = connect(&server.url()).await;
    assert_eq!(server.requests("initialize"), 1);
    server
        .faults()
        .push(FaultRule::once(Match::tool("echo"), Fault::ExpireSession));

    // rmcp's client answers a 404 by initializing a new session once and
    // resending; either way the old session must be gone for good.
    let result = try_call(&client, "echo", json!({"text": "again"})).await;
    match result {
        Ok(result) => {
            assert_eq!(text(&result), "again");
            assert_eq!(server.requests("initialize"), 2);
        }
        Err(error) => panic!("rmcp did not recover from the expired session: {error}"),
    }
    assert_eq!(server.tool_calls("echo"), 2);
    assert_eq!(server.completed_calls("echo"), 1);
}

#[tokio::test]
async fn expired_session_stays_expired_for_raw_requests() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let client = connect(&server.url()).await;
    let session_id = {
        // Learn the session id the way a client does: from initialize.
        let response = raw_post(
            &server.url(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
        )
        .await;
        assert_eq!(response.status(), 200);
        response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    let post = |id: u64| {
        reqwest::Client::new()
            .post(server.url())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session_id)
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
            .timeout(STEP)
            .send()
    };
    server
        .faults()
        .push(FaultRule::once(Match::Any, Fault::ExpireSession));
    assert_eq!(post(2).await.unwrap().status(), 404);
    assert_eq!(post(3).await.unwrap().status(), 404, "rmcp forgot it too");
    // Other sessions are untouched.
    assert_eq!(
        text(&call(&client, "echo", json!({"text": "ok"})).await),
        "ok"
    );
}

#[tokio::test]
async fn bearer_token_is_required_when_configured() {
    let options = TestServerOptions {
        require_bearer: Some("s3cret".into()),
        ..TestServerOptions::default()
    };
    let server = TestServer::start(options).await.unwrap();

    let response = raw_post(&server.url(), tools_call(1, "echo")).await;
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    assert_eq!(server.requests("tools/call"), 1, "counted though refused");

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(server.url()).auth_header("s3cret"),
    );
    let client = tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .unwrap()
        .expect("initialize with the token");
    assert_eq!(
        text(&call(&client, "echo", json!({"text": "in"})).await),
        "in"
    );
    assert_eq!(server.completed_calls("echo"), 1);
}

/// Counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct ListChangedCounter(Arc<AtomicUsize>);

impl ClientHandler for ListChangedCounter {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::ready(())
    }
}

#[tokio::test]
async fn late_tool_appears_with_a_list_changed_notification() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let notifications = ListChangedCounter::default();
    let seen = notifications.0.clone();
    let transport = StreamableHttpClientTransport::from_uri(server.url());
    let client = tokio::time::timeout(STEP, notifications.serve(transport))
        .await
        .unwrap()
        .unwrap();
    let listed = |tools: Vec<rmcp::model::Tool>| tools.iter().any(|t| t.name == LATE_TOOL);
    assert!(!listed(client.list_all_tools().await.unwrap()));
    let params = CallToolRequestParams::new(LATE_TOOL);
    assert!(client.call_tool(params.clone()).await.is_err());

    server.set_late_tool(true).await;
    eventually!(seen.load(Ordering::SeqCst) >= 1);
    assert!(listed(client.list_all_tools().await.unwrap()));
    let result = tokio::time::timeout(STEP, client.call_tool(params))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(text(&result), "late");

    // Setting the same value again sends nothing new.
    server.set_late_tool(true).await;
    server.set_late_tool(false).await;
    eventually!(seen.load(Ordering::SeqCst) >= 2);
    assert!(!listed(client.list_all_tools().await.unwrap()));
}

#[tokio::test]
async fn measures_concurrent_tool_calls() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let client = connect(&server.url()).await;
    let calls = (0..4).map(|_| call(&client, "sleep", json!({"ms": 400})));
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(|result| text(result) == "slept 400"));
    // On any machine at least two of four concurrent 400 ms calls overlap.
    assert!(
        server.in_flight_peak() >= 2,
        "peak {}",
        server.in_flight_peak()
    );
    server.reset_peak();
    assert_eq!(server.in_flight_peak(), 0);
    assert_eq!(server.completed_calls("sleep"), 4);
}

#[tokio::test]
async fn restart_on_same_port_drops_sessions_and_keeps_counters() {
    let mut server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let addr = server.addr();
    let client = connect(&server.url()).await;
    assert_eq!(
        text(&call(&client, "echo", json!({"text": "a"})).await),
        "a"
    );

    server.stop().await;
    assert!(!server.is_running());
    let refused = reqwest::Client::new()
        .post(server.url())
        .json(&tools_call(1, "echo"))
        .timeout(STEP)
        .send()
        .await;
    assert!(refused.unwrap_err().is_connect());
    // The old client's session is gone with the server.
    assert!(
        try_call(&client, "echo", json!({"text": "b"}))
            .await
            .is_err()
    );

    server.restart_on_same_port().await.unwrap();
    assert!(server.is_running());
    assert_eq!(server.addr(), addr);
    let fresh = connect(&server.url()).await;
    assert_eq!(text(&call(&fresh, "echo", json!({"text": "c"})).await), "c");
    assert_eq!(server.completed_calls("echo"), 2);
    assert!(server.requests("initialize") >= 2);
}

#[tokio::test]
async fn serves_without_nodelay() {
    let options = TestServerOptions {
        nodelay: false,
        ..TestServerOptions::default()
    };
    let server = TestServer::start(options).await.unwrap();
    let client = connect(&server.url()).await;
    assert_eq!(
        text(&call(&client, "add", json!({"a": 1.5, "b": 1})).await),
        "2.5"
    );
}

#[tokio::test]
async fn control_endpoints_set_faults_and_report_counts() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let base = server.url().trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::new();

    let rules = json!([{"when": {"tool": "echo"},
                        "fault": {"kind": "status", "status": 429, "retry_after": {"seconds": 7}},
                        "times": 1}]);
    let set = http
        .post(format!("{base}/_control/faults"))
        .json(&rules)
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 204);
    assert_eq!(server.faults().rules().len(), 1);
    let bad = http
        .post(format!("{base}/_control/faults"))
        .json(&json!([{"fault": {"kind": "nope"}}]))
        .send()
        .await
        .unwrap();
    assert!(bad.status().is_client_error());

    let response = raw_post(&server.url(), tools_call(1, "echo")).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");

    let counts: Counts = http
        .get(format!("{base}/_control/counts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(counts.requests("tools/call"), 1);
    assert_eq!(counts.tool_calls("echo"), 1);
    assert_eq!(counts.completed_calls("echo"), 0);

    let late = http
        .post(format!("{base}/_control/late_tool"))
        .json(&json!({"enabled": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 204);
    assert!(server.control().late_tool_enabled());
}

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<TestServer>();
    send_sync::<mcp_test_support::FaultHandle>();
    send_sync::<mcp_test_support::ServerControl>();
}

#[test]
fn dropping_a_server_outside_a_runtime_is_fine() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(TestServer::start(TestServerOptions::default()))
        .unwrap();
    drop(runtime);
    drop(server);
}

/// What the server saw of the trace context of each call: `_meta` and
/// header, set apart, over a 2026-07-28 exchange and a 2025 session.
#[tokio::test]
async fn seen_traces_record_the_meta_and_the_header_of_each_call() {
    use rmcp::model::RequestParamsMeta as _;

    const IN_META: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const IN_HEADER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for options in [TestServerOptions::default(), TestServerOptions::legacy()] {
        let server = TestServer::start(options).await.unwrap();
        let headers = [(
            http::HeaderName::from_static("traceparent"),
            http::HeaderValue::from_static(IN_HEADER),
        )];
        let config = StreamableHttpClientTransportConfig::with_uri(server.url())
            .custom_headers(headers.into_iter().collect());
        let client = tokio::time::timeout(
            STEP,
            ClientConfig::default().serve(StreamableHttpClientTransport::from_config(config)),
        )
        .await
        .expect("initialize timed out")
        .expect("initialize failed");

        let mut traced = CallToolRequestParams::new("echo")
            .with_arguments(json!({"text": "t"}).as_object().unwrap().clone());
        traced.set_traceparent(IN_META);
        tokio::time::timeout(STEP, client.call_tool(traced))
            .await
            .unwrap()
            .unwrap();
        call(&client, "add", json!({"a": 1, "b": 2})).await;

        let seen = server.seen_traces();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0].tool, "echo");
        assert_eq!(seen[0].meta.as_deref(), Some(IN_META));
        assert_eq!(seen[0].header.as_deref(), Some(IN_HEADER));
        assert_eq!(seen[1].tool, "add");
        assert_eq!(seen[1].meta, None, "{seen:?}");
        assert_eq!(seen[1].header.as_deref(), Some(IN_HEADER));
        client.cancel().await.unwrap();
    }
}
