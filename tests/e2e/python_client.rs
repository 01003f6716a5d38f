//! The official Python MCP SDK (`mcp` 1.30.0, `.tools/venv`) as a downstream
//! client of the gateway: `tests/interop/python_client.py` lists the tools and
//! calls namespaced tools and meta-tools over streamable HTTP.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use e2e::{Run, Served, bin, installed_tool, repo_root, stdio_connection, wait_bounded};
use serde_json::{Value, json};

/// Runs the client script against `url` with `TOOL ARGS_JSON` pairs.
fn python_client(url: &str, calls: &[(&str, Value)]) -> Run {
    let python = installed_tool("venv/bin/python");
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut command = Command::new(python);
    command
        .arg(repo_root().join("tests/interop/python_client.py"))
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
