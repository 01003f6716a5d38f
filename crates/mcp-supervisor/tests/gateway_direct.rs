//! The gateway's direct path (docs/DECISIONS.md #78, #81): a plain
//! `tools/call`, of a 2025 session or of a 2026-07-28 client, is answered by
//! the HTTP endpoint without rmcp's server, the same as through it;
//! everything else still goes through rmcp. Real loopback HTTP, raw JSON-RPC
//! (so the answers can be compared byte for byte), a real test server
//! upstream.

mod support;

use std::time::Duration;

use mcp_test_support::{TestServer, TestServerOptions, eventually};
use reqwest::header;
use serde_json::{Value, json};
use support::{raw::*, *};

/// A test server, and a gateway (`settings` first) whose connection `a`
/// points at it.
async fn gateway(settings: &str) -> (TestServer, ServedGateway) {
    gateway_with(TestServerOptions::default(), settings).await
}

async fn gateway_with(options: TestServerOptions, settings: &str) -> (TestServer, ServedGateway) {
    let upstream = TestServer::start(options).await.unwrap();
    let toml = format!("{settings}{}", http_connection("a", &upstream.url(), ""));
    let gateway = ServedGateway::start(config(&toml)).await;
    (upstream, gateway)
}

/// A conformance test server, and a gateway whose connection `c` points at
/// it.
async fn conformance_gateway(
    server: mcp_test_support::conformance::ConformanceServer,
) -> (
    mcp_test_support::conformance::ConformanceHttpServer,
    ServedGateway,
) {
    let upstream = mcp_test_support::conformance::ConformanceHttpServer::start(
        ([127, 0, 0, 1], 0).into(),
        server,
    )
    .await
    .unwrap();
    let gateway = ServedGateway::start(config(&http_connection("c", &upstream.url(), ""))).await;
    (upstream, gateway)
}

/// The messages of a call of `test_tool_with_progress` with token `p-3`,
/// answered directly and through rmcp: the same three progress
/// notifications, with the client's token, before the answer to request 3
/// (which names the upstream's own token, so it differs).
fn assert_progress_before_answer(direct: &[Value], rmcp: &[Value]) {
    assert_eq!(direct[..3], rmcp[..3]);
    assert_eq!(direct.len(), 4, "{direct:#?}");
    for progress in &direct[..3] {
        assert_eq!(progress["method"], "notifications/progress");
        assert_eq!(progress["params"]["progressToken"], "p-3");
    }
    let names_token = |answer: &Value| {
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        text.starts_with("Progress reported on token ")
    };
    assert!(
        names_token(&direct[3]) && names_token(&rmcp[3]),
        "{direct:#?}"
    );
    assert_eq!(direct[3]["id"], 3);
}

