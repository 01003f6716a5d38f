//! Drives the in-repo test server over real loopback HTTP into each HTTP-level
//! failure and asserts the `Failure` the session reports (docs/ARCHITECTURE.md,
//! "Failure classification").

use std::time::{Duration, SystemTime};

mod support;

use mcp_supervisor::{
    failure::{Failure, FailureKind},
    http::HttpRecorder,
    session::{Session, shared_http_client},
};
use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions};
use support::open_http_session;
use tokio::time::Instant;

const GENEROUS: Duration = Duration::from_secs(20);

struct Fixture {
    server: TestServer,
    recorder: HttpRecorder,
}

impl Fixture {
    async fn new() -> Self {
        Fixture {
            server: TestServer::start(TestServerOptions::legacy())
                .await
                .unwrap(),
            recorder: HttpRecorder::default(),
        }
    }

    async fn open(&self) -> Result<Session, Failure> {
        open_http_session(
            &self.server.url(),
            shared_http_client(),
            self.recorder.clone(),
        )
        .await
    }

    async fn call_echo(&self, session: &Session, deadline: Duration) -> Result<String, Failure> {
        let mut args = serde_json::Map::new();
        args.insert("text".into(), "hi".into());
        let result = session
            .call_tool("echo", Some(args), Instant::now() + deadline)
            .await?;
        Ok(format!("{:?}", result.content))
    }

    /// Opens a session, injects `fault` for the next echo call, calls it.
    async fn call_failure(&self, fault: Fault) -> Failure {
        let session = self.open().await.expect("session opens");
        self.server
            .faults()
            .push(FaultRule::once(Match::tool("echo"), fault));
        self.call_echo(&session, GENEROUS)
            .await
            .expect_err("the injected fault must surface")
    }
}

fn assert_failure(failure: &Failure, kind: FailureKind, status: Option<u16>) {
    assert_eq!(failure.kind, kind, "{failure:?}");
    assert_eq!(failure.status, status, "{failure:?}");
}

#[tokio::test]
async fn initialize_401_is_auth_with_and_without_a_challenge() {
    for fault in [
        Fault::status(401),
        Fault::status(401).with_www_authenticate("Bearer realm=\"test\""),
    ] {
        let fixture = Fixture::new().await;
        fixture
            .server
            .faults()
            .push(FaultRule::once(Match::method("initialize"), fault));
        let failure = fixture.open().await.expect_err("initialize must fail");
        assert_failure(&failure, FailureKind::Auth, Some(401));
        assert_eq!(failure.method.as_deref(), Some("POST"));
        assert_eq!(failure.path.as_deref(), Some("/mcp"));
        assert_eq!(fixture.recorder.last().map(|o| o.status), Some(401));
    }
}

/// A redirect is not followed (it could carry the token to another origin),
/// and the failure keeps its status like every other non-2xx answer.
#[tokio::test]
async fn initialize_302_keeps_its_status() {
    for first in [Match::method("initialize"), Match::Any] {
        let fixture = Fixture::new().await;
        fixture
            .server
            .faults()
            .push(FaultRule::always(first, Fault::status(302)));
        let failure = fixture.open().await.expect_err("initialize must fail");
        assert_failure(&failure, FailureKind::Protocol, Some(302));
        assert_eq!(failure.path.as_deref(), Some("/mcp"));
    }
}

#[tokio::test]
async fn call_403_is_permission() {
    let fixture = Fixture::new().await;
    let failure = fixture.call_failure(Fault::status(403)).await;
    assert_failure(&failure, FailureKind::Permission, Some(403));
    assert!(failure.not_run, "refused: the call did not run");
    assert_eq!(failure.path.as_deref(), Some("/mcp"));
}

#[tokio::test]
async fn call_429_with_retry_after_seconds_is_rate_limit() {
    let fixture = Fixture::new().await;
    let failure = fixture
        .call_failure(Fault::status(429).with_retry_after_secs(7))
        .await;
    assert_failure(&failure, FailureKind::RateLimit, Some(429));
    assert_eq!(failure.retry_after, Some(Duration::from_secs(7)));
    assert!(failure.not_run, "a 429 never ran");
    let recorded = fixture.recorder.last_error().unwrap();
    assert_eq!(
        (recorded.status, recorded.retry_after),
        (429, Some(Duration::from_secs(7)))
    );
}

