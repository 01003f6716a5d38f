//! A connection's catalog: its tool list after our allowlist, cached.

use std::collections::HashMap;

use rmcp::model::Tool;

use crate::config::ConnectionConfig;

/// The tools of one connection that agents may use.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    pub connection: String,
    /// Allowlisted tools, in the upstream's order.
    pub tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// Applies `config`'s allowlist to what the upstream listed. The upstream is
    /// never trusted to filter: a tool not allowed here does not exist for agents.
    pub fn new(config: &ConnectionConfig, listed: Vec<Tool>) -> Self {
        let tools: Vec<Tool> = listed
            .into_iter()
            .filter(|tool| config.allows_tool(&tool.name))
            .collect();
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(index, tool)| (tool.name.to_string(), index))
            .collect();
        Catalog {
            connection: config.name.clone(),
            tools,
            by_name,
        }
    }

    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Whether the tool's annotations say a repeat cannot duplicate a side effect.
pub fn retry_safe(tool: &Tool) -> bool {
    tool.annotations.as_ref().is_some_and(|annotations| {
        annotations.read_only_hint == Some(true) || annotations.idempotent_hint == Some(true)
    })
}
