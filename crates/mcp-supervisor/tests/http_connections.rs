//! The TCP connections an HTTP session uses, over real loopback HTTP:
//! - calls share pooled connections, and an upstream that stalls on reuse
//!   (Nagle on, no `TCP_NODELAY`) is detected at connect and then served with
//!   a connection per request (how the probe's timings become a verdict is
//!   unit-tested with made-up timings, `http/reuse.rs`; here only the real
//!   40 ms stall is timed, and the tests that need reuse to work run on a
//!   paused clock, where a loopback ping takes no time however loaded the
//!   machine);
//! - the standalone GET stream (server-initiated messages outside any
//!   request) is opened only for upstreams that declare `tools.listChanged`:
//!   it holds a connection per session, and `tools/list_changed` is all we
//!   use it for.

mod support;

use std::time::Duration;

use actix::Actor;
use mcp_supervisor::{
    http::{HttpClients, HttpRecorder, Reuse},
    registry::{Registry, Shutdown, Warmup},
    session::{Session, shared_http_client},
};
use mcp_test_support::{
    Fault, FaultRule, Match, ServerBehavior, TestServer, TestServerOptions, eventually,
};
use support::open_http_session;
use tokio::time::Instant;

const GENEROUS: Duration = Duration::from_secs(20);
const CALLS: u64 = 30;
/// How long probes of a stalling upstream may go on before one must have
/// found the stall (each takes a fraction of a second).
const PROBING: Duration = Duration::from_secs(30);

async fn open(server: &TestServer, clients: &HttpClients) -> Session {
    open_http_session(&server.url(), clients.clone(), HttpRecorder::default())
        .await
        .expect("session opens")
}

async fn call_echo_times(session: &Session, times: u64) {
    for n in 0..times {
        let mut args = serde_json::Map::new();
        args.insert("text".into(), format!("call {n}").into());
        let result = session
            .call_tool("echo", Some(args), Instant::now() + GENEROUS)
            .await
            .expect("echo answers");
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }
}

fn verdict(server: &TestServer, clients: &HttpClients) -> Reuse {
    clients
        .origin(&reqwest::Url::parse(&server.url()).unwrap())
        .verdict()
}

#[tokio::test(start_paused = true)]
async fn calls_reuse_pooled_connections() {
    let server = TestServer::start(TestServerOptions::legacy())
        .await
        .unwrap();
    let clients = shared_http_client();
    let session = open(&server, &clients).await;
    assert_eq!(verdict(&server, &clients), Reuse::Works);
    assert_calls_share_a_connection(&server, &session).await;
}

/// One pooled connection carries `CALLS` sequential calls (the standalone
/// GET stream may hold another); a connection per call would be 30.
async fn assert_calls_share_a_connection(server: &TestServer, session: &Session) {
    let before = server.connections_accepted();
    call_echo_times(session, CALLS).await;
    let opened = server.connections_accepted() - before;
    assert!(
        opened <= 2,
        "{opened} new TCP connections for {CALLS} sequential calls"
    );
}

/// Warming up many connections to one upstream connects a few at a time
/// (docs/SUPERVISION.md), so they share a few pooled TCP connections for
/// their requests; all at once, each would open its own. Each keeps one more
/// for its `subscriptions/listen` stream.
#[test]
fn warming_up_connects_a_few_at_a_time() {
    const CONNECTIONS: u64 = 30;
    support::run(|| async {
        let server = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let toml: String = (0..CONNECTIONS)
            .map(|n| support::http_connection(&format!("c{n}"), &server.url(), ""))
            .collect();
        let registry = Registry::new(support::config(&toml)).start();
        let warm = registry.send(Warmup).await.unwrap();
        assert!(warm.iter().all(|(_, listed)| listed.is_ok()), "{warm:?}");
        assert_eq!(server.requests("subscriptions/listen"), CONNECTIONS);
        let opened = server.connections_accepted();
        // Listen streams, plus about one per connection warming up at once
        // (up to 6); all at once would be about 3 per connection.
        assert!(
            opened <= CONNECTIONS + 12,
            "{opened} TCP connections to warm up {CONNECTIONS} connections"
        );
        let _ = registry.send(Shutdown).await;
    });
}

/// A 2026-07-28 upstream answers each request on its own event stream; the
/// connection goes back to the pool once the stream has ended.
#[tokio::test(start_paused = true)]
async fn calls_to_a_2026_upstream_reuse_pooled_connections() {
    let server = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let clients = shared_http_client();
    let session = open(&server, &clients).await;
    assert_eq!(
        session.protocol_version(),
        Some(rmcp::model::ProtocolVersion::V_2026_07_28)
    );
    assert_calls_share_a_connection(&server, &session).await;
}

