//! OAuth tokens across the fleet (docs/OAUTH.md, "In a fleet"): several
//! registries ("nodes") in this process, each with its own token file and
//! the same OAuth connection to one protected test server, joined through
//! the in-process store or a real `redis-server`. The test authorization
//! server rotates refresh tokens (each works once), as many do: two nodes
//! refreshing with one refresh token would leave one of them needing a
//! login. Real time: token expiry is counted on the system clock.

mod support;

use std::{path::Path, sync::Arc, time::Duration};

use actix::{Actor, Addr};
use mcp_supervisor::{
    CallOutcome, ConnectionState,
    config::Config,
    fleet::{LocalStore, Refusal, StoreHealth},
    oauth,
    registry::{FleetOverview, Registry, Status},
};
use mcp_test_support::{
    RedisServer, TestServer, TestServerOptions, http::OAuthProtection, oauth::AuthServer,
    redis::Reply,
};
use support::*;

/// A protected test server and its authorization server, access tokens
/// living `ttl`.
async fn protected(ttl: Duration) -> (Arc<AuthServer>, TestServer) {
    let auth = Arc::new(AuthServer::start().await.unwrap());
    auth.set_access_ttl(ttl);
    let upstream = TestServer::start(TestServerOptions {
        oauth: Some(OAuthProtection {
            server: auth.clone(),
            tool_scopes: Vec::new(),
        }),
        ..TestServerOptions::default()
    })
    .await
    .unwrap();
    (auth, upstream)
}

/// Where the nodes meet: the in-process store, or Redis.
#[derive(Clone)]
enum Meeting<'a> {
    Local(LocalStore),
    Redis(&'a RedisServer),
}

/// A node's config: its state directory, `[fleet]` (namespace `t`), and
/// OAuth connections `names` to `upstream` (`auth` keys added).
fn node_config(
    state: &Path,
    node: &str,
    redis: &str,
    upstream: &TestServer,
    names: &[&str],
    auth: &str,
) -> Config {
    let mut text = format!(
        "[supervisor]\nstate_dir = {}\ncall_timeout = \"30s\"\n\
         [fleet]\nredis = \"{redis}\"\nnode = \"{node}\"\nnamespace = \"t\"\nkey_file = {}\n",
        toml_string(&state.to_string_lossy()),
        toml_string(&fleet_key_file().to_string_lossy()),
    );
    for name in names {
        text += &http_connection(
            name,
            &upstream.url(),
            &format!("auth = {{ kind = \"oauth\"{auth} }}"),
        );
    }
    Config::from_toml_str(&text, Path::new("test.toml"), &|name| {
        (name == "MACHINE_SECRET").then(|| "s3cret".to_owned())
    })
    .unwrap()
}

/// A node: its registry and its state directory.
struct Node {
    registry: Addr<Registry>,
    state: tempfile::TempDir,
    config: Config,
}

impl Node {
    fn token_file(&self, name: &str) -> oauth::TokenFile {
        oauth::TokenFile::new(oauth_settings(&self.config, name).token_file)
    }
}

/// `count` nodes meeting at `meeting`, each with connections `names`.
/// `login`: log in once and copy the token files to every node (as an
/// operator deploying one login would), else each node logs in itself.
async fn nodes(
    upstream: &TestServer,
    meeting: &Meeting<'_>,
    count: usize,
    names: &[&str],
    login: Login,
) -> Vec<Node> {
    let redis = match meeting {
        Meeting::Local(_) => "redis://127.0.0.1:9".to_owned(),
        Meeting::Redis(redis) => redis.url(),
    };
    let mut nodes = Vec::new();
    for n in 0..count {
        let state = tempfile::tempdir().unwrap();
        let config = node_config(state.path(), &format!("n{n}"), &redis, upstream, names, "");
        for name in names {
            let settings = oauth_settings(&config, name);
            match (&login, nodes.first()) {
                (Login::Once, Some(Node { config: first, .. })) => {
                    let from = oauth_settings(first, name).token_file;
                    std::fs::create_dir_all(settings.token_file.parent().unwrap()).unwrap();
                    std::fs::copy(from, &settings.token_file).unwrap();
                }
                _ => {
                    log_in(&upstream.url(), &settings).await;
                }
            }
        }
        nodes.push(Node {
            registry: registry(config.clone(), meeting),
            state,
            config,
        });
    }
    nodes
}

