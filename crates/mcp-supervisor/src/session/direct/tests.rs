//! The lane against a small scripted upstream on loopback HTTP: what it
//! sends, and each way an answer can come back.

use std::sync::Mutex;

use axum::{
    Router,
    body::Body,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::Response,
    routing::post,
};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, ClientRequest, ClientResult, LoggingMessageNotificationParam,
    ProgressNotificationParam, ServerNotification, ServerRequest, SubscriptionFilter,
};
use serde_json::{Value, json};

use super::*;
use crate::{
    call::{Arguments, ToolCall},
    http::{HttpRecorder, RecordingClient},
    session::{Downstream, DownstreamLink, shared_http_client},
};

/// What the upstream answers a POST with, and then a GET.
#[derive(Clone, Copy)]
enum Script {
    Json,
    /// Progress for the request's token, then the answer.
    ProgressFirst,
    /// A priming event with an id, then the stream ends; the answer comes
    /// on the GET that resumes from that id.
    CutAfterId,
    /// The stream ends with nothing in it.
    CutEmpty,
    /// JSON, naming a session; a request that names it gets 404 (the
    /// upstream forgot it).
    Forgets,
    /// A listen stream: its first message as given, then a tool list
    /// change for it, then one for another subscription.
    Listens(First),
}

/// The first message of a scripted listen stream.
#[derive(Clone, Copy)]
enum First {
    /// Acknowledges what was asked.
    Acknowledged,
    /// Acknowledges prompt changes too, which were not asked for.
    Wider,
    /// A list change before any acknowledgement.
    Unacknowledged,
}

#[derive(Default)]
struct Seen {
    posts: Vec<(HeaderMap, Value)>,
    resumed_from: Vec<String>,
    /// The headers of each resuming GET.
    resumed_with: Vec<HeaderMap>,
}

struct Upstream {
    script: Script,
    seen: Mutex<Seen>,
}

fn events(events: &[String]) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(events.concat()))
        .unwrap_or_default()
}

fn message(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn answer(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "hi"}]}})
}

async fn posted(
    State(upstream): State<Arc<Upstream>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or_default();
    let id = request["id"].clone();
    let token = request["params"]["_meta"]["progressToken"].clone();
    let names_session = headers.contains_key("mcp-session-id");
    let asked = request["params"]["notifications"].clone();
    upstream.seen.lock().unwrap().posts.push((headers, request));
    match upstream.script {
        Script::Forgets if names_session => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::empty())
            .unwrap_or_default(),
        Script::Forgets => Response::builder()
            .header("content-type", "application/json")
            .header("mcp-session-id", "s1")
            .body(Body::from(answer(&id).to_string()))
            .unwrap_or_default(),
        Script::Json => Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(answer(&id).to_string()))
            .unwrap_or_default(),
        Script::ProgressFirst => events(&[
            message(
                &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1}}),
            ),
            message(&answer(&id)),
        ]),
        Script::CutAfterId => events(&["id: e1\nretry: 5\ndata: \n\n".to_owned()]),
        Script::Listens(first) => {
            let changed = |subscription: &Value| {
                message(
                    &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": subscription}}}),
                )
            };
            let mut accepted = asked;
            if let First::Wider = first {
                accepted["promptsListChanged"] = json!(true);
            }
            let acknowledged = message(&json!({"jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": accepted,
                    "_meta": {"io.modelcontextprotocol/subscriptionId": id}}}));
            let opening = match first {
                First::Unacknowledged => changed(&id),
                First::Acknowledged | First::Wider => acknowledged,
            };
            events(&[opening, changed(&id), changed(&json!("another"))])
        }
        Script::CutEmpty => events(&[]),
    }
}

async fn resumed(State(upstream): State<Arc<Upstream>>, headers: HeaderMap) -> Response {
    let Some(from) = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
    else {
        return Response::builder()
            .status(StatusCode::METHOD_NOT_ALLOWED)
            .body(Body::empty())
            .unwrap_or_default();
    };
    let mut seen = upstream.seen.lock().unwrap();
    seen.resumed_from.push(from.to_owned());
    seen.resumed_with.push(headers.clone());
    drop(seen);
    events(&[message(&answer(&json!(FIRST_ID)))])
}

