//! An OAuth 2.1 authorization server of our own, on loopback HTTP, for the
//! tests of upstream OAuth (docs/TESTING.md, "OAuth"): the counterpart the
//! MCP authorization spec describes, with the failures we need to provoke
//! under test control.
//!
//! It serves authorization-server metadata (RFC 8414), dynamic client
//! registration (RFC 7591), an authorization endpoint that approves at once
//! (the user's consent is not what is tested) and redirects with a code,
//! and a token endpoint for `authorization_code` with PKCE S256,
//! `refresh_token` (each refresh token used once: rotation) and
//! `client_credentials`, plus revocation (RFC 7009). Access tokens carry
//! their scopes and resource (RFC 8707) and expire when the test says.
//! [`AuthServer::check`] is what a protected MCP upstream asks
//! ([`crate::http::TestServerOptions::oauth`]).
//!
//! Under test control: the access tokens' lifetime, revoking every token,
//! failing the next token requests with a status (503, 429 with
//! `Retry-After`), and counts of every kind of request.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Form, Json, Router,
    extract::{Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;
use sha2::Digest as _;
use tokio::{net::TcpListener, task::JoinHandle};

/// What a valid access token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub client_id: String,
    pub scopes: Vec<String>,
    /// The resource (RFC 8707) it was issued for, when the client named one.
    pub resource: Option<String>,
}

/// Why [`AuthServer::check`] refused a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Unknown, revoked or expired: 401.
    Invalid,
    /// Valid, but without this scope: 403 `insufficient_scope`.
    InsufficientScope(String),
}

/// Counts of what the server was asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuthCounts {
    pub metadata: u64,
    pub registrations: u64,
    pub authorizations: u64,
    /// Every token request, answered or failed.
    pub token_requests: u64,
    pub refreshes: u64,
    pub revocations: u64,
}

/// The authorization server; stops when dropped.
#[derive(Debug)]
pub struct AuthServer {
    addr: SocketAddr,
    state: Arc<AuthState>,
    task: JoinHandle<()>,
}

#[derive(Debug)]
struct AuthState {
    issuer: String,
    inner: Mutex<Inner>,
    next: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    clients: HashMap<String, Client>,
    codes: HashMap<String, Code>,
    access: HashMap<String, (Grant, Instant)>,
    refresh: HashMap<String, Grant>,
    access_ttl: Duration,
    /// Status (and `Retry-After` seconds) for the next token requests.
    token_faults: Vec<(StatusCode, Option<u64>)>,
    counts: AuthCounts,
}

#[derive(Debug, Clone)]
struct Client {
    secret: Option<String>,
    redirect_uris: Vec<String>,
}

#[derive(Debug)]
struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    scopes: Vec<String>,
    resource: Option<String>,
}

/// Default lifetime of an access token.
const ACCESS_TTL: Duration = Duration::from_secs(3600);

impl AuthServer {
    /// Starts one on `127.0.0.1:0`.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(AuthState {
            issuer: format!("http://{addr}"),
            inner: Mutex::new(Inner {
                clients: HashMap::new(),
                codes: HashMap::new(),
                access: HashMap::new(),
                refresh: HashMap::new(),
                access_ttl: ACCESS_TTL,
                token_faults: Vec::new(),
                counts: AuthCounts::default(),
            }),
            next: AtomicU64::new(1),
        });
        let router = Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/revoke", post(revoke))
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(AuthServer { addr, state, task })
    }

    /// Its issuer identifier, also its base URL (`http://127.0.0.1:PORT`).
    pub fn issuer(&self) -> &str {
        &self.state.issuer
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Registers a client in advance (pre-registration); `secret` makes it
    /// a confidential client (`client_secret_post` or `_basic`).
    pub fn register_client(&self, client_id: &str, secret: Option<&str>, redirect_uris: &[&str]) {
        self.state.lock().clients.insert(
            client_id.to_owned(),
            Client {
                secret: secret.map(str::to_owned),
                redirect_uris: redirect_uris.iter().map(|uri| (*uri).to_owned()).collect(),
            },
        );
    }

    /// Access tokens issued from now on live this long.
    pub fn set_access_ttl(&self, ttl: Duration) {
        self.state.lock().access_ttl = ttl;
    }

    /// Every access token issued so far expires now.
    pub fn expire_access_tokens(&self) {
        let now = Instant::now();
        for (_, expires) in self.state.lock().access.values_mut() {
            *expires = now;
        }
    }

    /// Revokes every token: access tokens stop working, refresh tokens get
    /// `invalid_grant`.
    pub fn revoke_all(&self) {
        let mut inner = self.state.lock();
        inner.access.clear();
        inner.refresh.clear();
    }

    /// The next `times` token requests fail with `status` (and
    /// `Retry-After: retry_after` seconds when given).
    pub fn fail_token_requests(&self, status: u16, retry_after: Option<u64>, times: usize) {
        let status = StatusCode::from_u16(status).expect("an HTTP status");
        let mut inner = self.state.lock();
        inner
            .token_faults
            .extend(std::iter::repeat_n((status, retry_after), times));
    }

    /// Token requests are answered again (the faults not used yet are dropped).
    pub fn stop_failing_token_requests(&self) {
        self.state.lock().token_faults.clear();
    }

    pub fn counts(&self) -> AuthCounts {
        self.state.lock().counts
    }

    /// What a protected resource asks: does `token` grant `scope` (any
    /// valid token when `None`)?
    pub fn check(&self, token: &str, scope: Option<&str>) -> Result<Grant, Refusal> {
        let inner = self.state.lock();
        let Some((grant, expires)) = inner.access.get(token) else {
            return Err(Refusal::Invalid);
        };
        if Instant::now() >= *expires {
            return Err(Refusal::Invalid);
        }
        match scope {
            Some(scope) if !grant.scopes.iter().any(|held| held == scope) => {
                Err(Refusal::InsufficientScope(scope.to_owned()))
            }
            _ => Ok(grant.clone()),
        }
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AuthState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A fresh opaque value with `prefix` (unguessable enough for tests).
    fn mint(&self, prefix: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}-{n}-{:016x}", rand::random::<u64>())
    }
}

