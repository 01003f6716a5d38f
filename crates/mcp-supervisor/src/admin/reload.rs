//! Re-reading the config: `POST /reload` and SIGHUP share one [`Reloader`].

use std::{fmt, path::PathBuf};

use actix::Addr;
use serde_json::{Value, json};

use crate::{
    config::{Config, ConfigError},
    registry::{Registry, Reload, ReloadAsked, ReloadReport},
};

/// Where the running config came from, so a reload reads the same place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// `serve --config FILE`: re-read on every reload, so edits take effect.
    File(PathBuf),
    /// A config compiled into the binary (the default config). Reloading it
    /// re-validates the same text, which still picks up changed `token_env`
    /// variables and token files.
    Embedded {
        /// Names the config in errors and logs, like a file name would.
        name: &'static str,
        text: &'static str,
    },
}

impl ConfigSource {
    /// Reads and validates the config, taking `token_env` variables from the
    /// process environment.
    pub fn load(&self) -> Result<Config, ConfigError> {
        match self {
            ConfigSource::File(path) => Config::from_file(path),
            ConfigSource::Embedded { name, text } => {
                Config::from_toml_str(text, name.as_ref(), &|variable| {
                    std::env::var(variable).ok()
                })
            }
        }
    }
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::File(path) => write!(f, "{}", path.display()),
            ConfigSource::Embedded { name, .. } => write!(f, "{name} (embedded)"),
        }
    }
}

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The new config is invalid; the old one stays in force.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The registry is gone (the process is shutting down).
    #[error("the supervisor is shutting down; the config was not reloaded")]
    Stopped,
}

/// Re-reads the config source and hands a valid result to the registry.
#[derive(Clone, Debug)]
pub struct Reloader {
    source: ConfigSource,
    registry: Addr<Registry>,
}

impl Reloader {
    pub fn new(source: ConfigSource, registry: Addr<Registry>) -> Self {
        Reloader { source, registry }
    }

    /// Where this reloader reads the config from.
    pub fn source(&self) -> &ConfigSource {
        &self.source
    }

    /// Re-reads and validates the config; applies it only if it is valid
    /// (added connections start lazily, removed ones stop, changed ones
    /// restart, unchanged ones keep their in-flight calls). On an error
    /// nothing changes.
    /// With `[fleet]`, every other node is told to reload too.
    pub async fn reload(&self) -> Result<ReloadReport, ReloadError> {
        self.reload_as(Reload).await
    }

    /// The same, because another node of the fleet reloaded: the others are
    /// not told again.
    pub async fn reload_as_asked(&self) -> Result<ReloadReport, ReloadError> {
        self.reload_as(ReloadAsked).await
    }

    async fn reload_as<M>(
        &self,
        message: impl FnOnce(Config) -> M,
    ) -> Result<ReloadReport, ReloadError>
    where
        M: actix::Message<Result = ReloadReport> + Send + 'static,
        Registry: actix::Handler<M>,
    {
        // A config file is small and token files are local: reading them
        // inline is cheaper than a round trip to the blocking pool.
        let config = match self.source.load() {
            Ok(config) => config,
            Err(error) => {
                // ConfigError's Display never holds a secret value.
                tracing::warn!(source = %self.source, %error, "config reload refused; the old config stays");
                return Err(error.into());
            }
        };
        let report = self
            .registry
            .send(message(config))
            .await
            .map_err(|_| ReloadError::Stopped)?;
        tracing::info!(
            source = %self.source,
            added = ?report.added,
            removed = ?report.removed,
            changed = ?report.changed,
            unchanged = report.unchanged.len(),
            "config reload applied"
        );
        Ok(report)
    }
}

/// `{"added":[…],"removed":[…],"changed":[…],"unchanged":[…]}`, by connection name.
pub fn report_json(report: &ReloadReport) -> Value {
    json!({
        "added": report.added,
        "removed": report.removed,
        "changed": report.changed,
        "unchanged": report.unchanged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_embedded_config_loads_and_names_itself_in_errors() {
        let good = ConfigSource::Embedded {
            name: "default.toml",
            text: "[admin]\nlisten = \"127.0.0.1:7399\"\n",
        };
        let config = good.load().unwrap();
        assert_eq!(config.admin.listen.port(), 7399);
        assert_eq!(good.to_string(), "default.toml (embedded)");

        let bad = ConfigSource::Embedded {
            name: "default.toml",
            text: "[admin]\nlisten = 3\n",
        };
        let error = bad.load().unwrap_err().to_string();
        assert!(error.starts_with("default.toml: admin.listen"), "{error}");
    }

    #[test]
    fn a_missing_file_is_a_config_error_naming_it() {
        let source = ConfigSource::File("/nonexistent/mcp-supervisor.toml".into());
        let error = source.load().unwrap_err();
        assert!(matches!(error, ConfigError::Io { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("/nonexistent/mcp-supervisor.toml")
        );
    }

    #[test]
    fn the_report_has_all_four_lists() {
        let report = ReloadReport {
            added: vec!["b".into()],
            removed: vec![],
            changed: vec!["c".into()],
            unchanged: vec!["a".into(), "d".into()],
        };
        assert_eq!(
            report_json(&report),
            json!({"added": ["b"], "removed": [], "changed": ["c"], "unchanged": ["a", "d"]})
        );
    }
}
