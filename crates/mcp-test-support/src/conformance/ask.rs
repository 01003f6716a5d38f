//! Asking the client for input — sampling, elicitation, roots — the way the
//! negotiated protocol allows.
//!
//! Up to 2025-11-25 the server sends the client a request in the middle of
//! the tool call and waits for the answer. From 2026-07-28 a server must
//! not send requests at all (SEP-2322): it answers the call with an
//! `InputRequiredResult` naming what it needs, and the client calls again
//! with `inputResponses`. [`gather`] hides the difference, so one tool
//! (say `test_sampling`) works for both kinds of client, and the MRTR
//! fixtures share its validation of what comes back.

#![allow(deprecated)] // Sampling and roots: SEP-2577 deprecates them, the suite still tests them.

use std::{collections::BTreeMap, time::Duration};

use rmcp::{
    ErrorData, RoleServer,
    model::{
        ClientCapabilities, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
        ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest, InputRequests,
        InputRequiredResult, InputResponses, ListRootsRequest, ProtocolVersion, SamplingMessage,
        ServerRequest,
    },
    service::RequestContext,
};
use serde_json::Value;

/// How long a legacy client may take to answer one sampling, elicitation
/// or roots request before the tool gives up on it.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// One thing the server needs from the client.
#[derive(Debug, Clone)]
pub(crate) enum Ask {
    /// `elicitation/create` with a form.
    Elicit { message: String, schema: Value },
    /// `sampling/createMessage` with one user message.
    Sample { prompt: String, max_tokens: u32 },
    /// `roots/list`.
    Roots,
}

/// The client's answers by key, or what to return to get them.
#[derive(Debug)]
pub(crate) enum Gathered {
    /// Every ask answered; each value is the client's result as JSON.
    Ready(BTreeMap<String, Value>),
    /// Some are missing: return this to the client.
    Pending(InputRequiredResult),
}

/// Whether this request runs under 2026-07-28 or later, where the server
/// must not send requests to the client.
pub(crate) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Gets an answer to every `(key, ask)`.
///
/// Stateless: answers come from `responses`; the keys without one are
/// asked for in a [`Gathered::Pending`] that carries `request_state`.
/// Legacy: each ask is sent to the client now, in order.
///
/// # Errors
///
/// `-32021` when the client did not declare a capability an ask needs;
/// `-32602` when a response is not a result object; an internal error
/// when a legacy client fails or does not answer.
pub(crate) async fn gather(
    context: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
    asks: &[(&str, Ask)],
    request_state: Option<String>,
) -> Result<Gathered, ErrorData> {
    let capabilities = context.client_capabilities().unwrap_or_default();
    for (_, ask) in asks {
        if !ask.allowed_by(&capabilities) {
            return Err(ErrorData::missing_required_client_capability(
                ask.required_capability(),
            ));
        }
    }
    if is_stateless(context) {
        return from_responses(responses, asks, request_state);
    }
    let mut answers = BTreeMap::new();
    for (key, ask) in asks {
        answers.insert((*key).to_owned(), ask.send(context).await?);
    }
    Ok(Gathered::Ready(answers))
}

/// The stateless half of [`gather`].
pub(crate) fn from_responses(
    responses: Option<&InputResponses>,
    asks: &[(&str, Ask)],
    request_state: Option<String>,
) -> Result<Gathered, ErrorData> {
    let mut answers = BTreeMap::new();
    let mut missing = InputRequests::new();
    for (key, ask) in asks {
        match responses.and_then(|responses| responses.get(*key)) {
            Some(answer) => {
                ask.check_answer(key, answer)?;
                answers.insert((*key).to_owned(), answer.clone());
            }
            None => {
                missing.insert((*key).to_owned(), ask.input_request()?);
            }
        }
    }
    if missing.is_empty() {
        Ok(Gathered::Ready(answers))
    } else {
        // Keys the client sent that nobody asked for are ignored (SEP-2322:
        // servers ignore what they do not recognize).
        Ok(Gathered::Pending(InputRequiredResult::new(
            Some(missing),
            request_state,
        )))
    }
}

impl Ask {
    pub(crate) fn elicit(message: impl Into<String>, schema: Value) -> Self {
        Self::Elicit {
            message: message.into(),
            schema,
        }
    }

    pub(crate) fn sample(prompt: impl Into<String>, max_tokens: u32) -> Self {
        Self::Sample {
            prompt: prompt.into(),
            max_tokens,
        }
    }

    /// Whether `capabilities` lets the server ask this.
    pub(crate) fn allowed_by(&self, capabilities: &ClientCapabilities) -> bool {
        match self {
            Self::Elicit { .. } => capabilities.elicitation.is_some(),
            Self::Sample { .. } => capabilities.sampling.is_some(),
            Self::Roots => capabilities.roots.is_some(),
        }
    }

    /// The capability object `-32021` names as missing.
    fn required_capability(&self) -> ClientCapabilities {
        let mut required = ClientCapabilities::default();
        match self {
            Self::Elicit { .. } => required.elicitation = Some(Default::default()),
            Self::Sample { .. } => required.sampling = Some(Default::default()),
            Self::Roots => required.roots = Some(Default::default()),
        }
        required
    }

