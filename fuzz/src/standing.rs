//! No downstream input changes an upstream connection's standing
//! (docs/RELIABILITY.md, "No client can hurt what others share"): arbitrary
//! requests POSTed to a running gateway over loopback HTTP, with two
//! healthy upstreams behind it, and after each one both connections'
//! standing is what it was.
//!
//! One gateway runs in this process for the whole run (its own thread and
//! actix system), with two upstreams that answer every well-formed request:
//! `s`, the in-repo `mcp-test-server` over stdio (rmcp; its pid and every
//! request it sees written to files), and `h`, the in-process rmcp test
//! server over HTTP. Only their `echo` and `add` tools are exposed (a tool
//! that sleeps past the deadline would be a slow upstream, which the
//! supervisor rightly holds against it).
//!
//! The first input byte chooses how the rest is sent:
//! - `mode & 3`: a 2025 session whose client declared nothing (the direct
//!   path), one that declared sampling (rmcp's path), a 2026-07-28 request
//!   with the headers its body implies, or one with an extra `Mcp-*`
//!   header (rmcp's path);
//! - `mode & 4`: the rest is a whole JSON-RPC body; otherwise it is the
//!   arguments of a `tools/call` of `echo` (the fuzzer's bytes go straight
//!   into what the door checks);
//! - `mode & 8`: the call goes to `h` instead of `s`.
//!
//! Invariants, after each input's answer has ended:
//! - every connection is ready, never parked, restarted or failed, and has
//!   no last failure; the stdio child is the same process;
//! - a call the door refused (`-32602`, "arguments were refused") reached
//!   neither upstream;
//! - nothing in the process panics.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{OnceLock, mpsc},
    time::Duration,
};

use actix::Addr;
use mcp_supervisor::{
    ConnectionState,
    registry::{Registry, Status},
};
use mcp_test_support::{TestServer, TestServerOptions};

use crate::http1::{
    INITIALIZED, LEGACY_VERSION, MODERN_VERSION, delete, post, post_whole, standard_headers,
};

/// How long one answer may take to end: above the gateway's `call_timeout`.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);
/// The short run's other targets run on test threads of these names.
const OTHER_TARGETS: [&str; 6] = [
    "config_parse",
    "retry_after",
    "classify",
    "jsonrpc_parse",
    "gateway_http",
    "codec",
];
/// What the door answers a refused call.
const REFUSED: &str = "the tool call's arguments were refused";

struct Gateway {
    addr: SocketAddr,
    registry: Addr<Registry>,
    /// What `s`'s child writes: its pid, and a line per request it sees.
    pid_file: PathBuf,
    count_file: PathBuf,
    /// Asks the gateway's thread how many calls `h` has seen.
    seen_by_http: tokio::sync::mpsc::UnboundedSender<mpsc::Sender<u64>>,
}

