//! The gateway as a transparent proxy over real loopback HTTP: resources,
//! prompts, completion, subscriptions and server-to-client requests go
//! through the supervisor like calls (parked and retired connections answer
//! at once with no I/O, a hung read is cut at `call_timeout`), and what works
//! passes through unchanged. Downstream client: rmcp's streamable HTTP client.

// Sampling and resource subscriptions are deprecated by SEP-2577 (protocol
// 2026-07-28); the gateway relays them for 2025-era clients and servers.
#![allow(deprecated)]

mod support;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use mcp_test_support::{
    Fault, FaultRule, Match, TestServer, TestServerOptions, eventually,
    server::{PROMPT_COMPLETIONS, RESOURCES, SAMPLING_TOOL, prompt_text, template_text},
};
use rmcp::{
    ClientHandler, ErrorData,
    model::{
        ArgumentInfo, CallToolRequestParams, ClientCapabilities, ClientConfig,
        CompleteRequestParams, CreateMessageRequestParams, CreateMessageResult, ErrorCode,
        GetPromptRequestParams, Implementation, PaginatedRequestParams, ProtocolVersion,
        ReadResourceRequestParams, Reference, ResourceContents, ResourceUpdatedNotificationParam,
        Role, SamplingMessage, SubscribeRequestParams,
    },
    service::{NotificationContext, RequestContext, RoleClient, RunningService},
};
use serde_json::json;
use support::*;
// tokio's clock: the tests timed on it run on a paused one (`run_paused`).
use tokio::time::Instant;

/// The static resource most tests read.
const README: &str = RESOURCES[0].0;

/// What "at once" means for a parked or retired connection, on the paused
/// clock these tests run on (`run_paused`): no I/O, and no time at all, so
/// nothing waited on a timer (a cooldown, a deadline, a retry's backoff).
const AT_ONCE: Duration = Duration::ZERO;

/// A downstream client that declares nothing (no sampling, no roots) and
/// records the resource updates it is sent.
#[derive(Clone, Default)]
struct Plain {
    updated: Arc<Mutex<Vec<String>>>,
}

impl Plain {
    fn updated(&self) -> Vec<String> {
        self.updated.lock().unwrap().clone()
    }
}

impl ClientHandler for Plain {
    fn get_info(&self) -> ClientConfig {
        client_config(ClientCapabilities::default())
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }
}

/// A downstream client that can sample: it answers `sampled: {the prompt}`.
#[derive(Clone, Default)]
struct Sampler;

impl ClientHandler for Sampler {
    fn get_info(&self) -> ClientConfig {
        client_config(ClientCapabilities::builder().enable_sampling().build())
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = params
            .messages
            .first()
            .and_then(|message| message.content.first())
            .and_then(|content| content.as_text())
            .map(|text| text.text.clone())
            .unwrap_or_default();
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(format!("sampled: {asked}")),
            "test-model".to_owned(),
        ))
    }
}

