//! Messages a connection actor answers, public and internal.

use std::{
    sync::atomic::Ordering,
    time::{Duration, SystemTime},
};

use actix::{
    ActorFutureExt, AsyncContext, Context, Handler, Message, MessageResult, ResponseFuture,
    WrapFuture,
};
use tokio::time::Instant;

use super::{
    ConnectionActor, Lease, LeaseError, Reply,
    lifecycle::{LeaseAttempt, Lifecycle},
    operation::{self, CallContext, Ended, Operation, Parts, Request, SlotGuard},
    reports::{Acquire, AttemptFailed, AttemptSucceeded},
    stats::{CallDone, CallRecord, FailureRecord},
};
use crate::{
    CallOutcome, Forwarded, Unavailable,
    call::UpstreamRequest,
    outcome::{OutcomeKind, messages as text},
    policy::{Decision, ReportFailure},
    session::Surface,
};

/// Send one request upstream as it is (the gateway's proxying): admitted,
/// deadline-bound, classified and retried like a call. Always answered.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Forwarded")]
pub(crate) struct Forward {
    pub request: UpstreamRequest,
    pub context: CallContext,
    /// Pass the upstream's JSON-RPC errors on as they are (otherwise they
    /// become the supervisor's `Rejected` texts, as for tools).
    pub pass_errors: bool,
}

/// List what the upstream offers (every list, all pages), as a
/// connect-phase operation.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Surface, Unavailable>")]
pub struct ListTools {
    pub timeout: Duration,
}

/// Read the connection's status.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "ConnectionSnapshot")]
pub struct Snapshot;

/// Stop: refuse new work, answer everyone waiting, close the session, stop the actor.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct Stop;

/// One connection's state, as `/status` shows it (never a URL, token or argument).
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionSnapshot {
    pub name: String,
    pub transport: &'static str,
    pub state: crate::ConnectionState,
    pub since: SystemTime,
    pub parked_until: Option<SystemTime>,
    /// The end of a `Retry-After` window every request waits out.
    pub held_until: Option<SystemTime>,
    pub retired_reason: Option<crate::RetireReason>,
    pub in_flight: usize,
    pub queued: usize,
    /// The most calls ever in flight at once.
    pub peak_in_flight: usize,
    /// The protocol version the server agreed to (or the pinned one, before
    /// it did); `None` before the first session when not pinned.
    pub protocol: Option<String>,
}

/// A connection actor has ended (see the `Drop` of [`ConnectionActor`]).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ConnectionDied {
    pub connection: String,
    /// Which of the connection's actors it was.
    pub incarnation: u64,
    /// What the actor that replaces it starts from.
    pub handover: super::Handover,
}

impl ConnectionActor {
    /// The decision that stands while parked or retired (stopped: give up).
    fn standing_decision(&self) -> Option<Decision> {
        match &self.lifecycle {
            Lifecycle::Parked { until, .. } if until.pending() => Some(Decision::Park {
                cooldown: until.remaining(),
                counts: false,
            }),
            Lifecycle::Retired { .. } => Some(Decision::Retire),
            Lifecycle::Stopped => Some(Decision::GiveUp),
            _ => None,
        }
    }

    /// Parked (cooldown running), retired or stopped: refuse without I/O.
    fn refuses_now(&self) -> Option<Unavailable> {
        match &self.lifecycle {
            Lifecycle::Parked { until, .. } if until.pending() => Some(self.refusal()),
            Lifecycle::Retired { .. } | Lifecycle::Stopped => Some(self.refusal()),
            _ => None,
        }
    }

    /// What its operations are made with (`Parts`).
    pub(super) fn parts(&self) -> Parts {
        Parts {
            connection: self.peer.connection().clone(),
            stop: self.stop.clone(),
            peer: self.peer.clone(),
            striking: self.strikes.shown(),
            on_behalf: self.on_behalf.clone(),
        }
    }

    /// What a refused request's span says of the connection's state.
    fn refusing_state(&self) -> &'static str {
        match &self.lifecycle {
            Lifecycle::Parked { .. } => "parked",
            Lifecycle::Retired { .. } => "retired",
            Lifecycle::Stopped => "stopped",
            _ => "busy",
        }
    }
}

impl Handler<Forward> for ConnectionActor {
    type Result = ResponseFuture<Forwarded>;

