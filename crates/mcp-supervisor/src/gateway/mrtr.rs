//! Multi-round requests across both protocol generations. An upstream that
//! needs the client's input (sampling, elicitation, roots) while it serves a
//! `tools/call`, `prompts/get` or `resources/read` asks differently per
//! generation, and so does the client:
//!
//! | upstream asks with | 2025 client (has a session) | 2026-07-28 client (stateless) |
//! |---|---|---|
//! | a server-to-client request (2025 upstream) | relayed as is (`downstream`) | answered `input_required`; the request keeps running upstream until the client retries with its answers |
//! | an `input_required` result (2026 upstream) | each input request becomes a server-to-client request; the answers go back upstream in a retry | passed through, its `requestState` sealed to the connection |
//!
//! Every `requestState` the gateway hands out is sealed ([`RequestStateCodec`],
//! HMAC with a per-process key, 10-minute TTL) and bound to its connection,
//! method and target, so a client cannot replay it against another one or
//! forge one; a retry with a state that does not open is -32602.

// Sampling and roots are deprecated by SEP-2577, yet they are what clients are
// asked for in these rounds.
#![allow(deprecated)]

use opentelemetry::context::FutureExt as _;
use std::{collections::BTreeMap, sync::Arc};

use rmcp::{
    ErrorData, RoleServer,
    model::{
        ClientResult, CreateMessageResult, ElicitResult, ErrorCode, InputRequest,
        InputRequiredResult, InputResponses, ListRootsResult, ServerRequest, ServerResult,
    },
    service::RequestContext,
};
use tokio::{sync::oneshot, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    directory::Target,
    downstream::{DownstreamRequest, DownstreamSession, Origin, Question},
    rounds::{Rounds, Sealed, Waiting},
    state::GatewayState,
};
use crate::{
    CallOutcome, Failure, Forwarded, call::UpstreamRequest, generation::Generation,
    session::DownstreamLink,
};

/// Rounds an upstream may ask for before the gateway gives up on it.
const MAX_ROUNDS: usize = 10;

/// How a multi-round request ended for this round.
// Built and matched once per request: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Exchange {
    /// Finished: the upstream's answer or the supervisor's.
    Done(Forwarded),
    /// The client must answer these and retry.
    InputRequired(InputRequiredResult),
}

/// How the client answers an upstream's questions while its request runs.
// Built once per request and matched at once: boxing would only allocate.
#[allow(clippy::large_enum_variant)]
pub(super) enum Answering<'a> {
    /// A 2025 client, on its session: each question becomes a request to
    /// it, on the link made for the connection the request goes to
    /// (`None`: the session cannot be asked).
    OnSession(LinkFor<'a>),
    /// A 2026-07-28 client (`origin`), in `input_required` rounds; `gone`
    /// (or dropping the future) means its request is over, which cancels
    /// the upstream one.
    InRounds {
        origin: Origin,
        gone: &'a CancellationToken,
    },
}

/// The link to a 2025 client's session for a request to a connection.
pub(super) type LinkFor<'a> = Box<dyn FnOnce(&str) -> Option<DownstreamLink> + Send + 'a>;

impl<'a> Answering<'a> {
    /// The way of the client of `context`, on `session` if it has one.
    pub(super) fn of(
        context: &'a RequestContext<RoleServer>,
        session: &'a Arc<DownstreamSession>,
    ) -> Self {
        if Generation::of_agreed(context.protocol_version().as_ref()) == Generation::Stateless {
            return Answering::InRounds {
                origin: Origin::of(context),
                gone: &context.ct,
            };
        }
        Answering::OnSession(Box::new(move |connection| {
            Some(DownstreamRequest::link(context, connection, session))
        }))
    }
}

