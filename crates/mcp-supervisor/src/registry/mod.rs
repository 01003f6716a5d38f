//! The registry actor: owns name → connection actor, starts connections lazily,
//! caches their catalogs, publishes transitions, restarts crashed connection
//! actors within a budget, and shuts everything down within a bound.
//!
//! Layout:
//! - [`catalog`]: the allowlisted, cached tool list of one connection;
//! - [`messages`]: the public API (`CallTool`, `ListTools`, `Status`, …);
//! - `routing`: a request's way to its connection's actor: the allowlist,
//!   the catalog, retry safety;
//! - `entries`: per-connection bookkeeping (actor, catalog loading, restarts).

pub mod catalog;
mod entries;
pub mod messages;
mod routing;

use std::{collections::BTreeMap, sync::Arc};

use actix::{Actor, Addr, AsyncContext, Context, Recipient};

pub use catalog::{Catalog, SchemaInterner};
pub use messages::*;
pub use routing::retry_safe;
pub(crate) use routing::unknown_connection_message;

use self::entries::Entry;
use crate::{
    config::Config,
    connection::ConnectionDeps,
    events::ConnectionEvent,
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
    subscribers: Vec<Recipient<ConnectionEvent>>,
    shutting_down: bool,
}

impl Registry {
    /// A registry for `config`; call `.start()` on it (inside an actix system).
    pub fn new(config: Config) -> Self {
        let policy = QuarantinePolicy::new(policy_settings(&config)).start();
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
            subscribers: Vec::new(),
            shutting_down: false,
        }
    }

    fn deps(&self, ctx: &Context<Self>) -> ConnectionDeps {
        ConnectionDeps {
            policy: self.policy.clone(),
            http: self.http.clone(),
            events: Some(ctx.address().recipient()),
            deaths: Some(ctx.address().recipient()),
            shutdown_timeout: self.config.supervisor.shutdown_timeout,
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

    fn started(&mut self, _: &mut Self::Context) {
        self.policy.do_send(RegisterConnections(self.names()));
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
