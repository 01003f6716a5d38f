//! The test IdP (`oidc-provider` behind `tests/interop/idp.mjs`), driven
//! over real loopback HTTP: the tokens it issues by client credentials, the
//! authorization code flow and token exchange, its metadata and JWKS, key
//! rotation, introspection and dynamic client registration.

use mcp_test_support::idp::{Idp, IdpClient, IdpOptions, IdpUser, decode_jwt};
use mcp_test_support::oauth::s256;
use reqwest::Client;
use serde_json::{Value, json};

const RESOURCE: &str = "http://127.0.0.1:9/mcp";
const OTHER_RESOURCE: &str = "http://127.0.0.1:9/other";
const OPAQUE_RESOURCE: &str = "http://127.0.0.1:9/opaque";
const REDIRECT: &str = "http://127.0.0.1:9/callback";
const VERIFIER: &str = "a-pkce-code-verifier-of-at-least-43-characters";

fn service() -> IdpClient {
    IdpClient::new("svc", "svc-secret").groups(&["ops", "admins"])
}

fn web() -> IdpClient {
    IdpClient::new("web", "web-secret").redirect_uri(REDIRECT)
}

async fn start() -> Idp {
    Idp::start_with(IdpOptions {
        clients: vec![service(), web()],
        users: vec![IdpUser::new("alice", &["devs"])],
        opaque_resources: vec![OPAQUE_RESOURCE.to_owned()],
    })
    .await
    .expect("the IdP starts")
}

async fn get_json(url: &str) -> Value {
    let response = Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "GET {url}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

fn kids(jwks: &Value) -> Vec<String> {
    jwks["keys"]
        .as_array()
        .expect("a JWKS has keys")
        .iter()
        .map(|key| key["kid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn client_credentials_give_an_rs256_jwt_for_the_resource_with_the_clients_groups() {
    let idp = start().await;
    let token = idp
        .client_credentials("svc", "svc-secret", RESOURCE, "tools:read tools:call")
        .await;
    let (header, payload) = decode_jwt(&token);
    assert_eq!(header["alg"], "RS256");
    assert_eq!(header["typ"], "at+jwt");
    assert!(header["kid"].as_str().is_some_and(|kid| !kid.is_empty()));
    assert_eq!(payload["iss"], idp.issuer().as_str());
    assert_eq!(payload["aud"], RESOURCE);
    assert_eq!(payload["sub"], "svc");
    assert_eq!(payload["client_id"], "svc");
    assert_eq!(payload["scope"], "tools:read tools:call");
    assert_eq!(payload["groups"], json!(["ops", "admins"]));
    assert!(payload["exp"].as_u64() > payload["iat"].as_u64());

    // Only the scopes asked for.
    let (_, payload) = decode_jwt(
        &idp.client_credentials("svc", "svc-secret", RESOURCE, "tools:read")
            .await,
    );
    assert_eq!(payload["scope"], "tools:read");

    let (status, body) = idp
        .token_request(&[
            ("grant_type", "client_credentials"),
            ("client_id", "svc"),
            ("client_secret", "wrong"),
            ("resource", RESOURCE),
        ])
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client"))
    );
}

#[tokio::test]
async fn metadata_and_jwks_publish_the_signing_key_and_rotation_adds_a_new_one_first() {
    let idp = start().await;
    let metadata = get_json(&idp.url("/.well-known/openid-configuration")).await;
    assert_eq!(metadata["issuer"], idp.issuer().as_str());
    assert_eq!(metadata["jwks_uri"], idp.jwks_uri().as_str());
    assert_eq!(metadata["token_endpoint"], idp.url("/token").as_str());
    assert_eq!(
        metadata["introspection_endpoint"],
        idp.url("/token/introspection").as_str()
    );
    assert_eq!(metadata["registration_endpoint"], idp.url("/reg").as_str());
    let grants = metadata["grant_types_supported"].as_array().unwrap();
    for grant in [
        "authorization_code",
        "client_credentials",
        mcp_test_support::idp::TOKEN_EXCHANGE,
    ] {
        assert!(grants.contains(&json!(grant)), "{grant} in {grants:?}");
    }
    // RFC 8414's location serves the same document.
    assert_eq!(
        get_json(&idp.url("/.well-known/oauth-authorization-server")).await,
        metadata
    );

    let old = idp
        .client_credentials("svc", "svc-secret", RESOURCE, "tools:read")
        .await;
    let old_kid = decode_jwt(&old).0["kid"].as_str().unwrap().to_owned();
    let jwks = get_json(&idp.jwks_uri()).await;
    assert_eq!(kids(&jwks), std::slice::from_ref(&old_kid));
    let key = &jwks["keys"][0];
    assert_eq!(
        (key["kty"].as_str(), key["alg"].as_str()),
        (Some("RSA"), Some("RS256"))
    );
    assert!(
        key.get("d").is_none(),
        "the JWKS leaks a private key: {key}"
    );

    let new_kid = idp.rotate_keys().await;
    assert_ne!(new_kid, old_kid);
    let new = idp
        .client_credentials("svc", "svc-secret", RESOURCE, "tools:read")
        .await;
    assert_eq!(decode_jwt(&new).0["kid"], new_kid.as_str());
    assert_eq!(kids(&get_json(&idp.jwks_uri()).await), [new_kid, old_kid]);
}

#[tokio::test]
async fn the_authorization_code_flow_runs_headless_and_gives_the_users_groups() {
    let idp = start().await;
    let token = idp
        .user_token(&web(), "alice", RESOURCE, "openid tools:call")
        .await;
    let (header, payload) = decode_jwt(&token);
    assert_eq!(header["alg"], "RS256");
    assert_eq!(payload["iss"], idp.issuer().as_str());
    assert_eq!(payload["aud"], RESOURCE);
    assert_eq!(payload["sub"], "alice");
    assert_eq!(payload["client_id"], "web");
    assert_eq!(payload["scope"], "tools:call");
    assert_eq!(payload["groups"], json!(["devs"]));

    // Without a login_hint, the default user logs in; an unknown one has no groups.
    idp.set_default_user("bob").await;
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("client_id", "web"),
            ("response_type", "code"),
            ("redirect_uri", REDIRECT),
            ("scope", "tools:read"),
            ("resource", RESOURCE),
            ("code_challenge", &s256(VERIFIER)),
            ("code_challenge_method", "S256"),
            ("state", "s1"),
        ])
        .finish();
    let back = idp.authorize(&idp.url(&format!("/auth?{query}"))).await;
    let back = url::Url::parse(&back).unwrap();
    assert_eq!(back.as_str().split('?').next(), Some(REDIRECT));
    let param = |name: &str| {
        back.query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    assert_eq!(param("state").as_deref(), Some("s1"));
    assert_eq!(param("iss"), Some(idp.issuer()));
    let code = param("code").expect("a code");
    let (status, body) = idp
        .token_request(&[
            ("grant_type", "authorization_code"),
            ("client_id", "web"),
            ("client_secret", "web-secret"),
            ("code", &code),
            ("code_verifier", VERIFIER),
            ("redirect_uri", REDIRECT),
        ])
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, payload) = decode_jwt(body["access_token"].as_str().unwrap());
    assert_eq!(payload["sub"], "bob");
    assert_eq!(payload["groups"], json!([]));
}

