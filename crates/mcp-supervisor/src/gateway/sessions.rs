//! The gateway's 2025-era MCP sessions: rmcp's in-memory sessions, capped,
//! with what each is doing.
//!
//! A cap must not become a lockout. A client that opens sessions and
//! abandons them (no `DELETE`) would otherwise hold every slot until the
//! sessions idle out (`session_idle_timeout`, minutes). So:
//!
//! - a session is *busy* while one of its HTTP requests is open (a `POST`
//!   being answered, a `GET` stream); otherwise it is idle since its last
//!   request ended;
//! - at `max_sessions` a new session ends the least recently used idle one
//!   (its client gets 404 on its next request and initializes again, as the
//!   protocol allows); `initialize` is refused only when every session is
//!   busy;
//! - one client holds at most `max_sessions_per_client`: its next session
//!   ends its own least recently used idle one, and is refused only when
//!   all of its sessions are busy. A client is the user or client its
//!   credentials name ([`Holder::Caller`]), else its peer address (the
//!   shared bearer names nobody).
//!
//! Each eviction and refusal is counted in [`Tallies`].
//!
//! A session that can lose nothing *rests* after `session_rest_after`
//! without a request (docs/DECISIONS.md #178): rmcp's session (its worker,
//! channels and tasks, about 80 KB) ends, and the session keeps its id, its
//! owner, its place under the caps and the client's `initialize`. Its next
//! request restores it through rmcp's own restore path (this is its session
//! store): a new rmcp session under the same id, the `initialize` replayed
//! to a new handler. The client sees nothing of it. A resting session still
//! ends after `session_idle_timeout`, or at a client's `DELETE`.

use foldhash::{HashMap, HashSet};
use std::{
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::Stream;
use rmcp::{
    model::{
        ClientJsonRpcMessage, ClientNotification, InitializeRequestParams, ServerJsonRpcMessage,
    },
    transport::{
        WorkerTransport,
        streamable_http_server::{
            RestoreOutcome, SessionId, SessionManager,
            session::{
                EventStore, ServerSseMessage,
                local::{LocalSessionManager, LocalSessionManagerError, create_local_session},
                store::{SessionState, SessionStore, SessionStoreError},
            },
        },
    },
};
use tokio::time::Instant;

use super::{direct_sessions::DirectSession, session_ids::SessionIds};
use crate::access::Caller;
use crate::listener::tallies::{Protection, Tallies};

tokio::task_local! {
    /// Set around rmcp's handling of a request, so [`CappedSessions::create_session`]
    /// knows who opens the session and can say why it refused, and what
    /// rmcp asks of the handler before the request reaches it (a tool's
    /// definition, `GatewayHandler::get_tool`) is answered for its caller.
    pub(super) static OPENING: Opening;
}

/// A session's request from a caller other than the one that opened it.
#[derive(Debug)]
pub(super) struct NotTheOpener;

/// Whose a session is, for the per-client quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Holder {
    /// A caller its credentials name (`user:…`, `client:…`).
    Caller(Arc<str>),
    /// A peer address, when the credentials name nobody.
    Address(IpAddr),
}

impl Holder {
    /// Whose a session opened by `caller` from `address` is.
    pub(super) fn of(caller: &Caller, address: Option<IpAddr>) -> Option<Holder> {
        match caller.principal() {
            Some(principal) => Some(Holder::Caller(principal.into())),
            None => address.map(Holder::Address),
        }
    }
}

/// Who sends the request rmcp is handling (and so opens a session, if it
/// does), and why a session was refused, if it was.
#[derive(Debug, Default)]
pub(super) struct Opening {
    pub(super) client: Option<Holder>,
    /// The caller, as the endpoint identified it.
    pub(super) caller: Option<Arc<Caller>>,
    pub(super) refused: std::cell::Cell<Option<Protection>>,
}

/// What one session is doing.
#[derive(Debug)]
struct Use {
    /// Its id (the map's key, shared), for the guards.
    id: SessionId,
    /// Whose it is, for the quota.
    client: Option<Holder>,
    /// The user or client whose credentials opened it (`None`: they named
    /// nobody): the only caller it serves.
    owner: Option<Arc<str>>,
    /// Its HTTP requests open now.
    open: usize,
    /// When its last request began or ended (or it was opened).
    last: Instant,
    /// What its client sent at `initialize` (rmcp hands it to the store
    /// once the handshake is done): what a restore replays.
    initialize: Option<Arc<InitializeRequestParams>>,
    rest: Rest,
    /// Its rested rmcp session's end is still to be heard (its worker's
    /// `close_session`): heard after a restore, it must not end the new one.
    unheard_end: bool,
}

