//! OAuth as a user runs it, with the built binaries: `mcp-test-server
//! --oauth` (a protected server and its authorization server), `login` with
//! `$BROWSER` doing the browser's part, then `call`, `serve` and `status`
//! using the stored tokens, and `logout`. The tokens never appear in any
//! output (docs/OAUTH.md).

use std::{fs, os::unix::fs::PermissionsExt};

use e2e::{BROWSER, HttpUpstream, Run, Served, gateway_call_text, supervisor};
use serde_json::{Value, json};

/// `docs` and `mail`, both OAuth, both to `url`; tokens under `state`; the
/// admin API at `admin` (`login` tells a running supervisor there).
fn config_text(url: &str, state: &std::path::Path, admin: &str) -> String {
    format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"both\"\n\
         [admin]\nlisten = \"{admin}\"\n[supervisor]\nstate_dir = \"{}\"\n\
         [connections.docs]\ntransport = \"http\"\nurl = \"{url}\"\nauth = {{ kind = \"oauth\" }}\n\
         [connections.mail]\ntransport = \"http\"\nurl = \"{url}\"\nauth = {{ kind = \"oauth\" }}\n",
        state.display()
    )
}

/// The text of connection `mail`'s `echo` answer to `{"text": "m"}`, asked
/// through the gateway at `url` with `call_mcp` (the gateway has never
/// listed `mail`'s tools: it needed a login from the start).
fn gateway_echo(url: &str) -> String {
    gateway_call_text(
        url,
        "call_mcp",
        json!({"connection": "mail", "tool": "echo", "arguments": {"text": "m"}}),
    )
}

/// The stored tokens' texts, for "appears nowhere" checks.
fn stored_secrets(file: &std::path::Path) -> Vec<String> {
    let stored: Value = serde_json::from_str(&fs::read_to_string(file).unwrap()).unwrap();
    let token = &stored["credentials"]["token_response"];
    ["access_token", "refresh_token"]
        .iter()
        .map(|key| token[key].as_str().unwrap().to_owned())
        .collect()
}

/// The body of `GET /ROUTE` on the admin API at `address` (HTTP/1.0, so
/// the server closes the connection after it).
fn admin_get(address: &str, route: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(stream, "GET /{route} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );
    answer
}

fn assert_clean(what: &str, output: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(
            !output.contains(secret.as_str()),
            "{what} printed a token: {output}"
        );
    }
}

#[test]
fn login_then_call_serve_and_status_use_the_stored_tokens_and_print_none() {
    let upstream = HttpUpstream::start_with(&["--oauth"]);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config_path = dir.path().join("supervisor.toml");
    let admin = {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        free.local_addr().unwrap().to_string()
    };
    let config = config_text(&upstream.url, &state, &admin);
    fs::write(&config_path, &config).unwrap();
    let config_arg = config_path.to_str().unwrap();
    let call = |connection: &str| -> Run {
        supervisor(
            &[
                "call",
                "--config",
                config_arg,
                connection,
                "echo",
                r#"{"text":"hi"}"#,
            ],
            &[],
        )
    };

    // Before a login: the supervisor's value, naming the command to run.
    let refused = call("docs");
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(
        refused.stderr.contains("`mcp-supervisor login docs`"),
        "{refused:?}"
    );

    let login = supervisor(
        &["login", "--config", config_arg, "docs", "--timeout", "60s"],
        &[("BROWSER", BROWSER)],
    );
    assert_eq!(login.code, Some(0), "{login:?}");
    assert!(
        login.stderr.contains("/authorize?"),
        "the URL is shown: {login:?}"
    );
    assert!(login.stdout.contains("Logged in to 'docs'"), "{login:?}");
    assert!(login.stdout.contains("No supervisor answered"), "{login:?}");
    let file = state.join("oauth/docs.json");
    let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let secrets = stored_secrets(&file);
    assert_clean("login", &login.all_output(), &secrets);

    // A new process (a restart) uses the stored tokens.
    let called = call("docs");
    assert_eq!(called.code, Some(0), "{called:?}");
    assert_eq!(called.stdout.trim(), "hi");
    assert_clean("call", &called.all_output(), &secrets);

    // `serve` keeps serving with one connection logged in and one not;
    // `status` shows which.
    let served = Served::start(&config);
    assert_eq!(served.admin_url, format!("http://{admin}"));
    let status = supervisor(&["status", "--admin", &admin], &[]);
    assert_eq!(status.code, Some(0), "{status:?}");
    let line = |name: &str| {
        status
            .stdout
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row: {}", status.stdout))
            .to_owned()
    };
    assert!(line("docs").contains("token until"), "{}", status.stdout);
    assert!(
        line("mail").contains("needs login: mcp-supervisor login mail"),
        "{}",
        status.stdout
    );
    assert_clean("status", &status.all_output(), &secrets);
    for route in ["status", "metrics"] {
        assert_clean(route, &admin_get(&admin, route), &secrets);
    }
    // A login while it runs: `login` tells it, and the connection is
    // served with the new tokens without a restart or a reset.
    let gateway_call = || gateway_echo(&served.gateway_url);
    let before = gateway_call();
    assert!(before.contains("mcp-supervisor login mail"), "{before}");
    let login_mail = supervisor(
        &["login", "--config", config_arg, "mail", "--timeout", "60s"],
        &[("BROWSER", BROWSER)],
    );
    assert_eq!(login_mail.code, Some(0), "{login_mail:?}");
    assert!(
        login_mail
            .stdout
            .contains("The running supervisor uses them for 'mail'"),
        "{login_mail:?}"
    );
    let status = supervisor(&["status", "--admin", &admin], &[]);
    let mail_row = status
        .stdout
        .lines()
        .find(|line| line.starts_with("mail"))
        .unwrap()
        .to_owned();
    assert!(mail_row.contains("token until"), "{}", status.stdout);
    assert_eq!(gateway_call(), "m", "the running gateway serves mail now");
    assert_clean("serve", &served.stderr(), &secrets);
    drop(served);

    let logout = supervisor(&["logout", "--config", config_arg, "docs"], &[]);
    assert_eq!(logout.code, Some(0), "{logout:?}");
    assert!(!file.exists());
    assert_eq!(call("docs").code, Some(1));
}

#[test]
fn login_refuses_a_connection_that_does_not_use_oauth() {
    let upstream = HttpUpstream::start();
    let dir = tempfile::tempdir().unwrap();
    let config = upstream.config(dir.path());
    let login = supervisor(&["login", "--config", config.to_str().unwrap(), "t"], &[]);
    assert_eq!(login.code, Some(2), "{login:?}");
    assert!(login.stderr.contains("does not use OAuth"), "{login:?}");
    let unknown = supervisor(
        &["login", "--config", config.to_str().unwrap(), "nope"],
        &[],
    );
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(
        unknown.stderr.contains("no connection named 'nope'"),
        "{unknown:?}"
    );
}
