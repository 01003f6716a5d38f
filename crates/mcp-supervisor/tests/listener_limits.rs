//! Both HTTP servers under hostile input, over real loopback HTTP: the admin
//! API's cross-site protection and token, the bearer scheme's case, the
//! gateway's answers to bodies rmcp cannot parse and to unknown sessions, and
//! the read timeouts, idle timeout, connection cap and session cap of both
//! ports (docs/CONFIG.md `[gateway]`, `[admin]`).

mod support;

use std::{fs, net::SocketAddr, path::PathBuf, time::Duration};

use actix::{Actor, Addr};
use mcp_supervisor::{
    admin::{ConfigSource, Reloader, serve_admin_with},
    config::Config,
    registry::Registry,
};
use reqwest::{Client, Method, RequestBuilder, Response, header};
use serde_json::{Value, json};
use support::*;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// The admin API on 127.0.0.1:0 over a registry of `config_text` (written to
/// a file, so `/reload` works), stopped on drop.
struct Admin {
    address: SocketAddr,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Admin {
    async fn start(config_text: &str) -> (Admin, Addr<Registry>) {
        let dir = tempfile::tempdir().unwrap();
        let file: PathBuf = dir.path().join("supervisor.toml");
        fs::write(&file, config_text).unwrap();
        let config = Config::from_file(&file).unwrap();
        let registry = Registry::new(config.clone()).start();
        let reloader = Reloader::new(ConfigSource::File(file), registry.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        actix_rt::spawn(serve_admin_with(
            listener,
            registry.clone(),
            reloader,
            config.admin.clone(),
            shutdown.clone(),
        ));
        let admin = Admin {
            address,
            shutdown,
            _dir: dir,
        };
        (admin, registry)
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A gateway on 127.0.0.1:0 with `[gateway]` keys `gateway_keys`.
async fn gateway(gateway_keys: &str) -> ServedGateway {
    ServedGateway::start(config(&format!("[gateway]\n{gateway_keys}\n"))).await
}

fn address_of(url: &str) -> SocketAddr {
    let rest = url.strip_prefix("http://").unwrap();
    rest.split('/').next().unwrap().parse().unwrap()
}

fn http() -> Client {
    Client::builder().no_proxy().build().unwrap()
}

/// A POST to the MCP endpoint as an MCP client sends it.
fn mcp_post(client: &Client, url: &str, body: impl Into<reqwest::Body>) -> RequestBuilder {
    client
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .body(body)
}

async fn json_body(response: Response) -> Value {
    let text = response.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("JSON body: {text}"))
}

/// Opens a session with `initialize`; returns its `Mcp-Session-Id`.
async fn initialize(client: &Client, url: &str) -> String {
    let response = mcp_post(client, url, INITIALIZE).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.text().await;
    id
}

/// Writes `request` on a fresh connection and reads until the server closes
/// it or `within` passes; `None` if it did not close in time.
async fn send_and_read_until_closed(
    address: SocketAddr,
    request: &[u8],
    within: Duration,
) -> Option<(String, Duration)> {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let started = Instant::now();
    stream.write_all(request).await.unwrap();
    read_until_closed(&mut stream, within)
        .await
        .map(|text| (text, started.elapsed()))
}

async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&received).into_owned())
}

