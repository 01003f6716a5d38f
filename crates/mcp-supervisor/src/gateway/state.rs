//! What every downstream session of the gateway shares: the merged view of
//! the upstreams (with each connection's last good catalog, so a listing
//! never waits on a sick upstream that answered before), the downstream
//! sessions to notify, and the upstream resource subscriptions they hold.

// Logging is deprecated by SEP-2577 (protocol 2026-07-28); 2025-era servers
// and clients use it, and the gateway relays it.
#![allow(deprecated)]

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use actix::{Addr, MailboxError};
use rmcp::{
    model::{
        ClientRequest, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
        SubscribeRequest, SubscribeRequestParams, UnsubscribeRequest, UnsubscribeRequestParams,
    },
    service::SubscriptionSink,
};

use super::{
    directory::{Directory, Target},
    downstream::DownstreamSession,
    naming::Naming,
};
use crate::{
    Forwarded,
    access::Caller,
    call::UpstreamRequest,
    config::{Expose, Prefix},
    registry::{Catalog, Forward, Lineup, ListTools, Registry, Routes, ShareRoutes},
    session::{DownstreamLink, ListKind},
    telemetry::TraceParent,
};

/// How long a listing waits for a connection's catalog it has never seen
/// (typically the first listing after start): enough for a healthy upstream
/// to connect and list, short enough that a sick one barely delays everyone
/// else. A catalog that comes later is added in the background, and clients
/// are told the lists changed.
pub const FIRST_WAIT: Duration = Duration::from_secs(1);

/// How long a listing waits for a fresh catalog when it holds a last good
/// one: enough for the registry to answer from its cache, never enough to
/// wait on an upstream.
const FRESH_WAIT: Duration = Duration::from_millis(100);

/// Catalogs that change (or come late, first) within this of each other
/// join the view together: one rebuild of the view and one `list_changed`
/// per list, however many connections changed (at start, often all of
/// them), and no other connection asked again.
const TOGETHER: Duration = Duration::from_millis(100);

/// Tasks remembered at most, and how long one unheard of is kept once that
/// many are.
const MAX_TASKS: usize = 65_536;
const TASK_MEMORY: Duration = Duration::from_secs(24 * 3600);

/// Downstream sessions remembered for notifications; more are served but
/// not notified (a bound against clients that never close sessions).
const MAX_DOWNSTREAM_SESSIONS: usize = 4096;

/// State shared by every downstream session of the gateway.
#[derive(Debug)]
pub struct GatewayState {
    pub(super) registry: Addr<Registry>,
    /// The registry's routes, asked for on first use.
    routes: tokio::sync::OnceCell<Routes>,
    pub(super) expose: Expose,
    prefix: Prefix,
    view: Mutex<View>,
    /// How many times the view was asked of the registry.
    refreshes: AtomicU64,
    /// Builds of the merged view (see [`GatewayState::rebuilds`]).
    rebuilds: AtomicU64,
    sessions: Mutex<Vec<Arc<DownstreamSession>>>,
    /// `subscriptions/listen` streams of 2026-07-28 clients, each with the
    /// resource URIs it subscribed to (kept in a session of its own).
    listeners: Mutex<Vec<(SubscriptionSink, Arc<DownstreamSession>)>>,
    /// Upstream subscriptions: (connection, URI there) → the exposed URI and
    /// how many downstream sessions hold it. Subscribed upstream once.
    subscriptions: Mutex<HashMap<(String, String), (String, usize)>>,
    /// Multi-round requests: sealed `requestState`s and requests waiting for
    /// a client's answers.
    pub(super) rounds: super::rounds::Rounds,
    /// Tasks (SEP-2663) created through the gateway, by task id.
    tasks: Mutex<HashMap<String, Task>>,
    /// Sessions whose plain calls the HTTP endpoint answers itself.
    pub(super) direct: super::direct_sessions::DirectCalls,
    /// What each caller may use, and the record of it.
    pub(super) rights: super::rights::Rights,
    /// A connection exchanges its callers' tokens (`on_behalf`, as the
    /// gateway started): only then does a request forwarded to another
    /// node carry its caller's token.
    pub(super) exchanges: std::sync::atomic::AtomicBool,
}

