//! The access rules: ordered, the first that matches a caller and an item
//! decides; once any rule exists, an item no rule matches is denied.
//!
//! A rule names who it is for ([`Who`]) and what it allows and denies
//! ([`Pattern`]s: globs over exposed tool names, prompt names, resource
//! URIs, or whole connections). It matches an item when it is for the
//! caller and one of its patterns matches the item; within a rule, deny
//! comes before allow.

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use super::caller::Caller;

/// Who a rule is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// Every caller, including one with no credentials.
    Anyone,
    /// `user:NAME`: a token whose subject is NAME.
    User(String),
    /// `client:NAME`: a key named NAME, or a token issued to client NAME.
    Client(String),
    /// `group:NAME`: a caller in group NAME.
    Group(String),
    /// `scope:NAME`: a token granted scope NAME.
    Scope(String),
}

impl Who {
    /// Reads `anyone`, `user:…`, `client:…`, `group:…` or `scope:…`.
    pub fn parse(text: &str) -> Result<Who, String> {
        if text == "anyone" {
            return Ok(Who::Anyone);
        }
        let Some((kind, name)) = text.split_once(':') else {
            return Err(WHO_EXPECTED.to_owned());
        };
        if name.is_empty() {
            return Err(format!("'{kind}:' names nobody; {WHO_EXPECTED}"));
        }
        let name = name.to_owned();
        Ok(match kind {
            "user" => Who::User(name),
            "client" => Who::Client(name),
            "group" => Who::Group(name),
            "scope" => Who::Scope(name),
            _ => return Err(WHO_EXPECTED.to_owned()),
        })
    }

    /// Whether `caller` is one of whom this names.
    pub fn matches(&self, caller: &Caller) -> bool {
        match self {
            Who::Anyone => true,
            Who::User(name) => caller.user.as_deref() == Some(name),
            Who::Client(name) => caller.client.as_deref() == Some(name),
            Who::Group(name) => caller.groups.iter().any(|group| group == name),
            Who::Scope(name) => caller.scopes.iter().any(|scope| scope == name),
        }
    }
}

const WHO_EXPECTED: &str =
    "expected \"anyone\", \"user:NAME\", \"client:NAME\", \"group:NAME\" or \"scope:NAME\"";

/// What kind of thing an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Tool,
    Prompt,
    /// A resource (its URI) or a resource template (its URI template).
    Resource,
    /// A whole connection: everything it offers.
    Connection,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Tool, Kind::Prompt, Kind::Resource, Kind::Connection];

    /// The prefix that marks a pattern of this kind (`tool:` may be left
    /// out).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::Connection => "connection",
        }
    }
}

/// Something a caller may see or use: an exposed tool or prompt name, or
/// an exposed resource URI, and the connection it is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    pub kind: Kind,
    /// As the client sees it (exposed name, exposed URI).
    pub name: &'a str,
    pub connection: &'a str,
}

impl<'a> Item<'a> {
    pub fn tool(connection: &'a str, name: &'a str) -> Self {
        Item {
            kind: Kind::Tool,
            name,
            connection,
        }
    }

    pub fn prompt(connection: &'a str, name: &'a str) -> Self {
        Item {
            kind: Kind::Prompt,
            name,
            connection,
        }
    }

    pub fn resource(connection: &'a str, uri: &'a str) -> Self {
        Item {
            kind: Kind::Resource,
            name: uri,
            connection,
        }
    }
}

/// One glob of a rule's `allow` or `deny`: `GLOB` or `tool:GLOB` over
/// exposed tool names, `prompt:GLOB`, `resource:GLOB` over exposed URIs,
/// `connection:GLOB` over connection names. `*` matches any run of
/// characters (`/` included), `?` one, `[…]` a class, `{a,b}` either.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub kind: Kind,
    glob: Glob,
    matcher: GlobMatcher,
}

/// Patterns are the same when they read the same.
impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.glob() == other.glob()
    }
}

impl Eq for Pattern {}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, String> {
        let (kind, glob) = match text.split_once(':') {
            Some((prefix, rest)) => match Kind::ALL.into_iter().find(|k| k.as_str() == prefix) {
                Some(kind) => (kind, rest),
                None => {
                    return Err(format!(
                        "unknown kind '{prefix}:'; expected a tool name glob, or one marked \
                         tool:, prompt:, resource: or connection:"
                    ));
                }
            },
            None => (Kind::Tool, text),
        };
        if glob.is_empty() {
            return Err("an empty glob matches nothing".to_owned());
        }
        let glob = GlobBuilder::new(glob)
            .literal_separator(false)
            .backslash_escape(true)
            .build()
            .map_err(|error| format!("not a glob: {}", error.kind()))?;
        Ok(Pattern {
            kind,
            matcher: glob.compile_matcher(),
            glob,
        })
    }

    /// The glob's text, without the kind.
    pub fn glob(&self) -> &str {
        self.glob.glob()
    }

    /// Whether this pattern matches `item` on its own.
    pub fn matches(&self, item: Item<'_>) -> bool {
        match self.kind {
            Kind::Connection => self.matcher.is_match(item.connection),
            kind => kind == item.kind && self.matcher.is_match(item.name),
        }
    }
}

