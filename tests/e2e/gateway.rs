//! `mcp-supervisor serve` as users run it: a real MCP client (rmcp's own
//! client) talking to the gateway, upstreams as separate processes.

use std::time::Duration;

use e2e::{HttpUpstream, Served};
use mcp_test_support::wait_until_async;
use rmcp::{
    ServiceExt,
    model::{CallToolRequestParams, CallToolResult},
    service::{RoleClient, RunningService},
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

/// How long a test waits for what it waits for (generous: a loaded 2-core
/// machine); never a sleep, always until the thing is seen.
const WITHIN: Duration = Duration::from_secs(30);

async fn connect(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url))
        .await
        .expect("the gateway answers initialize")
}

async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = arguments.as_object().cloned();
    client.call_tool(params).await.expect("a tool result")
}

fn text(result: &CallToolResult) -> &str {
    &result.content[0].as_text().expect("text content").text
}

fn connection(name: &str, upstream: &HttpUpstream, extra: &str) -> String {
    format!(
        "[connections.{name}]\ntransport = \"http\"\nurl = \"{}\"\n{extra}\n",
        upstream.url
    )
}

async fn tool_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn namespaced_gateway_lists_and_calls_upstream_tools() {
    let upstream = HttpUpstream::start();
    let served = Served::start(&connection("up", &upstream, ""));
    let client = connect(&served.gateway_url).await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"up__echo".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"list_mcps".to_owned()),
        "namespaced only: {names:?}"
    );
    let result = call(&client, "up__add", json!({"a": 2, "b": 3})).await;
    assert_eq!((text(&result), result.is_error), ("5", Some(false)));
    // A tool error passes through unchanged.
    let result = call(&client, "up__fail", json!({"message": "boom"})).await;
    assert_eq!((text(&result), result.is_error), ("boom", Some(true)));
    // An unknown tool is a JSON-RPC error, and the gateway keeps serving.
    let mut params = CallToolRequestParams::new("up__nope");
    params.arguments = None;
    assert!(client.call_tool(params).await.is_err());
    let result = call(&client, "up__echo", json!({"text": "still here"})).await;
    assert_eq!(text(&result), "still here");
}

#[tokio::test]
async fn meta_and_both_expose_modes() {
    let upstream = HttpUpstream::start();
    let meta = Served::start(&format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"meta\"\n{}",
        connection("up", &upstream, "notes = \"test upstream\"")
    ));
    let client = connect(&meta.gateway_url).await;
    assert_eq!(
        tool_names(&client).await,
        vec![
            "call_mcp",
            "describe_mcp",
            "get_mcp_tool_schema",
            "list_mcps",
            "search_mcp_tools"
        ]
    );
    let listed: Value =
        serde_json::from_str(text(&call(&client, "list_mcps", json!({})).await)).unwrap();
    assert_eq!(listed["connections"][0]["name"], "up");
    assert_eq!(listed["connections"][0]["description"], "test upstream");
    let result = call(
        &client,
        "call_mcp",
        json!({"connection": "up", "tool": "add", "arguments": {"a": 1, "b": 1}}),
    )
    .await;
    assert_eq!(text(&result), "2");

    let both = Served::start(&format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"both\"\n{}",
        connection("up", &upstream, "")
    ));
    let client = connect(&both.gateway_url).await;
    let names = tool_names(&client).await;
    assert!(
        names.contains(&"list_mcps".to_owned()) && names.contains(&"up__echo".to_owned()),
        "{names:?}"
    );
}

