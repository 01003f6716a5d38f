//! Per-connection bookkeeping in the registry: the actor (started lazily), the
//! catalog (one shared load), and the restart budget.

use std::{collections::VecDeque, sync::Arc};

use actix::{Actor, ActorFutureExt, Addr, AsyncContext, Context, WrapFuture};
use tokio::{sync::oneshot, time::Instant};

use super::{Catalog, Registry};
use crate::{
    Unavailable,
    config::ConnectionConfig,
    connection::{ConnectionActor, ConnectionList, RetireNow},
    events::ConnectionEvent,
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
    pub(super) catalog: CatalogState,
    /// When recent restarts happened, for the restart budget.
    pub(super) recent_restarts: VecDeque<Instant>,
    pub(super) restarts: u32,
}

impl Entry {
    pub(super) fn new(config: ConnectionConfig) -> Self {
        Entry {
            config: Arc::new(config),
            actor: None,
            catalog: CatalogState::Unloaded,
            recent_restarts: VecDeque::new(),
            restarts: 0,
        }
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
    /// The connection's actor, started now if this is its first use.
    pub(super) fn actor(
        &mut self,
        name: &str,
        ctx: &mut Context<Self>,
    ) -> Option<Addr<ConnectionActor>> {
        let deps = self.deps(ctx);
        let entry = self.entries.get_mut(name)?;
        if let Some(actor) = &entry.actor
            && actor.connected()
        {
            return Some(actor.clone());
        }
        let actor = ConnectionActor::new(entry.config.clone(), deps).start();
        entry.actor = Some(actor.clone());
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
        self.load_catalog(name, ctx);
        Some(CatalogFetch::Wait(rx))
    }

    /// Starts one catalog load; its result is shared by every waiter.
    fn load_catalog(&mut self, name: &str, ctx: &mut Context<Self>) {
        let Some(actor) = self.actor(name, ctx) else {
            return;
        };
        let timeout = match self.entries.get(name) {
            Some(entry) => entry.config.list_timeout,
            None => return,
        };
        let name = name.to_owned();
        ctx.spawn(actor.send(ConnectionList { timeout }).into_actor(self).map(
            move |answer, registry, _| {
                let listed = answer.unwrap_or_else(|_| Err(stopped(&name)));
                registry.catalog_loaded(&name, listed);
            },
        ));
    }

    fn catalog_loaded(&mut self, name: &str, listed: Result<crate::session::Surface, Unavailable>) {
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        let schemas = &mut self.schemas;
        let result = listed.map(|surface| Arc::new(Catalog::new(&entry.config, surface, schemas)));
        let next = match &result {
            Ok(catalog) => CatalogState::Loaded(catalog.clone()),
            Err(_) => CatalogState::Unloaded,
        };
        if let CatalogState::Loading(waiters) = std::mem::replace(&mut entry.catalog, next) {
            for waiter in waiters {
                let _ = waiter.send(result.clone());
            }
        }
    }

    /// The upstream said one of its lists changed: reload the catalog now, so
    /// the next caller (and the gateway's listing) sees the new lists.
    pub(super) fn list_changed(&mut self, name: &str, ctx: &mut Context<Self>) {
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if matches!(entry.catalog, CatalogState::Loading(_)) {
            return; // the load in flight will see the new list
        }
        entry.catalog = CatalogState::Loading(Vec::new());
        self.load_catalog(name, ctx);
    }

    /// Restarts connection actors that died (panicked or stopped on their own),
    /// within the restart budget; past it, the connection retires (`crash_loop`).
    pub(super) fn restart_dead(&mut self, ctx: &mut Context<Self>) {
        if self.shutting_down {
            return;
        }
        let budget = self.config.supervisor.restart_budget;
        let deps = self.deps(ctx);
        let mut events = Vec::new();
        for (name, entry) in &mut self.entries {
            let Some(actor) = &entry.actor else { continue };
            if actor.connected() {
                continue;
            }
            let now = Instant::now();
            while entry
                .recent_restarts
                .front()
                .is_some_and(|at| now.duration_since(*at) > budget.within)
            {
                entry.recent_restarts.pop_front();
            }
            let actor = ConnectionActor::new(entry.config.clone(), deps.clone()).start();
            entry.catalog = drain_catalog(
                std::mem::replace(&mut entry.catalog, CatalogState::Unloaded),
                name,
            );
            if entry.recent_restarts.len() as u32 >= budget.restarts {
                tracing::warn!(connection = %name, restarts = entry.restarts, "crash loop: restart budget exhausted");
                actor.do_send(RetireNow {
                    reason: "crash_loop".into(),
                });
            } else {
                entry.recent_restarts.push_back(now);
                entry.restarts += 1;
                tracing::warn!(connection = %name, restarts = entry.restarts, "connection actor died; restarted");
                events.push(ConnectionEvent::Restarted {
                    connection: name.clone(),
                    restarts: entry.restarts,
                });
            }
            entry.actor = Some(actor);
        }
        for event in &events {
            self.publish(event);
        }
    }
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
