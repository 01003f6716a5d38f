//! Upstream OAuth 2.1 (docs/OAUTH.md; docs/DECISIONS.md #73): a person logs
//! in once ([`login`]), the tokens are kept in the connection's
//! [`TokenFile`], and the connection's transport sends them, refreshing
//! ahead of expiry and once after a 401 (rmcp's `AuthClient` and
//! `AuthorizationManager`). A connection without usable tokens fails with
//! [`FailureKind::NeedsLogin`](crate::FailureKind::NeedsLogin) and sends
//! nothing.

mod login;
mod store;

use rmcp::transport::auth::{AuthError, AuthorizationManager, AuthorizationMetadata};

pub use login::{LoggedIn, LoginError, login};
pub use store::TokenFile;

use crate::{
    config::{ConnectionConfig, OAuthSettings, Transport, UpstreamAuth},
    failure::{Failure, FailureKind},
    policy::Phase,
};

/// What `/status` and `mcp-supervisor status` show of an OAuth connection's
/// tokens (never a token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthStatus {
    /// Tokens are stored (they may still turn out revoked).
    pub logged_in: bool,
    /// When the access token expires, when the server said.
    pub expires_at: Option<std::time::SystemTime>,
    /// What was granted.
    pub scopes: Vec<String>,
    /// A refresh token is stored.
    pub refreshable: bool,
    /// Scopes the server asked for that the tokens lack (the next login
    /// asks for them).
    pub wanted_scopes: Vec<String>,
}

/// The settings of `connection`, if it is an OAuth connection.
pub fn settings_of(connection: &ConnectionConfig) -> Option<&OAuthSettings> {
    match &connection.transport {
        Transport::Http(http) => http.auth.as_ref().and_then(UpstreamAuth::oauth),
        Transport::Stdio(_) => None,
    }
}

/// The token file's state (an unreadable file counts as not logged in).
pub async fn status(settings: &OAuthSettings) -> OAuthStatus {
    use oauth2::TokenResponse;
    let file = TokenFile::new(settings.token_file.clone());
    let stored = file.credentials().await.ok().flatten();
    let wanted_scopes = file.wanted_scopes().await.unwrap_or_default();
    let token = stored
        .as_ref()
        .and_then(|stored| stored.token_response.as_ref());
    let received = stored.as_ref().and_then(|stored| stored.token_received_at);
    OAuthStatus {
        logged_in: token.is_some(),
        expires_at: token.and_then(TokenResponse::expires_in).zip(received).map(
            |(lifetime, at)| std::time::UNIX_EPOCH + std::time::Duration::from_secs(at) + lifetime,
        ),
        scopes: stored
            .as_ref()
            .map(|stored| granted(&stored.granted_scopes))
            .unwrap_or_default(),
        refreshable: token.is_some_and(|token| token.refresh_token().is_some()),
        wanted_scopes,
    }
}

/// The granted scopes, without the empty ones a blank `scope` gives.
pub(crate) fn granted(scopes: &[String]) -> Vec<String> {
    scopes
        .iter()
        .filter(|scope| !scope.is_empty())
        .cloned()
        .collect()
}

/// The authorization manager for a connection's requests: its stored
/// tokens, its authorization server's metadata. `NeedsLogin` when there are
/// no tokens (nothing is sent then); other failures as classified.
pub(crate) async fn manager_for(
    url: &str,
    settings: &OAuthSettings,
) -> Result<(AuthorizationManager, TokenFile), Failure> {
    let file = TokenFile::new(settings.token_file.clone());
    let stored = file
        .credentials()
        .await
        .map_err(|error| Failure::needs_login(format!("token file: {error}")))?;
    if stored.is_none_or(|stored| stored.token_response.is_none()) {
        return Err(Failure::needs_login("no OAuth tokens stored"));
    }
    let mut manager = new_manager(url)
        .await
        .map_err(|error| auth_failure(&error))?;
    manager.set_credential_store(file.clone());
    if let Some(issuer) = &settings.authorization_server {
        manager.set_metadata(
            fetch_metadata(issuer)
                .await
                .map_err(|error| auth_failure(&error))?,
        );
    }
    match manager.initialize_from_store().await {
        Ok(true) => Ok((manager, file)),
        Ok(false) => Err(Failure::needs_login(
            "the authorization server changed since the login",
        )),
        Err(error) => Err(auth_failure(&error)),
    }
}

