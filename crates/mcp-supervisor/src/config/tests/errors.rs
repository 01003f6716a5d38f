//! Refused files: every broken rule names its key, unknown keys list the
//! choices, and syntax errors give a position.

use super::*;

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