/// The JSON-RPC answer to `message` in `session`.
async fn ask(http: &reqwest::Client, url: &str, session: &str, message: &Value) -> Value {
    exchange(http, url, session, message).await.pop().unwrap()
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// The same call with an (empty) `_meta`, which keeps it on rmcp's path.
fn through_rmcp(mut call: Value) -> Value {
    call["params"]["_meta"] = json!({});
    call
}

/// A plain call is answered directly, as plain JSON, with what rmcp would
/// have answered: the same result (no `resultType` for a 2025 session), the
/// same tool error, the same JSON-RPC error for an unknown tool. A call with
/// `_meta`, and every call of a client that declared sampling, still goes
/// through rmcp.
#[test]
fn a_plain_call_is_answered_directly_as_rmcp_answers_it() {
    run(|| async {
        let (_upstream, gateway) = gateway("").await;
        let http = http();
        let id = session(&http, &gateway.url, json!({})).await;
        let calls = [
            call(1, "a__echo", json!({"text": "héllo"})),
            call(2, "a__fail", json!({"message": "boom"})),
            call(3, "a__nope", json!({})),
            call(4, "a__add", json!({"a": 2, "b": 40})),
        ];
        for (n, plain) in calls.iter().enumerate() {
            let direct = post(&http, &gateway.url, &id, plain).send().await.unwrap();
            assert_eq!(direct.headers()[header::CONTENT_TYPE], "application/json");
            let direct: Value = direct.json().await.unwrap();
            assert_eq!(gateway.state.direct_calls(), n as u64 + 1, "{plain}");
            let rmcp = ask(&http, &gateway.url, &id, &through_rmcp(plain.clone())).await;
            assert_eq!(
                gateway.state.direct_calls(),
                n as u64 + 1,
                "{plain} went direct with _meta"
            );
            assert_eq!(direct, rmcp, "{plain}");
            assert_eq!(direct["id"], plain["id"]);
        }
        let echoed = ask(&http, &gateway.url, &id, &calls[0]).await;
        assert_eq!(echoed["result"]["content"][0]["text"], "héllo");
        assert!(echoed["result"].get("resultType").is_none(), "{echoed}");

        // A client that can be asked for sampling: rmcp's.
        let asking = session(&http, &gateway.url, json!({"sampling": {}})).await;
        let before = gateway.state.direct_calls();
        let added = ask(&http, &gateway.url, &asking, &calls[3]).await;
        assert_eq!(added["result"]["content"][0]["text"], "42");
        assert_eq!(gateway.state.direct_calls(), before);
    });
}

/// A direct call with a progress token (rmcp's client sends one with every
/// request) gets the upstream's progress on its own answer, with its token,
/// before the result: the same messages as through rmcp, for an upstream of
/// either generation.
#[test]
fn a_direct_calls_progress_comes_before_its_answer() {
    run(|| async {
        use mcp_test_support::conformance::ConformanceServer;
        for server in [ConformanceServer::new(), ConformanceServer::legacy_only()] {
            let (_upstream, gateway) = conformance_gateway(server).await;
            let http = http();
            let id = session(&http, &gateway.url, json!({})).await;
            let mut plain = call(3, "c__test_tool_with_progress", json!({}));
            plain["params"]["_meta"] = json!({"progressToken": "p-3"});
            let direct = exchange(&http, &gateway.url, &id, &plain).await;
            assert_eq!(gateway.state.direct_calls(), 1);
            // A reserved `_meta` key the gateway does not read keeps the
            // call on rmcp's path; another's key does not.
            let mut vendor = plain.clone();
            vendor["params"]["_meta"]["example.com/note"] = json!({"a": [1]});
            let passed_over = exchange(&http, &gateway.url, &id, &vendor).await;
            assert_eq!(gateway.state.direct_calls(), 2);
            assert_progress_before_answer(&direct, &passed_over);
            let mut other = plain.clone();
            other["params"]["_meta"]["io.modelcontextprotocol/note"] = json!(1);
            let rmcp = exchange(&http, &gateway.url, &id, &other).await;
            assert_eq!(gateway.state.direct_calls(), 2);
            assert_progress_before_answer(&direct, &rmcp);
            assert!(
                direct[3]["result"].get("resultType").is_none(),
                "{:#}",
                direct[3]
            );
        }
    });
}

/// `notifications/cancelled` for a direct call cancels it upstream (a 2025
/// upstream is told; the held call never completes), and its POST ends at
/// once without an answer, as a call cancelled through rmcp does.
#[test]
fn a_cancelled_direct_call_is_cancelled_upstream() {
    run(|| async {
        let (upstream, gateway) = gateway_with(TestServerOptions::legacy(), "").await;
        let http = http();
        let id = session(&http, &gateway.url, json!({})).await;
        upstream.control().hold("echo");
        for (n, held) in [
            call(8, "a__echo", json!({"text": "wait"})),
            through_rmcp(call(9, "a__echo", json!({"text": "wait"}))),
        ]
        .into_iter()
        .enumerate()
        {
            let sent = tokio::spawn(post(&http, &gateway.url, &id, &held).send());
            // The test server's hold does not end on a cancellation: the
            // first call stays held.
            eventually!(upstream.control().held() == n + 1);
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": held["id"], "reason": "changed my mind"}});
            let cancelled = post(&http, &gateway.url, &id, &cancel)
                .send()
                .await
                .unwrap();
            assert_eq!(cancelled.status(), 202);
            let ended = tokio::time::timeout(Duration::from_secs(5), async {
                let response = sent.await.unwrap().unwrap();
                (response.status(), response.text().await.unwrap())
            })
            .await
            .expect("the cancelled call's POST ends at once");
            assert_eq!(ended.0, 200);
            assert!(!ended.1.contains("jsonrpc"), "{held}: {}", ended.1);
            eventually!(upstream.requests("notifications/cancelled") == n as u64 + 1);
        }
        assert_eq!(gateway.state.direct_calls(), 1);
        assert_eq!(upstream.completed_calls("echo"), 0);
    });
}

/// Direct calls count as the session's activity: a session used only for
/// them outlives its idle timeout, and rmcp still knows it.
#[test]
fn direct_calls_keep_their_session_alive() {
    // Paused time: the gaps between calls are exactly 300 ms of the 1 s
    // idle timeout, however slow each call is on a loaded machine.
    run_paused(|| async {
        let (_upstream, gateway) = gateway("[gateway]\nsession_idle_timeout = \"1s\"\n").await;
        let http = http();
        let id = session(&http, &gateway.url, json!({})).await;
        for n in 0..8 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let sum = ask(
                &http,
                &gateway.url,
                &id,
                &call(n, "a__add", json!({"a": n, "b": 1})),
            )
            .await;
            assert_eq!(sum["result"]["content"][0]["text"], (n + 1).to_string());
        }
        assert_eq!(gateway.state.direct_calls(), 8);
        let list = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/list"});
        let listed = ask(&http, &gateway.url, &id, &list).await;
        assert!(listed["result"]["tools"].is_array(), "{listed}");
    });
}

