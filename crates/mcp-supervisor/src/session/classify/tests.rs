//! One row per line of the kind table (docs/ARCHITECTURE.md, "Failure
//! classification"), the priority order, and the fallback
//! to the last recorded HTTP status.

use std::{
    any::TypeId,
    borrow::Cow,
    error::Error,
    fmt, io,
    time::{Duration, SystemTime},
};

use rmcp::{
    ErrorData, ServiceError,
    model::ErrorCode,
    service::ClientInitializeError,
    transport::{
        DynamicTransportError,
        streamable_http_client::{
            AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
        },
    },
};

use super::*;
use crate::failure::{Failure, FailureKind as K};

/// How rmcp hands a failed request's transport error to a caller.
fn sent(error: HttpError) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "test",
        TypeId::of::<()>(),
        Box::new(error),
    ))
}

fn status(code: u16, retry_after: Option<&str>) -> HttpError {
    StreamableHttpError::HttpStatus(HttpStatusError::new(code, retry_after.map(str::to_owned)))
}

fn io(kind: io::ErrorKind) -> io::Error {
    io::Error::new(kind, "test")
}

/// An error nobody recognises.
#[derive(Debug)]
struct Strange;
impl fmt::Display for Strange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("strange")
    }
}
impl Error for Strange {}

fn elapsed() -> tokio::time::error::Elapsed {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime
        .block_on(async {
            tokio::time::timeout(Duration::ZERO, std::future::pending::<()>()).await
        })
        .unwrap_err()
}

struct Row {
    name: &'static str,
    error: Box<dyn Error + Send + Sync>,
    kind: K,
    status: Option<u16>,
    not_run: bool,
}

fn row(
    name: &'static str,
    error: impl Error + Send + Sync + 'static,
    kind: K,
    status: Option<u16>,
    not_run: bool,
) -> Row {
    Row {
        name,
        error: Box::new(error),
        kind,
        status,
        not_run,
    }
}

fn table() -> Vec<Row> {
    let json_rpc = |code: i32| ServiceError::McpError(ErrorData::new(ErrorCode(code), "x", None));
    vec![
        // auth: HTTP 401; rmcp AuthRequired
        row("401", sent(status(401, None)), K::Auth, Some(401), true),
        row(
            "AuthRequired",
            sent(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                "Bearer".into(),
            ))),
            K::Auth,
            Some(401),
            true,
        ),
        // permission: HTTP 403; rmcp InsufficientScope
        row(
            "403",
            sent(status(403, None)),
            K::Permission,
            Some(403),
            true,
        ),
        row(
            "InsufficientScope",
            sent(StreamableHttpError::InsufficientScope(
                InsufficientScopeError::new("Bearer scope=x".into(), None),
            )),
            K::Permission,
            Some(403),
            true,
        ),
        // rate_limit: HTTP 429 (never ran)
        row(
            "429",
            sent(status(429, Some("3"))),
            K::RateLimit,
            Some(429),
            true,
        ),
        // server: HTTP 5xx, which may come after the work was done (a 503 too)
        row("500", sent(status(500, None)), K::Server, Some(500), false),
        row("502", sent(status(502, None)), K::Server, Some(502), false),
        row("503", sent(status(503, None)), K::Server, Some(503), false),
        // protocol: other 4xx, JSON-RPC errors, malformed/unexpected responses
        row(
            "400",
            sent(status(400, None)),
            K::Protocol,
            Some(400),
            false,
        ),
        row(
            "404 without a session",
            sent(status(404, None)),
            K::Protocol,
            Some(404),
            false,
        ),
        row(
            "422",
            sent(status(422, None)),
            K::Protocol,
            Some(422),
            false,
        ),
        row("invalid params", json_rpc(-32602), K::Protocol, None, true),
        row(
            "method not found",
            json_rpc(-32601),
            K::Protocol,
            None,
            true,
        ),
        row(
            "unexpected response",
            ServiceError::UnexpectedResponse,
            K::Protocol,
            None,
            false,
        ),
        row(
            "garbage body",
            sent(StreamableHttpError::UnexpectedServerResponse(
                Cow::Borrowed("not json"),
            )),
            K::Protocol,
            None,
            false,
        ),
        row(
            "initialize JSON-RPC error",
            ClientInitializeError::JsonRpcError(ErrorData::new(ErrorCode(-32600), "x", None)),
            K::Protocol,
            None,
            false,
        ),
        row(
            "wrong content type",
            sent(StreamableHttpError::UnexpectedContentType(Some(
                "text/html".into(),
            ))),
            K::Protocol,
            None,
            false,
        ),
        // timeout: the operation's deadline passed
        row("tokio deadline", elapsed(), K::Timeout, None, false),
        row(
            "rmcp request timeout",
            ServiceError::Timeout {
                timeout: Duration::from_secs(1),
            },
            K::Timeout,
            None,
            false,
        ),
        row(
            "io timed out",
            io(io::ErrorKind::TimedOut),
            K::Timeout,
            None,
            false,
        ),
        // transport: refused/reset, stream or child ended, stdio EOF
        row(
            "connection refused",
            io(io::ErrorKind::ConnectionRefused),
            K::Transport,
            None,
            true,
        ),
        row(
            "connection reset",
            sent(StreamableHttpError::Io(io(io::ErrorKind::ConnectionReset))),
            K::Transport,
            None,
            false,
        ),
        row(
            "stream ended",
            sent(StreamableHttpError::UnexpectedEndOfStream),
            K::Transport,
            None,
            false,
        ),
        row(
            "session closed",
            ServiceError::TransportClosed,
            K::Transport,
            None,
            false,
        ),
        row(
            "stdio EOF",
            io(io::ErrorKind::UnexpectedEof),
            K::Transport,
            None,
            false,
        ),
        row(
            "child gone before initialize",
            ClientInitializeError::ConnectionClosed("eof".into()),
            K::Transport,
            None,
            false,
        ),
        row(
            "session expired after rmcp's own re-initialize",
            sent(StreamableHttpError::SessionExpired),
            K::Transport,
            Some(404),
            false,
        ),
        // unknown: anything else
        row("strange", Strange, K::Unknown, None, false),
    ]
}

