//! Loading whole documents: defaults, overrides, secrets, import round trip.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, Path::new("test.toml"), &no_env)
}

fn http(conn: &ConnectionConfig) -> &HttpTransport {
    match &conn.transport {
        Transport::Http(h) => h,
        Transport::Stdio(_) => panic!("expected http"),
    }
}

fn stdio(conn: &ConnectionConfig) -> &StdioTransport {
    match &conn.transport {
        Transport::Stdio(s) => s,
        Transport::Http(_) => panic!("expected stdio"),
    }
}

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
fn http_connection_with_token_env_and_headers() {
    let env = |name: &str| (name == "GH_TOKEN").then(|| "ghp_abc".to_owned());
    let config = Config::from_toml_str(
        r#"
        [connections.github]
        transport = "http"
        url = "https://example.invalid/mcp"
        auth = { kind = "bearer", token_env = "GH_TOKEN" }
        headers = { "X-Team" = "agents", "X-Other" = "v" }
        allowed_tools = ["search"]
        "#,
        Path::new("test.toml"),
        &env,
    )
    .unwrap();
    let conn = config.connection("github").unwrap();
    assert_eq!(conn.transport.kind(), "http");
    let h = http(conn);
    assert_eq!(h.url, "https://example.invalid/mcp");
    assert_eq!(
        h.auth
            .as_ref()
            .and_then(UpstreamAuth::bearer)
            .map(BearerToken::expose),
        Some("ghp_abc")
    );
    let headers: Vec<(&str, &str)> = h
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), secrecy::ExposeSecret::expose_secret(v)))
        .collect();
    assert_eq!(headers, [("X-Other", "v"), ("X-Team", "agents")]);
    assert!(conn.allows_tool("search") && !conn.allows_tool("delete"));
}

#[test]
fn relative_token_file_and_cwd_resolve_against_the_config_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    std::fs::write(dir.path().join("secrets/token"), "file-token\n").unwrap();
    let origin = dir.path().join("supervisor.toml");
    let config = Config::from_toml_str(
        r#"
        [gateway]
        auth = { kind = "bearer", token_file = "secrets/token" }

        [connections.files]
        transport = "stdio"
        command = "server"
        cwd = "data"

        [connections.abs]
        transport = "stdio"
        command = "server"
        cwd = "/srv"
        "#,
        &origin,
        &no_env,
    )
    .unwrap();
    // Exactly one trailing newline is trimmed.
    assert_eq!(
        config.gateway.auth.as_ref().map(BearerToken::expose),
        Some("file-token")
    );
    assert_eq!(
        stdio(config.connection("files").unwrap()).cwd,
        Some(dir.path().join("data"))
    );
    assert_eq!(
        stdio(config.connection("abs").unwrap()).cwd,
        Some(PathBuf::from("/srv"))
    );
}

#[test]
fn token_file_trims_crlf_but_refuses_inner_whitespace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("crlf"), "tok\r\n").unwrap();
    std::fs::write(dir.path().join("two"), "tok\n\n").unwrap();
    let origin = dir.path().join("c.toml");
    let load = |file: &str| {
        Config::from_toml_str(
            &format!("[gateway]\nauth = {{ kind = \"bearer\", token_file = \"{file}\" }}\n"),
            &origin,
            &no_env,
        )
    };
    assert_eq!(load("crlf").unwrap().gateway.auth.unwrap().expose(), "tok");
    let err = load("two").unwrap_err().to_string();
    assert!(
        err.contains("gateway.auth.token_file: the token contains whitespace"),
        "{err}"
    );
}

#[test]
fn origin_without_directory_uses_current_directory() {
    let err = Config::from_toml_str(
        "[gateway]\nauth = { kind = \"bearer\", token_file = \"missing-token\" }\n",
        Path::new("c.toml"),
        &no_env,
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConfigError::TokenFile { path, .. } if path == Path::new("./missing-token")),
        "{err:?}"
    );
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
        config.gateway.auth.as_ref().map(BearerToken::expose),
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
    let a = &config.admin;
    assert_eq!(a.auth.as_ref().map(BearerToken::expose), Some("adm1n"));
    assert_eq!(a.allowed_hosts, ["admin.example:8443"]);
    assert_eq!(a.header_timeout, Duration::from_millis(500));
    assert_eq!(a.idle_timeout, Duration::from_secs(1));
    assert_eq!(a.max_connections, 2);
    // The admin token never shows in Debug.
    assert!(!format!("{config:?}").contains("adm1n"));
}

