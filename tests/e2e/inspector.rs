//! The MCP Inspector's CLI (`@modelcontextprotocol/inspector` 2.x, pinned in
//! `scripts/node/package.json`, run on the Node 22 the install script puts in
//! `.tools/`) as a downstream client of the gateway, the way a user runs it
//! (`npx @modelcontextprotocol/inspector --cli …`): over streamable HTTP,
//! and launching `mcp-supervisor serve --stdio --config FILE` itself. The
//! upstream is `mcp-conformance-server` (`prefix = "auto"`, one connection,
//! so the fixture's names pass through), and each listing is checked in
//! both of the Inspector's protocol eras: `legacy` (`initialize`,
//! 2025-11-25) and `modern` (`server/discover`, 2026-07-28).

use std::path::{Path, PathBuf};

use e2e::{
    ConformanceGateway, UpstreamTransport, bin, conformance_connection, inspector, repo_root,
};
use serde_json::Value;

const ERAS: [&str; 2] = ["legacy", "modern"];

/// How the Inspector reaches the gateway.
enum Target<'a> {
    /// `--transport http --server-url URL`.
    Http(&'a str),
    /// `-- mcp-supervisor serve --stdio --config FILE`: the Inspector
    /// launches the gateway.
    Stdio(&'a Path),
}

/// `--cli --method METHOD` with `extra` flags in protocol `era`; the
/// `result` of its JSON output (it must succeed).
fn call(home: &Path, target: &Target, era: &str, method: &str, extra: &[&str]) -> Value {
    let run = run(home, target, era, method, extra);
    assert_eq!(run.code, Some(0), "{era} {method}: {run:?}");
    let output: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{era} {method}: not JSON ({error}): {run:?}"));
    output
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("{era} {method}: no result: {run:?}"))
}

/// `--cli --method METHOD` with `extra` flags in protocol `era`, as it ran.
fn run(home: &Path, target: &Target, era: &str, method: &str, extra: &[&str]) -> e2e::Run {
    let supervisor = bin("mcp-supervisor");
    let mut args = vec![
        "--cli",
        "--protocol-era",
        era,
        "--format",
        "json",
        "--method",
        method,
    ];
    args.extend_from_slice(extra);
    match target {
        Target::Http(url) => args.extend(["--transport", "http", "--server-url", url]),
        Target::Stdio(config) => args.extend([
            "--transport",
            "stdio",
            "--",
            supervisor.to_str().unwrap(),
            "serve",
            "--stdio",
            "--config",
            config.to_str().unwrap(),
        ]),
    }
    inspector(home, &args)
}

/// `field` of every item of `list` in a listing result.
fn names(result: &Value, list: &str, field: &str) -> Vec<String> {
    result[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {result}"))
        .iter()
        .map(|item| item[field].as_str().unwrap().to_owned())
        .collect()
}

fn assert_contains(all: &[String], wanted: &[&str], what: &str) {
    for name in wanted {
        assert!(
            all.iter().any(|item| item == name),
            "{what}: {name} missing from {all:?}"
        );
    }
}

/// Lists tools, resources, resource templates and prompts through `target`
/// in both eras, and (`use_them`) reads a resource, gets a prompt and calls
/// a tool.
fn lists_the_fixture(target: &Target, use_them: bool) {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for era in ERAS {
        let tools = call(home, target, era, "tools/list", &[]);
        assert_contains(
            &names(&tools, "tools", "name"),
            &[
                "test_simple_text",
                "test_tool_with_progress",
                "test_tool_with_logging",
                "test_sampling",
                "test_elicitation",
            ],
            &format!("{era} tools/list"),
        );
        let resources = call(home, target, era, "resources/list", &[]);
        assert_contains(
            &names(&resources, "resources", "uri"),
            &[
                "test://static-text",
                "test://static-binary",
                "test://watched-resource",
            ],
            &format!("{era} resources/list"),
        );
        let templates = call(home, target, era, "resources/templates/list", &[]);
        assert_eq!(
            names(&templates, "resourceTemplates", "uriTemplate"),
            ["test://template/{id}/data"],
            "{era} resources/templates/list"
        );
        let prompts = call(home, target, era, "prompts/list", &[]);
        assert_contains(
            &names(&prompts, "prompts", "name"),
            &["test_simple_prompt", "test_prompt_with_arguments"],
            &format!("{era} prompts/list"),
        );
        if !use_them {
            continue;
        }
        let read = call(
            home,
            target,
            era,
            "resources/read",
            &["--uri", "test://static-text"],
        );
        assert_eq!(
            read["contents"][0]["text"], "This is the content of the static text resource.",
            "{era}: {read}"
        );
        let prompt = call(
            home,
            target,
            era,
            "prompts/get",
            &[
                "--prompt-name",
                "test_prompt_with_arguments",
                "--prompt-args",
                "arg1=hello",
                "arg2=world",
            ],
        );
        assert_eq!(
            prompt["messages"][0]["content"]["text"],
            "Prompt with arguments: arg1='hello', arg2='world'",
            "{era}: {prompt}"
        );
        let called = call(
            home,
            target,
            era,
            "tools/call",
            &["--tool-name", "test_simple_text"],
        );
        assert_eq!(called["isError"], false, "{era}: {called}");
        assert_eq!(
            called["content"][0]["text"], "This is a simple text response for testing.",
            "{era}: {called}"
        );
    }
}

#[test]
fn inspector_cli_lists_and_uses_the_fixture_through_the_http_gateway() {
    let mut gateway = ConformanceGateway::start(UpstreamTransport::Http);
    lists_the_fixture(&Target::Http(&gateway.served.gateway_url), true);
    assert!(
        matches!(gateway.served.child.try_wait(), Ok(None)),
        "the supervisor exited:\n{}",
        gateway.served.stderr()
    );
}

#[test]
fn inspector_cli_launches_the_stdio_gateway_and_lists_the_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let (connection, _no_http_upstream) = conformance_connection(UpstreamTransport::Stdio);
    let config: PathBuf = dir.path().join("supervisor.toml");
    // The admin API on a free port: several gateways may run at once.
    std::fs::write(
        &config,
        format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\n\n[gateway]\nprefix = \"auto\"\n\n{connection}"
        ),
    )
    .unwrap();
    lists_the_fixture(&Target::Stdio(&config), false);
}