/// Sends `request` to `target` and runs this round of it, the client
/// answering the upstream's questions its way (see the module doc).
pub(super) async fn exchange(
    state: &Arc<GatewayState>,
    target: &Target,
    mut request: UpstreamRequest,
    answering: Answering<'_>,
) -> Result<Exchange, ErrorData> {
    match answering {
        Answering::OnSession(link) => {
            let link = link(&target.connection)
                .ok_or_else(|| ErrorData::internal_error("the session is not initialized", None))?;
            ask_by_requests(state, target, request, link).await
        }
        Answering::InRounds { origin, gone } => {
            let (responses, sealed) = inputs(&mut request);
            if !origin.may_be_asked() && responses.is_none() && sealed.is_none() {
                return ask_nothing(state, target, request, origin, gone).await;
            }
            ask_by_input_required(state, target, request, origin, gone).await
        }
    }
}

/// A 2026-07-28 client that declared none of sampling, elicitation and
/// roots can be asked nothing (every question is refused as it comes, see
/// `DownstreamRequest::unasked`), so its request has no rounds: it is
/// forwarded here, in this round, with nothing kept for a retry. `gone` (or
/// dropping the future) cancels it upstream, as in rounds.
async fn ask_nothing(
    state: &Arc<GatewayState>,
    target: &Target,
    request: UpstreamRequest,
    origin: Origin,
    gone: &CancellationToken,
) -> Result<Exchange, ErrorData> {
    let cancel = CancellationToken::new();
    let abandoned = cancel.clone().drop_guard();
    let link = DownstreamRequest::unasked(origin, &target.connection, cancel);
    // Named only if the upstream asks for input itself (rare); a call's
    // method is named without a copy.
    let method: std::borrow::Cow<'static, str> = match request.tool() {
        Some(_) => <rmcp::model::CallToolRequestMethod as rmcp::model::ConstString>::VALUE.into(),
        None => request.method().to_owned().into(),
    };
    tokio::select! {
        forwarded = state.forward(&target.connection, request, Some(link)) => {
            abandoned.disarm();
            finished(&state.rounds, forwarded, || binding(target, &method))
        }
        () = gone.cancelled() => Ok(Exchange::Done(ended())),
    }
}

/// The upstream's answer to a round: an `input_required` of its own (a
/// 2026-07-28 upstream) goes to the client with its `requestState` sealed
/// to what `binding` names; any other is the request's.
fn finished(
    rounds: &Rounds,
    forwarded: Forwarded,
    binding: impl FnOnce() -> String,
) -> Result<Exchange, ErrorData> {
    match forwarded.answered_as(input_required) {
        Ok(mut upstream) => {
            let sealed = Sealed::Upstream {
                state: upstream.request_state.take(),
            };
            upstream.request_state = Some(rounds.seal(&sealed, &binding())?);
            Ok(Exchange::InputRequired(upstream))
        }
        Err(other) => Ok(Exchange::Done(other)),
    }
}

/// An upstream's `input_required` answer, for `Forwarded::answered_as`.
fn input_required(result: ServerResult) -> Result<InputRequiredResult, Box<ServerResult>> {
    match result {
        ServerResult::InputRequiredResult(asked) => Ok(asked),
        other => Err(Box::new(other)),
    }
}

/// A 2026-07-28 client (`origin`) answers the upstream's questions in
/// `input_required` rounds: runs this round of `request` to `target`;
/// `gone` (or dropping the future) means the client's request is over,
/// which cancels the upstream one.
async fn ask_by_input_required(
    state: &Arc<GatewayState>,
    target: &Target,
    mut request: UpstreamRequest,
    origin: Origin,
    gone: &CancellationToken,
) -> Result<Exchange, ErrorData> {
    let binding = binding(target, request.method());
    let rounds = &state.rounds;
    if let Some(sealed) = inputs(&mut request).1.take() {
        match rounds.open(&sealed, &binding)? {
            Sealed::Waiting { id } => {
                let mut waiting = rounds.take(id).ok_or_else(|| {
                    ErrorData::invalid_params("requestState is no longer waiting for input", None)
                })?;
                let responses = inputs(&mut request).0.take().unwrap_or_default();
                if let Err(error) = waiting.answer(responses) {
                    rounds.keep_as(id, waiting);
                    return Err(error);
                }
                return next_round(rounds, waiting, gone).await;
            }
            Sealed::Upstream { state: upstream } => *inputs(&mut request).1 = upstream,
        }
    }
    let cancel = CancellationToken::new();
    let (link, questions) =
        DownstreamRequest::questioning(origin, &target.connection, cancel.clone());
    let (answered, result) = oneshot::channel();
    let forwarding = state.clone();
    let connection = target.connection.clone();
    // The request's SERVER span (when traced) goes with it.
    tokio::spawn(
        async move {
            let forwarded = forwarding.forward(&connection, request, Some(link)).await;
            let _ = answered.send(forwarded);
        }
        .with_current_context(),
    );
    let waiting = Waiting {
        binding,
        result,
        questions,
        asked: BTreeMap::new(),
        asked_so_far: 0,
        cancel,
        since: Instant::now(),
    };
    next_round(rounds, waiting, gone).await
}