#[test]
fn connection_limit_violations_name_the_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[gateway]\nheader_timeout = \"0s\"",
            "gateway.header_timeout: must be greater than zero",
        ),
        (
            "[gateway]\nbody_timeout = \"soon\"",
            "gateway.body_timeout: invalid duration",
        ),
        (
            "[gateway]\nidle_timeout = 30",
            "gateway.idle_timeout: expected a string, found an integer",
        ),
        (
            "[gateway]\nmax_connections = 0",
            "gateway.max_connections: must be greater than zero",
        ),
        (
            "[gateway]\nmax_sessions = 2000000",
            "gateway.max_sessions: must be at most 1000000",
        ),
        (
            "[gateway]\nmax_sessions = 8\nmax_sessions_per_client = 9",
            "gateway.max_sessions_per_client: must be at most max_sessions (8)",
        ),
        (
            "[gateway]\nmax_sessions_per_client = 0",
            "gateway.max_sessions_per_client: must be greater than zero",
        ),
        (
            "[gateway]\nsession_idle_timeout = \"-1s\"",
            "gateway.session_idle_timeout: must be a positive duration",
        ),
        (
            "[admin]\nauth = { kind = \"bearer\" }",
            "admin.auth: set exactly one of 'token', 'token_env' or 'token_file'",
        ),
        (
            "[admin]\nauth = { kind = \"bearer\", token_env = \"UNSET_ADMIN_TOKEN\" }",
            "admin.auth.token_env",
        ),
        (
            "[admin]\nallowed_hosts = []",
            "admin.allowed_hosts: must list at least one host",
        ),
        (
            "[admin]\nallowed_hosts = [\"a/b\"]",
            "admin.allowed_hosts[0]",
        ),
        (
            "[admin]\nheader_timeout = \"0ms\"",
            "admin.header_timeout: must be greater than zero",
        ),
        (
            "[admin]\nidle_timeout = \"400days\"",
            "admin.idle_timeout: must be at most 365 days",
        ),
        (
            "[admin]\nmax_connections = -1",
            "admin.max_connections: must be greater than zero",
        ),
        (
            "[admin]\nmax_sessions = 3",
            "admin.max_sessions: unknown key 'max_sessions'",
        ),
    ];
    for (text, expected) in cases {
        let err = load(text).expect_err(text).to_string();
        assert!(err.starts_with("test.toml: "), "{err}");
        assert!(
            err.contains(expected),
            "for {text:?}\n got: {err}\nwant: {expected}"
        );
    }
}

