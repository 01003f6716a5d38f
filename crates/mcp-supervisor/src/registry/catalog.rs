//! A connection's catalog: what its upstream offers (tools after our
//! allowlist, prompts, resources, resource templates, capabilities), cached.

use foldhash::HashMap;
use std::sync::{Arc, Weak};

use rmcp::model::{JsonObject, Prompt, Resource, ResourceTemplate, ServerCapabilities, Tool};

use crate::{
    config::ConnectionConfig,
    contracts::{Contract, ItemKind, Judged, Verdict},
    session::{ListKind, Surface},
};

/// What one connection offers agents.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    pub connection: String,
    /// Allowlisted tools, in the upstream's order.
    pub tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
    /// Prompts, resources and resource templates, as listed (the tool
    /// allowlist does not apply to them).
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    /// What the upstream declared at initialize.
    pub capabilities: ServerCapabilities,
    /// The upstream's instructions, if it gave any.
    pub instructions: Option<String>,
    /// Every listed item's contract and what the contract book said of it
    /// (docs/CONTRACTS.md); held items are not in the lists above.
    pub contracts: Arc<Judged>,
    /// Held tools, by upstream name, with what a call of one is told.
    held_tools: HashMap<String, String>,
}

impl Catalog {
    /// Applies `config`'s allowlist to what the upstream listed. The upstream is
    /// never trusted to filter: a tool not allowed here does not exist for agents.
    /// Schemas identical to ones already cached are shared through `schemas`.
    pub fn new(config: &ConnectionConfig, listed: Surface, schemas: &mut SchemaInterner) -> Self {
        let Surface {
            tools: listed,
            prompts,
            resources,
            templates,
            capabilities,
            instructions,
        } = listed;
        let tools: Vec<Tool> = listed
            .into_iter()
            .filter(|tool| config.allows_tool(&tool.name))
            .map(|mut tool| {
                tool.input_schema = schemas.intern(tool.input_schema);
                tool.output_schema = tool.output_schema.map(|schema| schemas.intern(schema));
                tool
            })
            .collect();
        let by_name = index(&tools);
        Catalog {
            connection: config.name.clone(),
            tools,
            by_name,
            prompts,
            resources,
            templates,
            capabilities,
            instructions,
            contracts: Arc::default(),
            held_tools: HashMap::default(),
        }
    }

    /// Every listed item's contract (allowlisted tools, prompts, resource
    /// templates).
    pub fn listed_contracts(&self) -> Vec<Contract> {
        let tools = self.tools.iter().map(Contract::of_tool);
        let prompts = self.prompts.iter().map(Contract::of_prompt);
        let templates = self.templates.iter().map(Contract::of_template);
        tools.chain(prompts).chain(templates).collect()
    }

    /// Records `judged` and withdraws what it holds from the lists: a held
    /// tool's call is answered with `refusal(tool, verdict)` instead.
    pub fn withhold(&mut self, judged: Judged, refusal: impl Fn(&str, &Verdict) -> String) {
        let held =
            |kind: ItemKind, name: &str| judged.held(kind).any(|seen| seen.contract.name == name);
        self.held_tools = judged
            .held(ItemKind::Tool)
            .map(|seen| {
                let name = seen.contract.name.clone();
                let message = refusal(&name, &seen.verdict);
                (name, message)
            })
            .collect();
        if !self.held_tools.is_empty() {
            self.tools
                .retain(|tool| !self.held_tools.contains_key(tool.name.as_ref()));
            self.by_name = index(&self.tools);
        }
        self.prompts
            .retain(|prompt| !held(ItemKind::Prompt, &prompt.name));
        self.templates
            .retain(|template| !held(ItemKind::ResourceTemplate, &template.name));
        self.contracts = Arc::new(judged);
    }

    /// What a call of held tool `name` is told, if it is held.
    pub fn held_tool(&self, name: &str) -> Option<&str> {
        self.held_tools.get(name).map(String::as_str)
    }

