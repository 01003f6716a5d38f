//! Finding tools by words (the tool table and a connection's catalog).

use rmcp::model::Tool;

use super::model::Row;

/// A search: every word must appear, ignoring ASCII case, in the tool's
/// name, title or description. An empty search matches every tool.
#[derive(Debug)]
pub(crate) struct ToolSearch {
    query: String,
    words: Vec<Vec<u8>>,
}

/// One tool found, with its connection's row (for the state badge).
#[derive(Debug)]
pub(crate) struct Hit<'a> {
    pub(crate) connection: &'a str,
    pub(crate) tool: &'a Tool,
    pub(crate) row: Option<&'a Row>,
}

impl ToolSearch {
    pub(crate) fn new(query: &str) -> Self {
        ToolSearch {
            query: query.trim().to_owned(),
            words: query
                .split_whitespace()
                .map(|word| word.to_ascii_lowercase().into_bytes())
                .collect(),
        }
    }

    pub(crate) fn query(&self) -> &str {
        &self.query
    }

    pub(crate) fn matches(&self, tool: &Tool) -> bool {
        let texts = [
            Some(tool.name.as_ref()),
            tool.title.as_deref(),
            tool.description.as_deref(),
        ];
        self.words.iter().all(|word| {
            texts
                .iter()
                .flatten()
                .any(|text| contains_ignoring_case(text.as_bytes(), word))
        })
    }
}

/// Whether `haystack` holds `needle` (already lowercase), ignoring ASCII
/// case, without allocating (20,000 tools are scanned per search).
fn contains_ignoring_case(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn tool(name: &str, description: &str) -> Tool {
        Tool::new(name.to_owned(), description.to_owned(), Arc::default())
    }

    #[test]
    fn every_word_must_match_somewhere() {
        let ledger = tool("extra_001", "Reads the quarterly Ledger for region 7");
        let search = ToolSearch::new("  ledger  QUARTERLY ");
        assert!(search.matches(&ledger));
        assert_eq!(search.query(), "ledger  QUARTERLY");
        assert!(ToolSearch::new("extra ledger").matches(&ledger));
        assert!(!ToolSearch::new("ledger invoice").matches(&ledger));
        assert!(ToolSearch::new("").matches(&ledger));
        assert!(!ToolSearch::new("ledgers").matches(&ledger));
    }
}
