//! The registry actor: owns name → connection actor, starts connections lazily,
//! caches their catalogs, publishes transitions, restarts crashed connection
//! actors within a budget, and shuts everything down within a bound.
//!
//! Layout:
//! - [`catalog`]: the allowlisted, cached tool list of one connection;
//! - [`messages`]: the public API (`CallTool`, `ListTools`, `Status`, …);
//! - `routing`: a request's way to its connection's actor: the allowlist,
//!   the catalog, retry safety;
//! - `entries`: per-connection bookkeeping (actor, catalog loading, restarts);
//! - `approvals`: approving tool contracts in the running process.

mod approvals;
pub mod catalog;
mod entries;
mod lifecycle;
pub mod messages;
mod routing;

use std::{collections::BTreeMap, sync::Arc};

use actix::{Actor, Addr, AsyncContext, Context, Recipient};

pub use approvals::ApproveContracts;
pub use catalog::{Catalog, SchemaInterner};
pub use lifecycle::*;
pub use messages::*;
pub(crate) use routing::unknown_connection_message;
pub use routing::{Route, Routes, retry_safe};

use self::entries::Entry;
use crate::{
    config::Config,
    connection::ConnectionDeps,
    events::ConnectionEvent,
    fleet::{Fleet, FleetTokens, Member, RedisStore, Store},
    http::HttpClients,
    policy::{Cooldowns, PolicySettings, QuarantinePolicy, RegisterConnections, RetryBackoff},
    session::shared_http_client,
};

/// The supervisor's front door for other actors.
#[derive(Debug)]
pub struct Registry {
    config: Arc<Config>,
    policy: Addr<QuarantinePolicy>,
    http: HttpClients,
    entries: BTreeMap<String, Entry>,
    /// Shares identical tool schemas across the cached catalogs.
    schemas: SchemaInterner,
    /// The approved contracts every catalog is judged against.
    contracts: crate::contracts::ContractBook,
    subscribers: Vec<Recipient<ConnectionEvent>>,
    shutting_down: bool,
    /// This process's member of the fleet (`[fleet]`, or a store given to
    /// [`Registry::with_fleet_store`]); `None`: the process is alone.
    fleet: Option<Addr<Fleet>>,
    /// The store to join the fleet through, until started.
    fleet_store: Option<Arc<dyn Store>>,
    /// Told when another node reloaded its config (`OnFleetReload`).
    on_fleet_reload: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    /// Where OAuth tokens are shared: in a fleet with a key (`[fleet]`).
    tokens: Option<Arc<dyn crate::oauth::TokenShare>>,
    /// Where parked connections' probe leases are taken, in a fleet.
    probes: Option<Arc<crate::fleet::ProbeLeases>>,
    /// Where connections acting on their callers' behalf exchange tokens:
    /// `[gateway] auth`'s issuer as the process started (as the gateway's
    /// own callers are checked: a reload changes neither).
    exchange: Option<Arc<crate::connection::Exchange>>,
    /// The ways straight to the connections' actors, written here only.
    routes: Routes,
}

impl Registry {
    /// A registry for `config`; call `.start()` on it (inside an actix system).
    pub fn new(config: Config) -> Self {
        let policy = QuarantinePolicy::new(policy_settings(&config)).start();
        let exchange = crate::connection::Exchange::of(&config);
        let contracts = crate::contracts::ContractBook::open_or_hold(config.contracts.clone());
        let entries = config
            .connections
            .iter()
            .map(|connection| (connection.name.clone(), Entry::new(connection.clone())))
            .collect();
        Registry {
            config: Arc::new(config),
            policy,
            http: shared_http_client(),
            entries,
            schemas: SchemaInterner::default(),
            contracts,
            subscribers: Vec::new(),
            shutting_down: false,
            fleet: None,
            fleet_store: None,
            on_fleet_reload: None,
            tokens: None,
            probes: None,
            exchange,
            routes: Routes::default(),
        }
    }

    /// A registry that shares what it learns through `store` (docs/FLEET.md),
    /// whether or not the config has a `[fleet]` table (its `node` and
    /// `max_clock_skew` are used if it has): supervisors in one process
    /// given clones of one [`crate::fleet::LocalStore`] act as one fleet.
    pub fn with_fleet_store(config: Config, store: Arc<dyn Store>) -> Self {
        Registry {
            fleet_store: Some(store),
            ..Registry::new(config)
        }
    }

