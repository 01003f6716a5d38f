//! `mcp-supervisor import`: the `mcpServers` JSON of desktop MCP clients to our TOML.
//!
//! Accepted per server: `command`, `args`, `env`, `cwd` (stdio) or `url`,
//! `headers` (http), an optional `type`, and `description` (becomes `notes`).
//! `disabled: true` servers are left out with a comment; other client-specific
//! keys (`autoApprove`, `timeout`, …) are ignored with a comment naming them.
//!
//! Choices:
//! - `type = "sse"` (the legacy HTTP+SSE transport, which we do not speak) is
//!   imported as `transport = "http"` with a warning comment: many servers serve
//!   streamable HTTP next to SSE, usually at `/mcp` instead of `/sse`.
//! - An `Authorization: Bearer X` header becomes
//!   `auth = { kind = "bearer", token_env = "<NAME>_TOKEN" }` plus a comment
//!   asking the user to export it: the token is not written to the file. Other
//!   headers, including other `Authorization` schemes, and `env` values are
//!   copied as they are: the source file held them in clear text too.
//! - OAuth: an `oauth` object (`clientId`, `clientSecret`, `scopes`, as some
//!   clients write it) or an `auth` object (`CLIENT_ID`, `CLIENT_SECRET`,
//!   `scopes`, as others do) becomes `auth = { kind = "oauth", … }`; a secret
//!   is not copied but becomes `client_secret_env = "<NAME>_CLIENT_SECRET"`
//!   with a comment asking the user to export it. A remote server with no
//!   credential at all gets a comment saying how to turn OAuth on, since
//!   desktop clients log in to such servers by themselves.
//! - The output is validated with [`Config::from_toml_str`] before it is returned,
//!   so what `import` prints always loads (given the token variables).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value};

use super::error::ConfigError;
use super::model::Config;
use super::values;

/// Why an `mcpServers` document could not be converted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// Not JSON. The message has a line and column and no input text.
    #[error("not valid JSON: {0}")]
    Json(String),
    /// JSON, but not an `{"mcpServers": {…}}` object.
    #[error("{0}")]
    Shape(String),
    /// One server cannot be expressed in our config.
    #[error("server '{server}': {problem}")]
    Server {
        /// The server's key in `mcpServers`.
        server: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The generated TOML did not validate (e.g. a header the transport reserves).
    #[error("the converted config is not valid: {0}")]
    Invalid(#[from] ConfigError),
}

/// Converts `{"mcpServers": {name: {...}}}` JSON to config TOML text, servers in
/// name order.
pub fn import_mcp_servers(json: &str) -> Result<String, ImportError> {
    let doc: Value = serde_json::from_str(json).map_err(|e| ImportError::Json(json_error(&e)))?;
    let servers = doc
        .get("mcpServers")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ImportError::Shape("expected a top-level \"mcpServers\" object".to_owned())
        })?;

    let mut out = String::from(
        "# Converted by `mcp-supervisor import` from an mcpServers JSON file.\n\
         # Review it, then run `mcp-supervisor check --config FILE`.\n",
    );
    let mut token_vars = BTreeSet::new();
    // serde_json's map is a BTreeMap without `preserve_order`: already sorted, but
    // sort explicitly so the output does not depend on a feature flag.
    let mut names: Vec<&String> = servers.keys().collect();
    names.sort();
    for name in names {
        let server = servers
            .get(name.as_str())
            .and_then(Value::as_object)
            .ok_or_else(|| problem(name, "expected an object"))?;
        out.push('\n');
        convert_server(&mut out, name, server, &mut token_vars)?;
    }

    // Anything we print must load: validate with every token variable defined.
    Config::from_toml_str(&out, Path::new("<import>"), &|_| {
        Some("placeholder".to_owned())
    })?;
    Ok(out)
}

/// `type` values that mean streamable HTTP, as spelled by various clients.
const HTTP_TYPES: &[&str] = &[
    "http",
    "streamable-http",
    "streamableHttp",
    "streamable_http",
];

/// The keys we understand; anything else is named in a comment and skipped.
const KNOWN_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "description",
    "disabled",
    "oauth",
    "auth",
];