/// A `DirectClient` for a 2026-07-28 session to an upstream playing `script`.
async fn lane(script: Script) -> (DirectClient, Arc<Upstream>) {
    lane_of(script, ProtocolVersion::V_2026_07_28).await
}

/// A `DirectClient` for a session on `version` to an upstream playing `script`.
async fn lane_of(script: Script, version: ProtocolVersion) -> (DirectClient, Arc<Upstream>) {
    let upstream = Arc::new(Upstream {
        script,
        seen: Mutex::default(),
    });
    let app = Router::new()
        .route("/mcp", post(posted).get(resumed))
        .with_state(upstream.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut client = RecordingClient::new(shared_http_client(), HttpRecorder::default());
    // No standalone stream in these tests.
    client.defer_server_stream().decide(false);
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"));
    let lane = DirectClientParts::new(&client, client.session_ids(), &config)
        .for_version(Some(&version), &ClientConfig::default())
        .unwrap();
    (lane, upstream)
}

fn call(name: &str) -> UpstreamRequest {
    ToolCall::new(name.to_owned(), Arguments::default()).into()
}

#[derive(Debug, Default)]
struct Progressed(Mutex<Vec<ProgressNotificationParam>>);

impl Downstream for Progressed {
    fn progress(&self, progress: ProgressNotificationParam) {
        self.0.lock().unwrap().push(progress);
    }
    fn request(
        &self,
        _: ServerRequest,
    ) -> BoxFuture<'static, Result<ClientResult, rmcp::ErrorData>> {
        Box::pin(async { Err(rmcp::ErrorData::internal_error("not in this test", None)) })
    }
    fn log(&self, _: LoggingMessageNotificationParam) -> Option<usize> {
        None
    }
}

fn text_of(result: &ServerResult) -> Option<String> {
    match result {
        ServerResult::CallToolResult(result) => result
            .content
            .first()
            .and_then(|content| content.as_text())
            .map(|text| text.text.clone()),
        _ => None,
    }
}

#[tokio::test]
async fn a_call_goes_out_as_rmcp_sends_it_and_its_json_answer_comes_back() {
    let (lane, upstream) = lane(Script::Json).await;
    let (id, _) = lane.next_id();
    let answered = lane
        .send(
            call("echo"),
            Stamped::default(),
            id.clone(),
            &SessionHandler::default(),
        )
        .await;
    assert_eq!(
        text_of(&answered.unwrap().into_result()).as_deref(),
        Some("hi")
    );
    let seen = upstream.seen.lock().unwrap();
    let (headers, body) = &seen.posts[0];
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(header("mcp-method"), Some("tools/call"));
    assert_eq!(header("mcp-name"), Some("echo"));
    assert_eq!(body["method"], "tools/call");
    assert_eq!(body["id"], json!(FIRST_ID));
    // Its own ids, never one of rmcp's.
    assert_eq!(lane.next_id().0, NumberOrString::Number(FIRST_ID + 1));
}

/// The session's client context wins over what a call's own `_meta` held
/// (as rmcp's client merges it), and loses to what the send adds: the
/// progress token, and the caller's extra entries.
#[tokio::test]
async fn the_context_wins_over_a_calls_own_meta_and_loses_to_what_is_added() {
    let (lane, upstream) = lane(Script::Json).await;
    let (id, token) = lane.next_id();
    let mut call = ToolCall::new("echo", Arguments::default());
    call.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
        json!({
            "io.modelcontextprotocol/clientInfo": "the call's own loses",
            "own": 1,
            "progressToken": "replaced",
        })
        .as_object()
        .cloned()
        .unwrap(),
    )));
    let mut extra = rmcp::model::RequestMetaObject::new();
    extra
        .0
        .0
        .insert("io.modelcontextprotocol/logLevel".into(), json!("debug"));
    let mut request = UpstreamRequest::from(call);
    let stamp = lane.stamp(&mut request, Some(extra), token, None);
    assert!(
        stamp.context.is_some(),
        "a 2026-07-28 call's context is encoded once"
    );
    lane.send(request, stamp, id, &SessionHandler::default())
        .await
        .unwrap();
    let seen = upstream.seen.lock().unwrap();
    let meta = &seen.posts[0].1["params"]["_meta"];
    assert!(
        meta["io.modelcontextprotocol/clientInfo"].is_object(),
        "{meta}"
    );
    assert_eq!(meta["own"], 1);
    assert_eq!(meta["io.modelcontextprotocol/logLevel"], "debug");
    assert!(meta["progressToken"].is_number(), "{meta}");
}