    fn handle(&mut self, msg: Forward, ctx: &mut Context<Self>) -> Self::Result {
        let pass_errors = msg.pass_errors;
        let admitted = self.admit(ctx, msg.request, msg.context);
        let run = match admitted {
            Admitted::Answer(outcome) => {
                return Box::pin(std::future::ready(Forwarded::Refused(outcome)));
            }
            Admitted::Run(run) => run,
        };
        crate::boxed::in_place(move || run.forwarded(pass_errors))
    }
}

/// What a request is called in the supervisor's texts: the tool for a call,
/// otherwise the method.
fn label_of(request: &UpstreamRequest) -> String {
    request.tool().unwrap_or(request.method()).to_owned()
}

/// A request past the mailbox: answered at once, or to run.
// Built and matched once per request; boxing `Run` would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Admitted {
    Answer(CallOutcome),
    Run(Run),
}

/// An admitted request: its operation, its first lease attempt, and its
/// queue slot if it must wait for one.
pub(crate) struct Run {
    op: Operation,
    first: Option<LeaseAttempt>,
    queued: Option<tokio::sync::oneshot::Receiver<()>>,
    /// What the request is called in texts: the tool, or the method.
    label: String,
    /// `tools/call`s are counted in the call statistics.
    is_call: bool,
    /// The connection's slots and history, which its end frees and counts.
    slots: (super::admission::Admission, super::stats::SharedHistory),
}

impl Run {
    /// `request`'s run under `context`, made with `parts` and reporting to
    /// `actor`, holding (or queued for) a slot of `slots`.
    pub(super) fn new(
        (parts, actor): (Parts, std::sync::Arc<actix::Addr<ConnectionActor>>),
        (request, context): (UpstreamRequest, CallContext),
        (first, queued): (
            Option<LeaseAttempt>,
            Option<tokio::sync::oneshot::Receiver<()>>,
        ),
        slots: (super::admission::Admission, super::stats::SharedHistory),
    ) -> Run {
        let is_call = request.call().is_some();
        let label = label_of(&request);
        Run {
            op: parts.operation(actor, Request::Send(request), context),
            first,
            queued,
            label,
            is_call,
            slots,
        }
    }

    /// Runs it to the answer the gateway forwards: the upstream's JSON-RPC
    /// errors passed on as they are with `pass_errors`.
    pub(crate) async fn forwarded(self, pass_errors: bool) -> Forwarded {
        self.finish(move |op, ended, label| {
            let forwarded =
                operation::forwarded(&op.connection, label, op.context.budget, ended, pass_errors);
            let kept = op.context.link.as_ref();
            if kept.is_some_and(|link| link.downstream.takes_kept_answers()) {
                forwarded
            } else {
                forwarded.into_rmcp()
            }
        })
        .await
    }

    /// Waits for a slot if queued, runs the operation, and turns how it ended
    /// into the answer with `outcome`. The slot is freed however it ends.
    async fn finish<T>(self, outcome: impl FnOnce(&Operation, Ended, &str) -> T) -> T
    where
        T: From<CallOutcome> + Counted,
    {
        let Run {
            op,
            first,
            queued,
            label,
            is_call,
            slots: (admission, history),
        } = self;
        let mut waited = Duration::ZERO;
        if let Some(slot) = queued {
            // Waiting for a slot spends the request's own budget.
            let waiting = Instant::now();
            let got = tokio::time::timeout_at(op.context.deadline, slot).await;
            waited = waiting.elapsed();
            op.context.trace.queued(waited);
            if !matches!(got, Ok(Ok(()))) {
                let queued_out = CallOutcome::Busy {
                    message: text::busy(&op.connection, 0),
                };
                history.ended(is_call.then(|| CallDone {
                    kind: queued_out.kind(),
                    elapsed: op.context.budget,
                    tool: label,
                    attempts: 0,
                    queued: waited,
                    caller: op.context.caller(),
                }));
                return queued_out.into();
            }
        }
        let caller = op.context.caller();
        let mut slot = SlotGuard::new((admission, history), (label, caller), is_call, waited);
        let mut op = op;
        let ended = op.run_rounds(first).await;
        let answer = outcome(&op, ended, slot.label());
        slot.finish(answer.kind(), op.attempts_made.load(Ordering::Relaxed));
        answer
    }
}

/// An answer whose kind is counted in `/status` and the metrics.
pub(super) trait Counted {
    fn kind(&self) -> OutcomeKind;
}

impl Counted for CallOutcome {
    fn kind(&self) -> OutcomeKind {
        CallOutcome::kind(self)
    }
}

