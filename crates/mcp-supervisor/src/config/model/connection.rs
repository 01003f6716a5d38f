//! `[connections.NAME]`: one upstream with every value resolved, how it is
//! reached (http or stdio), and which calls may be re-sent to it.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;

use super::redact::{RedactedPairs, RedactedUrl, secret_pairs_eq};
use super::{Choice, SupervisorSettings, UpstreamAuth};

/// One `[connections.NAME]`, with every value resolved against `[supervisor]`.
///
/// `PartialEq` compares everything including secrets, so a reload can tell a
/// changed connection (restart it) from an unchanged one (leave it alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// Unique name; matches `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$` without `__`.
    pub name: String,
    /// How to reach the server.
    pub transport: Transport,
    /// Tools to expose; `None` = all, `Some(vec![])` = none.
    pub allowed_tools: Option<Vec<String>>,
    /// Free text shown to agents as the connection's purpose.
    pub notes: Option<String>,
    /// Calls in flight on the session at once.
    pub max_concurrent_calls: usize,
    /// Calls waiting for a slot before further calls are answered "busy".
    pub max_queued_calls: usize,
    /// See [`SupervisorSettings::connect_timeout`].
    pub connect_timeout: Duration,
    /// See [`SupervisorSettings::call_timeout`].
    pub call_timeout: Duration,
    /// See [`SupervisorSettings::list_timeout`].
    pub list_timeout: Duration,
    /// See [`SupervisorSettings::max_attempts`].
    pub max_attempts: u32,
    /// Which failed calls may be re-sent (docs/SUPERVISION.md, "Never twice").
    pub retry_calls: RetryCalls,
    /// Which protocol generation the connection speaks to the server.
    pub protocol: UpstreamProtocol,
    /// How it is probed while parked (see [`SupervisorSettings::probe`]).
    pub probe: super::ProbeSettings,
}

/// Default `max_concurrent_calls` of a connection.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 4;
/// Default `max_queued_calls` of a connection.
pub const DEFAULT_MAX_QUEUED_CALLS: usize = 64;

impl ConnectionConfig {
    /// A connection with every optional value at its default, taking timeouts and
    /// attempts from `supervisor`.
    ///
    /// This does not validate `name`: it is for code and tests that build configs
    /// programmatically. Files go through
    /// [`Config::from_toml_str`](super::Config::from_toml_str).
    pub fn new(
        name: impl Into<String>,
        transport: Transport,
        supervisor: &SupervisorSettings,
    ) -> Self {
        Self {
            name: name.into(),
            transport,
            allowed_tools: None,
            notes: None,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            max_queued_calls: DEFAULT_MAX_QUEUED_CALLS,
            connect_timeout: supervisor.connect_timeout,
            call_timeout: supervisor.call_timeout,
            list_timeout: supervisor.list_timeout,
            max_attempts: supervisor.max_attempts,
            retry_calls: RetryCalls::default(),
            protocol: UpstreamProtocol::default(),
            probe: supervisor.probe,
        }
    }

    /// Whether its calls carry tokens exchanged for its callers'
    /// (`on_behalf = { kind = "token_exchange" }`).
    pub fn exchanges_tokens(&self) -> bool {
        matches!(
            &self.transport,
            Transport::Http(http) if matches!(
                http.on_behalf.as_ref().map(|on_behalf| &on_behalf.credentials),
                Some(CallerCredentials::TokenExchange { .. })
            )
        )
    }

    /// Whether `tool` passes this connection's allowlist.
    pub fn allows_tool(&self, tool: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }
}

/// How a connection reaches its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP.
    Http(HttpTransport),
    /// A child process speaking MCP on stdin/stdout.
    Stdio(StdioTransport),
}

impl Transport {
    /// `"http"` or `"stdio"`, as spelled in the config and in status output.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Http(_) => "http",
            Self::Stdio(_) => "stdio",
        }
    }
}

/// `transport = "http"`.
#[derive(Clone)]
pub struct HttpTransport {
    /// Absolute `http`/`https` URL with a host and no userinfo (validated).
    pub url: String,
    /// How requests are authorized: a static bearer token or OAuth.
    pub auth: Option<UpstreamAuth>,
    /// Extra request headers, sorted by name; names are valid HTTP header names,
    /// values are valid header values, and none conflicts with `auth`.
    pub headers: Vec<(String, SecretString)>,
    /// Whose credentials its calls carry, when not the connection's own.
    pub on_behalf: Option<OnBehalf>,
}

/// `on_behalf`: the calls of an http connection carry their caller's
/// credentials, not the connection's own (which still open the
/// connection's session, for its lists and its supervision). Each set of
/// credentials gets a session of its own (docs/SECURITY.md, "Whose
/// credentials reach the upstream").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnBehalf {
    pub credentials: CallerCredentials,
    /// Sessions with the callers' credentials open at once, at most.
    pub max_sessions: usize,
    /// A caller's session unused this long is closed.
    pub idle_timeout: Duration,
}

