//! The `QuarantinePolicy` actor: the single place where a classified failure
//! becomes a decision. A connection's standing (its park, retirement and
//! strikes) is its connection actor's, which tells the policy its strikes
//! with each report (docs/ARCHITECTURE.md, "Who owns what"). The policy keeps
//! only what needs the view across connections: which are parked now.
//!
//! That view is what makes the mass-retirement guard possible: when most
//! connections fail together the fault is more likely ours (the local
//! network) than theirs, so parks stop retiring connections (like Envoy's
//! max-ejection-percent). It is learned from the parks the policy decides
//! (at once, so a burst across connections is seen as one) and from the
//! connections' events (a park's real end, a revival, a retirement).

use std::{collections::HashMap, time::Duration};

use actix::{Actor, Context, Handler, Message, MessageResult};

use super::{
    decide::{Decision, Situation, decide, decide_idle_death},
    schedule::PolicySettings,
};
use crate::{
    Deadline,
    events::ConnectionEvent,
    failure::{Failure, Phase},
};

/// What the policy knows of one connection: whether, and until when, it is
/// parked (the guard's view; the park itself is the connection actor's).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnectionPolicyState {
    pub parked_until: Option<Deadline>,
}

impl ConnectionPolicyState {
    fn parked_now(&self) -> bool {
        self.parked_until.is_some_and(|until| until.pending())
    }
}

/// Holds policy state for every connection; answers failure reports with decisions.
#[derive(Debug)]
pub struct QuarantinePolicy {
    settings: PolicySettings,
    connections: HashMap<String, ConnectionPolicyState>,
    /// The guard's "suspect the local network" warning was logged for the
    /// current episode; cleared when the guard lets go.
    guard_logged: bool,
}

impl QuarantinePolicy {
    pub fn new(settings: PolicySettings) -> Self {
        QuarantinePolicy {
            settings,
            connections: HashMap::new(),
            guard_logged: false,
        }
    }

    /// The guard holds when, counting the deciding connection, more than half
    /// of all connections are parked and at least one *other* one is (a lone
    /// failing connection must still be able to retire).
    fn guard_active(&self, deciding: &str) -> bool {
        let others_parked = self
            .connections
            .iter()
            .filter(|(name, state)| name.as_str() != deciding && state.parked_now())
            .count();
        let total = self.connections.len().max(1);
        others_parked >= 1 && (others_parked + 1) * 2 > total
    }

    /// Records a decision's effect on the guard's view, for a connection
    /// that had `parks` strikes.
    fn apply(&mut self, connection: &str, decision: &Decision, parks: u32, guard: bool) {
        let retire_after = self.settings.cooldowns.retire_after();
        let state = self.connections.entry(connection.to_owned()).or_default();
        match decision {
            Decision::Park { cooldown, counts } => {
                state.parked_until = Some(Deadline::after(*cooldown));
                let strikes = parks.saturating_add(u32::from(*counts));
                if guard && *counts && strikes >= retire_after && !self.guard_logged {
                    self.guard_logged = true;
                    tracing::warn!(
                        connection,
                        parks = strikes,
                        "most connections are parked at once; suspecting the local network, \
                         so parks no longer retire connections until they recover"
                    );
                }
            }
            Decision::Retire => state.parked_until = None,
            Decision::Retry { .. } | Decision::Reject | Decision::GiveUp => {}
        }
        if !guard {
            self.guard_logged = false;
        }
    }
}

impl Actor for QuarantinePolicy {
    type Context = Context<Self>;
}

/// Declares the full set of connections (the guard's denominator). Unknown
/// names get fresh state; names no longer listed are forgotten.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct RegisterConnections(pub Vec<String>);

impl Handler<RegisterConnections> for QuarantinePolicy {
    type Result = ();

    fn handle(&mut self, msg: RegisterConnections, _: &mut Context<Self>) {
        self.connections.retain(|name, _| msg.0.contains(name));
        for name in msg.0 {
            self.connections.entry(name).or_default();
        }
    }
}