impl Counted for Forwarded {
    fn kind(&self) -> OutcomeKind {
        match self {
            Forwarded::Answered(result) => match &**result {
                rmcp::model::ServerResult::CallToolResult(result) => {
                    CallOutcome::result_kind(result)
                }
                _ => OutcomeKind::Ok,
            },
            Forwarded::Tool(answer) => CallOutcome::result_kind(answer.parts().0),
            Forwarded::Error(_) => OutcomeKind::Rejected,
            Forwarded::Refused(outcome) => outcome.kind(),
        }
    }
}

impl From<CallOutcome> for Forwarded {
    fn from(outcome: CallOutcome) -> Self {
        Forwarded::Refused(outcome)
    }
}

impl ConnectionActor {
    /// Admission in the mailbox: refused (parked, retired), busy, queued,
    /// or run now with a lease attempt.
    fn admit(
        &mut self,
        ctx: &mut Context<Self>,
        request: UpstreamRequest,
        context: CallContext,
    ) -> Admitted {
        let is_call = request.call().is_some();
        let trace = &context.trace;
        // In flight, queued or refused: it shows either way.
        self.history.moved();
        if let Some(refusal) = self.refuses_now() {
            if is_call {
                self.refused_call(&request, OutcomeKind::Unavailable, &context);
            }
            let outcome = refusal.into();
            trace.refused(
                self.refusing_state(),
                self.standing_decision().as_ref(),
                &outcome,
            );
            return Admitted::Answer(outcome);
        }
        let (first, queued) = match self.admission.admit() {
            super::admission::Admit::Busy { queued } => {
                if is_call {
                    self.refused_call(&request, OutcomeKind::Busy, &context);
                }
                let message = text::busy(self.name(), queued);
                let outcome = CallOutcome::Busy { message };
                trace.refused(self.refusing_state(), None, &outcome);
                return Admitted::Answer(outcome);
            }
            super::admission::Admit::Now => (Some(self.lease(ctx)), None),
            super::admission::Admit::Queued(slot) => (None, Some(slot)),
        };
        Admitted::Run(Run::new(
            (self.parts(), std::sync::Arc::new(ctx.address())),
            (request, context),
            (first, queued),
            (self.admission.clone(), self.history.clone()),
        ))
    }

    /// Counts and records a call answered before any attempt.
    fn refused_call(&self, request: &UpstreamRequest, kind: OutcomeKind, context: &CallContext) {
        self.history.lock().calls.count(kind);
        let record = CallRecord {
            at: SystemTime::now(),
            tool: label_of(request).into(),
            kind,
            attempts: 0,
            latency: Duration::ZERO,
            queued: Duration::ZERO,
            caller: context.caller(),
        };
        self.history
            .recent()
            .called(record, std::time::Instant::now());
    }
}

impl Handler<ListTools> for ConnectionActor {
    type Result = ResponseFuture<Result<Surface, Unavailable>>;

    fn handle(&mut self, msg: ListTools, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(refusal) = self.refuses_now() {
            return Box::pin(std::future::ready(Err(refusal)));
        }
        let first = Some(self.lease(ctx));
        let op = self.parts().operation(
            std::sync::Arc::new(ctx.address()),
            Request::List,
            CallContext::listing(msg.timeout),
        );
        Box::pin(async move {
            let ended = op.run(first).await;
            operation::list_outcome(&op.connection, ended)
        })
    }
}

impl Handler<Snapshot> for ConnectionActor {
    type Result = MessageResult<Snapshot>;

