//! The one error type of the configuration layer.
//!
//! Every message starts with the config file's path, then the key path, then the
//! problem, so a user can find the offending line without reading the code. No
//! variant ever holds a secret value: messages are built from key names, variable
//! names, paths and our own wording, never from the text of a token, a header value
//! or an environment value.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A position in the config file, 1-based, counted in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, in characters (not bytes).
    pub column: usize,
}

impl Location {
    /// Translates a byte offset into `text` to a line and column.
    ///
    /// Offsets past the end (TOML reports "unexpected end of file" there) land on
    /// the last position; offsets inside a multi-byte character count that
    /// character once.
    pub(crate) fn from_offset(text: &str, offset: usize) -> Self {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Self {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Why a configuration was refused.
///
/// `Display` is always `{file}: {key path}: {problem}`, or
/// `{file}: line L, column C: {problem}` for TOML syntax errors. I/O errors are
/// part of the message rather than a `source()`, so printing the error once shows
/// everything and printing the chain does not repeat it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The config file itself could not be read.
    #[error("{}: cannot read config file: {error}", path.display())]
    Io {
        /// The config file.
        path: PathBuf,
        /// What the operating system said.
        error: io::Error,
    },

    /// The file is not valid TOML.
    #[error("{}: {location}: {}{problem}", file.display(), key_prefix(key.as_deref()))]
    Syntax {
        /// The config file.
        file: PathBuf,
        /// Where the parser stopped.
        location: Location,
        /// The key being parsed, when known.
        key: Option<String>,
        /// The parser's description, never a snippet of the source text.
        problem: String,
    },

    /// A key has a wrong type, a wrong value, or is not allowed where it is.
    #[error("{}: {key}: {problem}{}", file.display(), location_suffix(location.as_ref()))]
    Invalid {
        /// The config file.
        file: PathBuf,
        /// Dotted key path, e.g. `connections.github.url`.
        key: String,
        /// What is wrong and, where useful, what is expected.
        problem: String,
        /// Where in the file, when the TOML parser told us.
        location: Option<Location>,
    },

    /// A `token_env` names a variable that is not set.
    #[error("{}: {key}: environment variable '{var}' is not set", file.display())]
    MissingEnv {
        /// The config file.
        file: PathBuf,
        /// Key path of the `token_env` entry.
        key: String,
        /// The variable's name.
        var: String,
    },

    /// A `token_file` could not be read. Names the path, never the content.
    #[error("{}: {key}: cannot read token file '{}': {error}", file.display(), path.display())]
    TokenFile {
        /// The config file.
        file: PathBuf,
        /// Key path of the `token_file` entry.
        key: String,
        /// The token file, as resolved against the config file's directory.
        path: PathBuf,
        /// What the operating system said.
        error: io::Error,
    },
}

impl ConfigError {
    /// The config file the error is about.
    pub fn file(&self) -> &Path {
        match self {
            Self::Io { path, .. } => path,
            Self::Syntax { file, .. }
            | Self::Invalid { file, .. }
            | Self::MissingEnv { file, .. }
            | Self::TokenFile { file, .. } => file,
        }
    }

    /// The dotted key path the error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Io { .. } => None,
            Self::Syntax { key, .. } => key.as_deref(),
            Self::Invalid { key, .. }
            | Self::MissingEnv { key, .. }
            | Self::TokenFile { key, .. } => Some(key),
        }
    }
}

fn key_prefix(key: Option<&str>) -> String {
    key.map(|k| format!("{k}: ")).unwrap_or_default()
}

fn location_suffix(location: Option<&Location>) -> String {
    location.map(|l| format!(" ({l})")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_counts_lines_and_characters() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(
            Location::from_offset(text, 0),
            Location { line: 1, column: 1 }
        );
        assert_eq!(
            Location::from_offset(text, 6),
            Location { line: 2, column: 1 }
        );
        // 'é' is two bytes but one column.
        let eq = text.find('=').map(|_| text.rfind('=').unwrap()).unwrap();
        assert_eq!(
            Location::from_offset(text, eq),
            Location { line: 2, column: 4 }
        );
        // Past the end clamps instead of panicking.
        assert_eq!(Location::from_offset(text, 999).line, 3);
        // Inside a multi-byte character does not panic.
        assert_eq!(Location::from_offset(text, 8).line, 2);
    }

    #[test]
    fn display_has_file_key_and_problem() {
        let err = ConfigError::Invalid {
            file: "config/x.toml".into(),
            key: "connections.github.url".into(),
            problem: "an http connection requires 'url'".into(),
            location: None,
        };
        assert_eq!(
            err.to_string(),
            "config/x.toml: connections.github.url: an http connection requires 'url'"
        );
        let err = ConfigError::Syntax {
            file: "x.toml".into(),
            location: Location { line: 3, column: 7 },
            key: None,
            problem: "unclosed string".into(),
        };
        assert_eq!(err.to_string(), "x.toml: line 3, column 7: unclosed string");
    }
}
