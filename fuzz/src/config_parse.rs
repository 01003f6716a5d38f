//! `Config::from_toml_str` on arbitrary text.
//!
//! Invariants (docs/CONFIG.md, "Secrets"):
//! - it never panics, and neither do `Debug` and `summary()` of what it returns;
//! - every error message starts with the config file's path;
//! - a value read through `token_env` (the environment) or `token_file` never
//!   appears in an error message, nor in `Debug`/`summary()` of a valid config;
//! - the text `@SECRET@` in the input is replaced by a canary before parsing:
//!   an error message shows the canary only if the canary sits somewhere the
//!   docs allow a value to be echoed (a key name, a duration, an enum word such
//!   as `transport`, a tool name, the name in `token_env` or the path in
//!   `token_file`). In a token, header value, env value or stdio argument it
//!   never shows, nor anywhere if the text is not TOML at all (syntax errors
//!   never quote the file); and when every canary is in such a secret position,
//!   `Debug` and `summary()` of a valid config do not show it either.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

use mcp_supervisor::config::{Config, ConfigError, summary};

/// Returned by the injected environment for every variable.
pub const ENV_CANARY: &str = "Zq8EnvCanary3k";
/// The content of the token files next to the fuzzed config.
pub const FILE_CANARY: &str = "Zq8FileCanary5m";
/// What `@SECRET@` in the input becomes.
pub const TEXT_CANARY: &str = "Zq8TextCanary7p";
/// The placeholder a seed or the mutator puts where a secret goes.
pub const PLACEHOLDER: &str = "@SECRET@";

/// Keys whose string value an error message may quote (docs/CONFIG.md,
/// "Secrets": durations, enum words, tool names; plus the variable a
/// `token_env` names and the path a `token_file` names, which those errors
/// must name to be useful).
const ECHO_ALLOWED: &[&str] = &[
    "connect_timeout",
    "call_timeout",
    "list_timeout",
    "shutdown_timeout",
    "within",
    "base_cooldown",
    "max_cooldown",
    "transport",
    "expose",
    "prefix",
    "retry_calls",
    "allowed_tools",
    "token_env",
    "token_file",
];

/// The folder the fuzzed config "lives in": holds the token files a
/// `token_file` can name (`token`, `token-ws`, `token-binary`).
fn config_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("mcp-supervisor-fuzz-config")
            .tempdir()
            .expect("a temporary folder")
            .keep();
        let write = |name: &str, bytes: &[u8]| {
            std::fs::write(dir.join(name), bytes).expect("writing a token file")
        };
        write("token", format!("{FILE_CANARY}\n").as_bytes());
        // A token the validator refuses (whitespace): the refusal must not quote it.
        write("token-ws", format!("{FILE_CANARY} x\n").as_bytes());
        let mut binary = FILE_CANARY.as_bytes().to_vec();
        binary.extend_from_slice(&[0xff, 0xfe, b'\n']);
        write("token-binary", &binary);
        dir
    })
}

/// The injected environment: every variable is set to the canary, except
/// `UNSET*` (missing), `WS*` (a value with whitespace, which is refused), and
/// `HOME` and `XDG_STATE_HOME`, which are locations, not secrets (the state
/// directory, shown in `Debug`, is derived from them).
fn env(name: &str) -> Option<String> {
    if name == "HOME" || name == "XDG_STATE_HOME" {
        Some(format!("/fuzz/{}", name.to_ascii_lowercase()))
    } else if name.starts_with("UNSET") {
        None
    } else if name.starts_with("WS") {
        Some(format!("{ENV_CANARY} two words"))
    } else {
        Some(ENV_CANARY.to_owned())
    }
}

pub fn run(data: &[u8]) {
    let input = String::from_utf8_lossy(data);
    // The canaries must come from where we planted them, not from the input.
    if input.contains("Zq8") {
        return;
    }
    let text = input.replace(PLACEHOLDER, TEXT_CANARY);
    let origin = config_dir().join("fuzz.toml");
    let placement = Placement::of(&text);
    match Config::from_toml_str(&text, &origin, &env) {
        Ok(config) => check_config(&config, placement, &text),
        Err(error) => check_error(&error, &origin, placement, &text),
    }
}

