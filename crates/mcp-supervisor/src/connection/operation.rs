//! One operation (a request sent upstream, or a listing of what the upstream
//! offers) and its attempts, run outside the
//! actor so the mailbox stays free. Each attempt: get a session (or join the
//! rebuild in progress), do the request by the deadline, and on failure let
//! the actor dispose, consult the policy and tell us what next.

use std::{
    borrow::Cow,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::Duration,
};

use actix::Addr;
#[allow(deprecated)] // roots: deprecated by SEP-2577, still what servers ask for
use rmcp::model::ListRootsResult;
use rmcp::model::{
    ElicitResult, ElicitationAction, ErrorCode, ErrorData, InputRequest, InputRequiredResult,
    InputResponses, ProtocolVersion, ServerResult,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    ConnectionActor,
    admission::Admission,
    lifecycle::{Lease, LeaseAttempt, LeaseError},
    on_behalf::{CallerFailure, NoSession, OnBehalfSessions},
    reports::{Acquire, AttemptFailed, AttemptSucceeded},
    stats::{CallDone, SharedHistory},
};
use crate::{
    CallOutcome, Unavailable,
    call::UpstreamRequest,
    failure::Phase,
    failure::{Failure, FailureKind},
    outcome::{Forwarded, OutcomeKind, messages as text},
    policy::Decision,
    session::{DownstreamLink, SendError, Session, Surface},
    telemetry::{
        TraceParent,
        spans::{Attempt, ClientSpan, UpstreamPeer},
    },
    tool_answer::Answer,
};

/// May this call be repeated after it may have reached the server?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRetry {
    /// Yes: the tool is `readOnlyHint`/`idempotentHint`, or `retry_calls = "always"`.
    Safe,
    /// Only when it provably did not run (`Failure::not_run`: could not
    /// connect, 401, 403, 429, a JSON-RPC error answer).
    OnlyIfNotRun,
    /// Never (`retry_calls = "never"`).
    Never,
}

/// What a request is sent under, from the registry to its last attempt:
/// one place for each fact about the call that is not the request itself.
/// (The caller's identity joins it here.)
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    /// When it must be answered, however long queueing, connecting and
    /// retries take (the caller's whole budget, counted from when it asked).
    pub(crate) deadline: Instant,
    /// That budget, for the agent-facing texts.
    pub(crate) budget: Duration,
    pub(crate) retry: CallRetry,
    /// Where the upstream's progress and server-to-client requests for it
    /// go (the gateway's).
    pub(crate) link: Option<DownstreamLink>,
    /// The span its attempts' spans hang under.
    pub(crate) trace: TraceParent,
}

impl CallContext {
    /// Who the call is for, as its records name them (the caller is the
    /// link's: the downstream client's, as the gateway identified it).
    pub(crate) fn caller(&self) -> Option<Arc<str>> {
        let caller = self.link.as_ref()?.caller.as_ref()?;
        caller.principal().map(Into::into)
    }
}

impl CallContext {
    /// A connect-phase operation's (a listing): retry-safe, nobody behind
    /// it, not traced.
    pub(crate) fn listing(budget: Duration) -> Self {
        CallContext {
            deadline: Instant::now() + budget,
            budget,
            retry: CallRetry::Safe,
            link: None,
            trace: TraceParent::none(),
        }
    }
}

/// What an operation does.
#[derive(Debug, Clone)]
pub(crate) enum Request {
    /// Send a request upstream as it is (a `tools/call`, a `resources/read`,
    /// …); kept for another attempt or input round.
    Send(UpstreamRequest),
    /// List what the upstream offers (connect phase).
    List,
}

impl Request {
    fn phase(&self) -> Phase {
        match self {
            Request::Send(_) => Phase::Call,
            // Listing describes the connection, like initialize (docs/DECISIONS.md).
            Request::List => Phase::Connect,
        }
    }
}

/// What an operation produced.
#[derive(Debug)]
pub(crate) enum Response {
    Sent(Answer),
    Listed(Surface),
}

