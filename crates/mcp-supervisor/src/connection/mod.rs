//! The connection actor: owns one connection's session for its whole life.
//!
//! Its mailbox serializes every state change (the `Lifecycle`) and the
//! admission of calls. The I/O runs in operation futures (`operation`) that
//! hold a `Lease` on the session and report back by message; they never touch
//! the actor's state directly. A failure report goes through the actor, which
//! disposes a broken session *before* anyone waits, asks the `QuarantinePolicy`,
//! and applies its decision (park, retire) in one place.

mod admission;
mod bypass;
pub(crate) use bypass::Bypass;
mod lifecycle;
mod messages;
mod news;
mod on_behalf;
mod operation;
mod probe;
mod reports;
pub mod stats;

use std::{sync::Arc, time::SystemTime};

use actix::{
    Actor, ActorFutureExt, Addr, AsyncContext, Context, Recipient, ResponseActFuture, WrapFuture,
};
use tokio::{sync::mpsc, time::Instant};

pub use lifecycle::{Handover, Standing};
pub(crate) use lifecycle::{Lease, LeaseAttempt, LeaseError};
#[cfg(feature = "fault-injection")]
pub use messages::InjectPanic;
pub(crate) use messages::{Adopt, ContractsChurned, Forward as ConnectionForward, Retire};
pub use messages::{
    ConnectionDied, ConnectionSnapshot, ListTools as ConnectionList, Snapshot, Stop,
};
pub use on_behalf::Exchange;
pub(crate) use operation::CallContext;
pub use operation::CallRetry;
pub(crate) use probe::Revive;
pub use stats::CallCounts;

use self::{
    admission::Admission,
    lifecycle::{Lifecycle, Waiter},
};
use crate::{
    Unavailable,
    config::{ConnectionConfig, Transport},
    events::ConnectionEvent,
    failure::Failure,
    http::{HttpClients, HttpRecorder},
    outcome::messages as text,
    policy::{Decision, QuarantinePolicy},
    session::{Session, SessionEvent, SessionHandler, open_http_sharing},
    woken::WhenWoken,
};

/// What a connection actor needs from the rest of the supervisor.
#[derive(Clone, Debug)]
pub struct ConnectionDeps {
    pub policy: Addr<QuarantinePolicy>,
    /// The pooled HTTP client every HTTP connection shares.
    pub http: HttpClients,
    /// Where a fleet node takes a parked connection's probe lease, so one
    /// node probes for all (docs/FLEET.md); `None`: this process is alone.
    pub probes: Option<Arc<crate::fleet::ProbeLeases>>,
    /// Where transitions are published (the registry).
    pub events: Option<Recipient<ConnectionEvent>>,
    /// Where the actor's death is announced (the registry, which restarts it).
    pub deaths: Option<Recipient<ConnectionDied>>,
    /// Bound on a graceful session close at stop.
    pub shutdown_timeout: std::time::Duration,
    /// Where OAuth tokens are shared with the fleet, if this process is in
    /// one with a key (docs/OAUTH.md, "In a fleet").
    pub tokens: Option<Arc<dyn crate::oauth::TokenShare>>,
    /// Where a connection acting on its callers' behalf exchanges their
    /// tokens (`[gateway] auth`'s issuer and client), if anywhere.
    pub exchange: Option<Arc<Exchange>>,
}

/// What one actor of a connection starts from: which actor it is, the
/// connection's history, and what a crashed predecessor handed over.
#[derive(Debug, Clone, Default)]
pub struct Incarnation {
    /// Counts the actors started for the connection; a death notice names
    /// it, so a notice from an actor already replaced is ignored.
    pub number: u64,
    pub history: stats::SharedHistory,
    pub handover: Handover,
}