fn check_error(error: &ConfigError, origin: &Path, placement: Placement, text: &str) {
    let display = error.to_string();
    let debug = format!("{error:?}");
    let prefix = format!("{}: ", origin.display());
    assert!(
        display.starts_with(&prefix),
        "the error does not start with the file's path: {display:?}"
    );
    assert!(
        error.file() == origin,
        "ConfigError::file() is {:?}, not {origin:?}",
        error.file()
    );
    for (what, shown) in [("Display", &display), ("Debug", &debug)] {
        for canary in [ENV_CANARY, FILE_CANARY] {
            assert!(
                !shown.contains(canary),
                "a secret read from the environment or a token file leaked through the error's {what}: {shown:?}\nconfig text: {text:?}"
            );
        }
        let may_show = match placement {
            Placement::NotToml => false,
            Placement::Parsed { echo_allowed, .. } => echo_allowed,
        };
        assert!(
            may_show || !shown.contains(TEXT_CANARY),
            "the error's {what} quotes a value it must not ({placement:?}): {shown:?}\nconfig text: {text:?}"
        );
    }
}

fn check_config(config: &Config, placement: Placement, text: &str) {
    let debug = format!("{config:?}");
    let pretty = format!("{config:#?}");
    let summary = summary(config);
    for (what, shown) in [
        ("Debug", &debug),
        ("pretty Debug", &pretty),
        ("summary()", &summary),
    ] {
        for canary in [ENV_CANARY, FILE_CANARY] {
            assert!(
                !shown.contains(canary),
                "a loaded secret leaked through the config's {what}: {shown}\nconfig text: {text:?}"
            );
        }
        if let Placement::Parsed {
            only_secret: true, ..
        } = placement
        {
            assert!(
                !shown.contains(TEXT_CANARY),
                "a secret value (token, header, env value or argument) leaked through the config's {what}: {shown}\nconfig text: {text:?}"
            );
        }
    }
}

/// Where the text canary sits in the parsed document.
#[derive(Clone, Copy, Debug)]
enum Placement {
    /// The text is not TOML: no error may show anything from it.
    NotToml,
    Parsed {
        /// At least one canary is where an error may echo it.
        echo_allowed: bool,
        /// Every canary is a secret value (so `Debug` and `summary()` hide it);
        /// true also when there is none.
        only_secret: bool,
    },
}

impl Placement {
    fn of(text: &str) -> Placement {
        let Ok(table) = text.parse::<toml::Table>() else {
            return Placement::NotToml;
        };
        let mut walk = Walk::default();
        walk.table(&table, &mut Vec::new());
        Placement::Parsed {
            echo_allowed: walk.echo_allowed,
            only_secret: !walk.not_secret,
        }
    }
}

#[derive(Default)]
struct Walk {
    echo_allowed: bool,
    not_secret: bool,
}

impl Walk {
    fn table(&mut self, table: &toml::Table, path: &mut Vec<String>) {
        for (key, value) in table {
            if key.contains(TEXT_CANARY) {
                self.echo_allowed = true;
                self.not_secret = true;
            }
            path.push(key.clone());
            self.value(value, path);
            path.pop();
        }
    }

    fn value(&mut self, value: &toml::Value, path: &mut Vec<String>) {
        match value {
            toml::Value::String(text) if text.contains(TEXT_CANARY) => {
                if is_secret(path) {
                    return;
                }
                self.not_secret = true;
                if path
                    .iter()
                    .rev()
                    .find(|segment| !segment.starts_with('['))
                    .is_some_and(|key| ECHO_ALLOWED.contains(&key.as_str()))
                {
                    self.echo_allowed = true;
                }
            }
            toml::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(format!("[{i}]"));
                    self.value(item, path);
                    path.pop();
                }
            }
            toml::Value::Table(table) => self.table(table, path),
            _ => {}
        }
    }
}

/// A token (`…auth.token`), the auth `kind` (a token pasted there must not
/// be echoed), a header value, an env value or a stdio argument.
fn is_secret(path: &[String]) -> bool {
    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
    match segments.as_slice() {
        [.., "auth", "token" | "kind"] => true,
        ["connections", _, "headers" | "env", _] => true,
        ["connections", _, "args", index] => index.starts_with('['),
        _ => false,
    }
}
