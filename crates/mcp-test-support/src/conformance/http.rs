//! Streamable HTTP: rmcp's `StreamableHttpService` at `/mcp`, plus the one
//! thing it cannot do from inside a tool — cut a response stream mid-call.
//!
//! rmcp serves both protocol generations on one endpoint: `initialize`
//! opens a legacy session (with resumable SSE streams), a request carrying
//! 2026-07-28 `_meta` is served statelessly; its default Host check answers
//! a non-loopback `Host` with 403 (DNS-rebinding protection).
//!
//! `server-sse-polling` (SEP-1699) wants the server to close a POST's SSE
//! stream after the priming event and deliver the result once the client
//! reconnects with `Last-Event-ID`. A tool handler has no handle on its
//! HTTP stream, so this layer does the cutting for `test_reconnection` and
//! tells the tool (through [`Shared::resumed`]) when the client is back.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
    routing::any,
};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt as _};
use rmcp::{
    RoleServer,
    service::RequestContext,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{catalog, handler::ConformanceServer, state::Shared};

/// Path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// Largest request body read (rmcp's own default).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How long shutdown waits for open connections before dropping them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// The conformance server on a TCP port. Dropping it stops it.
#[derive(Debug)]
pub struct ConformanceHttpServer {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ConformanceHttpServer {
    /// Serves `handler` (and a fresh session of it per client) on `addr`;
    /// port 0 picks a free port.
    pub async fn start(addr: SocketAddr, handler: ConformanceServer) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let mcp = StreamableHttpService::new(
            {
                let handler = handler.clone();
                move || Ok(handler.for_new_session())
            },
            Arc::new(LocalSessionManager::default()),
            // The defaults are what the suite wants: sessions for legacy
            // clients, loopback-only Host, SSE priming events with `retry`.
            StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token()),
        );
        let state = Endpoint {
            mcp,
            shared: handler.shared.clone(),
        };
        let router = Router::new()
            .route(MCP_PATH, any(endpoint))
            .with_state(state);
        let stop = shutdown.clone();
        let task = tokio::spawn(async move {
            let serving = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled().await });
            if let Err(error) = serving.await {
                tracing::error!(%error, "HTTP server failed");
            }
        });
        tracing::info!(%addr, "conformance server listening");
        Ok(Self {
            addr,
            shutdown,
            task: Some(task),
        })
    }

    /// `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Ends every stream and session, then waits (briefly) for the
    /// connections to close.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for ConformanceHttpServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[derive(Clone)]
struct Endpoint {
    mcp: StreamableHttpService<ConformanceServer, LocalSessionManager>,
    shared: Arc<Shared>,
}

impl Endpoint {
    async fn forward(&self, request: Request) -> Response {
        self.mcp.handle(request).await.map(Body::new)
    }
}

async fn endpoint(State(endpoint): State<Endpoint>, request: Request) -> Response {
    let session_id = header_text(&request, SESSION_HEADER);
    match *request.method() {
        Method::GET => {
            let resuming = header_text(&request, LAST_EVENT_ID_HEADER).is_some();
            let response = endpoint.forward(request).await;
            // rmcp has re-attached the stream by the time it answers, so a
            // result sent from now on reaches the client.
            if let (true, Some(session_id)) = (resuming, session_id)
                && response.status().is_success()
            {
                endpoint.shared.notify_resumed(&session_id);
            }
            response
        }
        Method::POST if session_id.is_some() => {
            let (parts, body) = request.into_parts();
            let Ok(body) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
                return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
            };
            let cut = calls_tool(&body, catalog::RECONNECTION);
            let response = endpoint
                .forward(Request::from_parts(parts, Body::from(body)))
                .await;
            if cut
                && is_event_stream(&response)
                && let Some(session_id) = session_id
            {
                // Registered before the client can see the cut, so its
                // resume always finds someone to wake.
                endpoint.shared.resumed(&session_id);
                let (parts, body) = response.into_parts();
                return Response::from_parts(parts, Body::from_stream(first_event(body)));
            }
            response
        }
        _ => endpoint.forward(request).await,
    }
}

fn header_text(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

fn is_event_stream(response: &Response) -> bool {
    response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// Whether a JSON-RPC body is a `tools/call` of `tool`.
fn calls_tool(body: &[u8], tool: &str) -> bool {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    message.get("method").and_then(Value::as_str) == Some("tools/call")
        && message.pointer("/params/name").and_then(Value::as_str) == Some(tool)
}

/// The body up to the end of its first SSE event (the priming event,
/// which carries the id to resume from), then the end of the stream.
fn first_event(body: Body) -> impl Stream<Item = Result<Bytes, axum::Error>> {
    let state = (body.into_data_stream(), BytesMut::new(), false);
    futures::stream::unfold(state, |(mut stream, mut seen, done)| async move {
        if done {
            return None;
        }
        let chunk = match stream.next().await? {
            Ok(chunk) => chunk,
            Err(error) => return Some((Err(error), (stream, seen, true))),
        };
        let start = seen.len();
        seen.extend_from_slice(&chunk);
        match find_event_end(&seen) {
            // Send the rest of the first event, drop anything after it.
            Some(end) => {
                let keep = end.saturating_sub(start).min(chunk.len());
                Some((Ok(chunk.slice(..keep)), (stream, seen, true)))
            }
            None => Some((Ok(chunk), (stream, seen, false))),
        }
    })
}

/// Index just past the blank line that ends the first SSE event.
fn find_event_end(bytes: &[u8]) -> Option<usize> {
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|at| at + 2);
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The session id of a legacy streamable-HTTP request, `None` for stdio and
/// for stateless requests.
pub(crate) fn legacy_session_id(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .extensions
        .get::<http::request::Parts>()?
        .headers
        .get(SESSION_HEADER)?
        .to_str()
        .ok()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_the_tool_call() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_reconnection"}}"#;
        assert!(calls_tool(body, catalog::RECONNECTION));
        assert!(!calls_tool(b"not json", catalog::RECONNECTION));
        assert!(!calls_tool(
            br#"{"method":"tools/list","params":{"name":"test_reconnection"}}"#,
            catalog::RECONNECTION
        ));
    }

    #[tokio::test]
    async fn keeps_only_the_first_event() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"id: 0/0\nretry: 3000\n")),
            Ok(Bytes::from_static(b"data: \n\nid: 1/0\ndata: {}\n\n")),
            Ok(Bytes::from_static(b"id: 2/0\ndata: {}\n\n")),
        ];
        let body = Body::from_stream(futures::stream::iter(chunks));
        let kept: Vec<Bytes> = first_event(body)
            .map(|chunk| chunk.unwrap())
            .collect()
            .await;
        assert_eq!(kept.concat(), b"id: 0/0\nretry: 3000\ndata: \n\n");
    }
}