/// The direct path keeps rmcp's checks: a call from a foreign `Origin`, or
/// one a client cannot accept as SSE, gets rmcp's refusal.
#[test]
fn a_direct_call_keeps_the_origin_and_accept_checks() {
    run(|| async {
        let (_upstream, gateway) = gateway("").await;
        let http = http();
        let id = session(&http, &gateway.url, json!({})).await;
        let plain = call(1, "a__echo", json!({"text": "x"}));
        let foreign = post(&http, &gateway.url, &id, &plain)
            .header(header::ORIGIN, "https://evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), 403);
        let json_only = http
            .post(&gateway.url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .header("mcp-session-id", &id)
            .body(plain.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(json_only.status(), 406);
        assert_eq!(gateway.state.direct_calls(), 0);
    });
}

const MODERN: &str = "2026-07-28";

/// The `_meta` of a 2026-07-28 request from a client that declared
/// `capabilities`, as rmcp's client sends it (SEP-2575).
fn client_context(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "direct-test", "version": "0"},
    })
}

/// A 2026-07-28 call of a client that declared nothing.
fn modern_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments, "_meta": client_context(json!({}))}})
}

/// The same call with a reserved `_meta` key the gateway does not read,
/// which keeps it on rmcp's path (rmcp ignores it).
fn modern_through_rmcp(mut call: Value) -> Value {
    call["params"]["_meta"]["io.modelcontextprotocol/note"] = json!(1);
    call
}

/// A session-less POST of `message` with the headers a 2026-07-28 client
/// sends (SEP-2243: the version, the method and the name).
fn post_modern(http: &reqwest::Client, url: &str, message: &Value) -> reqwest::RequestBuilder {
    let request = http
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", message["method"].as_str().unwrap());
    match message["params"]["name"].as_str() {
        Some(name) => request.header("mcp-name", name),
        None => request,
    }
    .body(message.to_string())
}

/// What `request` is answered: the HTTP status, the content type, and the
/// JSON-RPC messages, the answer last.
async fn answered(request: reqwest::RequestBuilder) -> (u16, String, Vec<Value>) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    (status, kind, messages(&response.text().await.unwrap()))
}