/// A task (SEP-2663) created through the gateway.
#[derive(Debug)]
struct Task {
    /// The connection that runs it.
    connection: String,
    /// Who created it: the only caller its `tasks/*` are answered for.
    caller: Arc<Caller>,
    /// When it was last heard of.
    seen: std::time::Instant,
}

#[derive(Debug, Default)]
struct View {
    directory: Arc<Directory>,
    /// The last catalog each connection answered with.
    catalogs: HashMap<String, Arc<Catalog>>,
    /// Connections whose first catalog is awaited in the background.
    awaited: HashSet<String>,
    /// The lists to tell clients of when the catalogs that changed join
    /// the view, after [`TOGETHER`]; `None` while no change waits.
    told: Option<Vec<ListKind>>,
    /// Clashes already reported, so each is logged once.
    reported: HashSet<String>,
    /// The connections (and whether each is retired) the directory was
    /// built for, in name order.
    lineup: Vec<(String, bool)>,
}

impl GatewayState {
    /// A gateway's state where every caller may use everything.
    pub fn new(registry: Addr<Registry>, expose: Expose, prefix: Prefix) -> Arc<Self> {
        Self::with_rights(registry, expose, prefix, Default::default())
    }

    pub(super) fn with_rights(
        registry: Addr<Registry>,
        expose: Expose,
        prefix: Prefix,
        rights: super::rights::Rights,
    ) -> Arc<Self> {
        Arc::new(GatewayState {
            registry,
            routes: tokio::sync::OnceCell::new(),
            expose,
            prefix,
            view: Mutex::new(View::default()),
            refreshes: AtomicU64::new(0),
            rebuilds: AtomicU64::new(0),
            sessions: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
            subscriptions: Mutex::new(HashMap::new()),
            rounds: Default::default(),
            tasks: Mutex::new(HashMap::new()),
            direct: Default::default(),
            rights,
            exchanges: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// How many tool calls the HTTP endpoint answered on its direct path,
    /// without rmcp's server (`direct.rs`).
    pub fn direct_calls(&self) -> u64 {
        self.direct.answered()
    }

    /// Whether `name` is one of the gateway's own meta-tools, which it
    /// answers itself.
    pub(super) fn serves_meta_tool(&self, name: &str) -> bool {
        self.meta() && crate::meta::is_meta_tool(name)
    }

    pub(super) fn namespaced(&self) -> bool {
        matches!(self.expose, Expose::Namespaced | Expose::Both)
    }

    pub(super) fn meta(&self) -> bool {
        matches!(self.expose, Expose::Meta | Expose::Both)
    }

    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The merged view as last built.
    pub(super) fn current(&self) -> Arc<Directory> {
        self.view().directory.clone()
    }

    /// How many times the gateway asked the registry for its view (at a
    /// session's start, a listing's first page, a name it did not know).
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// How many times the merged view was built anew (a refresh that found
    /// something changed, a batch of changed catalogs).
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds.load(Ordering::Relaxed)
    }

    /// The view a listing's page is cut from: rebuilt from the registry for
    /// its first page (no `cursor`); a later page continues from the view as
    /// it is, asking no connection again (a listing of 20,000 tools is 40
    /// pages).
    pub(super) async fn listing(self: &Arc<Self>, cursor: Option<&str>) -> Arc<Directory> {
        match cursor {
            None => self.refresh().await,
            Some(_) => self.current(),
        }
    }

    /// Rebuilds the merged view from every live connection's catalog: the
    /// registry's when it has one loaded (it says so in one message, the
    /// [`Lineup`]), else a load's within [`FRESH_WAIT`] when the view holds a
    /// last good one (kept otherwise), else (a connection never listed)
    /// whatever arrives within [`FIRST_WAIT`]; one that arrives later is
    /// added by [`GatewayState::await_first`]. When nothing differs from the
    /// view (the same connections, standings and catalogs), the view is
    /// kept as it is, unbuilt: a listing's first page over 1,000
    /// connections costs one message and a comparison.
    pub(super) async fn refresh(self: &Arc<Self>) -> Arc<Directory> {
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        let Ok(members) = self.registry.send(Lineup).await else {
            return self.current();
        };
        let lineup: Vec<(String, bool)> = members
            .iter()
            .map(|member| (member.name.clone(), member.retired))
            .collect();
        let loads = members
            .into_iter()
            .filter(|member| !member.retired)
            .map(|member| async move {
                if let Some(catalog) = member.catalog {
                    return Some(catalog);
                }
                let last = self.view().catalogs.get(&member.name).cloned();
                let wait = if last.is_some() {
                    FRESH_WAIT
                } else {
                    FIRST_WAIT
                };
                let mut load = Box::pin(self.registry.send(ListTools {
                    connection: member.name.clone(),
                }));
                match tokio::time::timeout(wait, &mut load).await {
                    Ok(Ok(Ok(catalog))) => Some(catalog),
                    Ok(_) => last,
                    Err(_) if last.is_none() => {
                        self.await_first(member.name, load);
                        None
                    }
                    Err(_) => last,
                }
            });
        let catalogs: Vec<Arc<Catalog>> = futures::future::join_all(loads)
            .await
            .into_iter()
            .flatten()
            .collect();
        let mut view = self.view();
        // A batch of changed catalogs waiting to join (`told`) is in
        // `catalogs` already, but not yet in the directory.
        let mut changed = view.lineup != lineup || view.told.is_some();
        for catalog in catalogs {
            match view
                .catalogs
                .insert(catalog.connection.clone(), catalog.clone())
            {
                Some(before) if Arc::ptr_eq(&before, &catalog) => {}
                _ => changed = true,
            }
        }
        if !changed {
            return view.directory.clone();
        }
        self.rebuild(&mut view, lineup)
    }

    /// Builds the directory from the catalogs in `view` of the connections
    /// in `lineup` (one a reload removed is gone, names and all): those of
    /// live connections listed, those of retired ones only routable.
    fn rebuild(&self, view: &mut View, lineup: Vec<(String, bool)>) -> Arc<Directory> {
        self.rebuilds.fetch_add(1, Ordering::Relaxed);
        let configured: HashSet<&str> = lineup.iter().map(|(name, _)| name.as_str()).collect();
        let retired: HashSet<&str> = lineup
            .iter()
            .filter(|(_, retired)| *retired)
            .map(|(name, _)| name.as_str())
            .collect();
        view.catalogs
            .retain(|name, _| configured.contains(name.as_str()));
        let mut listed: Vec<Arc<Catalog>> = Vec::new();
        let mut hidden: Vec<Arc<Catalog>> = Vec::new();
        for (name, catalog) in &view.catalogs {
            if retired.contains(name.as_str()) {
                hidden.push(catalog.clone());
            } else {
                listed.push(catalog.clone());
            }
        }
        listed.sort_by(|a, b| a.connection.cmp(&b.connection));
        hidden.sort_by(|a, b| a.connection.cmp(&b.connection));
        let naming = Naming::new(self.prefix, configured.len());
        // A retired connection is not listed, but what it offered stays
        // routable: a request for it answers with the supervisor's value.
        // The parts of the catalogs that did not change are the view's.
        let directory = Directory::assemble(naming, &listed, &hidden, Some(&view.directory));
        for clash in &directory.clashes {
            if view.reported.insert(clash.to_string()) {
                tracing::error!(
                    "gateway.prefix = \"never\", but {clash}; only the one of '{}' is exposed",
                    clash.kept
                );
            }
        }
        let directory = Arc::new(directory);
        view.directory = directory.clone();
        view.lineup = lineup;
        directory
    }

    /// Waits in the background for the first catalog of `connection`, which
    /// a listing gave up waiting for; when it comes, it joins the view and
    /// every client is told the lists changed (so it lists again), together
    /// with the others that came within [`LATE_TOGETHER`].
    fn await_first(
        self: &Arc<Self>,
        connection: String,
        load: impl Future<Output = Result<Result<Arc<Catalog>, crate::Unavailable>, MailboxError>>
        + Send
        + 'static,
    ) {
        if !self.view().awaited.insert(connection.clone()) {
            return;
        }
        let state = self.clone();
        // A plain tokio task: listings are served on the gateway's tokio
        // tasks, not inside an actix arbiter.
        tokio::spawn(async move {
            let loaded = load.await;
            state.view().awaited.remove(&connection);
            let Ok(Ok(catalog)) = loaded else { return };
            if state.view().catalogs.contains_key(&connection) {
                return; // a listing took it meanwhile
            }
            let lists = catalog.offered_lists();
            state.catalog_changed(catalog, lists);
        });
    }

    /// `catalog` changed (or came late, first): it joins the view with
    /// every other that comes within [`TOGETHER`], in one rebuild, and
    /// clients are told once per list in `lists` (of any of them). No other
    /// connection's catalog is asked for: a change costs what changed.
    pub(super) fn catalog_changed(self: &Arc<Self>, catalog: Arc<Catalog>, lists: Vec<ListKind>) {
        let first = {
            let mut view = self.view();
            view.catalogs.insert(catalog.connection.clone(), catalog);
            let first = view.told.is_none();
            let told = view.told.get_or_insert_with(Vec::new);
            for list in lists {
                if !told.contains(&list) {
                    told.push(list);
                }
            }
            first
        };
        if first {
            let state = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(TOGETHER).await;
                state.join_changes().await;
            });
        }
    }

