//! Failures, classified: every error from rmcp, reqwest, a child process or a
//! deadline becomes one [`Failure`] (docs/ARCHITECTURE.md, "Failure
//! classification"), so the policy never sees raw errors.
//!
//! A `Failure` is safe to log, show in `/status` and hand to agents: it holds no
//! URL query, header, body or token, only the status, the path and a short reason
//! written by us.

mod retry_after;

use std::{fmt, time::Duration};

pub use retry_after::parse_retry_after;

/// Which part of an operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Building the session (initialize) or listing tools: failures describe
    /// the connection.
    Connect,
    /// A `tools/call`: failures may describe only that request.
    Call,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::Call => "call",
        }
    }
}

/// What kind of failure happened, from most to least specific.
///
/// The declaration order *is* the priority order (docs/ARCHITECTURE.md,
/// "Failure classification"): when one error
/// carries several causes, the variant declared first wins (see [`FailureKind::priority`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FailureKind {
    /// An OAuth connection has no usable tokens (none stored, or the
    /// authorization server rejected the refresh token): a person must run
    /// `mcp-supervisor login`. Nothing is sent until then.
    NeedsLogin,
    /// HTTP 401 or rmcp `AuthRequired`: the credential is wrong; retrying cannot help.
    Auth,
    /// HTTP 403 or rmcp `InsufficientScope`: this request is not allowed.
    Permission,
    /// HTTP 429: the upstream asks us to slow down.
    RateLimit,
    /// HTTP 5xx: the upstream failed.
    Server,
    /// Any other 4xx, a JSON-RPC error, or a malformed/unexpected response.
    Protocol,
    /// The operation's deadline passed.
    Timeout,
    /// The connection or stream broke: refused, reset, EOF, the child exited.
    Transport,
    /// The upstream's tool contracts kept changing (`[contracts]
    /// park_after`, docs/CONTRACTS.md): not from any request; the registry
    /// sees it in the listings.
    ContractChurn,
    /// Nothing above matched.
    Unknown,
}

impl FailureKind {
    /// Every kind, in priority order (most specific first).
    pub const ALL: [FailureKind; 10] = [
        FailureKind::NeedsLogin,
        FailureKind::Auth,
        FailureKind::Permission,
        FailureKind::RateLimit,
        FailureKind::Server,
        FailureKind::Protocol,
        FailureKind::Timeout,
        FailureKind::Transport,
        FailureKind::ContractChurn,
        FailureKind::Unknown,
    ];

