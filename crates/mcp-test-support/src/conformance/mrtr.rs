//! The `input-required-result-*` fixtures (SEP-2322, multi round-trip
//! requests): tools and one prompt that answer with an
//! `InputRequiredResult` until the client has supplied what they asked for.
//!
//! Round progress travels in `requestState`, sealed with rmcp's
//! `RequestStateCodec` (HMAC-SHA256, bound to the tool's name), so the
//! server keeps nothing between rounds and a forged or altered state is
//! refused with `-32602`. Each fixture is written as the full conversation;
//! [`gather`] either finds an answer in `inputResponses` or returns the
//! result that asks for it, and a legacy client (which cannot take an
//! `InputRequiredResult`) is simply asked directly.

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
        GetPromptResult, PromptMessage, Role, SealOptions,
    },
    service::RequestContext,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    ask::{Ask, Gathered, accepted_content, gather, root_uris, sampled_text},
    fixtures::one_field_form,
    state::Shared,
    tools::text,
};

/// Name of the prompt `input-required-result-non-tool-request` gets.
pub(crate) const PROMPT: &str = "test_input_required_result_prompt";

/// Sealed round state: a client may hold it for a while, never for ever.
const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// What a `requestState` carries.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Progress {
    /// The round the client is answering (1 = the first question).
    round: u8,
    /// An answer from an earlier round that a later one needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

fn seal(shared: &Shared, owner: &str, progress: &Progress) -> Result<String, ErrorData> {
    let options = SealOptions::new()
        .associated_data(owner.as_bytes())
        .ttl(STATE_TTL);
    shared
        .codec
        .seal_json_with(progress, &options)
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
}

/// The verified state, `None` when the client sent none.
fn open(shared: &Shared, owner: &str, state: Option<&str>) -> Result<Option<Progress>, ErrorData> {
    let Some(state) = state else { return Ok(None) };
    shared
        .codec
        .open_json_with(state, owner.as_bytes())
        .map(Some)
        .map_err(|error| {
            ErrorData::invalid_params(
                format!("requestState rejected: {error}"),
                Some(json!({"reason": "requestState failed its integrity check"})),
            )
        })
}

/// A follow-up round without the state it must echo is a protocol error:
/// the server cannot tell which conversation the answers belong to.
fn require_state(request: &CallToolRequestParams) -> Result<(), ErrorData> {
    if request.input_responses.is_some() && request.request_state.is_none() {
        return Err(ErrorData::invalid_params(
            "inputResponses without the requestState this tool issued",
            None,
        ));
    }
    Ok(())
}

fn name_asked(key: &str, message: &str) -> (String, Ask) {
    (
        key.to_owned(),
        Ask::elicit(message, one_field_form("name", "string")),
    )
}

fn answered_field(
    answers: &std::collections::BTreeMap<String, Value>,
    key: &str,
    field: &str,
) -> String {
    answers
        .get(key)
        .and_then(accepted_content)
        .and_then(|content| content.get(field))
        .and_then(Value::as_str)
        .unwrap_or("(declined)")
        .to_owned()
}

/// Runs one round over `asks` and turns a complete set of answers into the
/// tool's result with `finish`.
async fn round(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    asks: &[(String, Ask)],
    state: Option<String>,
    finish: impl FnOnce(&std::collections::BTreeMap<String, Value>) -> String,
) -> Result<CallToolResponse, ErrorData> {
    let asks: Vec<(&str, Ask)> = asks
        .iter()
        .map(|(key, ask)| (key.as_str(), ask.clone()))
        .collect();
    Ok(
        match gather(context, request.input_responses.as_ref(), &asks, state).await? {
            Gathered::Pending(pending) => pending.into(),
            Gathered::Ready(answers) => text(finish(&answers)),
        },
    )
}

/// `test_input_required_result_elicitation`: the user's name, then a greeting.
pub(crate) async fn elicitation(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let asks = [name_asked("user_name", "What is your name?")];
    round(request, context, &asks, None, |answers| {
        format!("Hello, {}!", answered_field(answers, "user_name", "name"))
    })
    .await
}

/// `test_input_required_result_sampling`.
pub(crate) async fn sampling(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let asks = [(
        "capital_question".to_owned(),
        Ask::sample("What is the capital of France?", 100),
    )];
    round(request, context, &asks, None, |answers| {
        let answer = answers.get("capital_question").map(sampled_text);
        format!("The client's model says: {}", answer.unwrap_or_default())
    })
    .await
}

/// `test_input_required_result_list_roots`.
pub(crate) async fn list_roots(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let asks = [("client_roots".to_owned(), Ask::Roots)];
    round(request, context, &asks, None, |answers| {
        let roots = answers
            .get("client_roots")
            .map(root_uris)
            .unwrap_or_default();
        format!("Client roots: {}", roots.join(", "))
    })
    .await
}

/// `test_input_required_result_request_state` and
/// `test_input_required_result_tampered_state`: a confirmation whose second
/// round is accepted only with the sealed state of the first.
pub(crate) async fn confirmed(
    shared: &Shared,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let owner = request.name.as_ref();
    require_state(request)?;
    open(shared, owner, request.request_state.as_deref())?;
    let state = seal(
        shared,
        owner,
        &Progress {
            round: 1,
            name: None,
        },
    )?;
    let asks = [(
        "confirm".to_owned(),
        Ask::elicit("Please confirm", one_field_form("ok", "boolean")),
    )];
    round(request, context, &asks, Some(state), |answers| {
        let ok = answers
            .get("confirm")
            .and_then(accepted_content)
            .and_then(|content| content.get("ok"))
            .cloned()
            .unwrap_or(Value::Null);
        format!("state-ok: requestState verified, confirmation ok={ok}")
    })
    .await
}

