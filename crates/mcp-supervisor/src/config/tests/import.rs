//! `import_mcp_servers`: a desktop client's `mcpServers` JSON to our TOML,
//! loaded back, and what it cannot express.

use std::path::Path;

use super::*;

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
