//! What a file's values become: an empty file's defaults, `[supervisor]`
//! values inherited and overridden per connection, and the gateway's, the
//! admin API's and the connections' settings as written.

use std::path::Path;
use std::time::Duration;

use super::*;

#[test]
fn empty_file_is_all_defaults() {
    let config = load("").unwrap();
    assert_eq!(config, Config::default());
    let s = &config.supervisor;
    assert_eq!(s.connect_timeout, Duration::from_secs(30));
    assert_eq!(s.call_timeout, Duration::from_secs(60));
    assert_eq!(s.list_timeout, Duration::from_secs(30));
    assert_eq!(s.max_attempts, 3);
    assert_eq!(s.shutdown_timeout, Duration::from_secs(10));
    assert_eq!(
        s.restart_budget,
        RestartBudget {
            restarts: 5,
            within: Duration::from_secs(60)
        }
    );
    assert_eq!(s.quarantine.base_cooldown, Duration::from_secs(30));
    assert_eq!(s.quarantine.max_cooldown, Duration::from_secs(300));
    assert_eq!(s.quarantine.retire_after, 3);
    let g = &config.gateway;
    assert_eq!(g.listen.to_string(), "127.0.0.1:7300");
    assert_eq!(g.path, "/mcp");
    assert_eq!(g.expose, Expose::Namespaced);
    assert_eq!(g.prefix, Prefix::Always);
    assert!(g.auth.is_none());
    assert_eq!(g.allowed_hosts, ["localhost", "127.0.0.1", "[::1]"]);
    assert_eq!(g.max_body_bytes, 4 * 1024 * 1024);
    assert_eq!(config.admin.listen.to_string(), "127.0.0.1:7301");
    assert!(config.connections.is_empty());
}

#[test]
fn connection_inherits_supervisor_values_and_overrides_them() {
    let config = load(
        r#"
        [supervisor]
        connect_timeout = "5s"
        call_timeout = "2m"
        list_timeout = "7s"
        max_attempts = 5

        [connections.plain]
        transport = "stdio"
        command = "server"

        [connections.tuned]
        transport = "stdio"
        command = "server"
        connect_timeout = "1s"
        call_timeout = "500ms"
        list_timeout = "2s"
        max_attempts = 1
        max_concurrent_calls = 1
        max_queued_calls = 2
        retry_calls = "never"
        protocol = "2025-11-25"
        allowed_tools = []
        notes = "tuned"
        "#,
    )
    .unwrap();
    let plain = config.connection("plain").unwrap();
    assert_eq!(plain.connect_timeout, Duration::from_secs(5));
    assert_eq!(plain.call_timeout, Duration::from_secs(120));
    assert_eq!(plain.list_timeout, Duration::from_secs(7));
    assert_eq!(plain.max_attempts, 5);
    assert_eq!(plain.max_concurrent_calls, 4);
    assert_eq!(plain.max_queued_calls, 64);
    assert_eq!(plain.retry_calls, RetryCalls::Safe);
    assert_eq!(plain.protocol, UpstreamProtocol::Newest);
    assert_eq!(plain.allowed_tools, None);

    let tuned = config.connection("tuned").unwrap();
    assert_eq!(tuned.connect_timeout, Duration::from_secs(1));
    assert_eq!(tuned.call_timeout, Duration::from_millis(500));
    assert_eq!(tuned.list_timeout, Duration::from_secs(2));
    assert_eq!(tuned.max_attempts, 1);
    assert_eq!(tuned.max_concurrent_calls, 1);
    assert_eq!(tuned.max_queued_calls, 2);
    assert_eq!(tuned.retry_calls, RetryCalls::Never);
    assert_eq!(tuned.protocol, UpstreamProtocol::V2025_11_25);
    assert_eq!(tuned.allowed_tools, Some(vec![]));
    assert_eq!(tuned.notes.as_deref(), Some("tuned"));
}

#[test]
fn connections_are_sorted_by_name() {
    let config = load(
        r#"
        [connections.zeta]
        transport = "stdio"
        command = "z"
        [connections.Alpha]
        transport = "stdio"
        command = "a"
        [connections.mid]
        transport = "stdio"
        command = "m"
        "#,
    )
    .unwrap();
    let names: Vec<&str> = config.connections.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["Alpha", "mid", "zeta"]);
    assert!(config.connection("Alpha").is_some() && config.connection("zeta").is_some());
}

