//! TOML text to [`RawConfig`], with errors that never quote the file.
//!
//! `toml::de::Error`'s `Display` prints the offending source line, which may hold
//! a token; it is never used. Instead the message and span are taken apart: the
//! span becomes a line and column, and serde's "invalid type: string \"…\""
//! phrasing is rewritten so that no value from the file is repeated.

use std::path::Path;

use serde_path_to_error::Segment;

use super::error::{ConfigError, Location};
use super::keypath::KeyPath;
use super::raw::RawConfig;

/// Parses and deserializes `text`; `file` only names the file in errors.
pub(crate) fn parse(text: &str, file: &Path) -> Result<RawConfig, ConfigError> {
    let deserializer =
        toml::de::Deserializer::parse(text).map_err(|e| syntax_error(text, file, &e))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| shape_error(text, file, &e))
}

/// The document is not TOML at all.
fn syntax_error(text: &str, file: &Path, error: &toml::de::Error) -> ConfigError {
    // Parser messages are fixed descriptions ("unclosed string", "expected `=`"),
    // not source text.
    let problem = one_line(error.message());
    match error.span() {
        Some(span) => ConfigError::Syntax {
            file: file.to_path_buf(),
            location: Location::from_offset(text, span.start),
            key: None,
            problem,
        },
        None => ConfigError::Invalid {
            file: file.to_path_buf(),
            key: KeyPath::root().into_string(),
            problem,
            location: None,
        },
    }
}

/// The document is TOML but does not have our shape (unknown key, wrong type).
fn shape_error(
    text: &str,
    file: &Path,
    error: &serde_path_to_error::Error<toml::de::Error>,
) -> ConfigError {
    let mut key = KeyPath::root();
    let mut last_key = None;
    for segment in error.path() {
        // A `toml::Spanned` value (an `[[access]]` rule) is a map of its
        // own to serde: not a key of the file.
        if matches!(segment, Segment::Map { key } if key.starts_with("$__serde_spanned_private")) {
            continue;
        }
        last_key = match segment {
            Segment::Map { key: k } => Some(k.as_str()),
            _ => None,
        };
        key = match segment {
            Segment::Map { key: k } => key.key(k),
            Segment::Seq { index } => key.index(*index),
            Segment::Enum { variant } => key.key(variant),
            Segment::Unknown => key.key("?"),
        };
    }
    let inner = error.inner();
    let described = describe(inner.message());
    // serde_path_to_error usually has the unknown key as the last segment already.
    if let Some(unknown) = &described.unknown_key
        && last_key != Some(unknown.as_str())
    {
        key = key.key(unknown);
    }
    ConfigError::Invalid {
        file: file.to_path_buf(),
        key: key.into_string(),
        problem: described.problem,
        location: inner.span().map(|s| Location::from_offset(text, s.start)),
    }
}

/// A serde message rewritten for a config user, with no value from the file.
#[derive(Debug, PartialEq)]
struct Described {
    /// For "unknown field" errors, the unknown key (it belongs in the key path).
    unknown_key: Option<String>,
    problem: String,
}