/// Reads one response whose body has a `Content-Length`, leaving the
/// connection open.
async fn read_one_response(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed before answering");
        received.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if received.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

fn status_line(response: &str) -> &str {
    response.lines().next().unwrap_or_default()
}

// ---- The admin API: cross-site protection and token.

const ONE_CONNECTION: &str = "[connections.a]\ntransport = \"stdio\"\ncommand = \"true\"\n";

#[test]
fn the_admin_api_refuses_cross_site_requests() {
    run(|| async {
        let (admin, _registry) = Admin::start(ONE_CONNECTION).await;
        let client = http();
        let send = |method: Method,
                    path: &str,
                    host: Option<&str>,
                    origin: Option<&str>,
                    content_type: Option<&str>| {
            let mut request = client.request(method, admin.url(path)).body("{}");
            if let Some(host) = host {
                request = request.header(header::HOST, host);
            }
            if let Some(origin) = origin {
                request = request.header(header::ORIGIN, origin);
            }
            if let Some(content_type) = content_type {
                request = request.header(header::CONTENT_TYPE, content_type);
            }
            async move { request.send().await.unwrap().status().as_u16() }
        };
        // What a page on evil.example can make a browser send, DNS rebinding
        // or not: refused before anything changes.
        for path in ["/reload", "/connections/a/reset"] {
            assert_eq!(
                send(
                    Method::POST,
                    path,
                    Some("evil.example"),
                    Some("http://evil.example"),
                    Some("text/plain")
                )
                .await,
                403,
                "{path}"
            );
            assert_eq!(
                send(
                    Method::POST,
                    path,
                    None,
                    Some("http://evil.example"),
                    Some("application/json")
                )
                .await,
                403,
                "{path}: foreign Origin"
            );
            assert_eq!(
                send(
                    Method::POST,
                    path,
                    None,
                    Some("null"),
                    Some("application/json")
                )
                .await,
                403,
                "{path}: null Origin"
            );
            // A simple (preflight-free) cross-site request cannot be JSON.
            for content_type in [
                Some("text/plain"),
                Some("application/x-www-form-urlencoded"),
                None,
            ] {
                assert_eq!(
                    send(Method::POST, path, None, None, content_type).await,
                    415,
                    "{path}: {content_type:?}"
                );
            }
            // The allowed form, from a local page or a CLI.
            assert_eq!(
                send(
                    Method::POST,
                    path,
                    None,
                    Some("http://localhost:3000"),
                    Some("application/json; charset=utf-8")
                )
                .await,
                200,
                "{path}"
            );
        }
        // Routing is unchanged behind the checks.
        assert_eq!(send(Method::POST, "/nope", None, None, None).await, 404);
        assert_eq!(send(Method::GET, "/reload", None, None, None).await, 405);
        assert_eq!(send(Method::POST, "/status", None, None, None).await, 405);
        // Reads are protected from rebinding too.
        assert_eq!(
            send(
                Method::GET,
                "/status",
                Some("evil.example:7301"),
                None,
                None
            )
            .await,
            403
        );
        assert_eq!(
            send(
                Method::GET,
                "/status",
                None,
                Some("https://evil.example"),
                None
            )
            .await,
            403
        );
        assert_eq!(
            send(Method::GET, "/status", Some("LOCALHOST:1"), None, None).await,
            200
        );
        // The error is the API's JSON.
        let response = client
            .get(admin.url("/status"))
            .header(header::HOST, "evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(
            json_body(response).await,
            json!({"error": "Host header is not allowed"})
        );
    });
}

#[test]
fn the_admin_token_guards_everything_but_the_probes() {
    run(|| async {
        let (admin, _registry) = Admin::start(&format!(
            "[admin]\nauth = {{ kind = \"bearer\", token = \"adm1n-t0ken\" }}\n{ONE_CONNECTION}"
        ))
        .await;
        let client = http();
        for (method, path) in [
            (Method::GET, "/status"),
            (Method::GET, "/metrics"),
            (Method::POST, "/reload"),
            (Method::POST, "/connections/a/reset"),
        ] {
            for authorization in [None, Some("Bearer wrong"), Some("Basic adm1n-t0ken")] {
                let mut request = client
                    .request(method.clone(), admin.url(path))
                    .header(header::CONTENT_TYPE, "application/json");
                if let Some(value) = authorization {
                    request = request.header(header::AUTHORIZATION, value);
                }
                let response = request.send().await.unwrap();
                assert_eq!(response.status(), 401, "{method} {path} {authorization:?}");
                assert!(
                    response.headers()[header::WWW_AUTHENTICATE]
                        .to_str()
                        .unwrap()
                        .starts_with("Bearer"),
                );
                assert!(json_body(response).await["error"].is_string());
            }
            for scheme in ["Bearer", "bearer", "BEARER"] {
                let response = client
                    .request(method.clone(), admin.url(path))
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::AUTHORIZATION, format!("{scheme} adm1n-t0ken"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200, "{method} {path} {scheme}");
            }
        }
        // Probes answer without the token.
        for probe in ["/healthz", "/readyz"] {
            let response = client.get(admin.url(probe)).send().await.unwrap();
            assert_eq!(response.status(), 200, "{probe}");
        }
    });
}

// ---- The gateway: bearer scheme, protocol edges, Origin.

#[test]
fn the_gateway_accepts_the_bearer_scheme_in_any_case() {
    run(|| async {
        let served = gateway("auth = { kind = \"bearer\", token = \"gw-t0ken\" }").await;
        let client = http();
        for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
            let response = mcp_post(&client, &served.url, INITIALIZE)
                .header(header::AUTHORIZATION, format!("{scheme} gw-t0ken"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{scheme}");
        }
        for wrong in ["bearer gw-t0keN", "Basic gw-t0ken", "gw-t0ken"] {
            let response = mcp_post(&client, &served.url, INITIALIZE)
                .header(header::AUTHORIZATION, wrong)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 401, "{wrong}");
        }
    });
}

#[test]
fn bodies_that_are_not_json_rpc_get_400_with_a_json_rpc_error() {
    run(|| async {
        let served = gateway("").await;
        let client = http();
        let mut invalid_utf8 =
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":""#.to_vec();
        invalid_utf8.extend_from_slice(&[0xff, 0xfe]);
        invalid_utf8.extend_from_slice(br#""}}"#);
        let cases: Vec<(Vec<u8>, i64)> = vec![
            (b"{not json".to_vec(), -32700),
            (b"".to_vec(), -32700),
            (invalid_utf8, -32700),
            (br#"{"hello":"world"}"#.to_vec(), -32600),
            (br#""just a string""#.to_vec(), -32600),
            (
                br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#.to_vec(),
                -32600,
            ),
        ];
        for (body, code) in cases {
            let shown = String::from_utf8_lossy(&body).into_owned();
            let response = mcp_post(&client, &served.url, body).send().await.unwrap();
            assert_eq!(response.status(), 400, "{shown}");
            assert_eq!(
                response.headers()[header::CONTENT_TYPE],
                "application/json",
                "{shown}"
            );
            let error = json_body(response).await;
            assert_eq!(error["jsonrpc"], "2.0", "{shown}: {error}");
            assert_eq!(error["error"]["code"], code, "{shown}: {error}");
        }
        // rmcp's own answers stay: a wrong content type is 415.
        let response = client
            .post(&served.url)
            .header(header::CONTENT_TYPE, "text/plain")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .body(INITIALIZE)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 415);
        // And a proper request still works.
        initialize(&client, &served.url).await;
    });
}

/// The MCP endpoint is served in front of the router (`listener::Front`):
/// its exact path, with or without a query, and nothing else; every other
/// path is the router's, which answers 404 for what it does not know.
#[test]
fn only_the_mcp_path_reaches_the_mcp_endpoint() {
    run(|| async {
        let served = gateway("").await;
        let client = http();
        initialize(&client, &format!("{}?probe=1", served.url)).await;
        let origin = served.url.strip_suffix("/mcp").unwrap();
        for other in [
            "/mcp/", "/mcpx", "/mc", "//mcp", "/MCP", "/%6Dcp", "/", "/mcp/x",
        ] {
            let response = mcp_post(&client, &format!("{origin}{other}"), INITIALIZE)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 404, "{other}");
            assert!(
                response.headers().get("mcp-session-id").is_none(),
                "{other}"
            );
        }
    });
}

#[test]
fn deleting_an_unknown_session_is_404() {
    run(|| async {
        let served = gateway("").await;
        let client = http();
        let delete = |id: &str| {
            client
                .delete(&served.url)
                .header("mcp-session-id", id)
                .send()
        };
        assert_eq!(delete("no-such-session").await.unwrap().status(), 404);
        let id = initialize(&client, &served.url).await;
        // 200, not rmcp's 202: the Python SDK warns on anything but 200 or 204.
        assert_eq!(delete(&id).await.unwrap().status(), 200);
        assert_eq!(delete(&id).await.unwrap().status(), 404);
        // Without a session id it is still rmcp's 400.
        assert_eq!(
            client.delete(&served.url).send().await.unwrap().status(),
            400
        );
    });
}

#[test]
fn the_gateway_refuses_foreign_origins() {
    run(|| async {
        let served = gateway("").await;
        let client = http();
        let with_origin = |origin: &'static str| {
            mcp_post(&client, &served.url, INITIALIZE)
                .header(header::ORIGIN, origin)
                .send()
        };
        assert_eq!(
            with_origin("http://evil.example").await.unwrap().status(),
            403
        );
        assert_eq!(with_origin("null").await.unwrap().status(), 403);
        assert_eq!(
            with_origin("http://localhost:6274").await.unwrap().status(),
            200
        );
    });
}

// ---- Timeouts, both ports.

/// Timeouts short enough to test, on both ports.
const SHORT: &str = "header_timeout = \"300ms\"\nidle_timeout = \"1500ms\"";

async fn both_ports() -> (Admin, ServedGateway) {
    let (admin, _registry) = Admin::start(&format!("[admin]\n{SHORT}\n")).await;
    let served = gateway(&format!("{SHORT}\nbody_timeout = \"300ms\"")).await;
    (admin, served)
}

#[test]
fn slow_request_heads_and_silent_connections_are_closed() {
    run(|| async {
        let (admin, served) = both_ports().await;
        for address in [admin.address, address_of(&served.url)] {
            // Half a head, then nothing.
            let (_, after) = send_and_read_until_closed(
                address,
                b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                Duration::from_secs(5),
            )
            .await
            .expect("a slow head is cut off");
            assert!(after >= Duration::from_millis(250), "{after:?}");
            // Connected, and never a byte.
            let (_, after) = send_and_read_until_closed(address, b"", Duration::from_secs(5))
                .await
                .expect("a silent connection is closed");
            assert!(after >= Duration::from_millis(250), "{after:?}");
        }
    });
}

#[test]
fn a_slow_body_gets_408() {
    run(|| async {
        let (_admin, served) = both_ports().await;
        let address = address_of(&served.url);
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
            INITIALIZE.len()
        );
        let request = format!("{head}{}", &INITIALIZE[..10]);
        let (answer, after) =
            send_and_read_until_closed(address, request.as_bytes(), Duration::from_secs(5))
                .await
                .expect("a slow body is cut off");
        assert!(status_line(&answer).contains(" 408 "), "{answer}");
        assert!(after >= Duration::from_millis(250), "{after:?}");
    });
}

