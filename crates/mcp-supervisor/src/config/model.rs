//! The typed configuration the rest of the crate uses.
//!
//! Values here are already validated and resolved: defaults applied, per-connection
//! overrides merged with `[supervisor]`, secrets read. `Debug` never prints a
//! secret: tokens, header values and `env` values are [`SecretString`]s, stdio
//! `args` are shown as a count (they often carry `--token …`), and URLs are shown
//! without their query string (API keys in queries are common).

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

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
}

/// `[telemetry]`: where spans and metrics go over OTLP, and how much of them.
#[derive(Clone)]
pub struct TelemetrySettings {
    /// The collector's base URL: `/v1/traces` and `/v1/metrics` are appended
    /// for HTTP; gRPC uses it as it is. No credentials, query or fragment.
    pub endpoint: url::Url,
    /// `grpc` or `http/protobuf`.
    pub protocol: OtlpProtocol,
    /// Sent with every export request, values from `env` or `file`.
    pub headers: Vec<(String, SecretString)>,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// The share of new traces sampled; a remote parent's choice is followed.
    pub sample_ratio: SampleRatio,
    /// The longest one export request may take.
    pub timeout: Duration,
    /// The longest a finished span waits before it is sent.
    pub batch_delay: Duration,
    /// Finished spans waiting to be sent; beyond this they are dropped and counted.
    pub max_queue: usize,
    /// How often metrics are sent.
    pub metrics_interval: Duration,
    /// Record tool arguments and results (`gen_ai.tool.call.arguments`,
    /// `.result`), each cut to [`CAPTURE_MAX_BYTES`]. Off by default.
    pub capture_content: bool,
}

/// How much of a tool's arguments or result `capture_content` records.
pub const CAPTURE_MAX_BYTES: usize = 4096;

impl fmt::Debug for TelemetrySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetrySettings")
            .field("endpoint", &RedactedUrl(self.endpoint.as_str()))
            .field("protocol", &self.protocol)
            .field("headers", &RedactedPairs(&self.headers))
            .field("service_name", &self.service_name)
            .field("sample_ratio", &self.sample_ratio)
            .field("timeout", &self.timeout)
            .field("batch_delay", &self.batch_delay)
            .field("max_queue", &self.max_queue)
            .field("metrics_interval", &self.metrics_interval)
            .field("capture_content", &self.capture_content)
            .finish()
    }
}

/// `telemetry.protocol`: how spans and metrics travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (a collector's port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (a collector's port 4318).
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The name used in the file and by `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }
}

/// A sampling ratio in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRatio(f64);

impl SampleRatio {
    /// `ratio` when it is a number in `0.0..=1.0`.
    pub fn new(ratio: f64) -> Option<Self> {
        (0.0..=1.0).contains(&ratio).then_some(SampleRatio(ratio))
    }

    /// The ratio.
    pub fn get(self) -> f64 {
        self.0
    }
}

// Never NaN (`new` refuses it), so equality is total.
impl Eq for SampleRatio {}

impl PartialEq for TelemetrySettings {
    fn eq(&self, other: &Self) -> bool {
        self.endpoint == other.endpoint
            && self.protocol == other.protocol
            && secret_pairs_eq(&self.headers, &other.headers)
            && self.service_name == other.service_name
            && self.sample_ratio == other.sample_ratio
            && self.timeout == other.timeout
            && self.batch_delay == other.batch_delay
            && self.max_queue == other.max_queue
            && self.metrics_interval == other.metrics_interval
            && self.capture_content == other.capture_content
    }
}

impl Eq for TelemetrySettings {}

/// `[fleet]`: the store the fleet shares and this process's name in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetSettings {
    /// A `redis://` or `rediss://` URL without a password (a user name is
    /// allowed: an ACL user).
    pub redis: url::Url,
    /// The password, from `password_env` or `password_file`.
    pub password: Option<Password>,
    /// The fleet's own secret, from `key_env` or `key_file` (32 bytes,
    /// base64): seals what is secret in the store (OAuth tokens) and signs
    /// the session ids the gateway hands out, so a node can tell which node
    /// holds a session.
    pub key: FleetKey,
    /// This process's name in the fleet: unique among the nodes.
    pub node: String,
    /// The prefix of every key and channel, so several fleets can share one Redis.
    pub namespace: String,
    /// How far apart the nodes' wall clocks may be: a shared deadline further
    /// out than the longest window plus this is refused.
    pub max_clock_skew: Duration,
    /// The base URL other nodes reach this node's gateway at
    /// (`http://10.0.0.5:7300`), told to them in every heartbeat; `None`
    /// when `[gateway] listen` names no address others can use (0.0.0.0)
    /// and none is set.
    pub advertise: Option<url::Url>,
}