    /// The ask as an MRTR input request.
    pub(crate) fn input_request(&self) -> Result<InputRequest, ErrorData> {
        Ok(match self {
            Self::Elicit { message, schema } => InputRequest::Elicitation(ElicitRequest::new(
                form(message.clone(), schema.clone())?,
            )),
            Self::Sample { prompt, max_tokens } => InputRequest::CreateMessage(
                CreateMessageRequest::new(sampling(prompt, *max_tokens)),
            ),
            Self::Roots => InputRequest::ListRoots(ListRootsRequest::default()),
        })
    }

    /// A response must at least have the shape of the result it answers;
    /// anything else is a protocol error, not a reason to ask again.
    fn check_answer(&self, key: &str, answer: &Value) -> Result<(), ErrorData> {
        let field = match self {
            Self::Elicit { .. } => "action",
            Self::Sample { .. } => "content",
            Self::Roots => "roots",
        };
        if answer.get(field).is_none() {
            return Err(ErrorData::invalid_params(
                format!("inputResponses.{key} is not a result for this request (no `{field}`)"),
                Some(serde_json::json!({"key": key})),
            ));
        }
        Ok(())
    }

    /// Sends the ask to a legacy client and returns its result as JSON.
    async fn send(&self, context: &RequestContext<RoleServer>) -> Result<Value, ErrorData> {
        let request = match self {
            Self::Elicit { message, schema } => ServerRequest::ElicitRequest(ElicitRequest::new(
                form(message.clone(), schema.clone())?,
            )),
            Self::Sample { prompt, max_tokens } => ServerRequest::CreateMessageRequest(
                CreateMessageRequest::new(sampling(prompt, *max_tokens)),
            ),
            Self::Roots => ServerRequest::ListRootsRequest(ListRootsRequest::default()),
        };
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, context.peer.send_request(request))
            .await
            .map_err(|_| ErrorData::internal_error("the client did not answer in time", None))?
            .map_err(|error| {
                ErrorData::internal_error(format!("the client request failed: {error}"), None)
            })?;
        let value = match answer {
            ClientResult::CreateMessageResult(result) => serde_json::to_value(result),
            ClientResult::ElicitResult(result) => serde_json::to_value(result),
            ClientResult::ListRootsResult(result) => serde_json::to_value(result),
            other => serde_json::to_value(other),
        };
        value.map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }
}

fn form(message: String, schema: Value) -> Result<ElicitRequestParams, ErrorData> {
    let requested_schema: ElicitationSchema = serde_json::from_value(schema).map_err(|error| {
        ErrorData::internal_error(format!("bad elicitation schema: {error}"), None)
    })?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
}

fn sampling(prompt: &str, max_tokens: u32) -> CreateMessageRequestParams {
    CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], max_tokens)
}

/// The `content` of an accepted elicitation, `None` when the user declined
/// or cancelled.
pub(crate) fn accepted_content(answer: &Value) -> Option<&Value> {
    (answer.get("action").and_then(Value::as_str) == Some("accept"))
        .then(|| answer.get("content"))
        .flatten()
}

/// The text a sampling result carries (`content` may be one block or a list).
pub(crate) fn sampled_text(answer: &Value) -> String {
    let content = answer.get("content");
    let block = match content {
        Some(Value::Array(blocks)) => blocks.first(),
        other => other,
    };
    block
        .and_then(|block| block.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("(no text)")
        .to_owned()
}

/// The root URIs a `roots/list` result carries.
pub(crate) fn root_uris(answer: &Value) -> Vec<String> {
    answer
        .get("roots")
        .and_then(Value::as_array)
        .map(|roots| {
            roots
                .iter()
                .filter_map(|root| root.get("uri").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conformance::fixtures::one_field_form;

    fn asks() -> Vec<(&'static str, Ask)> {
        vec![
            (
                "name",
                Ask::elicit("Name?", one_field_form("name", "string")),
            ),
            ("roots", Ask::Roots),
        ]
    }

    #[test]
    fn asks_again_for_what_is_missing_and_ignores_extra_keys() {
        let responses: InputResponses = serde_json::from_value(
            json!({"name": {"action": "accept", "content": {"name": "A"}}, "x": 1}),
        )
        .unwrap();
        let Gathered::Pending(pending) = from_responses(Some(&responses), &asks(), None).unwrap()
        else {
            panic!("roots is missing")
        };
        let keys: Vec<_> = pending.input_requests.unwrap().into_keys().collect();
        assert_eq!(keys, ["roots"]);
    }

    #[test]
    fn a_response_that_is_not_a_result_is_an_error() {
        let responses: InputResponses = serde_json::from_value(json!({"name": 12345})).unwrap();
        let error = from_responses(Some(&responses), &asks(), None).unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn reads_answers() {
        let elicited = json!({"action": "accept", "content": {"name": "Alice"}});
        assert_eq!(accepted_content(&elicited).unwrap()["name"], "Alice");
        assert!(accepted_content(&json!({"action": "decline"})).is_none());
        let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}});
        assert_eq!(sampled_text(&sampled), "Paris");
        let roots = json!({"roots": [{"uri": "file:///a"}, {"name": "no uri"}]});
        assert_eq!(root_uris(&roots), ["file:///a"]);
    }
}