/// Whether a session holds an rmcp session now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rest {
    Awake,
    /// Its rmcp session is being ended, to rest.
    Falling,
    /// Without an rmcp session until its next request.
    Resting,
    /// A request claimed it and is restoring it: until its `initialize`
    /// and `initialized` are replayed, other requests wait.
    Waking,
}

type Uses = Arc<Mutex<HashMap<SessionId, Use>>>;

fn lock(uses: &Uses) -> std::sync::MutexGuard<'_, HashMap<SessionId, Use>> {
    uses.lock().unwrap_or_else(PoisonError::into_inner)
}

/// rmcp's in-memory sessions, at most `max` at once and `per_client` per
/// peer address, each closed after `session_idle_timeout` without activity
/// (rmcp's `keep_alive`).
pub(super) struct CappedSessions {
    local: LocalSessionManager,
    pub(super) max: usize,
    pub(super) per_client: usize,
    /// Makes check-then-create atomic, so concurrent `initialize`s cannot
    /// overshoot a cap.
    creating: tokio::sync::Mutex<()>,
    uses: Uses,
    tallies: Arc<Tallies>,
    /// In a fleet, the ids name this node (`session_ids.rs`); alone, they
    /// are rmcp's own.
    ids: Option<Arc<SessionIds>>,
    rest_after: Duration,
    /// Told when a falling session comes to rest.
    settled: tokio::sync::Notify,
}

/// How long a request waits for its session to come to rest before it is
/// restored (the end of rmcp's session takes a mailbox round; a worker that
/// never says it ended does not hold the request longer than this).
const FALLING_AT_MOST: Duration = Duration::from_secs(1);