async fn metadata(State(state): State<Arc<AuthState>>) -> Json<serde_json::Value> {
    state.lock().counts.metadata += 1;
    let issuer = &state.issuer;
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "revocation_endpoint": format!("{issuer}/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
    }))
}

#[derive(Debug, Deserialize)]
struct Registration {
    #[serde(default)]
    redirect_uris: Vec<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

async fn register(
    State(state): State<Arc<AuthState>>,
    Json(registration): Json<Registration>,
) -> Response {
    let confidential = registration
        .token_endpoint_auth_method
        .as_deref()
        .is_some_and(|method| method != "none");
    let client_id = state.mint("client");
    let secret = confidential.then(|| state.mint("secret"));
    let mut inner = state.lock();
    inner.counts.registrations += 1;
    inner.clients.insert(
        client_id.clone(),
        Client {
            secret: secret.clone(),
            redirect_uris: registration.redirect_uris.clone(),
        },
    );
    let mut body = json!({
        "client_id": client_id,
        "redirect_uris": registration.redirect_uris,
        "token_endpoint_auth_method": registration.token_endpoint_auth_method.unwrap_or_else(|| "none".into()),
    });
    if let Some(secret) = secret {
        body["client_secret"] = json!(secret);
    }
    (StatusCode::CREATED, Json(body)).into_response()
}

#[derive(Debug, Deserialize)]
struct AuthorizeQuery {
    response_type: String,
    client_id: String,
    redirect_uri: String,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    state: Option<String>,
    scope: Option<String>,
    resource: Option<String>,
}

/// Approves at once: redirects to the client with a code (and `iss`,
/// RFC 9207), or with an error when the request is wrong.
async fn authorize(
    State(state): State<Arc<AuthState>>,
    Query(query): Query<AuthorizeQuery>,
) -> Response {
    let mut inner = state.lock();
    inner.counts.authorizations += 1;
    let Some(client) = inner.clients.get(&query.client_id).cloned() else {
        return (StatusCode::BAD_REQUEST, "unknown client_id").into_response();
    };
    if !client.redirect_uris.contains(&query.redirect_uri) {
        return (StatusCode::BAD_REQUEST, "redirect_uri not registered").into_response();
    }
    let separator = if query.redirect_uri.contains('?') {
        '&'
    } else {
        '?'
    };
    let state_param = query
        .state
        .as_deref()
        .map(|value| format!("&state={}", encode(value)))
        .unwrap_or_default();
    let issuer = encode(&state.issuer);
    let redirect = |error: &str| {
        Redirect::to(&format!(
            "{}{separator}error={error}{state_param}&iss={issuer}",
            query.redirect_uri
        ))
        .into_response()
    };
    if query.response_type != "code" {
        return redirect("unsupported_response_type");
    }
    // PKCE S256 is required (OAuth 2.1).
    let (Some(challenge), Some("S256")) =
        (query.code_challenge, query.code_challenge_method.as_deref())
    else {
        return redirect("invalid_request");
    };
    let code = state.mint("code");
    inner.codes.insert(
        code.clone(),
        Code {
            client_id: query.client_id,
            redirect_uri: query.redirect_uri.clone(),
            challenge,
            scopes: scopes(query.scope.as_deref()),
            resource: query.resource,
        },
    );
    Redirect::to(&format!(
        "{}{separator}code={}{state_param}&iss={issuer}",
        query.redirect_uri,
        encode(&code)
    ))
    .into_response()
}

#[derive(Debug, Deserialize)]
struct TokenForm {
    grant_type: String,
    code: Option<String>,
    redirect_uri: Option<String>,
    code_verifier: Option<String>,
    refresh_token: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    scope: Option<String>,
    resource: Option<String>,
}

async fn token(
    State(state): State<Arc<AuthState>>,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    let mut inner = state.lock();
    inner.counts.token_requests += 1;
    if !inner.token_faults.is_empty() {
        let (status, retry_after) = inner.token_faults.remove(0);
        let mut response =
            (status, Json(json!({"error": "temporarily_unavailable"}))).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, seconds.into());
        }
        return response;
    }
    let Some(client_id) = authenticate(&inner, &headers, &form) else {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    };
    let grant = match form.grant_type.as_str() {
        "authorization_code" => {
            let Some(code) = form
                .code
                .as_deref()
                .and_then(|code| inner.codes.remove(code))
            else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let verified = form
                .code_verifier
                .as_deref()
                .is_some_and(|verifier| s256(verifier) == code.challenge);
            if code.client_id != client_id
                || form.redirect_uri.as_deref() != Some(code.redirect_uri.as_str())
                || !verified
            {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            Grant {
                client_id,
                scopes: code.scopes,
                resource: form.resource.or(code.resource),
            }
        }
        "refresh_token" => {
            inner.counts.refreshes += 1;
            // Rotation: a refresh token works once.
            let Some(grant) = form
                .refresh_token
                .as_deref()
                .and_then(|token| inner.refresh.remove(token))
            else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            if grant.client_id != client_id {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            grant
        }
        "client_credentials" => {
            let confidential = inner
                .clients
                .get(&client_id)
                .is_some_and(|client| client.secret.is_some());
            if !confidential {
                return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
            }
            Grant {
                client_id,
                scopes: scopes(form.scope.as_deref()),
                resource: form.resource,
            }
        }
        _ => return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    };
    let access_token = state.mint("access");
    let ttl = inner.access_ttl;
    inner
        .access
        .insert(access_token.clone(), (grant.clone(), Instant::now() + ttl));
    let mut body = json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": ttl.as_secs(),
        "scope": grant.scopes.join(" "),
    });
    if form.grant_type != "client_credentials" {
        let refresh_token = state.mint("refresh");
        inner.refresh.insert(refresh_token.clone(), grant);
        body["refresh_token"] = json!(refresh_token);
    }
    (
        StatusCode::OK,
        [(header::CACHE_CONTROL, "no-store")],
        Json(body),
    )
        .into_response()
}

