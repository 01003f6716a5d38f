//! Raw JSON-RPC over the gateway's loopback HTTP (so tests can send bodies
//! no SDK would write, and compare answers byte for byte).

use reqwest::header;
use serde_json::{Value, json};

pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A POST of `message` with the headers MCP asks for, in `session`.
pub fn post(
    http: &reqwest::Client,
    url: &str,
    session: &str,
    message: &Value,
) -> reqwest::RequestBuilder {
    http.post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(message.to_string())
}

/// A 2025-11-25 session whose client declared `capabilities`; its id.
pub async fn session(http: &reqwest::Client, url: &str, capabilities: Value) -> String {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "direct-test", "version": "0"},
        },
    });
    let answer = http
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let id = answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let sent = post(http, url, &id, &initialized).send().await.unwrap();
    assert_eq!(sent.status(), 202);
    id
}

/// The messages of `message`'s answer in `session`, in order: the answer
/// last (one message for plain JSON).
pub async fn exchange(
    http: &reqwest::Client,
    url: &str,
    session: &str,
    message: &Value,
) -> Vec<Value> {
    let response = post(http, url, session, message).send().await.unwrap();
    assert_eq!(response.status(), 200);
    messages(&response.text().await.unwrap())
}

/// The JSON-RPC messages of an answer's body: its events' data, or the body
/// itself when it is plain JSON.
pub fn messages(body: &str) -> Vec<Value> {
    let data: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim))
        .filter(|data| !data.is_empty())
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    if data.is_empty() {
        vec![serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON-RPC: {body}"))]
    } else {
        data
    }
}
