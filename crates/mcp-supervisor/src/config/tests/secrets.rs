//! Secrets and the paths they come from: tokens from variables and files,
//! header values, paths relative to the config file, and secrets compared by
//! value.

use std::path::{Path, PathBuf};

use super::*;

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
        config
            .gateway
            .auth
            .as_ref()
            .and_then(CallerAuth::bearer)
            .map(BearerToken::expose),
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
    assert_eq!(
        load("crlf")
            .unwrap()
            .gateway
            .auth
            .unwrap()
            .bearer()
            .unwrap()
            .expose(),
        "tok"
    );
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