/// A 2026-07-28 client's plain call is answered directly with what rmcp
/// would have answered: the same status, content type and body (a result
/// with `resultType: complete`, a tool error, -32602 for an unknown tool).
/// A call whose SEP-2243 headers do not match its body, or that carries
/// another `Mcp-*` header, another `_meta` key or a retry's fields, goes to
/// rmcp, which checks it as before.
#[test]
fn a_2026_call_is_answered_directly_as_rmcp_answers_it() {
    run(|| async {
        let (_upstream, gateway) = gateway("").await;
        let http = http();
        let url = &gateway.url;
        let calls = [
            modern_call(1, "a__echo", json!({"text": "héllo"})),
            modern_call(2, "a__fail", json!({"message": "boom"})),
            modern_call(3, "a__nope", json!({})),
            modern_call(4, "a__add", json!({"a": 2, "b": 40})),
        ];
        for (n, plain) in calls.iter().enumerate() {
            let direct = answered(post_modern(&http, url, plain)).await;
            assert_eq!(gateway.state.direct_calls(), n as u64 + 1, "{plain}");
            let rmcp = answered(post_modern(&http, url, &modern_through_rmcp(plain.clone()))).await;
            assert_eq!(
                gateway.state.direct_calls(),
                n as u64 + 1,
                "{plain} went direct"
            );
            assert_eq!(direct, rmcp, "{plain}");
            assert_eq!(direct.1, "application/json");
        }
        let (_, _, echoed) = answered(post_modern(&http, url, &calls[0])).await;
        assert_eq!(echoed[0]["result"]["content"][0]["text"], "héllo");
        assert_eq!(echoed[0]["result"]["resultType"], "complete", "{echoed:?}");

        let direct_so_far = gateway.state.direct_calls();
        let echo = &calls[0];
        let mut retry = echo.clone();
        retry["params"]["requestState"] = json!("forged");
        let mut other_version = echo.clone();
        other_version["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] =
            json!("2025-11-25");
        let refused = [
            // Another tool's name in `Mcp-Name`, no `Mcp-Method`, the
            // headers twice: rmcp's 400.
            (
                post_modern(&http, url, echo).header("mcp-name", "a__add"),
                400,
            ),
            (
                http.post(url)
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::ACCEPT, "application/json, text/event-stream")
                    .header("mcp-protocol-version", MODERN)
                    .header("mcp-name", "a__echo")
                    .body(echo.to_string()),
                400,
            ),
            (
                post_modern(&http, url, echo).header("mcp-method", "tools/call"),
                400,
            ),
            // Versions that disagree: rmcp's 400.
            (post_modern(&http, url, &other_version), 400),
            // A retry's `requestState` that does not open: -32602.
            (post_modern(&http, url, &retry), 200),
            // An `Mcp-Param-*` header the tool does not mark: rmcp lets it be.
            (
                post_modern(&http, url, echo).header("mcp-param-region", "eu"),
                200,
            ),
        ];
        for (n, (request, status)) in refused.into_iter().enumerate() {
            let (got, _, answer) = answered(request).await;
            assert_eq!(got, status, "case {n}: {answer:?}");
            assert_eq!(
                gateway.state.direct_calls(),
                direct_so_far,
                "case {n} went direct"
            );
        }
    });
}