/// How long a request waits for another to restore its session. A restore
/// replays `initialize`, which waits at most a second for a catalog never
/// listed; one taking longer (its request went away midway) is undone, and
/// the waiting request restores the session itself.
const WAKING_AT_MOST: Duration = Duration::from_secs(5);

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum SessionsError {
    #[error("too many MCP sessions ({})", .0.reason())]
    Full(Protection),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// Keeps a session busy until dropped (it goes with a response body).
#[derive(Debug)]
pub(super) struct InUse {
    uses: Uses,
    id: SessionId,
}

impl Drop for InUse {
    fn drop(&mut self) {
        if let Some(session) = lock(&self.uses).get_mut(&self.id) {
            session.open = session.open.saturating_sub(1);
            session.last = Instant::now();
        }
    }
}

/// What admitting a new session takes.
#[derive(Debug, PartialEq)]
enum Room {
    /// There is room.
    Free,
    /// Ending this idle session makes room.
    Evict(SessionId, Protection),
    /// Every candidate is busy.
    Refuse(Protection),
}

impl CappedSessions {
    pub(super) fn new(
        max: usize,
        per_client: usize,
        (idle_timeout, rest_after): (Duration, Duration),
        tallies: Arc<Tallies>,
        ids: Option<Arc<SessionIds>>,
    ) -> Self {
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = Some(idle_timeout);
        CappedSessions {
            local,
            max,
            per_client,
            creating: tokio::sync::Mutex::new(()),
            uses: Uses::default(),
            tallies,
            ids,
            rest_after,
            settled: tokio::sync::Notify::new(),
        }
    }

    /// Whether session `id` is this gateway's (awake or resting).
    pub(super) async fn has(&self, id: &str) -> bool {
        self.local.sessions.read().await.contains_key(id)
            || lock(&self.uses)
                .get(id)
                .is_some_and(|session| session.rest != Rest::Awake)
    }

    /// Rests, every so often, each session quiet for `rest_after` that
    /// `may_rest` lets go (it takes the session off the direct path), and
    /// ends resting sessions idle for the idle timeout; until `self` goes.
    pub(super) fn keep_resting(
        self: &Arc<Self>,
        may_rest: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) {
        let sessions = Arc::downgrade(self);
        let every = (self.rest_after / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(sessions) = sessions.upgrade() else {
                    return;
                };
                sessions.rest_quiet(&may_rest).await;
            }
        });
    }

    /// One round of [`CappedSessions::keep_resting`].
    async fn rest_quiet(&self, may_rest: &impl Fn(&str) -> bool) {
        let quiet = |session: &Use| {
            session.rest == Rest::Awake
                && session.open == 0
                && session.initialize.is_some()
                && session.last.elapsed() >= self.rest_after
        };
        let candidates: Vec<SessionId> = {
            let mut uses = lock(&self.uses);
            let idle = self.local.session_config.keep_alive;
            uses.retain(|_, session| {
                session.rest != Rest::Resting
                    || idle.is_none_or(|idle| session.last.elapsed() < idle)
            });
            uses.values()
                .filter(|session| quiet(session))
                .map(|session| session.id.clone())
                .collect()
        };
        // One at a time, each decided under the lock a request's
        // `begin_for` takes: a request that began first keeps its session
        // awake; one that begins after finds it off the direct path, and
        // waits for its rmcp session to end before restoring it.
        for id in candidates {
            let falls = match lock(&self.uses).get_mut(&id) {
                Some(session) if quiet(session) && may_rest(&id) => {
                    session.rest = Rest::Falling;
                    session.unheard_end = true;
                    true
                }
                _ => false,
            };
            if falls {
                self.tallies.count(Protection::SessionRested);
                if let Err(error) = self.local.close_session(&id).await {
                    tracing::debug!(%error, "resting a session");
                }
            }
        }
    }

    /// Session `id`'s rest once it is neither falling nor waking (waited
    /// for at most [`FALLING_AT_MOST`] and [`WAKING_AT_MOST`]); `None`: not
    /// a session of this gateway.
    async fn settled_rest(&self, id: &str) -> Option<Rest> {
        let started = Instant::now();
        loop {
            let settled = self.settled.notified();
            let rest = lock(&self.uses).get(id).map(|session| session.rest)?;
            let most = match rest {
                Rest::Falling => FALLING_AT_MOST,
                Rest::Waking => WAKING_AT_MOST,
                Rest::Awake | Rest::Resting => return Some(rest),
            };
            if tokio::time::timeout_at(started + most, settled)
                .await
                .is_ok()
            {
                continue;
            }
            // Its worker has not said it ended, or its restore did not end:
            // it rests now. The end of that rmcp session, if it comes
            // later, ends nothing (`unheard_end`).
            let undone = {
                let mut uses = lock(&self.uses);
                let session = uses.get_mut(id)?;
                if session.rest != rest {
                    continue;
                }
                session.rest = Rest::Resting;
                session.unheard_end = true;
                rest == Rest::Waking
            };
            if undone {
                let _ = self.local.close_session(&id.into()).await;
            }
            return Some(Rest::Resting);
        }
    }

    /// Claims resting session `id` for this request to restore: `false`
    /// when another request claimed it first.
    fn claim(&self, id: &str) -> bool {
        match lock(&self.uses).get_mut(id) {
            Some(session) if session.rest == Rest::Resting => {
                session.rest = Rest::Waking;
                true
            }
            _ => false,
        }
    }

    /// Marks session `id` busy for a request of the caller named
    /// `principal` (see [`Caller::principal`]) until the returned guard is
    /// dropped; `Ok(None)` for a session the gateway does not have (rmcp's
    /// to answer), `Err` when the session is not that caller's: it serves
    /// the caller whose credentials opened it, or anyone when they named
    /// nobody.
    pub(super) fn begin_for(
        &self,
        id: &str,
        principal: Option<&str>,
    ) -> Result<Option<InUse>, NotTheOpener> {
        let mut uses = lock(&self.uses);
        let Some(session) = uses.get_mut(id) else {
            return Ok(None);
        };
        if session.owner.as_deref() != principal {
            return Err(NotTheOpener);
        }
        session.open += 1;
        session.last = Instant::now();
        Ok(Some(InUse {
            uses: self.uses.clone(),
            id: session.id.clone(),
        }))
    }

    /// [`CappedSessions::begin_for`] by a caller whose credentials name
    /// nobody.
    #[cfg(test)]
    fn begin(&self, id: &str) -> Option<InUse> {
        self.begin_for(id, None).ok().flatten()
    }

    /// Whether a new session from `client` would be refused now (every
    /// session it could replace is busy): the reason, if so.
    pub(super) async fn refusal(&self, client: Option<Holder>) -> Option<Protection> {
        match self.room(client.as_ref()).await {
            Room::Refuse(why) => Some(why),
            Room::Free | Room::Evict(..) => None,
        }
    }

    /// What admitting a session of `client` takes (see the module).
    async fn room(&self, client: Option<&Holder>) -> Room {
        let live = self.local.sessions.read().await;
        let mut uses = lock(&self.uses);
        let of_client = |session: &Use| client.is_some() && session.client.as_ref() == client;
        let at_quota = || uses.values().filter(|s| of_client(s)).count() >= self.per_client;
        // Resting sessions count as sessions: they come back on a request.
        let resting = |uses: &HashMap<SessionId, Use>| {
            uses.values()
                .filter(|session| session.rest != Rest::Awake && !live.contains_key(&session.id))
                .count()
        };
        if live.len() + resting(&uses) < self.max && !at_quota() {
            return Room::Free;
        }
        // Forget the sessions rmcp has ended by itself (idled out) before
        // counting again.
        let known: HashSet<&SessionId> = live.keys().collect();
        uses.retain(|id, session| session.rest != Rest::Awake || known.contains(id));
        let least_recent = |candidates: &mut dyn Iterator<Item = (&SessionId, &Use)>| {
            candidates
                .filter(|(_, session)| session.open == 0)
                .min_by_key(|(_, session)| session.last)
                .map(|(id, _)| id.clone())
        };
        if uses.values().filter(|s| of_client(s)).count() >= self.per_client {
            return match least_recent(&mut uses.iter().filter(|(_, s)| of_client(s))) {
                Some(id) => Room::Evict(id, Protection::SessionEvictedAtClientQuota),
                None => Room::Refuse(Protection::SessionRefusedAtClientQuota),
            };
        }
        if live.len() + resting(&uses) >= self.max {
            return match least_recent(&mut uses.iter()) {
                Some(id) => Room::Evict(id, Protection::SessionEvictedAtCap),
                None => Room::Refuse(Protection::SessionRefusedAtCap),
            };
        }
        Room::Free
    }

    /// Counts a direct call as activity of session `id`, which rmcp's idle
    /// timeout only sees in its session worker: at most every quarter of the
    /// timeout, the worker is handed a message that changes nothing.
    pub(super) async fn touch(&self, id: &str, session: &DirectSession) {
        let Some(idle) = self.local.session_config.keep_alive else {
            return;
        };
        if session.touch_due(idle / 4) {
            // Boxed: rare, and rmcp's future would make every direct
            // call's larger (docs/DECISIONS.md #132).
            let _ = Box::pin(self.local.accept_message(&id.into(), activity())).await;
        }
    }

    /// Ends session `id` to make room.
    async fn evict(&self, id: &SessionId, why: Protection) {
        lock(&self.uses).remove(id);
        if let Err(error) = self.local.close_session(id).await {
            tracing::debug!(%error, "ending a session to make room");
        }
        self.tallies.count(why);
        tracing::debug!(
            reason = why.reason(),
            "ended the least recently used idle session to admit a new one"
        );
    }
}

