//! The gateway's side of the access rules: the caller of a request, the
//! one decision asked of [`crate::access::Rules`] by every way that reveals
//! or uses something, and its record in the audit log
//! (docs/SECURITY.md, "What each caller may use").
//!
//! Something a caller may not use is, to that caller, not there: left out
//! of its lists, and its use answered exactly as an unknown one's.

use std::{borrow::Cow, sync::Arc, time::Instant};

use rmcp::{RoleServer, service::RequestContext};

use super::{
    audit::{Audit, Record},
    directory::{Directory, Target},
};
use rmcp::model::CallToolResult;

use super::downstream::DownstreamSession;
use super::quotas::{Quotas, Started};
use crate::{
    access::{Caller, Decision, Item, Kind, Limits, Rules},
    events::ListKind,
};

/// The rules, the limits and the audit log, shared by every request.
#[derive(Debug, Default)]
pub(super) struct Rights {
    rules: Rules,
    pub(super) quotas: Arc<Quotas>,
    audit: Audit,
}

impl Rights {
    pub(super) fn new(rules: Rules, limits: Limits, audit: Audit) -> Self {
        Rights {
            rules,
            quotas: Arc::new(Quotas::new(limits)),
            audit,
        }
    }

    /// Starts a call of `caller` under its limit; the refusal, a tool's
    /// error result saying the limit and when to retry, when it is over.
    pub(super) fn start_call(&self, caller: &Caller) -> Result<Option<Started>, CallToolResult> {
        self.quotas.start(caller).map_err(|over| {
            let who = caller
                .principal()
                .unwrap_or_else(|| "this client".to_owned());
            let mut refused =
                CallToolResult::error(vec![rmcp::model::ContentBlock::text(over.message(&who))]);
            refused.structured_content = Some(serde_json::json!({
                "error": "rate_limited",
                "retry_in_s": over.retry_in().map(|wait| wait.as_secs_f64()),
            }));
            refused
        })
    }

    /// Whether every caller may use everything (no rule), so lists need
    /// no filtering.
    pub(super) fn is_open(&self) -> bool {
        self.rules.is_open()
    }

    /// Whether `caller` may see and use `item` (for lists: not recorded).
    pub(super) fn may(&self, caller: &Caller, item: Item<'_>) -> bool {
        self.rules.allows(caller, item)
    }

    /// Whether `caller` may use the `kind` named `name`, of `connection`
    /// (`None`: the name routes nowhere, so nothing to use).
    fn may_routed(
        &self,
        caller: &Caller,
        (kind, name): (Kind, &str),
        connection: Option<&str>,
    ) -> bool {
        connection.is_some_and(|connection| {
            self.may(
                caller,
                Item {
                    kind,
                    name,
                    connection,
                },
            )
        })
    }

    /// Whether `caller` may use anything of `connection` at all: something
    /// of it `directory` lists is allowed (for the meta-tools' view of
    /// connections).
    pub(super) fn reaches(&self, caller: &Caller, directory: &Directory, connection: &str) -> bool {
        if self.is_open() {
            return true;
        }
        let named = |kind: Kind, name: &str| {
            let target = match kind {
                Kind::Tool => directory.tool(name).cloned(),
                Kind::Prompt => directory.prompt(name).cloned(),
                _ => directory.resource(name),
            };
            target.is_some_and(|target| target.connection == connection)
        };
        directory.tools().any(|tool| {
            named(Kind::Tool, &tool.name) && self.may(caller, Item::tool(connection, &tool.name))
        }) || directory.prompts().any(|prompt| {
            named(Kind::Prompt, &prompt.name)
                && self.may(caller, Item::prompt(connection, &prompt.name))
        }) || directory.resources().any(|resource| {
            named(Kind::Resource, &resource.uri)
                && self.may(caller, Item::resource(connection, &resource.uri))
        })
    }

    /// The decision for `caller`'s `method` on `item`, to be ended with
    /// its outcome ([`Use::end`]); a denial is recorded at once.
    pub(super) fn decide<'a>(
        &'a self,
        caller: &'a Caller,
        method: &'a str,
        item: Item<'_>,
    ) -> Use<'a> {
        let decision = self.rules.decide(caller, item);
        let record = self
            .audit
            .is_on()
            .then(|| Record::new(caller, method, item.name, Some(item.connection), decision));
        if !decision.allowed
            && let Some(record) = &record
        {
            self.audit.write(record);
        }
        Use {
            audit: &self.audit,
            decision,
            record,
            since: Instant::now(),
        }
    }
}

/// One decided use, until its outcome is recorded.
#[must_use = "a use is recorded when it ends"]
pub(super) struct Use<'a> {
    audit: &'a Audit,
    decision: Decision,
    record: Option<Record<'a>>,
    since: Instant,
}

