//! The typed configuration the rest of the crate uses.
//!
//! Values here are already validated and resolved: defaults applied,
//! per-connection overrides merged with `[supervisor]`, secrets read. `Debug`
//! never prints a secret: tokens, header values and `env` values are
//! [`SecretString`](secrecy::SecretString)s, stdio `args` are shown as a count
//! (they often carry `--token …`), and URLs are shown without their query
//! string (API keys in queries are common).
//!
//! # Layout
//!
//! [`Config`] and [`Choice`] (a value from a fixed vocabulary) are here; the
//! rest is by table:
//!
//! - `supervisor`: `[supervisor]`, what every connection inherits.
//! - `listeners`: `[gateway]` and `[admin]`, the two HTTP servers.
//! - `connection`: `[connections.NAME]` and its http or stdio transport.
//! - `auth`: bearer tokens and an http connection's OAuth settings.
//! - `callers`: who may call the gateway (its auth, keys, audit log).
//! - `contracts`: `[contracts]`, the lock file and what a changed tool does.
//! - `fleet`: `[fleet]`, with the fleet's key and the store's password.
//! - `telemetry`: `[telemetry]`, the OTLP export.
//! - `redact`: what `Debug` shows of secrets and URLs.

mod auth;
mod callers;
mod connection;
mod contracts;
mod fleet;
mod listeners;
mod redact;
mod supervisor;
mod telemetry;

pub use self::{
    auth::{BearerToken, OAuthGrant, OAuthSettings, UpstreamAuth},
    callers::{
        ApiKey, AuditLog, CallerAuth, DEFAULT_GROUPS_CLAIM, DEFAULT_LEEWAY, IntrospectionClient,
        ResourceServer,
    },
    connection::{
        CallerCredential, CallerCredentials, ConnectionConfig, DEFAULT_MAX_CONCURRENT_CALLS,
        DEFAULT_MAX_QUEUED_CALLS, DEFAULT_ON_BEHALF_IDLE, DEFAULT_ON_BEHALF_SESSIONS,
        HttpTransport, OnBehalf, RetryCalls, StdioTransport, Transport, UpstreamProtocol,
    },
    contracts::{Allowance, ChurnLimit, ContractSettings, DEFAULT_LOCK_FILE, OnChange, OnNew},
    fleet::{DEFAULT_FLEET_NAMESPACE, DEFAULT_MAX_CLOCK_SKEW, FleetKey, FleetSettings, Password},
    listeners::{
        AdminSettings, DEFAULT_MAX_BODY_BYTES, Expose, ForwardedHeader, GatewaySettings, Prefix,
    },
    supervisor::{ProbeMode, ProbeSettings, QuarantineSettings, RestartBudget, SupervisorSettings},
    telemetry::{CAPTURE_MAX_BYTES, OtlpProtocol, SampleRatio, TelemetrySettings},
};
pub(super) use listeners::DEFAULT_MAX_SESSIONS_PER_CLIENT;
pub(crate) use redact::redact_url;

/// The whole, validated configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// Timeouts, attempts and quarantine policy shared by every connection.
    pub supervisor: SupervisorSettings,
    /// The MCP endpoint of the long-lived process.
    pub gateway: GatewaySettings,
    /// The admin HTTP API of the long-lived process.
    pub admin: AdminSettings,
    /// Every configured upstream, sorted by name (names are unique).
    pub connections: Vec<ConnectionConfig>,
    /// `[fleet]`: what this process learns is shared with other processes
    /// through Redis (docs/FLEET.md). `None`: the process is alone.
    pub fleet: Option<FleetSettings>,
    /// `[telemetry]`: spans and metrics exported over OTLP
    /// (docs/OBSERVABILITY.md). `None`: nothing is exported.
    pub telemetry: Option<TelemetrySettings>,
    /// `[[access]]`: what each caller may use (docs/SECURITY.md). Empty:
    /// every caller may use everything.
    pub access: crate::access::Rules,
    /// `[[limits]]`: how many calls each caller may make. Empty: no limit.
    pub limits: crate::access::Limits,
    /// `[contracts]`: approved tool contracts and what a change does
    /// (docs/CONTRACTS.md). `None`: changes are observed, nothing is held.
    pub contracts: Option<ContractSettings>,
    /// What is allowed but probably not meant (a rule no caller reaches),
    /// each a line naming the key and where it is in the file.
    pub warnings: Vec<String>,
}

impl Config {
    /// The connection called `name`, if configured.
    pub fn connection(&self, name: &str) -> Option<&ConnectionConfig> {
        // `connections` is sorted by name, which validation guarantees.
        self.connections
            .binary_search_by(|c| c.name.as_str().cmp(name))
            .ok()
            .and_then(|i| self.connections.get(i))
    }
}

/// A config value chosen from a fixed vocabulary of strings.
pub trait Choice: Copy + 'static {
    /// Every value, in the order error messages list them.
    const ALL: &'static [Self];
    /// The config spelling.
    fn as_str(self) -> &'static str;

    /// The value spelled `text`, if any.
    fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|value| value.as_str() == text)
    }

    /// `"a", "b" or "c"`, for error messages.
    fn expected() -> String {
        let quoted: Vec<String> = Self::ALL
            .iter()
            .map(|value| format!("\"{}\"", value.as_str()))
            .collect();
        match quoted.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_lookup_uses_sorted_names() {
        let sup = SupervisorSettings::default();
        let stdio = |c: &str| {
            Transport::Stdio(StdioTransport {
                command: c.into(),
                args: vec![],
                env: vec![],
                cwd: None,
            })
        };
        let config = Config {
            connections: vec![
                ConnectionConfig::new("a", stdio("x"), &sup),
                ConnectionConfig::new("b", stdio("y"), &sup),
                ConnectionConfig::new("c", stdio("z"), &sup),
            ],
            ..Config::default()
        };
        assert_eq!(
            config.connection("b").map(|c| c.transport.kind()),
            Some("stdio")
        );
        assert!(config.connection("d").is_none());
    }
}