#[test]
fn rule_violations_name_the_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[gateway]\npath = \"mcp\"",
            "gateway.path: must start with '/'",
        ),
        (
            "[gateway]\nallowed_hosts = []",
            "gateway.allowed_hosts: must list at least one host",
        ),
        (
            "[gateway]\nallowed_hosts = [\"ok\", \" \"]",
            "gateway.allowed_hosts[1]",
        ),
        (
            "[gateway]\nlisten = \"localhost:1\"",
            "gateway.listen: expected an IP address",
        ),
        (
            "[gateway]\nlisten = \"127.0.0.1:7301\"",
            "admin.listen: must differ from gateway.listen",
        ),
        (
            "[supervisor.quarantine]\nbase_cooldown = \"10m\"",
            "supervisor.quarantine.max_cooldown: must be at least base_cooldown",
        ),
        (
            "[supervisor]\nrestart_budget = { restarts = 0 }",
            "supervisor.restart_budget.restarts",
        ),
        (
            "[supervisor]\nmax_attempts = 1000",
            "supervisor.max_attempts: must be at most 100",
        ),
        (
            "[supervisor]\nmax_attempts = 1.5",
            "supervisor.max_attempts: expected an integer, found a float",
        ),
        (
            "[connections.a]\ncommand = \"x\"",
            "connections.a.transport: missing required key",
        ),
        (
            "[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nretry_calls = \"maybe\"",
            "connections.a.retry_calls: unknown value \"maybe\"",
        ),
        (
            "[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nprotocol = \"2024-11-05\"",
            "connections.a.protocol: unknown value \"2024-11-05\"; expected \"newest\", \"2025-11-25\" or \"2026-07-28\"",
        ),
        (
            "[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nallowed_tools = [\"t\", \"t\"]",
            "connections.a.allowed_tools[1]: lists \"t\" twice",
        ),
        (
            "[connections.a]\ntransport = \"stdio\"\ncommand = \"  \"",
            "connections.a.command: must not be empty",
        ),
        (
            "[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nenv = { \"A=B\" = \"v\" }",
            "connections.a.env.\"A=B\": not a valid environment variable name",
        ),
        (
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nheaders = { \"Bad Name\" = \"v\" }",
            "connections.a.headers.\"Bad Name\": not a valid HTTP header name",
        ),
        (
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nheaders = { X = \"a\\nb\" }",
            "connections.a.headers.X: the header value contains a line break",
        ),
        (
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nheaders = { Content-Type = \"x\" }",
            "connections.a.headers.Content-Type: this header is set by the MCP transport",
        ),
        (
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nheaders = { X = \"1\", x = \"2\" }",
            "connections.a.headers.x: duplicate header",
        ),
        (
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nheaders = { Authorization = \"Basic x\" }\nauth = { kind = \"bearer\", token = \"t\" }",
            "connections.a.headers.Authorization: conflicts with 'auth'",
        ),
        (
            "[connections.a]\ntransport = \"http\"\nurl = \"https://u:p@h/\"",
            "connections.a.url: the URL must not contain credentials",
        ),
        (
            "[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nauth = { kind = \"bearer\", token = \"t\" }",
            "connections.a.auth: 'auth' is only valid for transport = \"http\"",
        ),
        (
            "[gateway]\nauth = { token = \"t\" }",
            "gateway.auth.kind: missing required key 'kind'",
        ),
        (
            "[gateway]\nauth = { kind = \"basic\", token = \"t\" }",
            "gateway.auth.kind: unknown auth kind",
        ),
        (
            "[gateway]\nauth = { kind = \"bearer\" }",
            "gateway.auth: set exactly one of 'token', 'token_env' or 'token_file' (none is set)",
        ),
        (
            "[gateway]\nauth = { kind = \"bearer\", token = \"\" }",
            "gateway.auth.token: the token is empty",
        ),
        (
            "[gateway]\nauth = { kind = \"bearer\", token = \"a b\" }",
            "gateway.auth.token: the token contains whitespace",
        ),
        (
            "[gateway]\nexpose = \"all\"",
            "gateway.expose: unknown value \"all\"; expected \"namespaced\", \"meta\" or \"both\"",
        ),
        (
            "[gateway]\nprefix = \"sometimes\"",
            "gateway.prefix: unknown value \"sometimes\"; expected \"always\", \"auto\" or \"never\"",
        ),
        (
            "connections = 3",
            "connections: expected a table, found an integer",
        ),
        (
            "[supervisor]\ncall_timeout = 30",
            "supervisor.call_timeout: expected a string, found an integer",
        ),
    ];
    for (text, expected) in cases {
        let err = load(text).expect_err(text).to_string();
        assert!(err.starts_with("test.toml: "), "{err}");
        assert!(
            err.contains(expected),
            "for {text:?}\n got: {err}\nwant: {expected}"
        );
    }
}

#[test]
fn unknown_key_is_in_the_key_path_with_the_choices() {
    let err = load("[admin]\nlisten = \"127.0.0.1:1\"\nport = 3\n").unwrap_err();
    assert_eq!(err.key(), Some("admin.port"));
    let text = err.to_string();
    assert!(
        text.contains("unknown key 'port'; expected one of: listen"),
        "{text}"
    );
    assert!(text.contains("(line 3, column 1)"), "{text}");
}

#[test]
fn syntax_errors_have_a_position() {
    let err = load("[gateway]\npath = \"/mcp\n").unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::Syntax {
                location: Location { line: 2, .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("test.toml: line 2, column "),
        "{err}"
    );
}

#[test]
fn equality_sees_secret_changes() {
    let env_a = |_: &str| Some("one".to_owned());
    let env_b = |_: &str| Some("two".to_owned());
    let text = "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nauth = { kind = \"bearer\", token_env = \"T\" }\n";
    let a = Config::from_toml_str(text, Path::new("x"), &env_a).unwrap();
    let a2 = Config::from_toml_str(text, Path::new("x"), &env_a).unwrap();
    let b = Config::from_toml_str(text, Path::new("x"), &env_b).unwrap();
    assert_eq!(a.connections[0], a2.connections[0]);
    assert_ne!(a.connections[0], b.connections[0]);
}

#[test]
fn import_round_trip() {
    let json = r#"{
      "mcpServers": {
        "files": {
          "command": "npx",
          "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"],
          "env": { "LOG_LEVEL": "warn", "QUOTE": "a \"b\" \\ c" },
          "cwd": "/srv"
        },
        "github": {
          "type": "streamable-http",
          "url": "https://example.invalid/mcp",
          "headers": { "Authorization": "Bearer ghp_SECRETVALUE", "X-Team": "agents" }
        },
        "legacy": { "type": "sse", "url": "http://127.0.0.1:9000/sse", "autoApprove": [] },
        "off": { "command": "x", "disabled": true },
        "notes-one": { "command": "y", "description": "Does things" }
      }
    }"#;
    let toml = import_mcp_servers(json).unwrap();
    assert!(!toml.contains("ghp_SECRETVALUE"), "{toml}");
    assert!(toml.contains("export GITHUB_TOKEN"), "{toml}");
    assert!(toml.contains("legacy SSE transport"), "{toml}");
    assert!(
        toml.contains("Ignored client-specific keys: autoApprove"),
        "{toml}"
    );
    // Deterministic.
    assert_eq!(import_mcp_servers(json).unwrap(), toml);

    let env = |name: &str| (name == "GITHUB_TOKEN").then(|| "ghp_SECRETVALUE".to_owned());
    let config = Config::from_toml_str(&toml, Path::new("imported.toml"), &env).unwrap();
    let names: Vec<&str> = config.connections.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["files", "github", "legacy", "notes-one"]);

    let files = stdio(config.connection("files").unwrap());
    assert_eq!(files.command, "npx");
    assert_eq!(
        files.args,
        ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
    );
    let env: Vec<(&str, &str)> = files
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), secrecy::ExposeSecret::expose_secret(v)))
        .collect();
    assert_eq!(env, [("LOG_LEVEL", "warn"), ("QUOTE", "a \"b\" \\ c")]);
    assert_eq!(files.cwd.as_deref(), Some(Path::new("/srv")));

    let github = http(config.connection("github").unwrap());
    assert_eq!(github.url, "https://example.invalid/mcp");
    assert_eq!(
        github
            .auth
            .as_ref()
            .and_then(UpstreamAuth::bearer)
            .map(BearerToken::expose),
        Some("ghp_SECRETVALUE")
    );
    assert_eq!(github.headers.len(), 1);
    assert_eq!(github.headers[0].0, "X-Team");
    assert_eq!(
        http(config.connection("legacy").unwrap()).url,
        "http://127.0.0.1:9000/sse"
    );
    assert_eq!(
        config.connection("notes-one").unwrap().notes.as_deref(),
        Some("Does things")
    );
}