/// How an operation ended.
#[derive(Debug)]
pub(crate) enum Ended {
    Replied(Response),
    /// Permission or protocol failure of this request; the session is kept.
    /// `upstream` is the upstream's own JSON-RPC error, when it sent one.
    Rejected {
        failure: Failure,
        upstream: Option<ErrorData>,
    },
    /// The downstream client cancelled the request.
    Cancelled,
    /// The connection refuses work (parked, retired, stopped).
    Refused(Unavailable),
    /// Stopped without parking: not safe to repeat, or out of time.
    GaveUp {
        failure: Failure,
        phase: Phase,
    },
    /// Attempts ran out: the connection is now parked or retired.
    Exhausted {
        failure: Failure,
        phase: Phase,
        decision: Decision,
    },
}

/// What every operation of a connection is made with besides its request:
/// the same for each, whether the actor admits it or its bypass does.
#[derive(Debug, Clone)]
pub(crate) struct Parts {
    /// The connection's name (shared: every operation holds it).
    pub(crate) connection: Arc<str>,
    pub(crate) stop: CancellationToken,
    pub(crate) peer: Arc<UpstreamPeer>,
    pub(crate) striking: Arc<AtomicBool>,
    pub(crate) on_behalf: Option<Arc<OnBehalfSessions>>,
}

impl Parts {
    /// The operation of `request` under `context`, reporting to `actor`.
    pub(crate) fn operation(
        self,
        actor: Arc<Addr<ConnectionActor>>,
        request: Request,
        context: CallContext,
    ) -> Operation {
        Operation {
            actor,
            connection: self.connection,
            request,
            context,
            stop: self.stop,
            peer: self.peer,
            attempts_made: AtomicU32::new(0),
            striking: self.striking,
            on_behalf: self.on_behalf,
        }
    }
}

/// Everything an operation needs; owns no actor state.
#[derive(Debug)]
pub(crate) struct Operation {
    pub(crate) actor: Arc<Addr<ConnectionActor>>,
    pub(crate) connection: Arc<str>,
    pub(crate) request: Request,
    pub(crate) context: CallContext,
    /// Cancelled when the connection stops: every operation answers at once.
    pub(crate) stop: CancellationToken,
    /// Where the upstream is, for those spans.
    pub(crate) peer: Arc<UpstreamPeer>,
    /// Attempts that got a session, over every input round (for the
    /// dashboard's recent calls).
    pub(crate) attempts_made: AtomicU32,
    /// Whether the connection has strikes ([`super::lifecycle::Strikes`]):
    /// a success tells the actor only when it has some to forget.
    pub(crate) striking: Arc<AtomicBool>,
    /// The sessions with callers' credentials, for a connection that acts
    /// on its callers' behalf.
    pub(crate) on_behalf: Option<Arc<OnBehalfSessions>>,
}