/// One connection's actor. Start it with [`ConnectionActor::new`] + `start()`.
#[derive(Debug)]
pub struct ConnectionActor {
    config: Arc<ConnectionConfig>,
    deps: ConnectionDeps,
    lifecycle: Lifecycle,
    /// When the lifecycle last changed label (for `/status` `since`).
    since: SystemTime,
    /// Bumped on every new session, so stale failure reports can be ignored.
    generation: u64,
    admission: Admission,
    /// Which of the connection's actors this is (see [`Incarnation`]).
    incarnation: u64,
    history: stats::SharedHistory,
    /// The park or retirement it had when it stopped without being asked
    /// to, for the death notice.
    handover: Option<Standing>,
    strikes: lifecycle::Strikes,
    /// A `Retry-After` window the upstream asked for (here or, with
    /// `[fleet]`, on another node): nothing is sent before it ends.
    hold: Option<(crate::Deadline, Failure)>,
    recorder: HttpRecorder,
    /// Cancelled at stop: every running operation answers at once.
    stop: tokio_util::sync::CancellationToken,
    /// The protocol version the upstream agreed to last time (or the one the
    /// config pins), so a rebuilt session starts the same way without probing
    /// again.
    protocol: Option<rmcp::model::ProtocolVersion>,
    /// Where the upstream is, as its CLIENT spans say.
    peer: Arc<crate::telemetry::spans::UpstreamPeer>,
    /// When the current session became ready (`mcp.client.session.duration`).
    ready_since: Option<std::time::Instant>,
    /// The sessions with its callers' credentials (`on_behalf`).
    on_behalf: Option<Arc<on_behalf::OnBehalfSessions>>,
    /// Counts parks, so a probe planned for one that ended is not sent.
    park: u64,
    /// Counts transitions, so work started in one state can tell it is
    /// still in it when it ends.
    transitions: u64,
    /// The probe lease this node took to try the upstream for the fleet
    /// at a park's end, given back when the try ends.
    trying: Option<Arc<crate::fleet::ProbeLeases>>,
    /// Probes sent in the current park.
    probes: u32,
    /// Its bypass for requests while it is ready (`bypass`).
    bypass: bypass::Bypass,
}

impl ConnectionActor {
    pub fn new(config: Arc<ConnectionConfig>, deps: ConnectionDeps, start: Incarnation) -> Self {
        let admission = Admission::new(config.max_concurrent_calls, config.max_queued_calls);
        let protocol = crate::session::pinned_version(config.protocol);
        let peer = Arc::new(crate::telemetry::spans::UpstreamPeer::of(
            &config.name,
            &config.transport,
        ));
        let on_behalf = on_behalf::OnBehalfSessions::of(
            &config,
            &deps.http,
            (deps.exchange.as_ref(), deps.tokens.as_ref()),
        );
        ConnectionActor {
            peer,
            ready_since: None,
            on_behalf,
            config,
            deps,
            lifecycle: start
                .handover
                .standing
                .map_or(Lifecycle::Idle, Lifecycle::from),
            since: SystemTime::now(),
            generation: 0,
            admission,
            incarnation: start.number,
            history: start.history,
            handover: None,
            strikes: lifecycle::Strikes::new(start.handover.strikes),
            hold: None,
            recorder: HttpRecorder::default(),
            stop: tokio_util::sync::CancellationToken::new(),
            protocol,
            park: 0,
            transitions: 0,
            trying: None,
            probes: 0,
            bypass: bypass::Bypass::default(),
        }
    }

    /// Its bypass: a request's way past its mailbox while it is ready.
    pub(crate) fn bypass(&self) -> bypass::Bypass {
        self.bypass.clone()
    }