/// Default `fleet.namespace`.
pub const DEFAULT_FLEET_NAMESPACE: &str = "mcp-supervisor";
/// Default `fleet.max_clock_skew`.
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(2);

/// The fleet's 32-byte key. `Debug` prints `FleetKey([REDACTED])`; the only
/// way to the bytes is [`FleetKey::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct FleetKey([u8; 32]);

impl FleetKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key's bytes, for a cipher or a MAC.
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }

    /// A key of its own for `purpose` (HMAC-SHA256 of the purpose under
    /// this key), so the fleet key's uses (messages, session ids, sealed
    /// tokens) never share a key.
    pub fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        use hmac::{Hmac, KeyInit, Mac};
        let mut derive = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length");
        derive.update(purpose);
        derive.finalize().into_bytes().into()
    }

    /// A random key, for supervisors of one process that share an
    /// in-process store without a `[fleet]` table.
    pub fn random() -> Self {
        Self(rand::random())
    }
}

impl fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FleetKey([REDACTED])")
    }
}

/// A password. `Debug` prints `Password([REDACTED])`; the only way to the
/// text is [`Password::expose`].
#[derive(Clone)]
pub struct Password(SecretString);

impl Password {
    pub fn new(password: SecretString) -> Self {
        Self(password)
    }

    /// The text, for the store's client.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl PartialEq for Password {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

impl Eq for Password {}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password([REDACTED])")
    }
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

/// `[supervisor]`: defaults for every connection plus process-wide limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorSettings {
    /// Budget for the MCP initialize handshake.
    pub connect_timeout: Duration,
    /// Whole budget of one call, retries included.
    pub call_timeout: Duration,
    /// Budget of one `tools/list`.
    pub list_timeout: Duration,
    /// Attempts per operation (connect, list, call), first try included.
    pub max_attempts: u32,
    /// How long a graceful shutdown may take before children are killed.
    pub shutdown_timeout: Duration,
    /// How often a crashed connection actor is restarted before it is retired.
    pub restart_budget: RestartBudget,
    /// Park/retire policy.
    pub quarantine: QuarantineSettings,
    /// Where OAuth tokens are kept: `state_dir`, else
    /// `$XDG_STATE_HOME/mcp-supervisor`, else `~/.local/state/mcp-supervisor`;
    /// `None` when none of those is known.
    pub state_dir: Option<PathBuf>,
}

impl Default for SupervisorSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            list_timeout: Duration::from_secs(30),
            max_attempts: 3,
            shutdown_timeout: Duration::from_secs(10),
            restart_budget: RestartBudget::default(),
            quarantine: QuarantineSettings::default(),
            state_dir: None,
        }
    }
}

/// At most `restarts` actor restarts within a sliding window of `within`; one more
/// retires the connection with reason `crash_loop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartBudget {
    /// Restarts allowed inside the window.
    pub restarts: u32,
    /// Length of the window.
    pub within: Duration,
}

impl Default for RestartBudget {
    fn default() -> Self {
        Self {
            restarts: 5,
            within: Duration::from_secs(60),
        }
    }
}

/// `[supervisor.quarantine]`: the n-th park lasts `base_cooldown * 2^(n-1)`, capped
/// at `max_cooldown`; the `retire_after`-th park retires instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuarantineSettings {
    /// Length of the first park.
    pub base_cooldown: Duration,
    /// Upper bound of any park; validation guarantees `>= base_cooldown`.
    pub max_cooldown: Duration,
    /// The park number that retires instead of parking.
    pub retire_after: u32,
}

