//! Whose credentials reach the upstream (docs/SECURITY.md): a connection
//! with `on_behalf` calls with its caller's credentials, never the
//! caller's own token and never the gateway's for a caller they are not
//! for. Token exchange (RFC 8693) at a real, certified OpenID provider
//! (`oidc-provider`), credentials chosen per caller, one upstream session
//! per set of credentials, and a credential the upstream refuses ending
//! that caller's use only.

mod support;

use mcp_supervisor::registry::{ConnectionStatus, Status};
use mcp_test_support::{
    Speaks, TestServer, TestServerOptions,
    idp::{Idp, IdpClient, IdpOptions, decode_jwt},
};
use rmcp::{model::CallToolRequestParams, service::ClientLifecycleMode};
use serde_json::{Value, json};
use support::*;

/// The gateway's resource identifier (its `public_url`).
const RESOURCE: &str = "http://mcp.test/mcp";

fn gateway_client() -> IdpClient {
    IdpClient::new("gateway", "gateway-secret").auth_method("client_secret_basic")
}

async fn upstream(options: TestServerOptions) -> TestServer {
    TestServer::start(options).await.unwrap()
}

/// Calls `up__echo` as the holder of `token`: the answer's text, or the
/// error's.
async fn echo_as(gateway: &ServedGateway, token: &str) -> (bool, String) {
    let client = gateway
        .connect_as((), ClientLifecycleMode::Initialize, Some(token))
        .await;
    let mut call = CallToolRequestParams::new("up__echo");
    call.arguments = json!({"text": "hi"}).as_object().cloned();
    let result = client.call_tool(call).await.unwrap();
    (result.is_error != Some(true), text(&result))
}

async fn status_of(gateway: &ServedGateway, name: &str) -> ConnectionStatus {
    let status = gateway.registry.send(Status).await.unwrap();
    status.into_iter().find(|s| s.name == name).unwrap()
}

fn config_with(
    toml: &str,
    env: &'static [(&'static str, &'static str)],
) -> mcp_supervisor::config::Config {
    mcp_supervisor::config::Config::from_toml_str(
        toml,
        std::path::Path::new("test.toml"),
        &|name| {
            env.iter()
                .find(|(var, _)| *var == name)
                .map(|(_, value)| (*value).to_owned())
        },
    )
    .unwrap_or_else(|error| panic!("test config is valid: {error}"))
}

/// Two callers of the IdP each reach a 2025-era upstream (sessions) with
/// a token the IdP minted for the upstream and for them, in a session of
/// their own that their next call reuses; the connection's own session
/// keeps its own credentials; no caller token reaches the upstream.
#[test]
fn each_caller_reaches_the_upstream_with_a_token_exchanged_for_it() {
    run(|| async {
        let idp = Idp::start_with(IdpOptions {
            clients: vec![
                IdpClient::new("reader-app", "reader-secret").groups(&["readers"]),
                IdpClient::new("ops-app", "ops-secret").groups(&["ops"]),
                gateway_client(),
            ],
            users: Vec::new(),
            opaque_resources: Vec::new(),
        })
        .await
        .unwrap();
        let upstream = upstream(TestServerOptions::legacy()).await;
        let toml = format!(
            r#"
[gateway]
public_url = "{RESOURCE}"
auth = {{ kind = "oauth", issuer = "{issuer}", client_id = "gateway", client_secret_env = "GATEWAY_SECRET" }}
"#,
            issuer = idp.issuer(),
        ) + &http_connection(
            "up",
            &upstream.url(),
            "auth = { kind = \"bearer\", token = \"service-token\" }\n\
             on_behalf = { kind = \"token_exchange\" }",
        );
        let gateway =
            ServedGateway::start(config_with(&toml, &[("GATEWAY_SECRET", "gateway-secret")])).await;
        let reader = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:call")
            .await;
        let ops = idp
            .client_credentials("ops-app", "ops-secret", RESOURCE, "tools:call")
            .await;
        for token in [&reader, &ops, &reader, &ops] {
            let (ok, text) = echo_as(&gateway, token).await;
            assert!(ok && text.contains("hi"), "{text}");
        }
        assert_eq!(upstream.tool_calls("echo"), 4);
        assert_eq!(
            idp.requests("/token").await,
            2 + 2,
            "two logins, two exchanges"
        );
        // The connection's own session, and one per caller, reused.
        assert_eq!(upstream.requests("initialize"), 3);

        let seen = upstream.control().seen_authorizations();
        assert!(
            seen.contains(&"Bearer service-token".to_owned()),
            "{seen:?}"
        );
        let mut subjects: Vec<String> = seen
            .iter()
            .filter(|value| *value != "Bearer service-token")
            .map(|value| {
                let token = value.strip_prefix("Bearer ").unwrap();
                assert!(
                    token != reader && token != ops,
                    "a caller's token passed on"
                );
                let (_, claims) = decode_jwt(token);
                assert_eq!(claims["aud"], Value::from(upstream.url()), "{claims}");
                assert_eq!(claims["act"]["sub"], "gateway", "{claims}");
                claims["sub"].as_str().unwrap().to_owned()
            })
            .collect();
        subjects.sort();
        assert_eq!(subjects, ["ops-app", "reader-app"]);
        assert!(
            seen.iter()
                .all(|value| !value.contains(&reader) && !value.contains(&ops))
        );
    });
}