#[test]
fn import_refuses_what_it_cannot_express() {
    let cases: &[(&str, &str)] = &[
        ("not json", "not valid JSON"),
        ("{}", "mcpServers"),
        (
            r#"{"mcpServers": {"bad name": {"command": "x"}}}"#,
            "server 'bad name': invalid connection name",
        ),
        (
            r#"{"mcpServers": {"a__b": {"command": "x"}}}"#,
            "server 'a__b'",
        ),
        (
            r#"{"mcpServers": {"a": {}}}"#,
            "server 'a': needs \"command\"",
        ),
        (
            r#"{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}"#,
            "has both",
        ),
        (
            r#"{"mcpServers": {"a": {"type": "websocket", "url": "ws://h/"}}}"#,
            "unsupported \"type\"",
        ),
        (
            r#"{"mcpServers": {"a": {"type": "stdio", "url": "http://h/"}}}"#,
            "does not match",
        ),
        (
            r#"{"mcpServers": {"a": {"command": 3}}}"#,
            "\"command\" must be a string",
        ),
        (
            r#"{"mcpServers": {"a": {"url": "http://h/", "headers": {"Content-Type": "x"}}}}"#,
            "connections.a.headers.Content-Type",
        ),
    ];
    for (json, expected) in cases {
        let err = import_mcp_servers(json).expect_err(json).to_string();
        assert!(
            err.contains(expected),
            "for {json}\n got: {err}\nwant: {expected}"
        );
    }
}

