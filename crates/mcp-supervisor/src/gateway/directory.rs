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

/// Where an exposed tool leads, with what a call of it needs to know of its
/// listing: one lookup answers a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRoute {
    pub target: Target,
    /// Its contract hash, as listed (docs/CONTRACTS.md).
    pub contract: Option<Arc<str>>,
    /// Whether its input schema marks arguments for `Mcp-Param-*` headers
    /// (SEP-2243), which rmcp's server checks on a call.
    pub promotes_headers: bool,
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
///
/// Tools and prompts are held per connection, in [`Share`]s built from one
/// catalog each: a view rebuilt after one connection's catalog changed
/// builds that connection's share and keeps every other one of the view
/// before it (when names are prefixed, so no two connections' names can
/// clash: docs/DECISIONS.md #177). A share's resources and templates also
/// depend on which of its URIs another connection serves (those are exposed
/// prefixed): a share is kept only while each is shared as it was.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    /// The listed connections' shares, in connection name order.
    parts: Vec<Arc<Share>>,
    /// The retired connections' shares, in connection name order: routed,
    /// not listed (see [`Directory::assemble`]).
    routed_only: Vec<Arc<Share>>,
    /// What the upstreams offer together (see [`Directory::build`]).
    pub capabilities: ServerCapabilities,
    /// Names two connections both expose; the first connection's wins.
    pub clashes: Vec<Clash>,
    /// How the names were exposed.
    pub naming: Naming,
    /// The only connection that offers resources, if exactly one does: any
    /// URI no route knows goes there (templates may not cover every URI).
    sole_resource_server: Option<String>,
    /// Resource URIs and templates two listed connections both serve
    /// (exposed in their prefixed form), and two retired ones.
    shared: Shared,
    shared_hidden: Shared,
}

/// The resource URIs and the URI templates that more than one catalog has.
#[derive(Debug, Clone, Default)]
struct Shared {
    uris: HashSet<String>,
    templates: HashSet<String>,
}

impl Shared {
    fn of(catalogs: &[Arc<Catalog>]) -> Shared {
        Shared {
            uris: shared(catalogs, |catalog| {
                catalog.resources.iter().map(|r| r.uri.as_str()).collect()
            }),
            templates: shared(catalogs, |catalog| {
                catalog
                    .templates
                    .iter()
                    .map(|t| t.uri_template.as_str())
                    .collect()
            }),
        }
    }

    /// Whether `catalog`'s URIs and templates are each shared in `self` as
    /// they are in `before`: then they are exposed alike under both.
    fn exposes_alike(&self, before: &Shared, catalog: &Catalog) -> bool {
        let alike = |now: &HashSet<String>, then: &HashSet<String>, item: &str| {
            now.contains(item) == then.contains(item)
        };
        catalog
            .resources
            .iter()
            .all(|resource| alike(&self.uris, &before.uris, &resource.uri))
            && catalog
                .templates
                .iter()
                .all(|template| alike(&self.templates, &before.templates, &template.uri_template))
    }
}

/// One connection's tools, prompts, resources and templates under their
/// exposed names, with the routes back: what its catalog decides (and, for
/// resources, which URIs another connection serves too).
#[derive(Debug)]
struct Share {
    /// The catalog it was built from (a later view keeps the share while
    /// the connection's catalog is this one).
    catalog: Arc<Catalog>,
    tools: Vec<Tool>,
    prompts: Vec<Prompt>,
    /// Shared: a call holds its route while it runs.
    tool_routes: HashMap<String, Arc<ToolRoute>>,
    prompt_routes: HashMap<String, Target>,
    /// Its names another connection (or an earlier item of its own) has.
    clashes: Vec<Clash>,
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    resource_routes: HashMap<String, Target>,
    /// Exposed template → target, in its catalog's order.
    template_routes: Vec<(String, Target)>,
}