    /// Opens the bypass with the session's lease while it is ready and holds
    /// no `Retry-After` window; closes it otherwise. Called after every
    /// change to either.
    fn keep_bypass(&self) {
        match (&self.lifecycle, &self.hold) {
            (Lifecycle::Ready(lease), None) => self.bypass.open(bypass::Open {
                thread: std::thread::current().id(),
                lease: lease.clone(),
                parts: self.parts(),
                admission: self.admission.clone(),
                history: self.history.clone(),
            }),
            _ => self.bypass.close(),
        }
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    fn publish(&self, event: ConnectionEvent) {
        if let Some(events) = &self.deps.events {
            events.do_send(event);
        }
    }

    /// The one place the lifecycle changes. Resolves waiters of a build that
    /// will never complete, and closes a session that is being left behind.
    fn transition(&mut self, next: Lifecycle) {
        // Closed before anything changes; opened again at the end if ready.
        self.bypass.close();
        self.history.moved();
        self.transitions += 1;
        let previous = std::mem::replace(&mut self.lifecycle, next);
        let was_parked = matches!(previous, Lifecycle::Parked { .. });
        if previous.state() != self.lifecycle.state() {
            self.since = SystemTime::now();
        }
        match previous {
            // Waiting callers must get an answer: the state they waited on is gone.
            Lifecycle::Connecting { waiters, .. } => {
                let refusal = self.refusal();
                for waiter in waiters {
                    let _ = waiter.send(Err(LeaseError::Refused(refusal.clone())));
                }
            }
            // The old session must not be used again; cancelling it ends its
            // service loop, which closes the transport (and a child process).
            Lifecycle::Ready(lease) => {
                lease.session.cancel();
                if let Some(since) = self.ready_since.take() {
                    let protocol = self.protocol.as_ref().map(|v| v.as_str());
                    crate::telemetry::spans::client_session_ended(
                        &self.peer,
                        protocol,
                        since.elapsed(),
                    );
                }
            }
            Lifecycle::Idle
            | Lifecycle::Parked { .. }
            | Lifecycle::Retired { .. }
            | Lifecycle::Stopped => {}
        }
        match self.lifecycle {
            Lifecycle::Ready(_) => self.ready_since = Some(std::time::Instant::now()),
            Lifecycle::Parked { .. } => {
                self.park += 1;
                // A longer park taken on from the fleet while parked is
                // the same outage: its probes count on, up to `max_probes`.
                if !was_parked {
                    self.probes = 0;
                }
            }
            _ => {}
        }
        self.keep_bypass();
    }

    /// The answer for a caller while the connection refuses work.
    fn refusal(&self) -> Unavailable {
        match &self.lifecycle {
            Lifecycle::Parked { until, failure } => {
                let remaining = until.remaining();
                Unavailable {
                    message: text::parked(self.name(), failure, remaining),
                    failure: failure.clone(),
                    retry_in: Some(remaining),
                }
            }
            Lifecycle::Retired { failure, reason } => {
                let failure = failure
                    .clone()
                    .unwrap_or_else(|| Failure::new(crate::FailureKind::Unknown, reason.as_str()));
                Unavailable {
                    message: text::retired(self.name(), &failure),
                    failure,
                    retry_in: None,
                }
            }
            _ => Unavailable {
                failure: Failure::transport("connection stopped"),
                retry_in: None,
                message: text::stopped(self.name()),
            },
        }
    }

    /// Hands out the session, joins the build in progress, starts one, or
    /// refuses (parked, retired, stopped). A park whose cooldown is over
    /// revives here, on first use.
    fn lease(&mut self, ctx: &mut Context<Self>) -> LeaseAttempt {
        if let Some(held) = self.held() {
            return held;
        }
        match &mut self.lifecycle {
            Lifecycle::Ready(lease) => LeaseAttempt::Ready(lease.clone()),
            Lifecycle::Connecting { waiters, .. } => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                waiters.push(tx);
                LeaseAttempt::Wait(rx)
            }
            Lifecycle::Idle => self.start_connect(ctx, false),
            Lifecycle::Parked { failure, until } if !until.pending() => {
                // In a fleet, one node tries for all (docs/FLEET.md).
                if let Some(leases) = self.deps.probes.clone() {
                    let failure = failure.clone();
                    return self.revive_for_the_fleet(leases, failure, ctx);
                }
                self.revive_on_use();
                self.start_connect(ctx, true)
            }
            Lifecycle::Parked { .. } | Lifecycle::Retired { .. } | Lifecycle::Stopped => {
                LeaseAttempt::Refused(self.refusal())
            }
        }
    }

    /// The answer while a `Retry-After` window lasts (a park, retirement or
    /// stop answers for itself).
    fn held(&mut self) -> Option<LeaseAttempt> {
        if matches!(
            self.lifecycle,
            Lifecycle::Parked { .. } | Lifecycle::Retired { .. } | Lifecycle::Stopped
        ) {
            return None;
        }
        let (until, failure) = self.hold.as_ref()?;
        if !until.pending() {
            self.hold = None;
            self.keep_bypass();
            return None;
        }
        Some(LeaseAttempt::Held {
            until: *until,
            refusal: Unavailable {
                message: text::parked(self.name(), failure, until.remaining()),
                failure: failure.clone(),
                retry_in: Some(until.remaining()),
            },
        })
    }

    /// Holds every request until `until` (a `Retry-After` window), unless a
    /// longer one is already held; `false` if nothing changed.
    fn hold_until(&mut self, until: crate::Deadline, failure: &Failure) -> bool {
        if self
            .hold
            .as_ref()
            .is_some_and(|(held, _)| held.wall() >= until.wall())
            || !until.pending()
        {
            return false;
        }
        self.hold = Some((until, failure.clone()));
        self.bypass.close();
        self.history.moved();
        self.publish(ConnectionEvent::Held {
            connection: self.config.name.clone(),
            failure: failure.clone(),
            until,
        });
        true
    }

