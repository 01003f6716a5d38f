//! A connection's catalog: what its upstream offers (tools after our
//! allowlist, prompts, resources, resource templates, capabilities), cached.

use foldhash::HashMap;
use std::sync::{Arc, Weak};

use rmcp::model::{JsonObject, Prompt, Resource, ResourceTemplate, ServerCapabilities, Tool};

use crate::{
    config::ConnectionConfig,
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
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(index, tool)| (tool.name.to_string(), index))
            .collect();
        Catalog {
            connection: config.name.clone(),
            tools,
            by_name,
            prompts,
            resources,
            templates,
            capabilities,
            instructions,
        }
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
