//! Probes: while a connection is parked for a failure, its actor asks the
//! upstream in the background whether it is back, with a request that runs
//! nothing (a new session: `initialize`, or `server/discover` for
//! 2026-07-28; a new child for stdio). A healthy answer revives the
//! connection at once with that session; a failed one adds no strike
//! (docs/SUPERVISION.md, "Probes").

use actix::{ActorFutureExt, AsyncContext, Context, WrapFuture};

use super::{ConnectionActor, Lifecycle};
use crate::events::ConnectionEvent;

impl ConnectionActor {
    /// Plans the current park's next probe, if its failure is one probes
    /// are for and one more may go before the park ends.
    pub(super) fn plan_probe(&mut self, ctx: &mut Context<Self>) {
        let Lifecycle::Parked { until, failure } = &self.lifecycle else {
            return;
        };
        if !failure.kind.probed() {
            return;
        }
        let Some(delay) = self.config.probe.delay(self.probes) else {
            return;
        };
        if delay >= until.remaining() {
            return; // the park's end comes first: the next use revives it
        }
        let park = self.park;
        ctx.run_later(delay, move |actor, ctx| actor.probe(park, ctx));
    }

    /// Whether the park numbered `park` still stands.
    fn parked_in(&self, park: u64) -> bool {
        self.park == park
            && matches!(&self.lifecycle, Lifecycle::Parked { until, .. } if until.pending())
    }

    /// Sends the probe planned for `park`, if it still stands.
    fn probe(&mut self, park: u64, ctx: &mut Context<Self>) {
        if !self.parked_in(park) {
            return;
        }
        self.probes += 1;
        self.history.lock().probes += 1;
        self.history.moved();
        tracing::debug!(connection = %self.config.name, probe = self.probes, "probing the parked upstream");
        let (open, events) = self.open_session();
        ctx.spawn(open.into_actor(self).map(move |result, actor, ctx| {
            if !actor.parked_in(park) {
                // Revived, reset, retired or stopped meanwhile.
                if let Ok(session) = result {
                    session.cancel();
                }
                return;
            }
            match result {
                Ok(session) => {
                    tracing::info!(
                        connection = %actor.config.name,
                        probes = actor.probes,
                        "revived: a probe found the upstream back"
                    );
                    actor.publish(ConnectionEvent::Revived {
                        connection: actor.config.name.clone(),
                    });
                    actor.ready(session, events, true, ctx);
                }
                Err(failure) => {
                    tracing::debug!(
                        connection = %actor.config.name,
                        kind = %failure.kind,
                        reason = %failure.reason,
                        "probe: the upstream is not back yet"
                    );
                    actor.plan_probe(ctx);
                }
            }
        }));
    }
}
