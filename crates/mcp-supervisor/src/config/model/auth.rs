//! How requests are authorized: bearer tokens (the gateway's, the admin
//! API's, an http upstream's) and an http upstream's OAuth settings.

use std::fmt;
use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretString};

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
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_by_value() {
        let a = BearerToken::new("one".into());
        assert_eq!(a, BearerToken::new("one".into()));
        assert_ne!(a, BearerToken::new("two".into()));
        assert_eq!(format!("{a:?}"), "BearerToken([REDACTED])");
    }
}
