//! Prompts (`prompts-*` scenarios) and argument completion
//! (`completion-complete`).

use std::sync::atomic::Ordering;

use rmcp::{
    ErrorData,
    model::{
        CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, GetPromptResult,
        ListPromptsResult, Prompt, PromptArgument, PromptMessage, Reference, ResourceContents,
        Role,
    },
};
use serde_json::Value;

use super::{fixtures::PNG_BASE64, mrtr, state::Shared};

const SIMPLE: &str = "test_simple_prompt";
const WITH_ARGUMENTS: &str = "test_prompt_with_arguments";
const EMBEDDED_RESOURCE: &str = "test_prompt_with_embedded_resource";
const WITH_IMAGE: &str = "test_prompt_with_image";
/// Listed only after `test_trigger_prompt_change`.
pub(crate) const DYNAMIC: &str = "test_dynamic_prompt";

fn argument(name: &str, description: &str) -> PromptArgument {
    PromptArgument::new(name)
        .with_description(description)
        .with_required(true)
}

pub(crate) fn list(shared: &Shared) -> ListPromptsResult {
    let mut prompts = vec![
        Prompt::new(SIMPLE, Some("A prompt without arguments"), None)
            .with_title("Simple Test Prompt"),
        Prompt::new(
            WITH_ARGUMENTS,
            Some("A prompt with two required arguments"),
            Some(vec![
                argument("arg1", "First test argument"),
                argument("arg2", "Second test argument"),
            ]),
        )
        .with_title("Prompt With Arguments"),
        Prompt::new(
            EMBEDDED_RESOURCE,
            Some("A prompt that embeds a resource"),
            Some(vec![argument(
                "resourceUri",
                "URI of the resource to embed",
            )]),
        )
        .with_title("Prompt With Embedded Resource"),
        Prompt::new(WITH_IMAGE, Some("A prompt that includes an image"), None)
            .with_title("Prompt With Image"),
        Prompt::new(
            mrtr::PROMPT,
            Some("A prompt that first elicits its context (SEP-2322)"),
            None,
        )
        .with_title("Prompt With Input Required"),
    ];
    if shared.dynamic_prompt.load(Ordering::SeqCst) {
        prompts.push(Prompt::new(
            DYNAMIC,
            Some("Added by test_trigger_prompt_change"),
            None,
        ));
    }
    ListPromptsResult::with_all_items(prompts)
}

fn string_argument<'a>(
    arguments: Option<&'a rmcp::model::JsonObject>,
    name: &str,
) -> Result<&'a str, ErrorData> {
    arguments
        .and_then(|arguments| arguments.get(name))
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params(format!("missing argument `{name}`"), None))
}

/// `prompts/get` for every prompt but the MRTR one.
///
/// # Errors
///
/// `-32602` for an unknown prompt or a missing required argument.
pub(crate) fn get(
    shared: &Shared,
    name: &str,
    arguments: Option<&rmcp::model::JsonObject>,
) -> Result<GetPromptResult, ErrorData> {
    let messages = match name {
        SIMPLE => vec![PromptMessage::new_text(
            Role::User,
            "This is a simple prompt for testing.",
        )],
        WITH_ARGUMENTS => {
            let arg1 = string_argument(arguments, "arg1")?;
            let arg2 = string_argument(arguments, "arg2")?;
            vec![PromptMessage::new_text(
                Role::User,
                format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
            )]
        }
        EMBEDDED_RESOURCE => {
            let uri = string_argument(arguments, "resourceUri")?;
            let resource = ResourceContents::text("Embedded resource content for testing.", uri)
                .with_mime_type("text/plain");
            vec![
                PromptMessage::new(Role::User, ContentBlock::resource(resource)),
                PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
            ]
        }
        WITH_IMAGE => vec![
            PromptMessage::new(Role::User, ContentBlock::image(PNG_BASE64, "image/png")),
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ],
        DYNAMIC if shared.dynamic_prompt.load(Ordering::SeqCst) => {
            vec![PromptMessage::new_text(
                Role::User,
                "A prompt that comes and goes.",
            )]
        }
        _ => {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt `{name}`"),
                None,
            ));
        }
    };
    Ok(GetPromptResult::new(messages))
}

/// Suggestions for the arguments this server knows, filtered by the
/// typed prefix; anything else completes to nothing, which is a valid
/// answer.
pub(crate) fn complete(request: &CompleteRequestParams) -> CompleteResult {
    let candidates: &[&str] = match (&request.r#ref, request.argument.name.as_str()) {
        (Reference::Prompt(prompt), "arg1" | "arg2") if prompt.name == WITH_ARGUMENTS => {
            &["hello", "help", "world", "test", "testValue1", "testValue2"]
        }
        (Reference::Resource(resource), "id") if resource.uri == "test://template/{id}/data" => {
            &["1", "2", "3", "123"]
        }
        _ => &[],
    };
    let prefix = request.argument.value.as_str();
    let values: Vec<String> = candidates
        .iter()
        .filter(|candidate| candidate.starts_with(prefix))
        .map(|candidate| (*candidate).to_owned())
        .collect();
    let total = u32::try_from(values.len()).unwrap_or(u32::MAX);
    let mut completion = CompletionInfo::new(values).unwrap_or_default();
    completion.total = Some(total);
    completion.has_more = Some(false);
    CompleteResult::new(completion)
}

#[cfg(test)]
mod tests {
    use rmcp::model::ArgumentInfo;

    use super::*;

    #[test]
    fn completes_by_prefix() {
        let request = CompleteRequestParams::new(
            Reference::for_prompt(WITH_ARGUMENTS),
            ArgumentInfo::new("arg1", "te"),
        );
        assert_eq!(
            complete(&request).completion.values,
            ["test", "testValue1", "testValue2"]
        );
    }

    #[test]
    fn substitutes_arguments() {
        let arguments = serde_json::json!({"arg1": "a", "arg2": "b"});
        let result = get(&Shared::new(), WITH_ARGUMENTS, arguments.as_object()).unwrap();
        let text = serde_json::to_string(&result.messages).unwrap();
        assert!(text.contains("arg1='a'") && text.contains("arg2='b'"));
    }
}