    fn start_connect(&mut self, ctx: &mut Context<Self>, revived: bool) -> LeaseAttempt {
        let waiting = self.connecting(revived);
        self.connect(ctx);
        waiting
    }

    /// Moves to `Connecting`, the caller its first waiter.
    fn connecting(&mut self, revived: bool) -> LeaseAttempt {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.transition(Lifecycle::Connecting {
            waiters: vec![tx],
            revived,
        });
        LeaseAttempt::Wait(rx)
    }

    /// Builds a session for the callers waiting in `Connecting`.
    fn connect(&mut self, ctx: &mut Context<Self>) {
        tracing::info!(connection = %self.config.name, transport = self.config.transport.kind(), "connecting");
        self.publish(ConnectionEvent::Connecting {
            connection: self.config.name.clone(),
        });
        let (open, events) = self.open_session();
        ctx.spawn(
            open.into_actor(self)
                .map(move |result, actor, ctx| actor.connected(result, events, ctx)),
        );
    }

    /// A new session to the upstream, and where its notifications arrive.
    fn open_session(
        &self,
    ) -> (
        impl Future<Output = Result<Session, Failure>> + use<>,
        mpsc::UnboundedReceiver<SessionEvent>,
    ) {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let open = open_session(
            self.config.clone(),
            self.deps.http.clone(),
            self.recorder.clone(),
            SessionHandler::new(events_tx).knowing(self.protocol.clone()),
            self.deps
                .tokens
                .clone()
                .map(|share| crate::oauth::Sharing::new(share, &self.config.name)),
        );
        (open, events_rx)
    }

    /// A session build finished.
    fn connected(
        &mut self,
        result: Result<Session, Failure>,
        events: mpsc::UnboundedReceiver<SessionEvent>,
        ctx: &mut Context<Self>,
    ) {
        if let Some(leases) = self.trying.take() {
            let connection = self.config.name.clone();
            let release = async move { leases.release(&connection).await };
            ctx.spawn(WhenWoken::new(release).into_actor(self));
        }
        let Lifecycle::Connecting { waiters, revived } = &mut self.lifecycle else {
            // Parked, retired or stopped while connecting: the new session is unwanted.
            if let Ok(session) = result {
                session.cancel();
            }
            return;
        };
        let waiters: Vec<Waiter> = std::mem::take(waiters);
        let revived = *revived;

        match result {
            Ok(session) => {
                let lease = self.ready(session, events, revived, ctx);
                for waiter in waiters {
                    let _ = waiter.send(Ok(lease.clone()));
                }
            }
            Err(failure) => {
                self.transition(Lifecycle::Idle);
                for waiter in waiters {
                    let _ = waiter.send(Err(LeaseError::ConnectFailed(failure.clone())));
                }
            }
        }
    }

    /// Makes `session` the live one (a build or a probe brought it).
    fn ready(
        &mut self,
        session: Session,
        events: mpsc::UnboundedReceiver<SessionEvent>,
        revived: bool,
        ctx: &mut Context<Self>,
    ) -> Lease {
        self.generation += 1;
        if let Some(version) = session.protocol_version() {
            self.protocol = Some(version);
        }
        let lease = Lease {
            session: Arc::new(session),
            generation: self.generation,
        };
        self.transition(Lifecycle::Ready(lease.clone()));
        tracing::info!(connection = %self.config.name, revived, "ready");
        self.publish(ConnectionEvent::Ready {
            connection: self.config.name.clone(),
            revived,
        });
        self.forward_session_events(events, ctx);
        self.watch_for_end(&lease, ctx);
        lease
    }

    /// Upstream notifications reach the registry as events.
    fn forward_session_events(
        &self,
        mut events: mpsc::UnboundedReceiver<SessionEvent>,
        ctx: &mut Context<Self>,
    ) {
        let connection = self.config.name.clone();
        let Some(recipient) = self.deps.events.clone() else {
            return;
        };
        ctx.spawn(
            WhenWoken::new(async move {
                while let Some(event) = events.recv().await {
                    let connection = connection.clone();
                    recipient.do_send(match event {
                        SessionEvent::ListChanged(list) => {
                            ConnectionEvent::ListChanged { connection, list }
                        }
                        SessionEvent::ResourceUpdated { uri } => {
                            ConnectionEvent::ResourceUpdated { connection, uri }
                        }
                        SessionEvent::Log { message, reached } => ConnectionEvent::Log {
                            connection,
                            message,
                            reached,
                        },
                    });
                }
            })
            .into_actor(self),
        );
    }

