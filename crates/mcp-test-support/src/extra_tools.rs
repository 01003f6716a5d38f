//! The optional long tail of tools (`ServerBehavior::extra_tools`,
//! `mcp-test-server --extra-tools N`): `extra_000`, `extra_001`, … with
//! varied, human-sounding descriptions, so a client's listing or search
//! over many tools (the dashboard's filter) has something real to sort
//! through. Each echoes its `text` as `echo` does.
//!
//! Descriptions are drawn deterministically from small word lists:
//! `extra_000` "Reads the quarterly ledger for region 7", `extra_001`
//! "Lists open invoices for account 12", … A quarter of them mention a
//! ledger (`extra_000` does, `extra_001` does not).

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{CallToolResult, ContentBlock, JsonObject, Tool},
};
use serde_json::{Value, json};

/// The names' common start.
pub(crate) const PREFIX: &str = "extra_";

// Lengths 7, 8 and 5 are coprime, so 280 tools pass before a phrase repeats.
const VERBS: [&str; 7] = [
    "Reads",
    "Lists",
    "Updates",
    "Archives",
    "Summarizes",
    "Exports",
    "Checks",
];
const OBJECTS: [&str; 8] = [
    "the quarterly ledger",
    "open invoices",
    "shipping labels",
    "support tickets",
    "the general ledger",
    "customer notes",
    "payroll runs",
    "warehouse stock",
];
const SCOPES: [&str; 5] = [
    "for region",
    "for account",
    "in store",
    "for team",
    "for project",
];

/// The name of the extra tool at `index`: `extra_007`.
pub(crate) fn name(index: usize) -> String {
    format!("{PREFIX}{index:03}")
}

/// The description of the extra tool at `index`.
pub(crate) fn description(index: usize) -> String {
    format!(
        "{} {} {} {}",
        VERBS[index % VERBS.len()],
        OBJECTS[index % OBJECTS.len()],
        SCOPES[index % SCOPES.len()],
        7 + (index * 5) % 90
    )
}

/// The first `count` extra tools, in order.
pub(crate) fn tools(count: usize) -> Vec<Tool> {
    let schema = json!({
        "type": "object",
        "properties": { "text": { "type": "string" } },
    });
    let schema: Arc<JsonObject> = Arc::new(schema.as_object().cloned().unwrap_or_default());
    (0..count)
        .map(|index| Tool::new(name(index), description(index), Arc::clone(&schema)))
        .collect()
}

/// The index of `tool` if it names one of the first `count` extra tools.
pub(crate) fn index(tool: &str, count: usize) -> Option<usize> {
    let index: usize = tool.strip_prefix(PREFIX)?.parse().ok()?;
    (index < count && name(index) == tool).then_some(index)
}

/// What an extra tool answers: its `text`, like `echo`.
pub(crate) fn call(arguments: Option<&JsonObject>) -> Result<CallToolResult, ErrorData> {
    let text = arguments
        .and_then(|arguments| arguments.get("text"))
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params("missing string argument `text`", None))?;
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_descriptions_are_fixed() {
        let tools = tools(300);
        assert_eq!(tools.len(), 300);
        assert_eq!(tools[0].name, "extra_000");
        assert_eq!(tools[299].name, "extra_299");
        let described = |i: usize| tools[i].description.as_deref().unwrap().to_owned();
        assert_eq!(described(0), "Reads the quarterly ledger for region 7");
        assert_eq!(described(1), "Lists open invoices for account 12");
        let distinct: std::collections::BTreeSet<String> = (0..280).map(described).collect();
        assert_eq!(distinct.len(), 280, "no description repeats within 280");
        assert_eq!(
            serde_json::to_value(&*tools[5].input_schema).unwrap(),
            json!({"type": "object", "properties": {"text": {"type": "string"}}})
        );
    }

    #[test]
    fn some_but_not_all_mention_a_ledger() {
        let ledgers = tools(20)
            .iter()
            .filter(|tool| tool.description.as_deref().unwrap().contains("ledger"))
            .count();
        assert_eq!(ledgers, 5);
        assert!(description(0).contains("ledger"));
        assert!(!description(1).contains("ledger"));
    }

    #[test]
    fn only_listed_names_are_extra_tools() {
        assert_eq!(index("extra_000", 3), Some(0));
        assert_eq!(index("extra_002", 3), Some(2));
        for other in [
            "extra_003",
            "extra_2",
            "extra_0002",
            "extra_",
            "echo",
            "extra_x",
        ] {
            assert_eq!(index(other, 3), None, "{other}");
        }
        assert_eq!(index("extra_1000", 1001), Some(1000));
    }

    #[test]
    fn a_call_echoes_its_text() {
        let arguments = json!({"text": "hi"}).as_object().cloned();
        let result = call(arguments.as_ref()).unwrap();
        assert_eq!(result.content[0].as_text().unwrap().text, "hi");
        assert!(call(None).is_err());
        let wrong = json!({"text": 3}).as_object().cloned();
        assert!(call(wrong.as_ref()).is_err());
    }
}
