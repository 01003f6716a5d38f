//! Hostile input against the gateway and admin ports while the callers run:
//! each probe must get a clear HTTP error (or, for a slow sender, be cut off
//! within the header timeout), and must not hurt the real callers.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::Soak;

/// Every kind of hostile input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum HostileKind {
    MalformedJson,
    HugeBody,
    DeepNesting,
    BadHost,
    BadOrigin,
    BadToken,
    NoToken,
    SlowHeaders,
    AbandonedSession,
    AdminBadHost,
    AdminBadToken,
    AdminNotJson,
}

impl HostileKind {
    pub(crate) const ALL: [HostileKind; 12] = [
        HostileKind::MalformedJson,
        HostileKind::HugeBody,
        HostileKind::DeepNesting,
        HostileKind::BadHost,
        HostileKind::BadOrigin,
        HostileKind::BadToken,
        HostileKind::NoToken,
        HostileKind::SlowHeaders,
        HostileKind::AbandonedSession,
        HostileKind::AdminBadHost,
        HostileKind::AdminBadToken,
        HostileKind::AdminNotJson,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            HostileKind::MalformedJson => "gateway: malformed JSON",
            HostileKind::HugeBody => "gateway: body over max_body_bytes",
            HostileKind::DeepNesting => "gateway: 20000-deep nesting",
            HostileKind::BadHost => "gateway: bad Host",
            HostileKind::BadOrigin => "gateway: bad Origin",
            HostileKind::BadToken => "gateway: wrong bearer token",
            HostileKind::NoToken => "gateway: no bearer token",
            HostileKind::SlowHeaders => "gateway: headers dribbled byte by byte",
            HostileKind::AbandonedSession => "gateway: session opened and abandoned",
            HostileKind::AdminBadHost => "admin: bad Host",
            HostileKind::AdminBadToken => "admin: wrong bearer token",
            HostileKind::AdminNotJson => "admin: POST /reload not JSON",
        }
    }

    /// What a correct server answers.
    pub(crate) fn expected(self) -> &'static str {
        match self {
            HostileKind::MalformedJson | HostileKind::DeepNesting => "400",
            HostileKind::HugeBody => "413",
            HostileKind::BadHost | HostileKind::BadOrigin | HostileKind::AdminBadHost => "403",
            HostileKind::BadToken | HostileKind::NoToken | HostileKind::AdminBadToken => "401",
            HostileKind::SlowHeaders => "closed within header_timeout + 1 s",
            HostileKind::AbandonedSession => "200 (session opened)",
            HostileKind::AdminNotJson => "415",
        }
    }
}

/// What one probe got: a short description, and whether it was expected.
pub(crate) struct Outcome {
    pub(crate) got: String,
    pub(crate) ok: bool,
    pub(crate) body: String,
}

/// Runs one probe.
pub(crate) async fn probe(soak: &Soak, kind: HostileKind) -> Outcome {
    let gateway = soak.gateway_url();
    let admin = soak.admin_url();
    let http = soak.http();
    let json = "application/json";
    let request = match kind {
        HostileKind::MalformedJson => http
            .post(gateway)
            .bearer_auth(soak.gateway_token())
            .header("content-type", json)
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"#),
        HostileKind::HugeBody => {
            let padding = "x".repeat(super::MAX_BODY_BYTES * 2);
            http.post(gateway)
                .bearer_auth(soak.gateway_token())
                .header("content-type", json)
                .header("accept", "application/json, text/event-stream")
                .body(format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{padding}"}}}}"#
                ))
        }
        HostileKind::DeepNesting => {
            let depth = 20_000;
            http.post(gateway)
                .bearer_auth(soak.gateway_token())
                .header("content-type", json)
                .header("accept", "application/json, text/event-stream")
                .body(format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}{}}}"#,
                    "[".repeat(depth),
                    "]".repeat(depth)
                ))
        }
        HostileKind::BadHost => soak
            .initialize_request(http.post(gateway))
            .header("host", "evil.example"),
        HostileKind::BadOrigin => soak
            .initialize_request(http.post(gateway))
            .header("origin", "http://evil.example"),
        HostileKind::BadToken => http
            .post(gateway)
            .bearer_auth("not-the-token")
            .header("content-type", json)
            .header("accept", "application/json, text/event-stream")
            .body(super::INITIALIZE),
        HostileKind::NoToken => http
            .post(gateway)
            .header("content-type", json)
            .header("accept", "application/json, text/event-stream")
            .body(super::INITIALIZE),
        HostileKind::AbandonedSession => soak.initialize_request(http.post(gateway)),
        HostileKind::AdminBadHost => http
            .get(format!("{admin}/status"))
            .bearer_auth(soak.admin_token())
            .header("host", "evil.example"),
        HostileKind::AdminBadToken => http
            .get(format!("{admin}/status"))
            .bearer_auth("not-the-token"),
        HostileKind::AdminNotJson => http
            .post(format!("{admin}/reload"))
            .bearer_auth(soak.admin_token())
            .header("content-type", "text/plain")
            .body("reload please"),
        HostileKind::SlowHeaders => return slow_headers(soak).await,
    };
    let expected = kind.expected();
    match tokio::time::timeout(Duration::from_secs(10), request.send()).await {
        Err(_) => Outcome {
            got: "no answer in 10 s".into(),
            ok: false,
            body: String::new(),
        },
        Ok(Err(error)) => Outcome {
            got: format!("transport error ({})", super::client::kind_of(&error)),
            ok: false,
            body: String::new(),
        },
        Ok(Ok(response)) => {
            let status = response.status().as_u16().to_string();
            // Abandoned: the answer is read (it may be a stream) but the
            // session is never used or closed.
            let body = tokio::time::timeout(Duration::from_secs(2), response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            let ok = expected.starts_with(&status);
            Outcome {
                got: status,
                ok,
                body,
            }
        }
    }
}

/// Sends a request head one byte every 100 ms and waits for the server to
/// close the connection: it must do so within `header_timeout` + 1 s.
async fn slow_headers(soak: &Soak) -> Outcome {
    let addr = soak
        .gateway_url()
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nX-Slow: {}\r\n\r\n",
        soak.gateway_token(),
        "z".repeat(200)
    );
    let limit = super::HEADER_TIMEOUT + Duration::from_secs(1);
    let started = Instant::now();
    let Ok(mut stream) = tokio::net::TcpStream::connect(&addr).await else {
        return Outcome {
            got: "connect failed".into(),
            ok: false,
            body: String::new(),
        };
    };
    let mut answer = Vec::new();
    let mut closed = false;
    for byte in head.as_bytes() {
        if stream.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 512];
        match tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        if started.elapsed() > limit + Duration::from_secs(2) {
            break;
        }
    }
    let elapsed = started.elapsed();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .map(|s| format!(", answered {s}"))
        .unwrap_or_default();
    Outcome {
        got: if closed {
            format!("closed after {:.1} s{status}", elapsed.as_secs_f64())
        } else {
            format!("still open after {:.1} s", elapsed.as_secs_f64())
        },
        ok: closed && elapsed <= limit,
        body: text,
    }
}