#[tokio::test]
async fn token_exchange_keeps_the_subject_and_names_the_exchanging_client_as_actor() {
    let idp = start().await;
    let subject = idp
        .user_token(&web(), "alice", RESOURCE, "tools:read tools:call")
        .await;
    let exchanged = idp
        .token_exchange("svc", "svc-secret", &subject, OTHER_RESOURCE)
        .await;
    let (header, payload) = decode_jwt(&exchanged);
    assert_eq!(header["alg"], "RS256");
    assert_eq!(payload["iss"], idp.issuer().as_str());
    assert_eq!(payload["aud"], OTHER_RESOURCE);
    assert_eq!(payload["sub"], "alice");
    assert_eq!(payload["client_id"], "svc");
    assert_eq!(payload["act"], json!({"sub": "svc"}));
    assert_eq!(payload["groups"], json!(["devs"]));
    assert_eq!(payload["scope"], "tools:read tools:call");

    // A second exchange nests the first actor; a rotated key still verifies.
    idp.rotate_keys().await;
    let again = idp
        .token_exchange("web", "web-secret", &exchanged, RESOURCE)
        .await;
    let (_, payload) = decode_jwt(&again);
    assert_eq!(payload["act"], json!({"sub": "web", "act": {"sub": "svc"}}));

    let mut forged = subject.clone();
    forged.push('x');
    let (status, body) = idp
        .token_request(&[
            ("grant_type", mcp_test_support::idp::TOKEN_EXCHANGE),
            ("client_id", "svc"),
            ("client_secret", "svc-secret"),
            ("subject_token", &forged),
            (
                "subject_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("resource", OTHER_RESOURCE),
        ])
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
}

#[tokio::test]
async fn opaque_tokens_introspect_with_audience_and_groups() {
    let idp = start().await;
    let token = idp
        .client_credentials("svc", "svc-secret", OPAQUE_RESOURCE, "tools:read")
        .await;
    assert!(!token.contains('.'), "an opaque token, not a JWT: {token}");
    let answer = idp.introspect("web", "web-secret", &token).await;
    assert_eq!(answer["active"], true);
    assert_eq!(answer["aud"], OPAQUE_RESOURCE);
    assert_eq!(answer["client_id"], "svc");
    assert_eq!(answer["scope"], "tools:read");
    assert_eq!(answer["groups"], json!(["ops", "admins"]));
    assert_eq!(
        idp.introspect("web", "web-secret", "not-a-token").await["active"],
        false
    );
}

#[tokio::test]
async fn dynamically_registered_clients_get_tokens() {
    let idp = start().await;
    let response = Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(idp.url("/reg"))
        .json(&json!({
            "grant_types": ["client_credentials"],
            "response_types": [],
            "redirect_uris": [],
            "token_endpoint_auth_method": "client_secret_post",
            "groups": ["registered"],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let registered: Value = response.json().await.unwrap();
    let id = registered["client_id"].as_str().unwrap();
    let secret = registered["client_secret"].as_str().unwrap();
    let (_, payload) = decode_jwt(&idp.client_credentials(id, secret, RESOURCE, "").await);
    assert_eq!(payload["sub"], id);
    assert_eq!(payload["aud"], RESOURCE);
    assert_eq!(payload["groups"], json!(["registered"]));
}
