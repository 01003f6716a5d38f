//! From [`RawConfig`] to [`Config`]: defaults, rules, resolution of overrides.
//!
//! Pure apart from reading `token_file`s: the environment is injected, so tests
//! can supply variables without touching the process environment. Checks run in
//! document order (supervisor, gateway, admin, connections by name) and the first
//! problem is returned.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::error::ConfigError;
use super::keypath::KeyPath;
use super::model::{
    AdminSettings, Choice, Config, ConnectionConfig, DEFAULT_FLEET_NAMESPACE,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CLOCK_SKEW, DEFAULT_MAX_CONCURRENT_CALLS,
    DEFAULT_MAX_QUEUED_CALLS, DEFAULT_MAX_SESSIONS_PER_CLIENT, FleetSettings, GatewaySettings,
    HttpTransport, Password, QuarantineSettings, RestartBudget, RetryCalls, StdioTransport,
    SupervisorSettings, Transport, UpstreamProtocol,
};
use super::raw::{
    RawAdmin, RawConfig, RawConnection, RawFleet, RawGateway, RawQuarantine, RawRestartBudget,
    RawSupervisor,
};
use super::values::{self, short_quote};

/// Upper bound of `max_attempts`: beyond this a retry loop outlives any timeout.
const MAX_ATTEMPTS: u32 = 100;
/// Upper bound of `max_concurrent_calls` (well inside tokio's semaphore limit).
const MAX_CONCURRENT_CALLS: usize = 65_536;
/// Upper bound of `max_queued_calls`.
const MAX_QUEUED_CALLS: usize = 1_000_000;
/// Upper bound of `gateway.max_body_bytes`: 1 GiB.
const MAX_BODY_BYTES: usize = 1 << 30;
/// Upper bound of `max_connections` (gateway and admin): more than any file
/// descriptor limit in practice.
const MAX_CONNECTIONS: usize = 1_000_000;
/// Upper bound of `gateway.max_sessions`.
const MAX_SESSIONS: usize = 1_000_000;

/// Request headers the HTTP transport sets itself; overriding them breaks the
/// protocol, so they are refused with a clear message instead.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "mcp-protocol-version",
    "mcp-session-id",
    "transfer-encoding",
];