    /// The wire name used in messages, `/status` and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::NeedsLogin => "needs_login",
            FailureKind::Auth => "auth",
            FailureKind::Permission => "permission",
            FailureKind::RateLimit => "rate_limit",
            FailureKind::Server => "server",
            FailureKind::Protocol => "protocol",
            FailureKind::Timeout => "timeout",
            FailureKind::Transport => "transport",
            FailureKind::ContractChurn => "contract_churn",
            FailureKind::Unknown => "unknown",
        }
    }

    /// Whether a park for this kind is probed in the background
    /// (docs/SUPERVISION.md, "Probes"): the upstream failed or could not be
    /// reached, which a request that runs nothing can tell has ended. Not a
    /// rate limit (the upstream asked to be left alone), not credentials or
    /// rights (a person's matter), not contracts that keep changing (a
    /// healthy answer says nothing of them).
    pub fn probed(self) -> bool {
        match self {
            FailureKind::Server
            | FailureKind::Protocol
            | FailureKind::Timeout
            | FailureKind::Transport
            | FailureKind::Unknown => true,
            FailureKind::NeedsLogin
            | FailureKind::Auth
            | FailureKind::Permission
            | FailureKind::RateLimit
            | FailureKind::ContractChurn => false,
        }
    }

    /// Lower is more specific; `classify` keeps the cause with the lowest value.
    pub fn priority(self) -> u8 {
        self as u8
    }

    /// The kind an HTTP status alone implies, if it is an error status (every
    /// status that is not 1xx or 2xx).
    pub fn from_status(status: u16) -> Option<FailureKind> {
        match status {
            401 => Some(FailureKind::Auth),
            403 => Some(FailureKind::Permission),
            429 => Some(FailureKind::RateLimit),
            500..=599 => Some(FailureKind::Server),
            // Any other 4xx, and a redirect: we never follow one (it could
            // carry the token to another origin), and an MCP endpoint has
            // no business sending one.
            300..=499 => Some(FailureKind::Protocol),
            _ => None,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The reasons of [`Failure::insufficient_scope`] and
/// [`Failure::login_for_scope`].
const INSUFFICIENT_SCOPE: &str = "insufficient scope";
const LOGIN_FOR_SCOPE: &str = "insufficient scope; a new login asks for it";

/// One classified failure. Built by [`classify`](crate::classify) or the constructors below.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    /// The HTTP status behind it, when there was one.
    pub status: Option<u16>,
    /// The upstream's `Retry-After`, already parsed (not yet capped: the policy caps it).
    pub retry_after: Option<Duration>,
    /// A short reason written by us, never copied from a response body.
    pub reason: String,
    /// HTTP method of the request that failed (`POST`, `GET`, `DELETE`), if HTTP.
    pub method: Option<String>,
    /// URL path of the request that failed, without query, if HTTP.
    pub path: Option<String>,
    /// True when the request provably never reached the tool: it could not be
    /// sent (could not connect), or the upstream refused it (HTTP 401, 403, 429,
    /// a JSON-RPC error answer). Then even a non-idempotent call may be re-sent.
    /// A 5xx, an expired session or a broken stream may come after the tool ran,
    /// so they leave it false (docs/DECISIONS.md #53; docs/SUPERVISION.md,
    /// "Never twice").
    pub not_run: bool,
}

impl Failure {
    /// A failure of `kind` with a reason and nothing else known.
    pub fn new(kind: FailureKind, reason: impl Into<String>) -> Self {
        Failure {
            kind,
            status: None,
            retry_after: None,
            reason: reason.into(),
            method: None,
            path: None,
            not_run: false,
        }
    }

    /// The failure an HTTP error status implies (`reason` says what was seen).
    pub fn from_status(status: u16, retry_after: Option<Duration>) -> Self {
        let kind = FailureKind::from_status(status).unwrap_or(FailureKind::Unknown);
        Failure {
            kind,
            status: Some(status),
            retry_after,
            reason: format!("HTTP {status}"),
            method: None,
            path: None,
            // Only a refusal proves the work was not done: a 429 (come back
            // later) or 401/403 (not allowed). Anything else, a 5xx included,
            // may come after the work was done (a proxy or server failing on
            // the way back): a call that got one may have run.
            not_run: matches!(status, 401 | 403 | 429),
        }
    }

    /// The deadline of an operation passed.
    pub fn timeout(reason: impl Into<String>) -> Self {
        Failure::new(FailureKind::Timeout, reason)
    }

    /// A 403 `insufficient_scope`: the token lacks a scope the server wants.
    /// (Which one is the server's text, so it is not in the reason; an
    /// OAuth connection records it for the next login, see
    /// [`crate::oauth`].)
    pub fn insufficient_scope() -> Self {
        Failure {
            reason: INSUFFICIENT_SCOPE.to_owned(),
            ..Failure::from_status(403, None)
        }
    }

    /// The same on an OAuth connection: a new login asks for the scope.
    pub fn login_for_scope(self) -> Self {
        Failure {
            reason: LOGIN_FOR_SCOPE.to_owned(),
            ..self
        }
    }

    /// Whether a new login would grant what this failure lacked.
    pub fn wants_login_for_scope(&self) -> bool {
        self.reason == LOGIN_FOR_SCOPE
    }

    /// An OAuth connection has no usable tokens; `reason` says why.
    pub fn needs_login(reason: impl Into<String>) -> Self {
        Failure::new(FailureKind::NeedsLogin, reason).with_not_run()
    }

    /// The connection or stream broke.
    pub fn transport(reason: impl Into<String>) -> Self {
        Failure::new(FailureKind::Transport, reason)
    }

    /// Marks the failure as one that provably never reached the tool.
    pub fn with_not_run(mut self) -> Self {
        self.not_run = true;
        self
    }

    /// Whether the upstream answered, but not with anything readable as an
    /// MCP answer (a body that is not JSON-RPC, the wrong content type or
    /// result type, more than may be read): a fault of the server's answer,
    /// not a refusal of the request. A refusal comes with an HTTP status or
    /// as a JSON-RPC error (`not_run`), and a request refused before it is
    /// sent (an unknown tool) is `not_run` too.
    pub fn unreadable_answer(&self) -> bool {
        self.kind == FailureKind::Protocol && self.status.is_none() && !self.not_run
    }

    /// `status=503` or `status=none`, as the agent-facing messages print it.
    /// Whether the upstream refused the request for its size: 413 (its
    /// body), 414 (its URI) or 431 (its headers). That says something of the
    /// request, not of the connection.
    pub fn refused_as_too_large(&self) -> bool {
        matches!(self.status, Some(413 | 414 | 431))
    }

    pub fn status_label(&self) -> String {
        match self.status {
            Some(status) => status.to_string(),
            None => "none".to_owned(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failure (status={}): {}",
            self.kind,
            self.status_label(),
            self.reason
        )?;
        if let (Some(method), Some(path)) = (&self.method, &self.path) {
            write!(f, " [{method} {path}]")?;
        }
        Ok(())
    }
}