/// Rewrites serde's messages. Keys are echoed (they are names, not secrets);
/// values are reduced to their type.
fn describe(message: &str) -> Described {
    let message = one_line(message);
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((name, tail)) = rest.split_once('`')
    {
        let tail = tail.trim_start_matches(", ");
        let expected = tail
            .strip_prefix("expected one of ")
            .or_else(|| tail.strip_prefix("expected "));
        let problem = match expected {
            Some(list) => format!(
                "unknown key '{name}'; expected one of: {}",
                list.replace('`', "")
            ),
            None => format!("unknown key '{name}'; this table takes no keys"),
        };
        return Described {
            unknown_key: Some(name.to_owned()),
            problem,
        };
    }
    for (prefix, lead) in [
        ("invalid type: ", ""),
        ("invalid value: ", "invalid value: "),
    ] {
        if let Some(rest) = message.strip_prefix(prefix) {
            // The expected part is ours (type names, `expecting` strings); the
            // found part may quote the value, so keep only its kind.
            let (found, expected) = rest
                .rsplit_once(", expected ")
                .unwrap_or((rest, "something else"));
            return Described {
                unknown_key: None,
                problem: format!(
                    "{lead}expected {}, found {}",
                    expected_phrase(expected),
                    found_kind(found)
                ),
            };
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let expected = rest.split_once(", expected ").map_or("", |(_, e)| e);
        return Described {
            unknown_key: None,
            problem: format!("unknown value; expected {}", expected.replace('`', "\"")),
        };
    }
    Described {
        unknown_key: None,
        problem: redact_quoted(&message),
    }
}

/// Serde/Rust type words to TOML words.
fn expected_phrase(expected: &str) -> String {
    match expected {
        "i64" | "u64" | "i32" | "u32" | "usize" => "an integer".to_owned(),
        "a sequence" => "an array".to_owned(),
        "a map" => "a table".to_owned(),
        "a boolean" | "a string" => expected.to_owned(),
        other => other.replace('`', "'"),
    }
}

/// The kind of a serde `Unexpected`, without the value it carries.
fn found_kind(found: &str) -> &'static str {
    // The kind ends where the quoted value starts, whichever quote comes first.
    let end = [" `", " \""]
        .iter()
        .filter_map(|q| found.find(q))
        .min()
        .unwrap_or(found.len());
    let kind = &found[..end];
    match kind {
        "boolean" => "a boolean",
        "integer" => "an integer",
        "floating point" => "a float",
        "string" | "character" => "a string",
        "sequence" => "an array",
        "map" => "a table",
        "unit value" | "Option value" => "an empty value",
        _ => "another kind of value",
    }
}

/// Replaces the inside of every `"…"` or `` `…` `` with `…`, for messages we do
/// not recognise: better a vague message than a leaked token.
fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut open: Option<char> = None;
    for c in message.chars() {
        match open {
            Some(q) if c == q => {
                out.push('…');
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if c == '"' || c == '`' {
                    open = Some(c);
                }
            }
        }
    }
    if open.is_some() {
        out.push('…');
    }
    out
}

fn one_line(message: &str) -> String {
    message.trim().lines().collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_names_key_and_choices() {
        let d = describe("unknown field `tokn`, expected one of `kind`, `token`");
        assert_eq!(d.unknown_key.as_deref(), Some("tokn"));
        assert_eq!(
            d.problem,
            "unknown key 'tokn'; expected one of: kind, token"
        );
        let d = describe("unknown field `x`, expected `listen`");
        assert_eq!(d.problem, "unknown key 'x'; expected one of: listen");
        let d = describe("unknown field `x`, there are no fields");
        assert!(d.problem.contains("takes no keys"));
    }

    #[test]
    fn type_errors_drop_the_value() {
        let d = describe("invalid type: string \"SECRET, expected x\", expected i64");
        assert_eq!(d.problem, "expected an integer, found a string");
        assert!(!d.problem.contains("SECRET"));
        let d = describe("invalid type: integer `123`, expected a string");
        assert_eq!(d.problem, "expected a string, found an integer");
        let d = describe("invalid type: sequence, expected a string");
        assert_eq!(d.problem, "expected a string, found an array");
        let d = describe("invalid value: string \"SECRET\", expected a thing");
        assert_eq!(d.problem, "invalid value: expected a thing, found a string");
        let d = describe("unknown variant `SECRET`, expected `a` or `b`");
        assert!(!d.problem.contains("SECRET"), "{}", d.problem);
    }

    #[test]
    fn unrecognised_messages_are_redacted() {
        assert_eq!(redact_quoted("bad \"SECRET\" and `x`"), "bad \"…\" and `…`");
        assert_eq!(redact_quoted("open \"SECRET"), "open \"…");
        assert_eq!(describe("something `SECRET`").problem, "something `…`");
    }
}
