//! One live, initialized MCP client session (rmcp `RunningService`) and the
//! operations the connection actor runs on it, each bounded by a deadline and
//! each answering with a classified [`Failure`] instead of an rmcp error.
//!
//! Layout:
//! - [`handler`]: our rmcp `ClientHandler`, which forwards upstream
//!   notifications (`tools/list_changed`) to whoever owns the session;
//! - [`http`]: building a session over streamable HTTP with [`RecordingClient`];
//! - [`stdio`]: starting a child process and building a session over its stdio.

pub mod handler;
pub mod http;
pub mod stdio;
mod watch;

use std::time::Duration;

use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, CallToolResult, JsonObject, Tool},
    service::RunningService,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use handler::{SessionEvent, SessionHandler};
pub use http::{open_http, shared_http_client};
pub use stdio::{ChildGroup, open_stdio};

use crate::{
    failure::{Failure, classify_with_fallback},
    http::{HttpRecorder, RecordingClient},
};

/// A live session. Dropping it cancels the rmcp service; prefer [`Session::close`].
#[derive(Debug)]
pub struct Session {
    service: RunningService<RoleClient, SessionHandler>,
    /// HTTP sessions record every response here (see [`RecordingClient`]).
    recorder: Option<HttpRecorder>,
    /// Stdio sessions own their child's process group; dropping it kills
    /// whatever is left of the group.
    child: Option<ChildGroup>,
    /// Fires when the upstream's stream ended for good (see [`Session::ended`]).
    ended: CancellationToken,
}

impl Session {
    pub(crate) fn new(
        service: RunningService<RoleClient, SessionHandler>,
        recorder: Option<HttpRecorder>,
        ended: CancellationToken,
    ) -> Self {
        Session {
            service,
            recorder,
            child: None,
            ended,
        }
    }

    /// A stdio session, owning the process group of its child.
    pub(crate) fn with_child(
        service: RunningService<RoleClient, SessionHandler>,
        child: ChildGroup,
        ended: CancellationToken,
    ) -> Self {
        Session {
            service,
            recorder: None,
            child: Some(child),
            ended,
        }
    }

    /// Cancelled when the upstream's stream ends for good (the child exited,
    /// the HTTP transport gave up) or the session is closed: how the
    /// connection notices a session that died while idle, without polling.
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }

    /// The child process group of a stdio session (`None` over HTTP).
    pub fn child(&self) -> Option<&ChildGroup> {
        self.child.as_ref()
    }

    /// Calls `tool`, answering by `deadline`. If the deadline passes, the call
    /// future is dropped, which makes rmcp send `notifications/cancelled` upstream.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        deadline: Instant,
    ) -> Result<CallToolResult, Failure> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        match tokio::time::timeout_at(deadline, self.service.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(self.classify(&error)),
            Err(_) => Err(Failure::timeout(format!(
                "no answer to tools/call '{tool}' in time"
            ))),
        }
    }

    /// Lists every tool (all pages), answering by `deadline`.
    pub async fn list_tools(&self, deadline: Instant) -> Result<Vec<Tool>, Failure> {
        match tokio::time::timeout_at(deadline, self.service.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(error)) => Err(self.classify(&error)),
            Err(_) => Err(Failure::timeout("no answer to tools/list in time")),
        }
    }

    /// Whether the session's service loop has ended (stream closed, child exited).
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// After [`Session::cancel`]: waits up to `grace` for a stdio child's
    /// process group to exit on its own (rmcp closes its stdin, then sends
    /// SIGTERM), then kills whatever is left. No-op over HTTP.
    pub async fn wait_closed(&self, grace: Duration) {
        let Some(child) = &self.child else { return };
        let deadline = Instant::now() + grace;
        while child.is_alive() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        child.kill_group();
    }

    /// Ends the session without waiting: its service loop stops and closes the
    /// transport in the background (for a child: close stdin, SIGTERM, kill).
    /// Requests still in flight on it fail promptly instead of hanging.
    pub fn cancel(&self) {
        self.service.cancellation_token().cancel();
    }

    /// Closes the session, waiting at most `grace` for a clean goodbye.
    pub async fn close(mut self, grace: Duration) {
        // The result only says how the loop ended; there is nothing left to do
        // with it, and a hung upstream is cut off by the timeout.
        let _ = self.service.close_with_timeout(grace).await;
        // A grandchild, or a child that outlived `grace` (ignoring stdin EOF
        // and SIGTERM), must not survive the session.
        if let Some(child) = &self.child {
            child.kill_group();
        }
    }

    /// The failure an rmcp error means, using the HTTP recording when the
    /// error itself lost the status.
    fn classify(&self, error: &(dyn std::error::Error + 'static)) -> Failure {
        classify_recorded(error, self.recorder.as_ref())
    }
}

/// Classifies with the recorder as fallback and fills in the method and path
/// of the response that carried the failure's status.
pub(crate) fn classify_recorded(
    error: &(dyn std::error::Error + 'static),
    recorder: Option<&HttpRecorder>,
) -> Failure {
    let last_error = recorder.and_then(HttpRecorder::last_error);
    let mut failure = classify_with_fallback(error, last_error.as_ref());
    if let Some(observed) = &last_error
        && failure.status == Some(observed.status)
        && failure.method.is_none()
    {
        failure.method = Some(observed.method.to_owned());
        failure.path = Some(observed.path.clone());
    }
    failure
}

/// The HTTP client type sessions use (exported for benchmarks and tests).
pub type HttpClient = RecordingClient;
