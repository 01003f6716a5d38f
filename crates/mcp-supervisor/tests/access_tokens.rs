//! The gateway as an OAuth 2.1 resource server for a real, certified
//! OpenID provider (`oidc-provider`, `mcp_test_support::idp`), over real
//! loopback HTTP (docs/SECURITY.md, "Who is calling"): its
//! protected-resource metadata and challenge, JWT access tokens checked
//! against the issuer's keys, the caller's groups from the token deciding
//! what it may use, a key rotation mid-run, and the attacks a resource
//! server must refuse — another audience, another issuer, `alg: none`, an
//! HMAC signed with the public key, a flood of unknown `kid`s (the keys are
//! fetched at most once for it), a token without the required scope.

mod support;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use mcp_test_support::idp::{Idp, IdpClient, decode_jwt};
use rmcp::{model::CallToolRequestParams, service::ClientLifecycleMode};
use serde_json::{Value, json};
use support::*;

/// The gateway's resource identifier (its `public_url`): what tokens are
/// minted for, whatever address it listens on.
const RESOURCE: &str = "http://mcp.test/mcp";

fn reader() -> IdpClient {
    IdpClient::new("reader-app", "reader-secret").groups(&["readers"])
}

fn ops() -> IdpClient {
    IdpClient::new("ops-app", "ops-secret").groups(&["ops"])
}

async fn idp() -> Idp {
    Idp::start(&[reader(), ops()])
        .await
        .expect("the IdP starts")
}

async fn gateway(
    idp: &Idp,
    upstream: &mcp_test_support::TestServer,
    scopes: &str,
) -> ServedGateway {
    let toml = format!(
        r#"
[gateway]
public_url = "{RESOURCE}"
auth = {{ kind = "oauth", issuer = "{issuer}", scopes = [{scopes}] }}

[[access]]
who = ["group:readers"]
allow = ["up__echo"]

[[access]]
who = ["group:ops", "client:ops-app"]
allow = ["connection:up"]
"#,
        issuer = idp.issuer(),
    ) + &http_connection("up", &upstream.url(), "");
    ServedGateway::start(config(&toml)).await
}

async fn upstream() -> mcp_test_support::TestServer {
    mcp_test_support::TestServer::start(mcp_test_support::TestServerOptions::default())
        .await
        .unwrap()
}

/// The status and `WWW-Authenticate` of an `initialize` with `token`.
async fn initialize(gateway: &ServedGateway, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(&gateway.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (response.status().as_u16(), challenge)
}

async fn tool_names(gateway: &ServedGateway, token: &str) -> Vec<String> {
    let client = gateway
        .connect_as((), ClientLifecycleMode::Initialize, Some(token))
        .await;
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    names
}

fn encode(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap())
}

#[test]
fn a_token_of_the_issuer_names_the_caller_and_its_groups_decide() {
    run(|| async {
        let idp = idp().await;
        let upstream = upstream().await;
        let gateway = gateway(&idp, &upstream, "").await;
        let token = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:call")
            .await;
        assert_eq!(tool_names(&gateway, &token).await, ["up__echo"]);
        let client = gateway
            .connect_as((), ClientLifecycleMode::Initialize, Some(&token))
            .await;
        let mut call = CallToolRequestParams::new("up__add");
        call.arguments = json!({"a": 1, "b": 2}).as_object().cloned();
        let hidden = client.call_tool(call).await.unwrap_err().to_string();
        assert!(
            hidden.contains("-32602") && hidden.contains("up__add"),
            "{hidden}"
        );
        assert_eq!(upstream.tool_calls("add"), 0);
        let ops = idp
            .client_credentials("ops-app", "ops-secret", RESOURCE, "tools:call")
            .await;
        assert!(
            tool_names(&gateway, &ops)
                .await
                .contains(&"up__add".to_owned())
        );
        // The caller's token never reaches the upstream.
        let seen = upstream.control().seen_authorizations();
        assert!(
            seen.iter()
                .all(|value| !value.contains(&token) && !value.contains(&ops)),
            "{seen:?}"
        );
    });
}