fn convert_server(
    out: &mut String,
    name: &str,
    server: &Map<String, Value>,
    token_vars: &mut BTreeSet<String>,
) -> Result<(), ImportError> {
    values::connection_name(name)
        .map_err(|p| problem(name, format!("{p}; rename it in the JSON")))?;
    if server.get("disabled").and_then(Value::as_bool) == Some(true) {
        let _ = writeln!(
            out,
            "# Server '{name}' is disabled in the source file and was not imported."
        );
        return Ok(());
    }

    let ty = server
        .get("type")
        .map(|v| string(name, "type", v))
        .transpose()?;
    let has_command = server.contains_key("command");
    let has_url = server.contains_key("url");
    let kind = match (ty, has_command, has_url) {
        (_, true, true) => return Err(problem(name, "has both \"command\" and \"url\"")),
        (_, false, false) => {
            return Err(problem(name, "needs \"command\" (stdio) or \"url\" (http)"));
        }
        (None | Some("stdio"), true, false) => Kind::Stdio,
        (None, false, true) => Kind::Http,
        (Some(t), false, true) if HTTP_TYPES.contains(&t) => Kind::Http,
        (Some("sse"), false, true) => Kind::Sse,
        (Some(t), _, _) if t == "stdio" || t == "sse" || HTTP_TYPES.contains(&t) => {
            return Err(problem(
                name,
                format!(
                    "\"type\": {} does not match its other keys",
                    values::short_quote(t)
                ),
            ));
        }
        (Some(t), _, _) => {
            return Err(problem(
                name,
                format!("unsupported \"type\" {}", values::short_quote(t)),
            ));
        }
    };

    let ignored: Vec<&str> = server
        .keys()
        .map(String::as_str)
        .filter(|k| !KNOWN_KEYS.contains(k))
        .collect();

    let _ = writeln!(out, "[connections.{name}]");
    if !ignored.is_empty() {
        let _ = writeln!(
            out,
            "# Ignored client-specific keys: {}",
            ignored.join(", ")
        );
    }
    if let Some(description) = server.get("description") {
        let _ = writeln!(
            out,
            "notes = {}",
            toml_string(string(name, "description", description)?)
        );
    }
    match kind {
        Kind::Stdio => stdio(out, name, server),
        Kind::Http | Kind::Sse => http(out, name, server, kind, token_vars),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Stdio,
    Http,
    Sse,
}

fn stdio(out: &mut String, name: &str, server: &Map<String, Value>) -> Result<(), ImportError> {
    let _ = writeln!(out, "transport = \"stdio\"");
    let command = server
        .get("command")
        .map(|v| string(name, "command", v))
        .transpose()?;
    let _ = writeln!(
        out,
        "command = {}",
        toml_string(command.unwrap_or_default())
    );
    if let Some(args) = server.get("args") {
        let args = args
            .as_array()
            .ok_or_else(|| problem(name, "\"args\" must be an array of strings"))?
            .iter()
            .map(|a| string(name, "args", a).map(|s| toml::Value::String(s.to_owned())))
            .collect::<Result<Vec<_>, _>>()?;
        let _ = writeln!(out, "args = {}", toml::Value::Array(args));
    }
    if let Some(env) = server.get("env") {
        let _ = writeln!(out, "env = {}", inline_table(name, "env", env)?);
    }
    if let Some(cwd) = server.get("cwd") {
        let _ = writeln!(out, "cwd = {}", toml_string(string(name, "cwd", cwd)?));
    }
    Ok(())
}

fn http(
    out: &mut String,
    name: &str,
    server: &Map<String, Value>,
    kind: Kind,
    token_vars: &mut BTreeSet<String>,
) -> Result<(), ImportError> {
    if kind == Kind::Sse {
        let _ = writeln!(
            out,
            "# WARNING: this server used the legacy SSE transport, which mcp-supervisor does not\n\
             # speak. Many servers also serve streamable HTTP, often at /mcp instead of /sse:\n\
             # check the URL before use."
        );
    }
    let _ = writeln!(out, "transport = \"http\"");
    let url = server
        .get("url")
        .map(|v| string(name, "url", v))
        .transpose()?;
    let _ = writeln!(out, "url = {}", toml_string(url.unwrap_or_default()));

    let oauth = oauth(out, name, server, token_vars)?;
    let Some(headers) = server.get("headers") else {
        if !oauth {
            let _ = writeln!(
                out,
                "# If this server asks for a login, add auth = {{ kind = \"oauth\" }} and run\n\
                 # `mcp-supervisor login --config FILE {name}` (docs/OAUTH.md)."
            );
        }
        return Ok(());
    };
    let headers = headers
        .as_object()
        .ok_or_else(|| problem(name, "\"headers\" must be an object of strings"))?;
    let bearer = headers.iter().find(|(k, v)| {
        k.eq_ignore_ascii_case("authorization")
            && v.as_str()
                .and_then(|s| s.get(..7))
                .is_some_and(|p| p.eq_ignore_ascii_case("bearer "))
    });
    if let Some((header, _)) = bearer.filter(|_| !oauth) {
        let var = token_var(name, token_vars);
        let _ = writeln!(
            out,
            "# The {header} header was not copied: export {var} with its bearer token."
        );
        let _ = writeln!(
            out,
            "auth = {{ kind = \"bearer\", token_env = {} }}",
            toml_string(&var)
        );
    }
    let bearer_key = bearer.map(|(k, _)| k.as_str());
    let others = Value::Object(
        headers
            .iter()
            .filter(|(k, _)| Some(k.as_str()) != bearer_key)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    if others.as_object().is_some_and(|o| !o.is_empty()) {
        let _ = writeln!(out, "headers = {}", inline_table(name, "headers", &others)?);
    }
    Ok(())
}

/// Writes `auth = { kind = "oauth", … }` for a server whose entry has an
/// `oauth` or `auth` object; `true` if it did.
fn oauth(
    out: &mut String,
    name: &str,
    server: &Map<String, Value>,
    token_vars: &mut BTreeSet<String>,
) -> Result<bool, ImportError> {
    let Some(settings) = server.get("oauth").or_else(|| server.get("auth")) else {
        return Ok(false);
    };
    let settings = settings
        .as_object()
        .ok_or_else(|| problem(name, "\"oauth\"/\"auth\" must be an object"))?;
    let field = |keys: &[&str]| keys.iter().find_map(|key| settings.get(*key));
    let mut keys = String::from("kind = \"oauth\"");
    if let Some(id) = field(&["clientId", "client_id", "CLIENT_ID"]) {
        let _ = write!(
            keys,
            ", client_id = {}",
            toml_string(string(name, "clientId", id)?)
        );
        if field(&["clientSecret", "client_secret", "CLIENT_SECRET"]).is_some() {
            let var = unique_var(&format!("{}_CLIENT_SECRET", env_base(name)), token_vars);
            let _ = writeln!(
                out,
                "# The client secret was not copied: export {var} with it."
            );
            let _ = write!(keys, ", client_secret_env = {}", toml_string(&var));
        }
    }
    if let Some(scopes) = field(&["scopes", "scope"]) {
        let scopes: Vec<toml::Value> = match scopes {
            Value::String(text) => text
                .split_whitespace()
                .map(|scope| toml::Value::String(scope.to_owned()))
                .collect(),
            Value::Array(items) => items
                .iter()
                .map(|item| string(name, "scopes", item).map(|s| toml::Value::String(s.to_owned())))
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(problem(
                    name,
                    "\"scopes\" must be a string or an array of strings",
                ));
            }
        };
        if !scopes.is_empty() {
            let _ = write!(keys, ", scopes = {}", toml::Value::Array(scopes));
        }
    }
    let _ = writeln!(
        out,
        "# Log in once: mcp-supervisor login --config FILE {name}\nauth = {{ {keys} }}"
    );
    Ok(true)
}

/// `<NAME>_TOKEN`, made unique if two server names map to the same variable.
fn token_var(name: &str, used: &mut BTreeSet<String>) -> String {
    unique_var(&format!("{}_TOKEN", env_base(name)), used)
}

/// A server name as an environment variable name's start: `my-docs` → `MY_DOCS`.
fn env_base(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// `base`, or `base_2`, `base_3`, … if taken; recorded as taken.
fn unique_var(base: &str, used: &mut BTreeSet<String>) -> String {
    let mut var = base.to_owned();
    let mut n = 2;
    while used.contains(&var) {
        var = format!("{base}_{n}");
        n += 1;
    }
    used.insert(var.clone());
    var
}

/// `{ key = "value", … }` from a JSON object of strings, keys sorted.
fn inline_table(server: &str, field: &str, value: &Value) -> Result<String, ImportError> {
    let object = value
        .as_object()
        .ok_or_else(|| problem(server, format!("\"{field}\" must be an object of strings")))?;
    let mut keys: Vec<&String> = object.keys().collect();
    keys.sort();
    let mut parts = Vec::with_capacity(keys.len());
    for key in keys {
        let v = object
            .get(key.as_str())
            .map(|v| string(server, field, v))
            .transpose()?;
        parts.push(format!(
            "{} = {}",
            toml_key(key),
            toml_string(v.unwrap_or_default())
        ));
    }
    Ok(if parts.is_empty() {
        "{}".to_owned()
    } else {
        format!("{{ {} }}", parts.join(", "))
    })
}

/// A JSON string, or a problem naming the field (never the value).
fn string<'a>(server: &str, field: &str, value: &'a Value) -> Result<&'a str, ImportError> {
    value
        .as_str()
        .ok_or_else(|| problem(server, format!("\"{field}\" must be a string")))
}