fn gateway() -> &'static Gateway {
    static GATEWAY: OnceLock<Gateway> = OnceLock::new();
    GATEWAY.get_or_init(|| {
        crate::watch_panics();
        let dir = std::env::temp_dir().join(format!("mcp-fuzz-standing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let (pid_file, count_file) = (dir.join("pid"), dir.join("count"));
        let (ready, started) = mpsc::channel();
        let files = (pid_file.clone(), count_file.clone());
        std::thread::Builder::new()
            .name("fuzz-standing-gateway".into())
            .spawn(move || actix_rt::System::new().block_on(serve(files, ready)))
            .expect("a thread for the gateway");
        let (addr, registry, seen_by_http) = started
            .recv_timeout(Duration::from_secs(60))
            .expect("the gateway starts within 60 s");
        let gateway = Gateway {
            addr,
            registry,
            pid_file,
            count_file,
            seen_by_http,
        };
        // Every connection in use before the first input: the child
        // started, both sessions open.
        for connection in ["s", "h"] {
            let body = call(connection, r#"{"text":"warm"}"#, true);
            let (answer, text) = post_whole(
                gateway.addr,
                body.as_bytes(),
                &modern_headers(&body),
                ANSWER_WITHIN,
            );
            let text = String::from_utf8_lossy(text.as_deref().unwrap_or_default()).into_owned();
            assert!(
                answer.status == 200 && text.contains("warm"),
                "warming {connection}: {answer:?} {text}"
            );
        }
        gateway
    })
}

type Started = (
    SocketAddr,
    Addr<Registry>,
    tokio::sync::mpsc::UnboundedSender<mpsc::Sender<u64>>,
);

/// Starts the upstreams and the gateway, reports them, then keeps all
/// running until the process exits.
async fn serve((pid_file, count_file): (PathBuf, PathBuf), ready: mpsc::Sender<Started>) {
    let upstream = TestServer::start(TestServerOptions::default())
        .await
        .expect("the upstream test server starts");
    let binary = mcp_test_support::test_server_binary();
    let toml = format!(
        r#"
        [supervisor]
        connect_timeout = "10s"
        call_timeout = "10s"
        list_timeout = "10s"

        [gateway]
        expose = "both"

        [connections.s]
        transport = "stdio"
        command = {binary:?}
        args = ["--pid-file", {pid_file:?}, "--count-file", {count_file:?}]
        allowed_tools = ["echo", "add"]

        [connections.h]
        transport = "http"
        url = "{url}"
        allowed_tools = ["echo", "add"]
        "#,
        url = upstream.url(),
    );
    let (addr, registry) = crate::served::serve(&toml).await;
    let (asks, mut asked) = tokio::sync::mpsc::unbounded_channel::<mpsc::Sender<u64>>();
    ready
        .send((addr, registry, asks))
        .expect("the harness waits for the address");
    // Answers how many calls `h` saw, whenever the harness asks.
    while let Some(answer) = asked.recv().await {
        let _ = answer.send(upstream.counts().tool_calls.values().sum());
    }
    std::future::pending::<()>().await;
}

/// A `tools/call` of `connection`'s `echo` with `arguments` as they are,
/// with a 2026-07-28 client's context (`modern`) or none.
fn call(connection: &str, arguments: &str, modern: bool) -> String {
    let meta = if modern {
        r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#
    } else {
        ""
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{connection}__echo","arguments":{arguments}{meta}}}}}"#
    )
}

fn modern_headers(body: &str) -> Vec<(&'static str, String)> {
    let mut headers = standard_headers(body.as_bytes());
    headers.push(("MCP-Protocol-Version", MODERN_VERSION.into()));
    headers
}

/// What must not move, per connection.
#[derive(Debug, PartialEq)]
struct Standing {
    name: String,
    state: ConnectionState,
    parks: u64,
    restarts: u32,
    failures: u64,
    last_failure: Option<String>,
}

impl Gateway {
    fn standing(&self) -> Vec<Standing> {
        let all =
            futures::executor::block_on(self.registry.send(Status)).expect("the registry answers");
        all.into_iter()
            .map(|status| Standing {
                name: status.name,
                state: status.state,
                parks: status.parks,
                restarts: status.restarts,
                failures: status.failures.values().sum(),
                last_failure: status.last_failure.map(|(failure, _)| failure.to_string()),
            })
            .collect()
    }

    /// Calls both upstreams have seen so far.
    fn seen(&self) -> (usize, u64) {
        let stdio = std::fs::read_to_string(&self.count_file).map_or(0, |text| {
            text.lines()
                .filter(|line| line.starts_with("tools/call"))
                .count()
        });
        let (answer, answered) = mpsc::channel();
        self.seen_by_http
            .send(answer)
            .expect("the gateway's thread runs");
        let http = answered
            .recv_timeout(Duration::from_secs(10))
            .expect("the gateway's thread answers");
        (stdio, http)
    }

    fn pid(&self) -> String {
        std::fs::read_to_string(&self.pid_file).expect("the child wrote its pid")
    }

    /// A 2025 session whose client declared `capabilities`: its headers.
    fn session(&self, capabilities: &str) -> (String, Vec<(&'static str, String)>) {
        let initialize = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{capabilities},"clientInfo":{{"name":"fuzz","version":"0"}}}}}}"#
        );
        let init = post(self.addr, initialize.as_bytes(), &[]);
        assert_eq!(init.status, 200, "initialize: {init:?}");
        let id = init.session.expect("initialize answers with a session id");
        let headers = vec![
            ("Mcp-Session-Id", id.clone()),
            ("MCP-Protocol-Version", LEGACY_VERSION.into()),
        ];
        let initialized = post(self.addr, INITIALIZED.as_bytes(), &headers);
        assert_eq!(initialized.status, 202, "initialized: {initialized:?}");
        (id, headers)
    }
}

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let gateway = gateway();
    let panics_before = crate::panics_seen(&OTHER_TARGETS).0;
    let before = gateway.standing();
    let pid = gateway.pid();
    let seen_before = gateway.seen();

    let connection = if mode & 8 == 8 { "h" } else { "s" };
    let body = if mode & 4 == 4 {
        rest.to_vec()
    } else {
        call(connection, &String::from_utf8_lossy(rest), mode & 3 >= 2).into_bytes()
    };
    let (session, headers) = match mode & 3 {
        0 => {
            let (id, headers) = gateway.session("{}");
            (Some(id), headers)
        }
        1 => {
            let (id, headers) = gateway.session(r#"{"sampling":{}}"#);
            (Some(id), headers)
        }
        modern => {
            let mut headers = standard_headers(&body);
            headers.push(("MCP-Protocol-Version", MODERN_VERSION.into()));
            if modern == 3 {
                headers.push(("Mcp-Param-Fuzz", "1".into()));
            }
            (None, headers)
        }
    };
    let (answer, text) = post_whole(gateway.addr, &body, &headers, ANSWER_WITHIN);
    for id in session.iter().chain(answer.session.iter()) {
        delete(gateway.addr, id);
    }
    let shown = || {
        String::from_utf8_lossy(&body)
            .chars()
            .take(600)
            .collect::<String>()
    };
    assert!(
        (100..500).contains(&answer.status),
        "the gateway answered {} (mode {mode}) to {}",
        answer.status,
        shown()
    );

    let after = gateway.standing();
    assert_eq!(
        after,
        before,
        "a client's request changed a connection's standing (mode {mode}): {}",
        shown()
    );
    assert_eq!(
        gateway.pid(),
        pid,
        "the stdio child was respawned (mode {mode}): {}",
        shown()
    );
    if text.is_some_and(|text| String::from_utf8_lossy(&text).contains(REFUSED)) {
        assert_eq!(
            gateway.seen(),
            seen_before,
            "a call the door refused reached an upstream (mode {mode}): {}",
            shown()
        );
    }
    let (panics, last) = crate::panics_seen(&OTHER_TARGETS);
    assert_eq!(
        panics,
        panics_before,
        "a panic (mode {mode}): {last}\nbody: {}",
        shown()
    );
}