/// Credentials chosen per caller: each key's group gets its own; a
/// caller none is for is told so and nothing is sent; one the upstream
/// refuses ends that caller's use (asked once, not again) while the
/// others' calls and the connection's standing are untouched.
#[test]
fn credentials_are_chosen_per_caller_and_a_refused_one_is_that_callers_alone() {
    run(|| async {
        let upstream = upstream(TestServerOptions {
            require_bearer: Some("ops-upstream-token".to_owned()),
            speaks: Speaks::Legacy,
            ..TestServerOptions::default()
        })
        .await;
        let toml = format!(
            r#"
[gateway.keys.ops]
sha256 = "{ops}"
groups = ["ops"]

[gateway.keys.ci]
sha256 = "{ci}"
groups = ["ci"]

[gateway.keys.intern]
sha256 = "{intern}"
groups = ["interns"]
"#,
            ops = key_digest("ops-key"),
            ci = key_digest("ci-key"),
            intern = key_digest("intern-key"),
        ) + &http_connection(
            "up",
            &upstream.url(),
            r#"auth = { kind = "bearer", token = "ops-upstream-token" }

[connections.up.on_behalf]
kind = "per_caller"
credentials = [
  { who = ["group:ops"], token = "ops-upstream-token" },
  { who = ["group:ci"], token = "revoked-token" },
]"#,
        );
        let gateway = ServedGateway::start(config(&toml)).await;

        let (ok, text) = echo_as(&gateway, "ops-key").await;
        assert!(ok, "{text}");

        let (ok, text) = echo_as(&gateway, "intern-key").await;
        assert!(!ok && text.contains("cannot act for you"), "{text}");
        assert!(text.contains("no credentials"), "{text}");

        let before = upstream.requests("initialize");
        let (ok, text) = echo_as(&gateway, "ci-key").await;
        assert!(!ok && text.contains("refused the credentials"), "{text}");
        assert!(
            upstream
                .control()
                .seen_authorizations()
                .contains(&"Bearer revoked-token".to_owned())
        );
        let asked = upstream.requests("initialize");
        assert!(asked > before, "the refused credentials were tried");
        let (ok, text) = echo_as(&gateway, "ci-key").await;
        assert!(!ok && text.contains("refused the credentials"), "{text}");
        assert_eq!(upstream.requests("initialize"), asked, "not asked again");

        // Nobody else is touched: the connection is as it was, and its
        // other callers' calls go on.
        let status = status_of(&gateway, "up").await;
        assert_eq!(
            status.state,
            mcp_supervisor::ConnectionState::Ready,
            "{status:?}"
        );
        assert_eq!(status.parks, 0);
        assert!(status.last_failure.is_none(), "{:?}", status.last_failure);
        let (ok, text) = echo_as(&gateway, "ops-key").await;
        assert!(ok, "{text}");
        assert_eq!(upstream.tool_calls("echo"), 2);
        let seen = upstream.control().seen_authorizations();
        assert!(
            seen.iter().all(|value| !value.contains("-key")),
            "a caller's key passed on: {seen:?}"
        );
    });
}

