//! Forwards upstream tool-list changes to downstream clients: an actor
//! subscribed to the registry's events.

use std::sync::Arc;

use actix::{Actor, AsyncContext, Context, Handler, WrapFuture};

use super::handler::GatewayState;
use crate::events::ConnectionEvent;

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

impl Actor for ListChangedForwarder {
    type Context = Context<Self>;
}

impl Handler<ConnectionEvent> for ListChangedForwarder {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, ctx: &mut Context<Self>) {
        // The exposed tool set changes when an upstream's list changes, or a
        // connection goes away (retired, removed by a reload, restarted).
        let changes_tools = matches!(
            event,
            ConnectionEvent::ToolsChanged { .. }
                | ConnectionEvent::Retired { .. }
                | ConnectionEvent::Stopped { .. }
                | ConnectionEvent::Restarted { .. }
        );
        if changes_tools {
            let state = self.state.clone();
            ctx.spawn(async move { state.notify_tools_changed().await }.into_actor(self));
        }
    }
}
