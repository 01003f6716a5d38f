//! Relays what happens to the upstreams to downstream clients: an actor
//! subscribed to the registry's events. Catalogs that changed (and
//! connections coming and going) become `list_changed` notifications, resource updates
//! go to the sessions subscribed to them, log messages to every session that
//! wants their level; a new upstream session gets the subscriptions again.

use std::sync::Arc;

use actix::{Actor, AsyncContext, Context, Handler, WrapFuture};

use super::state::GatewayState;
use crate::{
    events::{ConnectionEvent, ListKind},
    registry::ListTools,
};

/// Subscribe it to the registry (`Subscribe(addr.recipient())`).
#[derive(Debug)]
pub struct ListChangedForwarder {
    state: Arc<GatewayState>,
}

impl ListChangedForwarder {
    pub fn new(state: Arc<GatewayState>) -> Self {
        ListChangedForwarder { state }
    }
}

impl GatewayState {
    /// A gateway's shared state over `registry`, with `config`'s view of
    /// it (`[gateway]`) and its access rules and audit log, and its
    /// [`ListChangedForwarder`] subscribed to the registry (so what
    /// upstreams announce reaches the gateway's clients): how every server
    /// of the gateway starts, over HTTP or stdio. Fails only when the audit
    /// log cannot be opened.
    pub async fn start(
        registry: &actix::Addr<crate::registry::Registry>,
        config: &crate::config::Config,
    ) -> std::io::Result<Arc<GatewayState>> {
        let settings = &config.gateway;
        let audit = super::audit::Audit::open(settings.audit_log.as_ref())?;
        let rights =
            super::rights::Rights::new(config.access.clone(), config.limits.clone(), audit);
        let state =
            GatewayState::with_rights(registry.clone(), settings.expose, settings.prefix, rights);
        if config.fleet.is_some() && !state.rights.quotas.is_empty() {
            state.share_limits_with_the_fleet();
        }
        let exchanges = config
            .connections
            .iter()
            .any(crate::config::ConnectionConfig::exchanges_tokens);
        state
            .exchanges
            .store(exchanges, std::sync::atomic::Ordering::Relaxed);
        let forwarder = ListChangedForwarder::new(state.clone()).start();
        // A registry gone answers nothing: the gateway then serves nothing
        // either, which its callers learn from the registry itself.
        let _ = registry
            .send(crate::registry::Subscribe(forwarder.recipient()))
            .await;
        Ok(state)
    }
}

impl Actor for ListChangedForwarder {
    type Context = Context<Self>;
}

impl Handler<ConnectionEvent> for ListChangedForwarder {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, ctx: &mut Context<Self>) {
        let state = self.state.clone();
        match event {
            // The registry reloads the catalog, and says which lists really
            // changed once the new one is there: that catalog (only) joins
            // the view, and a client that lists again sees it.
            ConnectionEvent::CatalogChanged { connection, lists } => {
                ctx.spawn(
                    async move {
                        let asked = state.registry.send(ListTools { connection }).await;
                        if let Ok(Ok(catalog)) = asked {
                            state.catalog_changed(catalog, lists);
                        }
                    }
                    .into_actor(self),
                );
            }
            // A connection going away (retired, removed by a reload,
            // restarted) changes every list the gateway exposes.
            ConnectionEvent::Retired { .. }
            | ConnectionEvent::Stopped { .. }
            | ConnectionEvent::Restarted { .. } => {
                ctx.spawn(
                    async move {
                        for list in ListKind::ALL {
                            state.notify_list_changed(list).await;
                        }
                    }
                    .into_actor(self),
                );
            }
            ConnectionEvent::ResourceUpdated { connection, uri } => {
                ctx.spawn(
                    async move { state.notify_resource_updated(&connection, &uri).await }
                        .into_actor(self),
                );
            }
            ConnectionEvent::Log {
                connection,
                message,
                reached,
            } => state.log(&connection, message, &reached),
            ConnectionEvent::Ready { connection, .. } => {
                ctx.spawn(async move { state.resubscribe(&connection).await }.into_actor(self));
            }
            _ => {}
        }
    }
}
