//! The gateway's merged view of every upstream: what downstream clients list
//! (tools, prompts, resources and resource templates under their exposed
//! names), the route from each exposed name back to its connection, and the
//! capabilities the upstreams add up to. Built from the connections' catalogs
//! by a pure function, so naming, clashes and routing are tested without I/O.
//!
//! Tool and prompt names follow [`Naming`]. Resource URIs pass through
//! unchanged; a URI (or URI template) that two connections both list is
//! exposed by each as `mcp-supervisor://{connection}/{uri}` instead.

use foldhash::{HashMap, HashSet};
use std::sync::Arc;

use rmcp::model::{
    JsonObject, Prompt, PromptsCapability, Resource, ResourceTemplate, ResourcesCapability,
    ServerCapabilities, TASKS_EXTENSION_ID, Tool,
};

use super::naming::{Naming, prefixed_uri, split_prefixed_uri};
use crate::{codec::mcp_headers, registry::Catalog};

/// Where an exposed name leads: a connection, and the name (or URI) there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub connection: String,
    pub name: String,
}

impl Target {
    pub(crate) fn new(connection: &str, name: &str) -> Self {
        Target {
            connection: connection.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// The kinds of named items a connection offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    Tool,
    Prompt,
}

impl Named {
    pub fn as_str(self) -> &'static str {
        match self {
            Named::Tool => "tool",
            Named::Prompt => "prompt",
        }
    }
}

/// Two connections offer the same exposed name (only possible unprefixed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clash {
    pub kind: Named,
    pub name: String,
    /// The connection whose item is exposed (first by name), and the other.
    pub kept: String,
    pub hidden: String,
}

impl std::fmt::Display for Clash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "connections '{}' and '{}' both offer {} '{}'",
            self.kept,
            self.hidden,
            self.kind.as_str(),
            self.name
        )
    }
}

/// Everything the gateway exposes of its upstreams, with the routes back.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    /// What the upstreams offer together (see [`Directory::build`]).
    pub capabilities: ServerCapabilities,
    /// Names two connections both expose; the first connection's wins.
    pub clashes: Vec<Clash>,
    /// How the names were exposed.
    pub naming: Naming,
    tool_routes: HashMap<String, Target>,
    /// Each exposed tool's contract hash, as listed (docs/CONTRACTS.md).
    tool_contracts: HashMap<String, Arc<str>>,
    /// Exposed tools whose input schema marks arguments for `Mcp-Param-*`
    /// headers (SEP-2243), which rmcp's server checks on a call.
    header_tools: HashSet<String>,
    prompt_routes: HashMap<String, Target>,
    resource_routes: HashMap<String, Target>,
    /// Exposed template → target, in connection name order (matching tries
    /// them in that order).
    template_routes: Vec<(String, Target)>,
    /// The only connection that offers resources, if exactly one does: any
    /// URI no route knows goes there (templates may not cover every URI).
    sole_resource_server: Option<String>,
    /// Resource URIs and templates two connections both serve (exposed in
    /// their prefixed form).
    shared: HashSet<String>,
    /// The connections whose catalogs are here (listed or only routed):
    /// the only ones a prefixed URI may name.
    known: HashSet<String>,
}