#[derive(PartialEq)]
enum Login {
    Once,
    EachNode,
}

fn registry(config: Config, meeting: &Meeting<'_>) -> Addr<Registry> {
    match meeting {
        Meeting::Local(store) => Registry::with_fleet_store(config, Arc::new(store.clone())),
        Meeting::Redis(_) => Registry::new(config),
    }
    .start()
}

fn succeeded(outcome: &CallOutcome) -> bool {
    matches!(outcome, CallOutcome::Success(result) if text(result) == "hi")
}

/// `calls` `echo` calls to `a` at once, spread over `nodes`; every one
/// succeeds.
async fn calls_at_once(nodes: &[Node], calls: usize) {
    let calls: Vec<_> = (0..calls)
        .map(|n| {
            let registry = nodes[n % nodes.len()].registry.clone();
            actix_rt::spawn(async move { call(&registry, "a", "echo", echo_args()).await })
        })
        .collect();
    for call in calls {
        let outcome = call.await.unwrap();
        assert!(succeeded(&outcome), "{outcome:?}");
    }
}

/// Every node's first call, with the tokens of the login.
async fn first_calls(nodes: &[Node]) {
    for node in nodes {
        let outcome = call(&node.registry, "a", "echo", echo_args()).await;
        assert!(succeeded(&outcome), "{outcome:?}");
    }
}

/// Long enough for three nodes to start and call before it is due.
const LIFETIME: Duration = Duration::from_secs(8);

/// The "done when": 24 concurrent calls across three nodes with an
/// expiring token, one refresh for the fleet, every call served.
#[test]
fn a_token_due_on_every_node_is_refreshed_once_for_the_fleet() {
    run(|| async {
        let (auth, upstream) = protected(LIFETIME).await;
        let meeting = Meeting::Local(LocalStore::default());
        let nodes = nodes(&upstream, &meeting, 3, &["a"], Login::Once).await;
        first_calls(&nodes).await;
        let before = auth.counts();
        assert_eq!(before.refreshes, 0);
        until_refresh_is_due(&nodes[0].token_file("a"), LIFETIME).await;
        calls_at_once(&nodes, 24).await;
        assert_eq!(auth.counts().refreshes, 1, "one refresh for the fleet");
        assert_eq!(auth.counts().token_requests - before.token_requests, 1);
        assert_eq!(upstream.tool_calls("echo"), 27);
        // Every node keeps the new tokens in its own file too.
        let access = |stored: Option<rmcp::transport::auth::StoredCredentials>| {
            use oauth2::TokenResponse;
            stored
                .and_then(|stored| stored.token_response)
                .map(|token| token.access_token().secret().clone())
        };
        let mut held = Vec::new();
        for node in &nodes {
            let fresh = oauth::TokenFile::new(oauth_settings(&node.config, "a").token_file);
            held.push(access(fresh.credentials().await.unwrap()));
        }
        assert!(held[0].is_some());
        assert!(held.iter().all(|token| *token == held[0]), "{}", held.len());
    });
}

/// A token the authorization server stopped taking (401 on every node):
/// one refresh for the fleet, and each call, which did not run, is sent
/// again with the new token.
async fn a_token_rejected_on_every_node_is_refreshed_once(meeting: &Meeting<'_>) {
    let (auth, upstream) = protected(Duration::from_secs(3600)).await;
    let nodes = nodes(&upstream, meeting, 3, &["a"], Login::Once).await;
    joined(&nodes, meeting).await;
    first_calls(&nodes).await;
    auth.expire_access_tokens();
    calls_at_once(&nodes, 24).await;
    assert_eq!(auth.counts().refreshes, 1, "one refresh for the fleet");
    assert_eq!(upstream.completed_calls("echo"), 27, "each call ran once");
}

#[test]
fn a_token_rejected_on_every_node_is_refreshed_once_for_the_fleet() {
    run(|| async {
        let meeting = Meeting::Local(LocalStore::default());
        a_token_rejected_on_every_node_is_refreshed_once(&meeting).await;
    });
}

/// The same through a real Redis: the renewal lock and the shared tokens
/// are Redis's (`SET NX PX`, the compare-and-delete), and the lock is
/// released afterwards.
#[test]
fn over_redis_a_token_rejected_on_every_node_is_refreshed_once_for_the_fleet() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        a_token_rejected_on_every_node_is_refreshed_once(&Meeting::Redis(&redis)).await;
        shared_through(&redis);
    });
}

