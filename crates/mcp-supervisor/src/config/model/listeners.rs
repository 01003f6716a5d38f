//! `[gateway]` and `[admin]`: the two HTTP servers of the long-lived
//! process, and the choices `[gateway]` offers (`expose`, `prefix`,
//! `forwarded_header`).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::{ApiKey, AuditLog, BearerToken, CallerAuth, Choice};

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
    /// How callers prove who they are besides `keys`; `None` with no keys
    /// means the gateway asks for no credentials.
    pub auth: Option<CallerAuth>,
    /// Per-client API keys, accepted beside `auth`.
    pub keys: Vec<ApiKey>,
    /// The gateway's MCP endpoint as its clients reach it: the resource
    /// identifier access tokens must be minted for (RFC 8707, RFC 9728).
    pub public_url: Option<String>,
    /// Where each access decision is recorded; `None`: nowhere.
    pub audit_log: Option<AuditLog>,
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
    /// A session with no request for this long rests: it keeps its id, its
    /// caller and its place under the caps, without rmcp's session (about
    /// 80 KB), until its next request restores it (docs/DECISIONS.md #178).
    pub session_rest_after: Duration,
    /// Reverse proxies whose `forwarded_header` says who the client is
    /// (for `max_sessions_per_client`); empty: none.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The header the trusted proxies append the client's address to.
    pub forwarded_header: ForwardedHeader,
}

/// Default `gateway.max_sessions_per_client` (never more than
/// `max_sessions`): a quarter of the default `max_sessions`.
pub(in crate::config) const DEFAULT_MAX_SESSIONS_PER_CLIENT: usize = 64;

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
            keys: Vec::new(),
            public_url: None,
            audit_log: None,
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
            session_rest_after: Duration::from_secs(30),
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
