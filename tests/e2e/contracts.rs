//! Tool contracts through the built binaries (docs/CONTRACTS.md): a stdio
//! upstream comes back after a restart with a wider input schema; `serve`
//! holds the tool, `contracts diff` shows the change field by field,
//! `contracts approve` brings it back and the lock has its new hash.

use std::time::Duration;

use e2e::{Served, bin, gateway_call_text, stdio_connection, supervisor, wait_until};
use serde_json::json;

/// `contracts approve WHAT…` against the process at `admin`, which must
/// approve exactly one contract.
fn approve_one(what: &[&str], admin: &str) {
    let args: Vec<&str> = ["contracts", "approve"]
        .into_iter()
        .chain(what.iter().copied())
        .chain(["--admin", admin])
        .collect();
    let approve = supervisor(&args, &[]);
    assert_eq!(approve.code, Some(0), "{approve:?}");
    assert!(approve.stdout.contains("approved 1"), "{}", approve.stdout);
}

/// The wider schema: a new required `context` argument.
fn widened() -> serde_json::Value {
    json!({
        "echo": {
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "context": {"type": "string"}},
                "required": ["text", "context"],
            },
        },
    })
}

#[test]
fn a_changed_stdio_tool_is_held_shown_and_approved_with_the_commands() {
    let patches = tempfile::tempdir().unwrap();
    let patch_file = patches.path().join("redefined.json");
    let server = bin("mcp-test-server");
    let config = format!(
        "[supervisor]\nrelist = \"1s\"\n\n{}\n[contracts]\n",
        stdio_connection(
            "up",
            &server,
            &["--redefine-file", &patch_file.to_string_lossy()],
            ""
        )
    );
    let mut served = Served::start(&config);
    let config_path = served.config_path.to_string_lossy().into_owned();
    let lock_path = served.config_path.with_file_name("mcp-supervisor.lock");
    // The config's admin port is 0: the admin commands are told where it is.
    let admin = served.admin_address().to_owned();

    let locked = supervisor(&["contracts", "lock", "--config", &config_path], &[]);
    assert_eq!(locked.code, Some(0), "{locked:?}");
    let approved = std::fs::read_to_string(&lock_path).unwrap();
    assert!(approved.contains("\"echo\""), "{approved}");
    assert_eq!(
        gateway_call_text(&served.gateway_url, "up__echo", json!({"text": "hi"})),
        "hi"
    );

    // The upstream comes back from a restart with another schema.
    std::fs::write(&patch_file, widened().to_string()).unwrap();
    let reset = supervisor(&["reset", "up", "--admin", &admin], &[]);
    assert_eq!(reset.code, Some(0), "{reset:?}");
    let said = gateway_call_text(&served.gateway_url, "up__echo", json!({"text": "hi"}));
    assert!(said.contains("is held"), "{said}");
    assert!(said.contains("(inputSchema)"), "{said}");
    assert!(served.stderr().contains("contract changed since approval"));

    let diff = supervisor(&["contracts", "diff", "up", "--admin", &admin], &[]);
    assert_eq!(diff.code, Some(0), "{diff:?}");
    assert!(
        diff.stdout.contains("up  tool echo  held"),
        "{}",
        diff.stdout
    );
    assert!(diff.stdout.contains("  inputSchema:"), "{}", diff.stdout);
    assert!(diff.stdout.contains("\"context\""), "{}", diff.stdout);

    // An approval of another definition than the one listed approves nothing.
    let stale = "0".repeat(64);
    let refused = supervisor(
        &[
            "contracts",
            "approve",
            "up__echo",
            "--sha256",
            &stale,
            "--admin",
            &admin,
        ],
        &[],
    );
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(
        refused.stderr.contains("changed again"),
        "{}",
        refused.stderr
    );
    // The hash the diff showed is the one approved.
    let shown = diff
        .stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("approve: "))
        .expect("the diff says how to approve");
    assert!(shown.contains("--sha256 "), "{shown}");
    let sha = shown.rsplit(' ').next().unwrap().to_owned();
    approve_one(&["up__echo", "--sha256", &sha], &admin);
    assert!(
        wait_until(Duration::from_secs(10), || {
            gateway_call_text(
                &served.gateway_url,
                "up__echo",
                json!({"text": "back", "context": "c"}),
            ) == "back"
        }),
        "served again once approved"
    );
    let now = std::fs::read_to_string(&lock_path).unwrap();
    assert_ne!(now, approved, "the lock has the approved change");
    assert!(now.contains("\"context\""), "{now}");

    // A prompt that changes is approved alone, with the hash the diff shows.
    let mut patches = widened();
    patches["greet"] = json!({"description": "Greet someone by name, warmly."});
    std::fs::write(&patch_file, patches.to_string()).unwrap();
    let reset = supervisor(&["reset", "up", "--admin", &admin], &[]);
    assert_eq!(reset.code, Some(0), "{reset:?}");
    // The next use reconnects (a new child) and lists again.
    gateway_call_text(
        &served.gateway_url,
        "up__echo",
        json!({"text": "hi", "context": "c"}),
    );
    let mut shown = None;
    let mut last = String::new();
    assert!(
        wait_until(Duration::from_secs(20), || {
            let diff = supervisor(&["contracts", "diff", "up", "--admin", &admin], &[]);
            shown = diff
                .stdout
                .lines()
                .filter_map(|line| line.trim().strip_prefix("approve: "))
                .find(|command| command.contains("--prompt greet"))
                .map(str::to_owned);
            last = diff.stdout;
            shown.is_some()
        }),
        "the diff shows the held prompt and how to approve it: {last}"
    );
    let shown = shown.unwrap();
    let sha = shown.rsplit(' ').next().unwrap().to_owned();
    approve_one(&["up", "--prompt", "greet", "--sha256", &sha], &admin);
    let mixed = supervisor(
        &[
            "contracts",
            "approve",
            "up__echo",
            "--prompt",
            "greet",
            "--admin",
            &admin,
        ],
        &[],
    );
    assert_eq!(mixed.code, Some(2), "{mixed:?}");

    let unknown = supervisor(&["contracts", "approve", "nope", "--admin", &admin], &[]);
    assert_eq!(unknown.code, Some(1), "{unknown:?}");
    assert!(
        unknown.stderr.contains("unknown MCP connection 'nope'"),
        "{}",
        unknown.stderr
    );
    served.terminate(Duration::from_secs(10));
}

