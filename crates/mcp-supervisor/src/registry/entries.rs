//! Per-connection bookkeeping in the registry: the actor (started lazily), the
//! catalog (one shared load), the history, and the restart budget.

use std::{collections::VecDeque, sync::Arc};

use actix::{Actor, ActorFutureExt, Addr, AsyncContext, Context, WrapFuture};
use tokio::{sync::oneshot, time::Instant};

use super::{Catalog, Registry};
use crate::{
    RetireReason, Unavailable,
    config::ConnectionConfig,
    connection::{
        Bypass, ConnectionActor, ConnectionDeps, ConnectionList, Handover, Incarnation, Retire,
        stats::SharedHistory,
    },
    events::ConnectionEvent,
    events::ListKind,
};

pub(super) type CatalogWaiter = oneshot::Sender<Result<Arc<Catalog>, Unavailable>>;

#[derive(Debug)]
pub(super) enum CatalogState {
    Unloaded,
    /// One load in flight; concurrent first requests wait for it.
    Loading(Vec<CatalogWaiter>),
    Loaded(Arc<Catalog>),
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) config: Arc<ConnectionConfig>,
    /// Started on first use.
    pub(super) actor: Option<Addr<ConnectionActor>>,
    /// The current actor's bypass (closed while it is not ready, and for good
    /// once it stops).
    pub(super) bypass: Bypass,
    pub(super) catalog: CatalogState,
    /// The last catalog loaded, kept through reloads and resets: a new one
    /// is compared with it to tell subscribers which lists changed.
    pub(super) last_catalog: Option<Arc<Catalog>>,
    /// Lists the upstream said changed since the catalog load began: told
    /// to subscribers with the next catalog even when it reads the same
    /// (an upstream that builds a fresh server per request lists alike,
    /// yet its clients expect to hear of the change it announced).
    pub(super) announced: Vec<ListKind>,
    /// Which actor is the current one (see [`Incarnation`]).
    pub(super) incarnation: u64,
    /// What the connection has done; outlives its actors, resets and
    /// config changes (counters only grow).
    pub(super) history: SharedHistory,
    /// When recent restarts happened, for the restart budget.
    pub(super) recent_restarts: VecDeque<Instant>,
    /// Restarts after a crash, ever (a counter, like the history).
    pub(super) restarts: u32,
    /// Whether the current actor said it retired (its `Retired` event),
    /// and no session was built since: what [`Lineup`](super::Lineup)
    /// answers without asking the actor.
    pub(super) retired: bool,
}

impl Entry {
    pub(super) fn new(config: ConnectionConfig) -> Self {
        Entry {
            config: Arc::new(config),
            actor: None,
            bypass: Bypass::default(),
            catalog: CatalogState::Unloaded,
            last_catalog: None,
            announced: Vec::new(),
            incarnation: 0,
            history: SharedHistory::default(),
            recent_restarts: VecDeque::new(),
            restarts: 0,
            retired: false,
        }
    }

    /// The same connection under a changed config: a fresh start that keeps
    /// the history and the restart count.
    pub(super) fn changed(&self, config: ConnectionConfig) -> Self {
        Entry {
            history: self.history.clone(),
            restarts: self.restarts,
            incarnation: self.incarnation,
            ..Entry::new(config)
        }
    }

    /// Starts the connection's next actor, from what a crashed one handed
    /// over (nothing for a fresh start).
    fn start(&mut self, deps: ConnectionDeps, handover: Handover) -> Addr<ConnectionActor> {
        self.incarnation += 1;
        let start = Incarnation {
            number: self.incarnation,
            history: self.history.clone(),
            handover,
        };
        let actor = ConnectionActor::new(self.config.clone(), deps, start);
        self.bypass = actor.bypass();
        let actor = actor.start();
        self.actor = Some(actor.clone());
        self.retired = false;
        actor
    }

    pub(super) fn loaded_catalog(&self) -> Option<Arc<Catalog>> {
        match &self.catalog {
            CatalogState::Loaded(catalog) => Some(catalog.clone()),
            _ => None,
        }
    }
}

/// The catalog, now or later.
pub(super) enum CatalogFetch {
    Ready(Arc<Catalog>),
    Wait(oneshot::Receiver<Result<Arc<Catalog>, Unavailable>>),
}

impl CatalogFetch {
    pub(super) async fn get(self, connection: &str) -> Result<Arc<Catalog>, Unavailable> {
        match self {
            CatalogFetch::Ready(catalog) => Ok(catalog),
            CatalogFetch::Wait(rx) => rx.await.unwrap_or_else(|_| Err(stopped(connection))),
        }
    }
}

/// The connection could not be used within the caller's budget (its
/// catalog or session was still loading).
pub(super) fn not_ready(connection: &str, budget: std::time::Duration) -> Unavailable {
    Unavailable {
        failure: crate::Failure::timeout("not ready in time"),
        retry_in: None,
        message: crate::outcome::messages::not_ready_in_time(connection, budget),
    }
}

