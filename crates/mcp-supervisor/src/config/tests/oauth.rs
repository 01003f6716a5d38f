//! `auth = { kind = "oauth", … }`: where an OAuth connection's tokens are
//! kept, and its keys checked one by one.

use std::path::Path;

use super::*;

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
        gateway.contains("gateway.auth.issuer") && gateway.contains("missing required key"),
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
