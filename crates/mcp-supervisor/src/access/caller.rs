//! The caller of a request: who it is, as far as the gateway could tell.

use std::sync::{Arc, LazyLock};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

/// How a caller was recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The gateway asks for no credentials: anyone who reaches it.
    Open,
    /// The gateway's one shared bearer token: whoever holds it.
    Bearer,
    /// A per-client API key (`[gateway.keys.NAME]`): the key's name is the
    /// client.
    Key,
    /// An access token of the configured issuer (a JWT, or an opaque token
    /// introspected).
    Token,
    /// The process on the other end of the stdio gateway.
    Local,
}

impl Via {
    /// The name used in audit records, spans and the dashboard.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Open => "open",
            Via::Bearer => "bearer",
            Via::Key => "key",
            Via::Token => "token",
            Via::Local => "local",
        }
    }
}

/// Who is calling: what the access rules match on ([`crate::access::Who`]).
/// Its one credential, the [`Subject`] token, is never shown, serialized or
/// compared: a caller may be logged, shown and forwarded as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub via: Via,
    /// The user (a token's `sub` when it names a person, not a client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The client: a key's name, a token's `client_id` (or `azp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Groups: a key's, or the token's groups claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The scopes a token was granted (none for a key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The access token it came with, for a connection that acts on its
    /// behalf (token exchange, RFC 8693); none for other callers.
    #[serde(skip)]
    pub subject: Subject,
}

/// The access token a caller presented, kept only to exchange it for a
/// token of an upstream's (docs/SECURITY.md, "Whose credentials reach the
/// upstream"). `Debug` prints `Subject([REDACTED])`; it is never serialized
/// (a caller forwarded to another node travels without it); and it is not
/// part of who the caller is (`==` ignores it).
#[derive(Clone, Default)]
pub struct Subject(Option<Arc<SecretString>>);

impl Subject {
    /// The token `text`.
    pub fn new(text: &str) -> Self {
        Subject(Some(Arc::new(SecretString::from(text))))
    }

    /// The token's text, for the exchange request only.
    pub fn expose(&self) -> Option<&str> {
        self.0.as_deref().map(ExposeSecret::expose_secret)
    }
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(_) => f.write_str("Subject([REDACTED])"),
            None => f.write_str("Subject(None)"),
        }
    }
}

impl PartialEq for Subject {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Subject {}

impl Caller {
    /// A caller known only by how it came in.
    pub fn anonymous(via: Via) -> Self {
        Caller {
            via,
            user: None,
            client: None,
            groups: Vec::new(),
            scopes: Vec::new(),
            subject: Subject::default(),
        }
    }

    /// The caller of a gateway that asks for no credentials, shared.
    pub fn open() -> Arc<Caller> {
        static OPEN: LazyLock<Arc<Caller>> =
            LazyLock::new(|| Arc::new(Caller::anonymous(Via::Open)));
        OPEN.clone()
    }

    /// The holder of the gateway's shared bearer token, shared.
    pub fn bearer() -> Arc<Caller> {
        static BEARER: LazyLock<Arc<Caller>> =
            LazyLock::new(|| Arc::new(Caller::anonymous(Via::Bearer)));
        BEARER.clone()
    }

    /// The process on the other end of the stdio gateway, shared.
    pub fn local() -> Arc<Caller> {
        static LOCAL: LazyLock<Arc<Caller>> =
            LazyLock::new(|| Arc::new(Caller::anonymous(Via::Local)));
        LOCAL.clone()
    }

    /// What names this caller for a per-client quota: the user, else the
    /// client; `None` when the credentials name nobody (open, the shared
    /// bearer, stdio), where the peer's address is all there is.
    pub fn principal(&self) -> Option<String> {
        match (&self.user, &self.client) {
            (Some(user), _) => Some(format!("user:{user}")),
            (None, Some(client)) => Some(format!("client:{client}")),
            (None, None) => None,
        }
    }
}
