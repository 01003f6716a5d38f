//! The gateway's authorization server (`[gateway] auth = { kind = "oauth" }`)
//! as the gateway talks to it: its metadata, found once (RFC 8414, else
//! OpenID discovery), and token exchange (RFC 8693) for a connection that
//! acts on its callers' behalf (docs/SECURITY.md, "Whose credentials reach
//! the upstream"). The callers' tokens are checked against it in
//! `gateway::callers::tokens`.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use tokio::sync::OnceCell;

use crate::config::IntrospectionClient;

/// How long a request to the issuer may take.
pub(crate) const ISSUER_TIMEOUT: Duration = Duration::from_secs(10);
/// The grant type of token exchange (RFC 8693 §2.1).
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of an access token (RFC 8693 §3).
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The longest answer read from the issuer.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// An authorization server, by its issuer identifier.
pub(crate) struct Issuer {
    issuer: String,
    http: reqwest::Client,
    metadata: OnceCell<IssuerMetadata>,
}

/// What the issuer's metadata names (the parts the gateway uses).
#[derive(Debug, Deserialize)]
pub(crate) struct IssuerMetadata {
    pub(crate) issuer: String,
    pub(crate) jwks_uri: Option<String>,
    pub(crate) introspection_endpoint: Option<String>,
    pub(crate) token_endpoint: Option<String>,
}

/// The issuer could not be asked (unreachable, an error status, an answer
/// that is not its metadata). Details are logged where they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unreachable;

impl Issuer {
    pub(crate) fn new(issuer: String) -> Self {
        let http = reqwest::Client::builder()
            .timeout(ISSUER_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client with a timeout builds");
        Issuer {
            issuer,
            http,
            metadata: OnceCell::new(),
        }
    }

    /// The issuer identifier, as configured.
    pub(crate) fn name(&self) -> &str {
        &self.issuer
    }

    /// The issuer's metadata, fetched once: RFC 8414's well-known path
    /// (inserted before the issuer's path), else OpenID discovery's. Its
    /// `issuer` must be the configured one exactly.
    pub(crate) async fn metadata(&self) -> Result<&IssuerMetadata, Unreachable> {
        self.metadata
            .get_or_try_init(|| async {
                let issuer = url::Url::parse(&self.issuer).map_err(|_| Unreachable)?;
                let origin = issuer.origin().ascii_serialization();
                let path = issuer.path().trim_end_matches('/');
                let oauth = format!("{origin}/.well-known/oauth-authorization-server{path}");
                let openid = format!(
                    "{}/.well-known/openid-configuration",
                    self.issuer.trim_end_matches('/')
                );
                let metadata: IssuerMetadata = match self.get_json(&oauth).await {
                    Ok(metadata) => metadata,
                    Err(_) => self.get_json(&openid).await?,
                };
                if metadata.issuer != self.issuer {
                    tracing::warn!(
                        configured = %self.issuer,
                        published = %metadata.issuer,
                        "the authorization server's metadata names another issuer; it is not used"
                    );
                    return Err(Unreachable);
                }
                Ok(metadata)
            })
            .await
    }

    /// A JSON document from the issuer.
    pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
    ) -> Result<T, Unreachable> {
        let response = self.http.get(url).send().await.map_err(|error| {
            tracing::warn!(%url, error = %error.without_url(), "the authorization server could not be reached");
            Unreachable
        })?;
        if !response.status().is_success() {
            tracing::debug!(%url, status = %response.status(), "the authorization server refused a metadata request");
            return Err(Unreachable);
        }
        response.json().await.map_err(|_| Unreachable)
    }

    /// POSTs `form` to the issuer's `endpoint` as the gateway's `client`
    /// (`client_secret_basic`): how introspection and token exchange ask.
    pub(crate) async fn post_form(
        &self,
        endpoint: &str,
        client: &IntrospectionClient,
        form: String,
    ) -> Result<reqwest::Response, reqwest::Error> {
        self.http
            .post(endpoint)
            .basic_auth(
                &client.client_id,
                Some(client.client_secret.expose_secret()),
            )
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(form)
            .send()
            .await
    }