/// The tokens of `a` are shared in `redis`, and its renewal lock is free.
fn shared_through(redis: &RedisServer) {
    let dump = redis_dump(redis);
    assert!(dump.contains("t:oauth:a = "), "{dump}");
    assert_eq!(
        redis.query(&["GET", "t:lock:oauth:a"]).unwrap(),
        Reply::Nil,
        "{dump}"
    );
}

/// Waits until every node that meets in Redis has joined the fleet.
async fn joined(nodes: &[Node], meeting: &Meeting<'_>) {
    if let Meeting::Local(_) = meeting {
        return;
    }
    for node in nodes {
        let joined = || async {
            let view = node.registry.send(FleetOverview).await.unwrap().unwrap();
            matches!(view.store, StoreHealth::Up { .. })
        };
        assert!(
            mcp_test_support::wait_until_async(Duration::from_secs(10), joined).await,
            "a node did not join the fleet"
        );
    }
}

/// Every Redis key and its value, as text.
fn redis_dump(redis: &RedisServer) -> String {
    let Reply::List(keys) = redis.query(&["KEYS", "*"]).unwrap() else {
        panic!("KEYS answers a list");
    };
    let mut dump = String::new();
    for key in keys {
        let key = key.text().unwrap().to_owned();
        let value = match redis.query(&["GET", &key]).unwrap() {
            Reply::Text(value) => value,
            other => format!("{other:?}"),
        };
        dump += &format!("{key} = {value}\n");
    }
    dump
}

/// Every access and refresh token in the nodes' token files.
async fn tokens_held(nodes: &[Node], seen: &mut Vec<String>) {
    use oauth2::TokenResponse;
    for node in nodes {
        let fresh = oauth::TokenFile::new(oauth_settings(&node.config, "a").token_file);
        let stored = fresh.credentials().await.unwrap().unwrap();
        let token = stored.token_response.unwrap();
        seen.push(token.access_token().secret().clone());
        if let Some(refresh) = token.refresh_token() {
            seen.push(refresh.secret().clone());
        }
    }
    seen.sort();
    seen.dedup();
}

/// Over a real Redis: one refresh for three nodes; no token, old or new,
/// is in Redis in the clear (nor in any log line, status or Debug output).
#[test]
fn over_redis_one_refresh_for_the_fleet_and_no_token_in_the_clear() {
    let captured = capture_logs();
    run(move || async move {
        let redis = RedisServer::start().unwrap();
        let (auth, upstream) = protected(LIFETIME).await;
        let meeting = Meeting::Redis(&redis);
        let nodes = nodes(&upstream, &meeting, 3, &["a"], Login::Once).await;
        joined(&nodes, &meeting).await;
        first_calls(&nodes).await;
        let mut tokens = Vec::new();
        tokens_held(&nodes, &mut tokens).await;
        until_refresh_is_due(&nodes[0].token_file("a"), LIFETIME).await;
        calls_at_once(&nodes, 24).await;
        assert_eq!(auth.counts().refreshes, 1, "one refresh for the fleet");
        tokens_held(&nodes, &mut tokens).await;
        assert_eq!(tokens.len(), 4, "two access and two refresh tokens");

        let dump = redis_dump(&redis);
        assert!(dump.contains("t:oauth:a = "), "{dump}");
        let mut shown = dump;
        for node in &nodes {
            shown += &format!("{:?}", node.registry.send(Status).await.unwrap());
            shown += &format!("{:?}", node.registry.send(FleetOverview).await.unwrap());
        }
        shown += &captured.text();
        for token in &tokens {
            assert!(!shown.contains(token.as_str()), "a token in the clear");
        }
    });
}