    /// Rebuilds the view with the catalogs that changed, and tells clients.
    async fn join_changes(self: &Arc<Self>) {
        let members = self.registry.send(Lineup).await;
        let lists = {
            let mut view = self.view();
            let lists = view.told.take().unwrap_or_default();
            if let Ok(members) = members {
                let lineup = members
                    .into_iter()
                    .map(|member| (member.name, member.retired))
                    .collect();
                self.rebuild(&mut view, lineup);
            }
            lists
        };
        for list in ListKind::ALL
            .into_iter()
            .filter(|list| lists.contains(list))
        {
            self.notify_list_changed(list).await;
        }
    }

    /// Routes an exposed name with `find`, refreshing the view once if the
    /// name is not known yet (the client did not list, or the list changed).
    pub(super) async fn route<T>(
        self: &Arc<Self>,
        find: impl Fn(&Directory) -> Option<T>,
    ) -> Option<T> {
        if let Some(found) = find(&self.current()) {
            return Some(found);
        }
        find(&*self.refresh().await)
    }

    /// What a name the caller may not use costs before it is answered as
    /// unknown: what an unknown name costs (the view refreshed once, see
    /// [`GatewayState::route`]), so the time to the answer tells nothing
    /// of whether the name exists.
    pub(super) async fn hidden(self: &Arc<Self>) {
        self.refresh().await;
    }

