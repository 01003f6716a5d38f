//! What the HTTP client saw, kept per connection for classification and status.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use crate::failure::{Failure, FailureKind};

/// One HTTP response: never a query string, header value or body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpObservation {
    /// `POST`, `GET` or `DELETE`.
    pub method: &'static str,
    /// The URL path the request went to (shared: recorded per response).
    pub path: Arc<str>,
    pub status: u16,
    /// The response's `Retry-After`, parsed; `None` when absent or garbage.
    pub retry_after: Option<Duration>,
    /// When it was received.
    pub at: SystemTime,
}

impl HttpObservation {
    /// The failure this response alone implies, if its status is an error.
    pub fn as_failure(&self) -> Option<Failure> {
        FailureKind::from_status(self.status)?;
        let mut failure = Failure::from_status(self.status, self.retry_after);
        failure.method = Some(self.method.to_owned());
        failure.path = Some(self.path.to_string());
        Some(failure)
    }
}

/// Shared, cheap-to-clone record of a connection's HTTP responses.
///
/// The client writes to it on every response; the connection reads it when a
/// failure needs the real status behind an rmcp error. A plain mutex is right
/// here: it is held for a copy, never across an await.
#[derive(Clone, Debug, Default)]
pub struct HttpRecorder {
    inner: Arc<Mutex<RecorderState>>,
}

#[derive(Debug, Default)]
struct RecorderState {
    last: Option<HttpObservation>,
    last_error: Option<HttpObservation>,
    responses: u64,
}

impl HttpRecorder {
    /// Records one response.
    pub fn record(&self, observation: HttpObservation) {
        let mut state = self.lock();
        state.responses += 1;
        if FailureKind::from_status(observation.status).is_some() {
            state.last_error = Some(observation.clone());
        }
        state.last = Some(observation);
    }

    /// The most recent response of any status.
    pub fn last(&self) -> Option<HttpObservation> {
        self.lock().last.clone()
    }

    /// The most recent response with an error status (4xx/5xx).
    pub fn last_error(&self) -> Option<HttpObservation> {
        self.lock().last_error.clone()
    }

    /// How many responses were recorded.
    pub fn responses(&self) -> u64 {
        self.lock().responses
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecorderState> {
        // A panic while holding this lock cannot leave the state inconsistent
        // (every write is one assignment), so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