impl Use<'_> {
    pub(super) fn allowed(&self) -> bool {
        self.decision.allowed
    }

    /// The used tool's contract hash, for its record.
    pub(super) fn contract(&mut self, sha256: Option<&std::sync::Arc<str>>) {
        if let Some(record) = &mut self.record {
            record.contract = sha256.cloned();
        }
    }

    /// Records what came of an allowed use (`outcome`: `ok`, `tool_error`,
    /// `error`, `input_required`).
    pub(super) fn end(self, outcome: &str) {
        if self.decision.allowed
            && let Some(record) = self.record
        {
            self.audit
                .write(&record.ended(outcome, self.since.elapsed()));
        }
    }
}

/// The caller of the request `context` serves: the one the HTTP endpoint
/// identified (`callers.rs`), or, over stdio, the local process.
pub(super) fn caller_of(context: &RequestContext<RoleServer>) -> Arc<Caller> {
    match context.extensions.get::<axum::http::request::Parts>() {
        Some(parts) => caller_in(&parts.extensions),
        None => Caller::local(),
    }
}

/// The caller the HTTP endpoint put in a request's `extensions`; one
/// that holds none (it cannot be: every request is identified first) is
/// nobody in particular.
pub(super) fn caller_in(extensions: &axum::http::Extensions) -> Arc<Caller> {
    extensions
        .get::<Arc<Caller>>()
        .cloned()
        .unwrap_or_else(|| Arc::new(Caller::anonymous(crate::access::Via::Open)))
}

impl Rights {
    /// The items of a list `caller` may see: all of them when no rule
    /// exists; else those whose connection `route` finds and the rules
    /// allow as `kind`.
    pub(super) fn visible<'a, T: Clone + 'a>(
        &self,
        caller: &Caller,
        kind: Kind,
        items: impl IntoIterator<Item = &'a T>,
        name: impl Fn(&T) -> &str,
        route: impl Fn(&str) -> Option<String>,
    ) -> Vec<T> {
        let items = items.into_iter();
        if self.is_open() {
            return items.cloned().collect();
        }
        items
            .filter(|item| {
                let name = name(item);
                self.may_routed(caller, (kind, name), route(name).as_deref())
            })
            .cloned()
            .collect()
    }
}

impl Rights {
    /// What `caller` may see of `directory` through the meta-tools.
    pub(super) fn sees(&self, caller: Arc<Caller>, directory: Arc<Directory>) -> Sees<'_> {
        Sees {
            rights: self,
            caller,
            directory,
        }
    }
}

/// A caller's view for the meta-tools, which name things as the upstreams
/// do: each is judged by the name the gateway exposes it under.
pub(super) struct Sees<'a> {
    rights: &'a Rights,
    caller: Arc<Caller>,
    directory: Arc<Directory>,
}

impl Sees<'_> {
    fn named(&self, kind: Kind, connection: &str, name: &str) -> bool {
        let exposed = self.directory.naming.exposed(connection, name);
        self.rights.may(
            &self.caller,
            Item {
                kind,
                name: &exposed,
                connection,
            },
        )
    }
}

impl crate::meta::Sees for Sees<'_> {
    fn everything(&self) -> bool {
        self.rights.is_open()
    }

    fn connection(&self, connection: &str) -> bool {
        self.rights
            .reaches(&self.caller, &self.directory, connection)
    }

    fn tool(&self, connection: &str, tool: &str) -> bool {
        self.rights.is_open() || self.named(Kind::Tool, connection, tool)
    }

    fn prompt(&self, connection: &str, prompt: &str) -> bool {
        self.rights.is_open() || self.named(Kind::Prompt, connection, prompt)
    }

    fn resource(&self, connection: &str, uri: &str) -> bool {
        if self.rights.is_open() {
            return true;
        }
        let exposed = self
            .directory
            .exposed_uri(&super::directory::Target::new(connection, uri));
        self.rights
            .may(&self.caller, Item::resource(connection, &exposed))
    }
}

impl super::state::GatewayState {
    /// Where the exposed `name` (a `kind`) goes, routed with `find`, and
    /// its use decided for `caller`; `None` for a name the gateway does not
    /// expose and for one `caller` may not use (answered alike, see
    /// [`GatewayState::hidden`](super::state::GatewayState::hidden)). A
    /// resource is judged by the URI the gateway exposes it under, however
    /// the client spelled it.
    pub(super) async fn routed<'a>(
        self: &'a Arc<Self>,
        caller: &'a Caller,
        method: &'a str,
        (kind, name): (Kind, &str),
        find: impl Fn(&Directory) -> Option<Target>,
    ) -> Option<(Target, Use<'a>)> {
        let target = self.route(find).await?;
        let exposed = match kind {
            Kind::Resource => Cow::Owned(self.current().exposed_uri(&target)),
            _ => Cow::Borrowed(name),
        };
        let item = Item {
            kind,
            name: &exposed,
            connection: &target.connection,
        };
        let used = self.rights.decide(caller, method, item);
        if !used.allowed() {
            self.hidden().await;
            return None;
        }
        Some((target, used))
    }
}