    /// Sends `request` to `connection`, through the registry or, when the
    /// registry has a route to it, straight to its actor (admission,
    /// deadline, classification, park/retire, like any call).
    pub(super) async fn forward(
        &self,
        connection: &str,
        request: impl Into<UpstreamRequest>,
        link: Option<DownstreamLink>,
    ) -> Forwarded {
        let downstream = link.as_ref().map(|link| link.downstream.clone());
        // The SERVER span of the request being served, when traced.
        let trace = TraceParent::attached();
        let forward = Forward {
            connection: connection.to_owned(),
            request: request.into(),
            link,
            trace: trace.clone(),
        };
        let forwarded = match self.routes().await.get(connection) {
            Some(route) => route.forward(forward).await,
            None => match self.registry.send(forward).await {
                Ok(forwarded) => forwarded,
                Err(_) => Forwarded::Refused(crate::CallOutcome::Unavailable {
                    failure: crate::Failure::transport("the supervisor is shutting down"),
                    retry_in: None,
                    message: crate::outcome::messages::stopped(connection),
                }),
            },
        };
        if let Forwarded::Refused(outcome) = &forwarded {
            trace.answered_instead(outcome);
        }
        // What the upstream sent before its answer (progress) reaches the
        // client before the answer does.
        if let Some(downstream) = downstream {
            downstream.settled().await;
        }
        forwarded
    }

    /// The registry's routes (none if it is gone: then every request goes
    /// to it, and is told it is stopped).
    pub async fn routes(&self) -> &Routes {
        self.routes
            .get_or_init(|| async { self.registry.send(ShareRoutes).await.unwrap_or_default() })
            .await
    }

