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
    codec::mcp_headers,
    generation::Generation,
    listener::guard::{accepts, is_json},
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
        if Generation::of(&info.protocol_version) == Generation::Stateless
            || !asks_nothing(&info.capabilities)
        {
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

    /// Takes session `id` off the direct path if it may rest
    /// (docs/DECISIONS.md #178): it is here (its client asks nothing of the
    /// gateway: no sampling, elicitation or roots), open, with no direct
    /// call in progress, no subscription and no log level, so ending rmcp's
    /// session loses nothing a replayed `initialize` does not bring back.
    /// `true` if it was taken off; its restore admits it again.
    pub(super) fn rest(&self, id: &str) -> bool {
        let mut sessions = self.lock();
        let may = sessions.get(id).is_some_and(|session| {
            !session.downstream.is_closed()
                && session.downstream.holds_nothing()
                && session.calls().is_empty()
        });
        if may {
            sessions.remove(id);
        }
        may
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
        plain(headers) && only_session_headers(headers, info.protocol_version.as_str())
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

/// Whether the only `Mcp-*` headers among `headers` are the session id and
/// the session's own protocol `version`. Names first, then the one
/// header's values: walking every value of every header costs more.
fn only_session_headers(headers: &HeaderMap, version: &str) -> bool {
    headers.keys().all(|name| {
        !name.as_str().starts_with(mcp_headers::PREFIX)
            || *name == mcp_headers::SESSION_ID
            || *name == mcp_headers::PROTOCOL_VERSION
    }) && headers
        .get_all(mcp_headers::PROTOCOL_VERSION)
        .iter()
        .all(|value| value.as_bytes() == version.as_bytes())
}

/// Whether `headers` are those of a request rmcp's server would take as it
/// is: JSON in, both JSON and SSE accepted.
pub(super) fn plain(headers: &HeaderMap) -> bool {
    is_json(headers)
        && (headers.get(http::header::ACCEPT).is_some_and(|accept| {
            // What rmcp's and the Python SDK's clients send, compared whole
            // first.
            matches!(
                accept.as_bytes(),
                b"text/event-stream, application/json" | b"application/json, text/event-stream"
            )
        }) || accepts(headers, ["application/json", "text/event-stream"]))
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderName, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn only_the_session_id_and_its_own_version_may_come_as_mcp_headers() {
        let usual = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-session-id", "s"),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        assert!(plain(&headers(&usual)));
        assert!(only_session_headers(&headers(&usual), "2025-11-25"));
        assert!(only_session_headers(&headers(&usual[..2]), "2025-11-25"));
        assert!(!only_session_headers(&headers(&usual), "2025-06-18"));
        for extra in [
            ("mcp-method", "tools/call"),
            ("mcp-name", "a__echo"),
            ("Mcp-Param-Region", "eu"),
            ("mcp-protocol-version", "2025-06-18"),
        ] {
            let mut with = usual.to_vec();
            with.push(extra);
            assert!(
                !only_session_headers(&headers(&with), "2025-11-25"),
                "{extra:?}"
            );
        }
        // JSON in, both media types accepted, however written.
        for (content, accept, plainly) in [
            (
                "application/json",
                "text/event-stream, application/json",
                true,
            ),
            (
                "application/json; charset=utf-8",
                "application/json;q=1, text/event-stream",
                true,
            ),
            ("application/json", "application/json", false),
            ("text/plain", "application/json, text/event-stream", false),
            ("application/json", "*/*", false),
        ] {
            let map = headers(&[("content-type", content), ("accept", accept)]);
            assert_eq!(plain(&map), plainly, "{content} {accept}");
        }
    }
}
