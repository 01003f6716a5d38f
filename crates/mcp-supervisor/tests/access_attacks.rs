//! What an attacker tried against the callers' rights, and what holds now
//! (docs/SECURITY.md, "Attacks tried"): another spelling of a hidden
//! resource, a hidden tool found by its header check, another caller's
//! task read by its id, another caller's session used with one's own key
//! (a hidden resource subscribed through `subscriptions/listen`:
//! `access_rights.rs`). Raw HTTP
//! against the gateway, a conformance server upstream.

mod support;

use mcp_test_support::conformance::{ConformanceHttpServer, ConformanceServer};
use reqwest::header;
use serde_json::{Value, json};
use support::{raw::http, *};

const READER: &str = "reader-key-CANARY-5d21";
const ADMIN: &str = "admin-key-CANARY-8e40";
const WATCHED: &str = "test://watched-resource";
const NEW: &str = "2026-07-28";
const OLD: &str = "2025-11-25";

struct Setup {
    gateway: ServedGateway,
    _upstream: ConformanceHttpServer,
}

async fn setup() -> Setup {
    let upstream =
        ConformanceHttpServer::start(([127, 0, 0, 1], 0).into(), ConformanceServer::new())
            .await
            .unwrap();
    let toml = format!(
        r#"
[gateway.keys.reader]
sha256 = "{reader}"
groups = ["readers"]

[gateway.keys.admin]
sha256 = "{admin}"
groups = ["admins"]

[[access]]
who = ["group:readers"]
allow = ["c__test_simple_text", "resource:*"]
deny = ["resource:test://watched*"]

[[access]]
who = ["group:admins"]
allow = ["connection:*"]
"#,
        reader = key_digest(READER),
        admin = key_digest(ADMIN),
    ) + &http_connection("c", &upstream.url(), "");
    Setup {
        gateway: ServedGateway::start(config(&toml)).await,
        _upstream: upstream,
    }
}

/// The JSON-RPC answer in a response body, plain JSON or SSE.
fn answer_of(body: &str) -> Value {
    if let Ok(value) = serde_json::from_str(body) {
        return value;
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|message| message.get("id").is_some())
        .unwrap_or(Value::Null)
}

async fn post(
    gateway: &ServedGateway,
    key: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let mut request = http()
        .post(&gateway.url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::AUTHORIZATION, format!("Bearer {key}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status().as_u16();
    (status, answer_of(&response.text().await.unwrap()))
}

/// A 2025 session opened with `key`, declaring `capabilities`.
async fn session(gateway: &ServedGateway, key: &str, capabilities: Value) -> String {
    let response = http()
        .post(&gateway.url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .body(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": OLD, "capabilities": capabilities,
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(
        gateway,
        key,
        &[("mcp-session-id", &id), ("mcp-protocol-version", OLD)],
        initialized,
    )
    .await;
    id
}

async fn in_session(
    gateway: &ServedGateway,
    key: &str,
    id: &str,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    post(
        gateway,
        key,
        &[("mcp-session-id", id), ("mcp-protocol-version", OLD)],
        body,
    )
    .await
}

/// A 2026-07-28 request of `method` (named `name` in `Mcp-Name`).
async fn stateless(
    gateway: &ServedGateway,
    key: &str,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": NEW,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut headers = vec![("mcp-protocol-version", NEW), ("mcp-method", method)];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    headers.extend_from_slice(extra);
    post(
        gateway,
        key,
        &headers,
        json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}),
    )
    .await
}

/// An answer with `name` taken out, to compare a hidden name's with an
/// unknown one's.
fn unnamed(answer: &(u16, Value), name: &str) -> String {
    format!("{} {}", answer.0, answer.1).replace(name, "NAME")
}

#[test]
fn a_hidden_resource_is_hidden_under_every_spelling_and_a_prefix_names_no_unknown_connection() {
    run(|| async {
        let setup = setup().await;
        let id = session(&setup.gateway, READER, json!({})).await;
        let read = |uri: &'static str| {
            let gateway = &setup.gateway;
            let id = id.clone();
            async move { in_session(gateway, READER, &id, "resources/read", json!({"uri": uri})).await }
        };
        // A URI the rules deny, whether or not it exists, is answered by
        // the gateway as not found.
        let unknown = unnamed(
            &read("test://watched-nowhere").await,
            "test://watched-nowhere",
        );
        assert!(unknown.contains("-32002"), "{unknown}");
        for uri in [WATCHED, "mcp-supervisor://c/test://watched-resource"] {
            assert_eq!(unnamed(&read(uri).await, uri), unknown, "{uri}");
        }
        // A prefix naming no connection is no way to learn the names.
        let nowhere = read("mcp-supervisor://nosuch/x").await;
        assert!(
            !nowhere.1.to_string().contains("Available connections"),
            "{nowhere:?}"
        );
    });
}

#[test]
fn a_hidden_tool_is_not_found_by_its_header_check() {
    run(|| async {
        let setup = setup().await;
        let arguments = json!({"name": "NAME", "arguments": {"region": "eu"}});
        let call = |name: &'static str, header: Option<(&'static str, &'static str)>| {
            let gateway = &setup.gateway;
            let mut params = arguments.clone();
            params["name"] = json!(name);
            async move {
                let extra: Vec<(&str, &str)> = header.into_iter().collect();
                stateless(gateway, READER, "tools/call", Some(name), params, &extra).await
            }
        };
        for header in [None, Some(("mcp-param-region", "us"))] {
            let hidden = unnamed(
                &call("c__test_header_param", header).await,
                "c__test_header_param",
            );
            let unknown = unnamed(
                &call("c__test_header_nope", header).await,
                "c__test_header_nope",
            );
            assert_eq!(hidden, unknown, "{header:?}");
            assert!(!hidden.contains("region"), "{hidden}");
        }
    });
}

#[test]
fn a_task_answers_only_the_caller_who_made_it_and_a_session_only_its_opener() {
    run(|| async {
        let setup = setup().await;
        let tasks = json!({"tasks": {"requests": {"tools": {"call": {}}}}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
        let admin = session(&setup.gateway, ADMIN, tasks.clone()).await;
        let (_, created) = in_session(
            &setup.gateway,
            ADMIN,
            &admin,
            "tools/call",
            json!({
            "name": "c__slow_compute", "arguments": {"seconds": 0, "label": "ADMIN-ONLY"},
            "task": {"ttl": 60000}}),
        )
        .await;
        let task = created["result"]["task"]["taskId"]
            .as_str()
            .or_else(|| created["result"]["taskId"].as_str())
            .unwrap_or_else(|| panic!("a task: {created}"))
            .to_owned();
        let reader = session(&setup.gateway, READER, tasks).await;
        let theirs = in_session(
            &setup.gateway,
            READER,
            &reader,
            "tasks/get",
            json!({"taskId": task}),
        )
        .await;
        let nobodys = in_session(
            &setup.gateway,
            READER,
            &reader,
            "tasks/get",
            json!({"taskId": "no-such-task"}),
        )
        .await;
        assert_eq!(unnamed(&theirs, &task), unnamed(&nobodys, "no-such-task"));
        let own = in_session(
            &setup.gateway,
            ADMIN,
            &admin,
            "tasks/get",
            json!({"taskId": task}),
        )
        .await;
        assert!(own.1.get("result").is_some(), "{own:?}");
        // The admin's session, with the reader's key: not there.
        let borrowed = in_session(&setup.gateway, READER, &admin, "tools/list", json!({})).await;
        assert_eq!(borrowed.0, 404, "{borrowed:?}");
    });
}