#[derive(Debug, Deserialize)]
struct RevokeForm {
    token: String,
}

async fn revoke(State(state): State<Arc<AuthState>>, Form(form): Form<RevokeForm>) -> StatusCode {
    let mut inner = state.lock();
    inner.counts.revocations += 1;
    inner.access.remove(&form.token);
    inner.refresh.remove(&form.token);
    StatusCode::OK
}

/// The client a token request is from: its `client_id` (a public client),
/// or its secret in the form (`client_secret_post`) or in Basic
/// authentication (`client_secret_basic`), checked.
fn authenticate(inner: &Inner, headers: &HeaderMap, form: &TokenForm) -> Option<String> {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Basic "))
        .and_then(|encoded| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
        })
        .and_then(|decoded| String::from_utf8(decoded).ok());
    let (client_id, secret) = match &basic {
        Some(pair) => {
            let (id, secret) = pair.split_once(':')?;
            (id.to_owned(), Some(secret.to_owned()))
        }
        None => (form.client_id.clone()?, form.client_secret.clone()),
    };
    let client = inner.clients.get(&client_id)?;
    match (&client.secret, secret) {
        (None, _) => Some(client_id),
        (Some(expected), Some(given)) if *expected == given => Some(client_id),
        _ => None,
    }
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({ "error": error }))).into_response()
}

fn scopes(scope: Option<&str>) -> Vec<String> {
    scope
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// PKCE S256: base64url(sha256(verifier)), unpadded.
pub fn s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