impl Default for QuarantineSettings {
    fn default() -> Self {
        Self {
            base_cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(300),
            retire_after: 3,
        }
    }
}

/// `[gateway]`: the MCP server the long-lived process exposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// Address to bind; loopback by default.
    pub listen: SocketAddr,
    /// HTTP path of the MCP endpoint; always starts with `/`.
    pub path: String,
    /// Which tools downstream clients see.
    pub expose: Expose,
    /// Whether upstream names get a `{connection}__` prefix.
    pub prefix: Prefix,
    /// Downstream bearer token; `None` means no auth.
    pub auth: Option<BearerToken>,
    /// Accepted `Host` header names (DNS-rebinding protection), lowercased,
    /// without port; never empty.
    pub allowed_hosts: Vec<String>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// A request's head (request line and headers) must arrive within this
    /// long of its first byte; a new connection must send its first request
    /// head within this long of being accepted.
    pub header_timeout: Duration,
    /// A request's body must arrive within this long of its head.
    pub body_timeout: Duration,
    /// A kept-alive connection with no request in progress is closed after
    /// this long.
    pub idle_timeout: Duration,
    /// Open connections at once; beyond this a new connection is answered 503
    /// and closed.
    pub max_connections: usize,
    /// Live MCP sessions (2025-era clients) at once. At the cap a new
    /// session ends the least recently used idle one; `initialize` is
    /// answered 503 with a JSON-RPC error only when every session is busy.
    pub max_sessions: usize,
    /// Live sessions one client (one peer address) may hold at once; its
    /// next `initialize` ends its own least recently used idle session, and
    /// is refused only when all of its sessions are busy.
    pub max_sessions_per_client: usize,
    /// A session with no activity for this long is closed (its client must
    /// initialize again).
    pub session_idle_timeout: Duration,
    /// Reverse proxies whose `forwarded_header` says who the client is
    /// (for `max_sessions_per_client`); empty: none.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The header the trusted proxies append the client's address to.
    pub forwarded_header: ForwardedHeader,
}

/// Default `gateway.max_sessions_per_client` (never more than
/// `max_sessions`): a quarter of the default `max_sessions`.
pub(super) const DEFAULT_MAX_SESSIONS_PER_CLIENT: usize = 64;

/// Default `gateway.max_body_bytes`: 4 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The loopback names both HTTP servers accept in `Host` by default.
fn loopback_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 7300)),
            path: "/mcp".to_owned(),
            expose: Expose::Namespaced,
            prefix: Prefix::Always,
            auth: None,
            allowed_hosts: loopback_hosts(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            max_connections: 512,
            max_sessions: 256,
            max_sessions_per_client: DEFAULT_MAX_SESSIONS_PER_CLIENT,
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::default(),
            session_idle_timeout: Duration::from_secs(300),
        }
    }
}

/// `gateway.forwarded_header`: the one header the trusted proxies write.
/// Only that one is read: a proxy passes on, untouched, whatever a client
/// wrote in the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For` (HAProxy's `option forwardfor`, nginx's
    /// `$proxy_add_x_forwarded_for`, most load balancers).
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239), its `for=` parameters.
    Forwarded,
}

impl Choice for ForwardedHeader {
    const ALL: &'static [Self] = &[Self::XForwardedFor, Self::Forwarded];

    fn as_str(self) -> &'static str {
        match self {
            Self::XForwardedFor => "x-forwarded-for",
            Self::Forwarded => "forwarded",
        }
    }
}

/// `gateway.expose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expose {
    /// Every upstream tool as `{connection}__{tool}`.
    #[default]
    Namespaced,
    /// Only the meta-tools.
    Meta,
    /// Both of the above.
    Both,
}

impl Choice for Expose {
    const ALL: &'static [Self] = &[Self::Namespaced, Self::Meta, Self::Both];