/// Waits for the upstream's answer or its next questions; a client that
/// cancels its request cancels the upstream one.
async fn next_round(
    rounds: &Rounds,
    mut waiting: Waiting,
    gone: &CancellationToken,
) -> Result<Exchange, ErrorData> {
    // A round dropped before it ends (its client went away) cancels the
    // upstream request, as `gone` does.
    let abandoned = waiting.cancel.clone().drop_guard();
    while waiting.asked.is_empty() {
        tokio::select! {
            forwarded = &mut waiting.result => {
                abandoned.disarm();
                let forwarded = forwarded.unwrap_or_else(|_| ended());
                return finished(rounds, forwarded, || waiting.binding.clone());
            }
            // `None`: the request is over (its link is gone), and its answer
            // is on the way: the loop takes the branch above.
            Some(question) = waiting.questions.recv() => waiting.ask(question),
            () = gone.cancelled() => {
                waiting.cancel.cancel();
                return Ok(Exchange::Done(ended()));
            }
        }
    }
    abandoned.disarm();
    // Questions asked at about the same time go out together.
    while let Ok(question) = waiting.questions.try_recv() {
        waiting.ask(question);
    }
    let requests = waiting.input_requests();
    let binding = waiting.binding.clone();
    let id = rounds.keep(waiting);
    let state = rounds.seal(&Sealed::Waiting { id }, &binding)?;
    Ok(Exchange::InputRequired(InputRequiredResult::new(
        Some(requests),
        Some(state),
    )))
}

impl Waiting {
    /// Adds a question for the client (one that is not an input request is
    /// refused at once).
    fn ask(&mut self, question: Question) {
        if input_request(&question.request).is_none() {
            let _ = question.answer.send(Err(not_askable()));
            return;
        }
        self.asked_so_far += 1;
        self.asked
            .insert(format!("input-{}", self.asked_so_far), question);
    }

    fn input_requests(&self) -> BTreeMap<String, InputRequest> {
        self.asked
            .iter()
            .filter_map(|(key, question)| Some((key.clone(), input_request(&question.request)?)))
            .collect()
    }

    /// Hands the client's answers to the questions they answer; keys it does
    /// not know are ignored, and unanswered ones are asked again. An answer
    /// of the wrong shape refuses the whole retry (nothing is handed over).
    fn answer(&mut self, mut responses: InputResponses) -> Result<(), ErrorData> {
        let mut parsed = Vec::new();
        for (key, question) in &self.asked {
            if let Some(value) = responses.remove(key) {
                let result = client_result(&question.request, value).ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("inputResponses['{key}'] is not an answer to what was asked"),
                        None,
                    )
                })?;
                parsed.push((key.clone(), result));
            }
        }
        for (key, result) in parsed {
            if let Some(question) = self.asked.remove(&key) {
                let _ = question.answer.send(Ok(result));
            }
        }
        Ok(())
    }
}