impl Directory {
    /// Merges `catalogs` (in connection name order) under `naming`.
    ///
    /// Capabilities: tools always (the gateway has its meta-tools); prompts,
    /// resources, completions and logging when any upstream offers them;
    /// `listChanged` wherever offered, because connections coming and going
    /// change the lists too; resource `subscribe` when any upstream offers it.
    pub fn build(naming: Naming, catalogs: &[Arc<Catalog>]) -> Directory {
        // Sized up front: growing a vector of 20,000 tools (and its routes)
        // step by step moves them again and again.
        let tools: usize = catalogs.iter().map(|catalog| catalog.tools.len()).sum();
        let mut directory = Directory {
            naming,
            tools: Vec::with_capacity(tools),
            tool_routes: HashMap::with_capacity_and_hasher(tools, Default::default()),
            tool_contracts: HashMap::with_capacity_and_hasher(tools, Default::default()),
            ..Directory::default()
        };
        let shared_uris = shared(catalogs, |catalog| {
            catalog.resources.iter().map(|r| r.uri.as_str()).collect()
        });
        let shared_templates = shared(catalogs, |catalog| {
            catalog
                .templates
                .iter()
                .map(|t| t.uri_template.as_str())
                .collect()
        });
        directory.shared = shared_uris.union(&shared_templates).cloned().collect();
        let mut resource_servers = Vec::new();
        for catalog in catalogs {
            let connection = catalog.connection.as_str();
            directory.known.insert(connection.to_owned());
            let contracts: HashMap<&str, &str> = catalog
                .contracts
                .items
                .iter()
                .filter(|seen| seen.contract.kind == crate::contracts::ItemKind::Tool)
                .map(|seen| (seen.contract.name.as_str(), seen.contract.sha256.as_str()))
                .collect();
            for tool in &catalog.tools {
                let exposed = naming.exposed(connection, &tool.name);
                if directory.claim(Named::Tool, &exposed, connection, &tool.name) {
                    if let Some(sha256) = contracts.get(tool.name.as_ref()) {
                        directory
                            .tool_contracts
                            .insert(exposed.clone(), Arc::from(*sha256));
                    }
                    if mcp_headers::promotes_headers(&tool.input_schema) {
                        directory.header_tools.insert(exposed.clone());
                    }
                    let mut tool = tool.clone();
                    tool.name = exposed.into();
                    directory.tools.push(tool);
                }
            }
            // Held tools are not listed, but a call of one still reaches
            // its connection, which says why it is held.
            for tool in catalog.held_tools() {
                let exposed = naming.exposed(connection, tool);
                directory.claim(Named::Tool, &exposed, connection, tool);
            }
            for prompt in &catalog.prompts {
                let exposed = naming.exposed(connection, &prompt.name);
                if directory.claim(Named::Prompt, &exposed, connection, &prompt.name) {
                    let mut prompt = prompt.clone();
                    prompt.name = exposed;
                    directory.prompts.push(prompt);
                }
            }
            for resource in &catalog.resources {
                let exposed = exposed_uri(connection, &resource.uri, &shared_uris);
                let mut resource = resource.clone();
                directory
                    .resource_routes
                    .insert(exposed.clone(), Target::new(connection, &resource.uri));
                resource.uri = exposed;
                directory.resources.push(resource);
            }
            for template in &catalog.templates {
                let exposed = exposed_uri(connection, &template.uri_template, &shared_templates);
                let mut template = template.clone();
                directory.template_routes.push((
                    exposed.clone(),
                    Target::new(connection, &template.uri_template),
                ));
                template.uri_template = exposed;
                directory.templates.push(template);
            }
            if catalog.capabilities.resources.is_some() {
                resource_servers.push(connection.to_owned());
            }
            directory.add_capabilities(&catalog.capabilities);
        }
        if let [only] = resource_servers.as_slice() {
            directory.sole_resource_server = Some(only.clone());
        }
        directory
    }

    /// Routes `exposed` to `connection`'s `name` unless another connection
    /// already has it (a clash: recorded, and the first one keeps it).
    fn claim(&mut self, kind: Named, exposed: &str, connection: &str, name: &str) -> bool {
        let routes = match kind {
            Named::Tool => &mut self.tool_routes,
            Named::Prompt => &mut self.prompt_routes,
        };
        if let Some(kept) = routes.get(exposed) {
            self.clashes.push(Clash {
                kind,
                name: exposed.to_owned(),
                kept: kept.connection.clone(),
                hidden: connection.to_owned(),
            });
            return false;
        }
        routes.insert(exposed.to_owned(), Target::new(connection, name));
        true
    }

