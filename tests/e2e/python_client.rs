//! The official Python MCP SDK as a downstream client of the gateway, over
//! streamable HTTP: 1.x (`mcp` 1.30.0, `.tools/venv`,
//! `tests/interop/python_client.py`) and 2.x (`mcp` 2.3.0, `.tools/venv2`,
//! `tests/interop/python_client_v2.py`, whose default `Client(url)` speaks
//! protocol 2026-07-28). Each script lists the tools and calls namespaced
//! tools and meta-tools.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use e2e::{Run, Served, bin, installed_tool, repo_root, stdio_connection, wait_bounded};
use serde_json::{Value, json};

/// Which SDK client runs, and how it connects.
#[derive(Debug, Clone, Copy)]
enum Sdk {
    /// `mcp` 1.30.0's `ClientSession` (protocol 2025-11-25).
    V1,
    /// `mcp` 2.3.0's `Client(url)` with its default `mode="auto"`.
    V2Auto,
    /// `mcp` 2.3.0's `Client(url, mode="legacy")` (the `initialize` handshake).
    V2Legacy,
}

/// Runs the client script against `url` with `TOOL ARGS_JSON` pairs.
fn python_client(url: &str, calls: &[(&str, Value)]) -> Run {
    sdk_client(Sdk::V1, url, calls)
}

fn sdk_client(sdk: Sdk, url: &str, calls: &[(&str, Value)]) -> Run {
    let (venv, script, mode) = match sdk {
        Sdk::V1 => ("venv", "python_client.py", None),
        Sdk::V2Auto => ("venv2", "python_client_v2.py", Some("auto")),
        Sdk::V2Legacy => ("venv2", "python_client_v2.py", Some("legacy")),
    };
    let python = installed_tool(&format!("{venv}/bin/python"));
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut command = Command::new(python);
    command.arg(repo_root().join("tests/interop").join(script));
    if let Some(mode) = mode {
        command.args(["--mode", mode]);
    }
    command
        .arg(url)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap());
    for (tool, arguments) in calls {
        command.arg(tool).arg(arguments.to_string());
    }
    let mut child = command.spawn().expect("the venv's python runs");
    // The script bounds each request itself; this only stops a hung interpreter.
    let status = wait_bounded(&mut child, Duration::from_secs(300));
    Run {
        code: status.and_then(|status| status.code()),
        stdout: std::fs::read_to_string(stdout).unwrap_or_default(),
        stderr: std::fs::read_to_string(stderr).unwrap_or_default(),
    }
}

#[test]
fn python_sdk_client_lists_and_calls_namespaced_and_meta_tools() {
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"both\"\n{}{}",
        stdio_connection(
            "demo",
            &bin("mcp-demo-server"),
            &[],
            "notes = \"the demo server\""
        ),
        stdio_connection("test", &bin("mcp-test-server"), &[], ""),
    );
    let served = Served::start(&config);
    let run = python_client(
        &served.gateway_url,
        &[
            ("demo__echo", json!({"text": "héllo from python"})),
            ("demo__add", json!({"a": 2, "b": 40})),
            ("test__fail", json!({"message": "boom"})),
            ("list_mcps", json!({})),
            (
                "call_mcp",
                json!({"connection": "test", "tool": "add", "arguments": {"a": 1, "b": 2}}),
            ),
        ],
    );
    assert_eq!(
        run.code,
        Some(0),
        "{run:?}\nsupervisor:\n{}",
        served.stderr()
    );
    let output: Value = serde_json::from_str(&run.stdout).expect("the script prints JSON");

    assert_eq!(output["server"]["name"], "mcp-supervisor");
    let tools: Vec<&str> = output["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    for name in [
        "demo__echo",
        "demo__add",
        "test__echo",
        "test__fail",
        "list_mcps",
        "search_mcp_tools",
        "get_mcp_tool_schema",
        "describe_mcp",
        "call_mcp",
    ] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }

    let calls = output["calls"].as_array().unwrap();
    let outcome = |index: usize| {
        let call = &calls[index];
        (
            call["is_error"].as_bool().unwrap(),
            call["text"][0].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(outcome(0), (false, "héllo from python".to_owned()));
    assert_eq!(outcome(1), (false, "42".to_owned()));
    // An upstream tool error passes through as a result with isError.
    assert_eq!(outcome(2), (true, "boom".to_owned()));
    // The meta-tools answer JSON text.
    let (is_error, listed) = outcome(3);
    assert!(!is_error, "{listed}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let names: Vec<&str> = listed["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["demo", "test"], "{listed}");
    let demo = &listed["connections"][0];
    assert_eq!(demo["description"], "the demo server", "{listed}");
    assert_eq!(outcome(4), (false, "3".to_owned()));
}

#[test]
fn python_sdk_client_gets_a_protocol_error_for_an_unknown_tool() {
    let served = Served::start(&stdio_connection("demo", &bin("mcp-demo-server"), &[], ""));
    let run = python_client(&served.gateway_url, &[("demo__nope", json!({}))]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("Unknown tool 'demo__nope'"),
        "{}",
        run.stderr
    );
    // The gateway keeps serving.
    let run = python_client(
        &served.gateway_url,
        &[("demo__echo", json!({"text": "still here"}))],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let output: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(output["calls"][0]["text"][0], "still here");
}

/// `mcp` 2.x's default client negotiates 2026-07-28, where every result must
/// carry `resultType`: results forwarded from a 2025-era upstream lack it, and
/// the SDK refuses them (`CallToolResult.resultType Field required`). Both a
/// namespaced tool and `call_mcp` forward an upstream result.
#[test]
fn python_sdk_2_default_client_calls_forwarded_results() {
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"both\"\n{}",
        stdio_connection("demo", &bin("mcp-demo-server"), &[], ""),
    );
    let served = Served::start(&config);
    let calls = [
        ("demo__echo", json!({"text": "from the 2.x SDK"})),
        (
            "call_mcp",
            json!({"connection": "demo", "tool": "add", "arguments": {"a": 20, "b": 22}}),
        ),
        ("list_mcps", json!({})),
    ];
    for (sdk, protocol) in [(Sdk::V2Auto, "2026-07-28"), (Sdk::V2Legacy, "2025-11-25")] {
        let run = sdk_client(sdk, &served.gateway_url, &calls);
        assert_eq!(
            run.code,
            Some(0),
            "{sdk:?}: {run:?}\nsupervisor:\n{}",
            served.stderr()
        );
        let output: Value = serde_json::from_str(&run.stdout).expect("the script prints JSON");
        assert_eq!(output["protocol_version"], protocol, "{sdk:?}");
        let calls = output["calls"].as_array().unwrap();
        assert_eq!(calls[0]["text"][0], "from the 2.x SDK", "{sdk:?}");
        assert_eq!(calls[1]["text"][0], "42", "{sdk:?}");
        assert_eq!(calls[2]["is_error"], false, "{sdk:?}");
    }
}