    /// Exchanges `subject` (a caller's access token) for an access token
    /// for `audience` with `scopes` (none: what the issuer decides), as
    /// `client` (RFC 8693, client authentication `client_secret_basic`).
    pub(crate) async fn exchange(
        &self,
        client: &IntrospectionClient,
        subject: &str,
        audience: &str,
        scopes: &[String],
    ) -> Result<Exchanged, ExchangeError> {
        let endpoint = self
            .metadata()
            .await
            .map_err(|_| ExchangeError::Unavailable)?
            .token_endpoint
            .as_deref()
            .ok_or(ExchangeError::Unavailable)?;
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", TOKEN_EXCHANGE)
            .append_pair("subject_token", subject)
            .append_pair("subject_token_type", ACCESS_TOKEN_TYPE)
            .append_pair("requested_token_type", ACCESS_TOKEN_TYPE)
            .append_pair("resource", audience);
        if !scopes.is_empty() {
            form.append_pair("scope", &scopes.join(" "));
        }
        let response = self
            .post_form(endpoint, client, form.finish())
            .await
            .map_err(|error| {
                tracing::warn!(error = %error.without_url(), "token exchange: the authorization server could not be reached");
                ExchangeError::Unavailable
            })?;
        let status = response.status();
        let body = read_bounded(response).await?;
        // Too many requests, or too slow: the issuer's state, not an answer.
        let busy = matches!(status.as_u16(), 408 | 429);
        if status.is_client_error() && !busy {
            // RFC 6749 §5.2: `{"error": "invalid_grant", …}`. Only the code
            // is kept: a description could echo what was sent.
            let code = serde_json::from_slice::<ErrorAnswer>(&body)
                .map(|answer| ErrorCode::of(&answer.error))
                .unwrap_or(ErrorCode::Other);
            return Err(match code {
                ErrorCode::InvalidGrant | ErrorCode::InvalidScope => ExchangeError::Refused(code),
                _ => ExchangeError::Misconfigured(code),
            });
        }
        if !status.is_success() {
            return Err(ExchangeError::Unavailable);
        }
        let answer: TokenAnswer =
            serde_json::from_slice(&body).map_err(|_| ExchangeError::Unavailable)?;
        if !answer.token_type.eq_ignore_ascii_case("bearer") || answer.access_token.is_empty() {
            return Err(ExchangeError::Misconfigured(ErrorCode::Other));
        }
        Ok(Exchanged {
            token: SecretString::from(answer.access_token),
            lifetime: answer.expires_in.map(Duration::from_secs),
        })
    }
}

/// An access token for an upstream, from token exchange.
pub(crate) struct Exchanged {
    pub(crate) token: SecretString,
    /// How long it lives, when the issuer said.
    pub(crate) lifetime: Option<Duration>,
}

/// Why a token exchange gave no token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExchangeError {
    /// The issuer refused the caller's token (`invalid_grant`,
    /// `invalid_scope`): this caller's token will not do.
    Refused(ErrorCode),
    /// The issuer refused the exchange for the gateway's own settings (its
    /// client, the audience, …): no caller's token would do.
    Misconfigured(ErrorCode),
    /// The issuer could not be asked, was busy (`408`, `429`), or answered
    /// with an error of its own.
    Unavailable,
}

/// The error codes of a refused exchange that the gateway tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorCode {
    /// `invalid_grant`: the caller's token is expired, revoked or not the
    /// issuer's.
    InvalidGrant,
    /// `invalid_scope`: the caller's token does not hold the scopes asked for.
    InvalidScope,
    /// `invalid_target`: the issuer does not mint tokens for that audience.
    InvalidTarget,
    /// `unauthorized_client` / `invalid_client`: the gateway's own client
    /// may not exchange.
    Client,
    Other,
}

impl ErrorCode {
    fn of(code: &str) -> Self {
        match code {
            "invalid_grant" => ErrorCode::InvalidGrant,
            "invalid_scope" => ErrorCode::InvalidScope,
            "invalid_target" => ErrorCode::InvalidTarget,
            "unauthorized_client" | "invalid_client" => ErrorCode::Client,
            _ => ErrorCode::Other,
        }
    }

    /// What the caller is told.
    pub(crate) fn explain(self) -> &'static str {
        match self {
            ErrorCode::InvalidGrant => "your access token was not accepted for exchange",
            ErrorCode::InvalidScope => "your access token lacks the scopes this connection needs",
            ErrorCode::InvalidTarget => "the authorization server mints no tokens for this server",
            ErrorCode::Client => "the gateway's own client may not exchange tokens",
            ErrorCode::Other => "the authorization server refused the exchange",
        }
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    token_type: String,
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, ExchangeError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| ExchangeError::Unavailable)?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(ExchangeError::Unavailable);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