/// One attempt of an operation failed: what now?
#[derive(Message, Debug, Clone)]
#[rtype(result = "Decision")]
pub struct ReportFailure {
    pub connection: String,
    pub failure: Failure,
    pub phase: Phase,
    pub attempt: u32,
    pub max_attempts: u32,
    pub call_retry_allowed: bool,
    /// Time left until the operation's deadline.
    pub remaining: Duration,
    /// The connection's strikes: counting parks since its last success.
    pub parks: u32,
}

impl Handler<ReportFailure> for QuarantinePolicy {
    type Result = MessageResult<ReportFailure>;

    fn handle(&mut self, msg: ReportFailure, _: &mut Context<Self>) -> Self::Result {
        let guard = self.guard_active(&msg.connection);
        let situation = Situation {
            failure: &msg.failure,
            phase: msg.phase,
            attempt: msg.attempt,
            max_attempts: msg.max_attempts,
            call_retry_allowed: msg.call_retry_allowed,
            parks: msg.parks,
            remaining: msg.remaining,
            guard_active: guard,
            jitter_unit: rand::random::<f64>(),
        };
        let decision = decide(&self.settings, &situation);
        self.apply(&msg.connection, &decision, msg.parks, guard);
        MessageResult(decision)
    }
}

/// A session died while idle; it parks like an exhausted operation.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Decision")]
pub struct ReportIdleDeath {
    pub connection: String,
    pub failure: Failure,
    /// The connection's strikes: counting parks since its last success.
    pub parks: u32,
}

impl Handler<ReportIdleDeath> for QuarantinePolicy {
    type Result = MessageResult<ReportIdleDeath>;

    fn handle(&mut self, msg: ReportIdleDeath, _: &mut Context<Self>) -> Self::Result {
        let guard = self.guard_active(&msg.connection);
        let decision = decide_idle_death(&self.settings, msg.parks, guard);
        self.apply(&msg.connection, &decision, msg.parks, guard);
        MessageResult(decision)
    }
}

/// What the connections' actors did to their standing: the guard's view
/// follows each park (to its real end), revival, retirement and stop. Only
/// registered connections count (a late event of one a reload removed must
/// not change the guard's denominator).
impl Handler<ConnectionEvent> for QuarantinePolicy {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, _: &mut Context<Self>) {
        let (connection, until) = match &event {
            ConnectionEvent::Parked {
                connection, until, ..
            } => (connection, Some(*until)),
            ConnectionEvent::Ready { connection, .. }
            | ConnectionEvent::Revived { connection }
            | ConnectionEvent::Retired { connection, .. }
            | ConnectionEvent::Stopped { connection } => (connection, None),
            _ => return,
        };
        if let Some(state) = self.connections.get_mut(connection.as_str()) {
            state.parked_until = until;
        }
    }
}

/// Clears what the policy knows of a connection (admin reset, or a reload
/// that changed it).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ResetConnection {
    pub connection: String,
}

impl Handler<ResetConnection> for QuarantinePolicy {
    type Result = ();

    fn handle(&mut self, msg: ResetConnection, _: &mut Context<Self>) {
        self.connections
            .insert(msg.connection, ConnectionPolicyState::default());
    }
}

/// Drops a connection that left the config.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Forget {
    pub connection: String,
}

impl Handler<Forget> for QuarantinePolicy {
    type Result = ();

    fn handle(&mut self, msg: Forget, _: &mut Context<Self>) {
        self.connections.remove(&msg.connection);
    }
}

/// Reads one connection's policy state.
#[cfg(test)]
#[derive(Message, Debug, Clone)]
#[rtype(result = "Option<ConnectionPolicyState>")]
pub struct PolicySnapshot {
    pub connection: String,
}

#[cfg(test)]
impl Handler<PolicySnapshot> for QuarantinePolicy {
    type Result = Option<ConnectionPolicyState>;

    fn handle(&mut self, msg: PolicySnapshot, _: &mut Context<Self>) -> Self::Result {
        self.connections.get(&msg.connection).cloned()
    }
}

#[cfg(test)]
mod tests;

/// Replaces the timing settings (a reload changed `[supervisor.quarantine]`);
/// strikes and running parks are kept.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct UpdateSettings(pub PolicySettings);

impl Handler<UpdateSettings> for QuarantinePolicy {
    type Result = ();

    fn handle(&mut self, msg: UpdateSettings, _: &mut Context<Self>) {
        self.settings = msg.0;
    }
}
