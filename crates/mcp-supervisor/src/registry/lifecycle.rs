//! The registry's life as a whole: reloading its config (also when another
//! node of the fleet reloaded), warming every connection up, shutting down,
//! and what it tells of the fleet.

use std::sync::Arc;

use actix::{
    ActorFutureExt, AsyncContext, Context, Handler, Message, MessageResult, ResponseActFuture,
    ResponseFuture, WrapFuture,
};
use futures::future::join_all;

use super::{
    Registry,
    entries::{Entry, drain_catalog, stopped},
};
use crate::{
    Unavailable,
    config::Config,
    connection::Stop,
    fleet::{FleetStatus, FleetView, ReloadEverywhere, ReloadedElsewhere},
    policy::{Forget, RegisterConnections, ResetConnection, UpdateSettings},
};

/// Applies a new config: added connections start (lazily), removed ones stop,
/// changed ones restart, unchanged ones are untouched (in-flight calls finish).
#[derive(Message, Debug, Clone)]
#[rtype(result = "ReloadReport")]
pub struct Reload(pub Config);

/// What a reload did, by connection name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
}

/// Connects and lists every connection (at most 6 at a time).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Vec<(String, Result<usize, Unavailable>)>")]
pub struct Warmup;

/// Stops every connection within `shutdown_timeout`; every pending caller
/// gets an `Unavailable` value.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct Shutdown;

/// The config the registry runs now (the last one loaded or reloaded).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Arc<Config>")]
pub struct CurrentConfig;

/// What this node knows of the fleet; `None` when it is alone.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Option<FleetView>")]
pub struct FleetOverview;

impl Handler<FleetOverview> for Registry {
    type Result = ResponseFuture<Option<FleetView>>;

    fn handle(&mut self, _: FleetOverview, _: &mut Context<Self>) -> Self::Result {
        let fleet = self.fleet.clone();
        Box::pin(async move { fleet?.send(FleetStatus).await.ok() })
    }
}

/// Apply a config reloaded because another node of the fleet reloaded
/// (docs/FLEET.md): like [`Reload`], without telling the fleet again.
#[derive(Message, Debug, Clone)]
#[rtype(result = "ReloadReport")]
pub struct ReloadAsked(pub Config);

/// Where to say that another node of the fleet reloaded its config, so this
/// process re-reads its own (`serve` re-reads its file, as on SIGHUP). A
/// process that registers nothing keeps its config.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct OnFleetReload(pub tokio::sync::mpsc::UnboundedSender<()>);

impl Handler<OnFleetReload> for Registry {
    type Result = ();

    fn handle(&mut self, msg: OnFleetReload, _: &mut Context<Self>) {
        self.on_fleet_reload = Some(msg.0);
    }
}

/// Another node reloaded its config.
impl Handler<ReloadedElsewhere> for Registry {
    type Result = ();

    fn handle(&mut self, msg: ReloadedElsewhere, _: &mut Context<Self>) {
        match &self.on_fleet_reload {
            Some(tx) if tx.send(()).is_ok() => {
                tracing::info!(node = %msg.node, "another node of the fleet reloaded its config; reloading");
            }
            _ => {
                tracing::info!(node = %msg.node, "another node of the fleet reloaded its config; this process has no config source to re-read")
            }
        }
    }
}

impl Handler<Reload> for Registry {
    type Result = MessageResult<Reload>;

    fn handle(&mut self, msg: Reload, _: &mut Context<Self>) -> Self::Result {
        let report = self.apply_reload(msg.0);
        if let Some(fleet) = &self.fleet {
            fleet.do_send(ReloadEverywhere);
        }
        MessageResult(report)
    }
}

impl Handler<ReloadAsked> for Registry {
    type Result = MessageResult<ReloadAsked>;

    fn handle(&mut self, msg: ReloadAsked, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.apply_reload(msg.0))
    }
}

