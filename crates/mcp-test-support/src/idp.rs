//! A real OpenID provider on loopback, for the tests of the gateway as an
//! OAuth resource server: npm `oidc-provider` (panva), run by
//! `tests/interop/idp.mjs` as a child process (killed on drop), so that the
//! gateway is tested against tokens, metadata and key sets a production
//! identity provider makes, not against our own idea of them (for that, and
//! for failures on demand, see [`crate::oauth`]).
//!
//! Its access tokens for an http(s) resource (RFC 8707 `resource`) are RS256
//! JWTs (`typ` `at+jwt`, with a `kid`) whose `aud` is the resource, with
//! scopes out of `tools:read tools:call` and a `groups` claim: the client's
//! ([`IdpClient::groups`]) for client credentials, the user's
//! ([`IdpUser`]) for the authorization code flow. It also serves
//! introspection (for the resources named opaque,
//! [`IdpOptions::opaque_resources`]), revocation, dynamic client
//! registration, token exchange (RFC 8693) and, for tests, a key rotation
//! ([`Idp::rotate_keys`]).
//!
//! The package is pinned in `scripts/node/package.json` and installed into
//! `.tools/node` by `./scripts/install-test-deps.sh`. Set `IDP_DEBUG=1` to
//! see the provider's own notices and server errors on stderr.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, bail};
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

/// The grant type of RFC 8693 token exchange.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// A static client of the IdP: confidential (`client_secret_post`), allowed
/// client credentials and token exchange, and, with redirect URIs, the
/// authorization code flow (PKCE) and refresh tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdpClient {
    pub client_id: String,
    pub client_secret: String,
    /// The `groups` claim of its client-credentials tokens.
    pub groups: Vec<String>,
    pub redirect_uris: Vec<String>,
    /// How it authenticates at the token and introspection endpoints
    /// (`client_secret_post` when `None`).
    pub auth_method: Option<String>,
}

impl IdpClient {
    /// A client with no groups and no redirect URI.
    pub fn new(client_id: &str, client_secret: &str) -> Self {
        IdpClient {
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
            groups: Vec::new(),
            redirect_uris: Vec::new(),
            auth_method: None,
        }
    }

    /// Sets the `groups` claim of its client-credentials tokens.
    pub fn groups(mut self, groups: &[&str]) -> Self {
        self.groups = groups.iter().map(|group| (*group).to_owned()).collect();
        self
    }

    /// Adds a redirect URI, which allows the authorization code flow.
    pub fn redirect_uri(mut self, uri: &str) -> Self {
        self.redirect_uris.push(uri.to_owned());
        self
    }

    /// Authenticating with `method` (`client_secret_basic`, …).
    pub fn auth_method(mut self, method: &str) -> Self {
        self.auth_method = Some(method.to_owned());
        self
    }

    fn to_json(&self) -> Value {
        let mut client = json!({
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "groups": self.groups,
            "redirect_uris": self.redirect_uris,
        });
        if let Some(method) = &self.auth_method {
            client["token_endpoint_auth_method"] = json!(method);
        }
        client
    }
}

/// An account that can log in, with the `groups` claim of its tokens. Any
/// other account id logs in too, with no groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdpUser {
    pub id: String,
    pub groups: Vec<String>,
}

impl IdpUser {
    pub fn new(id: &str, groups: &[&str]) -> Self {
        IdpUser {
            id: id.to_owned(),
            groups: groups.iter().map(|group| (*group).to_owned()).collect(),
        }
    }
}

/// What an [`Idp`] starts with.
#[derive(Debug, Clone, Default)]
pub struct IdpOptions {
    pub clients: Vec<IdpClient>,
    /// The first is who logs in when an authorization request has no
    /// `login_hint` (until [`Idp::set_default_user`]); with none, `user`.
    pub users: Vec<IdpUser>,
    /// Resources whose access tokens are opaque, for introspection, instead
    /// of JWTs.
    pub opaque_resources: Vec<String>,
}

/// A running `oidc-provider`, issuer `http://127.0.0.1:<port>`.
#[derive(Debug)]
pub struct Idp {
    port: u16,
    /// No redirects followed: [`Idp::authorize`] follows them itself.
    http: reqwest::Client,
    /// Killed when the `Idp` is dropped (`kill_on_drop`).
    _child: Child,
}

impl Idp {
    /// Starts one with these static clients and no users.
    pub async fn start(clients: &[IdpClient]) -> anyhow::Result<Self> {
        Self::start_with(IdpOptions {
            clients: clients.to_vec(),
            ..IdpOptions::default()
        })
        .await
    }

