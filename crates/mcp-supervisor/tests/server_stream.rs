//! The standalone GET stream (server-initiated messages outside any request)
//! is opened only for upstreams that declare `tools.listChanged`: it costs a
//! long-lived TCP connection per session, and `tools/list_changed` is all we
//! use it for.

use std::time::Duration;

use mcp_supervisor::{
    config::HttpTransport,
    http::HttpRecorder,
    session::{Session, SessionHandler, open_http, shared_http_client},
};
use mcp_test_support::{ServerBehavior, TestServer, TestServerOptions, eventually};
use tokio::time::Instant;

const GENEROUS: Duration = Duration::from_secs(20);

async fn server(no_list_changed: bool) -> TestServer {
    TestServer::start(TestServerOptions {
        behavior: ServerBehavior {
            no_list_changed,
            ..ServerBehavior::default()
        },
        ..TestServerOptions::default()
    })
    .await
    .unwrap()
}

async fn open_and_call(server: &TestServer) -> Session {
    let transport = HttpTransport {
        url: server.url(),
        auth: None,
        headers: Vec::new(),
    };
    let session = open_http(
        &transport,
        shared_http_client(),
        HttpRecorder::default(),
        SessionHandler::default(),
        Instant::now() + GENEROUS,
    )
    .await
    .expect("session opens");
    let mut args = serde_json::Map::new();
    args.insert("text".into(), "hi".into());
    let result = session
        .call_tool("echo", Some(args), Instant::now() + GENEROUS)
        .await
        .expect("echo answers");
    assert_ne!(result.is_error, Some(true));
    session
}

#[tokio::test]
async fn an_upstream_that_announces_tool_changes_gets_the_stream() {
    let server = server(false).await;
    let _session = open_and_call(&server).await;
    eventually!(server.stream_gets() == 1);
}

#[tokio::test]
async fn an_upstream_that_never_announces_tool_changes_does_not() {
    let server = server(true).await;
    let _session = open_and_call(&server).await;
    // rmcp asks for the stream right after `initialize`; give a wrong
    // decision time to show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.stream_gets(), 0);
}