#[tokio::test]
async fn a_503_forever_upstream_parks_and_reset_revives_it() {
    let upstream = HttpUpstream::start();
    let served = Served::start(&connection("up", &upstream, ""));
    let client = connect(&served.gateway_url).await;
    assert_eq!(
        text(&call(&client, "up__echo", json!({"text": "hi"})).await),
        "hi"
    );
    // Every lookup answers 503 from now on.
    let http = reqwest::Client::new();
    let control = upstream.url.replace("/mcp", "/_control/faults");
    http.post(&control)
        .json(&json!([{"when": {"tool": "lookup"}, "fault": {"kind": "status", "status": 503}}]))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    let result = call(&client, "up__lookup", json!({"key": "k"})).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        text(&result),
        "MCP connection 'up' is temporarily unavailable (kind=server, status=503); retrying in about 30 seconds."
    );
    let status: Value = http
        .get(format!("{}/status", served.admin_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let up = &status["connections"][0];
    assert_eq!(up["state"], "parked");
    assert!(up["parked_until"].is_string(), "{status}");
    assert_eq!(up["last_failure"]["status"], 503);

    // `mcp-supervisor reset up` through the admin API revives it.
    http.post(&control).json(&json!([])).send().await.unwrap();
    let admin = served.admin_url.trim_start_matches("http://").to_owned();
    let reset = e2e::supervisor(&["reset", "up", "--admin", &admin], &[]);
    assert_eq!(reset.code, Some(0), "{reset:?}");
    let result = call(&client, "up__lookup", json!({"key": "k"})).await;
    assert_eq!(text(&result), "value-of-k");
}

#[tokio::test]
async fn sighup_adds_and_removes_connections_while_an_unchanged_one_keeps_its_call() {
    let one = HttpUpstream::start();
    let two = HttpUpstream::start();
    let served = Served::start(&connection("keep", &one, ""));
    let client = connect(&served.gateway_url).await;
    assert!(
        tool_names(&client)
            .await
            .contains(&"keep__sleep".to_owned())
    );
    let in_flight = {
        let client = connect(&served.gateway_url).await;
        tokio::spawn(async move {
            // Long enough (3 s) for the reload below to be applied while it runs.
            text(&call(&client, "keep__sleep", json!({"ms": 3000})).await).to_owned()
        })
    };
    // The reload must happen while the call is in flight, or it proves
    // nothing: wait until the supervisor counts it.
    served.wait_for_in_flight("keep", 1, WITHIN).await;
    let original = std::fs::read_to_string(&served.config_path).unwrap();
    std::fs::write(
        &served.config_path,
        format!("{original}\n{}", connection("added", &two, "")),
    )
    .unwrap();
    served.signal("HUP");
    assert!(
        wait_until_async(WITHIN, || async {
            tool_names(&client)
                .await
                .contains(&"added__echo".to_owned())
        })
        .await,
        "{:?}",
        tool_names(&client).await
    );
    let ran_across_the_reload = served.in_flight("keep").await == 1;
    assert_eq!(
        in_flight.await.unwrap(),
        "slept 3000",
        "the unchanged connection kept its call"
    );
    assert!(
        ran_across_the_reload,
        "the call had ended before the reload was applied: that proves nothing"
    );

    // An invalid file is refused; the old config stays.
    std::fs::write(
        &served.config_path,
        "[connections.bad]\ntransport = \"carrier-pigeon\"\n",
    )
    .unwrap();
    served.signal("HUP");
    // The refusal is logged once the reload has read and rejected the file.
    served
        .wait_for_log("connections.bad.transport", WITHIN)
        .await;
    assert!(
        tool_names(&client)
            .await
            .contains(&"added__echo".to_owned())
    );

    // Removing a connection stops it.
    std::fs::write(
        &served.config_path,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n{}",
            connection("added", &two, "")
        ),
    )
    .unwrap();
    served.signal("HUP");
    assert!(
        wait_until_async(WITHIN, || async {
            !tool_names(&client)
                .await
                .iter()
                .any(|n| n.starts_with("keep__"))
        })
        .await,
        "{:?}",
        tool_names(&client).await
    );
}

