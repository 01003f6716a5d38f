//! Canary test (docs/SUPERVISION.md, "Secrets and bad input"): a token planted
//! through every way a secret can enter the config must not come out of
//! `Debug`, `summary()`, or any error message.

use std::path::Path;

use mcp_supervisor::config::{Config, Transport, UpstreamAuth, import_mcp_servers, summary};

const CANARY: &str = "CANARY-7f3a9c-SECRET";

fn assert_clean(what: &str, text: &str) {
    assert!(
        !text.contains(CANARY) && !text.contains("7f3a9c"),
        "canary leaked through {what}:\n{text}"
    );
}

fn canary_env(name: &str) -> Option<String> {
    (name == "CANARY_TOKEN").then(|| CANARY.to_owned())
}

/// Every secret-bearing key holds the canary.
fn planted_config() -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), format!("{CANARY}\n")).unwrap();
    let text = format!(
        r#"
        [gateway]
        auth = {{ kind = "bearer", token = "{CANARY}" }}

        [connections.by-env]
        transport = "http"
        url = "https://example.invalid/mcp?api_key={CANARY}"
        auth = {{ kind = "bearer", token_env = "CANARY_TOKEN" }}
        headers = {{ "X-Api-Key" = "{CANARY}" }}

        [connections.by-file]
        transport = "http"
        url = "http://127.0.0.1:9/mcp"
        auth = {{ kind = "bearer", token_file = "token" }}

        [connections.child]
        transport = "stdio"
        command = "server"
        args = ["--api-key", "{CANARY}"]
        env = {{ API_KEY = "{CANARY}" }}
        "#
    );
    let config = Config::from_toml_str(&text, &dir.path().join("c.toml"), &canary_env).unwrap();
    (dir, config)
}

#[test]
fn planted_secrets_are_really_loaded() {
    // Guards the other tests: if loading dropped the canary they would pass vacuously.
    let (_dir, config) = planted_config();
    assert_eq!(
        config
            .gateway
            .auth
            .as_ref()
            .unwrap()
            .bearer()
            .unwrap()
            .expose(),
        CANARY
    );
    for name in ["by-env", "by-file"] {
        match &config.connection(name).unwrap().transport {
            Transport::Http(h) => assert_eq!(
                h.auth
                    .as_ref()
                    .and_then(UpstreamAuth::bearer)
                    .unwrap()
                    .expose(),
                CANARY
            ),
            Transport::Stdio(_) => panic!("{name} should be http"),
        }
    }
    match &config.connection("child").unwrap().transport {
        Transport::Stdio(s) => assert_eq!(s.args[1], CANARY),
        Transport::Http(_) => panic!("child should be stdio"),
    }
}

#[test]
fn debug_of_every_type_is_clean() {
    let (_dir, config) = planted_config();
    assert_clean("Config Debug", &format!("{config:?}"));
    assert_clean("Config pretty Debug", &format!("{config:#?}"));
    assert_clean("GatewaySettings Debug", &format!("{:?}", config.gateway));
    assert_clean("BearerToken Debug", &format!("{:?}", config.gateway.auth));
    for conn in &config.connections {
        assert_clean("ConnectionConfig Debug", &format!("{conn:?}"));
        assert_clean("Transport Debug", &format!("{:?}", conn.transport));
        match &conn.transport {
            Transport::Http(h) => {
                assert_clean("HttpTransport Debug", &format!("{h:?}"));
                assert_clean("BearerToken Debug", &format!("{:?}", h.auth));
                assert_clean("headers Debug", &format!("{:?}", h.headers));
            }
            Transport::Stdio(s) => {
                assert_clean("StdioTransport Debug", &format!("{s:?}"));
                assert_clean("env Debug", &format!("{:?}", s.env));
            }
        }
    }
    // The names are still there: redaction hides values, not structure.
    let debug = format!("{config:?}");
    assert!(
        debug.contains("X-Api-Key") && debug.contains("API_KEY"),
        "{debug}"
    );
    assert!(debug.contains("BearerToken([REDACTED])"), "{debug}");
}

#[test]
fn summary_is_clean() {
    let (_dir, config) = planted_config();
    let text = summary(&config);
    assert_clean("summary()", &text);
    assert!(text.contains("auth=bearer"), "{text}");
    assert!(text.contains("headers=X-Api-Key"), "{text}");
    assert!(text.contains("env=API_KEY"), "{text}");
    assert!(
        text.contains("https://example.invalid/mcp?[REDACTED]"),
        "{text}"
    );
}

