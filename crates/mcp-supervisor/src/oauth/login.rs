//! `mcp-supervisor login NAME`: the authorization code flow with PKCE and a
//! loopback redirect (RFC 8252): a listener on 127.0.0.1 at a random port
//! receives the authorization server's redirect, and the code is exchanged
//! for tokens, which go to the connection's [`TokenFile`].

use std::{fmt, time::Duration};

use axum::{Router, extract::State, http::Uri, routing::get};
use rmcp::transport::auth::{
    AuthError, AuthorizationRequest, AuthorizationSession, StoredCredentials,
};
use tokio::{net::TcpListener, sync::mpsc};

use super::{TokenFile, discover, new_manager, short};
use crate::config::OAuthSettings;

use super::CLIENT_NAME;

/// What a login got.
#[derive(Debug)]
pub struct LoggedIn {
    /// Scopes the authorization server granted.
    pub scopes: Vec<String>,
    /// Seconds the access token lives, when the server said.
    pub expires_in: Option<u64>,
    /// Whether a refresh token came with it (without one, the next login is
    /// due when the access token expires).
    pub refreshable: bool,
}

/// Why a login did not complete. The texts are ours: an authorization
/// server's answer is never printed (it could carry a code or a token).
#[derive(Debug)]
pub enum LoginError {
    /// The redirect listener could not be opened.
    Listener(std::io::Error),
    /// Discovery, registration or the token request failed.
    OAuth(&'static str, String),
    /// The authorization server redirected back with `error=…`.
    Denied(String),
    /// Nobody completed the authorization in time.
    TimedOut(Duration),
}

impl fmt::Display for LoginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Listener(error) => write!(f, "cannot open the redirect listener: {error}"),
            Self::OAuth(step, what) => write!(f, "{step}: {what}"),
            Self::Denied(error) => write!(f, "the authorization server refused: {error}"),
            Self::TimedOut(waited) => write!(
                f,
                "nobody completed the authorization within {} seconds",
                waited.as_secs()
            ),
        }
    }
}

impl std::error::Error for LoginError {}

fn oauth(step: &'static str) -> impl FnOnce(AuthError) -> LoginError {
    move |error| LoginError::OAuth(step, short(&error))
}

/// Logs in to the server at `url`: discovers its authorization server,
/// registers a client if none is configured, calls `open` with the URL a
/// person must visit, and waits up to `patience` for the redirect. The
/// tokens replace the connection's stored ones.
pub async fn login(
    url: &str,
    settings: &OAuthSettings,
    open: impl FnOnce(&str),
    patience: Duration,
) -> Result<LoggedIn, LoginError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(LoginError::Listener)?;
    let port = listener.local_addr().map_err(LoginError::Listener)?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");

    let mut manager = new_manager(url)
        .await
        .map_err(oauth("cannot reach the server"))?;
    let file = TokenFile::new(settings.token_file.clone());
    manager.set_credential_store(file.clone());
    discover(&mut manager, url, settings)
        .await
        .map_err(oauth("discovery"))?;

    let mut request = AuthorizationRequest::new(&redirect).with_client_name(CLIENT_NAME);
    let scopes = scopes_to_ask(settings, &file).await;
    if !scopes.is_empty() {
        request = request.with_scopes(scopes);
    }
    if let Some(url) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(url);
    }
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id);
        if let Some(secret) = &settings.client_secret {
            use secrecy::ExposeSecret;
            request = request.with_client_secret(secret.expose_secret());
        }
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, error)| oauth("client registration")(error))?;

    let (redirected, mut arrived) = mpsc::channel::<Uri>(1);
    let app = Router::new()
        .route("/callback", get(callback))
        .with_state(redirected);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    open(session.get_authorization_url());
    let arrived = tokio::time::timeout(patience, arrived.recv()).await;
    server.abort();
    let uri = match arrived {
        Ok(Some(uri)) => uri,
        Ok(None) | Err(_) => return Err(LoginError::TimedOut(patience)),
    };
    if let Some(error) = query_value(&uri, "error") {
        return Err(LoginError::Denied(error));
    }
    let full = format!("{redirect}?{}", uri.query().unwrap_or_default());
    let token = session
        .handle_callback_url(&full)
        .await
        .map_err(oauth("token request"))?;
    let stored = file
        .credentials()
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| StoredCredentials::new(String::new(), None, Vec::new(), None));
    use oauth2::TokenResponse;
    Ok(LoggedIn {
        scopes: super::granted(&stored.granted_scopes),
        expires_in: token.expires_in().map(|lifetime| lifetime.as_secs()),
        refreshable: token.refresh_token().is_some(),
    })
}

/// The configured scopes, and after a server asked for more (a 403
/// `insufficient_scope`), those plus every scope held and wanted (step-up:
/// the new tokens replace the old, so they must cover what those did).
/// Empty: let discovery choose (the challenge's scope, or the server's).
async fn scopes_to_ask(settings: &OAuthSettings, file: &TokenFile) -> Vec<String> {
    let wanted = file.wanted_scopes().await.unwrap_or_default();
    if wanted.is_empty() {
        return settings.scopes.clone();
    }
    let held = file
        .credentials()
        .await
        .ok()
        .flatten()
        .map(|stored| super::granted(&stored.granted_scopes))
        .unwrap_or_default();
    let mut scopes = settings.scopes.clone();
    for scope in held.into_iter().chain(wanted) {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    scopes
}

/// The redirect: passed on once; the page tells the person to go back.
async fn callback(State(redirected): State<mpsc::Sender<Uri>>, uri: Uri) -> &'static str {
    let _ = redirected.try_send(uri);
    "mcp-supervisor: authorization received; you can close this page and return to the terminal."
}

/// A query parameter's value, decoded; its text is limited to what an
/// `error` code may be (RFC 6749 §4.1.2.1: printable ASCII).
fn query_value(uri: &Uri, name: &str) -> Option<String> {
    let query = uri.query()?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| {
            value
                .chars()
                .filter(|c| c.is_ascii_graphic() || *c == ' ')
                .take(200)
                .collect()
        })
}
