//! The `QuarantinePolicy` actor: the single place where a classified failure
//! becomes a decision. It owns what only the view across connections needs:
//! each connection's strikes (parks since its last success) and which
//! connections are parked right now. The park itself, and a retirement, are
//! the connection actor's (docs/ARCHITECTURE.md, "Who owns what").
//!
//! It sees all connections at once, which is what makes the mass-retirement
//! guard possible: when most connections fail together the fault is more likely
//! ours (the local network) than theirs, so parks stop retiring connections
//! (like Envoy's max-ejection-percent).

use std::{collections::HashMap, time::Duration};

use actix::{Actor, Context, Handler, Message, MessageResult};
use tokio::time::Instant;

use super::{
    decide::{Decision, Phase, Situation, decide, decide_idle_death},
    schedule::PolicySettings,
};
use crate::failure::Failure;

/// What the policy keeps per connection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnectionPolicyState {
    /// Counting parks since the last success; the `retire_after`-th retires.
    pub parks: u32,
    /// When the park it last decided ends: the guard counts parked
    /// connections, and concurrent reports of one burst share that park.
    pub parked_until: Option<Instant>,
}

impl ConnectionPolicyState {
    fn parked_at(&self, now: Instant) -> bool {
        self.parked_until.is_some_and(|until| until > now)
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
    fn guard_active(&self, deciding: &str, now: Instant) -> bool {
        let others_parked = self
            .connections
            .iter()
            .filter(|(name, state)| name.as_str() != deciding && state.parked_at(now))
            .count();
        let total = self.connections.len().max(1);
        others_parked >= 1 && (others_parked + 1) * 2 > total
    }

    /// Records a decision's effect on the connection's state.
    fn apply(&mut self, connection: &str, decision: &Decision, guard: bool) {
        let now = Instant::now();
        let retire_after = self.settings.cooldowns.retire_after();
        let state = self.connections.entry(connection.to_owned()).or_default();
        match decision {
            Decision::Park { cooldown, counts } => {
                if *counts {
                    state.parks = state.parks.saturating_add(1);
                }
                state.parked_until = Some(now + *cooldown);
                if guard && *counts && state.parks >= retire_after && !self.guard_logged {
                    self.guard_logged = true;
                    tracing::warn!(
                        connection,
                        parks = state.parks,
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

    /// A connection already parked gets that answer again with no new
    /// strike: several callers sharing one failed rebuild, whose reports
    /// were sent before the park reached the connection actor, must not add
    /// up to extra parks. (Once it has, the actor answers them itself.)
    fn standing_decision(&self, connection: &str, now: Instant) -> Option<Decision> {
        let state = self.connections.get(connection)?;
        let until = state.parked_until.filter(|until| *until > now)?;
        Some(Decision::Park {
            cooldown: until - now,
            counts: false,
        })
    }

    fn parks_of(&self, connection: &str) -> u32 {
        self.connections
            .get(connection)
            .map_or(0, |state| state.parks)
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
}

impl Handler<ReportFailure> for QuarantinePolicy {
    type Result = MessageResult<ReportFailure>;

    fn handle(&mut self, msg: ReportFailure, _: &mut Context<Self>) -> Self::Result {
        let now = Instant::now();
        if let Some(standing) = self.standing_decision(&msg.connection, now) {
            return MessageResult(standing);
        }
        let guard = self.guard_active(&msg.connection, now);
        let situation = Situation {
            failure: &msg.failure,
            phase: msg.phase,
            attempt: msg.attempt,
            max_attempts: msg.max_attempts,
            call_retry_allowed: msg.call_retry_allowed,
            parks: self.parks_of(&msg.connection),
            remaining: msg.remaining,
            guard_active: guard,
            jitter_unit: rand::random::<f64>(),
        };
        let decision = decide(&self.settings, &situation);
        self.apply(&msg.connection, &decision, guard);
        MessageResult(decision)
    }
}

/// A session died while idle; it parks like an exhausted operation.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Decision")]
pub struct ReportIdleDeath {
    pub connection: String,
    pub failure: Failure,
}

impl Handler<ReportIdleDeath> for QuarantinePolicy {
    type Result = MessageResult<ReportIdleDeath>;

    fn handle(&mut self, msg: ReportIdleDeath, _: &mut Context<Self>) -> Self::Result {
        let now = Instant::now();
        if let Some(standing) = self.standing_decision(&msg.connection, now) {
            return MessageResult(standing);
        }
        let guard = self.guard_active(&msg.connection, now);
        let decision = decide_idle_death(&self.settings, self.parks_of(&msg.connection), guard);
        self.apply(&msg.connection, &decision, guard);
        MessageResult(decision)
    }
}

/// An operation succeeded: strikes reset, so separate bursts never add up.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ReportSuccess {
    pub connection: String,
}

impl Handler<ReportSuccess> for QuarantinePolicy {
    type Result = ();

    fn handle(&mut self, msg: ReportSuccess, _: &mut Context<Self>) {
        let state = self.connections.entry(msg.connection).or_default();
        state.parks = 0;
        state.parked_until = None;
    }
}

/// Clears a connection's strikes and park (admin reset, or a reload that
/// changed it).
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
