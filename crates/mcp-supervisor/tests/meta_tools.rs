//! The five meta-tools over a real upstream: exact shapes and messages
//! (docs/SUPERVISION.md, "Meta-tools").

mod support;

use std::time::Duration;

use actix::Actor;
use mcp_supervisor::{meta, registry::Registry};
use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use support::*;

fn object(value: Value) -> Option<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().unwrap().text.clone()
}

fn json_of(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{}", text(result));
    serde_json::from_str(&text(result)).unwrap()
}

fn error_text(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    text(result)
}

async fn setup() -> (TestServer, TestServer, actix::Addr<Registry>) {
    let fast = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let slow = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let toml = http_connection("fast", &fast.url(), "notes = \"Fast test server\"")
        + &http_connection("slow", &slow.url(), "");
    let registry = Registry::new(config(&toml)).start();
    (fast, slow, registry)
}

#[test]
fn list_mcps_shows_connections_and_never_waits_long_for_a_slow_catalog() {
    run(|| async {
        let (_fast, slow, registry) = setup().await;
        slow.faults().push(FaultRule::always(
            Match::method("tools/list"),
            Fault::delay(Duration::from_secs(5)),
        ));
        let listed = json_of(&meta::call(&registry, "list_mcps", None).await);
        assert_eq!(
            listed,
            json!({"connections": [
                {"id": "fast", "name": "fast", "description": "Fast test server",
                 "tool_count": 7, "state": "ready", "dead": false},
                {"id": "slow", "name": "slow", "description": null,
                 "tool_count": null, "state": "ready", "dead": false},
            ]})
        );
    });
}