    fn add_capabilities(&mut self, upstream: &ServerCapabilities) {
        let ours = &mut self.capabilities;
        if upstream.prompts.is_some() {
            let mut prompts = PromptsCapability::default();
            prompts.list_changed = Some(true);
            ours.prompts = Some(prompts);
        }
        if let Some(theirs) = &upstream.resources {
            let subscribe = theirs.subscribe == Some(true)
                || ours
                    .resources
                    .as_ref()
                    .is_some_and(|resources| resources.subscribe == Some(true));
            let mut resources = ResourcesCapability::default();
            resources.list_changed = Some(true);
            resources.subscribe = subscribe.then_some(true);
            ours.resources = Some(resources);
        }
        if upstream.completions.is_some() {
            ours.completions = Some(JsonObject::new());
        }
        if upstream.logging.is_some() {
            ours.logging = Some(JsonObject::new());
        }
        // Of the extensions, the gateway relays tasks (SEP-2663).
        if upstream.supports_tasks() {
            ours.extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        }
    }

    /// The tool behind an exposed name.
    pub fn tool(&self, exposed: &str) -> Option<&Target> {
        self.tool_routes.get(exposed)
    }

    /// The contract hash of exposed tool `exposed`, as listed.
    pub fn tool_contract(&self, exposed: &str) -> Option<&Arc<str>> {
        self.tool_contracts.get(exposed)
    }

    /// Whether exposed tool `exposed` marks arguments for headers.
    pub fn promotes_headers(&self, exposed: &str) -> bool {
        self.header_tools.contains(exposed)
    }

    /// The prompt behind an exposed name.
    pub fn prompt(&self, exposed: &str) -> Option<&Target> {
        self.prompt_routes.get(exposed)
    }

    /// The template behind an exposed URI template (completion references).
    pub fn template(&self, exposed: &str) -> Option<&Target> {
        self.template_routes
            .iter()
            .find(|(template, _)| template == exposed)
            .map(|(_, target)| target)
    }

    /// Which connection serves `uri`: a listed resource, a prefixed URI, the
    /// first template (in connection name order) it matches, or the only
    /// connection that offers resources.
    pub fn resource(&self, uri: &str) -> Option<Target> {
        if let Some(target) = self.resource_routes.get(uri) {
            return Some(target.clone());
        }
        if let Some((connection, original)) = split_prefixed_uri(uri)
            && self.known.contains(connection)
        {
            return Some(Target::new(connection, original));
        }
        for (template, target) in &self.template_routes {
            if template_matches(template, uri) {
                return Some(Target::new(&target.connection, uri));
            }
        }
        self.sole_resource_server
            .as_deref()
            .map(|connection| Target::new(connection, uri))
    }

    /// The URI (or template) a resource `target` is exposed under, whichever
    /// way a client named it: its own, or, when two connections serve it,
    /// its prefixed form. The access rules judge a resource by this name
    /// (`rights.rs`), so no other spelling of it decides otherwise.
    pub fn exposed_uri(&self, target: &Target) -> String {
        if self.shared.contains(&target.name) {
            prefixed_uri(&target.connection, &target.name)
        } else {
            target.name.clone()
        }
    }

    /// Adds the routes of `catalogs` without listing them: connections that
    /// are retired keep their names routable, so a request for one is
    /// answered with the supervisor's value rather than "unknown". Names
    /// already routed keep their route.
    pub fn route_also(&mut self, naming: Naming, catalogs: &[Arc<Catalog>]) {
        let hidden = Directory::build(naming, catalogs);
        for (name, target) in hidden.tool_routes {
            self.tool_routes.entry(name).or_insert(target);
        }
        for (name, target) in hidden.prompt_routes {
            self.prompt_routes.entry(name).or_insert(target);
        }
        for (uri, target) in hidden.resource_routes {
            self.resource_routes.entry(uri).or_insert(target);
        }
        self.template_routes.extend(hidden.template_routes);
        self.known.extend(hidden.known);
    }
}

/// The strings `items` yields for more than one catalog.
fn shared<'a>(
    catalogs: &'a [Arc<Catalog>],
    items: impl Fn(&'a Catalog) -> HashSet<&'a str>,
) -> HashSet<String> {
    let mut seen = HashSet::default();
    let mut twice = HashSet::default();
    for catalog in catalogs {
        for item in items(catalog) {
            if !seen.insert(item) {
                twice.insert(item.to_owned());
            }
        }
    }
    twice
}