/// The names earlier connections claimed, while shares are built in
/// connection name order: unprefixed, the first connection keeps a name.
#[derive(Default)]
struct Claimed<'a> {
    tools: HashMap<String, &'a str>,
    prompts: HashMap<String, &'a str>,
}

impl Share {
    /// `catalog`'s share under `naming`: its tools and prompts, less the
    /// names `claimed` by an earlier connection (its clashes).
    fn build<'a>(
        naming: Naming,
        catalog: &'a Arc<Catalog>,
        claimed: &mut Claimed<'a>,
        shared: &Shared,
    ) -> Share {
        let connection = catalog.connection.as_str();
        let mut part = Share {
            catalog: catalog.clone(),
            tools: Vec::with_capacity(catalog.tools.len()),
            prompts: Vec::new(),
            tool_routes: HashMap::with_capacity_and_hasher(catalog.tools.len(), Default::default()),
            prompt_routes: HashMap::default(),
            clashes: Vec::new(),
            resources: Vec::with_capacity(catalog.resources.len()),
            templates: Vec::with_capacity(catalog.templates.len()),
            resource_routes: HashMap::default(),
            template_routes: Vec::with_capacity(catalog.templates.len()),
        };
        let contracts: HashMap<&str, &str> = catalog
            .contracts
            .items
            .iter()
            .filter(|seen| seen.contract.kind == crate::contracts::ItemKind::Tool)
            .map(|seen| (seen.contract.name.as_str(), seen.contract.sha256.as_str()))
            .collect();
        // Whether `exposed` is still free for this share (recorded as taken
        // when it is); a clash is kept, and the caller routes it.
        let mut claim = |kind: Named, exposed: &str, part: &mut Share| {
            let (routed, earlier) = match kind {
                Named::Tool => (part.tool_routes.contains_key(exposed), &mut claimed.tools),
                Named::Prompt => (
                    part.prompt_routes.contains_key(exposed),
                    &mut claimed.prompts,
                ),
            };
            let kept = match earlier.get(exposed) {
                Some(kept) => Some(*kept),
                None => routed.then_some(connection),
            };
            if let Some(kept) = kept {
                part.clashes.push(Clash {
                    kind,
                    name: exposed.to_owned(),
                    kept: kept.to_owned(),
                    hidden: connection.to_owned(),
                });
                return false;
            }
            if !naming.prefixed() {
                earlier.insert(exposed.to_owned(), connection);
            }
            true
        };
        for tool in &catalog.tools {
            let exposed = naming.exposed(connection, &tool.name);
            if claim(Named::Tool, &exposed, &mut part) {
                let route = ToolRoute {
                    target: Target::new(connection, &tool.name),
                    contract: contracts
                        .get(tool.name.as_ref())
                        .map(|sha256| Arc::from(*sha256)),
                    promotes_headers: mcp_headers::promotes_headers(&tool.input_schema),
                };
                part.tool_routes.insert(exposed.clone(), Arc::new(route));
                let mut tool = tool.clone();
                tool.name = exposed.into();
                part.tools.push(tool);
            }
        }
        // Held tools are not listed, but a call of one still reaches its
        // connection, which says why it is held.
        for tool in catalog.held_tools() {
            let exposed = naming.exposed(connection, tool);
            if claim(Named::Tool, &exposed, &mut part) {
                let route = ToolRoute {
                    target: Target::new(connection, tool),
                    contract: None,
                    promotes_headers: false,
                };
                part.tool_routes.insert(exposed, Arc::new(route));
            }
        }
        for prompt in &catalog.prompts {
            let exposed = naming.exposed(connection, &prompt.name);
            if claim(Named::Prompt, &exposed, &mut part) {
                part.prompt_routes
                    .insert(exposed.clone(), Target::new(connection, &prompt.name));
                let mut prompt = prompt.clone();
                prompt.name = exposed;
                part.prompts.push(prompt);
            }
        }
        for resource in &catalog.resources {
            let exposed = exposed_uri(connection, &resource.uri, &shared.uris);
            let mut resource = resource.clone();
            part.resource_routes
                .insert(exposed.clone(), Target::new(connection, &resource.uri));
            resource.uri = exposed;
            part.resources.push(resource);
        }
        for template in &catalog.templates {
            let exposed = exposed_uri(connection, &template.uri_template, &shared.templates);
            let mut template = template.clone();
            part.template_routes.push((
                exposed.clone(),
                Target::new(connection, &template.uri_template),
            ));
            template.uri_template = exposed;
            part.templates.push(template);
        }
        part
    }
}