impl Use<'_> {
    /// `result`, this use recorded as `ok` or `error`.
    pub(super) fn ended<T, E>(self, result: Result<T, E>) -> Result<T, E> {
        self.end(if result.is_ok() { "ok" } else { "error" });
        result
    }
}

impl Rights {
    /// The decision of a `call_mcp` call for `caller`: of the tool its
    /// `arguments` name, by the name the gateway exposes it under; `None`
    /// when they name no connection and tool (the meta-tool says what is
    /// missing).
    pub(super) fn decide_meta_call<'a>(
        &'a self,
        caller: &'a Caller,
        directory: &Directory,
        arguments: Option<&rmcp::model::JsonObject>,
    ) -> Option<Use<'a>> {
        let arguments = arguments?;
        let text = |key: &str| arguments.get(key).and_then(serde_json::Value::as_str);
        let (connection, tool) = (text("connection")?, text("tool")?);
        let exposed = directory.naming.exposed(connection, tool);
        let method = <rmcp::model::CallToolRequestMethod as rmcp::model::ConstString>::VALUE;
        Some(self.decide(caller, method, Item::tool(connection, &exposed)))
    }
}

impl Rights {
    /// What `list` of `directory` shows `caller`, as a fingerprint: two
    /// are equal when it sees the same items alike.
    pub(super) fn fingerprint(
        &self,
        caller: &Caller,
        directory: &Directory,
        list: ListKind,
    ) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let mut add =
            |kind: Kind, name: &str, connection: Option<String>, item: &dyn erased::Json| {
                if self.may_routed(caller, (kind, name), connection.as_deref()) {
                    item.json().hash(&mut hasher);
                }
            };
        match list {
            ListKind::Tools => {
                for tool in directory.tools() {
                    let connection = directory.tool(&tool.name).map(|t| t.connection.clone());
                    add(Kind::Tool, &tool.name, connection, tool);
                }
            }
            ListKind::Prompts => {
                for prompt in directory.prompts() {
                    let connection = directory.prompt(&prompt.name).map(|t| t.connection.clone());
                    add(Kind::Prompt, &prompt.name, connection, prompt);
                }
            }
            ListKind::Resources => {
                for resource in directory.resources() {
                    let connection = directory.resource(&resource.uri).map(|t| t.connection);
                    add(Kind::Resource, &resource.uri, connection, resource);
                }
                for template in directory.templates() {
                    let connection = directory
                        .template(&template.uri_template)
                        .map(|t| t.connection.clone());
                    add(Kind::Resource, &template.uri_template, connection, template);
                }
            }
        }
        hasher.finish()
    }

    /// Whether `session` is to be told that `list` changed: always without
    /// rules; with them, when what its caller sees of it changed.
    pub(super) fn tells(
        &self,
        session: &DownstreamSession,
        directory: &Directory,
        list: ListKind,
    ) -> bool {
        if self.is_open() {
            return true;
        }
        let Some(caller) = session.caller() else {
            return true;
        };
        session.saw(list, self.fingerprint(caller, directory, list))
    }

    /// Remembers what every list of `directory` shows `session`'s caller
    /// now (its first view: later changes are told against it).
    pub(super) fn seen_now(&self, session: &DownstreamSession, directory: &Directory) {
        if let (false, Some(caller)) = (self.is_open(), session.caller()) {
            for list in ListKind::ALL {
                session.saw(list, self.fingerprint(caller, directory, list));
            }
        }
    }
}

/// Items of a list as their JSON, for a fingerprint.
mod erased {
    pub(super) trait Json {
        fn json(&self) -> String;
    }

    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap_or_default()
        }
    }
}

impl super::state::GatewayState {
    /// Keeps each limit's share of this node current: every
    /// [`SHARE_EVERY`](super::quotas::SHARE_EVERY), the nodes the fleet's
    /// heartbeats say are alive, this one included.
    pub(super) fn share_limits_with_the_fleet(self: &Arc<Self>) {
        let state = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(super::quotas::SHARE_EVERY);
            loop {
                every.tick().await;
                let Some(state) = state.upgrade() else { return };
                if let Ok(Some(view)) = state.registry.send(crate::registry::FleetOverview).await {
                    let nodes = u32::try_from(view.nodes.len() + 1).unwrap_or(u32::MAX);
                    state.rights.quotas.set_nodes(nodes);
                }
            }
        });
    }
}
