//! What an upstream asks its client, through the gateway, whatever protocol
//! generation it and the client speak (docs/ARCHITECTURE.md, "A
//! server-to-client request"):
//!
//! - a real server on the TypeScript SDK v2 (`tests/interop/ts_server.mjs`):
//!   its `input_required` tools on a 2026-07-28 connection, and both its
//!   `input_required` tools and its `server.createMessage()` /
//!   `server.elicitInput()` tools on a 2025 one;
//! - a 2026-07-28 server that still asks with JSON-RPC requests on the
//!   call's stream (`mcp-test-server --asks-by-request`): sampling,
//!   elicitation, roots and ping are answered, and a ping on its listen
//!   stream too;
//!
//! asked by the Python SDK 2.x in both of its modes (which answers
//! everything), and by the MCP Inspector's CLI (which declares no sampling:
//! the upstream gets a JSON-RPC error at once, never silence).
//!
//! Also what the gateway declares for such an upstream: what it can do,
//! even with nothing to list yet.

use std::time::Duration;

use e2e::{
    HttpUpstream, SdkClient, Served, inspector, installed_tool, repo_root, run_bounded,
    stdio_connection,
};
use serde_json::{Value, json};

/// What the Python client accepts every elicitation with.
const ELICITED: &str = r#"{"username":"Ann"}"#;

