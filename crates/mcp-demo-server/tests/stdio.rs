//! The demo server as a real child process, driven by rmcp's client.

use std::time::Duration;

use rmcp::{
    ServiceExt as _,
    model::{CallToolRequestParams, ClientConfig},
    transport::TokioChildProcess,
};
use serde_json::json;

const STEP: Duration = Duration::from_secs(15);

#[tokio::test]
async fn lists_and_calls_every_tool() {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-demo-server"));
    command.kill_on_drop(true);
    let transport = TokioChildProcess::new(command).unwrap();
    let client = tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed");
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "mcp-demo-server");

    let mut names: Vec<_> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["add", "current_time", "echo", "word_count"]);

    for (tool, arguments, expected) in [
        ("echo", json!({"text": "hello"}), Some("hello")),
        ("add", json!({"a": 2, "b": 3.5}), Some("5.5")),
        ("word_count", json!({"text": "one two  three"}), Some("3")),
        ("current_time", json!({}), None),
    ] {
        let arguments = arguments.as_object().unwrap().clone();
        let result = tokio::time::timeout(
            STEP,
            client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)),
        )
        .await
        .unwrap()
        .unwrap();
        assert_ne!(result.is_error, Some(true), "{tool} failed");
        let text = &result.content[0].as_text().unwrap().text;
        match expected {
            Some(expected) => assert_eq!(text, expected, "{tool}"),
            None => assert!(text.ends_with('Z') && text.contains('T'), "{text}"),
        }
    }

    // Bad arguments are an error answer, not a crash.
    let bad = client
        .call_tool(
            CallToolRequestParams::new("add")
                .with_arguments(json!({"a": "x"}).as_object().unwrap().clone()),
        )
        .await;
    assert!(bad.is_err() || bad.unwrap().is_error == Some(true));
    let again = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(json!({"text": "still here"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(again.content[0].as_text().unwrap().text, "still here");
    client.cancel().await.unwrap();
}