    /// Joins the fleet, if this registry is in one.
    fn join_fleet(&mut self, ctx: &mut Context<Self>) {
        let settings = self.config.fleet.as_ref();
        let store = match (self.fleet_store.take(), settings) {
            (Some(store), _) => store,
            (None, Some(settings)) => match RedisStore::new(settings) {
                Ok(store) => Arc::new(store),
                Err(error) => {
                    tracing::error!(%error, "cannot use the fleet store; this process works alone");
                    return;
                }
            },
            (None, None) => return,
        };
        // Tokens are sealed with the fleet key, so only a `[fleet]` table
        // shares them.
        let unsealed = Arc::default();
        self.tokens = settings.map(|settings| {
            Arc::new(FleetTokens::new(
                store.clone(),
                &settings.key,
                &settings.namespace,
                Arc::clone(&unsealed),
            )) as Arc<dyn crate::oauth::TokenShare>
        });
        let skew = settings.map_or(crate::config::DEFAULT_MAX_CLOCK_SKEW, |s| s.max_clock_skew);
        let member = Member {
            unsealed,
            node: settings.map_or_else(unnamed_node, |s| s.node.clone()),
            advertise: settings.and_then(|s| s.advertise.clone()),
            key: settings.map_or_else(process_fleet_key, |s| s.key.clone()),
            namespace: settings.map_or_else(
                || crate::config::DEFAULT_FLEET_NAMESPACE.to_owned(),
                |s| s.namespace.clone(),
            ),
            skew,
            furthest: self.config.supervisor.quarantine.max_cooldown + skew,
        };
        self.probes = Some(Arc::new(crate::fleet::ProbeLeases::new(
            store.clone(),
            member.node.clone(),
        )));
        let fleet = Fleet::new(
            member,
            store,
            ctx.address().recipient(),
            ctx.address().recipient(),
        )
        .start();
        self.subscribers.push(fleet.clone().recipient());
        self.fleet = Some(fleet);
    }

    fn deps(&self, ctx: &Context<Self>) -> ConnectionDeps {
        ConnectionDeps {
            policy: self.policy.clone(),
            http: self.http.clone(),
            probes: self.probes.clone(),
            events: Some(ctx.address().recipient()),
            deaths: Some(ctx.address().recipient()),
            shutdown_timeout: self.config.supervisor.shutdown_timeout,
            tokens: self.tokens.clone(),
            exchange: self.exchange.clone(),
        }
    }

    fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    fn publish(&self, event: &ConnectionEvent) {
        for subscriber in &self.subscribers {
            subscriber.do_send(event.clone());
        }
    }
}

impl Actor for Registry {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.policy.do_send(RegisterConnections(self.names()));
        self.join_fleet(ctx);
        ctx.run_interval(self.config.supervisor.relist, |registry, ctx| {
            registry.relist(ctx)
        });
    }
}

/// The key of supervisors of this process that share a store without a
/// `[fleet]` table: one random key, the same for all of them.
fn process_fleet_key() -> crate::config::FleetKey {
    static KEY: std::sync::OnceLock<crate::config::FleetKey> = std::sync::OnceLock::new();
    KEY.get_or_init(crate::config::FleetKey::random).clone()
}

/// The name of a node whose config has no `[fleet]` table: the host name
/// and pid, and a number when this process has several such registries
/// (each is its own node).
fn unnamed_node() -> String {
    static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let node = crate::config::default_node();
    match STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
        0 => node,
        n => format!("{node}.{n}"),
    }
}

/// The policy's timing, from the `[supervisor]` table.
fn policy_settings(config: &Config) -> PolicySettings {
    let quarantine = &config.supervisor.quarantine;
    PolicySettings {
        backoff: RetryBackoff::defaults(),
        // Config validation already enforces these invariants; fall back to
        // the defaults rather than panic if that ever changes.
        cooldowns: Cooldowns::try_new(
            quarantine.base_cooldown,
            quarantine.max_cooldown,
            quarantine.retire_after,
        )
        .unwrap_or_else(|_| PolicySettings::defaults().cooldowns),
    }
}