#[test]
fn a_lock_that_was_edited_by_hand_is_refused_by_check_and_serve() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("supervisor.toml");
    std::fs::write(&config, "[contracts]\nlock = \"approved.lock\"\n").unwrap();
    std::fs::write(
        dir.path().join("approved.lock"),
        r#"{"version": 1, "connections": {"up": {"tool": {"echo": {"sha256": "00", "contract": {"name": "echo"}}}}}}"#,
    )
    .unwrap();
    let config = config.to_string_lossy().into_owned();
    for args in [
        &["check", "--config", &config][..],
        &["serve", "--config", &config],
    ] {
        let run = supervisor(args, &[]);
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert!(run.stderr.contains("contracts.lock"), "{}", run.stderr);
        assert!(
            run.stderr.contains("is not the hash of its contract"),
            "{}",
            run.stderr
        );
    }
}

/// A server on the TypeScript SDK v2 (`tests/interop/ts_server.mjs`, over
/// stdio at 2025-11-25) changes a registered tool's description with the
/// SDK's own `update()`, which notifies its clients: the gateway lists it
/// again and holds the tool.
#[test]
fn a_typescript_sdk_servers_own_update_of_a_tool_is_held() {
    let node = e2e::installed_tool("node/node_modules/.bin/node");
    let script = e2e::repo_root().join("tests/interop/ts_server.mjs");
    let served = Served::start(&format!(
        "{}\n[contracts]\n",
        stdio_connection(
            "ts",
            &node,
            &[script.to_str().unwrap()],
            "protocol = \"2025-11-25\"\n"
        )
    ));
    let url = served.gateway_url.clone();
    assert_eq!(
        gateway_call_text(&url, "ts__add", json!({"a": 1, "b": 2})),
        "3"
    );
    assert_eq!(
        gateway_call_text(&url, "ts__rug_pull", json!({})),
        "changed"
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            gateway_call_text(&url, "ts__add", json!({"a": 1, "b": 2})).contains("is held")
        }),
        "the updated tool is held"
    );
    let said = gateway_call_text(&url, "ts__add", json!({"a": 1, "b": 2}));
    assert!(said.contains("(description)"), "{said}");
}