#[test]
fn gateway_and_admin_settings() {
    let config = load(
        r#"
        [gateway]
        listen = "[::1]:0"
        path = "/"
        expose = "both"
        prefix = "auto"
        allowed_hosts = ["Example.COM"]
        max_body_bytes = 1024
        auth = { kind = "bearer", token = "t0k" }
        trusted_proxies = ["10.0.0.0/8"]
        forwarded_header = "forwarded"
        [admin]
        listen = "127.0.0.1:0"
        "#,
    )
    .unwrap();
    assert_eq!(
        config.gateway.forwarded_header,
        crate::config::ForwardedHeader::Forwarded
    );
    assert_eq!(
        load("").unwrap().gateway.forwarded_header,
        crate::config::ForwardedHeader::XForwardedFor
    );
    assert_eq!(config.gateway.listen.to_string(), "[::1]:0");
    assert_eq!(config.gateway.path, "/");
    assert_eq!(config.gateway.expose, Expose::Both);
    assert_eq!(config.gateway.prefix, Prefix::Auto);
    assert_eq!(config.gateway.allowed_hosts, ["example.com"]);
    assert_eq!(config.gateway.max_body_bytes, 1024);
    assert_eq!(
        config
            .gateway
            .auth
            .as_ref()
            .and_then(CallerAuth::bearer)
            .map(BearerToken::expose),
        Some("t0k")
    );
    assert_eq!(config.admin.listen.to_string(), "127.0.0.1:0");
}

#[test]
fn connection_limits_and_admin_protection_have_defaults() {
    let config = load("").unwrap();
    let g = &config.gateway;
    assert_eq!(g.header_timeout, Duration::from_secs(10));
    assert_eq!(g.body_timeout, Duration::from_secs(30));
    assert_eq!(g.idle_timeout, Duration::from_secs(120));
    assert_eq!(g.max_connections, 512);
    assert_eq!(g.max_sessions, 256);
    assert_eq!(g.max_sessions_per_client, 64);
    assert_eq!(g.session_idle_timeout, Duration::from_secs(300));
    assert_eq!(g.session_rest_after, Duration::from_secs(30));
    let a = &config.admin;
    assert!(a.auth.is_none());
    assert_eq!(a.allowed_hosts, ["localhost", "127.0.0.1", "[::1]"]);
    assert_eq!(a.header_timeout, Duration::from_secs(10));
    assert_eq!(a.idle_timeout, Duration::from_secs(120));
    assert_eq!(a.max_connections, 32);
}

#[test]
fn connection_limits_and_admin_protection_are_read() {
    let env = |name: &str| (name == "ADMIN_TOKEN").then(|| "adm1n".to_owned());
    let config = Config::from_toml_str(
        r#"
        [gateway]
        header_timeout = "2s"
        body_timeout = "3s"
        idle_timeout = "4s"
        max_connections = 5
        max_sessions = 6
        max_sessions_per_client = 3
        session_idle_timeout = "7m"
        session_rest_after = "45s"
        [admin]
        auth = { kind = "bearer", token_env = "ADMIN_TOKEN" }
        allowed_hosts = ["Admin.Example:8443"]
        header_timeout = "500ms"
        idle_timeout = "1s"
        max_connections = 2
        "#,
        Path::new("test.toml"),
        &env,
    )
    .unwrap();
    let g = &config.gateway;
    assert_eq!(g.header_timeout, Duration::from_secs(2));
    assert_eq!(g.body_timeout, Duration::from_secs(3));
    assert_eq!(g.idle_timeout, Duration::from_secs(4));
    assert_eq!(g.max_connections, 5);
    assert_eq!(g.max_sessions, 6);
    assert_eq!(g.max_sessions_per_client, 3);
    assert_eq!(g.session_idle_timeout, Duration::from_secs(420));
    assert_eq!(g.session_rest_after, Duration::from_secs(45));
    let a = &config.admin;
    assert_eq!(a.auth.as_ref().map(BearerToken::expose), Some("adm1n"));
    assert_eq!(a.allowed_hosts, ["admin.example:8443"]);
    assert_eq!(a.header_timeout, Duration::from_millis(500));
    assert_eq!(a.idle_timeout, Duration::from_secs(1));
    assert_eq!(a.max_connections, 2);
    // The admin token never shows in Debug.
    assert!(!format!("{config:?}").contains("adm1n"));
}