fn exposed_uri(connection: &str, uri: &str, shared: &HashSet<String>) -> String {
    if shared.contains(uri) {
        prefixed_uri(connection, uri)
    } else {
        uri.to_owned()
    }
}

/// Whether `uri` is an expansion of RFC 6570 `template`. Literal text must
/// match exactly; `{var}` stands for text without `/`, `?` or `#`; operator
/// expressions (`{+var}`, `{#var}`, `{/var}`, `{?var}`, …) for any text.
/// Enough to tell which upstream a URI belongs to, not a full parser.
fn template_matches(template: &str, uri: &str) -> bool {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return template == uri;
        };
        parts.push(Part::Literal(&rest[..open]));
        let expression = &rest[open + 1..open + close];
        parts.push(
            if expression.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                Part::Simple
            } else {
                Part::Any
            },
        );
        rest = &rest[open + close + 1..];
    }
    parts.push(Part::Literal(rest));
    matches(&parts, uri)
}

#[derive(Debug, Clone, Copy)]
enum Part<'a> {
    Literal(&'a str),
    /// A simple expansion: one or more characters other than `/`, `?`, `#`.
    Simple,
    /// An operator expansion: any text, possibly empty.
    Any,
}

fn matches(parts: &[Part<'_>], text: &str) -> bool {
    match parts.split_first() {
        None => text.is_empty(),
        Some((Part::Literal(literal), rest)) => text
            .strip_prefix(literal)
            .is_some_and(|text| matches(rest, text)),
        Some((Part::Simple, rest)) => {
            let stop = text.find(['/', '?', '#']).unwrap_or(text.len());
            (1..=stop).any(|end| matches(rest, &text[end..]))
        }
        Some((Part::Any, rest)) => (0..=text.len())
            .filter(|end| text.is_char_boundary(*end))
            .any(|end| matches(rest, &text[end..])),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ResourcesCapability, ToolsCapability};
    use serde_json::json;

    use super::*;
    use crate::{config::Prefix, session::Surface};

    fn catalog(
        connection: &str,
        tools: &[&str],
        uris: &[&str],
        templates: &[&str],
    ) -> Arc<Catalog> {
        let config: crate::config::Config = crate::config::Config::from_toml_str(
            &format!("[connections.{connection}]\ntransport = \"stdio\"\ncommand = \"x\"\n"),
            std::path::Path::new("t.toml"),
            &|_| None,
        )
        .unwrap();
        let mut capabilities = ServerCapabilities::default();
        capabilities.tools = Some(ToolsCapability::default());
        if !uris.is_empty() || !templates.is_empty() {
            let mut resources = ResourcesCapability::default();
            resources.subscribe = Some(true);
            capabilities.resources = Some(resources);
        }
        let surface = Surface {
            tools: tools
                .iter()
                .map(|name| {
                    serde_json::from_value(json!({"name": name, "inputSchema": {"type": "object"}}))
                        .unwrap()
                })
                .collect(),
            prompts: tools
                .iter()
                .map(|name| Prompt::new(format!("p_{name}"), None::<String>, None))
                .collect(),
            resources: uris
                .iter()
                .map(|uri| serde_json::from_value(json!({"uri": uri, "name": uri})).unwrap())
                .collect(),
            templates: templates
                .iter()
                .map(|t| serde_json::from_value(json!({"uriTemplate": t, "name": t})).unwrap())
                .collect(),
            capabilities,
            instructions: None,
        };
        Arc::new(Catalog::new(
            &config.connections[0],
            surface,
            &mut Default::default(),
        ))
    }

    fn names(directory: &Directory) -> Vec<String> {
        directory.tools.iter().map(|t| t.name.to_string()).collect()
    }

    #[test]
    fn prefixed_names_route_back() {
        let catalogs = [
            catalog("a", &["echo"], &[], &[]),
            catalog("b", &["echo"], &[], &[]),
        ];
        let directory = Directory::build(Naming::new(Prefix::Always, 2), &catalogs);
        assert_eq!(names(&directory), ["a__echo", "b__echo"]);
        assert_eq!(directory.tool("b__echo"), Some(&Target::new("b", "echo")));
        assert_eq!(
            directory.prompt("a__p_echo"),
            Some(&Target::new("a", "p_echo"))
        );
        assert!(directory.clashes.is_empty());
    }

    #[test]
    fn unprefixed_clashes_keep_the_first_connection() {
        let catalogs = [
            catalog("a", &["echo", "x"], &[], &[]),
            catalog("b", &["echo"], &[], &[]),
        ];
        let directory = Directory::build(Naming::new(Prefix::Never, 2), &catalogs);
        assert_eq!(names(&directory), ["echo", "x"]);
        assert_eq!(directory.tool("echo"), Some(&Target::new("a", "echo")));
        let clashes: Vec<String> = directory.clashes.iter().map(ToString::to_string).collect();
        assert_eq!(
            clashes,
            [
                "connections 'a' and 'b' both offer tool 'echo'",
                "connections 'a' and 'b' both offer prompt 'p_echo'"
            ]
        );
    }

    #[test]
    fn shared_uris_are_prefixed_and_others_pass_through() {
        let catalogs = [
            catalog("a", &[], &["file:///same", "file:///a"], &["a://{id}"]),
            catalog("b", &[], &["file:///same"], &["b://items/{id}{?q}"]),
        ];
        let directory = Directory::build(Naming::new(Prefix::Always, 2), &catalogs);
        let uris: Vec<&str> = directory.resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "mcp-supervisor://a/file:///same",
                "file:///a",
                "mcp-supervisor://b/file:///same"
            ]
        );
        let route = |uri: &str| directory.resource(uri);
        assert_eq!(route("file:///a"), Some(Target::new("a", "file:///a")));
        assert_eq!(
            route("mcp-supervisor://b/file:///same"),
            Some(Target::new("b", "file:///same"))
        );
        assert_eq!(route("a://42"), Some(Target::new("a", "a://42")));
        assert_eq!(
            route("b://items/7?q=x"),
            Some(Target::new("b", "b://items/7?q=x"))
        );
        assert_eq!(
            route("a://42/more"),
            None,
            "a simple expansion stops at '/'"
        );
        assert_eq!(
            route("c://nothing"),
            None,
            "two resource servers: no fallback"
        );
        assert_eq!(
            directory.template("b://items/{id}{?q}"),
            Some(&Target::new("b", "b://items/{id}{?q}"))
        );
    }

    #[test]
    fn the_only_resource_server_gets_unknown_uris() {
        let catalogs = [
            catalog("a", &["t"], &[], &[]),
            catalog("r", &[], &["x://1"], &[]),
        ];
        let directory = Directory::build(Naming::new(Prefix::Auto, 2), &catalogs);
        assert_eq!(directory.resource("x://2"), Some(Target::new("r", "x://2")));
    }

    #[test]
    fn capabilities_are_the_union() {
        let tools_only = Directory::build(
            Naming::new(Prefix::Auto, 1),
            &[catalog("a", &["t"], &[], &[])],
        );
        assert!(tools_only.capabilities.resources.is_none());
        assert!(tools_only.capabilities.prompts.is_none());
        let catalogs = [
            catalog("a", &["t"], &[], &[]),
            catalog("r", &[], &["x://1"], &[]),
        ];
        let both = Directory::build(Naming::new(Prefix::Auto, 2), &catalogs);
        let resources = both.capabilities.resources.unwrap();
        assert_eq!(
            (resources.subscribe, resources.list_changed),
            (Some(true), Some(true))
        );
    }

    #[test]
    fn template_matching() {
        assert!(template_matches("file:///{path}", "file:///x"));
        assert!(!template_matches("file:///{path}", "file:///"));
        assert!(template_matches("file:///{+path}", "file:///a/b/c"));
        assert!(template_matches(
            "test://template/{id}/data",
            "test://template/42/data"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/42/other"
        ));
        assert!(template_matches("x://{a}{?b,c}", "x://1"));
        assert!(template_matches("x://{a}{?b,c}", "x://1?b=2"));
        assert!(template_matches("plain://uri", "plain://uri"));
        assert!(!template_matches("broken://{x", "broken://y"));
    }
}
