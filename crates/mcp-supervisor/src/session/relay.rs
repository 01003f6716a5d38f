//! The link between a request we forward upstream and the downstream request
//! it serves, so the gateway can be a transparent proxy: the upstream's
//! progress for that request goes back to the right downstream client, the
//! requests the upstream makes while it runs (sampling, elicitation, roots)
//! are answered by that client, and a downstream cancel reaches the upstream.
//!
//! A session keeps the links of its requests in flight ([`Links`]), by our
//! JSON-RPC id (server-to-client requests over streamable HTTP name the POST
//! they arrived on) and by the progress token rmcp put on the request.

// Logging is deprecated by SEP-2577; 2025-era servers still log, and we relay it.
#![allow(deprecated)]

use foldhash::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ClientResult, ErrorData, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken, RequestId, ServerRequest,
};
use tokio_util::sync::CancellationToken;

use crate::access::Caller;

/// The downstream side of one forwarded request (implemented by the gateway).
pub trait Downstream: Send + Sync + std::fmt::Debug + 'static {
    /// The upstream reported progress on the forwarded request; `progress`
    /// carries rmcp's upstream token, which the implementation replaces by
    /// the downstream client's own.
    fn progress(&self, progress: ProgressNotificationParam);

    /// The upstream asks the client something (`sampling/createMessage`,
    /// `elicitation/create`, `roots/list`) while the forwarded request runs.
    /// Always answers: a client that cannot is an error, never silence.
    fn request(
        &self,
        request: ServerRequest,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>>;

    /// The upstream logged a message while the forwarded request ran (log
    /// messages name no request: every request in flight on the session gets
    /// it, and each decides whether its client wants it). Answers which
    /// downstream session it reached, if any, so it is not sent there twice.
    fn log(&self, message: LoggingMessageNotificationParam) -> Option<usize>;

    /// Waits (briefly, bounded) until what was relayed so far has been sent
    /// downstream, so the forwarded request's answer does not overtake it.
    fn settled(&self) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }

    /// Whether a tool's answer may come back with its structured content
    /// kept as the upstream wrote it ([`Forwarded::Tool`](crate::Forwarded::Tool)):
    /// the gateway's downstreams, which write it for their client as it is.
    /// Any other gets rmcp's type (`Forwarded::Answered`).
    fn takes_kept_answers(&self) -> bool {
        false
    }
}

/// A forwarded request's downstream, and its cancellation.
#[derive(Debug, Clone)]
pub struct DownstreamLink {
    pub downstream: Arc<dyn Downstream>,
    /// Cancelled when the downstream client cancels its request: the
    /// forwarded request is cancelled upstream and answers at once.
    pub cancelled: CancellationToken,
    /// What the downstream client declared it can answer. A 2026-07-28
    /// upstream is told per request, so it asks only for what the client can
    /// give (a 2025 upstream session was told ours, once, at `initialize`).
    pub capabilities: Option<ClientCapabilities>,
    /// The log level the downstream request asked for (a 2026-07-28 client
    /// asks per request), passed on to a 2026-07-28 upstream.
    pub log_level: Option<LoggingLevel>,
    /// Who the downstream client is, as the gateway identified it: the
    /// call's caller, for its records (never passed upstream).
    pub caller: Option<Arc<Caller>>,
}

impl DownstreamLink {
    pub fn new(downstream: Arc<dyn Downstream>, cancelled: CancellationToken) -> Self {
        DownstreamLink {
            downstream,
            cancelled,
            capabilities: None,
            log_level: None,
            caller: None,
        }
    }

    pub fn with_caller(mut self, caller: Option<Arc<Caller>>) -> Self {
        self.caller = caller;
        self
    }

    pub fn with_capabilities(mut self, capabilities: Option<ClientCapabilities>) -> Self {
        self.capabilities = capabilities;
        self
    }

    pub fn with_log_level(mut self, log_level: Option<LoggingLevel>) -> Self {
        self.log_level = log_level;
        self
    }
}

/// The links of a session's forwarded requests in flight.
#[derive(Debug, Default)]
pub struct Links {
    inner: Mutex<Inflight>,
}

#[derive(Debug, Default)]
struct Inflight {
    by_request: HashMap<RequestId, (u64, Arc<dyn Downstream>)>,
    by_token: HashMap<ProgressToken, Arc<dyn Downstream>>,
    /// Registration order, so "the most recent request" is well defined.
    next: u64,
}

impl Links {
    /// Registers `link` for the request with `id` and `token`, until the
    /// returned guard drops.
    pub(crate) fn register(
        self: &Arc<Self>,
        id: RequestId,
        token: ProgressToken,
        link: &DownstreamLink,
    ) -> Registered {
        let mut inner = self.lock();
        inner.next += 1;
        let order = inner.next;
        inner
            .by_request
            .insert(id.clone(), (order, link.downstream.clone()));
        inner
            .by_token
            .insert(token.clone(), link.downstream.clone());
        Registered {
            links: self.clone(),
            id,
            token,
        }
    }

    /// Whose progress this is.
    pub(crate) fn by_token(&self, token: &ProgressToken) -> Option<Arc<dyn Downstream>> {
        self.lock().by_token.get(token).cloned()
    }

    /// The downstream of the request with `id`, if it is in flight.
    pub(crate) fn by_request(&self, id: &RequestId) -> Option<Arc<dyn Downstream>> {
        self.lock()
            .by_request
            .get(id)
            .map(|(_, downstream)| downstream.clone())
    }

    /// The downstreams of every request in flight.
    pub(crate) fn all(&self) -> Vec<Arc<dyn Downstream>> {
        self.lock()
            .by_request
            .values()
            .map(|(_, downstream)| downstream.clone())
            .collect()
    }

    /// The downstream of the most recently sent request in flight: the best
    /// guess when nothing on the wire says which request a server-to-client
    /// request belongs to (stdio has no per-request streams).
    pub(crate) fn most_recent(&self) -> Option<Arc<dyn Downstream>> {
        self.lock()
            .by_request
            .values()
            .max_by_key(|(order, _)| *order)
            .map(|(_, downstream)| downstream.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inflight> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Removes a request's link when the request ends, however it ends.
#[derive(Debug)]
pub(crate) struct Registered {
    links: Arc<Links>,
    id: RequestId,
    token: ProgressToken,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut inner = self.links.lock();
        inner.by_request.remove(&self.id);
        inner.by_token.remove(&self.token);
    }
}
