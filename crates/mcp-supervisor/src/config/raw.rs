//! The file as written: serde structs that only describe the TOML document.
//!
//! Nothing here has a default or a rule; [`super::validate`] supplies both. Every
//! key is optional so that a missing key gets our message (naming the key path)
//! rather than serde's; numbers are `i64` (TOML's integer type) so that `-1` is
//! reported as "must be greater than zero" instead of a type error; durations and
//! enum-like values are plain strings parsed later for the same reason.
//!
//! Secret-bearing values (`token`, header values, `env` values) are
//! [`SecretString`] from the moment serde hands them over.

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::Deserialize;

/// The whole document.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a TOML document")]
pub(crate) struct RawConfig {
    pub(crate) supervisor: Option<RawSupervisor>,
    pub(crate) gateway: Option<RawGateway>,
    pub(crate) admin: Option<RawAdmin>,
    /// A `BTreeMap` so connections come out sorted by name.
    pub(crate) connections: Option<BTreeMap<String, RawConnection>>,
    pub(crate) fleet: Option<RawFleet>,
    pub(crate) telemetry: Option<RawTelemetry>,
    /// Spanned, so a rule's problem names its line.
    pub(crate) access: Option<Vec<toml::Spanned<RawAccess>>>,
    pub(crate) limits: Option<Vec<toml::Spanned<RawLimit>>>,
    pub(crate) contracts: Option<RawContracts>,
}

/// `[contracts]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawContracts {
    pub(crate) lock: Option<String>,
    pub(crate) on_change: Option<String>,
    pub(crate) on_new: Option<String>,
    pub(crate) allow: Option<Vec<String>>,
    pub(crate) park_after: Option<RawChurnLimit>,
}

/// `contracts.park_after = { changes, within }`.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { changes = 3, within = \"10m\" }"
)]
pub(crate) struct RawChurnLimit {
    pub(crate) changes: Option<i64>,
    pub(crate) within: Option<String>,
}

/// `[[limits]]`: one caller's limit.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawLimit {
    pub(crate) who: Option<Vec<String>>,
    pub(crate) calls_per_minute: Option<i64>,
    pub(crate) concurrent_calls: Option<i64>,
}

/// `[[access]]`: one rule.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawAccess {
    pub(crate) who: Option<Vec<String>>,
    pub(crate) allow: Option<Vec<String>>,
    pub(crate) deny: Option<Vec<String>>,
}

/// `[gateway.keys.NAME]`: a machine client's key, by its hash.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawKey {
    pub(crate) sha256: Option<String>,
    pub(crate) groups: Option<Vec<String>>,
}

/// `[telemetry]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawTelemetry {
    pub(crate) endpoint: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) headers: Option<BTreeMap<String, RawSecretSource>>,
    pub(crate) service_name: Option<String>,
    pub(crate) sample_ratio: Option<f64>,
    pub(crate) timeout: Option<String>,
    pub(crate) batch_delay: Option<String>,
    pub(crate) max_queue: Option<i64>,
    pub(crate) metrics_interval: Option<String>,
    pub(crate) capture_content: Option<bool>,
}

/// A secret named, never written: `{ env = "NAME" }` or `{ file = "PATH" }`.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { env = \"NAME\" } or { file = \"PATH\" } (the value itself does not belong in the file)"
)]
pub(crate) struct RawSecretSource {
    pub(crate) env: Option<String>,
    pub(crate) file: Option<String>,
}

/// `[fleet]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawFleet {
    pub(crate) redis: Option<String>,
    pub(crate) password_env: Option<String>,
    pub(crate) password_file: Option<String>,
    pub(crate) node: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) max_clock_skew: Option<String>,
    pub(crate) advertise: Option<String>,
    pub(crate) key_env: Option<String>,
    pub(crate) key_file: Option<String>,
}

/// `[supervisor]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawSupervisor {
    pub(crate) connect_timeout: Option<String>,
    pub(crate) call_timeout: Option<String>,
    pub(crate) list_timeout: Option<String>,
    pub(crate) max_attempts: Option<i64>,
    pub(crate) shutdown_timeout: Option<String>,
    pub(crate) state_dir: Option<String>,
    pub(crate) relist: Option<String>,
    pub(crate) probe: Option<String>,
    pub(crate) probe_after: Option<String>,
    pub(crate) probe_every: Option<String>,
    pub(crate) max_probes: Option<i64>,
    pub(crate) restart_budget: Option<RawRestartBudget>,
    pub(crate) quarantine: Option<RawQuarantine>,
}

/// The probe keys of `[supervisor]` and `[connections.NAME]`, taken out
/// of either (serde's `flatten` does not go with `deny_unknown_fields`).
#[derive(Debug, Default)]
pub(crate) struct RawProbe {
    pub(crate) probe: Option<String>,
    pub(crate) probe_after: Option<String>,
    pub(crate) probe_every: Option<String>,
    pub(crate) max_probes: Option<i64>,
}

macro_rules! take_probe {
    ($raw:expr) => {
        RawProbe {
            probe: $raw.probe.take(),
            probe_after: $raw.probe_after.take(),
            probe_every: $raw.probe_every.take(),
            max_probes: $raw.max_probes.take(),
        }
    };
}

impl RawSupervisor {
    pub(crate) fn take_probe(&mut self) -> RawProbe {
        take_probe!(self)
    }
}

