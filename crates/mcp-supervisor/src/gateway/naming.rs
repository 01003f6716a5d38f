//! Namespaced tool names: `{connection}__{tool}`, shortened deterministically
//! when longer than MCP's 128-character limit.

/// MCP clients accept tool names up to this length.
pub const MAX_TOOL_NAME: usize = 128;

/// The separator between connection and tool (connection names never contain it).
pub const SEPARATOR: &str = "__";

/// The exposed name of `tool` on `connection`. Over 128 characters, the name is
/// cut and suffixed with a hash of the full name, so it stays unique and is the
/// same on every run and every machine.
pub fn namespaced(connection: &str, tool: &str) -> String {
    let full = format!("{connection}{SEPARATOR}{tool}");
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
        fn never_longer_than_the_limit(connection in "[a-z]{1,64}", tool in "\\PC{0,300}") {
            let name = namespaced(&connection, &tool);
            prop_assert!(name.len() <= MAX_TOOL_NAME);
            let prefix = format!("{connection}__");
            prop_assert!(name.starts_with(&prefix));
        }
    }
}
