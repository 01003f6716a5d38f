//! What `tools/list` shows: every fixture tool the suite calls by name,
//! with its description and raw input schema.
//!
//! Schemas are literal JSON rather than generated from Rust types: several
//! scenarios check that keywords reach the client untouched
//! (`json-schema-2020-12`) or look for an annotation (`x-mcp-header`), and
//! a generator would decide those for us. The order is fixed: 2026-07-28
//! asks for the same order on every listing, and `http-header-validation`
//! calls the first tool with no arguments, so it must be one that needs none.

use std::sync::{Arc, atomic::Ordering};

use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

use super::{fixtures, state::Shared, tasks};

pub(crate) const SIMPLE_TEXT: &str = "test_simple_text";
pub(crate) const IMAGE: &str = "test_image_content";
pub(crate) const AUDIO: &str = "test_audio_content";
pub(crate) const EMBEDDED_RESOURCE: &str = "test_embedded_resource";
pub(crate) const MIXED: &str = "test_multiple_content_types";
pub(crate) const WITH_LOGGING: &str = "test_tool_with_logging";
pub(crate) const WITH_PROGRESS: &str = "test_tool_with_progress";
pub(crate) const ERROR: &str = "test_error_handling";
pub(crate) const RECONNECTION: &str = "test_reconnection";
pub(crate) const SAMPLING: &str = "test_sampling";
pub(crate) const ELICITATION: &str = "test_elicitation";
pub(crate) const SEP1034_DEFAULTS: &str = "test_elicitation_sep1034_defaults";
pub(crate) const SEP1330_ENUMS: &str = "test_elicitation_sep1330_enums";
pub(crate) const JSON_SCHEMA_2020_12: &str = "json_schema_2020_12_tool";
pub(crate) const HEADER_PARAM: &str = "test_header_param";
pub(crate) const MISSING_CAPABILITY: &str = "test_missing_capability";
pub(crate) const STREAMING_ELICITATION: &str = "test_streaming_elicitation";
pub(crate) const LOGGING_TOOL: &str = "test_logging_tool";
pub(crate) const TRIGGER_TOOL_CHANGE: &str = "test_trigger_tool_change";
pub(crate) const TRIGGER_PROMPT_CHANGE: &str = "test_trigger_prompt_change";
pub(crate) const IRR_ELICITATION: &str = "test_input_required_result_elicitation";
pub(crate) const IRR_SAMPLING: &str = "test_input_required_result_sampling";
pub(crate) const IRR_LIST_ROOTS: &str = "test_input_required_result_list_roots";
pub(crate) const IRR_REQUEST_STATE: &str = "test_input_required_result_request_state";
pub(crate) const IRR_MULTIPLE_INPUTS: &str = "test_input_required_result_multiple_inputs";
pub(crate) const IRR_MULTI_ROUND: &str = "test_input_required_result_multi_round";
pub(crate) const IRR_TAMPERED_STATE: &str = "test_input_required_result_tampered_state";
pub(crate) const IRR_CAPABILITIES: &str = "test_input_required_result_capabilities";
/// Listed only after `test_trigger_tool_change`, so that call really
/// changes the list it announces as changed.
pub(crate) const DYNAMIC: &str = "test_dynamic_tool";

/// Name, description, input schema.
type Entry = (&'static str, &'static str, fn() -> Value);

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}})
}

fn name_argument() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}}})
}

fn compute_arguments() -> Value {
    json!({
        "type": "object",
        "properties": {
            "seconds": {"type": "number", "minimum": 0, "description": "How long to work"},
            "label": {"type": "string", "description": "Echoed in the result"}
        }
    })
}

fn filename_argument() -> Value {
    json!({"type": "object", "properties": {"filename": {"type": "string"}}})
}

fn prompt_argument() -> Value {
    json!({
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
        "required": ["prompt"]
    })
}

fn message_argument() -> Value {
    json!({
        "type": "object",
        "properties": {"message": {"type": "string", "description": "The message to show the user"}},
        "required": ["message"]
    })
}

/// SEP-2243: a string argument the client must mirror in `Mcp-Param-Region`.
fn header_argument() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "description": "Where to run", "x-mcp-header": "Region"}
        },
        "required": ["region"]
    })
}