    /// Remembers which connection runs task `id`, created by `caller`, so
    /// `tasks/*` reach it (and only its creator's do).
    pub(super) fn remember_task(&self, id: &str, connection: &str, caller: Arc<Caller>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if tasks.len() >= MAX_TASKS {
            tasks.retain(|_, task| task.seen.elapsed() < TASK_MEMORY);
        }
        if tasks.len() < MAX_TASKS {
            let task = Task {
                connection: connection.to_owned(),
                caller,
                seen: std::time::Instant::now(),
            };
            tasks.insert(id.to_owned(), task);
        }
    }

    /// The connection running task `id`, if the gateway created it for
    /// `caller`: another caller's task is, to this one, not there.
    pub(super) fn task_connection(&self, id: &str, caller: &Caller) -> Option<String> {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let task = tasks.get_mut(id).filter(|task| *task.caller == *caller)?;
        task.seen = std::time::Instant::now();
        Some(task.connection.clone())
    }

    /// Connections whose upstream offers logging.
    pub(super) fn logging_connections(&self) -> Vec<String> {
        let view = self.view();
        let mut names: Vec<String> = view
            .catalogs
            .values()
            .filter(|catalog| catalog.capabilities.logging.is_some())
            .map(|catalog| catalog.connection.clone())
            .collect();
        names.sort();
        names
    }

    // ---- downstream sessions -------------------------------------------

