//! OAuth connections over real loopback HTTP, against the test
//! authorization server and a protected MCP server (`mcp-test-support`):
//! without tokens a connection needs a login and sends nothing; a login
//! (the test plays the person's browser) stores the tokens in a private
//! file, and the connection's calls carry them.

mod support;

use std::{os::unix::fs::PermissionsExt, path::Path, sync::Arc, time::Duration};

use actix::Actor;
use mcp_supervisor::{CallOutcome, FailureKind, config::Config, oauth, registry::Registry};
use mcp_test_support::{TestServer, TestServerOptions, http::OAuthProtection, oauth::AuthServer};
use support::*;

/// A protected test server and its authorization server.
async fn protected() -> (Arc<AuthServer>, TestServer) {
    protected_with(Vec::new()).await
}

/// One whose tools in `tool_scopes` need a scope beyond a valid token.
async fn protected_with(tool_scopes: Vec<(String, String)>) -> (Arc<AuthServer>, TestServer) {
    let auth = Arc::new(AuthServer::start().await.unwrap());
    let upstream = TestServer::start(TestServerOptions {
        oauth: Some(OAuthProtection {
            server: auth.clone(),
            tool_scopes,
        }),
        ..TestServerOptions::default()
    })
    .await
    .unwrap();
    (auth, upstream)
}

/// Connection `a`, OAuth, its tokens under `state_dir`.
fn oauth_config(url: &str, state_dir: &Path, auth_keys: &str) -> Config {
    config(&format!(
        "[supervisor]\nstate_dir = \"{}\"\n{}",
        state_dir.display(),
        http_connection(
            "a",
            url,
            &format!("auth = {{ kind = \"oauth\"{auth_keys} }}")
        )
    ))
}

fn echo_args() -> Option<serde_json::Map<String, serde_json::Value>> {
    args(&[("text", serde_json::json!("hello"))])
}

#[test]
fn without_tokens_a_connection_needs_a_login_and_sends_nothing() {
    run(|| async {
        let (auth, upstream) = protected().await;
        let state = tempfile::tempdir().unwrap();
        let registry = Registry::new(oauth_config(&upstream.url(), state.path(), "")).start();
        for _ in 0..3 {
            let CallOutcome::Unavailable {
                failure,
                message,
                retry_in,
            } = call(&registry, "a", "echo", echo_args()).await
            else {
                panic!("a connection without tokens is unavailable");
            };
            assert_eq!(failure.kind, FailureKind::NeedsLogin);
            assert!(message.contains("mcp-supervisor login a"), "{message}");
            assert_eq!(retry_in, None);
        }
        // Agents see it in list_mcps too, with what to tell their user.
        let listed = mcp_supervisor::meta::call(&registry, "list_mcps", None).await;
        let listed: serde_json::Value = serde_json::from_str(&text(&listed)).unwrap();
        let row = &listed["connections"][0];
        assert_eq!(row["state"], "retired");
        assert!(
            row["needs_login"]
                .as_str()
                .is_some_and(|says| says.contains("mcp-supervisor login a")),
            "{listed}"
        );
        assert_eq!(upstream.requests("initialize"), 0);
        assert_eq!(auth.counts().metadata, 0);
        assert_eq!(auth.counts().token_requests, 0);
    });
}

#[test]
fn a_login_stores_private_tokens_and_the_connection_uses_them() {
    run(|| async {
        let (auth, upstream) = protected().await;
        let state = tempfile::tempdir().unwrap();
        let config = oauth_config(&upstream.url(), state.path(), "");
        let settings = oauth_settings(&config, "a");

        let logged_in = log_in(&upstream.url(), &settings).await;
        assert!(logged_in.refreshable);
        assert_eq!(auth.counts().registrations, 1, "a client was registered");
        assert_eq!(auth.counts().token_requests, 1);
        let file = state.path().join("oauth/a.json");
        assert_eq!(settings.token_file, file);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let registry = Registry::new(config).start();
        for _ in 0..3 {
            match call(&registry, "a", "echo", echo_args()).await {
                CallOutcome::Success(result) => assert_eq!(text(&result), "hello"),
                other => panic!("the call goes through with the stored token: {other:?}"),
            }
        }
        assert_eq!(upstream.tool_calls("echo"), 3);
        // The tokens were still good: no refresh, no new login.
        assert_eq!(auth.counts().token_requests, 1);
    });
}

