//! A raw MCP client over reqwest (protocol 2025-11-25, one session), so the
//! soak sees exactly what came back: the HTTP status, a JSON-RPC result or
//! error, or nothing.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a caller waits for any answer before counting "no response".
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// What one request got back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// A JSON-RPC result (`is_error`: a tool result with `isError: true`,
    /// whose first text is kept).
    Value { is_error: bool, text: String },
    /// A JSON-RPC error.
    RpcError { code: i64, message: String },
    /// A non-2xx HTTP status.
    Http(u16),
    /// The request failed below HTTP (refused, reset, cut body).
    Transport(String),
    /// A 2xx answer that carried no response to our request.
    Malformed,
    /// Nothing within [`PATIENCE`].
    NoResponse,
}

/// An answer, its raw body (for the canary scan) and how long it took.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) answer: Answer,
    pub(crate) body: String,
    pub(crate) elapsed: Duration,
}

/// One downstream MCP session on the gateway.
#[derive(Debug)]
pub(crate) struct Mcp {
    http: reqwest::Client,
    url: String,
    token: String,
    session: Option<String>,
    version: String,
    next_id: u64,
}

impl Mcp {
    /// Opens a session: `initialize`, then `notifications/initialized`.
    pub(crate) async fn connect(
        http: &reqwest::Client,
        url: &str,
        token: &str,
    ) -> anyhow::Result<Self> {
        let mut mcp = Mcp {
            http: http.clone(),
            url: url.to_owned(),
            token: token.to_owned(),
            session: None,
            version: "2025-11-25".to_owned(),
            next_id: 1,
        };
        mcp.initialize().await?;
        Ok(mcp)
    }

    async fn initialize(&mut self) -> anyhow::Result<()> {
        self.session = None;
        let request = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "mcp-soak", "version": "0"},
            },
        });
        let (reply, session) = self.post(&request, 0).await;
        match reply.answer {
            Answer::Value { .. } => {}
            other => anyhow::bail!("initialize failed: {other:?}"),
        }
        self.session = session;
        if let Some(version) = serde_json::from_str::<Value>(&reply.body)
            .ok()
            .or_else(|| sse_message(&reply.body, 0))
            .and_then(|v| {
                v.pointer("/result/protocolVersion")?
                    .as_str()
                    .map(str::to_owned)
            })
        {
            self.version = version;
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = self.post(&note, u64::MAX).await;
        Ok(())
    }

    /// Lists the tools (the gateway routes names it has listed).
    pub(crate) async fn list_tools(&mut self) -> Reply {
        let id = self.bump();
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        self.post(&request, id).await.0
    }

    /// Calls a tool. A session the gateway no longer knows (404) is opened
    /// again for the next call; this call still counts as what it got.
    pub(crate) async fn call(&mut self, tool: &str, arguments: Value) -> Reply {
        let id = self.bump();
        let request = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        let reply = self.post(&request, id).await.0;
        if reply.answer == Answer::Http(404) {
            let _ = self.initialize().await;
        }
        reply
    }

    fn bump(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// POSTs one message and waits for the response with `id`.
    async fn post(&self, message: &Value, id: u64) -> (Reply, Option<String>) {
        let started = Instant::now();
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(message.to_string());
        if let Some(session) = &self.session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", &self.version);
        }
        let exchange = async {
            let response = request.send().await?;
            let status = response.status();
            let session = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = response.text().await?;
            Ok::<_, reqwest::Error>((status, session, body))
        };
        let (answer, body, session) = match tokio::time::timeout(PATIENCE, exchange).await {
            Err(_) => (Answer::NoResponse, String::new(), None),
            Ok(Err(error)) => (
                Answer::Transport(kind_of(&error).to_owned()),
                String::new(),
                None,
            ),
            Ok(Ok((status, session, body))) => {
                let answer = if !status.is_success() {
                    Answer::Http(status.as_u16())
                } else if id == u64::MAX {
                    // A notification: 202 and no body.
                    Answer::Value {
                        is_error: false,
                        text: String::new(),
                    }
                } else {
                    parse_answer(&body, id)
                };
                (answer, body, session)
            }
        };
        let reply = Reply {
            answer,
            body,
            elapsed: started.elapsed(),
        };
        (reply, session)
    }
}

/// A short, stable description of a reqwest failure (no URL).
pub(crate) fn kind_of(error: &reqwest::Error) -> &'static str {
    if error.is_connect() {
        "connect"
    } else if error.is_body() || error.is_decode() {
        "body cut"
    } else if error.is_timeout() {
        "timeout"
    } else if error.is_request() {
        "request"
    } else {
        "other"
    }
}

/// The response to `id` in a JSON or SSE body.
fn parse_answer(body: &str, id: u64) -> Answer {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .filter(|v| v.get("id").and_then(Value::as_u64) == Some(id))
        .or_else(|| sse_message(body, id));
    let Some(message) = message else {
        return Answer::Malformed;
    };
    if let Some(result) = message.get("result") {
        let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        let text = result
            .pointer("/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        return Answer::Value { is_error, text };
    }
    match message.get("error") {
        Some(error) => Answer::RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        },
        None => Answer::Malformed,
    }
}

/// The SSE `data:` message answering `id`.
fn sse_message(body: &str, id: u64) -> Option<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|v| {
            v.get("id").and_then(Value::as_u64) == Some(id)
                && (v.get("result").is_some() || v.get("error").is_some())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_from_json_and_sse_bodies() {
        let json = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
        assert_eq!(
            parse_answer(json, 3),
            Answer::Value {
                is_error: false,
                text: "hi".into()
            }
        );
        let sse = "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32602,\"message\":\"no\"}}\n\n";
        assert_eq!(
            parse_answer(sse, 4),
            Answer::RpcError {
                code: -32602,
                message: "no".into()
            }
        );
        assert_eq!(parse_answer(sse, 5), Answer::Malformed);
        assert_eq!(parse_answer("<html>", 5), Answer::Malformed);
    }
}