    fn handle(&mut self, _: Snapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

impl Handler<Stop> for ConnectionActor {
    type Result = Reply<()>;

    /// Refuses new work, answers everyone waiting, closes the session
    /// gracefully within the shutdown bound (a stdio child's group is gone
    /// when this answers), then stops the actor.
    fn handle(&mut self, _: Stop, _: &mut Context<Self>) -> Self::Result {
        tracing::info!(connection = %self.config.name, "stopping");
        self.stop.cancel();
        self.admission.clear_queue();
        let session = match &self.lifecycle {
            Lifecycle::Ready(lease) => Some(lease.session.clone()),
            _ => None,
        };
        self.transition(Lifecycle::Stopped);
        self.publish(crate::events::ConnectionEvent::Stopped {
            connection: self.config.name.clone(),
        });
        // Leave a margin inside the registry's own bound for the answer.
        let grace = self
            .deps
            .shutdown_timeout
            .saturating_sub(Duration::from_millis(250));
        Box::pin(
            async move {
                if let Some(session) = session {
                    session.wait_closed(grace).await;
                }
            }
            .into_actor(self)
            .map(|(), _, ctx| {
                use actix::ActorContext;
                ctx.stop();
            }),
        )
    }
}

// ---- internal messages, sent by operation futures --------------------------

impl Handler<Acquire> for ConnectionActor {
    type Result = ResponseFuture<Result<Lease, LeaseError>>;

    fn handle(&mut self, _: Acquire, ctx: &mut Context<Self>) -> Self::Result {
        let attempt = self.lease(ctx);
        let stopped = self.refusal();
        Box::pin(async move { attempt.resolve(move || stopped).await })
    }
}

impl Handler<AttemptFailed> for ConnectionActor {
    type Result = Reply<Decision>;

    fn handle(&mut self, msg: AttemptFailed, _: &mut Context<Self>) -> Self::Result {
        self.history.lock().failed(&msg.failure);
        self.history.moved();
        tracing::debug!(
            connection = %self.config.name,
            kind = %msg.failure.kind,
            status = msg.failure.status,
            phase = msg.phase.as_str(),
            attempt = msg.attempt,
            reason = %msg.failure.reason,
            "attempt failed"
        );
        // Dispose BEFORE any wait: a broken session is never used again, and the
        // next attempt rebuilds it lazily.
        if operation::breaks_session(&msg.failure, msg.phase) {
            self.dispose(msg.generation);
        }
        // Already parked or retired (a call in flight when it happened): the
        // standing answer, no new strike.
        if let Some(standing) = self.standing_decision() {
            self.history.recent().failed(FailureRecord::new(
                &msg.failure,
                msg.phase,
                msg.attempt,
                standing.clone(),
                true,
            ));
            return Box::pin(actix::fut::ready(standing));
        }
        let report = ReportFailure {
            connection: self.config.name.clone(),
            failure: msg.failure.clone(),
            phase: msg.phase,
            attempt: msg.attempt,
            max_attempts: self.config.max_attempts,
            call_retry_allowed: msg.call_retry_allowed,
            remaining: msg.remaining,
            parks: self.strikes.count(),
        };
        let asked = self.deps.policy.send(report);
        Box::pin(asked.into_actor(self).map(move |answer, actor, ctx| {
            // A policy that cannot answer (shutting down) ends the operation.
            let decision = answer.unwrap_or(Decision::GiveUp);
            actor.history.recent().failed(FailureRecord::new(
                &msg.failure,
                msg.phase,
                msg.attempt,
                decision.clone(),
                false,
            ));
            actor.apply(&decision, &msg.failure, msg.attempt, ctx);
            if matches!(decision, Decision::Retry { .. }) {
                tracing::info!(
                    connection = %actor.config.name,
                    kind = %msg.failure.kind,
                    status = msg.failure.status,
                    attempt = msg.attempt,
                    "retrying"
                );
            }
            decision
        }))
    }
}

impl Handler<AttemptSucceeded> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, _: AttemptSucceeded, _: &mut Context<Self>) {
        self.strikes.forgive();
    }
}

/// Retire the connection for `reason` (the registry's crash loop): a
/// retirement goes through its one owner, the connection actor.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub(crate) struct Retire {
    pub(crate) reason: crate::RetireReason,
}

impl Handler<Retire> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, msg: Retire, _: &mut Context<Self>) {
        self.retire(msg.reason, None, 0);
    }
}

/// The upstream's contracts kept changing (docs/CONTRACTS.md): the
/// registry saw it in the listings; the policy parks the connection.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub(crate) struct ContractsChurned(pub(crate) crate::Failure);

impl Handler<ContractsChurned> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, ContractsChurned(failure): ContractsChurned, ctx: &mut Context<Self>) {
        self.history.lock().failed(&failure);
        self.history.moved();
        self.park_outside_requests(failure, ctx);
    }
}

/// Take on what another node of the fleet learned (docs/FLEET.md).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub(crate) struct Adopt(pub(crate) crate::fleet::Shared);

impl Handler<Adopt> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, Adopt(shared): Adopt, ctx: &mut Context<Self>) {
        self.adopt(shared, ctx);
    }
}

/// Makes the actor panic, to test supervision. Test builds only.
#[cfg(feature = "fault-injection")]
#[doc(hidden)]
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct InjectPanic;

#[cfg(feature = "fault-injection")]
impl Handler<InjectPanic> for ConnectionActor {
    type Result = ();

    fn handle(&mut self, _: InjectPanic, _: &mut Context<Self>) {
        panic!("injected panic in connection '{}'", self.config.name);
    }
}