/// `test_input_required_result_multiple_inputs`: three kinds of input in
/// one round.
pub(crate) async fn multiple_inputs(
    shared: &Shared,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let owner = request.name.as_ref();
    require_state(request)?;
    open(shared, owner, request.request_state.as_deref())?;
    let state = seal(
        shared,
        owner,
        &Progress {
            round: 1,
            name: None,
        },
    )?;
    let asks = [
        name_asked("user_name", "What is your name?"),
        (
            "greeting".to_owned(),
            Ask::sample("Generate a greeting", 50),
        ),
        ("client_roots".to_owned(), Ask::Roots),
    ];
    round(request, context, &asks, Some(state), |answers| {
        format!(
            "{} {} (roots: {})",
            answers
                .get("greeting")
                .map(sampled_text)
                .unwrap_or_default(),
            answered_field(answers, "user_name", "name"),
            answers
                .get("client_roots")
                .map(root_uris)
                .unwrap_or_default()
                .join(", ")
        )
    })
    .await
}

/// `test_input_required_result_multi_round`: a name, then a colour, each
/// in its own round with a new state.
pub(crate) async fn multi_round(
    shared: &Shared,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let owner = request.name.as_ref();
    require_state(request)?;
    let progress = open(shared, owner, request.request_state.as_deref())?;
    let responses = request.input_responses.as_ref();
    let name = match progress {
        Some(Progress {
            round: 2,
            name: Some(name),
        }) => name,
        _ => {
            let first = seal(
                shared,
                owner,
                &Progress {
                    round: 1,
                    name: None,
                },
            )?;
            let asks = [(
                "step1",
                Ask::elicit(
                    "Step 1: What is your name?",
                    one_field_form("name", "string"),
                ),
            )];
            match gather(context, responses, &asks, Some(first)).await? {
                Gathered::Pending(pending) => return Ok(pending.into()),
                Gathered::Ready(answers) => answered_field(&answers, "step1", "name"),
            }
        }
    };
    let second = seal(
        shared,
        owner,
        &Progress {
            round: 2,
            name: Some(name.clone()),
        },
    )?;
    let asks = [(
        "step2",
        Ask::elicit(
            "Step 2: What is your favorite color?",
            one_field_form("color", "string"),
        ),
    )];
    Ok(
        match gather(context, responses, &asks, Some(second)).await? {
            Gathered::Pending(pending) => pending.into(),
            Gathered::Ready(answers) => text(format!(
                "{name}'s favorite color is {}",
                answered_field(&answers, "step2", "color")
            )),
        },
    )
}

/// `test_input_required_result_capabilities`: asks only for what this
/// request's `clientCapabilities` declare.
pub(crate) async fn capabilities(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let declared = context.client_capabilities().unwrap_or_default();
    let asks: Vec<(String, Ask)> = [
        name_asked("user_name", "What is your name?"),
        (
            "greeting".to_owned(),
            Ask::sample("Generate a greeting", 50),
        ),
        ("client_roots".to_owned(), Ask::Roots),
    ]
    .into_iter()
    .filter(|(_, ask)| ask.allowed_by(&declared))
    .collect();
    if asks.is_empty() {
        return Ok(text("The client declared nothing to ask with"));
    }
    let asked: Vec<String> = asks.iter().map(|(key, _)| key.clone()).collect();
    round(request, context, &asks, None, move |_| {
        format!("Answered: {}", asked.join(", "))
    })
    .await
}

/// `test_input_required_result_prompt`: the same flow on `prompts/get`.
pub(crate) async fn prompt(
    request: &GetPromptRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<GetPromptResponse, ErrorData> {
    let asks = [(
        "user_context",
        Ask::elicit(
            "What context should the prompt use?",
            one_field_form("context", "string"),
        ),
    )];
    Ok(
        match gather(context, request.input_responses.as_ref(), &asks, None).await? {
            Gathered::Pending(pending) => pending.into(),
            Gathered::Ready(answers) => {
                let context = answered_field(&answers, "user_context", "context");
                GetPromptResult::new(vec![PromptMessage::new_text(
                    Role::User,
                    format!("Use this context: {context}"),
                )])
                .with_description("A prompt built from elicited context")
                .into()
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_opens_only_for_its_owner_and_unaltered() {
        let shared = Shared::new();
        let sealed = seal(
            &shared,
            "tool_a",
            &Progress {
                round: 2,
                name: Some("A".into()),
            },
        )
        .unwrap();
        let opened = open(&shared, "tool_a", Some(&sealed)).unwrap().unwrap();
        assert_eq!((opened.round, opened.name.as_deref()), (2, Some("A")));
        assert!(open(&shared, "tool_b", Some(&sealed)).is_err());
        assert!(open(&shared, "tool_a", Some(&format!("{sealed}-TAMPERED"))).is_err());
        assert!(open(&shared, "tool_a", None).unwrap().is_none());
    }
}