    /// Notices when the session's stream ends for good (child exited, stream
    /// closed) without anyone asking.
    fn watch_for_end(&self, lease: &Lease, ctx: &mut Context<Self>) {
        let ended = lease.session.ended();
        let generation = lease.generation;
        ctx.spawn(
            WhenWoken::new(async move { ended.cancelled().await })
                .into_actor(self)
                .map(move |(), actor, ctx| actor.session_ended(generation, ctx)),
        );
    }

    /// The session of `generation` ended. With calls in flight, they will
    /// report the failure themselves; an idle death parks the connection like
    /// an exhausted operation (docs/SUPERVISION.md, "Park, retire, revive"),
    /// with no eager reconnect.
    fn session_ended(&mut self, generation: u64, ctx: &mut Context<Self>) {
        let current =
            matches!(&self.lifecycle, Lifecycle::Ready(lease) if lease.generation == generation);
        if !current {
            return; // we disposed it ourselves, or it was already replaced
        }
        self.transition(Lifecycle::Idle);
        if self.admission.in_flight() > 0 {
            return;
        }
        let failure = Failure::transport("the session ended while idle");
        tracing::warn!(connection = %self.config.name, "session ended while idle");
        self.park_outside_requests(failure, ctx);
    }

    /// A failure no request met (an idle session's death, contracts that
    /// keep changing): the policy decides as for an exhausted operation.
    pub(crate) fn park_outside_requests(&mut self, failure: Failure, ctx: &mut Context<Self>) {
        self.history.lock().last_failure = Some((failure.clone(), SystemTime::now()));
        let report = crate::policy::ReportIdleDeath {
            connection: self.config.name.clone(),
            failure: failure.clone(),
            parks: self.strikes.count(),
        };
        ctx.spawn(self.deps.policy.send(report).into_actor(self).map(
            move |decision, actor, ctx| {
                if let Ok(decision) = decision {
                    actor.apply(&decision, &failure, 0, ctx);
                }
            },
        ));
    }

    /// Disposes the session an attempt used, if it is still the current one.
    fn dispose(&mut self, generation: Option<u64>) {
        if let (Lifecycle::Ready(lease), Some(generation)) = (&self.lifecycle, generation)
            && lease.generation == generation
        {
            tracing::debug!(connection = %self.config.name, "disposing the failed session");
            self.transition(Lifecycle::Idle);
        }
    }

    /// Applies the policy's decision to the lifecycle (park, retire).
    fn apply(
        &mut self,
        decision: &Decision,
        failure: &Failure,
        attempt: u32,
        ctx: &mut Context<Self>,
    ) {
        if matches!(
            self.lifecycle,
            Lifecycle::Retired { .. } | Lifecycle::Stopped
        ) {
            return; // final until a reset: nothing a late report says changes it
        }
        match decision {
            Decision::Park { cooldown, counts } => {
                if matches!(self.lifecycle, Lifecycle::Parked { .. }) {
                    return; // a standing park: already announced
                }
                if *counts {
                    self.strikes.add();
                }
                let until = crate::Deadline::after(*cooldown);
                tracing::warn!(
                    connection = %self.config.name,
                    kind = %failure.kind,
                    status = failure.status,
                    attempt,
                    delay_secs = cooldown.as_secs_f64(),
                    reason = %failure.reason,
                    "parked"
                );
                self.transition(Lifecycle::Parked {
                    until,
                    failure: failure.clone(),
                });
                self.history.lock().parks += 1;
                self.publish(ConnectionEvent::Parked {
                    connection: self.config.name.clone(),
                    failure: failure.clone(),
                    cooldown: *cooldown,
                    until,
                    attempt,
                    strikes: self.strikes.count(),
                });
                self.plan_probe(ctx);
            }
            // The upstream said when to come back: nobody sends before then.
            Decision::Retry { after }
                if failure.kind == crate::FailureKind::RateLimit
                    && failure.retry_after.is_some() =>
            {
                if self.hold_until(crate::Deadline::after(*after), failure) {
                    tracing::info!(
                        connection = %self.config.name,
                        delay_secs = after.as_secs_f64(),
                        "held: the upstream asked to wait (Retry-After)"
                    );
                }
            }
            Decision::Retire => self.retire(
                crate::RetireReason::Failure(failure.kind),
                Some(failure),
                attempt,
            ),
            Decision::Retry { .. } | Decision::Reject | Decision::GiveUp => {}
        }
    }