pub(super) fn stopped(connection: &str) -> Unavailable {
    Unavailable {
        failure: crate::Failure::transport("connection stopped"),
        retry_in: None,
        message: crate::outcome::messages::stopped(connection),
    }
}

impl Registry {
    /// The connection's actor, started now if this is its first use (or the
    /// first since a reset). One that just died is returned as it is: asking
    /// it fails at once with the "stopped" value, and its death notice
    /// restarts it within the budget ([`Registry::restart`]), the one path
    /// by which a dead actor is replaced.
    pub(super) fn actor(
        &mut self,
        name: &str,
        ctx: &mut Context<Self>,
    ) -> Option<Addr<ConnectionActor>> {
        let deps = self.deps(ctx);
        let entry = self.entries.get_mut(name)?;
        if let Some(actor) = &entry.actor {
            return Some(actor.clone());
        }
        let actor = entry.start(deps, Handover::default());
        self.reroute(name);
        Some(actor)
    }

    /// The connection's catalog: cached, the load in flight, or a new load.
    pub(super) fn catalog(&mut self, name: &str, ctx: &mut Context<Self>) -> Option<CatalogFetch> {
        let entry = self.entries.get_mut(name)?;
        match &mut entry.catalog {
            CatalogState::Loaded(catalog) => return Some(CatalogFetch::Ready(catalog.clone())),
            CatalogState::Loading(waiters) => {
                let (tx, rx) = oneshot::channel();
                waiters.push(tx);
                return Some(CatalogFetch::Wait(rx));
            }
            CatalogState::Unloaded => {}
        }
        let (tx, rx) = oneshot::channel();
        entry.catalog = CatalogState::Loading(vec![tx]);
        self.reroute(name);
        self.load_catalog(name, ctx);
        Some(CatalogFetch::Wait(rx))
    }

    /// Starts one catalog load; its result is shared by every waiter.
    fn load_catalog(&mut self, name: &str, ctx: &mut Context<Self>) {
        let Some(actor) = self.actor(name, ctx) else {
            return;
        };
        self.list(name, actor, Load::Waited, ctx);
    }

    /// Asks `actor` for its upstream's lists; the answer becomes the catalog.
    fn list(
        &mut self,
        name: &str,
        actor: Addr<ConnectionActor>,
        load: Load,
        ctx: &mut Context<Self>,
    ) {
        let timeout = match self.entries.get(name) {
            Some(entry) => entry.config.list_timeout,
            None => return,
        };
        let name = name.to_owned();
        ctx.spawn(actor.send(ConnectionList { timeout }).into_actor(self).map(
            move |answer, registry, _| {
                let listed = answer.unwrap_or_else(|_| Err(stopped(&name)));
                registry.catalog_loaded(&name, listed, load);
            },
        ));
    }

    /// Lists every loaded catalog of a running connection again, keeping
    /// the one it has meanwhile: a change its upstream never announces is
    /// still seen (and judged) within `supervisor.relist`. The listings are
    /// spread over the period, not sent at once.
    pub(super) fn relist(&mut self, ctx: &mut Context<Self>) {
        let due: Vec<(String, Addr<ConnectionActor>)> = self
            .entries
            .iter()
            .filter(|(_, entry)| matches!(entry.catalog, CatalogState::Loaded(_)))
            .filter_map(|(name, entry)| Some((name.clone(), entry.actor.clone()?)))
            .collect();
        let count = u32::try_from(due.len()).unwrap_or(u32::MAX).max(1);
        let spacing = self.config.supervisor.relist / count;
        for (index, (name, actor)) in (0u32..).zip(due) {
            ctx.run_later(spacing * index, move |registry, ctx| {
                registry.list(&name, actor, Load::Background, ctx);
            });
        }
    }

