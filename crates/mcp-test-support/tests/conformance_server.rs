//! The conformance upstream, driven by rmcp's own client over loopback
//! HTTP (a legacy session and a 2026-07-28 stateless client) and over stdio
//! (the built binary). The official suite is the real referee; this checks
//! quickly that the fixtures are there and answer what they should.

#![allow(deprecated)] // Sampling: SEP-2577 deprecates it, the fixtures still serve it.

use std::{net::SocketAddr, time::Duration};

use mcp_test_support::conformance::{ConformanceHttpServer, ConformanceServer};
use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServiceExt as _,
    model::{
        ArgumentInfo, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
        CompleteRequestParams, ContentBlock, CreateMessageRequestParams, CreateMessageResult,
        ElicitRequestParams, ElicitResult, ElicitationAction, ErrorCode, GetPromptRequestParams,
        Implementation, ProtocolVersion, ReadResourceRequestParams, Reference, ResourceContents,
        Role, SamplingMessage,
    },
    service::{ClientLifecycleMode, ClientServiceExt as _, RequestContext, RunningService},
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use serde_json::{Value, json};

/// Generous bound for any single step on a slow, busy machine.
const STEP: Duration = Duration::from_secs(15);

/// A client that answers the server's questions: every form field gets a
/// value named after it ("Alice" for `name`), every sampling request the
/// same sentence.
#[derive(Debug, Clone)]
struct Answering;

impl ClientHandler for Answering {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_sampling()
                .enable_elicitation()
                .build(),
            Implementation::new("conformance-server-test", "1.0.0"),
        )
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("Paris, obviously"),
            "test-model".to_owned(),
        )
        .with_stop_reason("endTurn"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let content: serde_json::Map<String, Value> = requested_schema
            .properties
            .keys()
            .map(|field| {
                let value = match field.as_str() {
                    "name" => "Alice".to_owned(),
                    other => format!("{other}-answer"),
                };
                (field.clone(), Value::String(value))
            })
            .collect();
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content)))
    }
}

type Client = RunningService<RoleClient, Answering>;

async fn start() -> ConformanceHttpServer {
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    ConformanceHttpServer::start(addr, ConformanceServer::new())
        .await
        .expect("the server starts")
}

