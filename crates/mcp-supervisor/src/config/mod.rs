//! Configuration: the TOML file (docs/CONFIG.md), validated into typed settings.
//!
//! # Layout
//!
//! - `raw`: serde structs that only describe the file (`deny_unknown_fields`).
//! - `parse`: TOML text to raw structs, with errors that never quote the file.
//! - `validate` + `auth`: raw structs to [`Config`]: defaults, rules, secrets.
//! - `model`: the typed [`Config`] the rest of the crate uses.
//! - `error`: [`ConfigError`], always `{file}: {key path}: {problem}`.
//! - [`summary()`]: the one-screen overview printed by `mcp-supervisor check`.
//! - [`import_mcp_servers()`]: desktop-client `mcpServers` JSON to our TOML.
//!
//! Secrets (tokens, header values, `env` values) are `SecretString`s from the
//! moment they are read, and no `Debug`, summary or error message prints one.

mod auth;
mod error;
mod import;
mod keypath;
mod model;
mod parse;
mod raw;
mod summary;
mod telemetry;
mod validate;
mod values;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use error::{ConfigError, Location};
pub use import::{ImportError, import_mcp_servers};
pub use model::{
    AdminSettings, Allowance, ApiKey, AuditLog, BearerToken, CAPTURE_MAX_BYTES, CallerAuth,
    CallerCredential, CallerCredentials, Choice, ChurnLimit, Config, ConnectionConfig,
    ContractSettings, DEFAULT_FLEET_NAMESPACE, DEFAULT_GROUPS_CLAIM, DEFAULT_LEEWAY,
    DEFAULT_LOCK_FILE, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CLOCK_SKEW,
    DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_QUEUED_CALLS, DEFAULT_ON_BEHALF_IDLE,
    DEFAULT_ON_BEHALF_SESSIONS, Expose, FleetKey, FleetSettings, ForwardedHeader, GatewaySettings,
    HttpTransport, IntrospectionClient, OAuthGrant, OAuthSettings, OnBehalf, OnChange, OnNew,
    OtlpProtocol, Password, Prefix, ProbeMode, ProbeSettings, QuarantineSettings, ResourceServer,
    RestartBudget, RetryCalls, SampleRatio, StdioTransport, SupervisorSettings, TelemetrySettings,
    Transport, UpstreamAuth, UpstreamProtocol,
};
pub use summary::summary;

impl Config {
    /// Reads and validates the config file at `path`, taking `token_env`
    /// variables from the process environment.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Self::from_toml_str(&text, path, &|name| std::env::var(name).ok())
    }

    /// Validates config `text`.
    ///
    /// `origin` names the file in error messages and is the base for relative
    /// `token_file` and `cwd` paths (its parent directory, or `.` if it has
    /// none). `env` looks up `token_env` variables; tests pass a closure.
    pub fn from_toml_str(
        text: &str,
        origin: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let raw = parse::parse(text, origin)?;
        validate::Validator::new(origin, text, env).config(raw)
    }
}

/// Whether `name` is a valid connection name (for names that come from
/// elsewhere than a config file, like the fleet's store).
pub(crate) fn connection_name_ok(name: &str) -> bool {
    values::connection_name(name).is_ok()
}

/// Whether `text` is an `http(s)` URL with a host and no credentials.
pub(crate) fn http_url_ok(text: &str) -> bool {
    values::http_url(text).is_ok()
}

pub(crate) use validate::default_node;
pub(crate) use values::fleet_name;
