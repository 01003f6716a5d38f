//! [`TokenClient`]: every request to an OAuth upstream carries a token from
//! a [`TokenSource`], and a 401 gets one new token and one retry; without a
//! token nothing is sent (rmcp's `AuthClient` sends the request without
//! one). Two sources: [`LoginTokens`] (the tokens of `mcp-supervisor
//! login`, refreshed with the refresh token) and [`ClientTokens`]
//! (`grant = "client_credentials"`: the client's own credentials, no login;
//! this grant gives no refresh token, so a new token is asked for instead).
//! In a fleet, either source renews once for every node (`super::shared`).

use std::{collections::HashMap, sync::Arc, time::Duration};

use http::{HeaderName, HeaderValue};
use rmcp::{
    model::ClientJsonRpcMessage,
    transport::{
        auth::{
            AuthError, AuthorizationManager, ClientCredentialsConfig, CredentialStore,
            StoredCredentials,
        },
        streamable_http_client::{
            StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
            StreamableHttpResponseLimits,
        },
    },
};
use secrecy::{ExposeSecret, SecretString};
use tokio::{sync::Mutex, time::Instant};

use super::{
    TokenFile,
    shared::{Renewed, Sharing, access, due, now_secs, replaces},
};

/// How long before its expiry a token is replaced: half its lifetime, at
/// most 30 seconds (as rmcp refreshes).
fn renewal_margin(lifetime: Duration) -> Duration {
    (lifetime / 2).min(Duration::from_secs(30))
}

/// The longest a token is kept without asking for a new one.
const LONGEST_HOLD: Duration = Duration::from_secs(24 * 3600);

/// A lifetime the server did not state is taken as this.
const UNSTATED_LIFETIME: Duration = Duration::from_secs(3600);

/// Where a [`TokenClient`] gets its tokens. One request for a new token at a
/// time; callers waiting meanwhile get its result.
pub(crate) trait TokenSource: Send + Sync + 'static {
    /// The token to send: the current one, unless it is near its expiry or
    /// is `rejected` (a 401 answered it); then a new one. An error means no
    /// request is sent.
    fn token(
        &self,
        rejected: Option<&str>,
    ) -> impl Future<Output = Result<String, AuthError>> + Send;
}

/// The tokens of `mcp-supervisor login`, in the connection's token file:
/// refreshed ahead of expiry, and after a 401, with the refresh token; in a
/// fleet, once for every node ([`Sharing`]).
pub(crate) struct LoginTokens {
    manager: AuthorizationManager,
    /// The manager's credential store too: read here to judge the token,
    /// written when the fleet's tokens are taken.
    file: TokenFile,
    sharing: Option<Sharing>,
    /// One renewal at a time; callers waiting meanwhile use its result.
    renewing: Mutex<()>,
}

impl LoginTokens {
    pub(crate) fn new(
        manager: AuthorizationManager,
        file: TokenFile,
        sharing: Option<Sharing>,
    ) -> Self {
        Self {
            manager,
            file,
            sharing,
            renewing: Mutex::new(()),
        }
    }

    /// The stored tokens; `AuthorizationRequired` without an access token.
    async fn stored(&self) -> Result<StoredCredentials, AuthError> {
        self.file
            .load()
            .await?
            .filter(|stored| access(stored).is_some())
            .ok_or(AuthError::AuthorizationRequired)
    }
}

impl TokenSource for LoginTokens {
    async fn token(&self, rejected: Option<&str>) -> Result<String, AuthError> {
        let _one = self.renewing.lock().await;
        let held = self.stored().await?;
        let now = now_secs();
        if let Some(current) = access(&held)
            && rejected != Some(current)
            && !due(&held, now)
        {
            return Ok(current.to_owned());
        }
        // rmcp refreshes with the stored refresh token and stores the answer
        // (`AuthorizationRequired` when there is no refresh token; a
        // rejected one is dropped from the file).
        let refresh = || async {
            self.manager.refresh_token().await?;
            self.stored().await
        };
        let renewed = match &self.sharing {
            None => refresh().await?,
            Some(sharing) => {
                let usable = |shared: &StoredCredentials| {
                    replaces(shared, Some(&held), &held.client_id, rejected, now)
                };
                match sharing.renew(usable, refresh).await? {
                    Renewed::Asked(tokens) => tokens,
                    Renewed::Adopted(tokens) => {
                        self.file.save(tokens.clone()).await?;
                        tokens
                    }
                }
            }
        };
        access(&renewed)
            .map(str::to_owned)
            .ok_or(AuthError::AuthorizationRequired)
    }
}