/// A call made for a downstream client carries that client's
/// capabilities in place of ours, the rest of the context as ever; the
/// next client's calls carry its own.
#[tokio::test]
async fn a_call_for_a_client_carries_its_capabilities_in_the_context() {
    let (lane, upstream) = lane(Script::Json).await;
    let elicits: ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
    let samples: ClientCapabilities = serde_json::from_value(json!({"sampling": {}})).unwrap();
    let handler = SessionHandler::default();
    for client in [None, Some(&elicits), Some(&elicits), Some(&samples)] {
        let (id, token) = lane.next_id();
        let mut request = call("echo");
        let stamp = lane.stamp(&mut request, None, token, client);
        lane.send(request, stamp, id, &handler).await.unwrap();
    }
    let seen = upstream.seen.lock().unwrap();
    let sent: Vec<&Value> = seen
        .posts
        .iter()
        .map(|(_, body)| &body["params"]["_meta"])
        .collect();
    let key = "io.modelcontextprotocol/clientCapabilities";
    let ours = serde_json::to_value(ClientCapabilities::default()).unwrap();
    assert_eq!(sent[0][key], ours);
    assert_eq!(sent[1][key], json!({"elicitation": {"form": {}}}));
    assert_eq!(sent[2][key], sent[1][key]);
    assert_eq!(sent[3][key], json!({"sampling": {}}));
    for meta in &sent {
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert!(
            meta["io.modelcontextprotocol/clientInfo"].is_object(),
            "{meta}"
        );
        assert!(meta["progressToken"].is_number(), "{meta}");
    }
    // A request other than a call carries them in its `_meta` too.
    let mut listing = UpstreamRequest::from(ClientRequest::ListToolsRequest(Default::default()));
    let stamped = lane.stamp(&mut listing, None, lane.next_id().1, Some(&samples));
    assert!(stamped.context.is_none() && stamped.token.is_none());
    let meta =
        serde_json::to_value(rmcp::model::GetMeta::get_meta(listing.relayed().unwrap())).unwrap();
    assert_eq!(meta[key], json!({"sampling": {}}));
}

#[tokio::test]
async fn a_2025_call_carries_the_session_id_and_no_2026_headers() {
    let (lane, upstream) = lane_of(Script::Json, ProtocolVersion::V_2025_11_25).await;
    assert!(lane.legacy());
    let handler = SessionHandler::default();
    let (id, _) = lane.next_id();
    let answered = lane
        .send(call("echo"), Stamped::default(), id, &handler)
        .await;
    assert_eq!(
        text_of(&answered.unwrap().into_result()).as_deref(),
        Some("hi")
    );
    let seen = upstream.seen.lock().unwrap();
    let (headers, _) = &seen.posts[0];
    assert_eq!(
        headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok()),
        Some("2025-11-25")
    );
    assert!(headers.get("mcp-method").is_none());
    assert!(headers.get("mcp-name").is_none());
}

#[tokio::test]
async fn a_forgotten_2025_session_is_handed_back_unsent() {
    let (lane, upstream) = lane_of(Script::Forgets, ProtocolVersion::V_2025_11_25).await;
    let handler = SessionHandler::default();
    // The first answer names the session; the next request carries it.
    let (id, _) = lane.next_id();
    assert!(
        lane.send(call("echo"), Stamped::default(), id, &handler)
            .await
            .is_ok()
    );
    let (id, _) = lane.next_id();
    let again = lane
        .send(call("echo"), Stamped::default(), id, &handler)
        .await;
    assert!(matches!(again, Err(Unsent::Expired)), "{again:?}");
    let seen = upstream.seen.lock().unwrap();
    let session = |n: usize| seen.posts[n].0.get("mcp-session-id").cloned();
    assert_eq!(session(0), None);
    assert_eq!(
        session(1).as_ref().and_then(|v| v.to_str().ok()),
        Some("s1")
    );
}