#[test]
fn summary_lists_everything_in_order() {
    let env = |_: &str| Some("t".to_owned());
    let config = Config::from_toml_str(
        r#"
        [gateway]
        auth = { kind = "bearer", token_env = "T" }
        [connections.web]
        transport = "http"
        url = "https://user-less.example/mcp?key=v"
        auth = { kind = "bearer", token_env = "T" }
        headers = { X-A = "1", X-B = "2" }
        allowed_tools = ["a", "b"]
        [connections.cli]
        transport = "stdio"
        command = "srv"
        args = ["--key", "v"]
        env = { K = "v" }
        cwd = "/tmp"
        allowed_tools = []
        max_concurrent_calls = 1
        protocol = "2026-07-28"
        "#,
        Path::new("x.toml"),
        &env,
    )
    .unwrap();
    let expected = "\
gateway  listen=127.0.0.1:7300 path=/mcp expose=namespaced prefix=always auth=bearer allowed_hosts=localhost,127.0.0.1,[::1] max_body_bytes=4194304 max_connections=512 max_sessions=256
admin    listen=127.0.0.1:7301 auth=none allowed_hosts=localhost,127.0.0.1,[::1] max_connections=32
connections: 2
  cli  stdio  command=srv args=2 env=K cwd=/tmp tools=none concurrency=1 queue=64 retry=safe protocol=2026-07-28
  web  http   url=https://user-less.example/mcp?[REDACTED] auth=bearer headers=X-A,X-B tools=a,b concurrency=4 queue=64 retry=safe
";
    assert_eq!(summary(&config), expected);
}

