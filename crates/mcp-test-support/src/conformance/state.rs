//! State shared by every handler instance, and state kept per session.
//!
//! rmcp builds a fresh handler for every legacy session and for every
//! single 2026-07-28 (stateless) request, so anything that must outlive one
//! request — the live `subscriptions/listen` streams, the `requestState`
//! signing key, the switches the `test_trigger_*` tools flip — lives in
//! [`Shared`], behind one `Arc` every handler holds. What belongs to one
//! legacy session (its `logging/setLevel`, its resource subscriptions)
//! lives in [`Session`].

#![allow(deprecated)] // LoggingLevel: SEP-2577 deprecates logging, the suite still tests it.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering},
    },
};

use rmcp::{
    RoleServer,
    model::{LoggingLevel, RequestStateCodec},
    service::{Peer, SubscriptionSink},
    task_manager::TaskManager,
};
use tokio::sync::Notify;

/// Everything handler instances share for the life of the process.
pub(crate) struct Shared {
    /// Seals and opens MRTR `requestState` (SEP-2322 wants it integrity
    /// protected; the key never leaves this process).
    pub(crate) codec: RequestStateCodec,
    /// Tasks (SEP-2663) outlive the request that made them.
    pub(crate) tasks: TaskManager,
    /// Open `subscriptions/listen` streams (2026-07-28 clients).
    subscriptions: Mutex<Vec<SubscriptionSink>>,
    /// Initialized legacy sessions, to send them `list_changed`.
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Whether `test_trigger_tool_change` has added the dynamic tool.
    pub(crate) dynamic_tool: AtomicBool,
    /// Whether `test_trigger_prompt_change` has added the dynamic prompt.
    pub(crate) dynamic_prompt: AtomicBool,
    /// One wake-up per legacy session whose `test_reconnection` stream was
    /// cut: the HTTP layer signals it once the client has resumed.
    resumed: Mutex<HashMap<String, Arc<Notify>>>,
    /// Refuse `server/discover`, like a 2025-era server: clients fall back to
    /// `initialize` and a session, and are asked with requests, not rounds.
    pub(crate) legacy_only: AtomicBool,
}

impl std::fmt::Debug for Shared {
    // By hand: rmcp's TaskManager has no Debug.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("running_tasks", &self.tasks.running_task_count())
            .field("subscriptions", &lock(&self.subscriptions).len())
            .field("dynamic_tool", &self.dynamic_tool)
            .field("dynamic_prompt", &self.dynamic_prompt)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn new() -> Self {
        // A fresh key per process: a requestState is only ever opened by
        // the process that sealed it. 32 random bytes is exactly the
        // codec's minimum key length, hence the unchecked constructor.
        let key: [u8; RequestStateCodec::MIN_KEY_LENGTH] = rand::random();
        Self {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            tasks: TaskManager::new(),
            subscriptions: Mutex::default(),
            legacy_peers: Mutex::default(),
            dynamic_tool: AtomicBool::new(false),
            dynamic_prompt: AtomicBool::new(false),
            resumed: Mutex::default(),
            legacy_only: AtomicBool::new(false),
        }
    }

    pub(crate) fn add_subscription(&self, sink: SubscriptionSink) {
        lock(&self.subscriptions).push(sink);
    }

    pub(crate) fn remove_subscription(&self, sink: &SubscriptionSink) {
        lock(&self.subscriptions).retain(|open| open.id() != sink.id());
    }

    pub(crate) fn subscriptions(&self) -> Vec<SubscriptionSink> {
        lock(&self.subscriptions).clone()
    }

    pub(crate) fn add_legacy_peer(&self, peer: Peer<RoleServer>) {
        let mut peers = lock(&self.legacy_peers);
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(peer);
    }

    pub(crate) fn legacy_peers(&self) -> Vec<Peer<RoleServer>> {
        let mut peers = lock(&self.legacy_peers);
        peers.retain(|peer| !peer.is_transport_closed());
        peers.clone()
    }

    /// Flips a dynamic entry; returns whether it is now listed.
    pub(crate) fn toggle(flag: &AtomicBool) -> bool {
        !flag.fetch_xor(true, Ordering::SeqCst)
    }

    /// The wake-up for this session's resumed stream (created on first use
    /// by either side, so the order of tool and GET does not matter).
    pub(crate) fn resumed(&self, session_id: &str) -> Arc<Notify> {
        lock(&self.resumed)
            .entry(session_id.to_owned())
            .or_default()
            .clone()
    }

    /// Wakes the tool waiting for this session's resume, if a stream of
    /// that session was cut (a resume of any other stream is not news).
    pub(crate) fn notify_resumed(&self, session_id: &str) {
        if let Some(resumed) = lock(&self.resumed).get(session_id) {
            resumed.notify_one();
        }
    }

    pub(crate) fn forget_resumed(&self, session_id: &str) {
        lock(&self.resumed).remove(session_id);
    }
}

/// What one legacy session (or one stdio connection) remembers.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// Set by `logging/setLevel`; `None` until then.
    pub(crate) log_level: Mutex<Option<LoggingLevel>>,
    /// URIs subscribed with `resources/subscribe`.
    pub(crate) subscribed: Mutex<BTreeSet<String>>,
}

/// A poisoned lock only means another request panicked mid-update of a
/// plain collection; the data is still usable, so keep serving.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toggle_reports_the_new_state() {
        let flag = AtomicBool::new(false);
        assert!(Shared::toggle(&flag));
        assert!(!Shared::toggle(&flag));
    }
}