/// A 2025 client (at `link`) answers the upstream's `input_required` rounds
/// as server-to-client requests on its session; the answers go back upstream.
async fn ask_by_requests(
    state: &Arc<GatewayState>,
    target: &Target,
    mut request: UpstreamRequest,
    link: DownstreamLink,
) -> Result<Exchange, ErrorData> {
    for _ in 0..MAX_ROUNDS {
        // Its arguments are shared with the forwarding, never copied.
        let forwarded = state
            .forward(&target.connection, request.clone(), Some(link.clone()))
            .await;
        let asked = match forwarded.answered_as(input_required) {
            Ok(asked) => asked,
            Err(forwarded) => return Ok(Exchange::Done(forwarded)),
        };
        let mut responses = InputResponses::new();
        for (key, input) in asked.input_requests.unwrap_or_default() {
            let Some(question) = server_request(input) else {
                continue;
            };
            let answer = link.downstream.request(question).await?;
            responses.insert(key, answer_value(answer)?);
        }
        request.set_inputs(responses, asked.request_state);
    }
    Err(ErrorData::internal_error(
        format!("the upstream asked for input more than {MAX_ROUNDS} times"),
        None,
    ))
}

/// What a `requestState` is bound to: connection, method and target.
fn binding(target: &Target, method: &str) -> String {
    format!("{}\n{}\n{}", target.connection, method, target.name)
}

/// The retry fields of the requests that can take several rounds (only
/// those come here).
fn inputs(request: &mut UpstreamRequest) -> (&mut Option<InputResponses>, &mut Option<String>) {
    request
        .inputs_mut()
        .expect("only calls, prompts and reads take several rounds")
}

/// The refusal of a question a 2026-07-28 client cannot be asked.
pub(super) fn not_askable() -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        "a 2026-07-28 client can only be asked for sampling, elicitation or roots",
        None,
    )
}

fn input_request(request: &ServerRequest) -> Option<InputRequest> {
    match request {
        ServerRequest::CreateMessageRequest(r) => Some(InputRequest::CreateMessage(r.clone())),
        ServerRequest::ElicitRequest(r) => Some(InputRequest::Elicitation(r.clone())),
        ServerRequest::ListRootsRequest(r) => Some(InputRequest::ListRoots(r.clone())),
        _ => None,
    }
}

fn server_request(input: InputRequest) -> Option<ServerRequest> {
    match input {
        InputRequest::CreateMessage(r) => Some(ServerRequest::CreateMessageRequest(r)),
        InputRequest::Elicitation(r) => Some(ServerRequest::ElicitRequest(r)),
        InputRequest::ListRoots(r) => Some(ServerRequest::ListRootsRequest(r)),
        _ => None,
    }
}

/// The client's answer to `request`, if `value` is one.
fn client_result(request: &ServerRequest, value: serde_json::Value) -> Option<ClientResult> {
    Some(match request {
        ServerRequest::CreateMessageRequest(_) => ClientResult::CreateMessageResult(Box::new(
            serde_json::from_value::<CreateMessageResult>(value).ok()?,
        )),
        ServerRequest::ElicitRequest(_) => {
            ClientResult::ElicitResult(serde_json::from_value::<ElicitResult>(value).ok()?)
        }
        ServerRequest::ListRootsRequest(_) => {
            ClientResult::ListRootsResult(serde_json::from_value::<ListRootsResult>(value).ok()?)
        }
        _ => return None,
    })
}

/// A client's answer as the value an `inputResponses` entry holds.
fn answer_value(answer: ClientResult) -> Result<serde_json::Value, ErrorData> {
    let value = match answer {
        ClientResult::CreateMessageResult(result) => serde_json::to_value(*result),
        ClientResult::ElicitResult(result) => serde_json::to_value(result),
        ClientResult::ListRootsResult(result) => serde_json::to_value(result),
        _ => {
            return Err(ErrorData::internal_error(
                "the client answered with an unexpected result",
                None,
            ));
        }
    };
    value.map_err(|error| ErrorData::internal_error(error.to_string(), None))
}

/// The answer when the request ended without one (cancelled, or the
/// gateway stopping).
fn ended() -> Forwarded {
    Forwarded::Refused(CallOutcome::Unavailable {
        failure: Failure::transport("the request ended"),
        retry_in: None,
        message: "The request ended before the upstream answered.".to_owned(),
    })
}