/// A connection's client-credentials tokens; in a fleet, one token for
/// every node ([`Sharing`]).
pub(crate) struct ClientTokens {
    manager: AuthorizationManager,
    config: ClientCredentialsConfig,
    /// The client id, which a shared token must have been issued to.
    client_id: String,
    sharing: Option<Sharing>,
    current: Mutex<Option<Current>>,
}

struct Current {
    token: SecretString,
    renew_at: Instant,
}

impl ClientTokens {
    pub(crate) fn new(
        manager: AuthorizationManager,
        config: ClientCredentialsConfig,
        client_id: String,
        sharing: Option<Sharing>,
    ) -> Self {
        Self {
            manager,
            config,
            client_id,
            sharing,
            current: Mutex::new(None),
        }
    }
}

impl TokenSource for ClientTokens {
    async fn token(&self, rejected: Option<&str>) -> Result<String, AuthError> {
        use oauth2::TokenResponse;
        let mut current = self.current.lock().await;
        if let Some(held) = current.as_ref()
            && Instant::now() < held.renew_at
            && rejected != Some(held.token.expose_secret())
        {
            return Ok(held.token.expose_secret().to_owned());
        }
        let ask = || async {
            let issued = self
                .manager
                .exchange_client_credentials(&self.config)
                .await?;
            Ok(StoredCredentials::new(
                self.client_id.clone(),
                Some(issued),
                Vec::new(),
                Some(now_secs()),
            ))
        };
        let (tokens, adopted) = match &self.sharing {
            None => (ask().await?, false),
            Some(sharing) => {
                let held = current
                    .as_ref()
                    .map(|held| held.token.expose_secret().to_owned());
                let now = now_secs();
                let usable = |shared: &StoredCredentials| {
                    access(shared) != held.as_deref()
                        && replaces(shared, None, &self.client_id, rejected, now)
                };
                match sharing.renew(usable, ask).await? {
                    Renewed::Asked(tokens) => (tokens, false),
                    Renewed::Adopted(tokens) => (tokens, true),
                }
            }
        };
        let Some(response) = tokens.token_response.as_ref() else {
            return Err(AuthError::AuthorizationRequired);
        };
        let lifetime = response.expires_in().unwrap_or(UNSTATED_LIFETIME);
        // Ours is as old as this request; another node's is as old as its
        // receipt says (in whole seconds of the wall clock).
        let left = if adopted {
            let held_for = now_secs().saturating_sub(tokens.token_received_at.unwrap_or(0));
            lifetime.saturating_sub(Duration::from_secs(held_for))
        } else {
            lifetime
        };
        let token = response.access_token().secret().to_owned();
        let now = Instant::now();
        *current = Some(Current {
            token: SecretString::from(token.clone()),
            // `checked_add`: a server may say a token lives "forever".
            renew_at: now
                .checked_add(left.saturating_sub(renewal_margin(lifetime)))
                .unwrap_or(now + LONGEST_HOLD),
        });
        Ok(token)
    }
}

/// rmcp's streamable HTTP client `inner`, every request carrying a token of
/// `S`; a 401 gets one new token and one retry (a 401 means the request did
/// not run).
pub(crate) struct TokenClient<C, S> {
    inner: C,
    tokens: Arc<S>,
}

impl<C: Clone, S> Clone for TokenClient<C, S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            tokens: Arc::clone(&self.tokens),
        }
    }
}

impl<C, S> TokenClient<C, S> {
    pub(crate) fn new(inner: C, tokens: Arc<S>) -> Self {
        Self { inner, tokens }
    }

    /// The client it wraps.
    pub(crate) fn inner(&self) -> &C {
        &self.inner
    }
}

impl<C: StreamableHttpClient + Send + Sync, S: TokenSource> TokenClient<C, S> {
    /// `call` with a token, and once more with a new one after a 401.
    pub(crate) async fn authorized<T, F, Fut>(
        &self,
        call: F,
    ) -> Result<T, StreamableHttpError<C::Error>>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<C::Error>>>,
    {
        let token = self.tokens.token(None).await?;
        match call(Some(token.clone())).await {
            Err(StreamableHttpError::AuthRequired(_)) => {
                let fresh = self.tokens.token(Some(&token)).await?;
                call(Some(fresh)).await
            }
            answered => answered,
        }
    }
}

type SseStream = futures::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>;

impl<C: StreamableHttpClient + Send + Sync, S: TokenSource> StreamableHttpClient
    for TokenClient<C, S>
{
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.authorized(|token| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.authorized(|token| {
            self.inner.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.authorized(|token| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.authorized(|token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        self.authorized(|token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        self.authorized(|token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}