impl Directory {
    /// Merges `catalogs` (in connection name order) under `naming`.
    ///
    /// Capabilities: tools always (the gateway has its meta-tools); prompts,
    /// resources, completions and logging when any upstream offers them;
    /// `listChanged` wherever offered, because connections coming and going
    /// change the lists too; resource `subscribe` when any upstream offers it.
    pub fn build(naming: Naming, catalogs: &[Arc<Catalog>]) -> Directory {
        Directory::assemble(naming, catalogs, &[], None)
    }

    /// Merges the `listed` catalogs (in connection name order) under
    /// `naming`, and routes the names of the `hidden` ones without listing
    /// them: connections that are retired keep their names routable, so a
    /// request for one is answered with the supervisor's value rather than
    /// "unknown" (a name a listed connection has keeps its route).
    ///
    /// With prefixed names, each connection's share whose catalog is the one
    /// `before` was built from is shared with it, not built again.
    pub(crate) fn assemble(
        naming: Naming,
        listed: &[Arc<Catalog>],
        hidden: &[Arc<Catalog>],
        before: Option<&Directory>,
    ) -> Directory {
        let before = before.filter(|before| naming.prefixed() && before.naming == naming);
        let (shared, shared_hidden) = (Shared::of(listed), Shared::of(hidden));
        let shares =
            |catalogs: &[Arc<Catalog>], shared: &Shared, then: fn(&Directory) -> &Shared| {
                let mut claimed = Claimed::default();
                catalogs
                    .iter()
                    .map(|catalog| {
                        let kept = before.and_then(|before| {
                            before.part(&catalog.connection).filter(|part| {
                                Arc::ptr_eq(&part.catalog, catalog)
                                    && shared.exposes_alike(then(before), catalog)
                            })
                        });
                        match kept {
                            Some(part) => part.clone(),
                            None => Arc::new(Share::build(naming, catalog, &mut claimed, shared)),
                        }
                    })
                    .collect::<Vec<_>>()
            };
        let parts = shares(listed, &shared, |before| &before.shared);
        // A retired connection's clashes were reported while it was listed.
        let clashes = parts
            .iter()
            .flat_map(|part| part.clashes.iter().cloned())
            .collect();
        let mut resource_servers = listed
            .iter()
            .filter(|catalog| catalog.capabilities.resources.is_some());
        let sole_resource_server = match (resource_servers.next(), resource_servers.next()) {
            (Some(only), None) => Some(only.connection.clone()),
            _ => None,
        };
        let mut directory = Directory {
            naming,
            parts,
            routed_only: shares(hidden, &shared_hidden, |before| &before.shared_hidden),
            clashes,
            sole_resource_server,
            shared,
            shared_hidden,
            ..Directory::default()
        };
        for catalog in listed {
            directory.add_capabilities(&catalog.capabilities);
        }
        directory
    }

    /// Every share, the listed ones first: what routes a name or URI.
    fn shares(&self) -> impl Iterator<Item = &Arc<Share>> {
        self.parts.iter().chain(&self.routed_only)
    }