#[test]
fn idle_kept_alive_connections_are_closed_but_streams_are_not() {
    run(|| async {
        let (admin, served) = both_ports().await;
        // Admin: one request, kept alive, then silence.
        let mut stream = TcpStream::connect(admin.address).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        assert!(status_line(&read_one_response(&mut stream).await).contains(" 200 "));
        // Still open well after the header timeout (idle is longer) ...
        tokio::time::sleep(Duration::from_millis(450)).await;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        assert!(status_line(&read_one_response(&mut stream).await).contains(" 200 "));
        // ... and closed after the idle timeout.
        let started = Instant::now();
        assert!(
            read_until_closed(&mut stream, Duration::from_secs(5))
                .await
                .is_some()
        );
        assert!(started.elapsed() >= Duration::from_millis(1300));

        // Gateway: an open event stream is busy, not idle.
        let client = http();
        let session = initialize(&client, &served.url).await;
        let mut stream = TcpStream::connect(address_of(&served.url)).await.unwrap();
        stream
            .write_all(
                format!(
                    "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\
                     Mcp-Session-Id: {session}\r\n\r\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        assert!(
            read_until_closed(&mut stream, Duration::from_millis(2500))
                .await
                .is_none(),
            "the event stream stays open past idle_timeout"
        );
    });
}

// ---- Caps.

#[test]
fn at_the_connection_cap_the_longest_idle_connection_makes_room_on_both_ports() {
    run(|| async {
        let (admin, _registry) = Admin::start("[admin]\nmax_connections = 2\n").await;
        let served = gateway("max_connections = 2").await;
        let healthz = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        for address in [admin.address, address_of(&served.url)] {
            // Two connections that never send anything hold both slots.
            let mut silent = TcpStream::connect(address).await.unwrap();
            let _younger = TcpStream::connect(address).await.unwrap();
            // A third is served: the oldest silent one is closed for it.
            let mut third = TcpStream::connect(address).await.unwrap();
            third.write_all(healthz).await.unwrap();
            let answer = read_one_response(&mut third).await;
            assert!(!status_line(&answer).contains(" 503 "), "{answer}");
            assert!(
                read_until_closed(&mut silent, Duration::from_secs(5))
                    .await
                    .is_some(),
                "the connection idle for longest was closed"
            );
        }
        assert_eq!(
            metric(
                &served,
                "mcp_supervisor_gateway_evictions_total{what=\"connection\",reason=\"max_connections\"}"
            ),
            1
        );
    });
}

#[test]
fn connections_with_a_request_in_progress_are_never_closed_to_make_room() {
    run(|| async {
        let served = gateway("max_connections = 2").await;
        let address = address_of(&served.url);
        // Both slots hold a request in progress: a session's `GET` stream.
        let mut busy = Vec::new();
        for _ in 0..2 {
            let mut stream = TcpStream::connect(address).await.unwrap();
            let session = raw_stream(&mut stream).await;
            busy.push((stream, session));
        }
        let mut third = TcpStream::connect(address).await.unwrap();
        third
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let answer = read_one_response(&mut third).await;
        assert!(status_line(&answer).contains(" 503 "), "{answer}");
        assert!(answer.contains("Retry-After: 1"), "{answer}");
        assert!(answer.contains("too many connections"), "{answer}");
        // Neither stream was closed for it.
        assert_eq!(
            metric(
                &served,
                "mcp_supervisor_gateway_refusals_total{what=\"connection\",reason=\"max_connections\"}"
            ),
            1
        );
        assert_eq!(
            metric(
                &served,
                "mcp_supervisor_gateway_evictions_total{what=\"connection\",reason=\"max_connections\"}"
            ),
            0
        );
    });
}

/// On `stream`: opens a session, then its `GET` stream, and returns once the
/// stream's head has arrived (the request is then in progress); returns the
/// session id.
async fn raw_stream(stream: &mut TcpStream) -> String {
    let post = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{INITIALIZE}",
        INITIALIZE.len()
    );
    stream.write_all(post.as_bytes()).await.unwrap();
    let answer = read_one_response(stream).await;
    let session = answer
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {answer}"));
    let get = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n"
    );
    stream.write_all(get.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("the stream's head")
            .unwrap();
        assert!(n > 0, "closed before the stream's head");
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(status_line(&head).contains(" 200 "), "{head}");
    session
}