/// The installed Inspector is the pinned 2.x (the 0.x line has another CLI
/// and entry point).
#[test]
fn inspector_is_the_pinned_version() {
    let package: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("scripts/node/package.json")).unwrap(),
    )
    .unwrap();
    let pinned = package["dependencies"]["@modelcontextprotocol/inspector"]
        .as_str()
        .expect("scripts/node/package.json pins @modelcontextprotocol/inspector");
    assert!(pinned.starts_with("2."), "{pinned}");
    let home = tempfile::tempdir().unwrap();
    let run = inspector(home.path(), &["--version"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        run.stdout.trim(),
        pinned,
        "the installed Inspector is not the pinned one: run ./scripts/install-test-deps.sh"
    );
}

/// A held tool seen from the Inspector (docs/CONTRACTS.md): its upstream
/// came back from a restart with changed annotations, so in both eras the
/// listing lacks it, and the Inspector, which checks a tool is listed
/// before calling it, says it is not there.
#[test]
fn inspector_cli_sees_a_held_tool_neither_listed_nor_called() {
    let home = tempfile::tempdir().unwrap();
    let patches = tempfile::tempdir().unwrap();
    let patch_file = patches.path().join("redefined.json");
    let served = e2e::Served::start(&format!(
        "[contracts]\n{}",
        e2e::stdio_connection(
            "drifting",
            &bin("mcp-test-server"),
            &["--redefine-file", &patch_file.to_string_lossy()],
            ""
        )
    ));
    let target = Target::Http(&served.gateway_url);
    let listed = call(home.path(), &target, "modern", "tools/list", &[]);
    assert_contains(
        &names(&listed, "tools", "name"),
        &["drifting__echo"],
        "approved",
    );
    std::fs::write(
        &patch_file,
        r#"{"echo": {"annotations": {"destructiveHint": true, "readOnlyHint": false}}}"#,
    )
    .unwrap();
    let reset = e2e::supervisor(
        &["reset", "drifting", "--admin", served.admin_address()],
        &[],
    );
    assert_eq!(reset.code, Some(0), "{reset:?}");
    for era in ERAS {
        let listed = call(home.path(), &target, era, "tools/list", &[]);
        let tools = names(&listed, "tools", "name");
        assert!(
            !tools.iter().any(|tool| tool == "drifting__echo"),
            "{era}: {tools:?}"
        );
        assert!(
            tools.iter().any(|tool| tool == "drifting__add"),
            "{era}: {tools:?}"
        );
        let run = run(
            home.path(),
            &target,
            era,
            "tools/call",
            &["--tool-name", "drifting__echo", "--tool-arg", "text=hi"],
        );
        assert_ne!(run.code, Some(0), "{era}: {run:?}");
        assert!(run.stderr.contains("not found"), "{era}: {run:?}");
    }
}