impl Operation {
    /// Runs the attempts. `first` is the lease attempt made while admitting
    /// (saves a mailbox round trip on the fast path).
    pub(crate) async fn run(&self, first: Option<LeaseAttempt>) -> Ended {
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Ended::Refused(self.stopped()),
            ended = self.attempts(first) => ended,
        }
    }

    /// Runs the request. One with nobody behind it (the library's
    /// `CallTool`: no downstream link) answers the upstream's `input_required`
    /// rounds itself, as a client without a user would: an elicitation is
    /// declined, there are no roots, and the request is retried with the
    /// upstream's `requestState` (the same logical call, in the same slot and
    /// deadline). Sampling cannot be answered without a client: that round
    /// ends the call.
    pub(crate) async fn run_rounds(&mut self, first: Option<LeaseAttempt>) -> Ended {
        let mut ended = self.run(first).await;
        for _ in 0..MAX_INPUT_ROUNDS {
            let Ended::Replied(Response::Sent(Answer::Result(result))) = &ended else {
                return ended;
            };
            let ServerResult::InputRequiredResult(asked) = &**result else {
                return ended;
            };
            if self.context.link.is_some() {
                return ended;
            }
            let Some(responses) = unattended_answers(asked) else {
                return ended;
            };
            let state = asked.request_state.clone();
            let Request::Send(request) = &mut self.request else {
                return ended;
            };
            if !request.set_inputs(responses, state) {
                return ended;
            }
            ended = self.run(None).await;
        }
        ended
    }

    async fn attempts(&self, mut first: Option<LeaseAttempt>) -> Ended {
        let phase = self.request.phase();
        let retry = self.context.retry;
        for attempt in 1u32.. {
            let mut held = Duration::ZERO;
            let lease = loop {
                let lease = match first.take() {
                    Some(attempt) => self.by_deadline(attempt.resolve(|| self.stopped())).await,
                    None => self.acquire().await,
                };
                // A `Retry-After` window: wait it out if the budget allows
                // (not an attempt: nothing was sent), else answer at once.
                match lease {
                    Err(LeaseError::Held { until, .. })
                        if Instant::now() + until.remaining() < self.context.deadline =>
                    {
                        held += until.remaining();
                        tokio::time::sleep(until.remaining()).await;
                    }
                    lease => break lease,
                }
            };
            let report_of: Failed = match lease {
                Err(
                    LeaseError::Refused(unavailable)
                    | LeaseError::Held {
                        refusal: unavailable,
                        ..
                    },
                ) => {
                    return Ended::Refused(unavailable);
                }
                Err(LeaseError::ConnectFailed(failure)) => {
                    (failure, None, Phase::Connect, None, None)
                }
                // Every attempt may run to the operation's deadline: one that
                // is still running has not failed, so a retry only follows a
                // failure (docs/DECISIONS.md #11).
                Ok(lease) => {
                    // The connection's own session is borrowed, not cloned:
                    // the common case costs nothing here.
                    let session = match self.callers_session(&lease).await {
                        Ok(None) => Cow::Borrowed(&lease.session),
                        Ok(Some(session)) => Cow::Owned(session),
                        Err(NoSession::Refused(unavailable)) => {
                            return Ended::Refused(unavailable);
                        }
                        // Not the connection's own session: it is not disposed.
                        Err(NoSession::Failed(failure)) => {
                            let report = (failure, None, phase, None, None);
                            match self.after_failure(report, attempt, retry).await {
                                Some(ended) => return ended,
                                None => continue,
                            }
                        }
                    };
                    self.attempts_made.fetch_add(1, Ordering::Relaxed);
                    let span = self.span(attempt, &session, held);
                    match self.perform(&session, span.as_ref()).await {
                        Ok(response) => {
                            if self.striking.load(Ordering::Relaxed) {
                                self.actor.do_send(AttemptSucceeded);
                            }
                            if let (Some(span), Response::Sent(result)) = (span, &response) {
                                span.answered(result);
                            }
                            return Ended::Replied(response);
                        }
                        Err(SendError::Cancelled) => {
                            if let Some(span) = span {
                                span.cancelled();
                            }
                            return Ended::Cancelled;
                        }
                        // The upstream answered this request with a
                        // JSON-RPC error and no HTTP error status, or
                        // refused it for its size: that is the request's
                        // answer, passed on, and says nothing against the
                        // connection, which answered. Nothing of its
                        // standing moves (no strike, no failure on record):
                        // what a client asks cannot change it
                        // (docs/RELIABILITY.md). Any other HTTP 4xx or 5xx
                        // is still the policy's.
                        Err(SendError::Failed { failure, upstream })
                            if phase == Phase::Call
                                && of_the_request(&failure, upstream.as_ref()) =>
                        {
                            if let Some(span) = span {
                                span.failed(&failure, upstream.as_ref(), Some(&Decision::Reject));
                            }
                            return Ended::Rejected { failure, upstream };
                        }
                        Err(SendError::Failed { failure, upstream }) => {
                            match self.caller_failed(&lease, &session, &failure, phase).await {
                                None => (failure, upstream, phase, Some(lease.generation), span),
                                // The upstream's, on a caller's session: the
                                // connection's own is not disposed.
                                Some(CallerFailure::Connection) => {
                                    (failure, upstream, phase, None, span)
                                }
                                Some(CallerFailure::Refused(refused)) => {
                                    if let Some(span) = span {
                                        span.failed(&failure, upstream.as_ref(), None);
                                    }
                                    return Ended::Refused(refused);
                                }
                                Some(CallerFailure::Rejected) => {
                                    if let Some(span) = span {
                                        span.failed(
                                            &failure,
                                            upstream.as_ref(),
                                            Some(&Decision::Reject),
                                        );
                                    }
                                    return Ended::Rejected { failure, upstream };
                                }
                            }
                        }
                    }
                }
            };
            if let Some(ended) = self.after_failure(report_of, attempt, retry).await {
                return ended;
            }
        }
        unreachable!("the attempt counter is unbounded; the policy ends the loop")
    }

    /// Reports a failed attempt to the actor and does what its policy
    /// decides: `None` to try again (after waiting, if asked), else how the
    /// operation ended.
    async fn after_failure(
        &self,
        (failure, upstream, failed_phase, generation, span): Failed,
        attempt: u32,
        retry: CallRetry,
    ) -> Option<Ended> {
        let report = AttemptFailed {
            failure: failure.clone(),
            phase: failed_phase,
            attempt,
            generation,
            remaining: self
                .context
                .deadline
                .saturating_duration_since(Instant::now()),
            call_retry_allowed: retry == CallRetry::Safe,
        };
        let Ok(decision) = self.actor.send(report).await else {
            if let Some(span) = span {
                span.failed(&failure, upstream.as_ref(), None);
            }
            return Some(Ended::Refused(self.stopped()));
        };
        if let Some(span) = span {
            span.failed(&failure, upstream.as_ref(), Some(&decision));
        }
        match decision {
            Decision::Retry { after }
                if !(failed_phase == Phase::Call && retry == CallRetry::Never) =>
            {
                tokio::time::sleep(after).await;
                None
            }
            Decision::Retry { .. } | Decision::GiveUp => Some(Ended::GaveUp {
                failure,
                phase: failed_phase,
            }),
            Decision::Reject => Some(Ended::Rejected { failure, upstream }),
            Decision::Park { .. } | Decision::Retire => Some(Ended::Exhausted {
                failure,
                phase: failed_phase,
                decision,
            }),
        }
    }

    /// The session a request goes over when it is not the lease's: for a
    /// connection acting on its callers' behalf, the one with its caller's
    /// credentials (a listing stays on the connection's own).
    async fn callers_session(&self, lease: &Lease) -> Result<Option<Arc<Session>>, NoSession> {
        match (&self.on_behalf, &self.request) {
            (Some(on_behalf), Request::Send(_)) => {
                let caller = self
                    .context
                    .link
                    .as_ref()
                    .and_then(|link| link.caller.as_deref());
                on_behalf
                    .session_for(caller, &lease.session, self.context.deadline)
                    .await
                    .map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Whose a failure on a caller's session is; `None` on the connection's
    /// own session.
    async fn caller_failed(
        &self,
        lease: &Lease,
        session: &Arc<Session>,
        failure: &Failure,
        phase: Phase,
    ) -> Option<CallerFailure> {
        let on_behalf = self.on_behalf.as_ref()?;
        if Arc::ptr_eq(session, &lease.session) {
            return None;
        }
        let caller = self
            .context
            .link
            .as_ref()
            .and_then(|link| link.caller.as_deref());
        Some(
            on_behalf
                .failed(caller, session, failure, breaks_session(failure, phase))
                .await,
        )
    }

    /// Asks the actor for a session, giving up at the deadline.
    async fn acquire(&self) -> Result<Lease, LeaseError> {
        let asked = async {
            match self.actor.send(Acquire).await {
                Ok(lease) => lease,
                Err(_mailbox_closed) => Err(LeaseError::Refused(self.stopped())),
            }
        };
        self.by_deadline(asked).await
    }

    /// A session (now, or a build to join), by the operation's deadline: a
    /// build that outlasts this caller's budget (`connect_timeout` may be
    /// longer) is not this caller's failure to report, and the caller gets
    /// its value in time.
    async fn by_deadline(
        &self,
        lease: impl std::future::Future<Output = Result<Lease, LeaseError>>,
    ) -> Result<Lease, LeaseError> {
        match tokio::time::timeout_at(self.context.deadline, lease).await {
            Ok(lease) => lease,
            Err(_) => Err(LeaseError::Refused(Unavailable {
                message: text::not_ready_in_time(&self.connection, self.context.budget),
                failure: Failure::timeout("session not ready in time"),
                retry_in: None,
            })),
        }
    }

    /// The CLIENT span of attempt `number` of a request (a listing has none).
    fn span(&self, number: u32, session: &Session, held: Duration) -> Option<ClientSpan> {
        let Request::Send(request) = &self.request else {
            return None;
        };
        let protocol = session.protocol_version();
        Some(ClientSpan::start(Attempt {
            parent: &self.context.trace,
            request,
            peer: &self.peer,
            number,
            protocol: protocol.as_ref().map(ProtocolVersion::as_str),
            held,
        }))
    }

    async fn perform(
        &self,
        session: &Arc<Session>,
        span: Option<&ClientSpan>,
    ) -> Result<Response, SendError> {
        match &self.request {
            Request::Send(request) => {
                // Shares the arguments: nothing large is copied per attempt.
                let mut attempt = request.clone();
                if let Some(span) = span {
                    span.inject(&mut attempt);
                }
                session
                    .answer(attempt, self.context.link.as_ref(), self.context.deadline)
                    .await
                    .map(Response::Sent)
            }
            Request::List => Box::pin(session.list_surface(self.context.deadline))
                .await
                .map(Response::Listed)
                .map_err(|failure| SendError::Failed {
                    failure,
                    upstream: None,
                }),
        }
    }

    fn stopped(&self) -> Unavailable {
        Unavailable {
            failure: Failure::transport("connection stopped"),
            retry_in: None,
            message: text::stopped(&self.connection),
        }
    }
}

/// A failed attempt, as reported: the failure, the upstream's own error,
/// the phase, the session's generation, and the attempt's span.
type Failed = (
    Failure,
    Option<ErrorData>,
    Phase,
    Option<u64>,
    Option<ClientSpan>,
);

/// Input rounds a request may take before it is given up.
const MAX_INPUT_ROUNDS: usize = 10;

/// What a client without a user answers to `asked`: no to every elicitation,
/// no roots. `None` when it asks for something only a client can give
/// (sampling).
#[allow(deprecated)]
fn unattended_answers(asked: &InputRequiredResult) -> Option<InputResponses> {
    let mut answers = InputResponses::new();
    for (key, request) in asked.input_requests.iter().flatten() {
        let answer = match request {
            InputRequest::Elicitation(_) => {
                serde_json::to_value(ElicitResult::new(ElicitationAction::Decline))
            }
            InputRequest::ListRoots(_) => serde_json::to_value(ListRootsResult::default()),
            _ => return None,
        };
        answers.insert(key.clone(), answer.ok()?);
    }
    Some(answers)
}

/// Whether a call's failure says something only of the request: the
/// upstream's JSON-RPC error (`answered`) under no HTTP error status, or
/// under the one a 2026-07-28 server answers that error with (a method it
/// does not serve is 404; a header that does not match its body, or a
/// capability the request lacks, 400), or an HTTP status that refuses the
/// request for its size. An unsupported protocol version is the
/// connection's.
fn of_the_request(failure: &Failure, answered: Option<&ErrorData>) -> bool {
    let an_answer = answered.is_some_and(|error| {
        failure.kind == FailureKind::Protocol
            && failure.status.is_none_or(|status| {
                FailureKind::from_status(status).is_none()
                    || (error.code != ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
                        && crate::codec::mcp_headers::per_request_status(error.code).as_u16()
                            == status)
            })
    });
    an_answer || failure.refused_as_too_large()
}

/// Whether a failure means the session itself is broken (dispose it) rather
/// than one request (keep it: other calls may be in flight on it).
pub(crate) fn breaks_session(failure: &Failure, phase: Phase) -> bool {
    match (failure.kind, phase) {
        (FailureKind::Auth | FailureKind::NeedsLogin, _) => true,
        (FailureKind::RateLimit, _) | (FailureKind::Permission, Phase::Call) => false,
        (FailureKind::Protocol | FailureKind::Server | FailureKind::Timeout, Phase::Call) => false,
        (FailureKind::Transport | FailureKind::Unknown, _) => true,
        // Not of a request: the session is as good as it was.
        (FailureKind::ContractChurn, _) => false,
        (_, Phase::Connect) => true,
    }
}

/// Turns how a forwarded request ended into the caller's value. `label`
/// names it in texts (the tool, or the method). With `pass_errors`, the
/// upstream's own JSON-RPC rejection is passed on as it is; otherwise it
/// becomes the supervisor's `Rejected` text (what agents get for tools).
pub(crate) fn forwarded(
    connection: &str,
    label: &str,
    budget: Duration,
    ended: Ended,
    pass_errors: bool,
) -> Forwarded {
    let refused = match ended {
        Ended::Replied(Response::Sent(Answer::Result(result))) => {
            return Forwarded::Answered(result);
        }
        Ended::Replied(Response::Sent(Answer::Tool(answer))) => return Forwarded::Tool(answer),
        Ended::Replied(Response::Listed(_)) => unreachable!("a request lists nothing"),
        Ended::Rejected {
            upstream: Some(error),
            ..
        } if pass_errors => return Forwarded::Error(error),
        Ended::Rejected { failure, .. } => CallOutcome::Rejected {
            message: text::rejected(connection, &failure),
            failure,
        },
        Ended::Cancelled => CallOutcome::Unavailable {
            failure: Failure::transport("cancelled by the client"),
            retry_in: None,
            message: text::cancelled(connection, label),
        },
        Ended::Refused(unavailable) => unavailable.into(),
        Ended::GaveUp { failure, phase } | Ended::Exhausted { failure, phase, .. }
            if failure.kind == FailureKind::Timeout && phase == Phase::Call =>
        {
            CallOutcome::TimedOut {
                message: text::timed_out(connection, label, budget),
                may_have_run: !failure.not_run,
            }
        }
        Ended::GaveUp { failure, phase } => {
            let message = if phase == Phase::Call && !failure.not_run {
                text::failed_not_retried(connection, &failure)
            } else {
                text::failed(connection, &failure)
            };
            CallOutcome::Unavailable {
                failure,
                retry_in: None,
                message,
            }
        }
        Ended::Exhausted {
            failure, decision, ..
        } => exhausted(connection, failure, &decision).into(),
    };
    Forwarded::Refused(refused)
}

/// Turns how a listing ended into the caller's value.
pub(crate) fn list_outcome(connection: &str, ended: Ended) -> Result<Surface, Unavailable> {
    match ended {
        Ended::Replied(Response::Listed(surface)) => Ok(surface),
        Ended::Replied(Response::Sent(_)) => unreachable!("a list operation sends nothing"),
        Ended::Refused(unavailable) => Err(unavailable),
        Ended::Cancelled => Err(Unavailable {
            failure: Failure::transport("cancelled"),
            retry_in: None,
            message: text::stopped(connection),
        }),
        Ended::Rejected { failure, .. } | Ended::GaveUp { failure, .. } => Err(Unavailable {
            message: text::failed(connection, &failure),
            failure,
            retry_in: None,
        }),
        Ended::Exhausted {
            failure, decision, ..
        } => Err(exhausted(connection, failure, &decision)),
    }
}

fn exhausted(connection: &str, failure: Failure, decision: &Decision) -> Unavailable {
    match decision {
        Decision::Park { cooldown, .. } => Unavailable {
            message: text::parked(connection, &failure, *cooldown),
            retry_in: Some(*cooldown),
            failure,
        },
        _ => Unavailable {
            message: text::retired(connection, &failure),
            retry_in: None,
            failure,
        },
    }
}

/// Holds a request's admission slot; frees it (and counts a call's outcome)
/// however the request ends, even if the caller stops waiting.
pub(crate) struct SlotGuard {
    /// The slot it holds, and where its end is counted.
    slots: (Admission, SharedHistory),
    /// What the call is counted as. Until it is answered: `Unavailable`,
    /// which is what its caller gets if it ends without an answer of its
    /// own (its task panicked, or the runtime is stopping: the registry
    /// answers the caller that the connection stopped).
    kind: OutcomeKind,
    started: Instant,
    /// What the request is called in texts: the tool of a call.
    label: String,
    /// A `tools/call`: its outcome and duration are counted.
    counted: bool,
    queued: Duration,
    attempts: u32,
    caller: Option<Arc<str>>,
}

impl SlotGuard {
    /// `label`: the tool of a `tools/call` (only calls are `counted`).
    /// `queued`: how long it waited for the slot.
    pub(crate) fn new(
        slots: (Admission, SharedHistory),
        (label, caller): (String, Option<Arc<str>>),
        counted: bool,
        queued: Duration,
    ) -> Self {
        SlotGuard {
            slots,
            kind: OutcomeKind::Unavailable,
            started: Instant::now(),
            label,
            counted,
            queued,
            attempts: 0,
            caller,
        }
    }

    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// The request was answered `kind` after `attempts`.
    pub(crate) fn finish(&mut self, kind: OutcomeKind, attempts: u32) {
        self.kind = kind;
        self.attempts = attempts;
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let call = self.counted.then(|| CallDone {
            kind: self.kind,
            elapsed: self.started.elapsed(),
            tool: std::mem::take(&mut self.label),
            attempts: self.attempts,
            queued: self.queued,
            caller: self.caller.take(),
        });
        let (admission, history) = &self.slots;
        history.ended(call);
        admission.release();
    }
}

impl std::fmt::Debug for SlotGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotGuard")
            .field("kind", &self.kind)
            .finish()
    }
}