/// A counter of the gateway's own, as `/metrics` would show it.
fn metric(served: &ServedGateway, series: &str) -> u64 {
    let text = mcp_supervisor::admin::metrics_text(&[], Some(&served.tallies()), None);
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

/// Opens the `GET` stream of `session`, which keeps the session busy while
/// it is open.
async fn open_stream(client: &Client, url: &str, session: &str) -> Response {
    let stream = client
        .get(url)
        .header(header::ACCEPT, "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    stream
}

/// A ping in `session`: its HTTP status (404 once the session is gone).
async fn ping(client: &Client, url: &str, session: &str) -> u16 {
    mcp_post(client, url, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn at_the_session_cap_the_least_recently_used_idle_session_makes_room() {
    run(|| async {
        let served = gateway("max_sessions = 2").await;
        // Two clients (two loopback addresses), so neither reaches a share
        // of its own (`max_sessions_per_client` is at most `max_sessions`).
        let client = http();
        let other = Client::builder()
            .no_proxy()
            .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap();
        let first = initialize(&client, &served.url).await;
        let second = initialize(&other, &served.url).await;
        // The second is used again: the first is the least recently used.
        assert_eq!(ping(&other, &served.url, &second).await, 200);
        let third = initialize(&other, &served.url).await;
        assert_eq!(
            ping(&client, &served.url, &first).await,
            404,
            "ended for the third"
        );
        assert_eq!(ping(&other, &served.url, &second).await, 200);
        assert_eq!(ping(&other, &served.url, &third).await, 200);
        assert_eq!(
            metric(
                &served,
                "mcp_supervisor_gateway_evictions_total{what=\"session\",reason=\"max_sessions\"}"
            ),
            1
        );
    });
}

/// Behind a trusted proxy (`trusted_proxies`, here the loopback address
/// 127.0.0.1), each client the proxy names in `X-Forwarded-For` has its own
/// `max_sessions_per_client`; from a peer that is not trusted (127.0.0.2)
/// the header is ignored, so a client cannot spend another's quota.
#[test]
fn behind_a_trusted_proxy_each_client_it_names_has_its_own_quota() {
    run(|| async {
        let served =
            gateway("max_sessions_per_client = 1\ntrusted_proxies = [\"127.0.0.1\"]").await;
        let url = &served.url;
        let proxy = http();
        let stranger = Client::builder()
            .no_proxy()
            .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap();
        let open = |client: &Client, forwarded_for: &'static str| {
            let request =
                mcp_post(client, url, INITIALIZE).header("x-forwarded-for", forwarded_for);
            async move {
                let response = request.send().await.unwrap();
                assert_eq!(response.status(), 200);
                response.headers()["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_owned()
            }
        };
        let first = open(&proxy, "203.0.113.1").await;
        let second = open(&proxy, "198.51.100.7, 203.0.113.2").await;
        assert_eq!(
            ping(&proxy, url, &first).await,
            200,
            "two clients, one session each"
        );
        assert_eq!(ping(&proxy, url, &second).await, 200);
        let again = open(&proxy, "203.0.113.1").await;
        assert_eq!(
            ping(&proxy, url, &first).await,
            404,
            "the same client's quota"
        );
        assert_eq!(ping(&proxy, url, &again).await, 200);
        assert_eq!(ping(&proxy, url, &second).await, 200);

        // Not trusted: its header names nobody; it is one client, itself.
        let own = open(&stranger, "203.0.113.2").await;
        let more = open(&stranger, "203.0.113.9").await;
        assert_eq!(
            ping(&stranger, url, &own).await,
            404,
            "its own quota, not 203.0.113.2's"
        );
        assert_eq!(ping(&stranger, url, &more).await, 200);
        assert_eq!(
            ping(&proxy, url, &second).await,
            200,
            "203.0.113.2 untouched"
        );
        assert_eq!(
            metric(
                &served,
                "mcp_supervisor_gateway_evictions_total{what=\"session\",reason=\"max_sessions_per_client\"}"
            ),
            2
        );
    });
}

#[test]
fn initialize_when_every_session_is_busy_gets_503_with_a_json_rpc_error() {
    run(|| async {
        let served = gateway("max_sessions = 2").await;
        let client = http();
        let first = initialize(&client, &served.url).await;
        let second = initialize(&client, &served.url).await;
        // An open `GET` stream keeps a session busy.
        let first_stream = open_stream(&client, &served.url, &first).await;
        let _second_stream = open_stream(&client, &served.url, &second).await;
        let response = mcp_post(
            &client,
            &served.url,
            INITIALIZE.replace(r#""id":1"#, r#""id":"third""#),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()[header::RETRY_AFTER], "30");
        let error = json_body(response).await;
        assert_eq!(error["id"], "third", "{error}");
        assert_eq!(error["error"]["code"], -32000, "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("max_sessions"),
            "{error}"
        );
        // Concurrent initializes cannot overshoot the cap either.
        let attempts = (0..8).map(|_| mcp_post(&client, &served.url, INITIALIZE).send());
        for response in futures::future::join_all(attempts).await {
            assert_eq!(response.unwrap().status(), 503);
        }
        assert_eq!(
            ping(&client, &served.url, &first).await,
            200,
            "busy sessions stay"
        );
        assert_eq!(
            ping(&client, &served.url, &second).await,
            200,
            "busy sessions stay"
        );
        // Once the first's stream is closed, the first makes room.
        drop(first_stream);
        let mut admitted = false;
        for _ in 0..100 {
            let response = mcp_post(&client, &served.url, INITIALIZE)
                .send()
                .await
                .unwrap();
            if response.status() == 200 {
                admitted = true;
                break;
            }
            // The gateway sees the stream's end when its connection closes.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(admitted, "a session whose stream ended makes room");
        assert_eq!(ping(&client, &served.url, &first).await, 404);
    });
}

/// A client that opens sessions and abandons them (no `DELETE`) locks no
/// one out: a new client from the same address, with the default caps,
/// initializes and calls a tool at once.
#[test]
fn abandoned_sessions_do_not_lock_a_new_client_out() {
    run(|| async {
        let served = gateway("expose = \"meta\"").await;
        let abandoning = http();
        for _ in 0..500 {
            initialize(&abandoning, &served.url).await;
        }
        let client = http();
        let session = initialize(&client, &served.url).await;
        for (id, body) in [
            (
                1,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            ),
            (
                2,
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "list_mcps", "arguments": {}}})
                .to_string(),
            ),
        ] {
            let response = mcp_post(&client, &served.url, body)
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", "2025-06-18")
                .send()
                .await
                .unwrap();
            assert!(
                response.status().is_success(),
                "request {id}: {}",
                response.status()
            );
            if id == 2 {
                let text = response.text().await.unwrap();
                assert!(text.contains("\"result\""), "{text}");
            }
        }
        // The abandoning client held at most its share; the rest were ended.
        let evicted = metric(
            &served,
            "mcp_supervisor_gateway_evictions_total{what=\"session\",reason=\"max_sessions_per_client\"}",
        );
        assert_eq!(
            evicted,
            500 + 1 - 64,
            "every session past the share ended one"
        );
    });
}

#[test]
fn idle_sessions_expire() {
    run(|| async {
        let served = gateway("session_idle_timeout = \"500ms\"\nmax_sessions = 1").await;
        let client = http();
        let session = initialize(&client, &served.url).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ping = mcp_post(
            &client,
            &served.url,
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        )
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
        assert_eq!(ping.status(), 404, "the expired session is gone");
        // Its slot is free again.
        initialize(&client, &served.url).await;
    });
}

/// A request whose answer is all there is to send is answered with plain
/// JSON and a `Content-Length`, not an SSE stream (docs/DECISIONS.md #71).
#[test]
fn an_answer_with_nothing_before_it_is_plain_json() {
    run(|| async {
        let served = gateway("").await;
        let client = http();
        let id = initialize(&client, &served.url).await;
        let initialized = mcp_post(
            &client,
            &served.url,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
        assert_eq!(initialized.status(), 202);
        let listed = mcp_post(
            &client,
            &served.url,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#,
        )
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
        assert_eq!(listed.status(), 200);
        assert_eq!(listed.headers()[header::CONTENT_TYPE], "application/json");
        let length: usize = listed.headers()[header::CONTENT_LENGTH]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let body = json_body(listed).await;
        assert_eq!(body["id"], 7, "{body}");
        assert!(body["result"]["tools"].is_array(), "{body}");
        assert_eq!(length, body.to_string().len());
    });
}