    fn catalog_loaded(
        &mut self,
        name: &str,
        listed: Result<crate::session::Surface, Unavailable>,
        load: Load,
    ) {
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if load == Load::Background
            && (listed.is_err() || !matches!(entry.catalog, CatalogState::Loaded(_)))
        {
            // A failed relist keeps the catalog (the failure is the
            // connection's to judge); a load begun meanwhile decides.
            return;
        }
        let changes_before = self
            .contracts
            .judged(name)
            .map_or(0, |judged| judged.changes);
        let schemas = &mut self.schemas;
        let contracts = &mut self.contracts;
        let result = listed.map(|surface| {
            let mut catalog = Catalog::new(&entry.config, surface, schemas);
            let judged =
                contracts.judge(name, catalog.listed_contracts(), Instant::now().into_std());
            catalog.withhold(judged, |tool, verdict| {
                let changed = verdict.change().map(crate::contracts::Change::describe);
                crate::outcome::messages::contract_held(name, tool, changed.as_deref())
            });
            Arc::new(catalog)
        });
        if let Ok(catalog) = &result
            && catalog.contracts.changes > changes_before
        {
            self.contracts_changed_here(name);
            if catalog.contracts.churned {
                self.contracts_churned(name);
            }
        }
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        let next = match &result {
            Ok(catalog) => CatalogState::Loaded(catalog.clone()),
            Err(_) => CatalogState::Unloaded,
        };
        entry.history.moved();
        if let CatalogState::Loading(waiters) = std::mem::replace(&mut entry.catalog, next) {
            for waiter in waiters {
                let _ = waiter.send(result.clone());
            }
        }
        let announced = std::mem::take(&mut entry.announced);
        let changed = match &result {
            Ok(catalog) => match entry.last_catalog.replace(catalog.clone()) {
                Some(before) => {
                    let changed = before.changed_lists(catalog);
                    ListKind::ALL
                        .into_iter()
                        .filter(|list| changed.contains(list) || announced.contains(list))
                        .collect()
                }
                // The first catalog: nobody was told of another.
                None => Vec::new(),
            },
            Err(_) => Vec::new(),
        };
        self.reroute(name);
        if !changed.is_empty() {
            self.publish(&ConnectionEvent::CatalogChanged {
                connection: name.to_owned(),
                lists: changed,
            });
        }
    }

    /// The connection's session was built again (after a failure, a park, a
    /// restart of the upstream): what it offers may have changed without a
    /// word, so a catalog already loaded is loaded again.
    pub(super) fn session_rebuilt(&mut self, name: &str, ctx: &mut Context<Self>) {
        let reload = self
            .entries
            .get(name)
            .is_some_and(|entry| matches!(entry.catalog, CatalogState::Loaded(_)));
        if reload {
            self.list_changed(name, None, ctx);
        }
    }

    /// The upstream said its list `announced` changed (or, `None`, it may
    /// have): reload the catalog now, so the next caller (and the gateway's
    /// listing) sees the new lists.
    pub(super) fn list_changed(
        &mut self,
        name: &str,
        announced: Option<ListKind>,
        ctx: &mut Context<Self>,
    ) {
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if let Some(list) = announced
            && !entry.announced.contains(&list)
        {
            entry.announced.push(list);
        }
        if matches!(entry.catalog, CatalogState::Loading(_)) {
            return; // the load in flight will see the new list
        }
        entry.catalog = CatalogState::Loading(Vec::new());
        self.reroute(name);
        self.load_catalog(name, ctx);
    }

    /// The actor `incarnation` of `name` ended on its own (a panic): start
    /// its successor in the park or retirement it had, within the restart
    /// budget; past it, the connection retires (`crash_loop`). A death the
    /// registry caused (reset, reload, shutdown) is not restarted.
    pub(super) fn restart(
        &mut self,
        name: &str,
        incarnation: u64,
        handover: Handover,
        ctx: &mut Context<Self>,
    ) {
        if self.shutting_down {
            return;
        }
        let budget = self.config.supervisor.restart_budget;
        let deps = self.deps(ctx);
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.incarnation != incarnation || entry.actor.is_none() {
            return;
        }
        let now = Instant::now();
        while entry
            .recent_restarts
            .front()
            .is_some_and(|at| now.duration_since(*at) > budget.within)
        {
            entry.recent_restarts.pop_front();
        }
        entry.catalog = drain_catalog(
            std::mem::replace(&mut entry.catalog, CatalogState::Unloaded),
            name,
        );
        if entry.recent_restarts.len() as u32 >= budget.restarts {
            tracing::warn!(connection = %name, restarts = entry.restarts, "crash loop: restart budget exhausted");
            // Like any restart, then retired by the connection's own actor
            // (its first message), which tells everyone as it does.
            let actor = entry.start(deps, handover);
            actor.do_send(Retire {
                reason: RetireReason::CrashLoop,
            });
            self.reroute(name);
            return;
        }
        entry.recent_restarts.push_back(now);
        entry.restarts += 1;
        entry.history.moved();
        let restarts = entry.restarts;
        tracing::warn!(connection = %name, restarts, "connection actor died; restarted");
        entry.start(deps, handover);
        self.reroute(name);
        self.publish(&ConnectionEvent::Restarted {
            connection: name.to_owned(),
            restarts,
        });
    }
}

/// Why a catalog is being listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Load {
    /// Callers (or the reload after a change) wait for it.
    Waited,
    /// The periodic relist: the loaded catalog serves meanwhile.
    Background,
}

/// Answers whoever waits on a catalog that will not arrive, and resets it.
pub(super) fn drain_catalog(state: CatalogState, name: &str) -> CatalogState {
    if let CatalogState::Loading(waiters) = state {
        for waiter in waiters {
            let _ = waiter.send(Err(stopped(name)));
        }
    }
    CatalogState::Unloaded
}