    /// The held tools' upstream names.
    pub fn held_tools(&self) -> impl Iterator<Item = &str> {
        self.held_tools.keys().map(String::as_str)
    }

    pub fn prompt(&self, name: &str) -> Option<&Prompt> {
        self.prompts.iter().find(|prompt| prompt.name == name)
    }

    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The lists it has anything in (templates count with resources).
    pub fn offered_lists(&self) -> Vec<ListKind> {
        ListKind::ALL
            .into_iter()
            .filter(|list| match list {
                ListKind::Tools => !self.tools.is_empty(),
                ListKind::Prompts => !self.prompts.is_empty(),
                ListKind::Resources => !(self.resources.is_empty() && self.templates.is_empty()),
            })
            .collect()
    }

    /// The lists whose content differs in `newer` (templates count with
    /// resources, as `resources/list_changed` covers both).
    pub fn changed_lists(&self, newer: &Catalog) -> Vec<ListKind> {
        ListKind::ALL
            .into_iter()
            .filter(|list| match list {
                ListKind::Tools => self.tools != newer.tools,
                ListKind::Prompts => self.prompts != newer.prompts,
                ListKind::Resources => {
                    self.resources != newer.resources || self.templates != newer.templates
                }
            })
            .collect()
    }
}

/// Each tool's position by name.
fn index(tools: &[Tool]) -> HashMap<String, usize> {
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| (tool.name.to_string(), index))
        .collect()
}

/// Shares identical JSON schemas between cached catalogs. Many connections
/// often go to the same kind of server and list the same tools, and the schema
/// maps are most of a cached tool's memory (about 16 MiB for 1,000 connections
/// to one server before this).
#[derive(Debug, Default)]
pub struct SchemaInterner {
    /// Canonical JSON text → the shared schema, while any catalog holds it.
    schemas: HashMap<String, Weak<JsonObject>>,
    /// Prune dead entries when the map grows past this.
    prune_at: usize,
}

impl SchemaInterner {
    /// `schema`, or an equal one already held by another catalog.
    pub fn intern(&mut self, schema: Arc<JsonObject>) -> Arc<JsonObject> {
        // Equal text means equal maps (keys serialize in map order), so
        // sharing never changes what any catalog says.
        let Ok(key) = serde_json::to_string(&*schema) else {
            return schema;
        };
        if let Some(shared) = self.schemas.get(&key).and_then(Weak::upgrade) {
            return shared;
        }
        self.schemas.insert(key, Arc::downgrade(&schema));
        if self.schemas.len() > self.prune_at {
            self.schemas.retain(|_, held| held.strong_count() > 0);
            self.prune_at = (self.schemas.len() * 2).max(64);
        }
        schema
    }

    /// Distinct schemas currently shared.
    /// Number of tools.
    pub fn len(&self) -> usize {
        self.schemas
            .values()
            .filter(|held| held.strong_count() > 0)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: serde_json::Value) -> Arc<JsonObject> {
        Arc::new(value.as_object().unwrap().clone())
    }

    #[test]
    fn equal_schemas_are_shared_and_different_ones_are_not() {
        let mut interner = SchemaInterner::default();
        let first = interner.intern(schema(json!({"type": "object", "properties": {"a": {}}})));
        let equal = interner.intern(schema(json!({"properties": {"a": {}}, "type": "object"})));
        let other = interner.intern(schema(json!({"type": "object"})));
        assert!(Arc::ptr_eq(&first, &equal));
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(*equal, *first);
        assert_eq!(interner.len(), 2);
    }

    #[test]
    fn schemas_no_catalog_holds_are_forgotten() {
        let mut interner = SchemaInterner::default();
        let held = interner.intern(schema(json!({"type": "object"})));
        drop(interner.intern(schema(json!({"type": "string"}))));
        assert_eq!(interner.len(), 1);
        let again = interner.intern(schema(json!({"type": "string"})));
        assert!(!Arc::ptr_eq(&held, &again));
        assert_eq!(interner.len(), 2);
    }
}