/// A legacy client: `initialize`, then a session.
async fn connect_legacy(url: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    tokio::time::timeout(STEP, Answering.serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed")
}

/// A 2026-07-28 client: `server/discover`, then stateless requests.
async fn connect_stateless(url: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    tokio::time::timeout(STEP, Answering.serve_with_lifecycle(transport, lifecycle))
        .await
        .expect("discover timed out")
        .expect("discover failed")
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    tokio::time::timeout(STEP, client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("calling {tool} timed out"))
        .unwrap_or_else(|error| panic!("calling {tool} failed: {error}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .map(|text| text.text.as_str())
        .collect()
}

#[tokio::test]
async fn a_legacy_session_sees_the_whole_fixture_surface() {
    let server = start().await;
    let client = connect_legacy(&server.url()).await;

    let info = client.peer_info().expect("server info");
    let server_name = info.server_info.as_ref().map(|info| info.name.as_str());
    assert_eq!(server_name, Some("mcp-conformance-server"));
    let capabilities = &info.capabilities;
    assert!(capabilities.logging.is_some() && capabilities.completions.is_some());
    assert_eq!(
        capabilities.resources.as_ref().and_then(|r| r.subscribe),
        Some(true)
    );

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names.first(), Some(&"test_simple_text"));
    for expected in [
        "test_image_content",
        "test_audio_content",
        "test_error_handling",
        "test_sampling",
        "json_schema_2020_12_tool",
        "test_input_required_result_elicitation",
        "slow_compute",
    ] {
        assert!(names.contains(&expected), "{expected} is not listed");
    }
    let schema_tool = tools
        .iter()
        .find(|tool| tool.name == "json_schema_2020_12_tool")
        .unwrap();
    assert_eq!(
        schema_tool.input_schema.get("$schema"),
        Some(&json!("https://json-schema.org/draft/2020-12/schema")),
        "the raw schema reaches the client untouched"
    );

    assert_eq!(
        text(&call(&client, "test_simple_text", json!({})).await),
        "This is a simple text response for testing."
    );
    let image = call(&client, "test_image_content", json!({})).await;
    let image = image.content[0].as_image().expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    assert!(image.data.starts_with("iVBORw0KGgo"), "PNG signature");
    let error = call(&client, "test_error_handling", json!({})).await;
    assert_eq!(error.is_error, Some(true));
    // A server-to-client request in the middle of a call, answered by us.
    let sampled = call(
        &client,
        "test_sampling",
        json!({"prompt": "Capital of France?"}),
    )
    .await;
    assert_eq!(text(&sampled), "LLM response: Paris, obviously");

    let resources = client.list_all_resources().await.unwrap();
    assert!(
        resources
            .iter()
            .any(|resource| resource.uri == "test://static-text")
    );
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "test://template/{id}/data");
    let read = client
        .read_resource(ReadResourceRequestParams::new("test://template/42/data"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("expected text contents")
    };
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"id": "42", "templateTest": true, "data": "Data for ID: 42"})
    );
    let missing = client
        .read_resource(ReadResourceRequestParams::new("test://nothing-here"))
        .await
        .unwrap_err();
    assert!(
        missing.to_string().contains("test://nothing-here"),
        "{missing}"
    );

    let prompts = client.list_all_prompts().await.unwrap();
    assert!(
        prompts
            .iter()
            .any(|prompt| prompt.name == "test_prompt_with_arguments")
    );
    let arguments = json!({"arg1": "one", "arg2": "two"})
        .as_object()
        .cloned()
        .unwrap();
    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("test_prompt_with_arguments").with_arguments(arguments),
        )
        .await
        .unwrap();
    assert_eq!(prompt.messages[0].role, Role::User);
    assert_eq!(
        prompt.messages[0].content,
        ContentBlock::text("Prompt with arguments: arg1='one', arg2='two'")
    );
    let completion = client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("test_prompt_with_arguments"),
            ArgumentInfo::new("arg1", "hel"),
        ))
        .await
        .unwrap();
    assert_eq!(completion.completion.values, ["hello", "help"]);

    client.cancel().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn a_stateless_client_completes_an_input_required_round_trip() {
    let server = start().await;
    let client = connect_stateless(&server.url()).await;

    let tools = client.list_tools(None).await.unwrap();
    assert!(
        tools.ttl_ms.is_some() && tools.cache_scope.is_some(),
        "2026-07-28 lists carry caching hints"
    );
    // rmcp's client answers the InputRequiredResult through our handler
    // and calls again with inputResponses; the server greets the name.
    let greeted = call(&client, "test_input_required_result_elicitation", json!({})).await;
    assert_eq!(text(&greeted), "Hello, Alice!");
    // Two questions in two rounds, each round with a new sealed requestState.
    let two_rounds = call(&client, "test_input_required_result_multi_round", json!({})).await;
    assert_eq!(text(&two_rounds), "Alice's favorite color is color-answer");

    let missing = client
        .read_resource(ReadResourceRequestParams::new("test://nothing-here"))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(error) = missing else {
        panic!("expected a JSON-RPC error, got {missing}")
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "SEP-2164");

    client.cancel().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn the_binary_serves_the_same_handler_over_stdio() {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-conformance-server"));
    command.kill_on_drop(true);
    let transport = TokioChildProcess::new(command).unwrap();
    let client = tokio::time::timeout(STEP, Answering.serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools[0].name, "test_simple_text");
    let mixed = call(&client, "test_multiple_content_types", json!({})).await;
    assert_eq!(mixed.content.len(), 3);
    let audio = call(&client, "test_audio_content", json!({})).await;
    assert_eq!(
        audio.content[0]
            .as_audio()
            .map(|audio| audio.mime_type.as_str()),
        Some("audio/wav")
    );
    client.cancel().await.unwrap();
}
