//! The one-shot commands, run as a user runs them: `check`, `import`, bad usage.

use std::{fs, path::Path};

use e2e::{HttpUpstream, repo_root, supervisor};

/// A canary token planted through every secret source; it must never be printed.
const CANARY: &str = "CANARY-e2e-4b1d-SECRET";

/// Environment for the example configs' `token_env` variables.
fn example_env() -> Vec<(&'static str, &'static str)> {
    [
        "GITHUB_TOKEN",
        "MCP_SUPERVISOR_TOKEN",
        "EXAMPLE_TOKEN",
        "SEARCH_API_TOKEN",
    ]
    .into_iter()
    .map(|name| (name, CANARY))
    .collect()
}

#[test]
fn check_accepts_every_config_in_the_repo_and_prints_no_secret() {
    let mut checked = 0;
    for entry in fs::read_dir(repo_root().join("config")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "toml") {
            continue;
        }
        let path_arg = path.to_str().unwrap();
        let run = supervisor(&["check", "--config", path_arg], &example_env());
        assert_eq!(run.code, Some(0), "{}: {}", path.display(), run.stderr);
        assert!(run.stdout.contains(": ok"), "{}", run.stdout);
        assert!(run.stdout.contains("connections:"), "{}", run.stdout);
        assert!(!run.all_output().contains(CANARY), "{}", run.all_output());
        checked += 1;
    }
    assert!(checked >= 1, "config/ holds at least the default config");
}

/// Every bad fixture: exit 2, the file named, each `# expect:` line present.
#[test]
fn check_rejects_every_bad_fixture_with_exit_2_and_the_key_path() {
    let dir = repo_root().join("crates/mcp-supervisor/tests/fixtures/config/bad");
    let mut checked = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "toml") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let run = supervisor(
            &["check", "--config", path.to_str().unwrap()],
            &[("MCP_SUPERVISOR_TOKEN", CANARY)],
        );
        assert_eq!(run.code, Some(2), "{}: {run:?}", path.display());
        let file_name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            run.stderr.contains(file_name),
            "{file_name}: {}",
            run.stderr
        );
        for expected in text
            .lines()
            .filter_map(|line| line.strip_prefix("# expect: "))
        {
            assert!(
                run.stderr.contains(expected),
                "{file_name}: want {expected:?} in {}",
                run.stderr
            );
        }
        assert!(
            !run.all_output().contains("CANARY"),
            "{file_name}: {}",
            run.all_output()
        );
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} bad fixtures");
}

#[test]
fn check_of_a_missing_file_is_a_config_error() {
    let run = supervisor(&["check", "--config", "/nonexistent/mcp.toml"], &[]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("/nonexistent/mcp.toml"),
        "{}",
        run.stderr
    );
}

#[test]
fn bad_command_lines_exit_2_with_usage() {
    for args in [&["frobnicate"][..], &["check"], &["check", "--config"], &[]] {
        let run = supervisor(args, &[]);
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        let stderr = run.stderr.to_lowercase();
        assert!(
            stderr.contains("usage") || stderr.contains("--help"),
            "{args:?}: {}",
            run.stderr
        );
    }
}

#[test]
fn import_converts_mcp_servers_json_into_a_config_check_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("claude.json");
    fs::write(
        &json,
        r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"X-Team": "agents"}}
        }}"#,
    )
    .unwrap();
    let run = supervisor(&["import", json.to_str().unwrap()], &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("[connections.files]"), "{}", run.stdout);
    assert!(
        run.stdout.contains("[connections.remote]"),
        "{}",
        run.stdout
    );
    let toml = dir.path().join("imported.toml");
    fs::write(&toml, &run.stdout).unwrap();
    let check = supervisor(&["check", "--config", toml.to_str().unwrap()], &[]);
    assert_eq!(check.code, Some(0), "{check:?}");
    assert!(check.stdout.contains("connections: 2"), "{}", check.stdout);
}

#[test]
fn import_of_bad_json_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bad.json");
    fs::write(&json, "{ not json").unwrap();
    let run = supervisor(&["import", json.to_str().unwrap()], &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("bad.json"), "{}", run.stderr);
}