    /// Connection `connection`'s share, listed or only routed.
    fn part(&self, connection: &str) -> Option<&Arc<Share>> {
        let find = |parts: &'_ [Arc<Share>]| {
            parts
                .binary_search_by(|part| part.catalog.connection.as_str().cmp(connection))
                .ok()
        };
        find(&self.parts)
            .map(|at| &self.parts[at])
            .or_else(|| find(&self.routed_only).map(|at| &self.routed_only[at]))
    }

    /// What `find` finds of exposed `name` in the share that routes it:
    /// prefixed, the one its prefix names; else the first (listed before
    /// only routed) where it finds something. One map lookup a share.
    fn routed<'a, T: ?Sized + 'a>(
        &'a self,
        name: &str,
        find: impl Fn(&'a Share) -> Option<&'a T>,
    ) -> Option<&'a T> {
        if self.naming.prefixed() {
            return find(self.part(super::naming::connection_of(name)?)?);
        }
        self.shares().find_map(|part| find(part))
    }

    /// Every listed tool, in connection name order.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.parts.iter().flat_map(|part| &part.tools)
    }

    /// Every listed prompt, in connection name order.
    pub fn prompts(&self) -> impl Iterator<Item = &Prompt> {
        self.parts.iter().flat_map(|part| &part.prompts)
    }

    /// Every listed resource, in connection name order.
    pub fn resources(&self) -> impl Iterator<Item = &Resource> {
        self.parts.iter().flat_map(|part| &part.resources)
    }

    /// Every listed resource template, in connection name order.
    pub fn templates(&self) -> impl Iterator<Item = &ResourceTemplate> {
        self.parts.iter().flat_map(|part| &part.templates)
    }

    /// Every template route, listed connections' first, each in connection
    /// name order (matching tries them in that order).
    fn template_routes(&self) -> impl Iterator<Item = &(String, Target)> {
        self.shares().flat_map(|part| &part.template_routes)
    }

    /// The listed definition of exposed tool `exposed`.
    pub fn tool_definition(&self, exposed: &str) -> Option<&Tool> {
        self.routed(exposed, |part| {
            part.tool_routes.contains_key(exposed).then_some(part)
        })?
        .tools
        .iter()
        .find(|tool| tool.name == exposed)
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

    /// The route of an exposed tool name.
    pub fn tool_route(&self, exposed: &str) -> Option<&Arc<ToolRoute>> {
        self.routed(exposed, |part| part.tool_routes.get(exposed))
    }

    /// The tool behind an exposed name.
    pub fn tool(&self, exposed: &str) -> Option<&Target> {
        self.tool_route(exposed).map(|route| &route.target)
    }

    /// Whether exposed tool `exposed` marks arguments for headers.
    pub fn promotes_headers(&self, exposed: &str) -> bool {
        self.tool_route(exposed)
            .is_some_and(|route| route.promotes_headers)
    }

    /// The prompt behind an exposed name.
    pub fn prompt(&self, exposed: &str) -> Option<&Target> {
        self.routed(exposed, |part| part.prompt_routes.get(exposed))
    }

    /// The template behind an exposed URI template (completion references).
    pub fn template(&self, exposed: &str) -> Option<&Target> {
        self.template_routes()
            .find(|(template, _)| template == exposed)
            .map(|(_, target)| target)
    }

    /// Which connection serves `uri`: a listed resource, a prefixed URI, the
    /// first template (in connection name order) it matches, or the only
    /// connection that offers resources.
    pub fn resource(&self, uri: &str) -> Option<Target> {
        if let Some(target) = self.shares().find_map(|part| part.resource_routes.get(uri)) {
            return Some(target.clone());
        }
        if let Some((connection, original)) = split_prefixed_uri(uri)
            && self.part(connection).is_some()
        {
            return Some(Target::new(connection, original));
        }
        for (template, target) in self.template_routes() {
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
        if self.shared.uris.contains(&target.name) || self.shared.templates.contains(&target.name) {
            prefixed_uri(&target.connection, &target.name)
        } else {
            target.name.clone()
        }
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
mod tests;
