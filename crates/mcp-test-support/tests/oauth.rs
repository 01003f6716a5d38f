//! The test OAuth authorization server over real loopback HTTP, driven the
//! way an OAuth client drives it: metadata, registration, authorization
//! with PKCE, tokens, refresh rotation, client credentials, revocation, and
//! the failures a test provokes.

use std::time::Duration;

use mcp_test_support::oauth::{AuthServer, Refusal, s256};
use reqwest::{Client, StatusCode, header, redirect::Policy};
use serde_json::{Value, json};

const REDIRECT: &str = "http://127.0.0.1:9/callback";

fn http() -> Client {
    Client::builder()
        .no_proxy()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// The query parameter `name` of the `Location` of a redirect.
fn location_param(response: &reqwest::Response, name: &str) -> Option<String> {
    let location = response.headers()[header::LOCATION].to_str().unwrap();
    let url = url::Url::parse(location).unwrap();
    url.query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

async fn get_json(client: &Client, url: &str) -> Value {
    client.get(url).send().await.unwrap().json().await.unwrap()
}

/// A `client_credentials` token request as the confidential client
/// `machine` (secret `s3cret`, Basic authentication).
async fn machine_token_request(client: &Client, token_url: &str, scope: &str) -> reqwest::Response {
    client
        .post(token_url)
        .basic_auth("machine", Some("s3cret"))
        .form(&[("grant_type", "client_credentials"), ("scope", scope)])
        .send()
        .await
        .unwrap()
}

async fn post_form(client: &Client, url: &str, form: &[(&str, &str)]) -> (StatusCode, Value) {
    let response = client.post(url).form(form).send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Registers a public client (DCR), authorizes with PKCE and trades the
/// code: the access and refresh tokens.
async fn log_in(server: &AuthServer, client: &Client, scope: &str) -> (String, String, String) {
    let issuer = server.issuer();
    let registered: Value = client
        .post(format!("{issuer}/register"))
        .json(&json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = registered["client_id"].as_str().unwrap().to_owned();
    let verifier = "a-verifier-of-at-least-43-characters-0123456789";
    let authorized = client
        .get(format!("{issuer}/authorize"))
        .query(&[
            ("response_type", "code"),
            ("client_id", &client_id),
            ("redirect_uri", REDIRECT),
            ("code_challenge", &s256(verifier)),
            ("code_challenge_method", "S256"),
            ("state", "st"),
            ("scope", scope),
            ("resource", "http://127.0.0.1:1/mcp"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(authorized.status(), StatusCode::SEE_OTHER);
    assert_eq!(location_param(&authorized, "state").as_deref(), Some("st"));
    assert_eq!(location_param(&authorized, "iss").as_deref(), Some(issuer));
    let code = location_param(&authorized, "code").expect("a code");
    let token_url = format!("{issuer}/token");
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", verifier),
        ("client_id", client_id.as_str()),
    ];
    let exchange = || post_form(client, &token_url, &form);
    let (status, tokens) = exchange().await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    // A code works once.
    let (again, _) = exchange().await;
    assert_eq!(again, StatusCode::BAD_REQUEST);
    (
        client_id,
        tokens["access_token"].as_str().unwrap().to_owned(),
        tokens["refresh_token"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn authorization_code_with_pkce_then_refresh_with_rotation() {
    let server = AuthServer::start().await.unwrap();
    let client = http();
    let metadata = get_json(
        &client,
        &format!("{}/.well-known/oauth-authorization-server", server.issuer()),
    )
    .await;
    assert_eq!(metadata["issuer"], server.issuer());
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        json!(["S256"])
    );

    let (client_id, access, refresh) = log_in(&server, &client, "read write").await;
    let grant = server.check(&access, Some("write")).unwrap();
    assert_eq!(grant.client_id, client_id);
    assert_eq!(grant.resource.as_deref(), Some("http://127.0.0.1:1/mcp"));
    assert_eq!(
        server.check(&access, Some("admin")),
        Err(Refusal::InsufficientScope("admin".into()))
    );
    assert_eq!(server.check("made-up", None), Err(Refusal::Invalid));

    // Expired: refused; a refresh gives a new pair, and the old refresh
    // token is spent.
    server.expire_access_tokens();
    assert_eq!(server.check(&access, None), Err(Refusal::Invalid));
    let token_url = format!("{}/token", server.issuer());
    let refresh_with = |token: String| {
        let client = client.clone();
        let token_url = token_url.clone();
        let client_id = client_id.clone();
        async move {
            post_form(
                &client,
                &token_url,
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", &token),
                    ("client_id", &client_id),
                ],
            )
            .await
        }
    };
    let (status, renewed) = refresh_with(refresh.clone()).await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    let new_access = renewed["access_token"].as_str().unwrap();
    assert!(server.check(new_access, Some("read")).is_ok());
    assert_ne!(renewed["refresh_token"].as_str().unwrap(), refresh);
    let (reused, error) = refresh_with(refresh).await;
    assert_eq!(reused, StatusCode::BAD_REQUEST);
    assert_eq!(error["error"], "invalid_grant");

    // Revoked: the access token stops working, the refresh token too.
    server.revoke_all();
    assert_eq!(server.check(new_access, None), Err(Refusal::Invalid));
    let (revoked, error) =
        refresh_with(renewed["refresh_token"].as_str().unwrap().to_owned()).await;
    assert_eq!(revoked, StatusCode::BAD_REQUEST);
    assert_eq!(error["error"], "invalid_grant");
    let counts = server.counts();
    assert_eq!(counts.registrations, 1);
    assert_eq!(counts.refreshes, 3);
}

#[tokio::test]
async fn a_wrong_verifier_or_redirect_gets_invalid_grant() {
    let server = AuthServer::start().await.unwrap();
    server.register_client("pre", None, &[REDIRECT]);
    let client = http();
    let authorize = |challenge: String| {
        client
            .get(format!("{}/authorize", server.issuer()))
            .query(&[
                ("response_type", "code"),
                ("client_id", "pre"),
                ("redirect_uri", REDIRECT),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
            ])
            .send()
    };
    for (verifier, redirect) in [("wrong", REDIRECT), ("right", "http://127.0.0.1:9/other")] {
        let authorized = authorize(s256("right")).await.unwrap();
        let code = location_param(&authorized, "code").unwrap();
        let (status, error) = post_form(
            &client,
            &format!("{}/token", server.issuer()),
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", redirect),
                ("code_verifier", verifier),
                ("client_id", "pre"),
            ],
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(error["error"], "invalid_grant");
    }
    // Without PKCE the redirect carries an error, not a code.
    let plain = client
        .get(format!("{}/authorize", server.issuer()))
        .query(&[
            ("response_type", "code"),
            ("client_id", "pre"),
            ("redirect_uri", REDIRECT),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        location_param(&plain, "error").as_deref(),
        Some("invalid_request")
    );
    assert_eq!(location_param(&plain, "code"), None);
}

#[tokio::test]
async fn client_credentials_and_injected_token_endpoint_failures() {
    let server = AuthServer::start().await.unwrap();
    server.register_client("machine", Some("s3cret"), &[]);
    server.set_access_ttl(Duration::from_secs(60));
    let client = http();
    let token_url = format!("{}/token", server.issuer());

    server.fail_token_requests(503, Some(7), 1);
    let failed = machine_token_request(&client, &token_url, "jobs").await;
    assert_eq!(failed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(failed.headers()[header::RETRY_AFTER], "7");

    let issued: Value = machine_token_request(&client, &token_url, "jobs")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(issued["expires_in"], 60);
    assert!(issued.get("refresh_token").is_none(), "{issued}");
    let access = issued["access_token"].as_str().unwrap();
    assert!(server.check(access, Some("jobs")).is_ok());

    let (wrong, error) = post_form(
        &client,
        &token_url,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", "machine"),
            ("client_secret", "nope"),
        ],
    )
    .await;
    assert_eq!(wrong, StatusCode::UNAUTHORIZED);
    assert_eq!(error["error"], "invalid_client");
    assert_eq!(server.counts().token_requests, 3);
}

/// A test server protected by the authorization server: 401 with a link to
/// its resource metadata without a valid token, the metadata naming the
/// authorization server, 403 `insufficient_scope` for a tool whose scope
/// the token lacks, and the MCP answer with one that has it.
#[tokio::test]
async fn a_protected_server_takes_the_authorization_servers_tokens() {
    use std::sync::Arc;

    use mcp_test_support::{
        TestServer, TestServerOptions,
        http::{OAuthProtection, RESOURCE_METADATA_PATH},
    };

    let auth = Arc::new(AuthServer::start().await.unwrap());
    auth.register_client("machine", Some("s3cret"), &[]);
    let upstream = TestServer::start(TestServerOptions {
        oauth: Some(OAuthProtection {
            server: auth.clone(),
            tool_scopes: vec![("delete_item".into(), "admin".into())],
        }),
        ..TestServerOptions::default()
    })
    .await
    .unwrap();
    let client = http();
    let mcp = |token: Option<&str>, body: Value| {
        let mut request = client
            .post(upstream.url())
            .header(header::ACCEPT, "application/json, text/event-stream")
            .json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});

    let refused = mcp(None, initialize.clone()).await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let challenge = refused.headers()[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap();
    let base = upstream.url().trim_end_matches("/mcp").to_owned();
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{base}{RESOURCE_METADATA_PATH}\"")
    );
    let metadata = get_json(&client, &format!("{base}{RESOURCE_METADATA_PATH}")).await;
    assert_eq!(metadata["resource"], upstream.url());
    assert_eq!(metadata["authorization_servers"], json!([auth.issuer()]));

    let token_for = |scope: &'static str| {
        let client = client.clone();
        let token_url = format!("{}/token", auth.issuer());
        async move {
            let issued: Value = machine_token_request(&client, &token_url, scope)
                .await
                .json()
                .await
                .unwrap();
            issued["access_token"].as_str().unwrap().to_owned()
        }
    };
    let reader = token_for("read").await;
    let answered = mcp(Some(&reader), initialize.clone()).await.unwrap();
    assert_eq!(answered.status(), StatusCode::OK);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "delete_item", "arguments": {"id": "x"}}});
    let forbidden = mcp(Some(&reader), call).await.unwrap();
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
    let challenge = forbidden.headers()[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap();
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\", scope=\"admin\""),
        "{challenge}"
    );
    assert_eq!(
        upstream.tool_calls("delete_item"),
        1,
        "counted, refused before running"
    );
    assert_eq!(upstream.completed_calls("delete_item"), 0);
    let admin = token_for("read admin").await;
    assert_eq!(
        mcp(Some(&admin), initialize).await.unwrap().status(),
        StatusCode::OK
    );
}
