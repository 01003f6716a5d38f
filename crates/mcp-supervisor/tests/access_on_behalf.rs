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

/// The IdP, with two callers (`reader-app` in `readers`, `ops-app` in
/// `ops`) and the gateway's own client.
async fn idp() -> Idp {
    Idp::start_with(IdpOptions {
        clients: vec![
            IdpClient::new("reader-app", "reader-secret").groups(&["readers"]),
            IdpClient::new("ops-app", "ops-secret").groups(&["ops"]),
            gateway_client(),
        ],
        users: Vec::new(),
        opaque_resources: Vec::new(),
    })
    .await
    .unwrap()
}

/// `[gateway]` taking `idp`'s tokens, with the gateway's client there.
fn oauth_gateway(idp: &Idp) -> String {
    format!(
        "[gateway]\npublic_url = \"{RESOURCE}\"\nauth = {{ kind = \"oauth\", issuer = \"{}\", \
         client_id = \"gateway\", client_secret_env = \"GATEWAY_SECRET\" }}\n",
        idp.issuer()
    )
}

/// The IdP, an upstream with `options`, and a gateway whose connection
/// `up` to it has the keys `up` (`on_behalf` among them).
async fn exchanging(options: TestServerOptions, up: &str) -> (Idp, TestServer, ServedGateway) {
    let idp = idp().await;
    let upstream = upstream(options).await;
    let toml = oauth_gateway(&idp) + &http_connection("up", &upstream.url(), up);
    let gateway = exchanging_gateway(&toml).await;
    (idp, upstream, gateway)
}

/// A gateway serving `toml` (its `[gateway]` from [`oauth_gateway`]).
async fn exchanging_gateway(toml: &str) -> ServedGateway {
    ServedGateway::start(config_with(toml, &[("GATEWAY_SECRET", "gateway-secret")])).await
}

/// `[gateway.keys.NAME]` for each of `names`: key `NAME-key`, group NAME.
fn keys(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| {
            format!(
                "[gateway.keys.{name}]\nsha256 = \"{}\"\ngroups = [\"{name}\"]\n",
                key_digest(&format!("{name}-key"))
            )
        })
        .collect()
}

/// A 2025-era upstream and a gateway with keys `ops-key` and `ci-key`
/// (groups `ops`, `ci`) and connection `up` to it (with `connection`
/// keys) whose `on_behalf` (with `on_behalf` keys) chooses `ops-token` for
/// `ops` and `ci-token` for `ci`.
async fn ops_and_ci_gateway(connection: &str, on_behalf: &str) -> (TestServer, ServedGateway) {
    let upstream = upstream(TestServerOptions::legacy()).await;
    let toml = keys(&["ops", "ci"])
        + &http_connection(
            "up",
            &upstream.url(),
            &format!(
                "{connection}\n[connections.up.on_behalf]\nkind = \"per_caller\"\n{on_behalf}\n\
                 credentials = [\n  {{ who = [\"group:ops\"], token = \"ops-token\" }},\n  \
                 {{ who = [\"group:ci\"], token = \"ci-token\" }},\n]"
            ),
        );
    let gateway = ServedGateway::start(config(&toml)).await;
    (upstream, gateway)
}