    fn as_str(self) -> &'static str {
        match self {
            Self::Namespaced => "namespaced",
            Self::Meta => "meta",
            Self::Both => "both",
        }
    }
}

/// `gateway.prefix`: whether upstream tool and prompt names get a
/// `{connection}__` prefix downstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Prefix {
    /// Always `{connection}__{name}`.
    #[default]
    Always,
    /// No prefix while exactly one connection is configured; `Always` otherwise.
    Auto,
    /// Names pass through unchanged; two connections offering the same name
    /// is an error (docs/CONFIG.md).
    Never,
}

impl Choice for Prefix {
    const ALL: &'static [Self] = &[Self::Always, Self::Auto, Self::Never];

    fn as_str(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::Auto => "auto",
            Self::Never => "never",
        }
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

/// `[admin]`: the admin HTTP API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSettings {
    /// Address to bind; loopback by default.
    pub listen: SocketAddr,
    /// Bearer token every route but `/healthz` and `/readyz` requires;
    /// `None` means no auth.
    pub auth: Option<BearerToken>,
    /// Accepted `Host` header names (DNS-rebinding protection), lowercased;
    /// an `Origin` header must name one of them too. Never empty.
    pub allowed_hosts: Vec<String>,
    /// As [`GatewaySettings::header_timeout`].
    pub header_timeout: Duration,
    /// As [`GatewaySettings::idle_timeout`].
    pub idle_timeout: Duration,
    /// As [`GatewaySettings::max_connections`].
    pub max_connections: usize,
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 7301)),
            auth: None,
            allowed_hosts: loopback_hosts(),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_connections: 32,
        }
    }
}

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
    /// programmatically. Files go through [`Config::from_toml_str`].
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
        }
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
}

impl PartialEq for HttpTransport {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url
            && self.auth == other.auth
            && secret_pairs_eq(&self.headers, &other.headers)
    }
}

impl Eq for HttpTransport {}

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransport")
            .field("url", &RedactedUrl(&self.url))
            .field("auth", &self.auth)
            .field("headers", &RedactedPairs(&self.headers))
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

/// How an http connection's requests are authorized (`auth.kind`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamAuth {
    /// `kind = "bearer"`: sent as `Authorization: Bearer …`.
    Bearer(BearerToken),
    /// `kind = "oauth"`: tokens from `mcp-supervisor login` (docs/OAUTH.md).
    OAuth(OAuthSettings),
}

impl UpstreamAuth {
    /// The static bearer token, if that is the kind.
    pub fn bearer(&self) -> Option<&BearerToken> {
        match self {
            Self::Bearer(token) => Some(token),
            Self::OAuth(_) => None,
        }
    }

    /// The OAuth settings, if that is the kind.
    pub fn oauth(&self) -> Option<&OAuthSettings> {
        match self {
            Self::Bearer(_) => None,
            Self::OAuth(settings) => Some(settings),
        }
    }

    /// `"bearer"` or `"oauth"`, as spelled in the config.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Bearer(_) => "bearer",
            Self::OAuth(_) => "oauth",
        }
    }
}

/// `auth = { kind = "oauth", … }` of an http connection.
#[derive(Clone)]
pub struct OAuthSettings {
    /// A pre-registered client; `None`: dynamic client registration (or a
    /// Client ID Metadata Document, when the server supports it).
    pub client_id: Option<String>,
    /// An `https` URL where this client's metadata document is published
    /// (Client ID Metadata Documents): used as the client id by an
    /// authorization server that supports them, instead of registering.
    pub client_metadata_url: Option<String>,
    /// The pre-registered client's secret (from `client_secret_env`).
    pub client_secret: Option<SecretString>,
    /// Scopes to ask for; empty: the ones the server says it needs.
    pub scopes: Vec<String>,
    pub grant: OAuthGrant,
    /// The authorization server's issuer URL, when the upstream's metadata
    /// should not decide it.
    pub authorization_server: Option<String>,
    /// The connection's token file: `oauth/NAME.json` in the state directory.
    pub token_file: PathBuf,
}