/// Calls `tools` (no arguments) through `served` with `sdk`; each call's
/// `(is_error, first text)` by tool.
fn call_all(sdk: SdkClient, served: &Served, tools: &[&str]) -> Vec<(String, bool, String)> {
    let calls: Vec<(&str, Value)> = tools.iter().map(|tool| (*tool, json!({}))).collect();
    let run = run_bounded(
        &mut sdk.command(
            &served.gateway_url,
            &["--elicitation-content", ELICITED],
            &calls,
        ),
        Duration::from_secs(300),
    );
    assert_eq!(
        run.code,
        Some(0),
        "{sdk:?}: {run:?}\nsupervisor:\n{}",
        served.stderr()
    );
    let output: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(output["protocol_version"], sdk.protocol(), "{sdk:?}");
    output["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            (
                call["tool"].as_str().unwrap().to_owned(),
                call["is_error"].as_bool().unwrap(),
                call["text"][0].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The TypeScript SDK server: `node tests/interop/ts_server.mjs [--http]`.
fn ts_server() -> std::process::Command {
    let mut command = std::process::Command::new(installed_tool("node/node_modules/.bin/node"));
    command.arg(repo_root().join("tests/interop/ts_server.mjs"));
    command
}

#[test]
fn a_typescript_sdk_server_asks_its_clients_through_the_gateway() {
    // `modern`: over HTTP, protocol as negotiated (2026-07-28);
    // `legacy`: over stdio, pinned to 2025-11-25.
    let mut http = ts_server();
    http.arg("--http");
    let modern = HttpUpstream::start_command(http);
    let node = installed_tool("node/node_modules/.bin/node");
    let script = repo_root().join("tests/interop/ts_server.mjs");
    let served = Served::start(&format!(
        "[connections.modern]\ntransport = \"http\"\nurl = \"{}\"\n{}",
        modern.url,
        stdio_connection(
            "legacy",
            &node,
            &[script.to_str().unwrap()],
            "protocol = \"2025-11-25\"\n"
        )
    ));
    let tools = [
        "modern__ask_sampling",
        "modern__ask_elicitation",
        "legacy__ask_sampling",
        "legacy__ask_elicitation",
        "legacy__push_sampling",
        "legacy__push_elicitation",
    ];
    for sdk in [SdkClient::V2Auto, SdkClient::V2Legacy] {
        let calls = call_all(sdk, &served, &tools);
        for (tool, is_error, text) in &calls {
            assert!(!is_error, "{sdk:?} {tool}: {text}");
            let expected = if tool.ends_with("sampling") {
                "sampled: Paris (python-client-v2)"
            } else if tool.contains("push") {
                "accept: hello Ann"
            } else {
                "hello Ann"
            };
            assert_eq!(text, expected, "{sdk:?} {tool}");
        }
        assert_eq!(calls.len(), tools.len());
    }
}

#[test]
fn a_2026_server_asking_with_requests_on_the_calls_stream_is_answered() {
    let upstream = HttpUpstream::start_binary("mcp-test-server", &["--asks-by-request"]);
    let served = Served::start(&format!(
        "[connections.up]\ntransport = \"http\"\nurl = \"{}\"\n",
        upstream.url
    ));
    let tools = [
        "up__ask_sampling",
        "up__ask_elicitation",
        "up__ask_roots",
        "up__ask_ping",
    ];
    for sdk in [SdkClient::V2Auto, SdkClient::V2Legacy] {
        let calls = call_all(sdk, &served, &tools);
        let by_tool = |name: &str| -> Value {
            let (_, is_error, text) = calls.iter().find(|(tool, ..)| tool == name).unwrap();
            assert!(!is_error, "{sdk:?} {name}: {text}");
            serde_json::from_str(text).unwrap()
        };
        let sampled = by_tool("up__ask_sampling");
        assert_eq!(sampled["content"]["text"], "Paris", "{sdk:?}");
        assert_eq!(sampled["model"], "python-client-v2", "{sdk:?}");
        let elicited = by_tool("up__ask_elicitation");
        assert_eq!(elicited["action"], "accept", "{sdk:?}");
        assert_eq!(elicited["content"]["username"], "Ann", "{sdk:?}");
        let roots = by_tool("up__ask_roots");
        assert_eq!(
            roots["roots"][0]["uri"], "file:///tmp/python-client-root",
            "{sdk:?}"
        );
        assert_eq!(by_tool("up__ask_ping"), json!({}), "{sdk:?}");
    }
    // The ping it sent on its listen stream, where no request of the
    // gateway waits, was answered too.
    let answers = upstream.url.replace("/mcp", "/_control/answers");
    let listen_ping_answered = || {
        let fetched = std::process::Command::new("curl")
            .args(["-s", &answers])
            .output()
            .expect("curl runs");
        let listed: Value = serde_json::from_slice(&fetched.stdout).unwrap_or_default();
        listed.as_array().is_some_and(|answers| {
            answers
                .iter()
                .any(|answer| answer["id"] == "asked-0" && answer["result"] == json!({}))
        })
    };
    assert!(
        e2e::wait_until(Duration::from_secs(30), listen_ping_answered),
        "the ping on the listen stream was never answered"
    );
}

/// The Inspector's CLI declares no sampling: the upstream's request is
/// refused at once with a JSON-RPC error (-32601), which the tool reports;
/// a ping it does not need to answer is answered by the gateway.
#[test]
fn a_client_that_cannot_answer_gets_the_upstream_an_error_at_once() {
    let upstream = HttpUpstream::start_binary("mcp-test-server", &["--asks-by-request"]);
    let served = Served::start(&format!(
        "[connections.up]\ntransport = \"http\"\nurl = \"{}\"\n",
        upstream.url
    ));
    let home = tempfile::tempdir().unwrap();
    for era in ["legacy", "modern"] {
        let call = |tool: &str| -> Value {
            let run = inspector(
                home.path(),
                &[
                    "--cli",
                    "--protocol-era",
                    era,
                    "--format",
                    "json",
                    "--transport",
                    "http",
                    "--server-url",
                    &served.gateway_url,
                    "--method",
                    "tools/call",
                    "--tool-name",
                    tool,
                ],
            );
            // It exits 5 for a result with `isError`, else 0.
            assert!(matches!(run.code, Some(0 | 5)), "{era} {tool}: {run:?}");
            let output: Value = serde_json::from_str(&run.stdout)
                .unwrap_or_else(|error| panic!("{era} {tool}: not JSON ({error}): {run:?}"));
            output["result"].clone()
        };
        let refused = call("up__ask_sampling");
        assert_eq!(refused["isError"], true, "{era}: {refused}");
        let error: Value =
            serde_json::from_str(refused["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(error["code"], -32601, "{era}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains("sampling"),
            "{era}: {error}"
        );
        let pinged = call("up__ask_ping");
        assert_eq!(pinged["isError"], false, "{era}: {pinged}");
        assert_eq!(pinged["content"][0]["text"], "{}", "{era}: {pinged}");
    }
}

/// An upstream that declares prompts, resources, completions and logging
/// with no prompt or resource yet: the gateway declares them too, at
/// `server/discover` (2026-07-28) and at `initialize` (2025).
#[test]
fn the_gateway_declares_what_an_upstream_can_do_even_with_empty_lists() {
    let mut http = ts_server();
    http.arg("--http");
    let upstream = HttpUpstream::start_command(http);
    let served = Served::start(&format!(
        "[connections.ts]\ntransport = \"http\"\nurl = \"{}\"\n",
        upstream.url
    ));
    for sdk in [SdkClient::V2Auto, SdkClient::V2Legacy] {
        let run = run_bounded(
            &mut sdk.command(&served.gateway_url, &[], &[]),
            Duration::from_secs(300),
        );
        assert_eq!(run.code, Some(0), "{sdk:?}: {run:?}");
        let output: Value = serde_json::from_str(&run.stdout).unwrap();
        let capabilities = &output["capabilities"];
        for declared in ["prompts", "resources", "completions", "logging", "tools"] {
            assert!(
                capabilities.get(declared).is_some(),
                "{sdk:?}: {declared} missing from {capabilities}"
            );
        }
    }
}