fn load_with_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Config::from_toml_str(text, Path::new("/etc/mcp/test.toml"), &move |name| {
        vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
}

const OAUTH_CONNECTION: &str =
    "[connections.docs]\ntransport = \"http\"\nurl = \"https://docs.example/mcp\"\n";

#[test]
fn an_oauth_connection_keeps_its_tokens_under_the_state_directory() {
    let text = format!(
        "{OAUTH_CONNECTION}auth = {{ kind = \"oauth\", client_id = \"app\", \
         client_secret_env = \"DOCS_SECRET\", scopes = [\"read\", \"write\"], \
         authorization_server = \"https://login.example/tenant\" }}\n"
    );
    let config = load_with_env(
        &text,
        &[("HOME", "/home/u"), ("DOCS_SECRET", "CANARY-s3cret")],
    )
    .unwrap();
    let auth = http(config.connection("docs").unwrap())
        .auth
        .as_ref()
        .unwrap();
    let settings = auth.oauth().unwrap();
    assert_eq!(auth.kind(), "oauth");
    assert_eq!(settings.client_id.as_deref(), Some("app"));
    assert_eq!(settings.client_metadata_url, None);
    assert_eq!(settings.scopes, ["read", "write"]);
    assert_eq!(settings.grant, OAuthGrant::AuthorizationCode);
    assert_eq!(
        settings.authorization_server.as_deref(),
        Some("https://login.example/tenant")
    );
    assert_eq!(
        settings.token_file,
        Path::new("/home/u/.local/state/mcp-supervisor/oauth/docs.json")
    );
    let debug = format!("{config:?}");
    assert!(!debug.contains("CANARY"), "{debug}");
    assert!(summary(&config).contains("auth=oauth"));

    // XDG_STATE_HOME wins over HOME; supervisor.state_dir over both, and a
    // relative one is the config file's neighbour.
    let xdg = load_with_env(
        &text,
        &[
            ("XDG_STATE_HOME", "/state"),
            ("HOME", "/home/u"),
            ("DOCS_SECRET", "x"),
        ],
    )
    .unwrap();
    assert_eq!(
        xdg.supervisor.state_dir.as_deref(),
        Some(Path::new("/state/mcp-supervisor"))
    );
    let own = load_with_env(
        &format!("[supervisor]\nstate_dir = \"tokens\"\n{text}"),
        &[("HOME", "/home/u"), ("DOCS_SECRET", "x")],
    )
    .unwrap();
    assert_eq!(
        own.supervisor.state_dir.as_deref(),
        Some(Path::new("/etc/mcp/tokens"))
    );
}

#[test]
fn oauth_keys_are_checked_with_the_key_named() {
    let cases = [
        (
            "auth = { kind = \"oauth\", token = \"t\" }",
            "connections.docs.auth.token",
            "only valid for kind = \"bearer\"",
        ),
        (
            "auth = { kind = \"bearer\", token = \"t\", scopes = [\"a\"] }",
            "connections.docs.auth.scopes",
            "only valid for kind = \"oauth\"",
        ),
        (
            "auth = { kind = \"oauth\", grant = \"client_credentials\", client_id = \"svc\" }",
            "connections.docs.auth.grant",
            "'client_secret_env'",
        ),
        (
            "auth = { kind = \"oauth\", grant = \"password\" }",
            "connections.docs.auth.grant",
            "unknown grant",
        ),
        (
            "auth = { kind = \"oauth\", client_secret_env = \"S\" }",
            "connections.docs.auth.client_secret_env",
            "needs its 'client_id'",
        ),
        (
            "auth = { kind = \"oauth\", scopes = [\"a b\"] }",
            "connections.docs.auth.scopes[0]",
            "one non-empty word",
        ),
        (
            "auth = { kind = \"oauth\", authorization_server = \"ftp://x\" }",
            "connections.docs.auth.authorization_server",
            "",
        ),
        (
            "auth = { kind = \"kerberos\" }",
            "connections.docs.auth.kind",
            "\"bearer\" and \"oauth\"",
        ),
    ];
    for (auth, key, says) in cases {
        let err = load_with_env(
            &format!("{OAUTH_CONNECTION}{auth}\n"),
            &[("HOME", "/h"), ("S", "x")],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(key) && err.contains(says), "{auth}: {err}");
    }
    let gateway = load("[gateway]\nauth = { kind = \"oauth\" }\n")
        .unwrap_err()
        .to_string();
    assert!(
        gateway.contains("gateway.auth.kind")
            && gateway.contains("for connections to upstream servers"),
        "{gateway}"
    );
    // No HOME, no XDG_STATE_HOME, no state_dir: nowhere to keep tokens.
    let nowhere = load(&format!(
        "{OAUTH_CONNECTION}auth = {{ kind = \"oauth\" }}\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(nowhere.contains("set supervisor.state_dir"), "{nowhere}");
}

#[test]
fn import_maps_what_desktop_clients_say_about_oauth() {
    let json = r#"{
      "mcpServers": {
        "docs": { "url": "https://docs.example/mcp",
                  "oauth": { "clientId": "my-app", "clientSecret": "CANARY-secret", "scopes": ["read", "write"] } },
        "mail": { "url": "https://mail.example/mcp",
                  "auth": { "CLIENT_ID": "m1", "scopes": "mail.read" } },
        "open": { "url": "https://open.example/mcp" }
      }
    }"#;
    let toml = import_mcp_servers(json).unwrap();
    assert!(!toml.contains("CANARY"), "{toml}");
    assert!(toml.contains("export DOCS_CLIENT_SECRET"), "{toml}");
    assert!(
        toml.contains("mcp-supervisor login --config FILE docs"),
        "{toml}"
    );
    assert!(toml.contains("If this server asks for a login"), "{toml}");
    let env = |name: &str| match name {
        "HOME" => Some("/home/u".to_owned()),
        "DOCS_CLIENT_SECRET" => Some("CANARY-secret".to_owned()),
        _ => None,
    };
    let config = Config::from_toml_str(&toml, Path::new("imported.toml"), &env).unwrap();
    let oauth_of = |name: &str| {
        http(config.connection(name).unwrap())
            .auth
            .as_ref()
            .and_then(UpstreamAuth::oauth)
            .cloned()
    };
    let docs = oauth_of("docs").unwrap();
    assert_eq!(docs.client_id.as_deref(), Some("my-app"));
    assert!(docs.client_secret.is_some());
    assert_eq!(docs.scopes, ["read", "write"]);
    let mail = oauth_of("mail").unwrap();
    assert_eq!(mail.client_id.as_deref(), Some("m1"));
    assert!(mail.client_secret.is_none());
    assert_eq!(mail.scopes, ["mail.read"]);
    assert!(oauth_of("open").is_none());
}

const FLEET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

#[test]
fn a_fleet_table_reads_its_store_key_and_name() {
    let config = load_with_env(
        "[gateway]\nlisten = \"10.0.0.5:7300\"\n\
         [fleet]\nredis = \"rediss://gw@redis.internal:6380/2\"\npassword_env = \"PW\"\n\
         key_env = \"KEY\"\nnode = \"gw-1\"\n",
        &[("PW", "hunter2"), ("KEY", FLEET_KEY)],
    )
    .unwrap();
    let fleet = config.fleet.unwrap();
    assert_eq!(fleet.redis.as_str(), "rediss://gw@redis.internal:6380/2");
    assert_eq!(
        fleet.password.as_ref().map(Password::expose),
        Some("hunter2")
    );
    assert_eq!(fleet.key.expose(), b"0123456789abcdef0123456789abcdef");
    assert_eq!(fleet.node, "gw-1");
    assert_eq!(fleet.namespace, "mcp-supervisor");
    assert_eq!(fleet.max_clock_skew, Duration::from_secs(2));
    assert_eq!(
        fleet.advertise.map(String::from),
        Some("http://10.0.0.5:7300/".to_owned())
    );
    let debug = format!(
        "{:?}",
        load_with_env(
            "[fleet]\nredis = \"redis://h\"\npassword_env = \"PW\"\nkey_env = \"KEY\"\n",
            &[("PW", "hunter2"), ("KEY", FLEET_KEY)],
        )
    );
    assert!(
        !debug.contains("hunter2") && !debug.contains(FLEET_KEY),
        "{debug}"
    );
    // Unset, the node is named after the host and the process.
    let node = load_with_env(
        "[fleet]\nredis = \"redis://h\"\nkey_env = \"KEY\"\n",
        &[("KEY", FLEET_KEY)],
    )
    .unwrap()
    .fleet
    .unwrap()
    .node;
    assert!(
        node.ends_with(&format!("-{}", std::process::id())),
        "{node}"
    );
}

#[test]
fn a_bad_fleet_table_says_what_is_wrong() {
    let cases = [
        ("[fleet]\nkey_env = \"KEY\"\n", "fleet.redis: is required"),
        (
            "[fleet]\nredis = \"redis://:hunter2@h\"\nkey_env = \"KEY\"\n",
            "fleet.redis: the URL must not contain a password; use 'password_env' or 'password_file'",
        ),
        (
            "[fleet]\nredis = \"http://h\"\nkey_env = \"KEY\"\n",
            "fleet.redis: must be a URL starting with redis:// or rediss://",
        ),
        (
            "[fleet]\nredis = \"redis://h\"\n",
            "fleet: set exactly one of 'key_env' or 'key_file'",
        ),
        (
            "[fleet]\nredis = \"redis://h\"\nkey_env = \"SHORT\"\n",
            "fleet.key_env: the fleet key must be 32 bytes, it is 5",
        ),
        (
            "[fleet]\nredis = \"redis://h\"\nkey_env = \"KEY\"\nnode = \"a b\"\n",
            "fleet.node: use 1 to 64 letters",
        ),
        (
            "[fleet]\nredis = \"redis://h\"\nkey_env = \"KEY\"\nmax_clock_skew = \"5m\"\n",
            "fleet.max_clock_skew: must be at most 60s",
        ),
    ];
    for (text, wanted) in cases {
        let error = load_with_env(text, &[("KEY", FLEET_KEY), ("SHORT", "aGVsbG8=")])
            .unwrap_err()
            .to_string();
        assert!(error.contains(wanted), "{text}\n{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }
}

fn load_env(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Config::from_toml_str(text, Path::new("test.toml"), &move |name| {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
}

fn telemetry(text: &str, env: &[(&str, &str)]) -> TelemetrySettings {
    load_env(text, env).unwrap().telemetry.expect("[telemetry]")
}

fn telemetry_error(text: &str) -> String {
    load_env(text, &[("KEY", "k1")]).unwrap_err().to_string()
}

#[test]
fn telemetry_is_off_without_its_table_whatever_the_environment_says() {
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")];
    assert!(load_env("", &env).unwrap().telemetry.is_none());
    // And OTEL_SDK_DISABLED switches a present table off.
    let off = load_env("[telemetry]\n", &[("OTEL_SDK_DISABLED", "true")]).unwrap();
    assert!(off.telemetry.is_none());
}

#[test]
fn an_empty_telemetry_table_takes_the_sdks_defaults() {
    let t = telemetry("[telemetry]\n", &[]);
    assert_eq!(t.endpoint.as_str(), "http://localhost:4318/");
    assert_eq!(t.protocol, OtlpProtocol::HttpProtobuf);
    assert!(t.headers.is_empty());
    assert_eq!(t.service_name, "mcp-supervisor");
    assert_eq!(t.sample_ratio.get(), 1.0);
    assert_eq!(t.timeout, Duration::from_secs(10));
    assert_eq!(t.batch_delay, Duration::from_secs(5));
    assert_eq!(t.max_queue, 2048);
    assert_eq!(t.metrics_interval, Duration::from_secs(60));
    assert!(!t.capture_content);
    let grpc = telemetry("[telemetry]\nprotocol = \"grpc\"\n", &[]);
    assert_eq!(grpc.endpoint.as_str(), "http://localhost:4317/");
}

#[test]
fn the_otel_variables_fill_only_what_the_table_leaves_out() {
    let env = [
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://env-collector:4318/base/",
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_SERVICE_NAME", "from-env"),
        ("OTEL_BSP_SCHEDULE_DELAY", "250"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "64"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "10000"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-env=from%20env,x-both=env"),
        ("KEY", "file-value"),
    ];
    let t = telemetry(
        "[telemetry]\nprotocol = \"http/protobuf\"\nservice_name = \"from-file\"\n\
         headers = { \"X-Both\" = { env = \"KEY\" } }\n",
        &env,
    );
    assert_eq!(t.protocol, OtlpProtocol::HttpProtobuf, "the file's");
    assert_eq!(t.endpoint.as_str(), "http://env-collector:4318/base");
    assert_eq!(t.service_name, "from-file");
    assert_eq!(t.batch_delay, Duration::from_millis(250));
    assert_eq!(t.max_queue, 64);
    assert_eq!(t.timeout, Duration::from_millis(1500));
    assert_eq!(t.metrics_interval, Duration::from_secs(10));
    assert_eq!(t.sample_ratio.get(), 0.25);
    let headers: Vec<(&str, &str)> = t
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), secrecy::ExposeSecret::expose_secret(v)))
        .collect();
    assert_eq!(headers, [("x-both", "file-value"), ("x-env", "from env")]);
}

#[test]
fn bad_telemetry_values_are_refused_naming_the_key() {
    for (text, key, problem) in [
        (
            "protocol = \"http/json\"",
            "telemetry.protocol",
            "not supported",
        ),
        (
            "protocol = \"udp\"",
            "telemetry.protocol",
            "expected \"grpc\"",
        ),
        (
            "sample_ratio = 1.5",
            "telemetry.sample_ratio",
            "from 0 to 1",
        ),
        (
            "sample_ratio = -0.1",
            "telemetry.sample_ratio",
            "from 0 to 1",
        ),
        (
            "endpoint = \"http://c:4318/?key=s3cret\"",
            "telemetry.endpoint",
            "query",
        ),
        (
            "endpoint = \"http://u:pw@c:4318\"",
            "telemetry.endpoint",
            "credentials",
        ),
        ("endpoint = \"ftp://c\"", "telemetry.endpoint", "http://"),
        (
            "protocol = \"grpc\"\nendpoint = \"https://c:4317\"",
            "telemetry.endpoint",
            "http/protobuf",
        ),
        ("max_queue = 0", "telemetry.max_queue", "greater than zero"),
        (
            "batch_delay = \"0s\"",
            "telemetry.batch_delay",
            "greater than zero",
        ),
        (
            "headers = { \"content-type\" = { env = \"KEY\" } }",
            "telemetry.headers.content-type",
            "set by the exporter",
        ),
        (
            "headers = { \"x-k\" = { env = \"MISSING\" } }",
            "telemetry.headers.x-k.env",
            "MISSING",
        ),
        (
            "headers = { \"x-k\" = {} }",
            "telemetry.headers.x-k",
            "exactly one",
        ),
        ("unknown = 1", "telemetry", "unknown"),
    ] {
        let error = telemetry_error(&format!("[telemetry]\n{text}\n"));
        assert!(error.contains(key), "{text}: {error}");
        assert!(error.contains(problem), "{text}: {error}");
        assert!(
            !error.contains("s3cret") && !error.contains(":pw@"),
            "{error}"
        );
    }
    // A header's value is never written in the file.
    let literal = telemetry_error("[telemetry]\nheaders = { \"x-k\" = \"s3cret\" }\n");
    assert!(
        literal.contains("{ env = \\\"NAME\\\" }") || literal.contains("env = "),
        "{literal}"
    );
    assert!(!literal.contains("s3cret"), "{literal}");
}

#[test]
fn telemetry_settings_debug_and_summary_show_header_names_only() {
    let t = telemetry(
        "[telemetry]\nheaders = { \"x-api-key\" = { env = \"KEY\" } }\n",
        &[("KEY", "canary-otlp-key")],
    );
    let debug = format!("{t:?}");
    assert!(
        debug.contains("x-api-key") && !debug.contains("canary-otlp-key"),
        "{debug}"
    );
    let config = load_env(
        "[telemetry]\nheaders = { \"x-api-key\" = { env = \"KEY\" } }\n",
        &[("KEY", "canary-otlp-key")],
    )
    .unwrap();
    let text = summary(&config);
    assert!(
        text.contains("telemetry endpoint=http://localhost:4318"),
        "{text}"
    );
    assert!(text.contains("headers=x-api-key"), "{text}");
    assert!(!text.contains("canary-otlp-key"), "{text}");
}
