//! Upstream OAuth 2.1 (docs/OAUTH.md; docs/DECISIONS.md #73, #74): a person
//! logs in once ([`login`]), the tokens are kept in the connection's
//! [`TokenFile`], and the connection's transport sends them, refreshing
//! ahead of expiry and once after a 401 (`TokenClient` over rmcp's
//! `AuthorizationManager`). A connection without usable tokens fails with
//! [`crate::FailureKind::NeedsLogin`] and sends
//! nothing. A `client_credentials` connection gets its own tokens
//! (`ClientTokens`). In a fleet, either kind is renewed once for every node
//! ([`Sharing`], over a [`TokenShare`] the fleet provides).

mod credentials;
mod issuer;
mod login;
mod shared;
mod store;

use std::sync::Arc;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, ClientCredentialsConfig,
};

pub(crate) use credentials::{ClientTokens, LoginTokens, TokenClient, TokenSource};

pub(crate) use issuer::{ExchangeError, Issuer, IssuerMetadata};
pub use login::{LoggedIn, LoginError, login};
pub use shared::{ExchangedToken, LOCK_TTL, ShareError, Sharing, TokenShare};
pub use store::TokenFile;

use crate::{
    config::{ConnectionConfig, OAuthSettings, Transport, UpstreamAuth},
    failure::Phase,
    failure::{Failure, FailureKind},
};