/// A 2025-11-25 client (a session, server-to-client requests allowed).
fn client_config(capabilities: ClientCapabilities) -> ClientConfig {
    ClientConfig::new(
        capabilities,
        Implementation::new("gateway-surface-test", "0"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25)
}

type Client<H> = RunningService<RoleClient, H>;

/// A test server, and a gateway (prefix `always`) whose only connection, `a`,
/// points at it: `settings` first (e.g. a `[supervisor.quarantine]` table),
/// then `[connections.a]` with `extra` keys.
async fn gateway(settings: &str, extra: &str) -> (TestServer, ServedGateway) {
    let upstream = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let gateway = gateway_to(&upstream, settings, extra).await;
    (upstream, gateway)
}

async fn gateway_to(upstream: &TestServer, settings: &str, extra: &str) -> ServedGateway {
    let toml = format!("{settings}{}", http_connection("a", &upstream.url(), extra));
    ServedGateway::start(config(&toml)).await
}

/// A downstream client with `handler`, whose own response cache is off (so a
/// failure is never hidden behind a stale answer).
async fn connect<H: ClientHandler>(gateway: &ServedGateway, handler: H) -> Client<H> {
    let client = gateway.connect(handler).await;
    client
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    client
}

fn read(uri: &str) -> ReadResourceRequestParams {
    ReadResourceRequestParams::new(uri)
}

fn greet(name: &str) -> GetPromptRequestParams {
    GetPromptRequestParams::new("a__greet").with_arguments(
        json!({ "name": name })
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

fn tool_call(name: &str, arguments: serde_json::Value) -> CallToolRequestParams {
    let mut call = CallToolRequestParams::new(name.to_owned());
    call.arguments = arguments.as_object().cloned();
    call
}

/// The text of the only contents of a read.
fn read_text(contents: &[ResourceContents]) -> (String, String) {
    match contents {
        [ResourceContents::TextResourceContents { uri, text, .. }] => (uri.clone(), text.clone()),
        other => panic!("expected one text contents, got {other:?}"),
    }
}

/// Calls `a__lookup` through the gateway while the upstream answers 503 to
/// it, until the connection parks (or retires); returns the tool error text.
async fn make_unavailable<H: ClientHandler>(upstream: &TestServer, client: &Client<H>) -> String {
    upstream
        .faults()
        .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
    let result = client
        .call_tool(tool_call("a__lookup", json!({"key": "k"})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    upstream.faults().clear();
    text(&result)
}

/// `resources/read`, `prompts/get` and `completion/complete` on an
/// unavailable connection: each is answered [`AT_ONCE`] with a -32000
/// error whose message contains `expected`, and nothing reaches the upstream.
/// Every request is checked before the test fails, so a failure names all
/// that went wrong.
async fn refused_at_once<H: ClientHandler>(
    upstream: &TestServer,
    client: &Client<H>,
    expected: &str,
) {
    let before = upstream.counts().requests;
    let mut wrong = Vec::new();
    let mut check = |what: &str, result: Result<String, rmcp::ServiceError>, took: Duration| {
        match result {
            Err(rmcp::ServiceError::McpError(error))
                if error.code == ErrorCode(-32000) && error.message.contains(expected) => {}
            other => wrong.push(format!("{what}: {other:?}")),
        }
        if took > AT_ONCE {
            wrong.push(format!("{what} took {took:?}"));
        }
    };

    let started = Instant::now();
    let result = client.read_resource(read(README)).await;
    check(
        "resources/read",
        result.map(|r| format!("{r:?}")),
        started.elapsed(),
    );

    let started = Instant::now();
    let result = client.get_prompt(greet("bob")).await;
    check(
        "prompts/get",
        result.map(|r| format!("{r:?}")),
        started.elapsed(),
    );

    let completion = CompleteRequestParams::new(
        Reference::for_prompt("a__greet"),
        ArgumentInfo::new("name", "al"),
    );
    let started = Instant::now();
    let result = client.complete(completion).await;
    check(
        "completion/complete",
        result.map(|r| format!("{r:?}")),
        started.elapsed(),
    );

    let after = upstream.counts().requests;
    if after != before {
        wrong.push(format!(
            "requests reached the upstream: {before:?} -> {after:?}"
        ));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn resources_prompts_and_completion_pass_through_unchanged() {
    run(|| async {
        let (upstream, gateway) = gateway("", "").await;
        let client = connect(&gateway, Plain::default()).await;

        // The gateway offers what its only upstream offers.
        let capabilities = client.peer_info().unwrap().capabilities.clone();
        let resources = capabilities.resources.expect("resources are offered");
        assert_eq!(resources.subscribe, Some(true));
        assert!(capabilities.prompts.is_some());
        assert!(capabilities.completions.is_some());

        let listed: Vec<String> = client
            .list_all_resources()
            .await
            .unwrap()
            .into_iter()
            .map(|resource| resource.uri.clone())
            .collect();
        let expected: Vec<String> = RESOURCES.iter().map(|(uri, _)| (*uri).to_owned()).collect();
        assert_eq!(listed, expected);
        let templates: Vec<String> = client
            .list_all_resource_templates()
            .await
            .unwrap()
            .into_iter()
            .map(|template| template.uri_template.clone())
            .collect();
        assert_eq!(templates, ["test://doc/{name}"]);

        // A listed resource, and one only the template names.
        let result = client.read_resource(read(README)).await.unwrap();
        assert_eq!(
            read_text(&result.contents),
            (README.to_owned(), RESOURCES[0].1.to_owned())
        );
        let result = client
            .read_resource(read("test://doc/notes"))
            .await
            .unwrap();
        assert_eq!(
            read_text(&result.contents),
            ("test://doc/notes".to_owned(), template_text("notes"))
        );
        assert_eq!(upstream.requests("resources/read"), 2);

        // The upstream's own error passes through (the only resource server
        // gets the URIs nobody lists; the code is checked by
        // `an_unknown_resource_is_not_found_in_the_clients_protocol`).
        let error = jsonrpc_error(client.read_resource(read("test://elsewhere/nothing")).await);
        assert_eq!(
            error.message,
            "Resource not found: test://elsewhere/nothing"
        );
        assert_eq!(error.data, Some(json!({"uri": "test://elsewhere/nothing"})));
        assert_eq!(upstream.requests("resources/read"), 3, "it was asked");

        // Prompts: listed under the exposed name, got with their messages.
        let prompts = client.list_all_prompts().await.unwrap();
        let names: Vec<&str> = prompts.iter().map(|prompt| prompt.name.as_str()).collect();
        assert_eq!(names, ["a__greet"]);
        let arguments = prompts[0].arguments.as_deref().unwrap_or_default();
        assert_eq!(arguments.len(), 1);
        assert_eq!(arguments[0].name, "name");
        let prompt = client.get_prompt(greet("bob")).await.unwrap();
        assert_eq!(prompt.description.as_deref(), Some("A greeting"));
        assert_eq!(prompt.messages.len(), 1);
        assert_eq!(prompt.messages[0].role, Role::User);
        let message = serde_json::to_value(&prompt.messages[0].content).unwrap();
        assert_eq!(message, json!({"type": "text", "text": prompt_text("bob")}));
        assert_eq!(upstream.requests("prompts/get"), 1);
        // A missing argument is the upstream's -32602.
        let error = jsonrpc_error(
            client
                .get_prompt(GetPromptRequestParams::new("a__greet"))
                .await,
        );
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{error:?}");
        assert!(error.message.contains("missing argument"), "{error:?}");
        // An unknown prompt is refused by the gateway, without asking upstream.
        let error = jsonrpc_error(
            client
                .get_prompt(GetPromptRequestParams::new("a__nope"))
                .await,
        );
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{error:?}");
        assert_eq!(upstream.requests("prompts/get"), 2);

        // Completion of the prompt's argument, under the exposed name.
        let completion = client
            .complete(CompleteRequestParams::new(
                Reference::for_prompt("a__greet"),
                ArgumentInfo::new("name", "al"),
            ))
            .await
            .unwrap();
        let wanted: Vec<String> = PROMPT_COMPLETIONS
            .iter()
            .filter(|name| name.starts_with("al"))
            .map(|name| (*name).to_owned())
            .collect();
        assert_eq!(completion.completion.values, wanted);
        // And of the template's variable.
        let completion = client
            .complete(CompleteRequestParams::new(
                Reference::for_resource("test://doc/{name}"),
                ArgumentInfo::new("name", "re"),
            ))
            .await
            .unwrap();
        assert_eq!(completion.completion.values, ["readme"]);
        assert_eq!(upstream.requests("completion/complete"), 2);
    });
}

/// A resource the upstream does not have is "Resource not found" in the
/// words of the downstream client's protocol: `-32002` up to 2025-11-25
/// (protocol 2026-07-28 made it `-32602`, SEP-2164), whichever protocol the
/// gateway speaks with the upstream.
#[test]
fn an_unknown_resource_is_not_found_in_the_clients_protocol() {
    for legacy_upstream in [true, false] {
        run(move || async move {
            let upstream = TestServer::start(TestServerOptions::default())
                .await
                .unwrap();
            upstream.control().set_legacy_only(legacy_upstream);
            let gateway = gateway_to(&upstream, "", "").await;
            let client = connect(&gateway, Plain::default()).await;
            let error = jsonrpc_error(client.read_resource(read("test://doc/a/b")).await);
            assert_eq!(upstream.requests("resources/read"), 1, "it was asked");
            assert_eq!(
                error.code,
                ErrorCode::RESOURCE_NOT_FOUND,
                "legacy upstream: {legacy_upstream}; {error:?}"
            );
            assert_eq!(error.data, Some(json!({"uri": "test://doc/a/b"})));
        });
    }
}

/// A 2025-era upstream (`resources/subscribe` is gone from 2026-07-28).
async fn legacy_gateway(extra: &str) -> (TestServer, ServedGateway) {
    let upstream = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    upstream.control().set_legacy_only(true);
    let gateway = gateway_to(&upstream, "", extra).await;
    (upstream, gateway)
}

/// `resources/subscribe` from a 2025-11-25 client, and the upstream's
/// `notifications/resources/updated`: relayed to the subscribed client only,
/// whether the upstream session is 2025-era (`resources/subscribe` upstream)
/// or 2026-07-28 (`subscriptions/listen` upstream).
#[test]
fn a_subscribed_client_gets_the_upstreams_resource_updates() {
    for legacy_upstream in [true, false] {
        // Paused time: the pause before "nobody else was told" ends only once
        // every task waits, so an update wrongly relayed has arrived by then.
        run_paused(move || async move {
            let upstream = TestServer::start(TestServerOptions::default())
                .await
                .unwrap();
            upstream.control().set_legacy_only(legacy_upstream);
            let gateway = gateway_to(&upstream, "", "").await;
            let subscriber = Plain::default();
            let client = connect(&gateway, subscriber.clone()).await;
            let bystander = Plain::default();
            let _other = connect(&gateway, bystander.clone()).await;

            client
                .subscribe(SubscribeRequestParams::new(README))
                .await
                .unwrap();
            if legacy_upstream {
                assert_eq!(upstream.requests("resources/subscribe"), 1);
            }
            // The upstream counts one subscriber to README (a listen stream
            // may open just after the answer).
            let mut sent = 0;
            let deadline = Instant::now() + Duration::from_secs(10);
            while sent == 0 && Instant::now() < deadline {
                sent = upstream.control().notify_resource_updated(README).await;
                if sent == 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            assert_eq!(sent, 1, "legacy upstream: {legacy_upstream}");
            eventually!(subscriber.updated() == [README.to_owned()]);
            // Another resource changing is not news to anyone.
            let other = RESOURCES[1].0;
            assert_eq!(upstream.control().notify_resource_updated(other).await, 0);
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(subscriber.updated(), [README.to_owned()]);
            assert!(
                bystander.updated().is_empty(),
                "only subscribers are told: {:?}",
                bystander.updated()
            );
        });
    }
}

#[test]
fn a_parked_connection_answers_reads_and_prompts_at_once_without_io() {
    run_paused(|| async {
        let quarantine = "[supervisor.quarantine]\nbase_cooldown = \"4s\"\n";
        let (upstream, gateway) = gateway(quarantine, "").await;
        let client = connect(&gateway, Plain::default()).await;
        let parked = make_unavailable(&upstream, &client).await;
        assert!(parked.contains("temporarily unavailable"), "{parked}");

        refused_at_once(&upstream, &client, "is temporarily unavailable").await;

        // The park ends by itself: reads work again after the cooldown.
        let revived = wait_until_read(&client, Duration::from_secs(20)).await;
        assert!(revived, "no successful read after the cooldown");
    });
}

/// Whether a read of [`README`] succeeds within `within` (tried every 200 ms).
async fn wait_until_read<H: ClientHandler>(client: &Client<H>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if client.read_resource(read(README)).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

#[test]
fn a_retired_connection_answers_reads_and_prompts_at_once_without_io() {
    run_paused(|| async {
        // The first park retires.
        let quarantine = "[supervisor.quarantine]\nretire_after = 1\n";
        let (upstream, gateway) = gateway(quarantine, "").await;
        let client = connect(&gateway, Plain::default()).await;
        let retired = make_unavailable(&upstream, &client).await;
        assert!(retired.contains("will not be retried"), "{retired}");

        refused_at_once(&upstream, &client, "will not be retried").await;
    });
}

/// A client that lists again (as it does on `list_changed`, which a
/// retirement sends) still gets the supervisor's answer for the retired
/// connection's resources, as it does for its tools and prompts, not
/// "Resource not found".
#[test]
fn a_retired_connection_still_answers_for_its_resources_after_a_new_listing() {
    run_paused(|| async {
        let quarantine = "[supervisor.quarantine]\nretire_after = 1\n";
        let (upstream, gateway) = gateway(quarantine, "").await;
        let client = connect(&gateway, Plain::default()).await;
        let retired = make_unavailable(&upstream, &client).await;
        assert!(retired.contains("will not be retried"), "{retired}");
        // A listing rebuilds the gateway's view without the retired connection.
        client.list_all_tools().await.unwrap();
        client.list_all_resources().await.unwrap();

        refused_at_once(&upstream, &client, "will not be retried").await;
    });
}

#[test]
fn a_hung_read_times_out_at_call_timeout_and_the_gateway_keeps_serving() {
    run_paused(|| async {
        let (upstream, gateway) = gateway("", "call_timeout = \"1s\"").await;
        let client = connect(&gateway, Plain::default()).await;
        upstream.faults().push(FaultRule::always(
            Match::method("resources/read"),
            Fault::Hang,
        ));

        let hung = {
            let peer = client.peer().clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let result = peer.read_resource(read(README)).await;
                (result, started.elapsed())
            })
        };
        // Meanwhile other requests are served, not queued behind it.
        eventually!(upstream.requests("resources/read") == 1);
        let echoed = client
            .call_tool(tool_call("a__echo", json!({"text": "meanwhile"})))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "meanwhile");
        assert!(
            !hung.is_finished(),
            "the call was answered only once the hung read ended"
        );

        let (result, took) = hung.await.unwrap();
        let error = jsonrpc_error(result);
        assert_eq!(error.code, ErrorCode(-32001), "{error:?}");
        assert!(error.message.contains("did not answer"), "{error:?}");
        // Paused time: exactly the connection's call_timeout.
        assert_eq!(took, Duration::from_secs(1), "answered after {took:?}");

        // And afterwards.
        upstream.faults().clear();
        let result = client.read_resource(read(README)).await.unwrap();
        assert_eq!(read_text(&result.contents).1, RESOURCES[0].1);
        let prompt = client.get_prompt(greet("eve")).await.unwrap();
        assert_eq!(prompt.messages.len(), 1);
    });
}

#[test]
fn an_upstream_sampling_request_no_client_can_answer_fails_at_once() {
    run_paused(|| async {
        // Server-to-client requests are gone from protocol 2026-07-28.
        let (upstream, gateway) = legacy_gateway("call_timeout = \"30s\"").await;
        upstream.control().set_sampling_tool(true).await;
        // Declares no sampling capability.
        let client = connect(&gateway, Plain::default()).await;

        let started = Instant::now();
        let result = client
            .call_tool(tool_call(
                &format!("a__{SAMPLING_TOOL}"),
                json!({"prompt": "hi"}),
            ))
            .await
            .unwrap();
        // Paused time: nothing waited on a timer (call_timeout is 30 s).
        let took = started.elapsed();
        assert_eq!(took, Duration::ZERO, "answered after {took:?}");
        // The upstream's tool got an error and reported it.
        assert_eq!(result.is_error, Some(true), "{result:?}");
        let said = text(&result);
        assert!(said.starts_with("sampling failed"), "{said}");
        assert!(said.contains("does not support sampling"), "{said}");
        assert_eq!(upstream.completed_calls(SAMPLING_TOOL), 1);
        // The connection is fine.
        let echoed = client
            .call_tool(tool_call("a__echo", json!({"text": "still here"})))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "still here");
    });
}

#[test]
fn an_upstream_sampling_request_is_answered_by_the_downstream_client() {
    run(|| async {
        let (upstream, gateway) = legacy_gateway("call_timeout = \"30s\"").await;
        upstream.control().set_sampling_tool(true).await;
        let client = connect(&gateway, Sampler).await;

        let result = client
            .call_tool(tool_call(
                &format!("a__{SAMPLING_TOOL}"),
                json!({"prompt": "what is 2+2?"}),
            ))
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert_eq!(text(&result), "sampled: what is 2+2?");
    });
}

#[test]
fn downstream_pagination_refuses_a_bogus_cursor() {
    run(|| async {
        let (_upstream, gateway) = gateway("", "").await;
        let client = connect(&gateway, Plain::default()).await;
        let first = client.list_tools(None).await.unwrap();
        assert!(first.tools.iter().any(|tool| tool.name == "a__echo"));
        assert_eq!(first.next_cursor, None, "everything fits in one page");
        for bogus in ["bogus", "tools:999999", "prompts:1"] {
            let params = PaginatedRequestParams::default().with_cursor(Some(bogus.to_owned()));
            let error = jsonrpc_error(client.list_tools(Some(params)).await);
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{bogus}: {error:?}");
        }
        let params = PaginatedRequestParams::default().with_cursor(Some("bogus".to_owned()));
        let error = jsonrpc_error(client.list_resources(Some(params)).await);
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{error:?}");
    });
}

/// The upstream's own JSON-RPC error comes back as `Forwarded::Error`,
/// whatever the protocol of the upstream session. (rmcp's server answers a
/// 2026-07-28 request for an unknown method with HTTP 404 carrying the
/// JSON-RPC error, a 2025-era one with HTTP 200.)
#[test]
fn an_upstreams_json_rpc_error_is_passed_on_whatever_the_protocol() {
    for legacy_upstream in [true, false] {
        run(move || async move {
            use actix::Actor;
            use mcp_supervisor::{
                Forwarded,
                registry::{Forward, Registry},
            };
            use rmcp::model::{ClientRequest, CustomRequest};

            let upstream = TestServer::start(TestServerOptions::default())
                .await
                .unwrap();
            upstream.control().set_legacy_only(legacy_upstream);
            let registry =
                Registry::new(config(&http_connection("a", &upstream.url(), ""))).start();
            let request = ClientRequest::CustomRequest(CustomRequest::new("test/unknown", None));
            let forwarded = registry
                .send(Forward {
                    connection: "a".into(),
                    request: request.into(),
                    link: None,
                    trace: mcp_supervisor::telemetry::TraceParent::none(),
                })
                .await
                .unwrap();
            assert_eq!(upstream.requests("test/unknown"), 1, "it was asked");
            match forwarded {
                Forwarded::Error(error) => {
                    assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND, "{error:?}");
                }
                other => panic!("legacy upstream: {legacy_upstream}; {other:?}"),
            }
        });
    }
}

/// A 2026-07-28 client has no session, so a 2025-era upstream's sampling
/// request cannot reach it as a request: the gateway answers the call
/// `input_required`, keeps the upstream's call waiting, and hands the
/// client's answer (its retry) back to the upstream. rmcp's client runs the
/// rounds itself, with `Sampler`'s callback.
#[test]
fn a_2026_client_answers_a_2025_upstreams_sampling_request_through_input_required() {
    run(|| async {
        let (upstream, gateway) = legacy_gateway("call_timeout = \"30s\"").await;
        upstream.control().set_sampling_tool(true).await;
        let discover = rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let client = gateway.connect_with(Sampler, discover).await;
        assert_eq!(
            client.peer_info().map(|info| info.protocol_version.clone()),
            Some(ProtocolVersion::V_2026_07_28)
        );
        let result = client
            .call_tool(tool_call(
                &format!("a__{SAMPLING_TOOL}"),
                json!({"prompt": "what is 2+2?"}),
            ))
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert_eq!(text(&result), "sampled: what is 2+2?");
        assert_eq!(
            upstream.tool_calls(SAMPLING_TOOL),
            1,
            "one call upstream, two rounds"
        );
    });
}

/// A request for a method the gateway serves, with params that do not fit
/// it (`tools/call` with array `arguments`), is invalid params (-32602), not
/// an unknown method; an unknown method stays -32601. Either way nothing
/// reaches the upstream.
#[test]
fn malformed_params_of_a_served_method_are_invalid_params() {
    run(|| async {
        use rmcp::model::{ClientRequest, CustomRequest};

        let (upstream, gateway) = gateway("", "").await;
        let client = connect(&gateway, Plain::default()).await;
        let cases = [
            (
                "tools/call",
                json!({"name": "a__echo", "arguments": [1, 2]}),
                ErrorCode::INVALID_PARAMS,
            ),
            (
                "tools/call",
                json!({"name": "a__echo", "arguments": "text"}),
                ErrorCode::INVALID_PARAMS,
            ),
            (
                "resources/read",
                json!({"uri": 5}),
                ErrorCode::INVALID_PARAMS,
            ),
            ("no/such/method", json!({}), ErrorCode::METHOD_NOT_FOUND),
        ];
        for (method, params, code) in cases {
            let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
            match client.send_request(request).await {
                Err(rmcp::ServiceError::McpError(error)) => {
                    assert_eq!(error.code, code, "{method}: {error:?}");
                }
                other => panic!("{method}: expected error {code:?}, got {other:?}"),
            }
        }
        assert_eq!(upstream.requests("tools/call"), 0);
        assert_eq!(upstream.requests("resources/read"), 0);
    });
}

/// Large requests (a body of 1 MiB or more) are processed two at a time, so
/// what their parsed copies cost in memory is bounded, and they are never in
/// the way of a small one: with two large calls in progress (held at the
/// upstream) and a third waiting in the gateway, small calls are answered
/// (docs/DECISIONS.md #70).
#[test]
fn large_requests_go_two_at_a_time_and_small_calls_pass_them() {
    run(|| async {
        let (upstream, gateway) = gateway("", "max_concurrent_calls = 8").await;
        let client = connect(&gateway, Plain::default()).await;
        let (big, large) = large_calls_held(&upstream, &client, 3).await;

        // Small calls are answered while the large ones are in progress,
        // and none of them lets the third large request through.
        twenty_small_calls(&client).await;
        assert!(large.iter().all(|call| !call.is_finished()));
        assert_eq!(
            upstream.tool_calls("echo"),
            2,
            "a third large request reached the upstream while two were in progress"
        );

        // One answered: the third goes in.
        upstream.control().release(1);
        eventually!(upstream.tool_calls("echo") == 3);
        upstream.control().release(2);
        for call in large {
            let echoed = call.await.unwrap().unwrap();
            assert_eq!(text(&echoed).len(), big.len());
        }
    });
}

type LargeCall = tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, rmcp::ServiceError>>;

/// `count` calls of `a__echo` with a `LARGE_BODY_BYTES` text through
/// `client`, the upstream holding them, once two have reached it (the two
/// the gateway lets in at a time). The text, and the calls.
async fn large_calls_held<H: ClientHandler>(
    upstream: &TestServer,
    client: &Client<H>,
    count: usize,
) -> (String, Vec<LargeCall>) {
    upstream.control().hold("echo");
    let big = "x".repeat(mcp_supervisor::gateway::LARGE_BODY_BYTES);
    let calls = (0..count)
        .map(|_| {
            let peer = client.peer().clone();
            let call = tool_call("a__echo", json!({ "text": big }));
            tokio::spawn(async move { peer.call_tool(call).await })
        })
        .collect();
    eventually!(upstream.control().held() == 2);
    (big, calls)
}

/// Twenty `a__add` calls through `client`, each answered right.
async fn twenty_small_calls<H: ClientHandler>(client: &Client<H>) {
    for n in 0..20 {
        let sum = client
            .call_tool(tool_call("a__add", json!({"a": n, "b": 1})))
            .await
            .unwrap();
        assert_eq!(text(&sum), (n + 1).to_string());
    }
}

/// A gateway with `settings` (and connection `a` to a test server), a
/// client, and two large calls of that client held at the upstream.
async fn two_large_calls_held(
    settings: &str,
) -> (TestServer, ServedGateway, Client<Plain>, Vec<LargeCall>) {
    let (upstream, gateway) = gateway(settings, "max_concurrent_calls = 8").await;
    let client = connect(&gateway, Plain::default()).await;
    let (_, held) = large_calls_held(&upstream, &client, 2).await;
    (upstream, gateway, client, held)
}

/// A POST to the gateway's endpoint with the headers MCP asks for and no
/// session.
fn raw_post(http: &reqwest::Client, url: &str) -> reqwest::RequestBuilder {
    http.post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
}

/// A large request that waits for its turn holds none of its bytes: the
/// gateway reads its body only once a permit is free, so its client waits to
/// send it. Whether the body's length is declared or not (chunked: read up
/// to `LARGE_BODY_BYTES`, then it waits). Once a large call is answered the
/// waiting bodies are read (docs/DECISIONS.md #70).
#[test]
fn a_waiting_large_request_is_not_read_until_its_turn() {
    run(|| async {
        let (upstream, gateway, client, held) =
            two_large_calls_held("[gateway]\nmax_body_bytes = 67108864\n").await;

        // 48 MiB each, far more than loopback socket buffers hold.
        const SIZE: usize = 48 << 20;
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let waiting: Vec<_> = [true, false]
            .into_iter()
            .map(|declared| {
                let pulled = Arc::new(AtomicUsize::new(0));
                let chunk = bytes::Bytes::from(vec![b' '; 64 << 10]);
                let counted = Arc::clone(&pulled);
                let chunks = futures::stream::iter((0..SIZE / chunk.len()).map(move |_| {
                    counted.fetch_add(chunk.len(), Ordering::SeqCst);
                    Ok::<_, std::io::Error>(chunk.clone())
                }));
                let mut post =
                    raw_post(&http, &gateway.url).body(reqwest::Body::wrap_stream(chunks));
                if declared {
                    post = post.header("content-length", SIZE);
                }
                (pulled, tokio::spawn(post.send()))
            })
            .collect();

        // Small calls are answered meanwhile; the waiting bodies stay unread
        // (what was sent sits in the socket buffers, a few MiB at most).
        twenty_small_calls(&client).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        for (pulled, _) in &waiting {
            let pulled = pulled.load(Ordering::SeqCst);
            assert!(
                pulled < SIZE / 2,
                "{pulled} bytes of a waiting large request were taken"
            );
        }

        upstream.control().release(2);
        for call in held {
            call.await.unwrap().unwrap();
        }
        for (pulled, sent) in waiting {
            // Whitespace is not a JSON-RPC message: 400, once it was all read.
            let answer = sent.await.unwrap().unwrap();
            assert_eq!(answer.status(), reqwest::StatusCode::BAD_REQUEST);
            assert_eq!(pulled.load(Ordering::SeqCst), SIZE);
        }
    });
}

/// A large request waits for its turn at most `body_timeout`, then gets 503
/// with `Retry-After` (two long large calls, or two clients slow to send
/// their bodies, must not make others wait without end).
#[test]
fn a_large_request_that_gets_no_turn_in_time_is_told_to_retry() {
    run(|| async {
        let (upstream, gateway, _client, held) =
            two_large_calls_held("[gateway]\nbody_timeout = \"1s\"\n").await;
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let refused = raw_post(&http, &gateway.url)
            .body(vec![b' '; mcp_supervisor::gateway::LARGE_BODY_BYTES])
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()["retry-after"], "1");
        upstream.control().release(2);
        for call in held {
            call.await.unwrap().unwrap();
        }
    });
}
