//! How a running gateway stops, in steps (docs/ARCHITECTURE.md,
//! "Shutdown"): drain, stop accepting, end the sessions.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::time::Instant;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::listener::tallies::Tallies;

/// How a running gateway is stopped, step by step (see [`serve_http`](super::serve_http)), and
/// what its protections did ([`Tallies`]).
#[derive(Debug, Clone, Default)]
pub struct GatewayShutdown {
    /// Cancelled: the gateway drains (see the module).
    pub(super) draining: CancellationToken,
    /// When the last request arrived (only kept while draining).
    pub(super) last_arrival: Arc<Mutex<Option<Instant>>>,
    /// Cancelled: no new connection is accepted, and each open one closes
    /// once its request in progress is answered.
    pub(super) accepting: CancellationToken,
    /// Cancelled: every MCP session and open stream (standalone SSE,
    /// `subscriptions/listen`) ends.
    pub(super) sessions: CancellationToken,
    /// The requests in progress: a POST counts until its answer is sent.
    /// Streams that stay open on purpose do not count.
    pub(super) requests: TaskTracker,
    pub(super) tallies: Arc<Tallies>,
}

impl GatewayShutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Evictions and refusals so far, for `/metrics`.
    pub fn tallies(&self) -> Arc<Tallies> {
        self.tallies.clone()
    }

    /// Step 1: drain. Requests of the sessions the gateway has are served,
    /// on any connection, new or not; a new session or a session-less
    /// request is answered 503 with `Retry-After`; each connection closes
    /// after its next answer.
    pub fn start_draining(&self) {
        *self.arrivals() = Some(Instant::now());
        self.draining.cancel();
    }

    /// Step 2: waits, for at most `bound`, until no request is in progress
    /// and none has arrived for `grace` since the last one ended (a client's
    /// follow-up to an answer comes within it); `true` if that happened in
    /// time.
    pub async fn drained(&self, bound: Duration, grace: Duration) -> bool {
        let deadline = Instant::now() + bound;
        self.requests.close();
        loop {
            if tokio::time::timeout_at(deadline, self.requests.wait())
                .await
                .is_err()
            {
                return false;
            }
            let quiet_since = Instant::now();
            tokio::time::sleep_until((quiet_since + grace).min(deadline)).await;
            let arrived_since = self.arrivals().is_some_and(|last| last > quiet_since);
            if !arrived_since && self.requests.is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return self.requests.is_empty();
            }
        }
    }

    /// Step 3: accept nothing new.
    pub fn stop_accepting(&self) {
        self.accepting.cancel();
    }

    /// Step 4: ends every session and stream; [`serve_http`](super::serve_http) then returns
    /// once the connections are closed.
    pub fn end_sessions(&self) {
        self.accepting.cancel();
        self.sessions.cancel();
    }

    /// How many requests are in progress.
    pub fn in_progress(&self) -> usize {
        self.requests.len()
    }

    fn arrivals(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.last_arrival
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a request's arrival while draining.
    pub(super) fn arrived(&self) {
        if self.draining.is_cancelled() {
            *self.arrivals() = Some(Instant::now());
        }
    }
}
