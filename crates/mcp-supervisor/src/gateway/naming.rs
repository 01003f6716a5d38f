//! Exposed names: `{connection}__{name}` for tools and prompts (shortened
//! deterministically when longer than MCP's 128-character limit) unless the
//! `prefix` setting leaves them plain, and the prefixed form of a resource URI
//! that two connections both serve.

use crate::config::Prefix;

/// How names are exposed for the connections configured now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Naming {
    prefixed: bool,
}

/// As `prefix = "always"`, the default.
impl Default for Naming {
    fn default() -> Self {
        Naming { prefixed: true }
    }
}

impl Naming {
    /// `prefix` resolved for `connections` configured connections: `auto`
    /// prefixes unless exactly one is configured.
    pub fn new(prefix: Prefix, connections: usize) -> Self {
        let prefixed = match prefix {
            Prefix::Always => true,
            Prefix::Auto => connections != 1,
            Prefix::Never => false,
        };
        Naming { prefixed }
    }

    /// Whether names carry their connection's prefix.
    pub fn prefixed(self) -> bool {
        self.prefixed
    }

    /// The exposed name of tool or prompt `name` of `connection`.
    pub fn exposed(self, connection: &str, name: &str) -> String {
        if self.prefixed {
            namespaced(connection, name)
        } else {
            name.to_owned()
        }
    }
}

/// The scheme of the prefixed form of a resource URI or template that two
/// connections both serve: `mcp-supervisor://{connection}/{original}`.
pub const URI_PREFIX_SCHEME: &str = "mcp-supervisor://";

/// The prefixed form of resource `uri` (or URI template) of `connection`.
pub fn prefixed_uri(connection: &str, uri: &str) -> String {
    format!("{URI_PREFIX_SCHEME}{connection}/{uri}")
}

/// (connection, original URI) of a prefixed URI; `None` for any other URI.
pub fn split_prefixed_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix(URI_PREFIX_SCHEME)?;
    let (connection, original) = rest.split_once('/')?;
    (!connection.is_empty() && !original.is_empty()).then_some((connection, original))
}

/// MCP clients accept tool names up to this length.
pub const MAX_TOOL_NAME: usize = 128;

/// The separator between connection and tool (connection names never contain it).
pub const SEPARATOR: &str = "__";

/// The connection a prefixed exposed name names: what comes before its
/// first separator (a byte scan: a call looks it up).
pub fn connection_of(exposed: &str) -> Option<&str> {
    let at = exposed
        .as_bytes()
        .windows(SEPARATOR.len())
        .position(|pair| pair == SEPARATOR.as_bytes())?;
    Some(&exposed[..at])
}

/// The exposed name of `tool` on `connection`. Over 128 characters, the name is
/// cut and suffixed with a hash of the full name, so it stays unique and is the
/// same on every run and every machine.
pub fn namespaced(connection: &str, tool: &str) -> String {
    // Joined by hand, not `format!`: a view of 20,000 tools names each.
    let mut full = String::with_capacity(connection.len() + SEPARATOR.len() + tool.len());
    full.push_str(connection);
    full.push_str(SEPARATOR);
    full.push_str(tool);
    if full.len() <= MAX_TOOL_NAME {
        return full;
    }
    let suffix = format!("_{:016x}", fnv1a(full.as_bytes()));
    let mut cut = MAX_TOOL_NAME - suffix.len();
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &full[..cut])
}

/// FNV-1a, 64-bit: tiny, stable across Rust versions (unlike `DefaultHasher`).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn prefix_modes() {
        let exposed =
            |prefix, connections| Naming::new(prefix, connections).exposed("gh", "search");
        assert_eq!(exposed(Prefix::Always, 1), "gh__search");
        assert_eq!(exposed(Prefix::Auto, 1), "search");
        assert_eq!(exposed(Prefix::Auto, 2), "gh__search");
        assert_eq!(exposed(Prefix::Auto, 0), "gh__search");
        assert_eq!(exposed(Prefix::Never, 2), "search");
    }

    #[test]
    fn prefixed_uris_round_trip() {
        let uri = prefixed_uri("a-1", "test://static/resource?x=1");
        assert_eq!(uri, "mcp-supervisor://a-1/test://static/resource?x=1");
        assert_eq!(
            split_prefixed_uri(&uri),
            Some(("a-1", "test://static/resource?x=1"))
        );
        assert_eq!(split_prefixed_uri("test://static/resource"), None);
        assert_eq!(split_prefixed_uri("mcp-supervisor://a"), None);
        assert_eq!(split_prefixed_uri("mcp-supervisor:///x"), None);
    }

    #[test]
    fn short_names_are_plain() {
        assert_eq!(namespaced("github", "search_repos"), "github__search_repos");
        assert_eq!(namespaced("github", "a__b"), "github__a__b");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let tool = "t".repeat(200);
        let name = namespaced("conn", &tool);
        assert_eq!(name.len(), MAX_TOOL_NAME);
        assert!(name.starts_with("conn__ttt"));
        assert_eq!(name, namespaced("conn", &tool), "deterministic");
        assert_ne!(
            name,
            namespaced("conn", &"t".repeat(201)),
            "distinct inputs stay distinct"
        );
        // Pinned: the same name on every machine and every release.
        assert_eq!(&name[MAX_TOOL_NAME - 17..], "_dd6eb52617438d0d");
    }

    proptest! {
        #[test]
        fn the_connection_of_a_name_is_what_comes_before_its_first_separator(
            name in "[a-z_\u{e9}]{0,12}",
        ) {
            let expected = name.split_once(SEPARATOR).map(|(connection, _)| connection);
            prop_assert_eq!(connection_of(&name), expected);
        }

        #[test]
        fn never_longer_than_the_limit(connection in "[a-z]{1,64}", tool in "\\PC{0,300}") {
            let name = namespaced(&connection, &tool);
            prop_assert!(name.len() <= MAX_TOOL_NAME);
            let prefix = format!("{connection}__");
            prop_assert!(name.starts_with(&prefix));
        }
    }
}
