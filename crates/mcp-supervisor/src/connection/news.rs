//! What another node of the fleet learned, taken on by this node's actor
//! (docs/FLEET.md): a park, a `Retry-After` window or a retirement.

use actix::Context;

use super::{ConnectionActor, Lifecycle};
use crate::events::ConnectionEvent;

impl ConnectionActor {
    /// Takes on what another node of the fleet learned (docs/FLEET.md): a
    /// park, a `Retry-After` window or a retirement, told to subscribers as
    /// if it happened here. A retirement stays; a longer park stays.
    pub(super) fn adopt(&mut self, shared: crate::fleet::Shared, ctx: &mut Context<Self>) {
        use crate::fleet::Shared;
        match shared {
            Shared::Parked {
                until,
                failure,
                strikes,
            } => {
                self.strikes.at_least(strikes);
                let until = crate::Deadline::at(until);
                let longer = match &self.lifecycle {
                    Lifecycle::Retired { .. } | Lifecycle::Stopped => false,
                    Lifecycle::Parked { until: mine, .. } => mine.wall() < until.wall(),
                    _ => true,
                };
                if !longer || !until.pending() {
                    return;
                }
                tracing::info!(
                    connection = %self.config.name,
                    kind = %failure.kind,
                    delay_secs = until.remaining().as_secs_f64(),
                    "parked: the fleet parked it"
                );
                self.transition(Lifecycle::Parked {
                    until,
                    failure: failure.clone(),
                });
                self.publish(ConnectionEvent::Parked {
                    connection: self.config.name.clone(),
                    failure,
                    cooldown: until.remaining(),
                    until,
                    attempt: 0,
                    strikes: self.strikes.count(),
                });
                self.plan_probe(ctx);
            }
            Shared::Held { until, failure } => {
                if self.hold_until(crate::Deadline::at(until), &failure) {
                    tracing::info!(connection = %self.config.name, "held: the fleet was asked to wait (Retry-After)");
                }
            }
            Shared::Retired { reason, failure } => self.retire(reason, failure.as_ref(), 0),
        }
    }
}