/// Patterns of one rule's `allow` or `deny`, compiled per kind.
#[derive(Debug, Clone, Default)]
struct Patterns {
    /// Indexed by `Kind as usize`.
    sets: [Option<GlobSet>; 4],
}

impl Patterns {
    fn new(patterns: &[Pattern]) -> Self {
        let mut sets: [Option<GlobSet>; 4] = Default::default();
        for kind in Kind::ALL {
            let mut builder = GlobSetBuilder::new();
            let mut any = false;
            for pattern in patterns.iter().filter(|p| p.kind == kind) {
                builder.add(pattern.glob.clone());
                any = true;
            }
            if any {
                sets[kind as usize] = Some(
                    builder
                        .build()
                        .expect("globs that built alone build together"),
                );
            }
        }
        Patterns { sets }
    }

    fn matches(&self, item: Item<'_>) -> bool {
        let matches = |kind: Kind, text: &str| {
            self.sets[kind as usize]
                .as_ref()
                .is_some_and(|set| set.is_match(text))
        };
        matches(Kind::Connection, item.connection) || matches(item.kind, item.name)
    }
}

/// One `[[access]]` rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub who: Vec<Who>,
    pub allow: Vec<Pattern>,
    pub deny: Vec<Pattern>,
    allowing: Patterns,
    denying: Patterns,
}

/// Rules are the same when they read the same (the compiled sets follow).
impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.who == other.who && self.allow == other.allow && self.deny == other.deny
    }
}

impl Eq for Rule {}

impl Rule {
    pub fn new(who: Vec<Who>, allow: Vec<Pattern>, deny: Vec<Pattern>) -> Self {
        Rule {
            allowing: Patterns::new(&allow),
            denying: Patterns::new(&deny),
            who,
            allow,
            deny,
        }
    }

    /// Whether this rule is for `caller`.
    pub fn is_for(&self, caller: &Caller) -> bool {
        self.who.iter().any(|who| who.matches(caller))
    }

    /// What this rule says of `item`, if anything: deny before allow.
    fn says(&self, item: Item<'_>) -> Option<bool> {
        if self.denying.matches(item) {
            Some(false)
        } else if self.allowing.matches(item) {
            Some(true)
        } else {
            None
        }
    }
}

/// What the rules decided, and by which rule (its index in the file's
/// order); `rule` is `None` when no rule exists (all is allowed) or none
/// matched (denied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub rule: Option<usize>,
}

/// The ordered access rules. None: every caller may use everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    pub fn new(rules: Vec<Rule>) -> Self {
        Rules { rules }
    }

    /// Whether no rule exists: every caller may use everything.
    pub fn is_open(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The one decision: whether `caller` may see and use `item`.
    pub fn decide(&self, caller: &Caller, item: Item<'_>) -> Decision {
        if self.rules.is_empty() {
            return Decision {
                allowed: true,
                rule: None,
            };
        }
        for (index, rule) in self.rules.iter().enumerate() {
            if rule.is_for(caller)
                && let Some(allowed) = rule.says(item)
            {
                return Decision {
                    allowed,
                    rule: Some(index),
                };
            }
        }
        Decision {
            allowed: false,
            rule: None,
        }
    }

    /// [`Rules::decide`]'s answer alone.
    pub fn allows(&self, caller: &Caller, item: Item<'_>) -> bool {
        self.decide(caller, item).allowed
    }

    /// The patterns that match none of `items` (everything the upstreams
    /// offer, as exposed): each with the index of its rule. A pattern that
    /// matches nothing is most likely mistyped.
    pub fn unmatched(&self, items: &[Item<'_>]) -> Vec<(usize, &Pattern)> {
        let mut found = Vec::new();
        for (index, rule) in self.rules.iter().enumerate() {
            for pattern in rule.allow.iter().chain(&rule.deny) {
                if !items.iter().any(|item| pattern.matches(*item)) {
                    found.push((index, pattern));
                }
            }
        }
        found
    }

    /// Rules no caller can reach: each `(later, earlier)` is a rule whose
    /// every item an earlier rule, for at least the same callers, already
    /// decides. Judged only where that is certain: an earlier rule for
    /// `anyone` (or for a superset of the later rule's callers) that
    /// decides a whole connection the later rule's patterns are all in, or
    /// patterns textually the same.
    pub fn unreachable(&self) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        for (later, rule) in self.rules.iter().enumerate() {
            let covered = |earlier: &Rule| {
                let callers = earlier.who.contains(&Who::Anyone)
                    || rule.who.iter().all(|who| earlier.who.contains(who));
                let decided = |pattern: &Pattern| {
                    earlier.allow.iter().chain(&earlier.deny).any(|by| {
                        (by.kind == pattern.kind && by.glob() == pattern.glob())
                            || (by.kind == Kind::Connection && by.glob() == "*")
                    })
                };
                callers && rule.allow.iter().chain(&rule.deny).all(decided)
            };
            if let Some(earlier) = self.rules[..later].iter().position(covered) {
                found.push((later, earlier));
            }
        }
        found
    }
}