    /// Starts one on a free port and waits until it listens.
    ///
    /// Panics, naming `./scripts/install-test-deps.sh`, when `oidc-provider`
    /// is not installed.
    pub async fn start_with(options: IdpOptions) -> anyhow::Result<Self> {
        let root = workspace_root();
        let package = root.join(".tools/node/node_modules/oidc-provider/package.json");
        assert!(
            package.is_file(),
            "{} is missing: run ./scripts/install-test-deps.sh (make test does) to install \
             the pinned test dependencies (see docs/TESTING.md)",
            package.display()
        );
        let config = json!({
            "clients": options.clients.iter().map(IdpClient::to_json).collect::<Vec<_>>(),
            "users": options
                .users
                .iter()
                .map(|user| json!({"id": user.id, "groups": user.groups}))
                .collect::<Vec<_>>(),
            "opaque_resources": options.opaque_resources,
        });
        let script = root.join("tests/interop/idp.mjs");
        let mut child = Command::new(node(&root))
            .arg(&script)
            .args(["--port", "0"])
            .env("IDP_CONFIG", config.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot run node {}", script.display()))?;
        let stdout = child.stdout.take().context("the IdP's stdout is piped")?;
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(port) = line.strip_prefix("LISTENING ") {
                    return port
                        .trim()
                        .parse::<u16>()
                        .with_context(|| format!("the IdP printed a bad port: {line}"));
                }
            }
            bail!("the IdP exited before it listened (its stderr is above)")
        })
        .await
        .context("the IdP did not print `LISTENING <port>` within 30 s")??;
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .context("building the IdP's HTTP client")?;
        Ok(Idp {
            port,
            http,
            _child: child,
        })
    }

    /// `http://127.0.0.1:<port>`, the `iss` of its tokens.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `path` (starting with `/`) on the IdP.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.issuer())
    }

    /// Where its signing keys are published.
    pub fn jwks_uri(&self) -> String {
        self.url("/jwks")
    }

    /// A POST of `form` to the token endpoint: its status and JSON body,
    /// for tests of refusals.
    pub async fn token_request(&self, form: &[(&str, &str)]) -> (u16, Value) {
        self.post_form("/token", form).await
    }

    /// An access token by client credentials for `resource` (empty: none,
    /// an opaque token), with `scope` (empty: none). Panics if refused.
    pub async fn client_credentials(
        &self,
        client_id: &str,
        secret: &str,
        resource: &str,
        scope: &str,
    ) -> String {
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", client_id),
            ("client_secret", secret),
        ];
        if !resource.is_empty() {
            form.push(("resource", resource));
        }
        if !scope.is_empty() {
            form.push(("scope", scope));
        }
        self.access_token(&form).await
    }

    /// Exchanges `subject_token` (an access token of this IdP) for one for
    /// `resource` (RFC 8693): same `sub`, `groups` and scopes, `act` naming
    /// `client_id`. Panics if refused.
    pub async fn token_exchange(
        &self,
        client_id: &str,
        secret: &str,
        subject_token: &str,
        resource: &str,
    ) -> String {
        self.access_token(&[
            ("grant_type", TOKEN_EXCHANGE),
            ("client_id", client_id),
            ("client_secret", secret),
            ("subject_token", subject_token),
            (
                "subject_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("resource", resource),
        ])
        .await
    }

    /// The introspection response (RFC 7662) for an opaque `token`, asked by
    /// the confidential client `client_id`.
    pub async fn introspect(&self, client_id: &str, secret: &str, token: &str) -> Value {
        let (status, body) = self
            .post_form(
                "/token/introspection",
                &[
                    ("client_id", client_id),
                    ("client_secret", secret),
                    ("token", token),
                ],
            )
            .await;
        assert_eq!(status, 200, "the IdP refused introspection: {body}");
        body
    }

    /// Signs from now on with a new RSA key; the JWKS serves it first and
    /// keeps the old ones. Returns the new key's `kid`.
    pub async fn rotate_keys(&self) -> String {
        let (status, body) = self.post_form("/test/rotate", &[]).await;
        assert_eq!(status, 200, "the IdP did not rotate its keys: {body}");
        body["kid"]
            .as_str()
            .unwrap_or_else(|| panic!("the IdP's rotation answer has no kid: {body}"))
            .to_owned()
    }

    /// How many requests the IdP served at `path` so far (its JWKS, its
    /// metadata: what a resource server fetched).
    pub async fn requests(&self, path: &str) -> u64 {
        let counts: Value = reqwest::get(self.url("/test/requests"))
            .await
            .and_then(reqwest::Response::error_for_status)
            .unwrap_or_else(|error| panic!("the IdP's request counts: {error}"))
            .json()
            .await
            .unwrap_or_else(|error| panic!("the IdP's request counts: {error}"));
        counts[path].as_u64().unwrap_or(0)
    }

    /// Who logs in from now on when an authorization request has no
    /// `login_hint`.
    pub async fn set_default_user(&self, id: &str) {
        let (status, body) = self
            .post_form(
                &format!("/test/user?{}", form_urlencoded(&[("id", id)])),
                &[],
            )
            .await;
        assert_eq!(status, 200, "the IdP did not set its default user: {body}");
    }

    /// Follows an authorization request (`authorize_url`, on the IdP) the
    /// way a browser would, with the cookies the IdP sets, through the login
    /// (which logs in `login_hint`, or the default user, at once; consent is
    /// implied) and returns where the IdP sends the user agent back: the
    /// client's redirect URI with `code`, `state` and `iss` (or `error`).
    pub async fn authorize(&self, authorize_url: &str) -> String {
        let issuer = self.issuer();
        let mut url = authorize_url.to_owned();
        let mut cookies: Vec<(String, String)> = Vec::new();
        for _ in 0..10 {
            let cookie = cookies
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join("; ");
            let response = self
                .http
                .get(&url)
                .header(reqwest::header::COOKIE, cookie)
                .send()
                .await
                .unwrap_or_else(|error| panic!("GET {url} failed: {error}"));
            for set in response.headers().get_all(reqwest::header::SET_COOKIE) {
                let set = set.to_str().unwrap_or_default();
                let pair = set.split(';').next().unwrap_or_default();
                if let Some((name, value)) = pair.split_once('=') {
                    cookies.retain(|(known, _)| known != name);
                    if !value.is_empty() {
                        cookies.push((name.to_owned(), value.to_owned()));
                    }
                }
            }
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|location| location.to_str().ok())
                .map(str::to_owned);
            let Some(location) = location.filter(|_| status.is_redirection()) else {
                let body = response.text().await.unwrap_or_default();
                panic!("the IdP answered GET {url} with {status}, not a redirect: {body}");
            };
            url = if location.starts_with('/') {
                format!("{issuer}{location}")
            } else {
                location
            };
            if !url.starts_with(&format!("{issuer}/")) {
                return url;
            }
        }
        panic!("the authorization request {authorize_url} did not leave the IdP in 10 redirects");
    }

    /// A user's access token for `resource` with `scope`, by the
    /// authorization code flow with PKCE (S256) as `client` (its first
    /// redirect URI) with `login_hint` `user`. Panics if refused.
    pub async fn user_token(
        &self,
        client: &IdpClient,
        user: &str,
        resource: &str,
        scope: &str,
    ) -> String {
        let redirect_uri = client
            .redirect_uris
            .first()
            .unwrap_or_else(|| panic!("client {} has no redirect URI", client.client_id));
        let verifier = base64url(&rand::random::<[u8; 32]>());
        let challenge = crate::oauth::s256(&verifier);
        let query = form_urlencoded(&[
            ("client_id", &client.client_id),
            ("response_type", "code"),
            ("redirect_uri", redirect_uri),
            ("scope", scope),
            ("resource", resource),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("login_hint", user),
        ]);
        let back = self.authorize(&self.url(&format!("/auth?{query}"))).await;
        let back = url::Url::parse(&back)
            .unwrap_or_else(|error| panic!("the IdP redirected to a bad URL {back}: {error}"));
        let code = back
            .query_pairs()
            .find(|(name, _)| name == "code")
            .map(|(_, code)| code.into_owned())
            .unwrap_or_else(|| panic!("the IdP redirected without a code: {back}"));
        self.access_token(&[
            ("grant_type", "authorization_code"),
            ("client_id", &client.client_id),
            ("client_secret", &client.client_secret),
            ("code", &code),
            ("code_verifier", &verifier),
            ("redirect_uri", redirect_uri),
        ])
        .await
    }

    /// The `access_token` of a token request that must succeed.
    async fn access_token(&self, form: &[(&str, &str)]) -> String {
        let (status, body) = self.token_request(form).await;
        assert_eq!(status, 200, "the IdP refused the token request: {body}");
        body["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("the IdP's token response has no access_token: {body}"))
            .to_owned()
    }

    async fn post_form(&self, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
        let url = self.url(path);
        let response = self
            .http
            .post(&url)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(form_urlencoded(form))
            .send()
            .await
            .unwrap_or_else(|error| panic!("POST {url} failed: {error}"));
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("POST {url} answered {status} with no JSON: {text}"));
        (status, body)
    }
}

/// The header and payload of a JWT, decoded but not verified.
pub fn decode_jwt(token: &str) -> (Value, Value) {
    let mut parts = token.split('.');
    let mut part = |name: &str| -> Value {
        let text = parts
            .next()
            .unwrap_or_else(|| panic!("{token} is not a JWT: no {name}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .unwrap_or_else(|error| panic!("the JWT's {name} is not base64url: {error}"));
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|error| panic!("the JWT's {name} is not JSON: {error}"))
    };
    (part("header"), part("payload"))
}

fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn form_urlencoded(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// The workspace root (where `tests/` and `.tools/` are).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The Node 22 installed with the test dependencies (Linux x64), else the
/// `node` on PATH (oidc-provider 9 supports Node 22 and later LTS releases).
fn node(root: &Path) -> PathBuf {
    let node22 = root.join(".tools/node/node_modules/.bin/node");
    if node22.exists() {
        node22
    } else {
        PathBuf::from("node")
    }
}