/// A protected server, a login to it done, and a registry on the config.
async fn logged_in(
    access_ttl: Option<Duration>,
) -> (Arc<AuthServer>, TestServer, tempfile::TempDir, Config) {
    let (auth, upstream) = protected().await;
    if let Some(ttl) = access_ttl {
        auth.set_access_ttl(ttl);
    }
    let state = tempfile::tempdir().unwrap();
    let config = oauth_config(&upstream.url(), state.path(), "");
    log_in(&upstream.url(), &oauth_settings(&config, "a")).await;
    (auth, upstream, state, config)
}

/// Connection `a` to `upstream` with `grant = "client_credentials"`, client
/// `machine` with `secret`.
fn machine_config(upstream: &TestServer, state_dir: &Path, secret: &str) -> Config {
    let text = format!(
        "[supervisor]\nstate_dir = \"{}\"\n{}",
        state_dir.display(),
        http_connection(
            "a",
            &upstream.url(),
            "auth = { kind = \"oauth\", grant = \"client_credentials\", client_id = \"machine\", \
             client_secret_env = \"MACHINE_SECRET\" }"
        )
    );
    Config::from_toml_str(&text, Path::new("test.toml"), &|name| {
        (name == "MACHINE_SECRET").then(|| secret.to_owned())
    })
    .unwrap()
}

/// Eight `echo` calls to `a` at once; every one succeeds.
async fn eight_calls_at_once(registry: &actix::Addr<Registry>) {
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let registry = registry.clone();
            actix_rt::spawn(async move { call(&registry, "a", "echo", echo_args()).await })
        })
        .collect();
    for call in calls {
        let outcome = call.await.unwrap();
        assert!(succeeded(&outcome), "{outcome:?}");
    }
}

fn succeeded(outcome: &CallOutcome) -> bool {
    matches!(outcome, CallOutcome::Success(result) if text(result) == "hello")
}

/// An access token near its expiry is refreshed before it is sent, once
/// for every caller waiting on it.
#[test]
fn a_token_near_expiry_is_refreshed_once_for_concurrent_calls() {
    run(|| async {
        let lifetime = Duration::from_secs(4);
        let (auth, upstream, _state, config) = logged_in(Some(lifetime)).await;
        let registry = Registry::new(config.clone()).start();
        assert!(succeeded(&call(&registry, "a", "echo", echo_args()).await));
        let before = auth.counts();
        until_refresh_is_due(
            &oauth::TokenFile::new(oauth_settings(&config, "a").token_file),
            lifetime,
        )
        .await;
        eight_calls_at_once(&registry).await;
        assert_eq!(auth.counts().refreshes - before.refreshes, 1);
        assert_eq!(auth.counts().token_requests - before.token_requests, 1);
        assert_eq!(upstream.tool_calls("echo"), 9);
    });
}

/// A token the server no longer takes (401) is refreshed, and the call,
/// which did not run, is sent again with the new one.
#[test]
fn a_rejected_token_is_refreshed_and_the_call_sent_again() {
    run(|| async {
        let (auth, upstream, _state, config) = logged_in(None).await;
        let registry = Registry::new(config).start();
        assert!(succeeded(&call(&registry, "a", "echo", echo_args()).await));
        auth.expire_access_tokens();
        let outcome = call(&registry, "a", "echo", echo_args()).await;
        assert!(succeeded(&outcome), "{outcome:?}");
        assert_eq!(auth.counts().refreshes, 1);
        assert_eq!(upstream.completed_calls("echo"), 2, "each call ran once");
    });
}

/// A revoked grant: the refresh gets `invalid_grant`, the connection needs
/// a login, and from then on nothing is sent to either server.
#[test]
fn a_revoked_grant_needs_a_login_and_then_nothing_is_sent() {
    run(|| async {
        let (auth, upstream, state, config) = logged_in(None).await;
        let registry = Registry::new(config).start();
        assert!(succeeded(&call(&registry, "a", "echo", echo_args()).await));
        auth.revoke_all();
        let CallOutcome::Unavailable {
            failure, message, ..
        } = call(&registry, "a", "echo", echo_args()).await
        else {
            panic!("a revoked grant makes the connection unavailable");
        };
        assert_eq!(failure.kind, FailureKind::NeedsLogin);
        assert!(message.contains("mcp-supervisor login a"), "{message}");
        let (auth_seen, upstream_seen) = (auth.counts(), upstream.requests("tools/call"));
        for _ in 0..3 {
            let outcome = call(&registry, "a", "echo", echo_args()).await;
            assert!(
                matches!(&outcome, CallOutcome::Unavailable { failure, .. } if failure.kind == FailureKind::NeedsLogin),
                "{outcome:?}"
            );
        }
        assert_eq!(auth.counts(), auth_seen);
        assert_eq!(upstream.requests("tools/call"), upstream_seen);
        // The rejected tokens are gone from the file: a restart needs the
        // login too, without asking anyone.
        let stored = std::fs::read_to_string(state.path().join("oauth/a.json")).unwrap();
        assert!(!stored.contains("refresh_token"), "{stored}");
    });
}