/// A busy process answers late on every connection: its probe pings are
/// slow without the connection stalling, and must not turn reuse off (which
/// would cost a TCP connection per request to the upstream from then on).
#[tokio::test]
async fn a_busy_runtime_is_not_taken_for_a_stalling_upstream() {
    let server = TestServer::start(TestServerOptions::legacy())
        .await
        .unwrap();
    // Something else on this runtime holds it 40 ms at a time.
    let busy = tokio::spawn(async {
        loop {
            std::thread::sleep(Duration::from_millis(40));
            tokio::task::yield_now().await;
        }
    });
    let clients = shared_http_client();
    let _session = open(&server, &clients).await;
    busy.abort();
    assert_eq!(verdict(&server, &clients), Reuse::Works);
}

/// The real stall, timed on the wall clock: the one test here whose subject
/// is a time (the 40 ms a delayed ACK holds a reused connection).
#[tokio::test]
async fn an_upstream_that_stalls_on_reuse_gets_a_connection_per_request() {
    let server = TestServer::start(TestServerOptions {
        nodelay: false,
        ..TestServerOptions::legacy()
    })
    .await
    .unwrap();
    // A loaded machine can keep a probe from seeing the stall: its pings are
    // slow for the whole process then, so they are not counted (by design,
    // see `probe_verdict`). Each fresh set of clients probes again, until one
    // finds it; on an idle machine the first does, under a CPU hog about one
    // in three.
    let giving_up = Instant::now() + PROBING;
    let (clients, session) = loop {
        let clients = shared_http_client();
        let session = open(&server, &clients).await;
        if verdict(&server, &clients) == Reuse::Stalls {
            break (clients, session);
        }
        assert!(
            Instant::now() < giving_up,
            "no probe found the reuse stall within {PROBING:?}"
        );
    };

    let before = server.connections_accepted();
    call_echo_times(&session, CALLS).await;
    let opened = server.connections_accepted() - before;
    assert!(
        opened >= CALLS,
        "{opened} new TCP connections for {CALLS} calls: reuse was not switched off"
    );

    // The verdict is per origin: a second session to it does not probe again
    // and does not reuse either.
    let pings_before = server.requests("ping");
    let second = open(&server, &clients).await;
    assert_eq!(
        server.requests("ping"),
        pings_before,
        "the origin was probed again"
    );
    let before = server.connections_accepted();
    call_echo_times(&second, 3).await;
    assert!(server.connections_accepted() - before >= 3);
}

#[tokio::test(start_paused = true)]
async fn an_upstream_that_never_answers_ping_connects_without_waiting_out_the_deadline() {
    let server = TestServer::start(TestServerOptions::legacy())
        .await
        .unwrap();
    server
        .faults()
        .push(FaultRule::always(Match::method("ping"), Fault::Hang));
    let clients = shared_http_client();
    let started = Instant::now();
    let session = open(&server, &clients).await;
    // The probe gives up after one unanswered ping (0.5 s); the connect
    // deadline is 20 s. Paused time: only the probe's wait moves the clock.
    assert_eq!(started.elapsed(), Duration::from_millis(500));
    assert_eq!(
        server.requests("ping"),
        1,
        "one unanswered ping ends the probe"
    );
    assert_eq!(
        verdict(&server, &clients),
        Reuse::Works,
        "no evidence of a stall"
    );
    call_echo_times(&session, 1).await;
}

async fn announcing_server(announces_tool_changes: bool) -> TestServer {
    TestServer::start(TestServerOptions {
        behavior: ServerBehavior {
            no_list_changed: !announces_tool_changes,
            ..ServerBehavior::default()
        },
        ..TestServerOptions::legacy()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn an_upstream_that_announces_tool_changes_gets_the_standalone_stream() {
    let server = announcing_server(true).await;
    let session = open(&server, &shared_http_client()).await;
    call_echo_times(&session, 1).await;
    eventually!(server.stream_gets() == 1);
}

#[tokio::test(start_paused = true)]
async fn an_upstream_that_never_announces_tool_changes_does_not() {
    let server = announcing_server(false).await;
    let session = open(&server, &shared_http_client()).await;
    call_echo_times(&session, 1).await;
    // rmcp asks for the stream right after `initialize`. On the paused
    // clock this sleep ends only once every task waits: a GET a wrong
    // decision sent would have reached the server by then.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(server.stream_gets(), 0);
}