/// The message that counts as a session's activity: the cancellation of a
/// request id no client uses (rmcp and our handler ignore it).
fn activity() -> ClientJsonRpcMessage {
    static ACTIVITY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("mcp-supervisor/activity/{:016x}", rand::random::<u64>())
    });
    let cancelled = serde_json::json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": *ACTIVITY },
    });
    serde_json::from_value(cancelled).expect("a valid cancellation")
}

impl SessionManager for CappedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), SessionsError> {
        let _one_at_a_time = self.creating.lock().await;
        let (client, owner) = OPENING
            .try_with(|opening| {
                let owner = opening
                    .caller
                    .as_ref()
                    .and_then(|caller| caller.principal());
                (opening.client.clone(), owner.map(Arc::from))
            })
            .unwrap_or_default();
        match self.room(client.as_ref()).await {
            Room::Free => {}
            Room::Evict(id, why) => self.evict(&id, why).await,
            Room::Refuse(why) => {
                self.tallies.count(why);
                let _ = OPENING.try_with(|opening| opening.refused.set(Some(why)));
                return Err(SessionsError::Full(why));
            }
        }
        let (id, transport) = match &self.ids {
            None => self.local.create_session().await?,
            // What rmcp's `create_session` does, with an id of ours.
            Some(ids) => {
                let id = SessionId::from(ids.mint());
                let (handle, worker) =
                    create_local_session(id.clone(), self.local.session_config.clone());
                self.local.sessions.write().await.insert(id.clone(), handle);
                (id, WorkerTransport::spawn(worker))
            }
        };
        lock(&self.uses).insert(
            id.clone(),
            Use {
                id: id.clone(),
                client,
                owner,
                open: 0,
                last: Instant::now(),
                initialize: None,
                rest: Rest::Awake,
                unheard_end: false,
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionsError> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    /// A resting session is not here for rmcp, which then restores it: the
    /// first request to ask claims it; one that comes while it falls or
    /// wakes waits for that.
    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionsError> {
        loop {
            match self.settled_rest(id).await {
                Some(Rest::Resting) if self.claim(id) => return Ok(false),
                Some(Rest::Resting) => continue,
                _ => return Ok(self.local.has_session(id).await?),
            }
        }
    }

    /// A rested rmcp session's end (its worker's last word): a falling
    /// session rests, a restored one goes on. Any other session ends.
    async fn close_session(&self, id: &SessionId) -> Result<(), SessionsError> {
        {
            let mut uses = lock(&self.uses);
            match uses.get_mut(id) {
                Some(session) if session.unheard_end => {
                    session.unheard_end = false;
                    if session.rest == Rest::Falling {
                        session.rest = Rest::Resting;
                    }
                    drop(uses);
                    self.settled.notify_waiters();
                    return Ok(());
                }
                Some(session) if session.rest == Rest::Resting => return Ok(()),
                _ => {
                    uses.remove(id);
                }
            }
        }
        Ok(self.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        Ok(self.local.create_stream(id, message).await?)
    }

    /// A waking session is awake once its replayed `initialized` is in.
    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionsError> {
        let initialized = matches!(
            &message,
            ClientJsonRpcMessage::Notification(notification)
                if matches!(notification.notification, ClientNotification::InitializedNotification(_))
        );
        self.local.accept_message(id, message).await?;
        if initialized {
            let woke = match lock(&self.uses).get_mut(id) {
                Some(session) if session.rest == Rest::Waking => {
                    session.rest = Rest::Awake;
                    true
                }
                _ => false,
            };
            if woke {
                self.settled.notify_waiters();
            }
        }
        Ok(())
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        Ok(self.local.resume(id, last_event_id).await?)
    }

    /// The request that claimed a resting session: rmcp's session comes
    /// back under its id (rmcp replays its `initialize`). A session that
    /// ended meanwhile (a `DELETE`, an eviction) stays ended.
    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, SessionsError> {
        let waking = |uses: &HashMap<SessionId, Use>| {
            uses.get(&id)
                .is_some_and(|session| session.rest == Rest::Waking)
        };
        if !waking(&lock(&self.uses)) {
            return Ok(RestoreOutcome::NotSupported);
        }
        let outcome = self.local.restore_session(id.clone()).await?;
        if let RestoreOutcome::Restored(_) = &outcome {
            if !waking(&lock(&self.uses)) {
                let _ = self.local.close_session(&id).await;
                return Ok(RestoreOutcome::NotSupported);
            }
            self.tallies.count(Protection::SessionRestored);
        }
        Ok(outcome)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.local.event_store()
    }
}

/// What rmcp keeps of a session to restore it: here, the `initialize` of
/// each session, given back only for one that rests (an ended or unknown
/// session stays unknown: 404).
#[async_trait::async_trait]
impl SessionStore for CappedSessions {
    /// Only for the request that claimed the session (`has_session`).
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        Ok(lock(&self.uses)
            .get(id)
            .filter(|session| session.rest == Rest::Waking)
            .and_then(|session| session.initialize.as_deref().cloned())
            .map(SessionState::new))
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        if let Some(session) = lock(&self.uses).get_mut(id) {
            session.initialize = Some(Arc::new(state.initialize_params.clone()));
        }
        Ok(())
    }

    /// A client's `DELETE`: the session ends, resting or not (and an rmcp
    /// session restored for it since is closed too).
    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        lock(&self.uses).remove(id);
        let _ = self.local.close_session(&id.into()).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