/// A large plain call (a body over `LARGE_BODY_BYTES`, which waits for a
/// large-request permit) takes the direct path too, of a 2025 session and
/// of a 2026-07-28 client, and is answered as rmcp answers it: rmcp's own
/// parse of it would hold several buffered copies of its arguments at once
/// (docs/DECISIONS.md #109).
#[test]
fn a_large_plain_call_is_answered_directly_too() {
    run(|| async {
        let (_upstream, gateway) = gateway("").await;
        let http = http();
        let big = "x".repeat(mcp_supervisor::gateway::LARGE_BODY_BYTES);
        let id = session(&http, &gateway.url, json!({})).await;
        let plain = call(1, "a__echo", json!({ "text": big }));
        let direct = ask(&http, &gateway.url, &id, &plain).await;
        assert_eq!(gateway.state.direct_calls(), 1, "a large call went to rmcp");
        let rmcp = ask(&http, &gateway.url, &id, &through_rmcp(plain)).await;
        assert_eq!(gateway.state.direct_calls(), 1);
        assert_eq!(direct, rmcp);
        assert_eq!(direct["result"]["content"][0]["text"].as_str(), Some(&*big));

        let modern = modern_call(2, "a__echo", json!({ "text": big }));
        let direct = answered(post_modern(&http, &gateway.url, &modern)).await;
        assert_eq!(
            gateway.state.direct_calls(),
            2,
            "a large 2026-07-28 call went to rmcp"
        );
        let rmcp = answered(post_modern(
            &http,
            &gateway.url,
            &modern_through_rmcp(modern),
        ))
        .await;
        assert_eq!(gateway.state.direct_calls(), 2);
        assert_eq!(direct, rmcp);
        assert_eq!(
            direct.2[0]["result"]["content"][0]["text"].as_str(),
            Some(&*big)
        );
    });
}

/// A direct call's arguments reach the upstream as the client sent them,
/// byte for byte (key order, number text, whitespace), from a 2025 session
/// and from a 2026-07-28 client: the gateway checks them (an object every
/// reader reads alike, `shared_standing.rs` for those it refuses) but never
/// parses them into a tree (docs/DECISIONS.md #112).
#[test]
fn a_direct_calls_arguments_reach_the_upstream_as_sent() {
    run(|| async {
        let (upstream, gateway) = gateway("").await;
        let http = http();
        let url = &gateway.url;
        let arguments =
            r#"{"text":"as sent","z":1.0,"a":[1e2, 12345678901234567890, -0],"y":"\u00e9"}"#;
        let raw = |id: u64, meta: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"a__echo","arguments":{arguments}{meta}}}}}"#
            )
        };
        let id = session(&http, url, json!({})).await;
        let legacy = post(&http, url, &id, &json!({})).body(raw(7, ""));
        let answer = messages(&legacy.send().await.unwrap().text().await.unwrap());
        assert_eq!(answer[0]["result"]["content"][0]["text"], "as sent");
        assert_eq!(gateway.state.direct_calls(), 1);
        assert_eq!(upstream.seen_arguments(), [arguments]);

        let meta = format!(r#","_meta":{}"#, client_context(json!({})));
        let modern =
            post_modern(&http, url, &modern_call(8, "a__echo", json!({}))).body(raw(8, &meta));
        let (status, _, answer) = answered(modern).await;
        assert_eq!(status, 200, "{answer:?}");
        assert_eq!(answer[0]["result"]["content"][0]["text"], "as sent");
        assert_eq!(gateway.state.direct_calls(), 2);
        assert_eq!(upstream.seen_arguments(), [arguments, arguments]);
    });
}

