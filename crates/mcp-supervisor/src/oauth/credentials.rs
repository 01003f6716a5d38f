//! [`TokenClient`]: every request to an OAuth upstream carries a token from
//! a [`TokenSource`], and a 401 gets one new token and one retry; without a
//! token nothing is sent (rmcp's `AuthClient` sends the request without
//! one). Two sources: [`LoginTokens`] (the tokens of `mcp-supervisor
//! login`, refreshed with the refresh token) and [`ClientTokens`]
//! (`grant = "client_credentials"`: the client's own credentials, no login;
//! this grant gives no refresh token, so a new token is asked for instead).

use std::{collections::HashMap, sync::Arc, time::Duration};

use http::{HeaderName, HeaderValue};
use rmcp::{
    model::ClientJsonRpcMessage,
    transport::{
        auth::{AuthError, AuthorizationManager, ClientCredentialsConfig},
        streamable_http_client::{
            StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
            StreamableHttpResponseLimits,
        },
    },
};
use secrecy::{ExposeSecret, SecretString};
use tokio::{sync::Mutex, time::Instant};

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
/// refreshed ahead of expiry, and after a 401, with the refresh token.
pub(crate) struct LoginTokens {
    manager: Mutex<AuthorizationManager>,
}

impl LoginTokens {
    pub(crate) fn new(manager: AuthorizationManager) -> Self {
        Self {
            manager: Mutex::new(manager),
        }
    }
}

impl TokenSource for LoginTokens {
    async fn token(&self, rejected: Option<&str>) -> Result<String, AuthError> {
        use oauth2::TokenResponse;
        let manager = self.manager.lock().await;
        // Refreshes ahead of expiry; `AuthorizationRequired` when it cannot.
        let current = manager.get_access_token().await?;
        if rejected != Some(current.as_str()) {
            return Ok(current);
        }
        let refreshed = manager.refresh_token().await?;
        Ok(refreshed.access_token().secret().to_owned())
    }
}

/// A connection's client-credentials tokens.
pub(crate) struct ClientTokens {
    manager: AuthorizationManager,
    config: ClientCredentialsConfig,
    current: Mutex<Option<Current>>,
}

struct Current {
    token: SecretString,
    renew_at: Instant,
}

impl ClientTokens {
    pub(crate) fn new(manager: AuthorizationManager, config: ClientCredentialsConfig) -> Self {
        Self {
            manager,
            config,
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
        let issued = self
            .manager
            .exchange_client_credentials(&self.config)
            .await?;
        let lifetime = issued.expires_in().unwrap_or(UNSTATED_LIFETIME);
        let token = issued.access_token().secret().to_owned();
        let now = Instant::now();
        *current = Some(Current {
            token: SecretString::from(token.clone()),
            // `checked_add`: a server may say a token lives "forever".
            renew_at: now
                .checked_add(lifetime - renewal_margin(lifetime))
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
}

impl<C: StreamableHttpClient + Send + Sync, S: TokenSource> TokenClient<C, S> {
    async fn authorized<T, F, Fut>(&self, call: F) -> Result<T, StreamableHttpError<C::Error>>
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
