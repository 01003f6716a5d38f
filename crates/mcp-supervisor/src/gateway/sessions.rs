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

use foldhash::{HashMap, HashSet};
use std::{
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::Stream;
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::{
        WorkerTransport,
        streamable_http_server::{
            RestoreOutcome, SessionId, SessionManager,
            session::{
                EventStore, ServerSseMessage,
                local::{LocalSessionManager, LocalSessionManagerError, create_local_session},
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
}

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
        idle_timeout: Duration,
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
        }
    }

    pub(super) async fn has(&self, id: &str) -> bool {
        self.local.sessions.read().await.contains_key(id)
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
        if live.len() < self.max && !at_quota() {
            return Room::Free;
        }
        // Forget the sessions rmcp has ended by itself (idled out) before
        // counting again.
        let known: HashSet<&SessionId> = live.keys().collect();
        uses.retain(|id, _| known.contains(id));
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
        if live.len() >= self.max {
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

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionsError> {
        Ok(self.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionsError> {
        lock(&self.uses).remove(id);
        Ok(self.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionsError> {
        Ok(self.local.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionsError> {
        Ok(self.local.accept_message(id, message).await?)
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

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, SessionsError> {
        Ok(self.local.restore_session(id).await?)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.local.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Option<Holder> = Some(Holder::Address(IpAddr::V4(std::net::Ipv4Addr::new(
        10, 0, 0, 1,
    ))));
    const B: Option<Holder> = Some(Holder::Address(IpAddr::V4(std::net::Ipv4Addr::new(
        10, 0, 0, 2,
    ))));

    fn sessions(max: usize, per_client: usize) -> CappedSessions {
        CappedSessions::new(
            max,
            per_client,
            Duration::from_secs(60),
            Arc::default(),
            None,
        )
    }

    /// A session opened by `client`, as rmcp opens one for `initialize`.
    async fn open(
        sessions: &CappedSessions,
        client: Option<Holder>,
    ) -> Result<SessionId, Protection> {
        let opening = Opening {
            client,
            caller: None,
            refused: Default::default(),
        };
        OPENING
            .scope(opening, async {
                match sessions.create_session().await {
                    Ok((id, _transport)) => Ok(id),
                    Err(_) => Err(OPENING.with(|opening| opening.refused.get()).unwrap()),
                }
            })
            .await
    }

    /// Two callers behind one address (a NAT, a proxy) each have their
    /// own quota; the shared bearer's holders share the address's.
    #[tokio::test(start_paused = true)]
    async fn a_named_caller_has_its_own_quota_whatever_its_address() {
        use crate::access::Via;
        let address = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9)));
        let named = |client: &str| Caller {
            client: Some(client.to_owned()),
            ..Caller::anonymous(Via::Key)
        };
        let (alice, bob) = (named("alice"), named("bob"));
        assert_eq!(
            Holder::of(&alice, address),
            Some(Holder::Caller("client:alice".into()))
        );
        assert_eq!(
            Holder::of(&Caller::anonymous(Via::Bearer), address),
            address.map(Holder::Address)
        );
        let sessions = sessions(10, 1);
        let first = open(&sessions, Holder::of(&alice, address)).await.unwrap();
        let _busy = sessions.begin(&first).unwrap();
        assert!(open(&sessions, Holder::of(&bob, address)).await.is_ok());
        assert_eq!(
            open(&sessions, Holder::of(&alice, address)).await,
            Err(Protection::SessionRefusedAtClientQuota)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_least_recently_used_idle_session_makes_room() {
        let sessions = sessions(2, 2);
        let first = open(&sessions, A).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let second = open(&sessions, B).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        // The first is used again: now the second is the least recent.
        drop(sessions.begin(&first).unwrap());
        let third = open(&sessions, B).await.unwrap();
        assert!(sessions.has(&first).await && sessions.has(&third).await);
        assert!(!sessions.has(&second).await, "the least recently used went");
        assert_eq!(sessions.tallies.get(Protection::SessionEvictedAtCap), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn busy_sessions_are_never_ended_and_a_full_busy_gateway_refuses() {
        let sessions = sessions(2, 2);
        let first = open(&sessions, A).await.unwrap();
        let second = open(&sessions, B).await.unwrap();
        let _first_busy = sessions.begin(&first).unwrap();
        let second_busy = sessions.begin(&second).unwrap();
        assert_eq!(
            sessions.refusal(A).await,
            Some(Protection::SessionRefusedAtCap)
        );
        assert_eq!(
            open(&sessions, A).await,
            Err(Protection::SessionRefusedAtCap)
        );
        assert!(sessions.has(&first).await && sessions.has(&second).await);
        // Once the second's request ends, it is the one that makes room.
        drop(second_busy);
        let third = open(&sessions, A).await.unwrap();
        assert!(sessions.has(&first).await && sessions.has(&third).await);
        assert!(!sessions.has(&second).await);
        assert_eq!(sessions.tallies.get(Protection::SessionRefusedAtCap), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_at_its_quota_replaces_its_own_idle_sessions_only() {
        let sessions = sessions(10, 2);
        let other = open(&sessions, B).await.unwrap();
        let oldest = open(&sessions, A).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let mine = [oldest, open(&sessions, A).await.unwrap()];
        tokio::time::advance(Duration::from_secs(1)).await;
        let third = open(&sessions, A).await.unwrap();
        assert!(!sessions.has(&mine[0]).await, "its oldest went");
        assert!(sessions.has(&mine[1]).await && sessions.has(&third).await);
        assert!(
            sessions.has(&other).await,
            "another client's session is not touched"
        );
        assert_eq!(
            sessions
                .tallies
                .get(Protection::SessionEvictedAtClientQuota),
            1
        );
        // All of its sessions busy: refused, though the gateway has room.
        let _busy = [
            sessions.begin(&mine[1]).unwrap(),
            sessions.begin(&third).unwrap(),
        ];
        assert_eq!(
            open(&sessions, A).await,
            Err(Protection::SessionRefusedAtClientQuota)
        );
        assert!(
            open(&sessions, B).await.is_ok(),
            "another client still gets in"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn sessions_rmcp_ended_by_itself_are_forgotten() {
        let sessions = sessions(1, 1);
        let first = open(&sessions, A).await.unwrap();
        let _busy = sessions.begin(&first).unwrap();
        // As when it idles out: rmcp drops it without asking us.
        sessions.local.close_session(&first).await.unwrap();
        assert!(open(&sessions, A).await.is_ok());
        assert_eq!(sessions.tallies.get(Protection::SessionEvictedAtCap), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn in_a_fleet_the_ids_name_this_node_and_are_sessions_like_any_other() {
        let key = crate::config::FleetKey::new([9; 32]);
        let ids = Arc::new(SessionIds::new("node-a", &key));
        let sessions = CappedSessions::new(
            1,
            1,
            Duration::from_secs(60),
            Arc::default(),
            Some(ids.clone()),
        );
        let first = open(&sessions, A).await.unwrap();
        assert!(first.starts_with("node-a."), "{first}");
        assert_eq!(ids.holder(&first), super::super::session_ids::Holder::Here);
        let other = SessionIds::new("node-b", &key);
        assert_eq!(
            other.holder(&first),
            super::super::session_ids::Holder::Node("node-a")
        );
        assert!(sessions.has(&first).await);
        // The cap holds as before: the idle first session makes room.
        let second = open(&sessions, A).await.unwrap();
        assert!(!sessions.has(&first).await && sessions.has(&second).await);
        sessions.close_session(&second).await.unwrap();
        assert!(!sessions.has(&second).await);
    }
}