#[test]
fn search_schema_and_describe() {
    run(|| async {
        let (_fast, _slow, registry) = setup().await;
        let found = json_of(
            &meta::call(
                &registry,
                "search_mcp_tools",
                object(json!({"connection": "fast", "query": "Delete item"})),
            )
            .await,
        );
        assert_eq!(found["connection"], "fast");
        assert_eq!(found["query"], "Delete item");
        let names: Vec<&str> = found["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(names[0], "delete_item");
        let limited = json_of(
            &meta::call(
                &registry,
                "search_mcp_tools",
                object(json!({"connection": "fast", "query": "e", "limit": 2})),
            )
            .await,
        );
        assert_eq!(limited["matches"].as_array().unwrap().len(), 2);

        let schema = json_of(
            &meta::call(
                &registry,
                "get_mcp_tool_schema",
                object(json!({"connection": "fast", "tool": "delete_item"})),
            )
            .await,
        );
        assert_eq!(schema["name"], "delete_item");
        assert!(
            schema["inputSchema"]["properties"]["id"].is_object(),
            "{schema}"
        );
        assert_eq!(schema["annotations"]["destructiveHint"], true);

        let described = json_of(
            &meta::call(
                &registry,
                "describe_mcp",
                object(json!({"connection": "fast"})),
            )
            .await,
        );
        assert_eq!(described["name"], "fast");
        assert_eq!(described["tools"].as_array().unwrap().len(), 7);
    });
}

#[test]
fn call_mcp_accepts_object_null_and_string_arguments() {
    run(|| async {
        let (fast, _slow, registry) = setup().await;
        let result = meta::call(
            &registry,
            "call_mcp",
            object(json!({"connection": "fast", "tool": "add", "arguments": {"a": 1, "b": 2}})),
        )
        .await;
        assert_eq!(text(&result), "3");
        let result = meta::call(
            &registry,
            "call_mcp",
            object(
                json!({"connection": "fast", "tool": "add", "arguments": "{\"a\": 4, \"b\": 5}"}),
            ),
        )
        .await;
        assert_eq!(text(&result), "9");
        // null / absent arguments become {}: the upstream sees an empty object.
        for arguments in [
            json!({"connection": "fast", "tool": "lookup", "arguments": null}),
            json!({"connection": "fast", "tool": "lookup"}),
        ] {
            let result = meta::call(&registry, "call_mcp", object(arguments)).await;
            assert_eq!(
                result.is_error,
                Some(true),
                "lookup needs a key: {result:?}"
            );
        }
        assert_eq!(fast.tool_calls("lookup"), 2);
    });
}

#[test]
fn call_mcp_errors_are_the_exact_texts() {
    run(|| async {
        let (fast, _slow, registry) = setup().await;
        let cases = [
            (
                json!({"connection": "nope", "tool": "echo"}),
                "Unknown MCP connection 'nope'. Available connections: fast, slow.",
            ),
            (
                json!({"connection": "fast", "tool": "frobnicate"}),
                "Unknown tool 'frobnicate' on MCP connection 'fast'. Call search_mcp_tools, then get_mcp_tool_schema.",
            ),
            (
                json!({"connection": "fast", "tool": "echo", "arguments": [1, 2]}),
                "Invalid arguments for 'fast'.echo: expected a JSON object of argument names to values, or none. Call get_mcp_tool_schema for the schema.",
            ),
            // The unknown connection is reported, not the arguments of a
            // call that could never be made.
            (
                json!({"connection": "nope", "tool": "echo", "arguments": [1, 2]}),
                "Unknown MCP connection 'nope'. Available connections: fast, slow.",
            ),
            (
                json!({"connection": "fast", "tool": "echo", "arguments": "not json"}),
                "Invalid arguments for 'fast'.echo: expected a JSON object of argument names to values, or none. Call get_mcp_tool_schema for the schema.",
            ),
            // A string's text passes the door's check: nested this deep,
            // the upstream's envelope would take it past rmcp's parser's
            // limit, and its silence would be counted against it.
            (
                json!({"connection": "fast", "tool": "echo", "arguments": format!(
                    r#"{{"text":"x","d":{}{}}}"#, "[".repeat(120), "]".repeat(120)
                )}),
                "Invalid arguments for 'fast'.echo: objects and arrays in them nest deeper than 64 levels.",
            ),
            (
                json!({"connection": "fast", "tool": "echo", "arguments": r#"{"text":"a","text":"b"}"#}),
                "Invalid arguments for 'fast'.echo: an object in them has the same key twice.",
            ),
        ];
        for (arguments, expected) in cases {
            let result = meta::call(&registry, "call_mcp", object(arguments)).await;
            assert_eq!(error_text(&result), expected);
        }
        assert_eq!(
            fast.requests("tools/call"),
            0,
            "no error case reached the upstream"
        );
    });
}

#[test]
fn with_no_connections_the_meta_tools_say_so() {
    run(|| async {
        let registry = Registry::new(config("")).start();
        for (tool, arguments) in [
            ("call_mcp", json!({"connection": "x", "tool": "echo"})),
            ("describe_mcp", json!({"connection": "x"})),
        ] {
            let result = meta::call(&registry, tool, object(arguments)).await;
            assert_eq!(
                error_text(&result),
                "Unknown MCP connection 'x'. No connections are configured."
            );
        }
    });
}

/// `describe_mcp` tells an agent about a connection's prompts and resources
/// too (used with prompts/get and resources/read, not call_mcp).
#[test]
fn describe_mcp_lists_prompts_and_resources() {
    run(|| async {
        use mcp_test_support::conformance::{ConformanceHttpServer, ConformanceServer};
        let upstream =
            ConformanceHttpServer::start(([127, 0, 0, 1], 0).into(), ConformanceServer::new())
                .await
                .unwrap();
        let registry = Registry::new(config(&http_connection("c", &upstream.url(), ""))).start();
        let described = json_of(
            &meta::call(
                &registry,
                "describe_mcp",
                object(json!({"connection": "c"})),
            )
            .await,
        );
        let names = |key: &str, field: &str| -> Vec<String> {
            described[key]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|item| item[field].as_str().map(str::to_owned))
                .collect()
        };
        assert!(
            names("prompts", "name").contains(&"test_simple_prompt".to_owned()),
            "{described}"
        );
        let with_args = described["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|prompt| prompt["name"] == "test_prompt_with_arguments")
            .unwrap();
        assert_eq!(with_args["arguments"], json!(["arg1", "arg2"]));
        assert!(
            names("resources", "uri").contains(&"test://static-text".to_owned()),
            "{described}"
        );
        assert!(
            names("resources", "uriTemplate").contains(&"test://template/{id}/data".to_owned()),
            "{described}"
        );
    });
}
