//! The 2025 sessions whose plain calls take the direct path (`direct.rs`),
//! and what the path keeps per session. Owned by
//! [`GatewayState`](super::state::GatewayState); knows nothing of it.

use foldhash::HashMap;
use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::http::HeaderMap;
use rmcp::model::{ClientCapabilities, InitializeRequestParams, RequestId};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::downstream::DownstreamSession;
use crate::{
    listener::guard::{accepts, is_json},
    mcp_headers,
};

/// The 2025 sessions whose plain calls take the direct path, by session id.
#[derive(Debug, Default)]
pub(super) struct DirectCalls {
    sessions: Mutex<HashMap<String, Arc<DirectSession>>>,
    /// Calls answered on the direct path so far.
    answered: AtomicU64,
}

/// One session whose calls may take the direct path.
#[derive(Debug)]
pub(super) struct DirectSession {
    pub(super) downstream: Arc<DownstreamSession>,
    /// Direct calls in progress, by request id.
    calls: Mutex<HashMap<RequestId, CancellationToken>>,
    /// When a direct call last counted as the session's activity.
    touched: Mutex<Option<Instant>>,
}

impl DirectCalls {
    /// Lets session `id`'s plain calls take the direct path, if its client
    /// is one the path serves (see the module doc); forgets closed sessions.
    pub(super) fn admit(&self, id: &str, session: &Arc<DownstreamSession>) {
        let Some(info) = session.peer().and_then(|peer| peer.peer_info()) else {
            return;
        };
        let asks_nothing = |c: &ClientCapabilities| {
            c.sampling.is_none() && c.elicitation.is_none() && c.roots.is_none()
        };
        if !info.protocol_version.has_initialize() || !asks_nothing(&info.capabilities) {
            return;
        }
        let mut sessions = self.lock();
        sessions.retain(|_, known| !known.downstream.is_closed());
        // A second `notifications/initialized` changes nothing.
        sessions.entry(id.to_owned()).or_insert_with(|| {
            Arc::new(DirectSession {
                downstream: session.clone(),
                calls: Mutex::default(),
                touched: Mutex::default(),
            })
        });
    }

    /// Session `id`, if it is open and its calls may take the direct path.
    pub(super) fn session(&self, id: &str) -> Option<Arc<DirectSession>> {
        self.lock()
            .get(id)
            .filter(|session| !session.downstream.is_closed())
            .cloned()
    }

    /// Counts a call taking the direct path.
    pub(super) fn taken(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<DirectSession>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl DirectSession {
    /// Whether a call with `headers` may take the direct path (the
    /// `Host`/`Origin` allowlist is the caller's to check).
    pub(super) fn takes(&self, headers: &HeaderMap) -> bool {
        let Some(info) = self.info() else {
            return false;
        };
        let version = info.protocol_version.as_str().as_bytes();
        plain(headers)
            && headers.iter().all(|(name, value)| {
                !name.as_str().starts_with(mcp_headers::PREFIX)
                    || *name == mcp_headers::SESSION_ID
                    || (*name == mcp_headers::PROTOCOL_VERSION && value.as_bytes() == version)
            })
    }

    /// What the client said at `initialize`.
    pub(super) fn info(&self) -> Option<Arc<InitializeRequestParams>> {
        self.downstream.peer().and_then(|peer| peer.peer_info())
    }

    /// Cancels the direct call `id`, if one is in progress.
    pub(super) fn cancel(&self, id: &RequestId) {
        if let Some(call) = self.calls().get(id) {
            call.cancel();
        }
    }

    /// Whether a call now should count as the session's activity: at most
    /// once per `every`.
    pub(super) fn touch_due(&self, every: Duration) -> bool {
        let mut touched = self.touched.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if touched.is_some_and(|at| now.duration_since(at) < every) {
            return false;
        }
        *touched = Some(now);
        true
    }

    pub(super) fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether `headers` are those of a request rmcp's server would take as it
/// is: JSON in, both JSON and SSE accepted.
pub(super) fn plain(headers: &HeaderMap) -> bool {
    is_json(headers) && accepts(headers, ["application/json", "text/event-stream"])
}