/// The canary through every secret source, in a config that `check` accepts
/// and in ones it refuses: never in any output.
#[test]
fn the_canary_never_appears_in_check_output() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    fs::write(&token_file, format!("{CANARY}\n")).unwrap();
    let good = format!(
        r#"
[gateway]
auth = {{ kind = "bearer", token = "{CANARY}" }}
[connections.inline]
transport = "http"
url = "https://a.example/mcp"
auth = {{ kind = "bearer", token = "{CANARY}" }}
headers = {{ "X-Api-Key" = "{CANARY}" }}
[connections.fromenv]
transport = "http"
url = "https://b.example/mcp"
auth = {{ kind = "bearer", token_env = "E2E_CANARY" }}
[connections.fromfile]
transport = "http"
url = "https://c.example/mcp"
auth = {{ kind = "bearer", token_file = "{}" }}
[connections.child]
transport = "stdio"
command = "server"
args = ["--api-key", "{CANARY}"]
env = {{ API_KEY = "{CANARY}" }}
"#,
        token_file.display()
    );
    let bad_variants = [
        good.replace("[connections.child]", "[connections.child]\nbogus = 1"),
        good.replace(
            r#"kind = "bearer", token = "#,
            r#"kind = "bearer", tokn = "#,
        ),
        good.replace(
            &format!(r#"token = "{CANARY}" }}"#),
            &format!(r#"token = ["{CANARY}"] }}"#),
        ),
        good.replace(
            "token_env = \"E2E_CANARY\"",
            "token_env = \"E2E_CANARY\", token = \"x\"",
        ),
        good.replace(
            "https://c.example/mcp",
            &format!("https://user:{CANARY}@c.example/mcp"),
        ),
        format!("{good}\n[connections.broken\n"),
    ];
    for (i, text) in std::iter::once(good.clone())
        .chain(bad_variants)
        .enumerate()
    {
        let path = dir.path().join(format!("c{i}.toml"));
        fs::write(&path, text).unwrap();
        let run = supervisor(
            &["check", "--config", path.to_str().unwrap()],
            &[("E2E_CANARY", CANARY)],
        );
        let expected = if i == 0 { Some(0) } else { Some(2) };
        assert_eq!(run.code, expected, "variant {i}: {run:?}");
        assert!(
            !run.all_output().contains(CANARY),
            "variant {i} leaked: {}",
            run.all_output()
        );
        assert!(
            !run.all_output().contains("CANARY"),
            "variant {i} leaked part: {}",
            run.all_output()
        );
    }
    assert!(Path::new(&token_file).exists());
}

#[test]
fn tools_and_call_one_shots_talk_to_a_real_upstream() {
    let upstream = HttpUpstream::start();
    let dir = tempfile::tempdir().unwrap();
    let config = upstream.config(dir.path());
    let config = config.to_str().unwrap();

    let run = supervisor(&["tools", "--config", config], &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout.trim(), "t\t7 tools");

    let run = supervisor(&["tools", "--config", config, "t"], &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.lines().any(|line| line.starts_with("echo\t")),
        "{}",
        run.stdout
    );

    let run = supervisor(
        &[
            "call",
            "--config",
            config,
            "t",
            "add",
            r#"{"a": 2, "b": 3}"#,
        ],
        &[],
    );
    assert_eq!((run.code, run.stdout.trim()), (Some(0), "5"), "{run:?}");

    // A tool error: printed, exit 1.
    let run = supervisor(
        &[
            "call",
            "--config",
            config,
            "t",
            "fail",
            r#"{"message": "boom"}"#,
        ],
        &[],
    );
    assert_eq!((run.code, run.stdout.trim()), (Some(1), "boom"), "{run:?}");

    // Bad CLI input: exit 2, nothing called.
    let run = supervisor(&["call", "--config", config, "t", "echo", "[1, 2]"], &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("JSON object"), "{}", run.stderr);
    let run = supervisor(&["call", "--config", config, "t", "echo", "{not json"], &[]);
    assert_eq!(run.code, Some(2), "{run:?}");

    // A failed outcome: exit 1 with the agent-facing message.
    let run = supervisor(&["call", "--config", config, "nope", "echo"], &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains("Unknown MCP connection 'nope'. Available connections: t."),
        "{}",
        run.stderr
    );
}

#[test]
fn call_to_an_upstream_that_is_down_exits_1_with_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("down.toml");
    // Port 9 (discard) on loopback: nothing listens, the connect is refused.
    fs::write(
        &path,
        "[supervisor]\nconnect_timeout = \"2s\"\n[supervisor.quarantine]\nbase_cooldown = \"1s\"\n\
         [connections.down]\ntransport = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
    )
    .unwrap();
    let run = supervisor(
        &["call", "--config", path.to_str().unwrap(), "down", "echo"],
        &[],
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr.contains(
            "MCP connection 'down' is temporarily unavailable (kind=transport, status=none)"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn check_connect_prints_a_line_per_connection() {
    let upstream = HttpUpstream::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.toml");
    fs::write(
        &path,
        format!(
            "[supervisor]\nconnect_timeout = \"2s\"\n[supervisor.quarantine]\nbase_cooldown = \"1s\"\n\
             [connections.up]\ntransport = \"http\"\nurl = \"{}\"\n\
             [connections.down]\ntransport = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
            upstream.url
        ),
    )
    .unwrap();
    let run = supervisor(
        &["check", "--config", path.to_str().unwrap(), "--connect"],
        &[],
    );
    assert_eq!(run.code, Some(1), "one connection is down: {run:?}");
    assert!(run.stdout.contains("up\t7 tools"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("down\tunavailable: MCP connection 'down'"),
        "{}",
        run.stdout
    );
    let run = supervisor(
        &[
            "check",
            "--config",
            upstream.config(dir.path()).to_str().unwrap(),
            "--connect",
        ],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
}

/// `prefix = "never"` exposes names as they are: two connections offering the
/// same tool is a config error that `check --connect` names.
#[test]
fn check_connect_refuses_clashing_names_without_a_prefix() {
    let first = HttpUpstream::start();
    let second = HttpUpstream::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clash.toml");
    let connections = format!(
        "[connections.one]\ntransport = \"http\"\nurl = \"{}\"\n\
         [connections.two]\ntransport = \"http\"\nurl = \"{}\"\n",
        first.url, second.url
    );
    fs::write(
        &path,
        format!("[gateway]\nprefix = \"never\"\n{connections}"),
    )
    .unwrap();
    let run = supervisor(
        &["check", "--config", path.to_str().unwrap(), "--connect"],
        &[],
    );
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains(
            "gateway.prefix: names must be unique without a prefix, but connections 'one' and \
             'two' both offer tool 'add';"
        ) && run
            .stderr
            .contains("connections 'one' and 'two' both offer tool 'echo'"),
        "{}",
        run.stderr
    );
    // The default prefix keeps them apart.
    fs::write(&path, connections).unwrap();
    let run = supervisor(
        &["check", "--config", path.to_str().unwrap(), "--connect"],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
}

/// An upstream that speaks only protocol 2026-07-28 (`initialize` is an
/// unknown method there) is reached with `server/discover`, and so is one
/// that speaks only 2025-era protocol.
#[test]
fn call_reaches_upstreams_of_either_protocol_generation() {
    for only in ["--modern-only", "--legacy-only"] {
        let upstream = HttpUpstream::start_with(&[only]);
        let dir = tempfile::tempdir().unwrap();
        let config = upstream.config(dir.path());
        let run = supervisor(
            &[
                "call",
                "--config",
                config.to_str().unwrap(),
                "t",
                "add",
                r#"{"a": 40, "b": 2}"#,
            ],
            &[],
        );
        assert_eq!(
            (run.code, run.stdout.trim()),
            (Some(0), "42"),
            "{only}: {run:?}"
        );
    }
}

/// A 2026-07-28 stdio upstream holds our `subscriptions/listen` request open;
/// closing the session tells it the stream ended before its stdin closes (a
/// server waits for its open requests before it exits: without this, every
/// stop of such an upstream took its full shutdown drain).
#[test]
fn closing_a_2026_stdio_session_ends_its_listen_stream_first() {
    let dir = tempfile::tempdir().unwrap();
    let counts = dir.path().join("requests.log");
    let path = dir.path().join("stdio.toml");
    let server = e2e::bin("mcp-test-server");
    fs::write(
        &path,
        e2e::stdio_connection(
            "t",
            &server,
            &["--count-file", counts.to_str().unwrap()],
            "",
        ),
    )
    .unwrap();
    let run = supervisor(
        &[
            "call",
            "--config",
            path.to_str().unwrap(),
            "t",
            "add",
            r#"{"a": 1, "b": 2}"#,
        ],
        &[],
    );
    assert_eq!((run.code, run.stdout.trim()), (Some(0), "3"), "{run:?}");
    let received = fs::read_to_string(&counts).unwrap();
    let lines: Vec<&str> = received.lines().collect();
    let listen = lines
        .iter()
        .position(|line| *line == "subscriptions/listen");
    let cancelled = lines
        .iter()
        .rposition(|line| *line == "notifications/cancelled");
    assert!(
        matches!((listen, cancelled), (Some(listen), Some(cancelled)) if cancelled > listen),
        "{received}"
    );
}

/// `check` warns of an `[[access]]` rule no caller reaches; `check
/// --connect` also of a glob that matches nothing the connections offer.
#[test]
fn check_warns_of_rules_that_do_nothing() {
    let upstream = HttpUpstream::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.toml");
    fs::write(
        &path,
        format!(
            "[connections.up]\ntransport = \"http\"\nurl = \"{}\"\n\
             [[access]]\nwho = [\"anyone\"]\nallow = [\"up__echo\", \"up__ecoh\"]\n\
             [[access]]\nwho = [\"group:x\"]\nallow = [\"up__echo\"]\n",
            upstream.url
        ),
    )
    .unwrap();
    let config = path.to_str().unwrap();
    let run = supervisor(&["check", "--config", config], &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("warning: ")
            && run
                .stdout
                .contains("access[1] (line 7, column 1): unreachable"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("access   keys=none rules=2"),
        "{}",
        run.stdout
    );
    let run = supervisor(&["check", "--config", config, "--connect"], &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("access[0]: tool:up__ecoh matches nothing the connections offer"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("tool:up__echo matches"),
        "{}",
        run.stdout
    );
}