/// A session starts with `initialize` (2025) or `server/discover`
/// (2026-07-28), so a failed start names neither alone: a connection pinned
/// to 2026-07-28 whose discover is refused must not read as a refused
/// `initialize`.
#[test]
fn a_failed_handshake_names_both_ways_to_start() {
    let refused = classify(&ClientInitializeError::JsonRpcError(ErrorData::new(
        ErrorCode(-32600),
        "x",
        None,
    )));
    assert_eq!(
        refused.reason,
        "the session handshake (initialize or server/discover) answered JSON-RPC error -32600"
    );
}

#[test]
fn every_row_of_the_table() {
    for row in table() {
        let failure = classify(row.error.as_ref());
        assert_eq!(failure.kind, row.kind, "{}: {failure:?}", row.name);
        assert_eq!(failure.status, row.status, "{}: {failure:?}", row.name);
        assert_eq!(failure.not_run, row.not_run, "{}: {failure:?}", row.name);
    }
}

#[test]
fn retry_after_is_parsed_in_both_forms() {
    let secs = classify(&sent(status(429, Some("7"))));
    assert_eq!(secs.retry_after, Some(Duration::from_secs(7)));
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    let dated = classify(&sent(status(503, Some(&date))));
    let wait = dated.retry_after.unwrap();
    assert!(
        wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
        "{wait:?}"
    );
    let garbage = classify(&sent(status(429, Some("tomorrow-ish"))));
    assert_eq!(garbage.retry_after, None);
}

#[test]
fn the_most_specific_cause_wins_in_every_pair() {
    for (i, &a) in K::ALL.iter().enumerate() {
        for &b in &K::ALL[i..] {
            let winner = more_specific(Failure::new(a, "a"), Failure::new(b, "b"));
            assert_eq!(winner.kind, a, "{a} vs {b}");
            let winner = more_specific(Failure::new(b, "b"), Failure::new(a, "a"));
            assert_eq!(winner.kind, a, "{b} vs {a}");
        }
    }
}