/// Two callers of the IdP each reach a 2025-era upstream (sessions) with
/// a token the IdP minted for the upstream and for them, in a session of
/// their own that their next call reuses; the connection's own session
/// keeps its own credentials; no caller token reaches the upstream.
#[test]
fn each_caller_reaches_the_upstream_with_a_token_exchanged_for_it() {
    run(|| async {
        let idp = idp().await;
        let upstream = upstream(TestServerOptions::legacy()).await;
        let toml = oauth_gateway(&idp)
            + &http_connection(
                "up",
                &upstream.url(),
                "auth = { kind = \"bearer\", token = \"service-token\" }\n\
             on_behalf = { kind = \"token_exchange\" }",
            );
        let gateway = exchanging_gateway(&toml).await;
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
        let toml = keys(&["ops", "ci", "intern"])
            + &http_connection(
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
        let (idp, upstream, gateway) = exchanging(
            TestServerOptions::default(),
            "on_behalf = { kind = \"token_exchange\", scopes = [\"tools:call\"] }",
        )
        .await;
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

/// Sessions with callers' credentials are bounded and closed when idle:
/// with room for one, two callers' turns each open it anew; one left
/// unused past `idle_timeout` is closed, and the next call opens another.
#[test]
fn callers_sessions_are_bounded_and_closed_when_idle() {
    run(|| async {
        let (upstream, gateway) =
            ops_and_ci_gateway("", "max_sessions = 1\nidle_timeout = \"1s\"").await;
        let opened = || upstream.requests("initialize");
        assert!(echo_as(&gateway, "ops-key").await.0);
        let own_and_ops = opened();
        assert!(echo_as(&gateway, "ops-key").await.0);
        assert_eq!(opened(), own_and_ops, "reused");
        assert!(echo_as(&gateway, "ci-key").await.0);
        assert!(echo_as(&gateway, "ops-key").await.0);
        assert_eq!(opened(), own_and_ops + 2, "each made room for the other");

        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        assert!(echo_as(&gateway, "ops-key").await.0);
        assert_eq!(opened(), own_and_ops + 3, "the idle one was closed");
    });
}

/// A fleet node of `namespace` on `redis`, listening on `listener` (its
/// `advertise`), with `gateway` and `connections`.
async fn fleet_node(
    redis: &mcp_test_support::RedisServer,
    (node, listener): (&str, tokio::net::TcpListener),
    gateway: &str,
    connections: &str,
) -> ServedGateway {
    let toml = format!(
        "{gateway}\n[fleet]\nredis = \"{}\"\nnode = \"{node}\"\nnamespace = \"t\"\nkey_file = {}\nadvertise = \"http://{}\"\n{connections}",
        redis.url(),
        toml_string(&fleet_key_file().to_string_lossy()),
        listener.local_addr().unwrap(),
    );
    ServedGateway::start_on(
        listener,
        config_with(&toml, &[("GATEWAY_SECRET", "gateway-secret")]),
    )
    .await
}

/// A JSON-RPC POST to `url` with `token`, in session `session` if any,
/// with `headers` besides.
async fn post_as(
    url: &str,
    token: &str,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, String, Option<String>) {
    let mut request = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|value| value.to_str().unwrap().to_owned());
    (
        response.status().as_u16(),
        response.text().await.unwrap(),
        session,
    )
}

/// A 2025-11-25 session opened with `token` at `at`, its
/// `notifications/initialized` sent to `then` (another node, perhaps): the
/// session id, and the status that notification got.
async fn open_session(at: &str, then: &str, token: &str) -> (String, u16) {
    let (status, _, session) = post_as(
        at,
        token,
        None,
        &[],
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
    )
    .await;
    assert_eq!(status, 200);
    let session = session.unwrap();
    let (initialized, _, _) = post_as(
        then,
        token,
        Some(&session),
        &[],
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    (session, initialized)
}

/// In a fleet over a real Redis: a request of a session another node
/// holds reaches it with its caller's token (sealed in the voucher's
/// company), so that node can act for the caller; a caller's exchanged
/// token is exchanged once for the whole fleet, and kept in Redis sealed
/// (no token in the clear).
#[test]
fn over_redis_a_callers_token_is_exchanged_once_for_the_fleet_and_follows_its_session() {
    run(|| async {
        let redis = mcp_test_support::RedisServer::start().unwrap();
        let idp = idp().await;
        let upstream = upstream(TestServerOptions::legacy()).await;
        let gateway = oauth_gateway(&idp);
        let connections = http_connection(
            "up",
            &upstream.url(),
            "on_behalf = { kind = \"token_exchange\" }",
        );
        let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
        let one = fleet_node(
            &redis,
            ("one", bind().await.unwrap()),
            &gateway,
            &connections,
        )
        .await;
        let two = fleet_node(
            &redis,
            ("two", bind().await.unwrap()),
            &gateway,
            &connections,
        )
        .await;
        for (node, other) in [(&one, "two"), (&two, "one")] {
            let hears = || async {
                let view = node
                    .registry
                    .send(mcp_supervisor::registry::FleetOverview)
                    .await
                    .unwrap();
                view.is_some_and(|view| view.nodes.iter().any(|n| n.node == other))
            };
            assert!(
                mcp_test_support::wait_until_async(std::time::Duration::from_secs(15), hears).await,
                "a node never heard the other"
            );
        }
        let reader = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:call")
            .await;

        // A session opened at node one, its call sent to node two.
        let (session, initialized) = open_session(&one.url, &two.url, &reader).await;
        assert!(session.starts_with("one."), "{session}");
        assert_eq!(initialized, 202);
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "up__echo", "arguments": {"text": "hi"}}});
        let (status, body, _) = post_as(&two.url, &reader, Some(&session), &[], call.clone()).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(r#""text":"hi""#) && !body.contains("cannot act"),
            "{body}"
        );

        // The same caller at node two, in a session of its own there: the
        // token node one exchanged is the fleet's.
        let (theirs, _) = open_session(&two.url, &two.url, &reader).await;
        assert!(theirs.starts_with("two."), "{theirs}");
        let (status, body, _) = post_as(&two.url, &reader, Some(&theirs), &[], call).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(r#""text":"hi""#), "{body}");
        assert_eq!(upstream.completed_calls("echo"), 2);
        assert_eq!(
            idp.requests("/token").await,
            1 + 1,
            "one login, one exchange"
        );

        // Redis holds it sealed: no token in the clear.
        let exchanged: Vec<String> = upstream
            .control()
            .seen_authorizations()
            .into_iter()
            .filter_map(|value| value.strip_prefix("Bearer ").map(str::to_owned))
            .collect();
        assert_eq!(exchanged.len(), 1, "{exchanged:?}");
        let mcp_test_support::redis::Reply::List(keys) = redis.query(&["KEYS", "*"]).unwrap()
        else {
            panic!("KEYS answers a list");
        };
        let mut shared = 0;
        for key in keys {
            let key = key.text().unwrap().to_owned();
            shared += usize::from(key.starts_with("t:exchanged:up:"));
            assert!(!key.contains("reader-app"), "{key}");
            if let Ok(mcp_test_support::redis::Reply::Text(value)) = redis.query(&["GET", &key]) {
                assert!(
                    !value.contains(&exchanged[0]) && !value.contains(&reader),
                    "{key} holds a token in the clear"
                );
            }
        }
        assert_eq!(shared, 1);
    });
}

/// What a caller sends cannot make the gateway act for someone else, nor
/// cost the connection its standing: a client's own
/// `mcp-supervisor-subject` (another caller's token) is dropped, and a
/// token the issuer will not exchange (it lacks the scopes the connection
/// asks for) is that caller's answer, asked about once.
#[test]
fn a_caller_cannot_borrow_another_token_and_a_refused_exchange_is_its_own() {
    run(|| async {
        let idp = idp().await;
        let upstream = upstream(TestServerOptions::legacy()).await;
        let toml = oauth_gateway(&idp)
            + &http_connection(
                "up",
                &upstream.url(),
                "on_behalf = { kind = \"token_exchange\" }",
            )
            + &http_connection(
                "admin",
                &upstream.url(),
                "on_behalf = { kind = \"token_exchange\", scopes = [\"tools:admin\"] }",
            )
            + &http_connection(
                "nowhere",
                &upstream.url(),
                "on_behalf = { kind = \"token_exchange\", audience = \"urn:example:nowhere\" }",
            );
        let gateway = exchanging_gateway(&toml).await;
        let reader = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:call")
            .await;
        let ops = idp
            .client_credentials("ops-app", "ops-secret", RESOURCE, "tools:call")
            .await;

        // The reader names the ops client's token as its subject: dropped.
        let (session, _) = open_session(&gateway.url, &gateway.url, &reader).await;
        let (status, body, _) = post_as(
            &gateway.url,
            &reader,
            Some(&session),
            &[("mcp-supervisor-subject", ops.as_str())],
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "up__echo", "arguments": {"text": "hi"}}}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(r#""text":"hi""#), "{body}");
        let subjects: Vec<Value> = upstream
            .control()
            .seen_authorizations()
            .iter()
            .filter_map(|value| value.strip_prefix("Bearer "))
            .map(|token| decode_jwt(token).1["sub"].clone())
            .collect();
        assert_eq!(subjects, [Value::from("reader-app")]);

        // The issuer will not exchange for scopes the token lacks.
        let exchanges = idp.requests("/token").await;
        for _ in 0..2 {
            let client = gateway
                .connect_as((), ClientLifecycleMode::Initialize, Some(&reader))
                .await;
            let mut call = CallToolRequestParams::new("admin__echo");
            call.arguments = json!({"text": "hi"}).as_object().cloned();
            let result = client.call_tool(call).await.unwrap();
            let text = text(&result);
            assert!(
                result.is_error == Some(true) && text.contains("lacks the scopes"),
                "{text}"
            );
        }
        assert_eq!(idp.requests("/token").await, exchanges + 1, "asked once");
        let status = status_of(&gateway, "admin").await;
        assert_eq!(status.state, mcp_supervisor::ConnectionState::Ready);
        assert_eq!(status.parks, 0);
        assert!(status.last_failure.is_none(), "{:?}", status.last_failure);

        // Refused for the gateway's own settings (an audience the issuer
        // mints nothing for): told, not held against the caller.
        for _ in 0..2 {
            let client = gateway
                .connect_as((), ClientLifecycleMode::Initialize, Some(&reader))
                .await;
            let mut call = CallToolRequestParams::new("nowhere__echo");
            call.arguments = json!({"text": "hi"}).as_object().cloned();
            let result = client.call_tool(call).await.unwrap();
            let text = text(&result);
            assert!(text.contains("mints no tokens for this server"), "{text}");
        }
        assert_eq!(
            idp.requests("/token").await,
            exchanges + 3,
            "asked each time: not the caller's fault"
        );
        let status = status_of(&gateway, "nowhere").await;
        assert_eq!(status.parks, 0);
    });
}

/// Two tokens of one caller are two sets of credentials: a token that may
/// not be exchanged for the connection's scopes gets no session another
/// token of the same caller opened.
#[test]
fn a_callers_narrower_token_never_rides_on_its_wider_tokens_session() {
    run(|| async {
        let (idp, upstream, gateway) = exchanging(
            TestServerOptions::legacy(),
            "on_behalf = { kind = \"token_exchange\", scopes = [\"tools:call\"] }",
        )
        .await;
        let wide = idp
            .client_credentials(
                "reader-app",
                "reader-secret",
                RESOURCE,
                "tools:read tools:call",
            )
            .await;
        let narrow = idp
            .client_credentials("reader-app", "reader-secret", RESOURCE, "tools:read")
            .await;
        let (ok, text) = echo_as(&gateway, &wide).await;
        assert!(ok, "{text}");
        let (ok, text) = echo_as(&gateway, &narrow).await;
        assert!(!ok && text.contains("lacks the scopes"), "{text}");
        assert_eq!(upstream.completed_calls("echo"), 1);
    });
}

/// A caller's session carries the caller's credentials alone: not the
/// connection's `headers`; and an upstream that limits one caller's
/// credentials (`429`) costs the connection nothing: no park, no session
/// lost, the other callers served.
#[test]
fn a_callers_session_carries_no_connection_header_and_its_limits_are_its_own() {
    run(|| async {
        let (upstream, gateway) = ops_and_ci_gateway(
            r#"headers = { Authorization = "Bearer connection-canary-51c3" }"#,
            "",
        )
        .await;
        assert!(echo_as(&gateway, "ops-key").await.0);
        assert!(echo_as(&gateway, "ci-key").await.0);
        let opened = upstream.requests("initialize");

        upstream.control().limit("ci-token");
        for _ in 0..3 {
            let (ok, text) = echo_as(&gateway, "ci-key").await;
            assert!(!ok && text.contains("limits the credentials"), "{text}");
        }
        let status = status_of(&gateway, "up").await;
        assert_eq!(status.state, mcp_supervisor::ConnectionState::Ready);
        assert_eq!(status.parks, 0);
        assert!(status.last_failure.is_none(), "{:?}", status.last_failure);
        assert!(echo_as(&gateway, "ops-key").await.0);
        assert_eq!(
            upstream.requests("initialize"),
            opened,
            "no session was lost"
        );
        let seen = upstream.control().seen_authorizations();
        assert_eq!(
            seen,
            [
                "Bearer ci-token",
                "Bearer connection-canary-51c3",
                "Bearer ops-token"
            ],
            "the connection's header went on its own session only"
        );
    });
}
