//! From [`RawConfig`] to [`Config`]: defaults, rules, resolution of overrides.
//!
//! Pure apart from reading `token_file`s: the environment is injected, so tests
//! can supply variables without touching the process environment. Checks run in
//! document order (supervisor, gateway, admin, connections by name) and the first
//! problem is returned.
//!
//! One submodule per table: `supervisor`, `listeners` (`[gateway]` and
//! `[admin]`), `connection` and `fleet`; `[telemetry]` and the `auth` tables
//! are read in `config::telemetry` and `config::auth`. The checks every table
//! shares (durations, counts, choices, paths) are here.

mod callers;
mod connection;
mod contracts;
mod fleet;
mod listeners;
mod supervisor;

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::ConfigError;
use super::keypath::KeyPath;
use super::model::{CallerAuth, Choice, Config, ConnectionConfig, GatewaySettings};
use super::raw::RawConfig;
use super::values::{self, short_quote};

pub(crate) use fleet::default_node;

/// Upper bound of `max_attempts`: beyond this a retry loop outlives any timeout.
const MAX_ATTEMPTS: u32 = 100;

/// Validation context: where the file is and how to read the environment.
pub(crate) struct Validator<'a> {
    /// Named in every error.
    pub(crate) file: &'a Path,
    /// The file's text: where a spanned value is, for its errors.
    pub(crate) text: &'a str,
    /// Base for relative `token_file` and `cwd` paths: the file's directory.
    pub(crate) base_dir: PathBuf,
    /// Environment lookup for `token_env`.
    pub(crate) env: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Validator<'a> {
    pub(crate) fn new(
        file: &'a Path,
        text: &'a str,
        env: &'a dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let base_dir = match file.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Self {
            file,
            text,
            base_dir,
            env,
        }
    }

    /// `Ok` when none of the keys of `table` is `present`; else the
    /// error at the first that is, saying `problem`.
    pub(crate) fn none_of(
        &self,
        table: &KeyPath,
        present: &[(&str, bool)],
        problem: &str,
    ) -> Result<(), ConfigError> {
        match present.iter().find(|(_, present)| *present) {
            Some((name, _)) => Err(self.invalid(&table.key(name), problem)),
            None => Ok(()),
        }
    }

    /// An [`ConfigError::Invalid`] at `key`, `location` in the file.
    pub(crate) fn invalid_at(
        &self,
        key: &KeyPath,
        location: super::error::Location,
        problem: String,
    ) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            key: key.clone().into_string(),
            problem,
            location: Some(location),
        }
    }

    /// An [`ConfigError::Invalid`] at `key`.
    pub(crate) fn invalid(&self, key: &KeyPath, problem: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            key: key.clone().into_string(),
            problem: problem.into(),
            location: None,
        }
    }

    /// Runs a value check and attaches the key path to its problem.
    pub(crate) fn check<T>(
        &self,
        key: &KeyPath,
        result: Result<T, String>,
    ) -> Result<T, ConfigError> {
        result.map_err(|problem| self.invalid(key, problem))
    }

    /// Turns the file's description into the typed configuration.
    pub(crate) fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let root = KeyPath::root();
        let supervisor =
            self.supervisor(&root.key("supervisor"), raw.supervisor.unwrap_or_default())?;
        let gateway = self.gateway(&root.key("gateway"), raw.gateway.unwrap_or_default())?;
        let admin = self.admin(&root.key("admin"), raw.admin.unwrap_or_default())?;
        // Two servers cannot bind the same fixed port; port 0 picks distinct ones.
        if admin.listen == gateway.listen && admin.listen.port() != 0 {
            return Err(self.invalid(
                &root.key("admin").key("listen"),
                "must differ from gateway.listen",
            ));
        }
        let connections_key = root.key("connections");
        let connections = raw
            .connections
            .unwrap_or_default()
            .into_iter()
            .map(|(name, conn)| {
                self.connection(&connections_key.key(&name), name, conn, &supervisor)
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.exchanges_need_a_client(&connections_key, &connections, &gateway)?;
        let fleet = raw
            .fleet
            .map(|fleet| self.fleet(&root.key("fleet"), fleet, &gateway))
            .transpose()?;
        let telemetry = match raw.telemetry {
            Some(telemetry) => self.telemetry(&root.key("telemetry"), telemetry)?,
            None => None,
        };
        let (access, warnings) = self.access(
            &root.key("access"),
            raw.access.unwrap_or_default(),
            &connections,
            gateway.prefix,
        )?;
        let limits = self.limits(&root.key("limits"), raw.limits.unwrap_or_default())?;
        let contracts = raw
            .contracts
            .map(|contracts| self.contracts(&root.key("contracts"), contracts))
            .transpose()?;
        Ok(Config {
            supervisor,
            gateway,
            admin,
            connections,
            fleet,
            telemetry,
            access,
            limits,
            contracts,
            warnings,
        })
    }

    /// A connection exchanging its callers' tokens does so at the gateway's
    /// authorization server, as the gateway's own client there.
    fn exchanges_need_a_client(
        &self,
        key: &KeyPath,
        connections: &[ConnectionConfig],
        gateway: &GatewaySettings,
    ) -> Result<(), ConfigError> {
        let has_client = matches!(
            &gateway.auth,
            Some(CallerAuth::OAuth(server)) if server.introspection.is_some()
        );
        let exchanging = connections
            .iter()
            .find(|connection| connection.exchanges_tokens());
        match exchanging {
            Some(connection) if !has_client => Err(self.invalid(
                &key.key(&connection.name).key("on_behalf").key("kind"),
                "token exchange needs the gateway's callers to bring access tokens and the \
                 gateway's own client at their issuer: set [gateway] auth = { kind = \"oauth\", \
                 issuer = …, client_id = …, client_secret_env = … }",
            )),
            _ => Ok(()),
        }
    }

    /// A value from `T`'s vocabulary, `default` when absent.
    fn choice<T: Choice>(
        &self,
        key: &KeyPath,
        raw: Option<&str>,
        default: T,
    ) -> Result<T, ConfigError> {
        let Some(text) = raw else {
            return Ok(default);
        };
        T::parse(text).ok_or_else(|| {
            self.invalid(
                key,
                format!(
                    "unknown value {}; expected {}",
                    short_quote(text),
                    T::expected()
                ),
            )
        })
    }

    /// Relative paths in the file are relative to the file, not to wherever the
    /// process happens to be started.
    pub(crate) fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base_dir.join(path)
        }
    }

    pub(super) fn duration(
        &self,
        key: &KeyPath,
        raw: Option<String>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        match raw {
            Some(text) => self.check(key, values::duration(&text)),
            None => Ok(default),
        }
    }

    fn attempts(&self, key: &KeyPath, raw: Option<i64>, default: u32) -> Result<u32, ConfigError> {
        self.count_u32(key, raw, default, MAX_ATTEMPTS)
    }

    fn count_u32(
        &self,
        key: &KeyPath,
        raw: Option<i64>,
        default: u32,
        max: u32,
    ) -> Result<u32, ConfigError> {
        match raw {
            Some(n) => self.check(key, values::positive(n, max)),
            None => Ok(default),
        }
    }

    pub(super) fn count_usize(
        &self,
        key: &KeyPath,
        raw: Option<i64>,
        default: usize,
        max: usize,
    ) -> Result<usize, ConfigError> {
        match raw {
            Some(n) => self.check(key, values::positive_usize(n, max)),
            None => Ok(default),
        }
    }
}