/// A manager for `url` that may reach loopback and private addresses when
/// the URL itself is one (rmcp refuses discovered hosts of another class).
async fn new_manager(url: &str) -> Result<AuthorizationManager, AuthError> {
    AuthorizationManager::new_allowing_private_addresses(url).await
}

/// RFC 8414 metadata of the configured `authorization_server` (its path,
/// if any, after the well-known prefix), then OpenID discovery.
async fn fetch_metadata(issuer: &str) -> Result<AuthorizationMetadata, AuthError> {
    let base = reqwest::Url::parse(issuer)
        .map_err(|_| AuthError::MetadataError("authorization_server is not a URL".into()))?;
    let path = base.path().trim_end_matches('/');
    let origin = base.origin().ascii_serialization();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|_| AuthError::MetadataError("no HTTP client".into()))?;
    for candidate in [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ] {
        let Ok(response) = client.get(&candidate).send().await else {
            continue;
        };
        if !response.status().is_success() {
            continue;
        }
        if let Ok(metadata) = response.json::<AuthorizationMetadata>().await {
            return Ok(metadata);
        }
    }
    Err(AuthError::MetadataError(format!(
        "no authorization server metadata found for {issuer}"
    )))
}

/// What a failure on an OAuth session means: a 401 that a refresh could
/// not get past needs a login; a 403 `insufficient_scope` records the scopes
/// for the next login to ask for, and while connecting (the session cannot
/// work without them) needs that login. Other failures are as classified.
pub(crate) fn on_session(failure: Failure, tokens: Option<&TokenFile>, phase: Phase) -> Failure {
    let Some(tokens) = tokens else {
        return failure;
    };
    if let Some(scope) = failure.wanted_scope() {
        let scopes: Vec<String> = scope.split_whitespace().map(str::to_owned).collect();
        let tokens = tokens.clone();
        tokio::spawn(async move {
            if let Err(error) = tokens.want(&scopes).await {
                tracing::warn!(%error, "could not record the OAuth scopes the server asked for");
            }
        });
        if phase == Phase::Connect {
            return Failure {
                kind: FailureKind::NeedsLogin,
                ..failure
            };
        }
        return failure;
    }
    if failure.kind == FailureKind::Auth {
        return Failure {
            kind: FailureKind::NeedsLogin,
            ..failure
        };
    }
    failure
}

/// An OAuth failure as the supervisor classifies it: what needs a person is
/// `NeedsLogin`; the authorization server failing is a server failure
/// (parked and retried like any upstream's).
pub(crate) fn auth_failure(error: &AuthError) -> Failure {
    match error {
        AuthError::AuthorizationRequired
        | AuthError::TokenRefreshRejected(_)
        | AuthError::CredentialStoreError(_) => Failure::needs_login(short(error)),
        _ => Failure::new(FailureKind::Server, short(error)).with_not_run(),
    }
}

/// The error's kind in a few words: rmcp's texts can carry an authorization
/// server's response, which is not ours to print.
fn short(error: &AuthError) -> String {
    let text = match error {
        AuthError::AuthorizationRequired => "authorization required",
        AuthError::TokenRefreshRejected(_) => "the refresh token was rejected",
        AuthError::TokenRefreshFailed(_) => "token refresh failed",
        AuthError::CredentialStoreError(_) => "the token file could not be used",
        AuthError::MetadataError(_) | AuthError::NoAuthorizationSupport => {
            "authorization server metadata could not be discovered"
        }
        AuthError::RegistrationFailed(_) => "client registration failed",
        AuthError::TokenExchangeFailed(_) => "the token request failed",
        AuthError::HttpError(_) => "the authorization server could not be reached",
        _ => "OAuth error",
    };
    text.to_owned()
}