#[test]
fn a_status_under_a_transport_wrapper_beats_the_wrapper() {
    // The wrapper layers say "transport"; the 503 inside says "server".
    let wrapped = ClientInitializeError::TransportError {
        error: DynamicTransportError::from_parts(
            "test",
            TypeId::of::<()>(),
            Box::new(status(503, None)),
        ),
        context: "send initialize".into(),
    };
    let failure = classify(&wrapped);
    assert_eq!((failure.kind, failure.status), (K::Server, Some(503)));
}

#[test]
fn unknown_falls_back_to_the_last_recorded_error_status() {
    let observation = crate::http::HttpObservation {
        method: "POST",
        path: "/mcp".into(),
        status: 502,
        retry_after: None,
        at: SystemTime::now(),
    };
    let failure = classify_with_fallback(&Strange, Some(&observation));
    assert_eq!(failure.kind, K::Server);
    assert_eq!(failure.status, Some(502));
    assert_eq!(failure.method.as_deref(), Some("POST"));
    assert_eq!(failure.path.as_deref(), Some("/mcp"));
    // A recognised failure is never overridden by the recording.
    let failure = classify_with_fallback(&io(io::ErrorKind::ConnectionReset), Some(&observation));
    assert_eq!(failure.kind, K::Transport);
    // A recorded success gives nothing to fall back on.
    let ok = crate::http::HttpObservation {
        status: 200,
        ..observation
    };
    assert_eq!(classify_with_fallback(&Strange, Some(&ok)).kind, K::Unknown);
}

/// A connect timeout proves the request was never sent (DECISIONS.md #53):
/// a real one, against a loopback listener whose accept queue is full, so
/// the handshake is never answered.
#[tokio::test]
async fn a_connect_timeout_never_ran() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let address = listener.local_addr().unwrap();
    // Fill the accept queue (never accepted); later handshakes go unanswered.
    let mut held = Vec::new();
    for _ in 0..8 {
        let connect = tokio::net::TcpStream::connect(address);
        match tokio::time::timeout(std::time::Duration::from_millis(100), connect).await {
            Ok(Ok(stream)) => held.push(stream),
            _ => break,
        }
    }
    let timeout = Duration::from_millis(200);
    let client = reqwest::Client::builder()
        .connect_timeout(timeout)
        .build()
        .unwrap();
    let url = format!("http://{address}/");
    let error = client
        .get(&url)
        .send()
        .await
        .expect_err("the handshake is never answered");
    assert!(error.is_connect() && error.is_timeout(), "{error:?}");
    let failure = super::reqwest_error(&error);
    assert_eq!(failure.kind, FailureKind::Timeout, "{failure:?}");
    assert!(failure.not_run, "{failure:?}");
    // The plain-HTTP lane's timeout means the same.
    let failure = classify(&plain_send(timeout, &url).await);
    assert_eq!(failure.kind, FailureKind::Timeout, "{failure:?}");
    assert_eq!(failure.reason, "connect timed out");
    assert!(failure.not_run, "{failure:?}");
    drop((held, listener));
}

/// A refused connection on the plain-HTTP lane is what it is on reqwest's:
/// a transport failure whose request never ran.
#[tokio::test]
async fn a_refused_connection_on_the_plain_lane_never_ran() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("http://{address}/mcp");
    let expected = reqwest::Client::new().post(&url).send().await.unwrap_err();
    let expected = super::reqwest_error(&expected);
    let failure = classify(&plain_send(Duration::from_secs(5), &url).await);
    assert_eq!(failure.kind, FailureKind::Transport, "{failure:?}");
    assert_eq!(failure.reason, expected.reason);
    assert!(failure.not_run && expected.not_run, "{failure:?}");
}

/// Sends a POST to `url` on a plain-HTTP lane, expecting it to fail.
async fn plain_send(connect_timeout: Duration, url: &str) -> HttpError {
    let lane = crate::http::PlainLane::new(connect_timeout, connect_timeout)
        .expect("no proxy is configured for the tests");
    let request = reqwest::Client::new().post(url).build().unwrap();
    let to =
        crate::http::LaneTarget::new(request.url(), Default::default()).expect("an http:// URL");
    lane.send_built(request, &to)
        .await
        .expect_err("nothing answers")
}