/// The authorization server failing (503, or 429: slow down) is a failure
/// like any upstream's, not a login problem: the connection parks (no
/// hammering the authorization server), and after a reset the calls go
/// through.
#[test]
fn a_failing_token_endpoint_parks_the_connection_like_any_failure() {
    run(|| async {
        for status in [503, 429] {
            let (auth, upstream, _state, config) = logged_in(None).await;
            let registry = Registry::new(config).start();
            assert!(succeeded(&call(&registry, "a", "echo", echo_args()).await));
            auth.expire_access_tokens();
            let before = auth.counts().token_requests;
            auth.fail_token_requests(status, Some(1), 100);
            let outcome = call(&registry, "a", "echo", echo_args()).await;
            let CallOutcome::Unavailable {
                failure, retry_in, ..
            } = &outcome
            else {
                panic!("{status}: the call cannot get a token: {outcome:?}");
            };
            assert_eq!(failure.kind, FailureKind::Server, "{status}: {outcome:?}");
            assert!(retry_in.is_some(), "{status}: parked: {outcome:?}");
            let asked = auth.counts().token_requests - before;
            assert!(asked <= 6, "{status}: {asked} token requests for one call");
            // Parked: no more token requests.
            let parked = call(&registry, "a", "echo", echo_args()).await;
            assert!(
                matches!(parked, CallOutcome::Unavailable { .. }),
                "{parked:?}"
            );
            assert_eq!(auth.counts().token_requests - before, asked);

            auth.stop_failing_token_requests();
            reset(&registry, "a").await;
            let outcome = call(&registry, "a", "echo", echo_args()).await;
            assert!(succeeded(&outcome), "{status}: {outcome:?}");
            assert_eq!(upstream.completed_calls("echo"), 2);
        }
    });
}

/// Step-up: a tool that needs a scope the login did not grant gets the
/// supervisor's rejection naming the scope and the command (the connection
/// stays available); the scope is recorded, the next login asks for it
/// with the ones held, and after a reset the call goes through.
#[test]
fn a_missing_scope_is_asked_for_by_the_next_login() {
    run(|| async {
        let (_auth, upstream) = protected_with(vec![("add".to_owned(), "math".to_owned())]).await;
        let state = tempfile::tempdir().unwrap();
        let config = oauth_config(&upstream.url(), state.path(), ", scopes = [\"basic\"]");
        let settings = oauth_settings(&config, "a");
        log_in(&upstream.url(), &settings).await;
        let registry = Registry::new(config).start();
        let sum = || {
            let registry = registry.clone();
            async move {
                call(
                    &registry,
                    "a",
                    "add",
                    args(&[("a", serde_json::json!(1)), ("b", serde_json::json!(2))]),
                )
                .await
            }
        };
        let CallOutcome::Rejected { failure, message } = sum().await else {
            panic!("a call without its scope is rejected");
        };
        assert!(failure.wants_login_for_scope(), "{failure:?}");
        assert!(message.contains("needs an OAuth scope"), "{message}");
        assert!(message.contains("mcp-supervisor login a"), "{message}");
        // The connection is still there for calls the token allows.
        assert!(succeeded(&call(&registry, "a", "echo", echo_args()).await));
        // Recorded in the background, right after the answer.
        let recorded = || async { !oauth::status(&settings).await.wanted_scopes.is_empty() };
        assert!(
            mcp_test_support::wait_until_async(Duration::from_secs(10), recorded).await,
            "the missing scope was never recorded"
        );
        assert_eq!(oauth::status(&settings).await.wanted_scopes, ["math"]);

        let again = log_in(&upstream.url(), &settings).await;
        let mut granted = again.scopes.clone();
        granted.sort();
        assert_eq!(
            granted,
            ["basic", "math"],
            "the scopes held and the one wanted"
        );
        assert!(oauth::status(&settings).await.wanted_scopes.is_empty());
        reset(&registry, "a").await;
        let CallOutcome::Success(result) = sum().await else {
            panic!("with the scope, the call goes through");
        };
        assert_eq!(text(&result), "3");
    });
}

