//! A bare HTTP/1.1 client for the harnesses that POST to a running
//! gateway: one request per connection, its answer's head (and, when asked,
//! its body), every wait bounded.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

/// Longest wait for a response's status line: well above the gateways'
/// `call_timeout`, the longest anything they do for one request may take.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(30);
pub const LEGACY_VERSION: &str = "2025-11-25";
pub const MODERN_VERSION: &str = "2026-07-28";
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#;
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// One HTTP response's head (and its body when it has a `Content-Length`).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
}

/// The SEP-2243 headers a 2026-07-28 client sends with this body
/// (`Mcp-Method`, and `Mcp-Name` from `params.name`, `params.uri` or
/// `params.taskId`), when the body is JSON and they make valid header values.
pub fn standard_headers(body: &[u8]) -> Vec<(&'static str, String)> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let header_safe = |text: &str| {
        !text.is_empty()
            && text.trim() == text
            && text.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
    };
    let mut headers = Vec::new();
    let Some(method) = value.get("method").and_then(|m| m.as_str()) else {
        return headers;
    };
    if !header_safe(method) {
        return headers;
    }
    headers.push(("Mcp-Method", method.to_owned()));
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return headers,
    };
    if let Some(name) = value
        .get("params")
        .and_then(|params| params.get(key))
        .and_then(|name| name.as_str())
        .filter(|name| header_safe(name))
    {
        headers.push(("Mcp-Name", name.to_owned()));
    }
    headers
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = loop {
        match TcpStream::connect(addr) {
            Ok(stream) => break stream,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => panic!("the gateway refuses a connection: {error}"),
        }
    };
    stream
        .set_read_timeout(Some(ANSWER_WITHIN))
        .expect("a read timeout");
    stream
        .set_write_timeout(Some(ANSWER_WITHIN))
        .expect("a write timeout");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    stream
}

pub fn post(addr: SocketAddr, body: &[u8], headers: &[(&str, String)]) -> Answer {
    let mut stream = connect(addr);
    stream
        .write_all(&request(addr, body, headers))
        .expect("the gateway reads the request");
    read_head(&mut stream)
}

/// A POST of `body` to `/mcp` with `headers`, on a connection of its own.
fn request(addr: SocketAddr, body: &[u8], headers: &[(&str, String)]) -> Vec<u8> {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        addr.port(),
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

pub fn delete(addr: SocketAddr, session: &str) {
    let request = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: {LEGACY_VERSION}\r\nConnection: close\r\n\r\n",
        addr.port()
    );
    let mut stream = connect(addr);
    stream
        .write_all(request.as_bytes())
        .expect("the gateway reads the request");
    let answer = read_head(&mut stream);
    assert!(
        (100..500).contains(&answer.status),
        "DELETE of a session: {answer:?}"
    );
}

/// Reads up to the end of the response head; the body (a JSON document or
/// an SSE stream that may stay open) is not waited for.
pub fn read_head(stream: &mut TcpStream) -> Answer {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            // libFuzzer's -timeout timer (SIGALRM) interrupts blocking reads.
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(0) => panic!(
                "the gateway closed the connection without an HTTP answer (got {:?})",
                String::from_utf8_lossy(&head)
            ),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(error) => panic!(
                "no HTTP answer within {ANSWER_WITHIN:?}: {error} (got {:?})",
                String::from_utf8_lossy(&head)
            ),
        }
    }
    parse_head(&head)
}

/// The status and the session id of a response head.
fn parse_head(head: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(head);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {text:?}"));
    let session = text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    });
    Answer { status, session }
}

/// A POST of `body` and its whole answer: its head, and its body as far as
/// it comes within `within` (`None` if the answer is still open then: a
/// stream meant to stay open).
pub fn post_whole(
    addr: SocketAddr,
    body: &[u8],
    headers: &[(&str, String)],
    within: Duration,
) -> (Answer, Option<Vec<u8>>) {
    let mut stream = connect(addr);
    stream
        .write_all(&request(addr, body, headers))
        .expect("the gateway reads the request");
    stream
        .set_read_timeout(Some(within))
        .expect("a read timeout");
    let mut whole = Vec::new();
    let mut buf = [0u8; 8192];
    let ended = loop {
        match stream.read(&mut buf) {
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(0) => break true,
            Ok(n) => whole.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    let split = whole
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {:?}", String::from_utf8_lossy(&whole)));
    let answer = parse_head(&whole[..split + 4]);
    (answer, ended.then(|| whole[split + 4..].to_vec()))
}
