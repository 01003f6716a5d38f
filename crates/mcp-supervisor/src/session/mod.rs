//! One live, initialized MCP client session (rmcp `RunningService`) and the
//! operations the connection actor runs on it, each bounded by a deadline and
//! each answering with a classified [`Failure`] instead of an rmcp error.
//!
//! Layout:
//! - [`handler`]: our rmcp `ClientHandler`, which forwards upstream
//!   notifications (`tools/list_changed`) to whoever owns the session;
//! - [`http`]: building a session over streamable HTTP with [`RecordingClient`].

pub mod handler;
pub mod http;

use std::time::Duration;

use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, CallToolResult, JsonObject, Tool},
    service::RunningService,
};
use tokio::time::Instant;

pub use handler::{SessionEvent, SessionHandler};
pub use http::{open_http, shared_http_client};

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
}

impl Session {
    fn new(
        service: RunningService<RoleClient, SessionHandler>,
        recorder: Option<HttpRecorder>,
    ) -> Self {
        Session { service, recorder }
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

    /// Closes the session, waiting at most `grace` for a clean goodbye.
    pub async fn close(mut self, grace: Duration) {
        // The result only says how the loop ended; there is nothing left to do
        // with it, and a hung upstream is cut off by the timeout.
        let _ = self.service.close_with_timeout(grace).await;
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