#[tokio::test]
async fn progress_on_the_stream_reaches_the_downstream_before_the_answer() {
    let (lane, _upstream) = lane(Script::ProgressFirst).await;
    let handler = SessionHandler::default();
    let (id, token) = lane.next_id();
    let progressed = Arc::new(Progressed::default());
    let link = DownstreamLink::new(progressed.clone(), Default::default());
    let _registered = handler.links().register(id.clone(), token.clone(), &link);
    let mut request = call("echo");
    request.meta_mut().set_progress_token(token.clone());
    let answered = lane.send(request, Stamped::default(), id, &handler).await;
    assert_eq!(
        text_of(&answered.unwrap().into_result()).as_deref(),
        Some("hi")
    );
    let progressed = progressed.0.lock().unwrap();
    assert_eq!(progressed.len(), 1);
    assert_eq!(progressed[0].progress_token, token);
}

#[tokio::test]
async fn a_stream_cut_after_an_event_id_is_resumed_from_it() {
    let (lane, upstream) = lane(Script::CutAfterId).await;
    let (id, _) = lane.next_id();
    let answered = lane
        .send(
            call("echo"),
            Stamped::default(),
            id,
            &SessionHandler::default(),
        )
        .await;
    assert_eq!(
        text_of(&answered.unwrap().into_result()).as_deref(),
        Some("hi")
    );
    let seen = upstream.seen.lock().unwrap();
    assert_eq!(seen.resumed_from, ["e1"]);
    // As rmcp's client resumes: with the transport's headers, not the
    // call's own (they describe its POST).
    let (posted, _) = &seen.posts[0];
    assert_eq!(posted.get("mcp-method").unwrap(), "tools/call");
    let resumed = &seen.resumed_with[0];
    assert_eq!(resumed.get("mcp-protocol-version").unwrap(), "2026-07-28");
    assert!(resumed.get("mcp-method").is_none(), "{resumed:?}");
    assert!(resumed.get("mcp-name").is_none(), "{resumed:?}");
    // A POST carries one `Accept` and its `Content-Type`; the GET one
    // `Accept` and no `Content-Type` (it has no body).
    let values = |headers: &HeaderMap, name| headers.get_all(name).iter().count();
    assert_eq!(values(posted, "accept"), 1, "{posted:?}");
    assert_eq!(values(posted, "content-type"), 1, "{posted:?}");
    assert_eq!(values(resumed, "accept"), 1, "{resumed:?}");
    assert_eq!(values(resumed, "content-type"), 0, "{resumed:?}");
}

/// An `http://` upstream's `Host` is made once with the headers a POST's
/// copy is taken from (the plain lane finds it there instead of growing
/// the copy), with room left in it, and a POST carries it once; an
/// `https://` one's is left to reqwest.
#[tokio::test]
async fn an_http_upstreams_host_is_made_once_with_room_in_a_posts_headers() {
    let (lane, upstream) = lane(Script::Json).await;
    let made = lane.parts.post_headers.get(http::header::HOST).cloned();
    // A call's copy has room for what it gains on its way (`ROOM`).
    let copy = lane.headers(&call("echo"));
    assert!(copy.capacity() >= copy.len() + ROOM, "{copy:?}");
    let (id, _) = lane.next_id();
    let handler = SessionHandler::default();
    lane.send(call("echo"), Stamped::default(), id, &handler)
        .await
        .unwrap();
    let seen = upstream.seen.lock().unwrap();
    let posted = &seen.posts[0].0;
    let hosts: Vec<_> = posted.get_all(http::header::HOST).iter().collect();
    assert_eq!(hosts.len(), 1, "{posted:?}");
    assert_eq!(Some(hosts[0]), made.as_ref(), "{posted:?}");
    let client = RecordingClient::new(shared_http_client(), HttpRecorder::default());
    let config = StreamableHttpClientTransportConfig::with_uri("https://example.com/mcp");
    let secure = DirectClientParts::new(&client, client.session_ids(), &config)
        .for_version(
            Some(&ProtocolVersion::V_2026_07_28),
            &ClientConfig::default(),
        )
        .unwrap();
    assert!(secure.parts.post_headers.get(http::header::HOST).is_none());
}