    /// Retires the connection for `reason` (a retirement already in place
    /// stays: it is final until a reset, and its reason may be the one a
    /// person must act on).
    fn retire(&mut self, reason: crate::RetireReason, failure: Option<&Failure>, attempt: u32) {
        if matches!(
            self.lifecycle,
            Lifecycle::Retired { .. } | Lifecycle::Stopped
        ) {
            return;
        }
        match failure {
            Some(failure) => tracing::warn!(
                connection = %self.config.name,
                kind = %failure.kind,
                status = failure.status,
                attempt,
                reason = %failure.reason,
                "retired"
            ),
            None => tracing::warn!(connection = %self.config.name, %reason, "retired"),
        }
        self.transition(Lifecycle::Retired {
            failure: failure.cloned(),
            reason,
        });
        self.publish(ConnectionEvent::Retired {
            connection: self.config.name.clone(),
            reason,
            failure: failure.cloned(),
        });
    }

    fn snapshot(&self) -> ConnectionSnapshot {
        let (parked_until, retired_reason) = match &self.lifecycle {
            Lifecycle::Parked { until, .. } => (Some(until.wall()), None),
            Lifecycle::Retired { reason, .. } => (None, Some(*reason)),
            _ => (None, None),
        };
        ConnectionSnapshot {
            name: self.config.name.clone(),
            transport: self.config.transport.kind(),
            state: self.lifecycle.state(),
            since: self.since,
            parked_until,
            held_until: self
                .hold
                .as_ref()
                .filter(|(until, _)| until.pending())
                .map(|(until, _)| until.wall()),
            retired_reason,
            in_flight: self.admission.in_flight(),
            queued: self.admission.queued(),
            peak_in_flight: self.admission.peak(),
            protocol: self.protocol.as_ref().map(ToString::to_string),
        }
    }
}

impl Actor for ConnectionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // A park handed over by a crashed predecessor is probed as any other.
        self.plan_probe(ctx);
        // Sessions with callers' credentials idle for their timeout are
        // closed, whether or not calls come.
        if let Some(on_behalf) = &self.on_behalf {
            let every = on_behalf.sweep_interval();
            ctx.run_interval(every, |actor, _| {
                if let Some(on_behalf) = &actor.on_behalf {
                    on_behalf.sweep();
                }
            });
        }
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        if let Some(on_behalf) = &self.on_behalf {
            on_behalf.close_all();
        }
        // Whatever the reason (stop, or the registry dropping us), the session
        // must not outlive the actor that owns it. A park or retirement is
        // kept for the death notice.
        if !matches!(self.lifecycle, Lifecycle::Stopped) {
            self.handover = self.lifecycle.standing();
            self.transition(Lifecycle::Stopped);
        }
    }
}

/// The death notice: however the actor ends (stopped, or dropped by a panic
/// in a handler), the registry hears of it at once, with the park or
/// retirement to hand to a successor. A stop the registry asked for is
/// ignored there.
impl Drop for ConnectionActor {
    fn drop(&mut self) {
        self.bypass.close();
        if let Lifecycle::Ready(lease) = &self.lifecycle {
            lease.session.cancel();
        }
        if let Some(deaths) = &self.deps.deaths {
            deaths.do_send(ConnectionDied {
                connection: self.config.name.clone(),
                incarnation: self.incarnation,
                handover: Handover {
                    standing: self.handover.take().or_else(|| self.lifecycle.standing()),
                    strikes: self.strikes.count(),
                },
            });
        }
    }
}

/// Builds a session for `config`'s transport, bounded by `connect_timeout`.
async fn open_session(
    config: Arc<ConnectionConfig>,
    http: HttpClients,
    recorder: HttpRecorder,
    handler: SessionHandler,
    sharing: Option<crate::oauth::Sharing>,
) -> Result<Session, Failure> {
    let deadline = Instant::now() + config.connect_timeout;
    let session = match &config.transport {
        Transport::Http(http_transport) => {
            open_http_sharing(http_transport, http, recorder, handler, deadline, sharing).await
        }
        Transport::Stdio(stdio) => {
            crate::session::open_stdio(&config.name, stdio, handler, deadline).await
        }
    }?;
    session.disable_response_cache().await;
    session.start_listening().await;
    Ok(session)
}

/// Used by `ResponseActFuture` handlers below.
type Reply<T> = ResponseActFuture<ConnectionActor, T>;