/// A value that does not open (one sealed for another connection, or
/// garbage) is ignored and counted, never a retirement: the node refreshes
/// by itself and the call goes through.
#[test]
fn tokens_that_do_not_open_are_ignored_and_counted() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let (auth, upstream) = protected(Duration::from_secs(3600)).await;
        let meeting = Meeting::Redis(&redis);
        let nodes = nodes(&upstream, &meeting, 1, &["a", "b"], Login::EachNode).await;
        let node = &nodes[0].registry;
        for name in ["a", "b"] {
            assert_eq!(echo_text(node, name).await, "hi");
        }
        // A renewal of `a` shares its tokens.
        auth.expire_access_tokens();
        assert_eq!(echo_text(node, "a").await, "hi");
        assert_eq!(auth.counts().refreshes, 1);
        let sealed = redis.query(&["GET", "t:oauth:a"]).unwrap();
        let sealed = sealed.text().expect("a's tokens are shared").to_owned();

        // `a`'s tokens moved to `b`: they do not open there.
        redis.query(&["SET", "t:oauth:b", &sealed]).unwrap();
        auth.expire_access_tokens();
        assert_eq!(echo_text(node, "b").await, "hi");
        assert_eq!(auth.counts().refreshes, 2, "b refreshed by itself");
        // Garbage.
        redis
            .query(&["SET", "t:oauth:a", "bm90IGEgc2VhbA=="])
            .unwrap();
        assert_eq!(echo_text(node, "a").await, "hi");
        assert_eq!(auth.counts().refreshes, 3, "a refreshed by itself");

        let view = node.send(FleetOverview).await.unwrap().unwrap();
        assert_eq!(
            view.refused,
            vec![
                (Refusal::Unauthenticated, 0),
                (Refusal::Malformed, 0),
                (Refusal::UnknownVersion, 0),
                (Refusal::UnknownName, 0),
                (Refusal::TooFar, 0),
                (Refusal::Unsealed, 2),
                (Refusal::Stale, 0),
                (Refusal::Replayed, 0),
            ]
        );
        for status in node.send(Status).await.unwrap() {
            assert_eq!(status.state, ConnectionState::Ready, "{}", status.name);
        }
    });
}

/// Redis down: each node refreshes alone (each with its own login here: a
/// copied login's rotating refresh token cannot serve two nodes that do
/// not coordinate), and every call succeeds.
#[test]
fn without_redis_each_node_refreshes_alone() {
    run(|| async {
        let mut redis = RedisServer::start().unwrap();
        let (auth, upstream) = protected(Duration::from_secs(3600)).await;
        let nodes = nodes(
            &upstream,
            &Meeting::Redis(&redis),
            2,
            &["a"],
            Login::EachNode,
        )
        .await;
        first_calls(&nodes).await;
        redis.stop();
        auth.expire_access_tokens();
        calls_at_once(&nodes, 8).await;
        assert_eq!(auth.counts().refreshes, 2, "one per node");
    });
}

/// `client_credentials`: the fleet asks for one token, not one per node,
/// and one new token after a 401 on every node.
async fn client_credentials_tokens_are_asked_for_once(meeting: &Meeting<'_>) {
    let (auth, upstream) = protected(Duration::from_secs(3600)).await;
    auth.register_client("machine", Some("s3cret"), &[]);
    let redis = match meeting {
        Meeting::Local(_) => "redis://127.0.0.1:9".to_owned(),
        Meeting::Redis(redis) => redis.url(),
    };
    let mut nodes = Vec::new();
    for n in 0..3 {
        let state = tempfile::tempdir().unwrap();
        let config = node_config(
            state.path(),
            &format!("n{n}"),
            &redis,
            &upstream,
            &["a"],
            ", grant = \"client_credentials\", client_id = \"machine\", \
             client_secret_env = \"MACHINE_SECRET\"",
        );
        nodes.push(Node {
            registry: registry(config.clone(), meeting),
            state,
            config,
        });
    }
    joined(&nodes, meeting).await;
    first_calls(&nodes).await;
    assert_eq!(auth.counts().token_requests, 1, "one token for the fleet");
    auth.expire_access_tokens();
    calls_at_once(&nodes, 24).await;
    assert_eq!(
        auth.counts().token_requests,
        2,
        "one new token after the 401"
    );
    assert!(
        nodes
            .iter()
            .all(|node| !node.state.path().join("oauth").exists())
    );
}

#[test]
fn client_credentials_tokens_are_asked_for_once_for_the_fleet() {
    run(|| async {
        let meeting = Meeting::Local(LocalStore::default());
        client_credentials_tokens_are_asked_for_once(&meeting).await;
    });
}

#[test]
fn over_redis_client_credentials_tokens_are_asked_for_once_for_the_fleet() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        client_credentials_tokens_are_asked_for_once(&Meeting::Redis(&redis)).await;
        shared_through(&redis);
    });
}