#[tokio::test]
async fn a_stream_that_ends_without_an_answer_or_an_event_id_fails() {
    let (lane, upstream) = lane(Script::CutEmpty).await;
    let (id, _) = lane.next_id();
    let answered = lane
        .send(
            call("echo"),
            Stamped::default(),
            id,
            &SessionHandler::default(),
        )
        .await;
    assert!(matches!(
        answered,
        Err(Unsent::Failed(ServiceError::TransportClosed))
    ));
    assert!(upstream.seen.lock().unwrap().resumed_from.is_empty());
}

fn tool_changes() -> SubscriptionFilter {
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    filter
}

#[tokio::test]
async fn a_listen_stream_opens_on_its_acknowledgement_and_carries_its_own_notifications() {
    let (lane, upstream) = lane(Script::Listens(First::Acknowledged)).await;
    let mut listening = lane.listen(tool_changes()).await.expect("acknowledged");
    assert!(matches!(
        listening.next().await,
        Some(ServerNotification::ToolListChangedNotification(_))
    ));
    // One for another subscription ends it, as rmcp ends it.
    assert!(listening.next().await.is_none());
    let seen = upstream.seen.lock().unwrap();
    let (headers, body) = &seen.posts[0];
    assert_eq!(body["method"], "subscriptions/listen");
    assert_eq!(body["params"]["notifications"]["toolsListChanged"], true);
    assert_eq!(
        headers.get("mcp-method").and_then(|v| v.to_str().ok()),
        Some("subscriptions/listen")
    );
}

#[tokio::test]
async fn a_listen_stream_the_upstream_ends_is_opened_again_and_what_it_missed_reported() {
    use crate::session::{
        ListKind, SessionEvent,
        modern::{Modern, Through},
    };
    let (lane, upstream) = lane(Script::Listens(First::Acknowledged)).await;
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let handler = SessionHandler::new(events);
    let capabilities = rmcp::model::ServerCapabilities::builder()
        .enable_tools()
        .enable_tool_list_changed()
        .build();
    let modern = Modern::default();
    modern
        .listen(Through::Lane(Arc::new(lane)), &capabilities, &handler)
        .await
        .expect("acknowledged");
    // The change it carried; then, once it ended (a notification for
    // another subscription ends it) and was opened again, the change
    // that may have been missed meanwhile.
    for _ in 0..2 {
        let event = tokio::time::timeout(Duration::from_secs(10), received.recv()).await;
        assert!(
            matches!(event, Ok(Some(SessionEvent::ListChanged(ListKind::Tools)))),
            "{event:?}"
        );
    }
    let listens = |upstream: &Upstream| {
        let seen = upstream.seen.lock().unwrap();
        seen.posts
            .iter()
            .filter(|(_, body)| body["method"] == "subscriptions/listen")
            .count()
    };
    assert!(listens(&upstream) >= 2);
    if let Some(reader) = modern.stop() {
        let _ = reader.await;
    }
    // Stopped: not opened again.
    let after = listens(&upstream);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(listens(&upstream), after);
}

#[tokio::test]
async fn a_listen_stream_acknowledged_for_more_or_not_at_all_is_refused() {
    for first in [First::Wider, First::Unacknowledged] {
        let (lane, _upstream) = lane(Script::Listens(first)).await;
        assert!(matches!(
            lane.listen(tool_changes()).await,
            Err(ServiceError::UnexpectedResponse)
        ));
    }
}