#[test]
fn error_messages_of_bad_configs_are_clean() {
    let c = CANARY;
    let cases = [
        // The error is on the line after the token.
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = \"{c}\" }}\nbogus = 1\n"),
        // Type error on the token field itself.
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = [\"{c}\"] }}\n"),
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = {{ value = \"{c}\" }} }}\n"),
        // A token where a table belongs: serde would say `found string "…"`.
        format!("[gateway]\nauth = \"{c}\"\n"),
        format!(
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nheaders = \"Bearer {c}\"\n"
        ),
        format!("[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nenv = \"K={c}\"\n"),
        format!("[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nargs = \"--key {c}\"\n"),
        // Unknown key in the same auth table.
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = \"{c}\", extra = \"{c}\" }}\n"),
        // The token is rejected by a rule.
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = \"{c} x\" }}\n"),
        format!("[gateway]\nauth = {{ kind = \"{c}\", token = \"{c}\" }}\n"),
        format!(
            "[gateway]\nauth = {{ kind = \"bearer\", token = \"{c}\", token_env = \"CANARY_TOKEN\" }}\n"
        ),
        // Syntax errors inside and right after the token's string.
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = \"{c}\n"),
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = \"{c}\" \"{c}\" }}\n"),
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = \"{c}\\q\" }}\n"),
        format!("[gateway]\nauth = {{ kind = \"bearer\", token = \"{c}\", token = \"{c}\" }}\n"),
        // Header and env values.
        format!(
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nheaders = {{ X = \"{c}\\r\\n\" }}\n"
        ),
        format!(
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nheaders = {{ X = [\"{c}\"] }}\n"
        ),
        format!(
            "[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nenv = {{ K = \"{c}\\u0000\" }}\n"
        ),
        format!("[connections.a]\ntransport = \"stdio\"\ncommand = \"x\"\nenv = {{ K = {c} }}\n"),
        // Credentials and query in a URL.
        format!("[connections.a]\ntransport = \"http\"\nurl = \"https://u:{c}@h/\"\n"),
        format!("[connections.a]\ntransport = \"http\"\nurl = \"https://h/?k={c} \"\n"),
        // Secrets in a connection with an unrelated error.
        format!(
            "[connections.a]\ntransport = \"http\"\nurl = \"http://h/\"\nauth = {{ kind = \"bearer\", token = \"{c}\" }}\nmax_attempts = 0\n"
        ),
    ];
    for text in &cases {
        let err = Config::from_toml_str(text, Path::new("c.toml"), &canary_env).expect_err(text);
        assert!(err.to_string().starts_with("c.toml: "), "{err}");
        assert_clean(&format!("Display of error for {text:?}"), &err.to_string());
        assert_clean(&format!("Debug of error for {text:?}"), &format!("{err:?}"));
    }
}

#[test]
fn import_never_writes_or_echoes_the_bearer_token() {
    let json = format!(
        r#"{{"mcpServers": {{"gh": {{"url": "https://h/mcp", "headers": {{"Authorization": "Bearer {CANARY}"}}}}}}}}"#
    );
    let toml = import_mcp_servers(&json).unwrap();
    assert_clean("import output", &toml);
    assert!(toml.contains("token_env = \"GH_TOKEN\""), "{toml}");

    let bad = [
        format!(
            r#"{{"mcpServers": {{"gh": {{"url": "https://h/mcp", "headers": {{"Authorization": "Bearer {CANARY}", "Content-Type": "{CANARY}"}}}}}}}}"#
        ),
        format!(
            r#"{{"mcpServers": {{"gh": {{"url": "https://h/mcp", "headers": {{"X": "{CANARY}\n"}}}}}}}}"#
        ),
        format!(r#"{{"mcpServers": {{"gh": {{"command": "x", "env": {{"K": ["{CANARY}"]}}}}}}}}"#),
        format!(r#"{{"mcpServers": {{"gh": {{"url": "{CANARY}"#),
        format!(
            r#"{{"mcpServers": {{"gh": {{"url": "https://h/", "headers": {{"X": "{CANARY}"}} }} x"#
        ),
    ];
    for json in &bad {
        let err = import_mcp_servers(json).expect_err(json);
        assert_clean(&format!("import error for {json}"), &err.to_string());
        assert_clean(
            &format!("import error Debug for {json}"),
            &format!("{err:?}"),
        );
    }
}
