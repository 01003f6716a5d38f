//! Every `*.toml` in the repository's `config/` directory must load (STYLE.md 7).
//! `token_env` variables are injected, so the examples need no real secrets.

use std::fs;
use std::path::{Path, PathBuf};

use mcp_supervisor::config::{Config, summary};

fn example_files() -> Vec<PathBuf> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"));
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

/// Defines every variable a config asks for.
fn any_env(name: &str) -> Option<String> {
    Some(format!("example-token-for-{name}"))
}

#[test]
fn every_example_config_loads() {
    let files = example_files();
    assert!(
        files.iter().any(|p| p.ends_with("example.toml")),
        "config/example.toml is missing: {files:?}"
    );
    for path in files {
        let text = fs::read_to_string(&path).unwrap();
        let config =
            Config::from_toml_str(&text, &path, &any_env).unwrap_or_else(|e| panic!("{e}"));
        // The summary must render for every example too.
        assert!(summary(&config).contains("gateway"));
    }
}

#[test]
fn example_toml_is_read_in_full() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/example.toml"
    ));
    let text = fs::read_to_string(path).unwrap();
    let config = Config::from_toml_str(&text, path, &any_env).unwrap();
    assert!(config.gateway.auth.is_some());
    assert!(config.admin.auth.is_some());
    let names: Vec<&str> = config.connections.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["files", "github"]);
    let github = config.connection("github").unwrap();
    assert_eq!(github.transport.kind(), "http");
    assert_eq!(github.call_timeout.as_secs(), 120);
    let files = config.connection("files").unwrap();
    assert_eq!(files.transport.kind(), "stdio");
    assert_eq!(files.max_concurrent_calls, 1);
}

#[test]
fn example_mentions_every_key() {
    // docs/CONFIG.md points at example.toml as the full reference: keep it full.
    let text = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/example.toml"
    ))
    .unwrap();
    let keys = [
        "[supervisor]",
        "connect_timeout",
        "call_timeout",
        "list_timeout",
        "max_attempts",
        "shutdown_timeout",
        "restart_budget",
        "restarts",
        "within",
        "[supervisor.quarantine]",
        "base_cooldown",
        "max_cooldown",
        "retire_after",
        "[gateway]",
        "listen",
        "path",
        "expose",
        "prefix",
        "auth",
        "kind",
        "token_env",
        "token_file",
        "allowed_hosts",
        "max_body_bytes",
        "header_timeout",
        "body_timeout",
        "idle_timeout",
        "max_connections",
        "max_sessions",
        "max_sessions_per_client",
        "trusted_proxies",
        "forwarded_header",
        "session_idle_timeout",
        "[admin]",
        "transport",
        "url",
        "headers",
        "allowed_tools",
        "notes",
        "max_concurrent_calls",
        "max_queued_calls",
        "retry_calls",
        "command",
        "args",
        "env",
        "cwd",
    ];
    for key in keys {
        assert!(
            text.contains(key),
            "config/example.toml does not mention {key}"
        );
    }
}