/// `client_credentials`: no login; the connection gets its own token with
/// its client id and secret, asks for a new one once the old is near its
/// expiry (one request for concurrent calls), and once after a 401.
#[test]
fn a_client_credentials_connection_renews_its_own_tokens() {
    // Paused time: the connection times its client-credentials tokens on
    // tokio's clock, so the renewal point can be looked at on both sides.
    run_paused(|| async {
        let (auth, upstream) = protected().await;
        auth.register_client("machine", Some("s3cret"), &[]);
        // Renewed when half the lifetime is left.
        auth.set_access_ttl(Duration::from_secs(2));
        let state = tempfile::tempdir().unwrap();
        let config = machine_config(&upstream, state.path(), "s3cret");
        let registry = Registry::new(config).start();
        assert!(succeeded(&call(&registry, "a", "echo", echo_args()).await));
        assert_eq!(auth.counts().token_requests, 1);
        assert_eq!(auth.counts().authorizations, 0, "no login");

        tokio::time::sleep(Duration::from_millis(999)).await;
        assert!(succeeded(&call(&registry, "a", "echo", echo_args()).await));
        assert_eq!(auth.counts().token_requests, 1, "not renewed before half");
        tokio::time::sleep(Duration::from_millis(1)).await;
        eight_calls_at_once(&registry).await;
        assert_eq!(
            auth.counts().token_requests,
            2,
            "one renewal ahead of expiry"
        );

        auth.expire_access_tokens();
        let outcome = call(&registry, "a", "echo", echo_args()).await;
        assert!(succeeded(&outcome), "{outcome:?}");
        assert_eq!(
            auth.counts().token_requests,
            3,
            "one new token after the 401"
        );
        assert_eq!(upstream.completed_calls("echo"), 11);
        assert!(
            !state.path().join("oauth").exists(),
            "client credentials tokens are not stored"
        );
    });
}

/// An access token that expired with no refresh token to renew it: the
/// call is answered `needs_login` and sent nowhere (not even without a
/// token, which a server open to anonymous callers would run).
#[test]
fn an_expired_token_without_a_refresh_token_sends_nothing() {
    run(|| async {
        // Long enough that the first call is done well before half of it.
        let lifetime = Duration::from_secs(6);
        let (_auth, upstream, _state, config) = logged_in(Some(lifetime)).await;
        let file = oauth::TokenFile::new(oauth_settings(&config, "a").token_file);
        let mut stored = file.credentials().await.unwrap().unwrap();
        stored
            .token_response
            .as_mut()
            .unwrap()
            .set_refresh_token(None);
        file.store(stored).await.unwrap();
        let registry = Registry::new(config.clone()).start();
        assert!(succeeded(&call(&registry, "a", "echo", echo_args()).await));
        until_refresh_is_due(
            &oauth::TokenFile::new(oauth_settings(&config, "a").token_file),
            lifetime,
        )
        .await;
        let outcome = call(&registry, "a", "echo", echo_args()).await;
        assert!(
            matches!(&outcome, CallOutcome::Unavailable { failure, .. } if failure.kind == FailureKind::NeedsLogin),
            "{outcome:?}"
        );
        assert_eq!(upstream.tool_calls("echo"), 1, "the second call was sent");
    });
}

/// Client credentials the authorization server refuses (a wrong secret)
/// are an `auth` failure: the connection retires at once, with no more
/// token requests (no retry mends a wrong secret).
#[test]
fn refused_client_credentials_retire_the_connection() {
    run(|| async {
        let (auth, upstream) = protected().await;
        auth.register_client("machine", Some("s3cret"), &[]);
        let state = tempfile::tempdir().unwrap();
        let config = machine_config(&upstream, state.path(), "wrong");
        let registry = Registry::new(config).start();
        let outcome = call(&registry, "a", "echo", echo_args()).await;
        let CallOutcome::Unavailable {
            failure, retry_in, ..
        } = &outcome
        else {
            panic!("refused credentials: {outcome:?}");
        };
        assert_eq!(failure.kind, FailureKind::Auth, "{outcome:?}");
        assert_eq!(*retry_in, None, "retired, not parked");
        let asked = auth.counts().token_requests;
        assert!(matches!(
            call(&registry, "a", "echo", echo_args()).await,
            CallOutcome::Unavailable { .. }
        ));
        assert_eq!(auth.counts().token_requests, asked, "nothing more asked");
        assert_eq!(upstream.tool_calls("echo"), 0);
    });
}