/// What `/status` and `mcp-supervisor status` show of an OAuth connection's
/// tokens (never a token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthStatus {
    /// A `client_credentials` connection: it gets its own tokens (none are
    /// stored, and it never needs a login).
    pub by_itself: bool,
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
    let by_itself = settings.grant == crate::config::OAuthGrant::ClientCredentials;
    let wanted_scopes = file.wanted_scopes().await.unwrap_or_default();
    let token = stored
        .as_ref()
        .and_then(|stored| stored.token_response.as_ref());
    let received = stored.as_ref().and_then(|stored| stored.token_received_at);
    OAuthStatus {
        by_itself,
        logged_in: token.is_some(),
        // `checked_add`: a server may say a token lives "forever".
        expires_at: token
            .and_then(TokenResponse::expires_in)
            .zip(received)
            .and_then(|(lifetime, at)| {
                (std::time::UNIX_EPOCH + std::time::Duration::from_secs(at)).checked_add(lifetime)
            }),
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

/// The token source for a connection's requests: its stored tokens, its
/// authorization server's metadata (found as `login` found it). `NeedsLogin`
/// when there are no tokens (nothing is sent then); other failures as
/// classified. The token file comes too, for recording step-up scopes.
/// `sharing`: the fleet's, if any.
pub(crate) async fn login_tokens(
    url: &str,
    settings: &OAuthSettings,
    sharing: Option<Sharing>,
) -> Result<(Arc<LoginTokens>, TokenFile), Failure> {
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
    discover(&mut manager, url, settings)
        .await
        .map_err(|error| auth_failure(&error))?;
    match manager.initialize_from_store().await {
        Ok(true) => Ok((
            Arc::new(LoginTokens::new(manager, file.clone(), sharing)),
            file,
        )),
        Ok(false) => Err(Failure::needs_login(
            "the authorization server changed since the login",
        )),
        Err(error) => Err(auth_failure(&error)),
    }
}

/// How long one discovery request may take (a server that accepts the
/// connection and never answers must not hang `login`).
const DISCOVERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The client for our own discovery requests: no redirects followed (one
/// could lead anywhere), bounded by [`DISCOVERY_TIMEOUT`].
fn discovery_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(DISCOVERY_TIMEOUT)
        .build()
}

/// The name a client registers under, and tells servers it is.
const CLIENT_NAME: &str = "mcp-supervisor";

/// A `client_credentials` connection's token source: its authorization
/// server discovered, its client configured; tokens are asked for on the
/// first request. `sharing`: the fleet's, if any.
pub(crate) async fn client_tokens(
    url: &str,
    settings: &OAuthSettings,
    sharing: Option<Sharing>,
) -> Result<Arc<ClientTokens>, Failure> {
    use secrecy::ExposeSecret;
    let (Some(client_id), Some(client_secret)) = (&settings.client_id, &settings.client_secret)
    else {
        // Config validation requires both for this grant.
        return Err(Failure::needs_login(
            "client credentials are not configured",
        ));
    };
    let mut manager = new_manager(url)
        .await
        .map_err(|error| auth_failure(&error))?;
    discover(&mut manager, url, settings)
        .await
        .map_err(|error| auth_failure(&error))?;
    let config = ClientCredentialsConfig::ClientSecret {
        client_id: client_id.clone(),
        client_secret: client_secret.expose_secret().to_owned(),
        scopes: settings.scopes.clone(),
        resource: Some(url.to_owned()),
    };
    manager
        .configure_client_credentials(&config)
        .map_err(|error| auth_failure(&error))?;
    Ok(Arc::new(ClientTokens::new(
        manager,
        config,
        client_id.clone(),
        sharing,
    )))
}

/// Sets `manager`'s authorization server metadata: the configured
/// `authorization_server`'s, else found from the server's challenge.
async fn discover(
    manager: &mut AuthorizationManager,
    url: &str,
    settings: &OAuthSettings,
) -> Result<(), AuthError> {
    let metadata = match &settings.authorization_server {
        Some(issuer) => fetch_metadata(issuer).await?,
        None => {
            let challenge = challenge(url).await;
            manager
                .resolve_metadata_from_challenge(challenge.as_deref())
                .await?
                .metadata
        }
    };
    manager.set_metadata(metadata);
    Ok(())
}

/// The server's `WWW-Authenticate` challenge to a request without a token:
/// where its protected resource metadata is, and which scopes it wants.
/// Asked with `server/discover` (stateless), then `initialize` (some
/// servers take that one without a token; a session it opens is closed
/// again). `None` when neither is challenged; discovery then tries the
/// well-known URLs.
async fn challenge(url: &str) -> Option<String> {
    let client = discovery_client().ok()?;
    let client_info =
        serde_json::json!({"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")});
    let probes = [
        (
            "2026-07-28",
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover",
                "params": {"_meta": {"io.modelcontextprotocol/clientInfo": client_info}}}),
        ),
        (
            "2025-11-25",
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": client_info}}),
        ),
    ];
    for (version, body) in probes {
        let answer = client
            .post(url)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header("MCP-Protocol-Version", version)
            .json(&body)
            .send()
            .await
            .ok()?;
        if answer.status() == http::StatusCode::UNAUTHORIZED {
            return answer
                .headers()
                .get(http::header::WWW_AUTHENTICATE)?
                .to_str()
                .ok()
                .map(str::to_owned);
        }
        if let Some(session) = answer.headers().get("mcp-session-id") {
            let _ = client
                .delete(url)
                .header("mcp-session-id", session)
                .send()
                .await;
        }
    }
    None
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
    let client =
        discovery_client().map_err(|_| AuthError::MetadataError("no HTTP client".into()))?;
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
/// it names (in `error`) for the next login to ask for, and while
/// connecting (the session cannot work without them) needs that login.
/// Other failures are as classified.
pub(crate) fn on_session(
    failure: Failure,
    error: &(dyn std::error::Error + 'static),
    tokens: Option<&TokenFile>,
    phase: Phase,
) -> Failure {
    let Some(tokens) = tokens else {
        return failure;
    };
    if let Some(scope) = required_scope(error) {
        let scopes: Vec<String> = scope.split_whitespace().map(str::to_owned).collect();
        let tokens = tokens.clone();
        tokio::spawn(async move {
            if let Err(error) = tokens.want(&scopes).await {
                tracing::warn!(%error, "could not record the OAuth scopes the server asked for");
            }
        });
        let failure = failure.login_for_scope();
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

/// The scope an `insufficient_scope` answer in `error`'s chain named.
fn required_scope(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    std::iter::successors(Some(error), |error| error.source())
        .take(64)
        .find_map(
            |node| match node.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::InsufficientScope(refused)) => {
                    refused.get_required_scope().map(str::to_owned)
                }
                _ => None,
            },
        )
}

/// An OAuth failure as the supervisor classifies it: what needs a person is
/// `NeedsLogin`; the authorization server failing is a server failure
/// (parked and retried like any upstream's).
pub(crate) fn auth_failure(error: &AuthError) -> Failure {
    match error {
        AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_) => {
            Failure::needs_login(short(error))
        }
        // rmcp keeps only the text of a refused client credentials request;
        // the OAuth error code in it says the credentials themselves are
        // wrong (RFC 6749 §5.2), which no retry mends.
        AuthError::ClientCredentialsError(text)
            if ["invalid_client", "unauthorized_client"]
                .iter()
                .any(|code| text.contains(code)) =>
        {
            Failure::new(
                FailureKind::Auth,
                "the authorization server refused the client credentials",
            )
            .with_not_run()
        }
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

#[cfg(test)]
mod tests {
    use rmcp::transport::auth::StoredCredentials;

    use super::*;

    #[test]
    fn what_a_person_must_do_is_needs_login_and_the_rest_is_a_server_failure() {
        let kind = |error: AuthError| auth_failure(&error).kind;
        assert_eq!(
            kind(AuthError::AuthorizationRequired),
            FailureKind::NeedsLogin
        );
        assert_eq!(
            kind(AuthError::TokenRefreshRejected("x".into())),
            FailureKind::NeedsLogin
        );
        // A full disk is not a login problem.
        assert_eq!(
            kind(AuthError::CredentialStoreError("x".into())),
            FailureKind::Server
        );
        assert_eq!(
            kind(AuthError::ClientCredentialsError(
                "Token exchange failed: invalid_client".into()
            )),
            FailureKind::Auth
        );
        assert_eq!(
            kind(AuthError::ClientCredentialsError(
                "Token exchange failed: 503".into()
            )),
            FailureKind::Server
        );
    }

    #[tokio::test]
    async fn a_token_said_to_live_forever_shows_no_expiry_and_panics_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let token = serde_json::from_value(serde_json::json!({
            "access_token": "a", "token_type": "bearer", "expires_in": u64::MAX
        }))
        .unwrap();
        let settings = OAuthSettings {
            client_id: None,
            client_metadata_url: None,
            client_secret: None,
            scopes: Vec::new(),
            grant: crate::config::OAuthGrant::AuthorizationCode,
            authorization_server: None,
            token_file: dir.path().join("a.json"),
        };
        TokenFile::new(settings.token_file.clone())
            .store(StoredCredentials::new(
                "c".into(),
                Some(token),
                Vec::new(),
                Some(1),
            ))
            .await
            .unwrap();
        let shown = status(&settings).await;
        assert!(shown.logged_in);
        assert_eq!(shown.expires_at, None);
    }
}