impl RawConnection {
    pub(crate) fn take_probe(&mut self) -> RawProbe {
        take_probe!(self)
    }
}

/// `supervisor.restart_budget = { restarts, within }`.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { restarts = 5, within = \"60s\" }"
)]
pub(crate) struct RawRestartBudget {
    pub(crate) restarts: Option<i64>,
    pub(crate) within: Option<String>,
}

/// `[supervisor.quarantine]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawQuarantine {
    pub(crate) base_cooldown: Option<String>,
    pub(crate) max_cooldown: Option<String>,
    pub(crate) retire_after: Option<i64>,
}

/// `[gateway]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawGateway {
    pub(crate) listen: Option<String>,
    pub(crate) path: Option<String>,
    pub(crate) expose: Option<String>,
    pub(crate) prefix: Option<String>,
    pub(crate) auth: Option<RawAuth>,
    pub(crate) allowed_hosts: Option<Vec<String>>,
    pub(crate) max_body_bytes: Option<i64>,
    pub(crate) header_timeout: Option<String>,
    pub(crate) body_timeout: Option<String>,
    pub(crate) idle_timeout: Option<String>,
    pub(crate) max_connections: Option<i64>,
    pub(crate) max_sessions: Option<i64>,
    pub(crate) max_sessions_per_client: Option<i64>,
    pub(crate) session_idle_timeout: Option<String>,
    pub(crate) session_rest_after: Option<String>,
    pub(crate) trusted_proxies: Option<Vec<String>>,
    pub(crate) forwarded_header: Option<String>,
    pub(crate) public_url: Option<String>,
    pub(crate) keys: Option<BTreeMap<String, RawKey>>,
    pub(crate) audit_log: Option<String>,
}

/// `[admin]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawAdmin {
    pub(crate) listen: Option<String>,
    pub(crate) auth: Option<RawAuth>,
    pub(crate) allowed_hosts: Option<Vec<String>>,
    pub(crate) header_timeout: Option<String>,
    pub(crate) idle_timeout: Option<String>,
    pub(crate) max_connections: Option<i64>,
}

/// `auth = { kind = "bearer", token | token_env | token_file }`, used by the gateway,
/// the admin API and http connections; http connections also take
/// `auth = { kind = "oauth", client_id, client_secret_env, scopes, grant,
/// authorization_server }`.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { kind = \"bearer\", token_env = \"NAME\" }"
)]
pub(crate) struct RawAuth {
    pub(crate) kind: Option<String>,
    pub(crate) token: Option<SecretString>,
    pub(crate) token_env: Option<String>,
    pub(crate) token_file: Option<String>,
    // kind = "oauth".
    pub(crate) client_id: Option<String>,
    pub(crate) client_metadata_url: Option<String>,
    pub(crate) client_secret_env: Option<String>,
    pub(crate) scopes: Option<Vec<String>>,
    pub(crate) grant: Option<String>,
    pub(crate) authorization_server: Option<String>,
    // kind = "oauth" of the gateway.
    pub(crate) issuer: Option<String>,
    pub(crate) groups_claim: Option<String>,
    pub(crate) leeway: Option<String>,
}

/// `[connections.NAME]`: the keys of both transports, all optional; which ones are
/// allowed depends on `transport` and is checked in validation, where the message
/// can say "'url' is only valid for transport = \"http\"".
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawConnection {
    pub(crate) transport: Option<String>,
    // Common keys.
    pub(crate) allowed_tools: Option<Vec<String>>,
    pub(crate) notes: Option<String>,
    pub(crate) max_concurrent_calls: Option<i64>,
    pub(crate) max_queued_calls: Option<i64>,
    pub(crate) connect_timeout: Option<String>,
    pub(crate) call_timeout: Option<String>,
    pub(crate) list_timeout: Option<String>,
    pub(crate) max_attempts: Option<i64>,
    pub(crate) retry_calls: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) probe: Option<String>,
    pub(crate) probe_after: Option<String>,
    pub(crate) probe_every: Option<String>,
    pub(crate) max_probes: Option<i64>,
    // transport = "http".
    pub(crate) url: Option<String>,
    pub(crate) auth: Option<RawAuth>,
    pub(crate) headers: Option<BTreeMap<String, SecretString>>,
    pub(crate) on_behalf: Option<RawOnBehalf>,
    // transport = "stdio".
    pub(crate) command: Option<String>,
    pub(crate) args: Option<Vec<String>>,
    pub(crate) env: Option<BTreeMap<String, SecretString>>,
    pub(crate) cwd: Option<String>,
}

/// `[connections.NAME.on_behalf]`.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { kind = \"token_exchange\" }"
)]
pub(crate) struct RawOnBehalf {
    pub(crate) kind: Option<String>,
    // kind = "token_exchange".
    pub(crate) audience: Option<String>,
    pub(crate) scopes: Option<Vec<String>>,
    // kind = "per_caller".
    pub(crate) credentials: Option<Vec<RawCallerCredential>>,
    pub(crate) max_sessions: Option<i64>,
    pub(crate) idle_timeout: Option<String>,
}

/// One of `on_behalf.credentials`: for whom, and the bearer token.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { who = [\"group:NAME\"], token_env = \"NAME\" }"
)]
pub(crate) struct RawCallerCredential {
    pub(crate) who: Option<Vec<String>>,
    pub(crate) token: Option<SecretString>,
    pub(crate) token_env: Option<String>,
    pub(crate) token_file: Option<String>,
}