    /// Remembers an initialized downstream session, for notifications.
    pub(super) fn register(&self, session: &Arc<DownstreamSession>) {
        let mut sessions = self.sessions();
        sessions.retain(|known| !known.is_closed());
        if sessions.len() < MAX_DOWNSTREAM_SESSIONS
            && !sessions.iter().any(|known| Arc::ptr_eq(known, session))
        {
            sessions.push(session.clone());
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Vec<Arc<DownstreamSession>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live downstream sessions.
    fn live_sessions(&self) -> Vec<Arc<DownstreamSession>> {
        let mut sessions = self.sessions();
        sessions.retain(|session| !session.is_closed());
        sessions.clone()
    }

    /// A `subscriptions/listen` stream to notify until it ends.
    pub(super) fn add_listener(&self, sink: &SubscriptionSink, session: &Arc<DownstreamSession>) {
        self.listeners().push((sink.clone(), session.clone()));
    }

    pub(super) fn remove_listener(&self, sink: &SubscriptionSink) {
        self.listeners()
            .retain(|(known, _)| known.id() != sink.id());
    }

    fn listeners(
        &self,
    ) -> std::sync::MutexGuard<'_, Vec<(SubscriptionSink, Arc<DownstreamSession>)>> {
        self.listeners.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells every downstream session and listen stream that a list changed
    /// (with access rules, those whose caller sees it change).
    pub async fn notify_list_changed(&self, list: ListKind) {
        let directory = self.current();
        for session in self.live_sessions() {
            let Some(peer) = session.peer() else { continue };
            if !self.rights.tells(&session, &directory, list) {
                continue;
            }
            // A downstream that went away just misses the notification.
            let _ = match list {
                ListKind::Tools => peer.notify_tool_list_changed().await,
                ListKind::Prompts => peer.notify_prompt_list_changed().await,
                ListKind::Resources => peer.notify_resource_list_changed().await,
            };
        }
        let sinks: Vec<SubscriptionSink> = self
            .listeners()
            .iter()
            .filter(|(_, session)| self.rights.tells(session, &directory, list))
            .map(|(sink, _)| sink.clone())
            .collect();
        for sink in sinks {
            // A stream that did not ask for this list refuses it; one that
            // ended is removed by its own `listen`.
            let _ = match list {
                ListKind::Tools => sink.notify_tool_list_changed().await,
                ListKind::Prompts => sink.notify_prompt_list_changed().await,
                ListKind::Resources => sink.notify_resource_list_changed().await,
            };
        }
    }

    /// Tells the downstream sessions subscribed to it that `uri` of
    /// `connection` changed, under the URI they subscribed with.
    pub async fn notify_resource_updated(&self, connection: &str, uri: &str) {
        let exposed = {
            let subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
            match subscriptions.get(&(connection.to_owned(), uri.to_owned())) {
                Some((exposed, _)) => exposed.clone(),
                None => return,
            }
        };
        for session in self.live_sessions() {
            if !session.subscribed(&exposed) {
                continue;
            }
            if let Some(peer) = session.peer() {
                let params = ResourceUpdatedNotificationParam::new(exposed.clone());
                let _ = peer.notify_resource_updated(params).await;
            }
        }
        let sinks: Vec<SubscriptionSink> = self
            .listeners()
            .iter()
            .filter(|(_, session)| session.subscribed(&exposed))
            .map(|(sink, _)| sink.clone())
            .collect();
        for sink in sinks {
            let _ = sink.notify_resource_updated(exposed.clone()).await;
        }
    }

    /// Relays an upstream's log message to every downstream session that
    /// wants its level and does not have it yet (`reached`), naming the
    /// connection in `logger`.
    pub fn log(
        &self,
        connection: &str,
        mut message: LoggingMessageNotificationParam,
        reached: &[usize],
    ) {
        message.logger = Some(super::downstream::logger(connection, message.logger.take()));
        for session in self.live_sessions() {
            if !reached.contains(&session.key()) {
                session.log(message.clone());
            }
        }
    }

    // ---- resource subscriptions ------------------------------------------

    /// Subscribes `session` to `exposed` (`target` upstream). The upstream is
    /// asked once, when the first session subscribes.
    pub(super) async fn subscribe(
        &self,
        session: &DownstreamSession,
        exposed: &str,
        target: &Target,
    ) -> Forwarded {
        if !session.subscribe(exposed) {
            return already_done();
        }
        let key = (target.connection.clone(), target.name.clone());
        let first = {
            let mut subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
            let entry = subscriptions
                .entry(key.clone())
                .or_insert_with(|| (exposed.to_owned(), 0));
            entry.1 += 1;
            entry.1 == 1
        };
        if !first {
            return already_done();
        }
        let forwarded = self
            .forward(&target.connection, subscribe_request(&target.name), None)
            .await;
        if !forwarded.answered() {
            session.unsubscribe(exposed);
            self.release(&key);
        }
        forwarded
    }

    /// Unsubscribes `session` from `exposed`; the upstream is told when the
    /// last session lets go.
    pub(super) async fn unsubscribe(
        &self,
        session: &DownstreamSession,
        exposed: &str,
        target: &Target,
    ) -> Forwarded {
        if !session.unsubscribe(exposed) {
            return already_done();
        }
        let key = (target.connection.clone(), target.name.clone());
        if !self.release(&key) {
            return already_done();
        }
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(
            UnsubscribeRequestParams::new(target.name.clone()),
        ));
        self.forward(&target.connection, request, None).await
    }

    /// Drops one holder of a subscription; `true` when it was the last.
    fn release(&self, key: &(String, String)) -> bool {
        let mut subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = subscriptions.get_mut(key) else {
            return false;
        };
        entry.1 = entry.1.saturating_sub(1);
        if entry.1 == 0 {
            subscriptions.remove(key);
            return true;
        }
        false
    }

    /// A new upstream session of `connection` knows none of the
    /// subscriptions the old one had: subscribe again.
    pub async fn resubscribe(&self, connection: &str) {
        let uris: Vec<String> = {
            let subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
            subscriptions
                .keys()
                .filter(|(name, _)| name == connection)
                .map(|(_, uri)| uri.clone())
                .collect()
        };
        for uri in uris {
            let _ = self
                .forward(connection, subscribe_request(&uri), None)
                .await;
        }
    }
}

fn subscribe_request(uri: &str) -> ClientRequest {
    ClientRequest::SubscribeRequest(SubscribeRequest::new(SubscribeRequestParams::new(
        uri.to_owned(),
    )))
}

/// The empty answer of a subscription change that needed no upstream request.
fn already_done() -> Forwarded {
    Forwarded::Answered(Box::new(rmcp::model::ServerResult::empty(())))
}