/// Default `on_behalf.max_sessions`.
pub const DEFAULT_ON_BEHALF_SESSIONS: usize = 64;
/// Default `on_behalf.idle_timeout`.
pub const DEFAULT_ON_BEHALF_IDLE: Duration = Duration::from_secs(300);

/// `on_behalf.kind`: where a caller's credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerCredentials {
    /// `"token_exchange"`: the caller's access token exchanged at the
    /// gateway's authorization server (RFC 8693) for one for `audience`.
    TokenExchange {
        /// The `resource` asked for: the upstream's URL unless configured.
        audience: String,
        /// The scopes asked for; none: what the authorization server grants.
        scopes: Vec<String>,
    },
    /// `"per_caller"`: the first of these whose `who` names the caller;
    /// a caller none names may not use the connection.
    PerCaller(Vec<CallerCredential>),
}

impl CallerCredentials {
    /// `"token_exchange"` or `"per_caller"`, as spelled in the config.
    pub fn kind(&self) -> &'static str {
        match self {
            CallerCredentials::TokenExchange { .. } => "token_exchange",
            CallerCredentials::PerCaller(_) => "per_caller",
        }
    }
}

/// One of `on_behalf.credentials`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerCredential {
    pub who: Vec<crate::access::Who>,
    pub token: super::BearerToken,
}

impl PartialEq for HttpTransport {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url
            && self.auth == other.auth
            && secret_pairs_eq(&self.headers, &other.headers)
            && self.on_behalf == other.on_behalf
    }
}

impl Eq for HttpTransport {}

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransport")
            .field("url", &RedactedUrl(&self.url))
            .field("auth", &self.auth)
            .field("headers", &RedactedPairs(&self.headers))
            .field("on_behalf", &self.on_behalf)
            .finish()
    }
}

/// `transport = "stdio"`.
#[derive(Clone)]
pub struct StdioTransport {
    /// Program to run (non-empty); looked up on `PATH` if it has no `/`.
    pub command: String,
    /// Its arguments, passed as-is.
    pub args: Vec<String>,
    /// Variables added to the minimal inherited environment, sorted by name.
    pub env: Vec<(String, SecretString)>,
    /// Working directory; relative paths in the file are already resolved against
    /// the config file's directory.
    pub cwd: Option<PathBuf>,
}

impl PartialEq for StdioTransport {
    fn eq(&self, other: &Self) -> bool {
        self.command == other.command
            && self.args == other.args
            && self.cwd == other.cwd
            && secret_pairs_eq(&self.env, &other.env)
    }
}

impl Eq for StdioTransport {}

impl fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioTransport")
            .field("command", &self.command)
            // Arguments often carry credentials (`--api-key …`); show how many.
            .field("args", &format_args!("[{} redacted]", self.args.len()))
            .field("env", &RedactedPairs(&self.env))
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// `connections.NAME.retry_calls`: which failed calls may be re-sent
/// (docs/SUPERVISION.md, "Never twice"). A call that provably did not run is
/// re-sent under `Safe` and `Always` whatever the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryCalls {
    /// Re-send a call of a tool annotated `readOnlyHint` or `idempotentHint`;
    /// of any other tool, only when it surely did not run.
    #[default]
    Safe,
    /// Re-send a call of any tool, even when it may have run.
    Always,
    /// Never re-send a call (a failed session build before it is still retried).
    Never,
}

impl Choice for RetryCalls {
    const ALL: &'static [Self] = &[Self::Safe, Self::Always, Self::Never];

    fn as_str(self) -> &'static str {
        match self {
            Self::Safe => "safe",
            Self::Always => "always",
            Self::Never => "never",
        }
    }
}

/// `connections.NAME.protocol`: the MCP protocol generation spoken to the
/// server (docs/CONFIG.md). `Newest` asks the server what it speaks and takes
/// the newest generation both sides know; a pinned version is used from the
/// first request on, and a server that does not speak it is a protocol
/// failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpstreamProtocol {
    /// `server/discover` first (2026-07-28), `initialize` when the server is
    /// 2025-era.
    #[default]
    Newest,
    /// Sessions with the `initialize` handshake, version 2025-11-25.
    V2025_11_25,
    /// Stateless requests, version 2026-07-28.
    V2026_07_28,
}

impl Choice for UpstreamProtocol {
    const ALL: &'static [Self] = &[Self::Newest, Self::V2025_11_25, Self::V2026_07_28];

    fn as_str(self) -> &'static str {
        match self {
            Self::Newest => "newest",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_semantics() {
        let sup = SupervisorSettings::default();
        let t = Transport::Stdio(StdioTransport {
            command: "x".into(),
            args: vec![],
            env: vec![],
            cwd: None,
        });
        let mut c = ConnectionConfig::new("a", t, &sup);
        assert!(c.allows_tool("anything"));
        c.allowed_tools = Some(vec![]);
        assert!(!c.allows_tool("anything"));
        c.allowed_tools = Some(vec!["echo".into()]);
        assert!(c.allows_tool("echo") && !c.allows_tool("other"));
    }
}