impl Registry {
    fn apply_reload(&mut self, new: Config) -> ReloadReport {
        if new.gateway != self.config.gateway || new.admin != self.config.admin {
            tracing::warn!(
                "[gateway] and [admin] changes take effect on restart; the running \
                 endpoints keep their settings"
            );
        }
        if new.fleet != self.config.fleet {
            tracing::warn!("[fleet] changes take effect on restart; this node stays where it is");
        }
        if new.telemetry != self.config.telemetry {
            tracing::warn!("[telemetry] changes take effect on restart; export goes on as it was");
        }
        let mut report = ReloadReport::default();
        let old_names = self.names();
        for name in &old_names {
            if new.connection(name).is_none() {
                if let Some(mut entry) = self.entries.remove(name) {
                    stop_entry(&mut entry);
                }
                self.policy.do_send(Forget {
                    connection: name.clone(),
                });
                report.removed.push(name.clone());
            }
        }
        for connection in &new.connections {
            match self.entries.get_mut(&connection.name) {
                Some(entry) if *entry.config == *connection => {
                    report.unchanged.push(connection.name.clone());
                }
                Some(entry) => {
                    stop_entry(entry);
                    *entry = entry.changed(connection.clone());
                    self.policy.do_send(ResetConnection {
                        connection: connection.name.clone(),
                    });
                    report.changed.push(connection.name.clone());
                }
                None => {
                    self.entries
                        .insert(connection.name.clone(), Entry::new(connection.clone()));
                    report.added.push(connection.name.clone());
                }
            }
        }
        self.policy.do_send(RegisterConnections(self.names()));
        self.policy
            .do_send(UpdateSettings(super::policy_settings(&new)));
        self.config = Arc::new(new);
        self.reroute_all();
        tracing::info!(
            added = report.added.len(),
            removed = report.removed.len(),
            changed = report.changed.len(),
            unchanged = report.unchanged.len(),
            "config reloaded"
        );
        report
    }
}

fn stop_entry(entry: &mut Entry) {
    if let Some(actor) = entry.actor.take() {
        actor.do_send(Stop);
    }
    entry.catalog = drain_catalog(
        std::mem::replace(&mut entry.catalog, super::entries::CatalogState::Unloaded),
        &entry.config.name,
    );
}

impl Handler<Warmup> for Registry {
    type Result = ResponseFuture<Vec<(String, Result<usize, Unavailable>)>>;

    fn handle(&mut self, _: Warmup, ctx: &mut Context<Self>) -> Self::Result {
        use futures::StreamExt;
        let registry = ctx.address();
        let names = self.names();
        Box::pin(async move {
            // Each load starts only when the stream gets to it, so at most
            // `WARMUP_CONCURRENCY` connect at once.
            futures::stream::iter(names)
                .map(|name| {
                    let registry = registry.clone();
                    async move {
                        let result = match registry.send(WarmOne(name.clone())).await {
                            Ok(result) => result,
                            Err(_) => Err(stopped(&name)),
                        };
                        (name, result)
                    }
                })
                .buffered(WARMUP_CONCURRENCY)
                .collect()
                .await
        })
    }
}

/// Connects and lists one connection, for [`Warmup`]: the size of its catalog.
#[derive(Message, Debug)]
#[rtype(result = "Result<usize, Unavailable>")]
struct WarmOne(String);

impl Handler<WarmOne> for Registry {
    type Result = ResponseFuture<Result<usize, Unavailable>>;

    fn handle(&mut self, WarmOne(name): WarmOne, ctx: &mut Context<Self>) -> Self::Result {
        let fetch = self.catalog(&name, ctx);
        Box::pin(async move {
            match fetch {
                Some(fetch) => fetch.get(&name).await.map(|catalog| catalog.len()),
                None => Err(stopped(&name)),
            }
        })
    }
}

/// Warm up at most this many connections at a time (docs/SUPERVISION.md,
/// "Meta-tools").
const WARMUP_CONCURRENCY: usize = 6;

impl Handler<CurrentConfig> for Registry {
    type Result = MessageResult<CurrentConfig>;

    fn handle(&mut self, _: CurrentConfig, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.config.clone())
    }
}

impl Handler<Shutdown> for Registry {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: Shutdown, _: &mut Context<Self>) -> Self::Result {
        self.shutting_down = true;
        self.reroute_all();
        let bound = self.config.supervisor.shutdown_timeout;
        let stops: Vec<_> = self
            .entries
            .values_mut()
            .filter_map(|entry| {
                entry.catalog = drain_catalog(
                    std::mem::replace(&mut entry.catalog, super::entries::CatalogState::Unloaded),
                    &entry.config.name,
                );
                entry.actor.take()
            })
            .map(|actor| async move {
                let _ = actor.send(Stop).await;
            })
            .collect();
        tracing::info!(connections = stops.len(), "shutting down");
        Box::pin(
            async move {
                if tokio::time::timeout(bound, join_all(stops)).await.is_err() {
                    tracing::warn!("shutdown bound reached; remaining sessions were cut off");
                }
            }
            .into_actor(self)
            .map(|(), _, ctx| {
                use actix::ActorContext;
                ctx.stop();
            }),
        )
    }
}

/// Panics the named connection's actor (starting it first), to test
/// supervision. Test builds only.
#[cfg(feature = "fault-injection")]
#[doc(hidden)]
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct CrashConnection {
    pub connection: String,
}

#[cfg(feature = "fault-injection")]
impl Handler<CrashConnection> for Registry {
    type Result = ();

    fn handle(&mut self, msg: CrashConnection, ctx: &mut Context<Self>) {
        if let Some(actor) = self.actor(&msg.connection, ctx) {
            actor.do_send(crate::connection::InjectPanic);
        }
    }
}
