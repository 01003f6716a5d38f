//! Dotted key paths as they appear in error messages (`connections.github.url`).

use std::fmt;

/// A TOML key path, rendered the way a user would write it in the file: bare keys
/// joined by dots, keys that are not bare (spaces, dots, …) quoted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPath(String);

impl KeyPath {
    /// The root of the document.
    pub(crate) fn root() -> Self {
        Self::default()
    }

    /// The path of `key` inside this table.
    pub(crate) fn key(&self, key: &str) -> Self {
        let segment = render_key(key);
        if self.0.is_empty() {
            Self(segment)
        } else {
            Self(format!("{}.{segment}", self.0))
        }
    }

    /// The path of element `index` inside this array.
    pub(crate) fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }

    /// The rendered path; `(root)` for the document itself.
    pub(crate) fn into_string(self) -> String {
        if self.0.is_empty() {
            "(root)".to_owned()
        } else {
            self.0
        }
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("(root)")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// Bare TOML keys are `A-Za-z0-9_-`; anything else needs quotes to be read back.
fn render_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_toml() {
        let p = KeyPath::root().key("connections").key("git hub").key("url");
        assert_eq!(p.to_string(), "connections.\"git hub\".url");
        assert_eq!(
            KeyPath::root().key("a").key("b").index(2).to_string(),
            "a.b[2]"
        );
        assert_eq!(KeyPath::root().to_string(), "(root)");
        assert_eq!(KeyPath::root().key("").to_string(), "\"\"");
    }
}
