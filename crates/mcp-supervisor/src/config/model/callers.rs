//! Who may call the gateway (`[gateway] auth`, `[gateway.keys.NAME]`,
//! `public_url`, `audit_log`) and what each caller may use (`[[access]]`,
//! kept as [`crate::access::Rules`]).

use std::{fmt, path::PathBuf, time::Duration};

use super::auth::BearerToken;
use secrecy::{ExposeSecret, SecretString};

/// `[gateway] auth.kind`: how the gateway's callers prove who they are,
/// beside the per-client keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallerAuth {
    /// `kind = "bearer"`: one shared token, naming nobody.
    Bearer(BearerToken),
    /// `kind = "oauth"`: access tokens of an outside authorization server;
    /// the gateway is their resource server (docs/SECURITY.md).
    OAuth(ResourceServer),
}

impl CallerAuth {
    /// The shared bearer token, if that is the kind.
    pub fn bearer(&self) -> Option<&BearerToken> {
        match self {
            CallerAuth::Bearer(token) => Some(token),
            CallerAuth::OAuth(_) => None,
        }
    }
}

/// `auth = { kind = "oauth", issuer, … }` of the gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceServer {
    /// The authorization server's issuer identifier: a token's `iss` must be
    /// exactly this; its metadata (RFC 8414, else OpenID discovery) names
    /// the keys (`jwks_uri`) and the introspection endpoint.
    pub issuer: String,
    /// The claim that holds a token's groups (a list of strings, or one
    /// string of space-separated names).
    pub groups_claim: String,
    /// Scopes every token must carry; a token without one is answered 403
    /// `insufficient_scope` naming them all.
    pub scopes: Vec<String>,
    /// How far `exp` and `nbf` may be off the gateway's clock.
    pub leeway: Duration,
    /// For opaque (non-JWT) tokens: the gateway's own client at the
    /// issuer, with which it asks the introspection endpoint (RFC 7662).
    pub introspection: Option<IntrospectionClient>,
}

/// The default `groups_claim`.
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";
/// The default `leeway`: one minute, the usual allowance for clocks.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);

/// The gateway's own client credentials at the issuer, for introspection.
#[derive(Clone)]
pub struct IntrospectionClient {
    pub client_id: String,
    pub client_secret: SecretString,
}

impl PartialEq for IntrospectionClient {
    fn eq(&self, other: &Self) -> bool {
        self.client_id == other.client_id
            && self.client_secret.expose_secret() == other.client_secret.expose_secret()
    }
}

impl Eq for IntrospectionClient {}

impl fmt::Debug for IntrospectionClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntrospectionClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &"[REDACTED]")
            .finish()
    }
}

/// `[gateway.keys.NAME]`: a machine client's API key, known by its SHA-256
/// only (the key itself is never in the file).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The client's name (`client:NAME` in the access rules).
    pub name: String,
    /// SHA-256 of the key as presented in `Authorization: Bearer KEY`.
    pub sha256: [u8; 32],
    pub groups: Vec<String>,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The digest is not the key, but it is what a guess is checked
        // against: not printed either.
        f.debug_struct("ApiKey")
            .field("name", &self.name)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

/// `[gateway] audit_log`: where a record of each access decision goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditLog {
    /// `"-"`: standard output, one JSON object per line.
    Stdout,
    /// A file, appended to, reopened on SIGHUP (for log rotation).
    File(PathBuf),
}
