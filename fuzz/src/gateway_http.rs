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
    net::SocketAddr,
    sync::{OnceLock, mpsc},
    time::Duration,
};

use mcp_test_support::{TestServer, TestServerOptions};

use crate::http1::{
    INITIALIZE, INITIALIZED, LEGACY_VERSION, MODERN_VERSION, delete, post, standard_headers,
};

/// The short run's other targets run on test threads of these names in the
/// same process: their panics are theirs.
const OTHER_TARGETS: [&str; 6] = [
    "config_parse",
    "retry_after",
    "classify",
    "jsonrpc_parse",
    "standing",
    "codec",
];

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
    let (addr, registry) = crate::served::serve(&toml).await;
    ready.send(addr).expect("the harness waits for the address");
    std::future::pending::<()>().await;
    drop((upstream, registry));
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