const ENTRIES: &[Entry] = &[
    (SIMPLE_TEXT, "Returns one text block", no_arguments),
    (IMAGE, "Returns one PNG image block", no_arguments),
    (AUDIO, "Returns one WAV audio block", no_arguments),
    (
        EMBEDDED_RESOURCE,
        "Returns one embedded text resource",
        no_arguments,
    ),
    (
        MIXED,
        "Returns text, image and embedded resource blocks",
        no_arguments,
    ),
    (
        WITH_LOGGING,
        "Logs three info messages while it runs",
        no_arguments,
    ),
    (
        WITH_PROGRESS,
        "Reports progress 0, 50 and 100 of 100 while it runs",
        no_arguments,
    ),
    (
        ERROR,
        "Always fails with a tool error (isError)",
        no_arguments,
    ),
    (
        RECONNECTION,
        "Over streamable HTTP, cuts its response stream after the priming event and answers once the client has resumed it (SEP-1699)",
        no_arguments,
    ),
    (
        SAMPLING,
        "Asks the client to sample an LLM completion of `prompt`",
        prompt_argument,
    ),
    (
        ELICITATION,
        "Asks the user, through the client, to answer `message`",
        message_argument,
    ),
    (
        SEP1034_DEFAULTS,
        "Elicits a form whose fields all have defaults (SEP-1034)",
        no_arguments,
    ),
    (
        SEP1330_ENUMS,
        "Elicits a form with every enum shape of SEP-1330",
        no_arguments,
    ),
    (
        JSON_SCHEMA_2020_12,
        "Takes arguments described with JSON Schema 2020-12 keywords (SEP-1613, SEP-2106)",
        fixtures::json_schema_2020_12,
    ),
    (
        HEADER_PARAM,
        "Echoes `region`, which the client also sends as the Mcp-Param-Region header (SEP-2243)",
        header_argument,
    ),
    (
        MISSING_CAPABILITY,
        "Needs the client's sampling capability and says so with -32021 when it is missing",
        no_arguments,
    ),
    (
        STREAMING_ELICITATION,
        "Needs an elicitation; a 2026-07-28 client gets it as an InputRequiredResult",
        no_arguments,
    ),
    (
        LOGGING_TOOL,
        "Logs one message, at the level the request asks for",
        no_arguments,
    ),
    (
        TRIGGER_TOOL_CHANGE,
        "Adds or removes test_dynamic_tool and announces tools/list_changed",
        no_arguments,
    ),
    (
        TRIGGER_PROMPT_CHANGE,
        "Adds or removes test_dynamic_prompt and announces prompts/list_changed",
        no_arguments,
    ),
    (
        IRR_ELICITATION,
        "Asks for the user's name with an InputRequiredResult, then greets (SEP-2322)",
        no_arguments,
    ),
    (
        IRR_SAMPLING,
        "Asks the client to sample with an InputRequiredResult (SEP-2322)",
        no_arguments,
    ),
    (
        IRR_LIST_ROOTS,
        "Asks for the client's roots with an InputRequiredResult (SEP-2322)",
        no_arguments,
    ),
    (
        IRR_REQUEST_STATE,
        "Asks for a confirmation and carries a signed requestState (SEP-2322)",
        no_arguments,
    ),
    (
        IRR_MULTIPLE_INPUTS,
        "Asks for an elicitation, a sampling and the roots at once (SEP-2322)",
        no_arguments,
    ),
    (
        IRR_MULTI_ROUND,
        "Asks two questions in two rounds, with a new requestState each (SEP-2322)",
        no_arguments,
    ),
    (
        IRR_TAMPERED_STATE,
        "Rejects a requestState that fails its integrity check (SEP-2322)",
        no_arguments,
    ),
    (
        IRR_CAPABILITIES,
        "Asks only for what the request's client capabilities allow (SEP-2322)",
        no_arguments,
    ),
    (
        tasks::GREET,
        "Says hello to `name`; never a task (SEP-2663)",
        name_argument,
    ),
    (
        tasks::SLOW_COMPUTE,
        "Works for `seconds`; a task when the client takes tasks, cancellable (SEP-2663)",
        compute_arguments,
    ),
    (
        tasks::FAILING_JOB,
        "Task required: completes after a second with a tool error (SEP-2663)",
        no_arguments,
    ),
    (
        tasks::PROTOCOL_ERROR_JOB,
        "Task required: fails with a protocol error (SEP-2663)",
        no_arguments,
    ),
    (
        tasks::CONFIRM_DELETE,
        "Asks to confirm deleting `filename`; as a task it waits in input_required (SEP-2663)",
        filename_argument,
    ),
    (
        tasks::MULTI_INPUT,
        "Task required: asks two questions at once (SEP-2663)",
        no_arguments,
    ),
    (
        tasks::WITH_TASK,
        "Task required: asks for a name with an InputRequiredResult, then greets from a task (SEP-2663)",
        no_arguments,
    ),
];

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema: JsonObject = match schema {
        Value::Object(object) => object,
        // Every schema above is an object literal.
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

/// The tools as listed now.
pub(crate) fn tools(shared: &Shared) -> Vec<Tool> {
    let mut tools: Vec<Tool> = ENTRIES
        .iter()
        .map(|(name, description, schema)| tool(name, description, schema()))
        .collect();
    if shared.dynamic_tool.load(Ordering::SeqCst) {
        tools.push(tool(
            DYNAMIC,
            "Added by test_trigger_tool_change",
            no_arguments(),
        ));
    }
    tools
}

/// One listed tool by name (rmcp checks `Mcp-Param-*` headers against its
/// schema).
pub(crate) fn find(shared: &Shared, name: &str) -> Option<Tool> {
    tools(shared).into_iter().find(|tool| tool.name == name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn names_are_unique_and_valid() {
        let shared = Shared::new();
        let names: Vec<_> = tools(&shared).into_iter().map(|tool| tool.name).collect();
        let unique: BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        for name in &names {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            );
        }
    }

    #[test]
    fn the_first_tool_needs_no_arguments() {
        let first = &tools(&Shared::new())[0];
        assert!(first.input_schema.get("required").is_none());
    }
}
