//! A 2026-07-28 server that still asks its client the older way: a tool that
//! needs the client's input sends a JSON-RPC *request* (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`, `ping`) on the event stream of the
//! `tools/call`, waits for the answer the client POSTs, and puts it in its
//! result. Some servers negotiate 2026-07-28 and do this (instead of answering
//! `input_required`); a client must answer them rather than refuse.
//!
//! It also sends a `ping` on every `subscriptions/listen` stream, where no
//! request of the client waits, and records the answer.
//!
//! Served by `mcp-test-server --http ADDR --asks-by-request`. Everything
//! the clients answered is at `GET /_control/answers`, in arrival order.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use axum::{
    Json, Router,
    body::Body,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// How long a tool waits for its client's answer.
const ANSWER_BOUND: Duration = Duration::from_secs(30);

/// The tools: each asks its client one request.
const TOOLS: [(&str, &str); 4] = [
    ("ask_sampling", "sampling/createMessage"),
    ("ask_elicitation", "elicitation/create"),
    ("ask_roots", "roots/list"),
    ("ask_ping", "ping"),
];

#[derive(Default)]
struct Asking {
    /// Requests sent, waiting for the client's answer, by id.
    waiting: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// Every answer a client POSTed (the whole JSON-RPC message).
    answers: Mutex<Vec<Value>>,
    next: std::sync::atomic::AtomicU64,
}

impl Asking {
    fn id(&self) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("asked-{n}")
    }

    fn wait_for(&self, id: &str) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_owned(), tx);
        rx
    }

    fn answered(&self, answer: Value) {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(answer.clone());
        let id = answer["id"].as_str().unwrap_or_default().to_owned();
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        if let Some(waiter) = waiter {
            let _ = waiter.send(answer);
        }
    }
}

/// Serves the server on `addr` until the returned task is dropped or
/// aborted; returns `http://ADDR/mcp` and the task.
pub async fn serve(addr: SocketAddr) -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let state = Arc::new(Asking::default());
    let app = Router::new()
        .route("/mcp", post(posted))
        .route("/_control/answers", get(answers))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((url, task))
}

async fn answers(State(state): State<Arc<Asking>>) -> Json<Value> {
    let answers = state
        .answers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    Json(Value::Array(answers))
}

fn json_answer(id: &Value, result: Value) -> Response {
    Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

fn event(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

fn events(stream: impl futures::Stream<Item = String> + Send + 'static) -> Response {
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(stream.map(Ok::<_, std::convert::Infallible>)),
    )
        .into_response()
}

async fn posted(State(state): State<Arc<Asking>>, Json(message): Json<Value>) -> Response {
    let id = message["id"].clone();
    let Some(method) = message["method"].as_str() else {
        // An answer to one of our requests.
        state.answered(message);
        return StatusCode::ACCEPTED.into_response();
    };
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response();
    }
    match method {
        "server/discover" => json_answer(
            &id,
            json!({
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": true}},
                "resultType": "complete",
                "ttlMs": 0,
                "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "asks-by-request", "version": "1"}},
            }),
        ),
        "tools/list" => {
            let tools: Vec<Value> = TOOLS
                .iter()
                .map(|(name, asks)| {
                    json!({"name": name, "description": format!("asks the client {asks}"),
                        "inputSchema": {"type": "object"}})
                })
                .collect();
            json_answer(&id, json!({"tools": tools, "resultType": "complete"}))
        }
        "tools/call" => {
            let name = message["params"]["name"].as_str().unwrap_or_default();
            let Some((_, asks)) = TOOLS.iter().find(|(tool, _)| *tool == name) else {
                return Json(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32602, "message": format!("Unknown tool '{name}'.")}}))
                .into_response();
            };
            call(state, id, asks)
        }
        "subscriptions/listen" => listen(state, id, message["params"]["notifications"].clone()),
        _ => Json(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": method}}))
        .into_response(),
    }
}

/// The params of the request `asks`.
fn params_of(asks: &str) -> Value {
    match asks {
        "sampling/createMessage" => json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
            "maxTokens": 20,
        }),
        "elicitation/create" => json!({
            "mode": "form",
            "message": "Who are you?",
            "requestedSchema": {"type": "object", "properties": {"username": {"type": "string"}}},
        }),
        _ => json!({}),
    }
}

/// A tool call: the request on the call's stream, then (once answered) the
/// result, whose text is the client's answer (its result, or its error).
fn call(state: Arc<Asking>, id: Value, asks: &'static str) -> Response {
    let asked = state.id();
    let answered = state.wait_for(&asked);
    let request = json!({"jsonrpc": "2.0", "id": asked, "method": asks, "params": params_of(asks)});
    let result = async move {
        let answer = tokio::time::timeout(ANSWER_BOUND, answered).await;
        let (text, is_error) = match answer {
            Ok(Ok(answer)) if answer.get("result").is_some() => {
                (answer["result"].to_string(), false)
            }
            Ok(Ok(answer)) => (answer["error"].to_string(), true),
            _ => ("no answer".to_owned(), true),
        };
        event(&json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
            "resultType": "complete",
        }}))
    };
    let stream =
        futures::stream::once(async move { event(&request) }).chain(futures::stream::once(result));
    events(stream)
}

/// A listen stream: acknowledged for what was asked, then a `ping`, then
/// held open.
fn listen(state: Arc<Asking>, id: Value, asked_for: Value) -> Response {
    let asked = state.id();
    let acknowledged = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": asked_for, "_meta": {"io.modelcontextprotocol/subscriptionId": id}}});
    let ping = json!({"jsonrpc": "2.0", "id": asked, "method": "ping"});
    let stream = futures::stream::iter([event(&acknowledged), event(&ping)])
        .chain(futures::stream::pending());
    events(stream)
}
