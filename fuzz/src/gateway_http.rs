//! The gateway's JSON-RPC intake, end to end: arbitrary bytes POSTed to a
//! running gateway over loopback HTTP.
//!
//! One gateway runs in this process for the whole run (its own thread and
//! actix system), with one upstream, `a`: the in-process test server of
//! `mcp-test-support`, so that requests the gateway forwards really travel.
//! Its `call_timeout` is short, so that a forwarded call is answered quickly
//! whatever it asked for.
//!
//! The first input byte chooses how the body is sent; the rest is the body:
//! - `mode & 3 == 0`: no session, no protocol header (only an `initialize`
//!   or a 2026-07-28 request gets further than a 4xx);
//! - `1` and `3`: inside a fresh 2025-11-25 session (`initialize` and
//!   `notifications/initialized` first, `DELETE` after), so the body reaches
//!   the gateway's handler;
//! - `2`: with `MCP-Protocol-Version: 2026-07-28`, no session (the
//!   per-request protocol, straight to the handler), and the SEP-2243
//!   `Mcp-Method`/`Mcp-Name` headers a client derives from the body;
//! - `mode & 4`: `Mcp-Method: tools/call` and `Mcp-Name: a__echo` instead,
//!   whatever the body says (the headers must match the body).
//!
//! Invariants:
//! - every POST gets an HTTP response (a status line within 30 s), and never
//!   a 5xx: garbage from a client is a 4xx or a JSON-RPC error;
//! - nothing in the process panics, on any thread (the gateway, rmcp's
//!   session workers, the registry's actors, the upstream).

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    sync::{OnceLock, mpsc},
    time::Duration,
};

use actix::Actor;
use mcp_supervisor::{
    config::Config,
    gateway::{GatewayShutdown, GatewayState, ListChangedForwarder, serve_http},
    registry::{Registry, Subscribe},
};
use mcp_test_support::{TestServer, TestServerOptions};

/// Longest wait for a response's status line: well above the gateway's
/// `call_timeout` (2 s), the longest anything it does for one request may take.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);
const LEGACY_VERSION: &str = "2025-11-25";
/// The short run's other targets run on test threads of these names in the
/// same process: their panics are theirs.
const OTHER_TARGETS: [&str; 4] = ["config_parse", "retry_after", "classify", "jsonrpc_parse"];
const MODERN_VERSION: &str = "2026-07-28";
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

struct Gateway {
    addr: SocketAddr,
}

fn gateway() -> &'static Gateway {
    static GATEWAY: OnceLock<Gateway> = OnceLock::new();
    GATEWAY.get_or_init(|| {
        crate::watch_panics();
        let (ready, started) = mpsc::channel();
        std::thread::Builder::new()
            .name("fuzz-gateway".into())
            .spawn(move || actix_rt::System::new().block_on(serve(ready)))
            .expect("a thread for the gateway");
        let addr = started
            .recv_timeout(Duration::from_secs(60))
            .expect("the gateway starts within 60 s");
        Gateway { addr }
    })
}

/// Starts the upstream and the gateway, reports the gateway's address, then
/// keeps both running until the process exits.
async fn serve(ready: mpsc::Sender<SocketAddr>) {
    let upstream = TestServer::start(TestServerOptions::default())
        .await
        .expect("the upstream test server starts");
    let toml = format!(
        r#"
        [supervisor]
        connect_timeout = "5s"
        call_timeout = "2s"
        list_timeout = "5s"
        max_attempts = 2

        [supervisor.quarantine]
        base_cooldown = "100ms"
        max_cooldown = "1s"
        retire_after = 1000

        [gateway]
        expose = "both"

        [connections.a]
        transport = "http"
        url = "{}"
        retry_calls = "always"
        "#,
        upstream.url()
    );
    let config = Config::from_toml_str(&toml, std::path::Path::new("fuzz.toml"), &|_| None)
        .expect("the harness's config is valid");
    let registry = Registry::new(config.clone()).start();
    let state = GatewayState::new(
        registry.clone(),
        config.gateway.expose,
        config.gateway.prefix,
    );
    let forwarder = ListChangedForwarder::new(state.clone()).start();
    registry
        .send(Subscribe(forwarder.recipient()))
        .await
        .expect("the registry answers");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    let shutdown = GatewayShutdown::new();
    let settings = config.gateway.clone();
    actix_rt::spawn(async move {
        serve_http(listener, state, &settings, None, shutdown)
            .await
            .expect("the gateway serves");
    });
    ready.send(addr).expect("the harness waits for the address");
    std::future::pending::<()>().await;
    drop((upstream, registry));
}

/// One HTTP response's head (and its body when it has a `Content-Length`).
#[derive(Debug)]
struct Answer {
    status: u16,
    session: Option<String>,
}

pub fn run(data: &[u8]) {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let gateway = gateway();
    let panics_before = crate::panics_seen(&OTHER_TARGETS).0;

    let mut headers: Vec<(&str, String)> = Vec::new();
    if mode & 4 == 4 {
        headers.push(("Mcp-Method", "tools/call".into()));
        headers.push(("Mcp-Name", "a__echo".into()));
    } else if mode & 3 == 2 {
        headers.extend(standard_headers(body));
    }
    let mut session = None;
    match mode & 3 {
        1 | 3 => {
            let init = post(gateway.addr, INITIALIZE.as_bytes(), &[]);
            assert_eq!(init.status, 200, "initialize: {init:?}");
            let id = init.session.expect("initialize answers with a session id");
            headers.push(("Mcp-Session-Id", id.clone()));
            headers.push(("MCP-Protocol-Version", LEGACY_VERSION.into()));
            let initialized = post(gateway.addr, INITIALIZED.as_bytes(), &headers);
            assert_eq!(initialized.status, 202, "initialized: {initialized:?}");
            session = Some(id);
        }
        2 => headers.push(("MCP-Protocol-Version", MODERN_VERSION.into())),
        _ => {}
    }

    let answer = post(gateway.addr, body, &headers);
    assert!(
        (100..500).contains(&answer.status),
        "the gateway answered {} to a client's POST (mode {mode}):\n{}",
        answer.status,
        String::from_utf8_lossy(body)
    );
    // An `initialize` in the body opens a session too: close every one.
    for id in session.iter().chain(answer.session.iter()) {
        delete(gateway.addr, id);
    }

    let (panics, last) = crate::panics_seen(&OTHER_TARGETS);
    assert_eq!(
        panics,
        panics_before,
        "something in the process panicked while the gateway handled this body (mode {mode}): {last}\nbody: {:?}",
        String::from_utf8_lossy(body)
    );
}

/// The SEP-2243 headers a 2026-07-28 client sends with this body
/// (`Mcp-Method`, and `Mcp-Name` from `params.name`, `params.uri` or
/// `params.taskId`), when the body is JSON and they make valid header values.
fn standard_headers(body: &[u8]) -> Vec<(&'static str, String)> {
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

fn connect(addr: SocketAddr) -> TcpStream {
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

fn post(addr: SocketAddr, body: &[u8], headers: &[(&str, String)]) -> Answer {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        addr.port(),
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = connect(addr);
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    stream
        .write_all(&bytes)
        .expect("the gateway reads the request");
    read_head(&mut stream)
}

fn delete(addr: SocketAddr, session: &str) {
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
fn read_head(stream: &mut TcpStream) -> Answer {
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
    let text = String::from_utf8_lossy(&head);
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
