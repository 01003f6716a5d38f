//! Probes and revivals. While a connection is parked for a failure, its actor asks the
//! upstream in the background whether it is back, with a request that runs
//! nothing (a new session: `initialize`, or `server/discover` for
//! 2026-07-28; a new child for stdio). A healthy answer revives the
//! connection at once with that session; a failed one adds no strike
//! (docs/SUPERVISION.md, "Probes").

use actix::{ActorFutureExt, AsyncContext, Context, Handler, Message, WrapFuture};

use super::{ConnectionActor, LeaseAttempt, LeaseError, Lifecycle};
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

    /// Sends the probe planned for `park`, if it still stands and, in a
    /// fleet, this node holds the connection's probe lease until its next
    /// probe is due.
    fn probe(&mut self, park: u64, ctx: &mut Context<Self>) {
        if !self.parked_in(park) {
            return;
        }
        self.probes += 1;
        let lease = self.deps.probes.clone().map(|leases| {
            let until_next = self.config.probe.delay(self.probes);
            (leases, until_next.unwrap_or(self.config.probe.every))
        });
        let connection = self.config.name.clone();
        let (open, events) = self.open_session();
        let probe = async move {
            if let Some((leases, ttl)) = lease
                && !leases.take(&connection, ttl).await
            {
                return None; // another node probes this time
            }
            Some(open.await)
        };
        ctx.spawn(probe.into_actor(self).map(move |probed, actor, ctx| {
            let Some(result) = probed else {
                tracing::debug!(connection = %actor.config.name, "probe: another node of the fleet probes");
                actor.plan_probe(ctx);
                return;
            };
            actor.history.lock().probes += 1;
            actor.history.moved();
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

impl ConnectionActor {
    /// The park is over and this call is the first use: it revives the
    /// connection.
    pub(super) fn revive_on_use(&self) {
        tracing::info!(connection = %self.config.name, "revived: cooldown over, rebuilding the session");
        self.publish(ConnectionEvent::Revived {
            connection: self.config.name.clone(),
        });
    }

    /// The park is over on a node of a fleet: the node that takes the
    /// probe lease tries for all, and tells them if the upstream is back
    /// (the `Ready` it publishes); a node that finds the lease taken keeps
    /// its callers answered as parked for a second more, and hears the
    /// outcome as news: a revival, or the trying node's new park.
    pub(super) fn revive_for_the_fleet(
        &mut self,
        leases: std::sync::Arc<crate::fleet::ProbeLeases>,
        failure: crate::Failure,
        ctx: &mut Context<Self>,
    ) -> LeaseAttempt {
        let waiting = self.connecting(true);
        let connecting = self.transitions;
        let connection = self.config.name.clone();
        // Held as long as probes are apart: the try is a session build,
        // seconds at most; one that hangs lets another node try after it.
        let ttl = self.config.probe.every;
        let taken = {
            let leases = leases.clone();
            async move { leases.take(&connection, ttl).await }
        };
        ctx.spawn(taken.into_actor(self).map(move |taken, actor, ctx| {
            if actor.transitions != connecting {
                return; // stopped, reset or retired meanwhile
            }
            let Lifecycle::Connecting { waiters, .. } = &mut actor.lifecycle else {
                return;
            };
            if taken {
                actor.trying = Some(leases);
                actor.revive_on_use();
                actor.connect(ctx);
                return;
            }
            let waiters = std::mem::take(waiters);
            actor.transition(Lifecycle::Parked {
                until: crate::Deadline::after(ANOTHER_NODE_TRIES),
                failure,
            });
            let refusal = actor.refusal();
            for waiter in waiters {
                let _ = waiter.send(Err(LeaseError::Refused(refusal.clone())));
            }
        }));
        waiting
    }
}

/// How long a node whose park ended answers its callers as parked while
/// another node of the fleet tries the upstream.
const ANOTHER_NODE_TRIES: std::time::Duration = std::time::Duration::from_secs(1);

/// Another node of the fleet found the upstream back (its probe, or its
/// first use after the park): revive now, with a session of this node's
/// own (docs/FLEET.md, "Probes across nodes").
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub(crate) struct Revive;

impl Handler<Revive> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, _: Revive, ctx: &mut Context<Self>) {
        // A park of this node's own that a probe would not end (the
        // upstream asked for quiet, its contracts keep changing) runs on
        // until its time; after it, any park ends.
        let ends = match &self.lifecycle {
            Lifecycle::Parked { until, failure } => failure.kind.probed() || !until.pending(),
            _ => false,
        };
        if !ends {
            return;
        }
        tracing::info!(connection = %self.config.name, "revived: another node of the fleet found the upstream back");
        self.publish(ConnectionEvent::Revived {
            connection: self.config.name.clone(),
        });
        // Nobody waits on this build: its session serves the next calls.
        let _ = self.start_connect(ctx, true);
    }
}