#[test]
fn a_client_without_a_token_is_told_where_to_get_one() {
    run(|| async {
        let idp = idp().await;
        let upstream = upstream().await;
        let gateway = gateway(&idp, &upstream, "\"tools:call\"").await;
        let (status, challenge) = initialize(&gateway, None).await;
        assert_eq!(status, 401);
        assert!(
            challenge.contains(
                "resource_metadata=\"http://mcp.test/.well-known/oauth-protected-resource/mcp\""
            ) && challenge.contains("scope=\"tools:call\""),
            "{challenge}"
        );
        let origin = gateway.url.trim_end_matches("/mcp");
        for path in [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ] {
            let metadata: Value = reqwest::get(format!("{origin}{path}"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(metadata["resource"], RESOURCE, "{path}");
            assert_eq!(metadata["authorization_servers"], json!([idp.issuer()]));
            assert_eq!(metadata["scopes_supported"], json!(["tools:call"]));
        }
        // A good token without the scope: 403, so the client may step up.
        let unscoped = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:read")
            .await;
        let (status, challenge) = initialize(&gateway, Some(&unscoped)).await;
        assert_eq!(status, 403);
        assert!(
            challenge.contains("error=\"insufficient_scope\"")
                && challenge.contains("scope=\"tools:call\""),
            "{challenge}"
        );
    });
}

#[test]
fn tokens_a_resource_server_must_not_take_are_refused() {
    run(|| async {
        let idp = idp().await;
        let other = Idp::start(&[reader()]).await.unwrap();
        let upstream = upstream().await;
        let gateway = gateway(&idp, &upstream, "").await;
        let good = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:call")
            .await;
        assert_eq!(initialize(&gateway, Some(&good)).await.0, 200);
        let (header, payload) = decode_jwt(&good);
        let signature = good.rsplit('.').next().unwrap();
        let jwks: Value = reqwest::get(idp.jwks_uri())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let public_key = serde_json::to_vec(&jwks["keys"][0]).unwrap();
        let hs256 = {
            let mut forged = header.clone();
            forged["alg"] = json!("HS256");
            let signing_input = format!("{}.{}", encode(&forged), encode(&payload));
            let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&public_key).unwrap();
            mac.update(signing_input.as_bytes());
            format!(
                "{signing_input}.{}",
                URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
            )
        };
        let none = {
            let mut forged = header.clone();
            forged["alg"] = json!("none");
            format!("{}.{}.", encode(&forged), encode(&payload))
        };
        let tampered = {
            let mut forged = payload.clone();
            forged["groups"] = json!(["ops"]);
            format!("{}.{}.{signature}", encode(&header), encode(&forged))
        };
        let cases = [
            (
                "another audience",
                idp.client_credentials(
                    "reader-app",
                    "reader-secret",
                    "http://elsewhere.test/mcp",
                    "tools:call",
                )
                .await,
            ),
            (
                "another issuer",
                other
                    .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:call")
                    .await,
            ),
            ("alg none", none),
            ("HS256 keyed with the public key", hs256),
            ("claims changed after signing", tampered),
            ("not a token", "not-a-token".to_owned()),
        ];
        for (attack, token) in cases {
            let (status, challenge) = initialize(&gateway, Some(&token)).await;
            assert_eq!(status, 401, "{attack}");
            assert!(
                challenge.contains("error=\"invalid_token\""),
                "{attack}: {challenge}"
            );
            assert!(!challenge.contains(&token), "{attack}: the token is echoed");
        }
    });
}

#[test]
fn a_rotated_key_is_fetched_once_and_a_flood_of_unknown_kids_costs_one_fetch() {
    run(|| async {
        let idp = idp().await;
        let upstream = upstream().await;
        let gateway = gateway(&idp, &upstream, "").await;
        let first = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:call")
            .await;
        assert_eq!(initialize(&gateway, Some(&first)).await.0, 200);
        let fetched = idp.requests("/jwks").await;
        assert_eq!(fetched, 1);
        // The IdP signs with a new key: the gateway fetches the keys again
        // once, and takes old and new tokens alike.
        let new_kid = idp.rotate_keys().await;
        let rotated = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:call")
            .await;
        assert_eq!(decode_jwt(&rotated).0["kid"], new_kid);
        assert_eq!(initialize(&gateway, Some(&rotated)).await.0, 200);
        assert_eq!(initialize(&gateway, Some(&first)).await.0, 200);
        assert_eq!(idp.requests("/jwks").await, 2);
        // Made-up kids: refused, and the keys are not fetched for them
        // again within the interval.
        let (header, payload) = decode_jwt(&rotated);
        let signature = rotated.rsplit('.').next().unwrap();
        for n in 0..40 {
            let mut forged = header.clone();
            forged["kid"] = json!(format!("made-up-{n}"));
            let token = format!("{}.{}.{signature}", encode(&forged), encode(&payload));
            assert_eq!(initialize(&gateway, Some(&token)).await.0, 401);
        }
        assert_eq!(idp.requests("/jwks").await, 2, "the flood fetched the keys");
    });
}

/// The gateway's resource when its tokens are opaque (introspected).
const OPAQUE_RESOURCE: &str = "http://opaque.test/mcp";

/// Opaque tokens are introspected with the gateway's own client; nobody
/// makes the gateway ask the issuer at will: a refused token is not asked
/// about again, an overlong one not at all, and at most 20 a second are.
#[test]
fn opaque_tokens_are_introspected_and_no_flood_is_passed_on_to_the_issuer() {
    run(|| async {
        let gateway_client =
            IdpClient::new("gateway", "gateway-secret").auth_method("client_secret_basic");
        let idp = Idp::start_with(mcp_test_support::idp::IdpOptions {
            clients: vec![reader(), gateway_client],
            users: Vec::new(),
            opaque_resources: vec![OPAQUE_RESOURCE.to_owned()],
        })
        .await
        .unwrap();
        let upstream = upstream().await;
        let toml = format!(
            r#"
[gateway]
public_url = "{OPAQUE_RESOURCE}"
auth = {{ kind = "oauth", issuer = "{issuer}", client_id = "gateway", client_secret_env = "GATEWAY_SECRET" }}

[[access]]
who = ["group:readers"]
allow = ["up__echo"]
"#,
            issuer = idp.issuer(),
        ) + &http_connection("up", &upstream.url(), "");
        let config = mcp_supervisor::config::Config::from_toml_str(
            &toml,
            std::path::Path::new("test.toml"),
            &|name| (name == "GATEWAY_SECRET").then(|| "gateway-secret".to_owned()),
        )
        .unwrap();
        let gateway = ServedGateway::start(config).await;
        let token = idp
            .client_credentials("reader-app", "reader-secret", OPAQUE_RESOURCE, "tools:call")
            .await;
        assert_eq!(token.split('.').count(), 1, "an opaque token");
        assert_eq!(tool_names(&gateway, &token).await, ["up__echo"]);
        let asked = || idp.requests("/token/introspection");
        let after_good = asked().await;
        assert_eq!(after_good, 1, "a good token is asked about once");

        // The same refused token, again and again: asked about once.
        for _ in 0..10 {
            assert_eq!(
                initialize(&gateway, Some("not-a-token-of-this-issuer"))
                    .await
                    .0,
                401
            );
        }
        assert_eq!(asked().await, after_good + 1);
        // Overlong: never asked about.
        let long = "x".repeat(9 * 1024);
        assert_eq!(initialize(&gateway, Some(&long)).await.0, 401);
        assert_eq!(asked().await, after_good + 1);
        // A flood of made-up tokens: at most 20 a second reach the issuer,
        // the rest are told to come back.
        let started = std::time::Instant::now();
        let mut busy = 0;
        for n in 0..60 {
            let (status, _) = initialize(&gateway, Some(&format!("made-up-{n}"))).await;
            assert!(status == 401 || status == 503, "{status}");
            busy += usize::from(status == 503);
        }
        let seconds = started.elapsed().as_secs() + 1;
        let flood = asked().await - after_good - 1;
        assert!(
            flood <= 20 * seconds,
            "{flood} introspections in {seconds} s"
        );
        assert!(busy > 0 || seconds > 3, "none was told to come back");
    });
}
