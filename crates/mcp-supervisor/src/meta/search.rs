//! `search_mcp_tools` scoring (docs/SUPERVISION.md, "Meta-tools"), a pure function.

use rmcp::model::Tool;

/// Default and bounds of `limit`.
pub const DEFAULT_LIMIT: usize = 8;
pub const MAX_LIMIT: usize = 20;

/// Ranks `tools` against `query`: terms are the lowercased query split on
/// whitespace; each term scores once by the first rule that applies (name
/// equals +60, starts with +35, contains +25, description contains +10), plus
/// 5 per matched term. Tools matching no term are dropped; the rest sort by
/// score, then name; at most `limit` (clamped to 1..=20) are kept.
pub fn search<'a>(tools: &'a [Tool], query: &str, limit: Option<i64>) -> Vec<&'a Tool> {
    let terms: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let limit = clamp_limit(limit);
    let mut scored: Vec<(u32, &Tool)> = tools
        .iter()
        .filter_map(|tool| {
            let score = score(tool, &terms);
            (score > 0).then_some((score, tool))
        })
        .collect();
    scored.sort_by(|(a_score, a), (b_score, b)| {
        b_score.cmp(a_score).then_with(|| a.name.cmp(&b.name))
    });
    scored
        .into_iter()
        .take(limit)
        .map(|(_, tool)| tool)
        .collect()
}

fn clamp_limit(limit: Option<i64>) -> usize {
    match limit {
        None => DEFAULT_LIMIT,
        Some(limit) => limit.clamp(1, MAX_LIMIT as i64) as usize,
    }
}

fn score(tool: &Tool, terms: &[String]) -> u32 {
    let name = tool.name.to_lowercase();
    let description = tool
        .description
        .as_deref()
        .map(str::to_lowercase)
        .unwrap_or_default();
    terms
        .iter()
        .map(|term| {
            let rule = if name == *term {
                60
            } else if name.starts_with(term.as_str()) {
                35
            } else if name.contains(term.as_str()) {
                25
            } else if description.contains(term.as_str()) {
                10
            } else {
                return 0;
            };
            rule + 5
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn tool(name: &'static str, description: &'static str) -> Tool {
        Tool::new(name, description, Arc::new(serde_json::Map::new()))
    }

    fn names(found: Vec<&Tool>) -> Vec<String> {
        found.into_iter().map(|t| t.name.to_string()).collect()
    }

    #[test]
    fn scores_by_the_first_matching_rule_per_term() {
        let tools = vec![
            tool("search", "find things"),             // equals: 65
            tool("search_repos", "find repositories"), // starts with: 40
            tool("code_search", "grep code"),          // contains: 30
            tool("lookup", "search by key"),           // description: 15
            tool("unrelated", "nothing here"),
        ];
        assert_eq!(
            names(search(&tools, "Search", None)),
            vec!["search", "search_repos", "code_search", "lookup"]
        );
    }

    #[test]
    fn each_term_adds_its_score_and_ties_sort_by_name() {
        let tools = vec![
            tool("b_issue", "create an issue"),
            tool("a_issue", "create an issue"),
            tool("list_repos", "list repositories"),
        ];
        // "issue": both *_issue contain it (25+5) and "create" matches their
        // description (10+5): 45 each, tie broken by name.
        assert_eq!(
            names(search(&tools, "issue create", None)),
            vec!["a_issue", "b_issue"]
        );
    }

    #[test]
    fn limit_defaults_to_eight_and_is_clamped() {
        let tools: Vec<Tool> = (0..30)
            .map(|i| tool(Box::leak(format!("t{i:02}").into_boxed_str()), "x"))
            .collect();
        assert_eq!(search(&tools, "t", None).len(), 8);
        assert_eq!(search(&tools, "t", Some(0)).len(), 1);
        assert_eq!(search(&tools, "t", Some(-3)).len(), 1);
        assert_eq!(search(&tools, "t", Some(500)).len(), 20);
        assert_eq!(search(&tools, "   ", None).len(), 0);
    }
}
