use super::*;
use axum::http::HeaderValue;

use crate::{ToolAnswer, gateway::answer::direct_tests::echo};

/// A 2026-07-28 plain call is read with its client's context; anything
/// more or less is rmcp's. Its headers must be SEP-2243's, each once and
/// equal to the body, with no other MCP header.
#[test]
fn only_plain_2026_calls_with_their_headers_are_taken() {
    let context = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}"#;
    let body = |params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{{params}}}}}"#)
    };
    let read = |params: &str| StatelessCall::read(body(params).as_bytes());
    let call = read(&format!(
        r#""name":"a__echo","arguments":{{"text":"x"}},"_meta":{{{context},"progressToken":"p","io.modelcontextprotocol/logLevel":"info","io.modelcontextprotocol/clientInfo":{{"name":"c","version":"1"}}}}"#
    ))
    .expect("a plain 2026-07-28 call");
    assert_eq!(call.name(), "a__echo");
    assert_eq!(call.call.id, RequestId::Number(5));
    assert!(call.capabilities.elicitation.is_some());
    assert_eq!(call.log_level, Some(LoggingLevel::Info));
    assert_eq!(
        call.call.progress,
        Some(ProgressToken(RequestId::String("p".into())))
    );
    assert!(call.call.trace.is_none());
    // Another's `_meta` key is passed over (the gateway forwards no
    // client's `_meta`).
    let vendor = read(&format!(
        r#""name":"a__echo","_meta":{{{context},"example.com/x":{{"y":[1]}}}}"#
    ))
    .expect("a call with another's _meta key");
    assert_eq!(vendor.name(), "a__echo");
    let traced = read(&format!(
        r#""name":"a__echo","_meta":{{{context},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}"#
    ))
    .expect("a traced 2026-07-28 call");
    assert!(traced.call.trace.unwrap().traceparent.is_some());
    for other in [
        // No context, half of it, another version, another key.
        r#""name":"t""#.to_owned(),
        r#""name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#.to_owned(),
        format!(
            r#""name":"t","_meta":{{{}}}"#,
            context.replace("2026-07-28", "2025-11-25")
        ),
        format!(r#""name":"t","_meta":{{{context},"io.modelcontextprotocol/x":1}}"#),
        // A retry's fields, a task.
        format!(r#""name":"t","_meta":{{{context}}},"requestState":"s""#),
        format!(r#""name":"t","_meta":{{{context}}},"inputResponses":{{}}"#),
        format!(r#""name":"t","_meta":{{{context}}},"task":{{}}"#),
    ] {
        assert!(read(&other).is_none(), "{other}");
    }

    let plain = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let headers = |extra: &[(&'static str, &str)]| {
        let mut headers = HeaderMap::new();
        for (name, value) in plain.iter().chain(extra) {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    };
    let sep2243 = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "a__echo"),
    ];
    assert!(call.takes(&headers(&sep2243)));
    let mut cases: Vec<Vec<(&'static str, &str)>> = vec![
        sep2243[..2].to_vec(),
        [&sep2243[..], &[("mcp-name", "a__echo")]].concat(),
        [&sep2243[..], &[("mcp-param-region", "eu")]].concat(),
        [&sep2243[..], &[("mcp-session-id", "s")]].concat(),
    ];
    for (n, (name, _)) in sep2243.iter().enumerate() {
        let mut wrong = sep2243.to_vec();
        wrong[n] = (name, "other");
        cases.push(wrong);
    }
    for extra in cases {
        assert!(!call.takes(&headers(&extra)), "{extra:?}");
    }
}

/// Answers shaped per generation as rmcp's server shapes them: a task
/// for a client that did not declare tasks is -32021 (a 400 for a
/// 2026-07-28 client, as are its other protocol errors; -32601 a 404);
/// a 2025 answer loses `resultType`; a 2026-07-28 "resource not found"
/// is -32602.
#[test]
fn answers_are_shaped_and_statused_per_generation() {
    use Generation::{Sessions, Stateless};
    use rmcp::model::{CallToolResult, CreateTaskResult, Task, TaskStatus};

    let task = || {
        let task = Task::new("t-1", TaskStatus::Working, "2026-12-01", "2026-12-01");
        Ok(Called::Response(CallToolResponse::Task(
            CreateTaskResult::new(task),
        )))
    };
    for generation in [Sessions, Stateless] {
        let refused = generation.shape(task(), false).unwrap_err();
        assert_eq!(refused.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
        assert!(matches!(
            generation.shape(task(), true).map(Answer::into_result),
            Ok(ServerResult::CreateTaskResult(_))
        ));
    }
    let complete = || {
        let mut result = CallToolResult::success(vec![]);
        result.result_type = Some(rmcp::model::ResultType::COMPLETE);
        Ok(Called::Response(CallToolResponse::Complete(result)))
    };
    let typed =
        |answer: Answer| serde_json::to_value(answer.into_result()).unwrap()["resultType"].clone();
    assert_eq!(
        typed(Sessions.shape(complete(), false).unwrap()),
        serde_json::Value::Null
    );
    assert_eq!(
        typed(Stateless.shape(complete(), false).unwrap()),
        "complete"
    );
    let not_found = || Err(ErrorData::resource_not_found("gone", None));
    assert_eq!(
        Stateless.shape(not_found(), false).unwrap_err().code,
        ErrorCode::INVALID_PARAMS
    );
    assert_eq!(
        Sessions.shape(not_found(), false).unwrap_err().code,
        ErrorCode::RESOURCE_NOT_FOUND
    );

    let error = |code| ServerJsonRpcMessage::error(ErrorData::new(code, "x", None), None);
    for (code, stateless) in [
        (
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            StatusCode::BAD_REQUEST,
        ),
        (ErrorCode::HEADER_MISMATCH, StatusCode::BAD_REQUEST),
        (ErrorCode::METHOD_NOT_FOUND, StatusCode::NOT_FOUND),
        (ErrorCode::INVALID_PARAMS, StatusCode::OK),
        (ErrorCode::INTERNAL_ERROR, StatusCode::OK),
    ] {
        assert_eq!(Stateless.status(&error(code).into()), stateless, "{code:?}");
        assert_eq!(
            Sessions.status(&error(code).into()),
            StatusCode::OK,
            "{code:?}"
        );
    }
    assert_eq!(Stateless.status(&echo(1).into()), StatusCode::OK);
}

/// A tool's answer with its structured content kept as text is shaped as
/// rmcp shapes the same answer read into a tree, and stays text but where
/// rmcp's shaping changes the structured content itself (a 2025 client's
/// answer whose structured content is not an object).
#[test]
fn a_kept_tool_answer_is_shaped_as_rmcp_shapes_its_tree() {
    use Generation::{Sessions, Stateless};
    use rmcp::model::{CallToolResult, ContentBlock, ResultType};

    let kept = |structured: &str| {
        let mut result = CallToolResult::success(vec![ContentBlock::text("t")]);
        result.result_type = Some(ResultType::COMPLETE);
        let raw = serde_json::value::RawValue::from_string(structured.to_owned()).unwrap();
        ToolAnswer::new(result, Some(raw))
    };
    for structured in [r#"{"b": 1, "a": [2]}"#, "[1, 2]", "3", "null"] {
        for generation in [Sessions, Stateless] {
            let answer = kept(structured);
            let tree = answer.clone().into_result();
            let as_rmcp = generation
                .shape(
                    Ok(Called::Response(CallToolResponse::Complete(tree))),
                    false,
                )
                .unwrap()
                .into_result();
            let shaped = generation.shape(Ok(Called::Tool(answer)), false).unwrap();
            let stays_text = generation == Stateless || structured.starts_with('{');
            assert_eq!(
                matches!(shaped, Answer::Tool(_)),
                stays_text,
                "{generation:?} {structured}"
            );
            assert_eq!(
                serde_json::to_value(shaped.into_result()).unwrap(),
                serde_json::to_value(as_rmcp).unwrap(),
                "{generation:?} {structured}"
            );
        }
    }
}