/// A TOML string literal, escaped by the `toml` crate.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A TOML key: bare when possible, otherwise a basic string with escapes.
fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        return key.to_owned();
    }
    let mut out = String::from("\"");
    for c in key.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn problem(server: &str, problem: impl Into<String>) -> ImportError {
    ImportError::Server {
        server: server.to_owned(),
        problem: problem.into(),
    }
}

/// serde_json's Display is "{message} at line L column C"; for syntax errors the
/// message is a fixed description, but keep only the position for other kinds.
fn json_error(error: &serde_json::Error) -> String {
    if error.is_syntax() || error.is_eof() {
        error.to_string()
    } else {
        format!("line {} column {}", error.line(), error.column())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_quoted_only_when_needed() {
        assert_eq!(toml_key("X-Team"), "X-Team");
        assert_eq!(toml_key("a.b"), "\"a.b\"");
        assert_eq!(toml_key("q\"\n"), "\"q\\\"\\u000A\"");
    }

    #[test]
    fn token_vars_are_unique() {
        let mut used = BTreeSet::new();
        assert_eq!(token_var("a-b", &mut used), "A_B_TOKEN");
        assert_eq!(token_var("a_b", &mut used), "A_B_TOKEN_2");
    }

    #[test]
    fn strings_are_escaped() {
        let s = toml_string("a\"b\\c");
        let parsed: toml::Value = format!("x = {s}").parse::<toml::Table>().unwrap()["x"].clone();
        assert_eq!(parsed.as_str(), Some("a\"b\\c"));
    }
}