#[tokio::test]
async fn a_2026_listing_leaves_out_tools_with_unusable_annotations_and_keeps_marked_ones() {
    let (lane, upstream) = lane(Script::Json).await;
    let tool = |name: &str, schema: Value| {
        Tool::new(
            name.to_owned(),
            "",
            Arc::new(schema.as_object().cloned().unwrap_or_default()),
        )
    };
    let mut tools = vec![
        tool("echo", json!({"type": "object"})),
        tool("root", json!({"type": "object", "x-mcp-header": "Root"})),
        tool(
            "region",
            json!({"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
        ),
    ];
    lane.keep_usable(&mut tools);
    let names: Vec<_> = tools.iter().map(|tool| tool.name.to_string()).collect();
    assert_eq!(names, ["echo", "region"]);
    // A call of the marked tool carries its argument as a header.
    let mut params = CallToolRequestParams::new("region");
    params.arguments = json!({"region": "eu"}).as_object().cloned();
    let request = UpstreamRequest::from(ToolCall::from(params));
    let (id, _) = lane.next_id();
    assert!(
        lane.send(request, Stamped::default(), id, &SessionHandler::default())
            .await
            .is_ok()
    );
    let seen = upstream.seen.lock().unwrap();
    assert_eq!(
        seen.posts[0]
            .0
            .get("mcp-param-region")
            .and_then(|v| v.to_str().ok()),
        Some("eu")
    );
}

#[test]
fn its_debug_output_shows_no_url_header_or_token() {
    let client = RecordingClient::new(shared_http_client(), HttpRecorder::default());
    let mut headers = HashMap::new();
    headers.insert(
        http::HeaderName::from_static("x-api-key"),
        HeaderValue::from_static("canary-header"),
    );
    let config =
        StreamableHttpClientTransportConfig::with_uri("http://127.0.0.1:1/mcp?key=canary-query")
            .auth_header("canary-token")
            .custom_headers(headers);
    let lane = DirectClientParts::new(&client, client.session_ids(), &config)
        .for_version(
            Some(&ProtocolVersion::V_2026_07_28),
            &ClientConfig::default(),
        )
        .unwrap();
    let shown = format!("{lane:?}");
    assert!(!shown.contains("canary"), "{shown}");
}

#[tokio::test]
async fn a_2025_session_sends_only_calls_of_listed_plain_tools_here() {
    let (legacy, _upstream) = lane_of(Script::Json, ProtocolVersion::V_2025_11_25).await;
    let tool = |name: &str, schema: Value| {
        Tool::new(
            name.to_owned(),
            "",
            Arc::new(schema.as_object().cloned().unwrap_or_default()),
        )
    };
    legacy.listed(&[
        tool("echo", json!({"type": "object"})),
        tool(
            "region",
            json!({"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
        ),
    ]);
    assert!(legacy.takes(&call("echo")));
    assert!(!legacy.takes(&call("region")));
    assert!(!legacy.takes(&call("unlisted")));
    assert!(!legacy.takes(&ClientRequest::PingRequest(Default::default()).into()));
    // A 2026-07-28 session sends everything here.
    let (modern, _upstream) = lane(Script::Json).await;
    assert!(modern.takes(&call("unlisted")));
    assert!(modern.takes(&ClientRequest::PingRequest(Default::default()).into()));
}

/// A listed tool's headers are built once, at the listing: its calls carry
/// the same headers as those built per call, and another tool's calls their
/// own name.
#[tokio::test]
async fn a_listed_tools_calls_carry_the_headers_built_at_the_listing() {
    let (lane, upstream) = lane(Script::Json).await;
    let send = |name: &'static str| {
        let lane = &lane;
        async move {
            let (id, _) = lane.next_id();
            lane.send(
                call(name),
                Stamped::default(),
                id,
                &SessionHandler::default(),
            )
            .await
            .unwrap();
        }
    };
    send("echo").await;
    lane.listed(&[Tool::new(
        "echo".to_owned(),
        "",
        Arc::new(json!({"type": "object"}).as_object().cloned().unwrap()),
    )]);
    send("echo").await;
    send("other").await;
    let seen = upstream.seen.lock().unwrap();
    let mcp_headers = |n: usize| {
        let mut pairs: Vec<(String, String)> = seen.posts[n]
            .0
            .iter()
            .filter(|(name, _)| name.as_str().starts_with("mcp-"))
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect();
        pairs.sort();
        pairs
    };
    let built = mcp_headers(0);
    assert_eq!(
        built,
        [
            ("mcp-method".to_owned(), "tools/call".to_owned()),
            ("mcp-name".to_owned(), "echo".to_owned()),
            ("mcp-protocol-version".to_owned(), "2026-07-28".to_owned()),
        ]
    );
    assert_eq!(mcp_headers(1), built, "prepared at the listing");
    assert_eq!(
        mcp_headers(2)
            .iter()
            .find(|(name, _)| name == "mcp-name")
            .map(|(_, value)| value.as_str()),
        Some("other")
    );
}