/// A 2026-07-28 upstream (no sessions) that revokes one caller's
/// exchanged token mid-run: that caller is told, and not sent again with
/// it, until it comes with a new token of its own; the other caller and
/// the connection's standing are untouched.
#[test]
fn an_exchanged_token_the_upstream_refuses_ends_that_callers_use_only() {
    run(|| async {
        let idp = Idp::start_with(IdpOptions {
            clients: vec![
                IdpClient::new("reader-app", "reader-secret").groups(&["readers"]),
                IdpClient::new("ops-app", "ops-secret").groups(&["ops"]),
                gateway_client(),
            ],
            users: Vec::new(),
            opaque_resources: Vec::new(),
        })
        .await
        .unwrap();
        let upstream = upstream(TestServerOptions::default()).await;
        let toml = format!(
            r#"
[gateway]
public_url = "{RESOURCE}"
auth = {{ kind = "oauth", issuer = "{issuer}", client_id = "gateway", client_secret_env = "GATEWAY_SECRET" }}
"#,
            issuer = idp.issuer(),
        ) + &http_connection(
            "up",
            &upstream.url(),
            "on_behalf = { kind = \"token_exchange\", scopes = [\"tools:call\"] }",
        );
        let gateway =
            ServedGateway::start(config_with(&toml, &[("GATEWAY_SECRET", "gateway-secret")])).await;
        let login = |client: &'static str, secret: &'static str| {
            let idp = &idp;
            async move {
                idp.client_credentials(client, secret, RESOURCE, "tools:call")
                    .await
            }
        };
        let reader = login("reader-app", "reader-secret").await;
        let ops = login("ops-app", "ops-secret").await;
        for token in [&reader, &ops] {
            let (ok, text) = echo_as(&gateway, token).await;
            assert!(ok, "{text}");
        }
        let exchanged_for = |subject: &str| {
            upstream
                .control()
                .seen_authorizations()
                .into_iter()
                .filter_map(|value| value.strip_prefix("Bearer ").map(str::to_owned))
                .find(|token| decode_jwt(token).1["sub"] == subject)
                .unwrap()
        };
        let readers = exchanged_for("reader-app");
        assert_eq!(decode_jwt(&readers).1["scope"], "tools:call");
        upstream.control().revoke(&readers);

        let (ok, text) = echo_as(&gateway, &reader).await;
        assert!(!ok && text.contains("refused the credentials"), "{text}");
        let sent = upstream.requests("tools/call");
        let (ok, text) = echo_as(&gateway, &reader).await;
        assert!(!ok && text.contains("refused the credentials"), "{text}");
        assert_eq!(upstream.requests("tools/call"), sent, "not sent again");

        let (ok, text) = echo_as(&gateway, &ops).await;
        assert!(ok, "{text}");
        let status = status_of(&gateway, "up").await;
        assert_eq!(status.state, mcp_supervisor::ConnectionState::Ready);
        assert_eq!(status.parks, 0);
        assert!(status.last_failure.is_none(), "{:?}", status.last_failure);

        // A new token of the same caller is exchanged again, and works.
        let renewed = login("reader-app", "reader-secret").await;
        assert_ne!(renewed, reader);
        let (ok, text) = echo_as(&gateway, &renewed).await;
        assert!(ok, "{text}");
        assert_eq!(upstream.completed_calls("echo"), 4);
    });
}