#[tokio::test]
async fn bad_input_gets_proper_errors_and_the_gateway_keeps_serving() {
    let upstream = HttpUpstream::start();
    let served = Served::start_with_env(
        &format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\nmax_body_bytes = 4096\nauth = {{ kind = \"bearer\", token_env = \"GW_TOKEN\" }}\n{}",
            connection("up", &upstream, "")
        ),
        &[("GW_TOKEN", "gateway-secret")],
    );
    let http = reqwest::Client::new();
    let post = |body: String, token: Option<&str>, host: Option<&str>| {
        let mut request = http
            .post(&served.gateway_url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(host) = host {
            request = request.header("Host", host);
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    // Missing and wrong token: 401 with a challenge.
    for token in [None, Some("wrong")] {
        let response = post(initialize.clone(), token, None).await.unwrap();
        assert_eq!(response.status(), 401);
        assert!(
            response.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer")
        );
    }
    // A foreign Host (DNS rebinding): refused.
    let response = post(
        initialize.clone(),
        Some("gateway-secret"),
        Some("evil.example:80"),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 403, "{:?}", response.text().await);
    // Oversized body: 413.
    let huge =
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": "x".repeat(10_000)}})
            .to_string();
    let response = post(huge, Some("gateway-secret"), None).await.unwrap();
    assert_eq!(response.status(), 413);
    // Malformed JSON-RPC: an error response, not a crash.
    let response = post("{not json".into(), Some("gateway-secret"), None)
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    // And the gateway still serves a proper client.
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            served.gateway_url.as_str(),
        )
        .auth_header("gateway-secret"),
    );
    let client = ().serve(transport).await.expect("authorized client connects");
    assert_eq!(
        text(&call(&client, "up__echo", json!({"text": "ok"})).await),
        "ok"
    );
    assert!(!served.stderr().contains("gateway-secret"));
}

/// A URL whose query carries a credential (`?token=...`): an upstream that
/// drops the connection during initialize, and one that refuses it. Neither a
/// one-shot `call` (at the default level and at `debug`) nor `serve` prints
/// the token; each prints our classified line instead of a library's dump.
#[tokio::test]
async fn a_credential_in_the_url_query_reaches_no_output() {
    const CANARY: &str = "CANARY-url-5c1e-SECRET";
    let upstream = HttpUpstream::start();
    reqwest::Client::new()
        .post(upstream.url.replace("/mcp", "/_control/faults"))
        .json(&json!([{"when": "any", "fault": {"kind": "drop_connection"}}]))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    let connections = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"both\"\n\
         [supervisor]\nconnect_timeout = \"2s\"\n\
         [connections.dropped]\ntransport = \"http\"\nurl = \"{}?token={CANARY}\"\n\
         [connections.refused]\ntransport = \"http\"\nurl = \"http://127.0.0.1:9/mcp?token={CANARY}\"\n",
        upstream.url
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leaky.toml");
    std::fs::write(&path, &connections).unwrap();
    for name in ["dropped", "refused"] {
        for log in ["", "debug"] {
            let run = e2e::supervisor(
                &["call", "--config", path.to_str().unwrap(), name, "echo"],
                &[("RUST_LOG", log)],
            );
            assert_eq!(run.code, Some(1), "{run:?}");
            assert!(!run.all_output().contains(CANARY), "{name} leaked: {run:?}");
            if log.is_empty() {
                assert_eq!(
                    run.stderr.trim(),
                    format!(
                        "error: MCP connection '{name}' is temporarily unavailable \
                         (kind=transport, status=none); retrying in about 30 seconds."
                    ),
                    "one classified line, nothing else"
                );
            }
        }
    }

    let served = Served::start_with_env(&connections, &[("RUST_LOG", "")]);
    let client = connect(&served.gateway_url).await;
    for name in ["dropped", "refused"] {
        let result = call(
            &client,
            "call_mcp",
            json!({"connection": name, "tool": "echo", "arguments": {}}),
        )
        .await;
        assert_eq!(result.is_error, Some(true));
        assert!(
            text(&result).contains("temporarily unavailable"),
            "{result:?}"
        );
    }
    let log = served.stderr();
    assert!(log.contains("parked"), "our own line is logged: {log}");
    assert!(!log.contains(CANARY), "serve leaked: {log}");
}

/// The names of the process's threads (`/proc/PID/task/*/comm`).
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process is alive")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect();
    names.sort();
    names
}

/// The gateway's HTTP server runs beside the actors on a machine of two
/// cores or fewer, on one `network` thread of its own on a larger one; a
/// large request is parsed on a blocking thread; the upstream sessions run
/// beside the actors (no thread of their own); and the allocator returns
/// freed memory from a background thread (docs/ARCHITECTURE.md, "Threads";
/// docs/DECISIONS.md #72 and #76; the numbers are in docs/BENCHMARKS.md).
#[tokio::test]
async fn the_network_side_runs_where_the_machine_wants_it_and_memory_is_returned() {
    let upstream = HttpUpstream::start();
    let served = Served::start(&connection("a", &upstream, ""));
    let client = connect(&served.gateway_url).await;
    let big = "x".repeat(1 << 20);
    let result = call(&client, "a__echo", json!({ "text": big })).await;
    assert_eq!(text(&result).len(), big.len());

    let names = thread_names(served.child.id());
    let network = names.iter().filter(|name| *name == "network").count();
    if std::thread::available_parallelism().map_or(1, |cores| cores.get()) <= 2 {
        assert_eq!(
            network, 0,
            "the HTTP server runs beside the actors: {names:?}"
        );
        // tokio's blocking thread that parsed the large request (kept 10 s).
        assert!(
            names.iter().any(|name| name.starts_with("tokio")),
            "a blocking thread parsed the large request: {names:?}"
        );
    } else {
        // tokio names its blocking threads like its workers: the one worker,
        // and the blocking thread that parsed the large request (kept 10 s).
        assert_eq!(
            network, 2,
            "one network worker and one blocking thread: {names:?}"
        );
    }
    assert!(
        !names.iter().any(|name| name == "upstreams"),
        "the sessions run beside the actors: {names:?}"
    );
    assert!(
        names.iter().any(|name| name.starts_with("jemalloc_bg")),
        "jemalloc's purging thread runs: {names:?}"
    );
}