#[tokio::test]
async fn call_429_with_retry_after_date_is_rate_limit() {
    let fixture = Fixture::new().await;
    let at = SystemTime::now() + Duration::from_secs(90);
    let failure = fixture
        .call_failure(Fault::status(429).with_retry_after_date(at))
        .await;
    assert_failure(&failure, FailureKind::RateLimit, Some(429));
    let wait = failure.retry_after.expect("date form parsed");
    assert!(
        wait > Duration::from_secs(60) && wait <= Duration::from_secs(90),
        "{wait:?}"
    );
}

#[tokio::test]
async fn call_500_with_a_json_rpc_body_keeps_its_status() {
    // rmcp's bundled client would report this as a bare JSON-RPC error (protocol).
    let fixture = Fixture::new().await;
    let failure = fixture
        .call_failure(Fault::status(500).with_jsonrpc_body())
        .await;
    assert_failure(&failure, FailureKind::Server, Some(500));
    assert!(!failure.not_run, "a 500 may have run");
}

#[tokio::test]
async fn call_503_is_server_and_may_have_run() {
    let fixture = Fixture::new().await;
    let failure = fixture.call_failure(Fault::status(503)).await;
    assert_failure(&failure, FailureKind::Server, Some(503));
    // A 503 may come from a proxy after the server did the work.
    assert!(!failure.not_run);
}

#[tokio::test]
async fn a_dropped_connection_is_transport() {
    let fixture = Fixture::new().await;
    let failure = fixture.call_failure(Fault::DropConnection).await;
    assert_failure(&failure, FailureKind::Transport, None);
    assert!(!failure.not_run, "the tool ran before the drop");
    assert_eq!(fixture.server.completed_calls("echo"), 1);
}

#[tokio::test]
async fn a_hang_is_a_timeout_at_the_deadline() {
    let fixture = Fixture::new().await;
    let session = fixture.open().await.unwrap();
    fixture
        .server
        .faults()
        .push(FaultRule::once(Match::tool("echo"), Fault::Hang));
    let failure = fixture
        .call_echo(&session, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_failure(&failure, FailureKind::Timeout, None);
    // The session survives a timed-out call.
    assert!(
        fixture
            .call_echo(&session, GENEROUS)
            .await
            .unwrap()
            .contains("hi")
    );
}

#[tokio::test]
async fn one_expired_session_is_reinitialized_by_rmcp() {
    let fixture = Fixture::new().await;
    let session = fixture.open().await.unwrap();
    fixture
        .server
        .faults()
        .push(FaultRule::once(Match::tool("echo"), Fault::ExpireSession));
    let text = fixture.call_echo(&session, GENEROUS).await.unwrap();
    assert!(text.contains("hi"));
    assert_eq!(fixture.server.requests("initialize"), 2);
    assert_eq!(fixture.recorder.last_error().map(|o| o.status), Some(404));
}

#[tokio::test]
async fn a_session_that_stays_expired_is_transport_404() {
    let fixture = Fixture::new().await;
    let session = fixture.open().await.unwrap();
    fixture
        .server
        .faults()
        .push(FaultRule::always(Match::tool("echo"), Fault::ExpireSession));
    let failure = fixture.call_echo(&session, GENEROUS).await.unwrap_err();
    assert_failure(&failure, FailureKind::Transport, Some(404));
    assert!(!failure.not_run, "re-sent only if safe");
}

#[tokio::test]
async fn garbage_is_protocol() {
    let fixture = Fixture::new().await;
    let failure = fixture.call_failure(Fault::Garbage).await;
    assert_failure(&failure, FailureKind::Protocol, None);
}

#[tokio::test]
async fn nothing_listening_is_transport_and_never_ran() {
    let fixture = Fixture::new().await;
    let url = fixture.server.url();
    fixture.server.shutdown().await;
    let failure = open_http_session(&url, shared_http_client(), HttpRecorder::default())
        .await
        .unwrap_err();
    assert_failure(&failure, FailureKind::Transport, None);
    assert!(failure.not_run);
}