/// Validation context: where the file is and how to read the environment.
pub(crate) struct Validator<'a> {
    /// Named in every error.
    pub(crate) file: &'a Path,
    /// Base for relative `token_file` and `cwd` paths: the file's directory.
    pub(crate) base_dir: PathBuf,
    /// Environment lookup for `token_env`.
    pub(crate) env: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Validator<'a> {
    pub(crate) fn new(file: &'a Path, env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        let base_dir = match file.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Self {
            file,
            base_dir,
            env,
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
        let fleet = raw
            .fleet
            .map(|fleet| self.fleet(&root.key("fleet"), fleet, &gateway))
            .transpose()?;
        let telemetry = match raw.telemetry {
            Some(telemetry) => self.telemetry(&root.key("telemetry"), telemetry)?,
            None => None,
        };
        Ok(Config {
            supervisor,
            gateway,
            admin,
            connections,
            fleet,
            telemetry,
        })
    }

    fn supervisor(
        &self,
        key: &KeyPath,
        raw: RawSupervisor,
    ) -> Result<SupervisorSettings, ConfigError> {
        let d = SupervisorSettings::default();
        Ok(SupervisorSettings {
            connect_timeout: self.duration(
                &key.key("connect_timeout"),
                raw.connect_timeout,
                d.connect_timeout,
            )?,
            call_timeout: self.duration(
                &key.key("call_timeout"),
                raw.call_timeout,
                d.call_timeout,
            )?,
            list_timeout: self.duration(
                &key.key("list_timeout"),
                raw.list_timeout,
                d.list_timeout,
            )?,
            max_attempts: self.attempts(
                &key.key("max_attempts"),
                raw.max_attempts,
                d.max_attempts,
            )?,
            shutdown_timeout: self.duration(
                &key.key("shutdown_timeout"),
                raw.shutdown_timeout,
                d.shutdown_timeout,
            )?,
            restart_budget: self.restart_budget(
                &key.key("restart_budget"),
                raw.restart_budget.unwrap_or_default(),
            )?,
            quarantine: self
                .quarantine(&key.key("quarantine"), raw.quarantine.unwrap_or_default())?,
            state_dir: self.state_dir(&key.key("state_dir"), raw.state_dir)?,
        })
    }

    /// `state_dir` as configured (relative to the config file), else the XDG
    /// state directory.
    fn state_dir(
        &self,
        key: &KeyPath,
        raw: Option<String>,
    ) -> Result<Option<PathBuf>, ConfigError> {
        match raw {
            Some(path) if path.is_empty() => Err(self.invalid(key, "must not be empty")),
            Some(path) => Ok(Some(self.resolve(&path))),
            None => Ok((self.env)("XDG_STATE_HOME")
                .filter(|dir| Path::new(dir).is_absolute())
                .map(PathBuf::from)
                .or_else(|| (self.env)("HOME").map(|home| Path::new(&home).join(".local/state")))
                .map(|dir| dir.join("mcp-supervisor"))),
        }
    }

    fn restart_budget(
        &self,
        key: &KeyPath,
        raw: RawRestartBudget,
    ) -> Result<RestartBudget, ConfigError> {
        let d = RestartBudget::default();
        Ok(RestartBudget {
            restarts: self.count_u32(&key.key("restarts"), raw.restarts, d.restarts, u32::MAX)?,
            within: self.duration(&key.key("within"), raw.within, d.within)?,
        })
    }

    fn quarantine(
        &self,
        key: &KeyPath,
        raw: RawQuarantine,
    ) -> Result<QuarantineSettings, ConfigError> {
        let d = QuarantineSettings::default();
        let q = QuarantineSettings {
            base_cooldown: self.duration(
                &key.key("base_cooldown"),
                raw.base_cooldown,
                d.base_cooldown,
            )?,
            max_cooldown: self.duration(
                &key.key("max_cooldown"),
                raw.max_cooldown,
                d.max_cooldown,
            )?,
            retire_after: self.count_u32(
                &key.key("retire_after"),
                raw.retire_after,
                d.retire_after,
                u32::MAX,
            )?,
        };
        if q.max_cooldown < q.base_cooldown {
            return Err(self.invalid(
                &key.key("max_cooldown"),
                format!(
                    "must be at least base_cooldown ({} < {})",
                    humantime::format_duration(q.max_cooldown),
                    humantime::format_duration(q.base_cooldown)
                ),
            ));
        }
        Ok(q)
    }

    fn gateway(&self, key: &KeyPath, raw: RawGateway) -> Result<GatewaySettings, ConfigError> {
        let d = GatewaySettings::default();
        let listen = match raw.listen {
            Some(text) => self.check(&key.key("listen"), values::socket_addr(&text))?,
            None => d.listen,
        };
        let path = match raw.path {
            Some(path) => {
                self.check(&key.key("path"), gateway_path(&path))?;
                path
            }
            None => d.path,
        };
        let expose = self.choice(&key.key("expose"), raw.expose.as_deref(), d.expose)?;
        let prefix = self.choice(&key.key("prefix"), raw.prefix.as_deref(), d.prefix)?;
        let auth = raw
            .auth
            .map(|auth| self.bearer(&key.key("auth"), auth))
            .transpose()?;
        let allowed_hosts = match raw.allowed_hosts {
            Some(hosts) => self.allowed_hosts(&key.key("allowed_hosts"), hosts)?,
            None => d.allowed_hosts,
        };
        let max_body_bytes = match raw.max_body_bytes {
            Some(n) => self.check(
                &key.key("max_body_bytes"),
                values::positive_usize(n, MAX_BODY_BYTES),
            )?,
            None => DEFAULT_MAX_BODY_BYTES,
        };
        let max_sessions = self.count_usize(
            &key.key("max_sessions"),
            raw.max_sessions,
            d.max_sessions,
            MAX_SESSIONS,
        )?;
        let max_sessions_per_client = match raw.max_sessions_per_client {
            Some(n) => self.check(
                &key.key("max_sessions_per_client"),
                values::positive_usize(n, max_sessions).map_err(|error| {
                    if n > 0 {
                        format!("must be at most max_sessions ({max_sessions})")
                    } else {
                        error
                    }
                }),
            )?,
            None => DEFAULT_MAX_SESSIONS_PER_CLIENT.min(max_sessions),
        };
        Ok(GatewaySettings {
            listen,
            path,
            expose,
            prefix,
            auth,
            allowed_hosts,
            max_body_bytes,
            header_timeout: self.duration(
                &key.key("header_timeout"),
                raw.header_timeout,
                d.header_timeout,
            )?,
            body_timeout: self.duration(
                &key.key("body_timeout"),
                raw.body_timeout,
                d.body_timeout,
            )?,
            idle_timeout: self.duration(
                &key.key("idle_timeout"),
                raw.idle_timeout,
                d.idle_timeout,
            )?,
            max_connections: self.count_usize(
                &key.key("max_connections"),
                raw.max_connections,
                d.max_connections,
                MAX_CONNECTIONS,
            )?,
            max_sessions,
            max_sessions_per_client,
            session_idle_timeout: self.duration(
                &key.key("session_idle_timeout"),
                raw.session_idle_timeout,
                d.session_idle_timeout,
            )?,
            trusted_proxies: raw
                .trusted_proxies
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    self.check(&key.key("trusted_proxies").index(i), values::ip_net(text))
                })
                .collect::<Result<_, _>>()?,
            forwarded_header: self.choice(
                &key.key("forwarded_header"),
                raw.forwarded_header.as_deref(),
                d.forwarded_header,
            )?,
        })
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

    fn allowed_hosts(&self, key: &KeyPath, hosts: Vec<String>) -> Result<Vec<String>, ConfigError> {
        if hosts.is_empty() {
            return Err(self.invalid(
                key,
                "must list at least one host (an empty list would refuse every request)",
            ));
        }
        hosts
            .into_iter()
            .enumerate()
            .map(|(i, host)| {
                let host = host.trim().to_ascii_lowercase();
                if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
                    Err(self.invalid(
                        &key.index(i),
                        "must be a non-empty host name or address without spaces or '/'",
                    ))
                } else {
                    Ok(host)
                }
            })
            .collect()
    }

    fn admin(&self, key: &KeyPath, raw: RawAdmin) -> Result<AdminSettings, ConfigError> {
        let d = AdminSettings::default();
        Ok(AdminSettings {
            listen: match raw.listen {
                Some(text) => self.check(&key.key("listen"), values::socket_addr(&text))?,
                None => d.listen,
            },
            auth: raw
                .auth
                .map(|auth| self.bearer(&key.key("auth"), auth))
                .transpose()?,
            allowed_hosts: match raw.allowed_hosts {
                Some(hosts) => self.allowed_hosts(&key.key("allowed_hosts"), hosts)?,
                None => d.allowed_hosts,
            },
            header_timeout: self.duration(
                &key.key("header_timeout"),
                raw.header_timeout,
                d.header_timeout,
            )?,
            idle_timeout: self.duration(
                &key.key("idle_timeout"),
                raw.idle_timeout,
                d.idle_timeout,
            )?,
            max_connections: self.count_usize(
                &key.key("max_connections"),
                raw.max_connections,
                d.max_connections,
                MAX_CONNECTIONS,
            )?,
        })
    }

    fn fleet(
        &self,
        key: &KeyPath,
        raw: RawFleet,
        gateway: &GatewaySettings,
    ) -> Result<FleetSettings, ConfigError> {
        let Some(redis) = raw.redis else {
            return Err(self.invalid(
                &key.key("redis"),
                "is required: the store's URL, like \"redis://127.0.0.1:6379\"",
            ));
        };
        let redis = self.check(&key.key("redis"), values::redis_url(&redis))?;
        let password = match (raw.password_env, raw.password_file) {
            (Some(_), Some(_)) => {
                return Err(
                    self.invalid(key, "set at most one of 'password_env' or 'password_file'")
                );
            }
            (Some(var), None) => Some(self.token_from_env(&key.key("password_env"), &var)?),
            (None, Some(path)) => Some(self.token_from_file(&key.key("password_file"), &path)?),
            (None, None) => None,
        };
        let secret = match (raw.key_env, raw.key_file) {
            (Some(var), None) => {
                let here = key.key("key_env");
                (self.token_from_env(&here, &var)?, here)
            }
            (None, Some(path)) => {
                let here = key.key("key_file");
                (self.token_from_file(&here, &path)?, here)
            }
            _ => {
                return Err(self.invalid(
                    key,
                    "set exactly one of 'key_env' or 'key_file': the fleet's key, 32 random \
                     bytes in base64 (`openssl rand -base64 32`), the same on every node",
                ));
            }
        };
        let fleet_key = self.check(&secret.1, values::fleet_key(secret.0.expose_secret()))?;
        let node = match raw.node {
            Some(node) => self.check(&key.key("node"), values::fleet_name(node))?,
            None => default_node(),
        };
        let namespace = match raw.namespace {
            Some(namespace) => self.check(&key.key("namespace"), values::fleet_name(namespace))?,
            None => DEFAULT_FLEET_NAMESPACE.to_owned(),
        };
        let max_clock_skew = self.duration(
            &key.key("max_clock_skew"),
            raw.max_clock_skew,
            DEFAULT_MAX_CLOCK_SKEW,
        )?;
        if max_clock_skew > MAX_CLOCK_SKEW {
            return Err(self.invalid(
                &key.key("max_clock_skew"),
                "must be at most 60s: synchronise the clocks (NTP) instead",
            ));
        }
        let advertise = match raw.advertise {
            Some(text) => {
                let here = key.key("advertise");
                self.check(&here, values::http_url(&text))?;
                Some(self.check(&here, url::Url::parse(&text).map_err(|e| e.to_string()))?)
            }
            // Where the gateway listens, when that is an address others can use.
            None => (!gateway.listen.ip().is_unspecified() && gateway.listen.port() != 0)
                .then(|| url::Url::parse(&format!("http://{}", gateway.listen)).ok())
                .flatten(),
        };
        Ok(FleetSettings {
            redis,
            password: password.map(Password::new),
            key: fleet_key,
            node,
            namespace,
            max_clock_skew,
            advertise,
        })
    }

    fn connection(
        &self,
        key: &KeyPath,
        name: String,
        mut raw: RawConnection,
        sup: &SupervisorSettings,
    ) -> Result<ConnectionConfig, ConfigError> {
        self.check(key, values::connection_name(&name))?;
        let transport = match raw.transport.as_deref() {
            Some("http") => Transport::Http(self.http(key, &name, &mut raw, sup)?),
            Some("stdio") => Transport::Stdio(self.stdio(key, &mut raw)?),
            Some(other) => {
                return Err(self.invalid(
                    &key.key("transport"),
                    format!(
                        "unknown transport {}; expected \"http\" or \"stdio\"",
                        short_quote(other)
                    ),
                ));
            }
            None => {
                return Err(self.invalid(
                    &key.key("transport"),
                    "missing required key 'transport' (\"http\" or \"stdio\")",
                ));
            }
        };
        let allowed_tools = raw
            .allowed_tools
            .map(|tools| self.allowed_tools(&key.key("allowed_tools"), tools))
            .transpose()?;
        let retry_calls = self.choice(
            &key.key("retry_calls"),
            raw.retry_calls.as_deref(),
            RetryCalls::default(),
        )?;
        let protocol = self.choice(
            &key.key("protocol"),
            raw.protocol.as_deref(),
            UpstreamProtocol::default(),
        )?;
        Ok(ConnectionConfig {
            transport,
            allowed_tools,
            notes: raw.notes,
            max_concurrent_calls: self.count_usize(
                &key.key("max_concurrent_calls"),
                raw.max_concurrent_calls,
                DEFAULT_MAX_CONCURRENT_CALLS,
                MAX_CONCURRENT_CALLS,
            )?,
            max_queued_calls: self.count_usize(
                &key.key("max_queued_calls"),
                raw.max_queued_calls,
                DEFAULT_MAX_QUEUED_CALLS,
                MAX_QUEUED_CALLS,
            )?,
            connect_timeout: self.duration(
                &key.key("connect_timeout"),
                raw.connect_timeout,
                sup.connect_timeout,
            )?,
            call_timeout: self.duration(
                &key.key("call_timeout"),
                raw.call_timeout,
                sup.call_timeout,
            )?,
            list_timeout: self.duration(
                &key.key("list_timeout"),
                raw.list_timeout,
                sup.list_timeout,
            )?,
            max_attempts: self.attempts(
                &key.key("max_attempts"),
                raw.max_attempts,
                sup.max_attempts,
            )?,
            retry_calls,
            protocol,
            name,
        })
    }

    fn http(
        &self,
        key: &KeyPath,
        name: &str,
        raw: &mut RawConnection,
        supervisor: &SupervisorSettings,
    ) -> Result<HttpTransport, ConfigError> {
        self.forbid(key, "stdio", "command", raw.command.is_some())?;
        self.forbid(key, "stdio", "args", raw.args.is_some())?;
        self.forbid(key, "stdio", "env", raw.env.is_some())?;
        self.forbid(key, "stdio", "cwd", raw.cwd.is_some())?;
        let Some(url) = raw.url.take() else {
            return Err(self.invalid(&key.key("url"), "an http connection requires 'url'"));
        };
        self.check(&key.key("url"), values::http_url(&url))?;
        let auth = raw
            .auth
            .take()
            .map(|auth| self.upstream_auth(&key.key("auth"), auth, name, supervisor))
            .transpose()?;
        let headers = match raw.headers.take() {
            Some(headers) => self.headers(
                &key.key("headers"),
                headers.into_iter().collect(),
                auth.is_some(),
            )?,
            None => Vec::new(),
        };
        Ok(HttpTransport { url, auth, headers })
    }

    fn headers(
        &self,
        key: &KeyPath,
        headers: Vec<(String, SecretString)>,
        has_auth: bool,
    ) -> Result<Vec<(String, SecretString)>, ConfigError> {
        let mut seen = BTreeSet::new();
        for (name, value) in &headers {
            let here = key.key(name);
            let lower = name.to_ascii_lowercase();
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(self.invalid(&here, "not a valid HTTP header name"));
            }
            // Checked on bytes so non-ASCII text is allowed; what is refused is a
            // line break or control character, which would split the request.
            if http::HeaderValue::from_bytes(value.expose_secret().as_bytes()).is_err() {
                return Err(self.invalid(
                    &here,
                    "the header value contains a line break or another control character",
                ));
            }
            if RESERVED_HEADERS.contains(&lower.as_str()) {
                return Err(self.invalid(
                    &here,
                    "this header is set by the MCP transport itself and cannot be configured",
                ));
            }
            if lower == "authorization" && has_auth {
                return Err(self.invalid(
                    &here,
                    "conflicts with 'auth', which already sets Authorization; keep one of them",
                ));
            }
            if !seen.insert(lower) {
                return Err(self.invalid(
                    &here,
                    "duplicate header (header names are case-insensitive)",
                ));
            }
        }
        Ok(headers)
    }

    fn stdio(&self, key: &KeyPath, raw: &mut RawConnection) -> Result<StdioTransport, ConfigError> {
        self.forbid(key, "http", "url", raw.url.is_some())?;
        self.forbid(key, "http", "auth", raw.auth.is_some())?;
        self.forbid(key, "http", "headers", raw.headers.is_some())?;
        let command_key = key.key("command");
        let Some(command) = raw.command.take() else {
            return Err(self.invalid(&command_key, "a stdio connection requires 'command'"));
        };
        if command.trim().is_empty() {
            return Err(self.invalid(&command_key, "must not be empty"));
        }
        if command.contains('\0') {
            return Err(self.invalid(&command_key, "must not contain a NUL character"));
        }
        let args = raw.args.take().unwrap_or_default();
        if let Some(i) = args.iter().position(|a| a.contains('\0')) {
            return Err(self.invalid(
                &key.key("args").index(i),
                "must not contain a NUL character",
            ));
        }
        let mut env = Vec::new();
        for (name, value) in raw.env.take().into_iter().flatten() {
            let here = key.key("env").key(&name);
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(self.invalid(
                    &here,
                    "not a valid environment variable name (empty, or contains '=' or NUL)",
                ));
            }
            if value.expose_secret().contains('\0') {
                return Err(self.invalid(&here, "the value contains a NUL character"));
            }
            env.push((name, value));
        }
        let cwd = match raw.cwd.take() {
            Some(cwd) if cwd.is_empty() => {
                return Err(self.invalid(&key.key("cwd"), "must not be empty"));
            }
            Some(cwd) => Some(self.resolve(&cwd)),
            None => None,
        };
        Ok(StdioTransport {
            command,
            args,
            env,
            cwd,
        })
    }

    fn allowed_tools(&self, key: &KeyPath, tools: Vec<String>) -> Result<Vec<String>, ConfigError> {
        let mut seen = BTreeSet::new();
        for (i, tool) in tools.iter().enumerate() {
            if tool.trim().is_empty() {
                return Err(self.invalid(&key.index(i), "tool names must not be empty"));
            }
            if !seen.insert(tool.as_str()) {
                return Err(
                    self.invalid(&key.index(i), format!("lists {} twice", short_quote(tool)))
                );
            }
        }
        Ok(tools)
    }

    /// Refuses `field` on a connection whose transport is not `owner`.
    fn forbid(
        &self,
        key: &KeyPath,
        owner: &str,
        field: &str,
        present: bool,
    ) -> Result<(), ConfigError> {
        if present {
            Err(self.invalid(
                &key.key(field),
                format!("'{field}' is only valid for transport = \"{owner}\""),
            ))
        } else {
            Ok(())
        }
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

/// The largest `fleet.max_clock_skew`.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// `fleet.node` when unset: the host name and the process id, unique on a
/// machine and readable across machines.
pub(crate) fn default_node() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .and_then(|name| values::fleet_name(name).ok())
        .unwrap_or_else(|| "node".to_owned());
    format!("{host}-{}", std::process::id())
}

/// `gateway.path`: an absolute URL path, nothing else.
fn gateway_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err("must start with '/', like \"/mcp\"".to_owned());
    }
    if path
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '?' || c == '#')
    {
        return Err("must be a plain path without spaces, '?' or '#'".to_owned());
    }
    Ok(())
}