impl PartialEq for OAuthSettings {
    fn eq(&self, other: &Self) -> bool {
        self.client_id == other.client_id
            && self.client_metadata_url == other.client_metadata_url
            && self.client_secret.as_ref().map(ExposeSecret::expose_secret)
                == other
                    .client_secret
                    .as_ref()
                    .map(ExposeSecret::expose_secret)
            && self.scopes == other.scopes
            && self.grant == other.grant
            && self.authorization_server == other.authorization_server
            && self.token_file == other.token_file
    }
}

impl Eq for OAuthSettings {}

impl fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("client_id", &self.client_id)
            .field("client_metadata_url", &self.client_metadata_url)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .field("authorization_server", &self.authorization_server)
            .field("token_file", &self.token_file)
            .finish()
    }
}

/// `auth.grant`: how an OAuth connection gets its tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OAuthGrant {
    /// A person logs in once (`mcp-supervisor login`); tokens are refreshed.
    #[default]
    AuthorizationCode,
    /// The client's own credentials (`client_id` and `client_secret_env`),
    /// for machine-to-machine servers: no login, tokens renewed by itself.
    ClientCredentials,
}

impl OAuthGrant {
    pub const NAMES: [&'static str; 2] = ["authorization_code", "client_credentials"];

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "authorization_code" => Some(Self::AuthorizationCode),
            "client_credentials" => Some(Self::ClientCredentials),
            _ => None,
        }
    }
}

/// A bearer token. `Debug` prints `BearerToken([REDACTED])`; the only way to the
/// text is [`BearerToken::expose`], so every use of it is easy to find.
#[derive(Clone)]
pub struct BearerToken(SecretString);

impl BearerToken {
    /// Wraps a token. Validation (non-empty, no whitespace) happens in config
    /// loading; this constructor is for code that builds configs directly.
    pub fn new(token: SecretString) -> Self {
        Self(token)
    }

    /// The token text, for building an `Authorization` header or comparing one.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl PartialEq for BearerToken {
    fn eq(&self, other: &Self) -> bool {
        // Reload diffing only; the HTTP servers do their own constant-time compare.
        self.expose() == other.expose()
    }
}

impl Eq for BearerToken {}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken([REDACTED])")
    }
}

fn secret_pairs_eq(a: &[(String, SecretString)], b: &[(String, SecretString)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && va.expose_secret() == vb.expose_secret())
}

/// Shows `{name: [REDACTED], …}`.
struct RedactedPairs<'a>(&'a [(String, SecretString)]);

impl fmt::Debug for RedactedPairs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, _)| (k, format_args!("[REDACTED]"))))
            .finish()
    }
}

/// Shows a URL without userinfo and with its query replaced by `[REDACTED]`.
struct RedactedUrl<'a>(&'a str);

impl fmt::Debug for RedactedUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", redact_url(self.0))
    }
}

/// `url` without userinfo, with any query shown as `?[REDACTED]` and no fragment.
///
/// Validation already refuses userinfo; this strips it anyway so a hand-built
/// [`HttpTransport`] cannot leak one either.
pub(crate) fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or_default();
            let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            let query = if parsed.query().is_some() {
                "?[REDACTED]"
            } else {
                ""
            };
            format!("{}://{host}{port}{}{query}", parsed.scheme(), parsed.path())
        }
        Err(_) => "[unparsable url]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_drops_userinfo_query_and_fragment() {
        assert_eq!(
            redact_url("https://u:p@example.com:8443/mcp?key=s3cret#frag"),
            "https://example.com:8443/mcp?[REDACTED]"
        );
        assert_eq!(redact_url("http://127.0.0.1/mcp"), "http://127.0.0.1/mcp");
        assert_eq!(redact_url("not a url"), "[unparsable url]");
    }

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

    #[test]
    fn secrets_compare_by_value() {
        let a = BearerToken::new("one".into());
        assert_eq!(a, BearerToken::new("one".into()));
        assert_ne!(a, BearerToken::new("two".into()));
        assert_eq!(format!("{a:?}"), "BearerToken([REDACTED])");
    }
}