/// A 2026-07-28 direct call's progress and log messages (at the level its
/// `_meta` asks for) come before its answer on its own event stream, the
/// same messages as through rmcp, for an upstream of either generation. A
/// tool that marks an argument for a header (`x-mcp-header`) is rmcp's to
/// check.
#[test]
fn a_2026_direct_calls_progress_and_logs_come_before_its_answer() {
    run(|| async {
        use mcp_test_support::conformance::ConformanceServer;
        for server in [ConformanceServer::new(), ConformanceServer::legacy_only()] {
            let (_upstream, gateway) = conformance_gateway(server).await;
            let http = http();
            let url = &gateway.url;

            let mut progress = modern_call(3, "c__test_tool_with_progress", json!({}));
            progress["params"]["_meta"]["progressToken"] = json!("p-3");
            let (_, kind, direct) = answered(post_modern(&http, url, &progress)).await;
            assert_eq!(gateway.state.direct_calls(), 1);
            let (_, _, rmcp) =
                answered(post_modern(&http, url, &modern_through_rmcp(progress))).await;
            assert_eq!(gateway.state.direct_calls(), 1);
            assert_eq!(kind, "text/event-stream");
            assert_progress_before_answer(&direct, &rmcp);
            assert_eq!(direct[3]["result"]["resultType"], "complete");

            let mut logging = modern_call(4, "c__test_tool_with_logging", json!({}));
            logging["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
            let (_, _, direct) = answered(post_modern(&http, url, &logging)).await;
            assert_eq!(gateway.state.direct_calls(), 2);
            let (_, _, rmcp) =
                answered(post_modern(&http, url, &modern_through_rmcp(logging))).await;
            assert_eq!(direct, rmcp);
            assert!(
                direct[..direct.len() - 1]
                    .iter()
                    .all(|message| message["method"] == "notifications/message"),
                "{direct:#?}"
            );
            assert!(direct.len() > 1, "no log messages: {direct:#?}");

            let header_param = modern_call(5, "c__test_header_param", json!({"region": "eu"}));
            let (status, _, answer) = answered(post_modern(&http, url, &header_param)).await;
            assert_eq!(status, 400, "no Mcp-Param-Region: {answer:?}");
            let with_header =
                post_modern(&http, url, &header_param).header("mcp-param-region", "eu");
            let (status, _, answer) = answered(with_header).await;
            assert_eq!(status, 200);
            assert_eq!(answer[0]["result"]["content"][0]["text"], "region: eu");
            assert_eq!(gateway.state.direct_calls(), 2);
        }
    });
}

/// An upstream's question to a 2026-07-28 client makes a direct call's
/// answer `input_required` (a 2025 upstream's elicitation request, kept
/// waiting; a 2026-07-28 upstream's own round, its state sealed); the
/// client's retry with its answer goes through rmcp and completes it.
#[test]
fn a_2026_direct_call_asks_its_client_through_input_required() {
    run(|| async {
        use mcp_test_support::conformance::ConformanceServer;
        let cases = [
            (ConformanceServer::legacy_only(), "c__test_elicitation"),
            (
                ConformanceServer::new(),
                "c__test_input_required_result_elicitation",
            ),
        ];
        for (server, tool) in cases {
            let (_upstream, gateway) = conformance_gateway(server).await;
            let http = http();
            let url = &gateway.url;
            let mut first = modern_call(6, tool, json!({"message": "who are you?"}));
            first["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
                json!({"elicitation": {}});
            let (status, _, asked) = answered(post_modern(&http, url, &first)).await;
            assert_eq!(gateway.state.direct_calls(), 1, "{tool}");
            assert_eq!(status, 200);
            let asked = &asked[0]["result"];
            assert_eq!(asked["resultType"], "input_required", "{tool}: {asked}");
            let requests = asked["inputRequests"].as_object().unwrap();
            assert_eq!(requests.len(), 1, "{tool}: {asked}");
            let (key, _) = requests.iter().next().unwrap();
            let mut retry = first.clone();
            retry["params"]["requestState"] = asked["requestState"].clone();
            retry["params"]["inputResponses"] = json!({key: {
                "action": "accept",
                "content": {"username": "ada", "email": "ada@example.com", "name": "ada"},
            }});
            let (status, _, done) = answered(post_modern(&http, url, &retry)).await;
            assert_eq!(status, 200);
            assert_eq!(gateway.state.direct_calls(), 1, "the retry is rmcp's");
            let text = done[0]["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            assert!(text.contains("ada"), "{tool}: {done:?}");
        }
    });
}

/// A 2026-07-28 client that declared none of sampling, elicitation and
/// roots can be asked nothing, so its call runs in one round: a 2025
/// upstream's question is refused at once, and a 2026-07-28 upstream's
/// refusal to ask it is what rmcp's path answers too.
#[test]
fn a_2026_direct_call_whose_client_can_be_asked_nothing_runs_in_one_round() {
    run(|| async {
        use mcp_test_support::conformance::ConformanceServer;
        let (_upstream, gateway) = conformance_gateway(ConformanceServer::legacy_only()).await;
        let http = http();
        let call = modern_call(6, "c__test_elicitation", json!({"message": "who?"}));
        let (status, _, done) = answered(post_modern(&http, &gateway.url, &call)).await;
        let said = done[0].to_string();
        assert_eq!(status, 200, "{said}");
        assert_eq!(gateway.state.direct_calls(), 1);
        assert!(said.contains("does not support elicitation"), "{said}");
        assert_ne!(done[0]["result"]["resultType"], "input_required", "{said}");

        // A 2026-07-28 upstream sees the client's own context, and refuses
        // to ask a client that declared nothing, as rmcp's path does.
        let (_upstream, gateway) = conformance_gateway(ConformanceServer::new()).await;
        let tool = "c__test_input_required_result_elicitation";
        let call = modern_call(7, tool, json!({"message": "who are you?"}));
        let (status, _, refused) = answered(post_modern(&http, &gateway.url, &call)).await;
        assert_eq!(gateway.state.direct_calls(), 1);
        assert_eq!(status, 400, "{refused:?}");
        assert_eq!(refused[0]["error"]["code"], -32021, "{refused:?}");
        let through_rmcp = modern_through_rmcp(call);
        let (status, _, by_rmcp) = answered(post_modern(&http, &gateway.url, &through_rmcp)).await;
        assert_eq!(gateway.state.direct_calls(), 1);
        assert_eq!((status, &by_rmcp[0]["error"]), (400, &refused[0]["error"]));
    });
}

/// A 2026-07-28 client that goes away during its direct call (it has no
/// other way to cancel) cancels the call upstream: a 2025 upstream is told.
#[test]
fn a_2026_direct_call_whose_client_goes_away_is_cancelled_upstream() {
    run(|| async {
        let (upstream, gateway) = gateway_with(TestServerOptions::legacy(), "").await;
        upstream.control().hold("echo");
        let held = modern_call(8, "a__echo", json!({"text": "wait"}));
        let sent = tokio::spawn(post_modern(&http(), &gateway.url, &held).send());
        eventually!(upstream.control().held() == 1);
        assert_eq!(gateway.state.direct_calls(), 1);
        sent.abort();
        eventually!(upstream.requests("notifications/cancelled") == 1);
        assert_eq!(upstream.completed_calls("echo"), 0);
    });
}

/// A tool's structured content reaches a direct call's client as the
/// upstream wrote it (docs/DECISIONS.md #184): FastMCP's keys in the tool's
/// own order, not read into a tree and written again (which would sort
/// them), for a 2025 session and a 2026-07-28 client alike; rmcp's path
/// reads it into rmcp's type, with the same meaning.
#[test]
fn structured_content_reaches_the_client_as_the_upstream_wrote_it() {
    run(|| async {
        let (_python, url) = python_http_server().await;
        let toml = format!(
            "[supervisor]\ncall_timeout = \"30s\"\nconnect_timeout = \"30s\"\n{}",
            http_connection("py", &url, "")
        );
        let gateway = ServedGateway::start(config(&toml)).await;
        let http = http();
        let as_written = r#""structuredContent":{"name":"Ada","greeting":"Hello, Ada!","letters":3,"ratio":0.5}"#;
        let arguments = json!({"name": "Ada"});

        let session = session(&http, &gateway.url, json!({})).await;
        let sent = post(
            &http,
            &gateway.url,
            &session,
            &call(1, "py__profile", arguments.clone()),
        );
        let body = sent.send().await.unwrap().text().await.unwrap();
        assert!(body.contains(as_written), "{body}");

        let modern = modern_call(2, "py__profile", arguments.clone());
        let body = post_modern(&http, &gateway.url, &modern)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(body.contains(as_written), "{body}");
        assert_eq!(gateway.state.direct_calls(), 2);

        let by_rmcp = through_rmcp(call(3, "py__profile", arguments));
        let answer = exchange(&http, &gateway.url, &session, &by_rmcp).await;
        assert_eq!(gateway.state.direct_calls(), 2);
        let structured = &answer.last().unwrap()["result"]["structuredContent"];
        assert_eq!(
            structured,
            &json!({"name": "Ada", "greeting": "Hello, Ada!", "letters": 3, "ratio": 0.5})
        );
    });
}
