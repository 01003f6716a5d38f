//! OpenTelemetry end to end, in process: a real MCP client calls through the
//! gateway to a real upstream, and a real OTLP receiver
//! (`mcp_test_support::otlp`, which decodes the protobuf the exporter sends)
//! gets the spans. Telemetry is installed once per process, so each test
//! runs in a process of its own (`in_own_process`), under `cargo test` as
//! under nextest.

mod support;

use std::time::Duration;

use mcp_supervisor::{
    config::Config,
    registry::{CallTool, Registry},
    telemetry::{self, TraceParent},
};
use mcp_test_support::{
    Fault, FaultRule, Match, TestServer, TestServerOptions, in_own_process,
    otlp::{OtlpReceiver, SpanKind, SpanView, StatusCode},
};
use rmcp::model::{CallToolRequestParams, RequestParamsMeta as _};
use serde_json::json;
use support::{ServedGateway, config, http_connection, run};

const WAIT: Duration = Duration::from_secs(15);

/// The client's own span: its trace and span ids.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// A config with one HTTP connection `a` to `upstream` and `[telemetry]`
/// sending to `receiver` over `protocol`, quickly.
fn traced(upstream: &TestServer, receiver: &OtlpReceiver, protocol: &str, extra: &str) -> Config {
    let endpoint = match protocol {
        "grpc" => receiver.grpc_endpoint(),
        _ => receiver.http_endpoint(),
    };
    config(&format!(
        "{}\n[telemetry]\nendpoint = \"{endpoint}\"\nprotocol = \"{protocol}\"\n\
         batch_delay = \"50ms\"\nmetrics_interval = \"200ms\"\n{extra}",
        http_connection("a", &upstream.url(), "max_attempts = 3"),
    ))
}

fn install(config: &Config) {
    telemetry::install(config.telemetry.as_ref().expect("[telemetry]")).unwrap();
}

/// A receiver, an upstream, and telemetry installed to send to the one
/// about calls to the other.
async fn traced_setup(protocol: &str, extra: &str) -> (OtlpReceiver, TestServer, Config) {
    let receiver = OtlpReceiver::start().await;
    let upstream = upstream().await;
    let config = traced(&upstream, &receiver, protocol, extra);
    install(&config);
    (receiver, upstream, config)
}

async fn upstream() -> TestServer {
    TestServer::start(TestServerOptions::default())
        .await
        .unwrap()
}

/// Calls `tool` through the gateway with `traceparent` in `_meta`.
async fn call_traced(
    gateway: &ServedGateway,
    tool: &str,
    arguments: serde_json::Value,
    trace: &str,
) -> rmcp::model::CallToolResult {
    let client = gateway.connect(()).await;
    let mut params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap());
    params.set_traceparent(&traceparent(trace, CLIENT_SPAN));
    let result = client.call_tool(params).await.unwrap();
    client.cancel().await.unwrap();
    result
}

/// The attribute names semantic-conventions-genai v0.1.0 `docs/gen-ai/mcp.md`
/// gives MCP spans (docs/DECISIONS.md #98), with the general ones it links.
const CONVENTION: [&str; 20] = [
    "mcp.method.name",
    "mcp.session.id",
    "mcp.protocol.version",
    "mcp.resource.uri",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "gen_ai.operation.name",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "jsonrpc.request.id",
    "rpc.response.status_code",
    "error.type",
    "network.transport",
    "network.protocol.name",
    "network.protocol.version",
    "server.address",
    "server.port",
    "client.address",
    "user.id",
    "user.roles",
];

/// Every attribute is the convention's or under our own prefix: nothing
/// invented under `mcp.`.
fn assert_named_by_the_convention(spans: &[&SpanView]) {
    for span in spans {
        for key in span.attributes.keys() {
            assert!(
                CONVENTION.contains(&key.as_str()) || key.starts_with("mcp_supervisor."),
                "{key} on {}",
                span.name
            );
        }
    }
}

fn of_kind<'a>(spans: &[&'a SpanView], kind: SpanKind) -> Vec<&'a SpanView> {
    spans.iter().copied().filter(|s| s.kind == kind).collect()
}

/// Waits until the trace has its SERVER span and `clients` CLIENT spans.
async fn trace_of(receiver: &OtlpReceiver, trace: &str, clients: usize) -> Vec<SpanView> {
    let spans = receiver
        .wait_for_spans(WAIT, |spans| {
            let spans: Vec<_> = spans.iter().filter(|s| s.trace_id == trace).collect();
            of_kind(&spans, SpanKind::Server).len() == 1
                && of_kind(&spans, SpanKind::Client).len() >= clients
        })
        .await;
    spans.into_iter().filter(|s| s.trace_id == trace).collect()
}

fn one_trace_down_to_the_upstream(protocol: &'static str) {
    run(|| async move {
        let (receiver, upstream, config) = traced_setup(protocol, "").await;
        let gateway = ServedGateway::start(config).await;

        let result = call_traced(&gateway, "a__lookup", json!({"key": "k"}), CLIENT_TRACE).await;
        assert_ne!(result.is_error, Some(true), "{result:?}");

        let spans = trace_of(&receiver, CLIENT_TRACE, 1).await;
        let spans: Vec<_> = spans.iter().collect();
        let server = of_kind(&spans, SpanKind::Server)[0];
        let clients = of_kind(&spans, SpanKind::Client);
        assert_eq!(clients.len(), 1, "{spans:#?}");
        let client = clients[0];

        assert_named_by_the_convention(&spans);
        assert_eq!(server.name, "tools/call a__lookup");
        assert_eq!(
            server.parent_span_id, CLIENT_SPAN,
            "the client's span is the parent"
        );
        assert_eq!(server.str_attr("mcp.method.name"), Some("tools/call"));
        assert_eq!(server.str_attr("gen_ai.tool.name"), Some("a__lookup"));
        let contract = server
            .str_attr("mcp_supervisor.tool.contract_sha256")
            .expect("the called tool's contract hash");
        assert_eq!(contract.len(), 64, "{server:#?}");
        assert_eq!(
            server.str_attr("gen_ai.operation.name"),
            Some("execute_tool")
        );
        assert_eq!(server.str_attr("network.transport"), Some("tcp"));
        assert!(server.str_attr("mcp.session.id").is_some(), "{server:#?}");
        assert!(
            server.str_attr("mcp.protocol.version").is_some(),
            "{server:#?}"
        );
        assert_eq!(server.str_attr("error.type"), None);
        assert_eq!(server.status, StatusCode::Unset);
        assert_eq!(server.service_name, "mcp-supervisor");

        assert_eq!(client.name, "tools/call lookup", "the upstream's own name");
        assert_eq!(client.parent_span_id, server.span_id);
        assert_eq!(client.str_attr("mcp_supervisor.connection"), Some("a"));
        assert_eq!(client.int_attr("mcp_supervisor.attempt"), Some(1));
        assert_eq!(client.str_attr("server.address"), Some("127.0.0.1"));
        assert!(client.int_attr("server.port").is_some());
        assert_eq!(client.str_attr("network.transport"), Some("tcp"));

        // The upstream saw this trace, with our CLIENT span as the parent,
        // in `_meta` and in the header.
        let seen = upstream.seen_traces();
        assert_eq!(seen.len(), 1, "{seen:?}");
        let expected = traceparent(CLIENT_TRACE, &client.span_id);
        assert_eq!(seen[0].meta.as_deref(), Some(expected.as_str()));
        assert_eq!(seen[0].header.as_deref(), Some(expected.as_str()));
    });
}

#[test]
fn a_call_is_one_trace_from_the_client_to_the_upstream_over_http_protobuf() {
    in_own_process(
        "a_call_is_one_trace_from_the_client_to_the_upstream_over_http_protobuf",
        || {
            one_trace_down_to_the_upstream("http/protobuf");
        },
    );
}

#[test]
fn a_call_is_one_trace_from_the_client_to_the_upstream_over_grpc() {
    in_own_process(
        "a_call_is_one_trace_from_the_client_to_the_upstream_over_grpc",
        || {
            one_trace_down_to_the_upstream("grpc");
        },
    );
}

#[test]
fn a_call_retried_after_a_503_is_two_client_spans_the_first_with_its_failure() {
    in_own_process(
        "a_call_retried_after_a_503_is_two_client_spans_the_first_with_its_failure",
        || {
            run(|| async {
                let (receiver, upstream, config) = traced_setup("http/protobuf", "").await;
                let gateway = ServedGateway::start(config).await;
                upstream
                    .faults()
                    .push(FaultRule::once(Match::tool("lookup"), Fault::status(503)));

                let result =
                    call_traced(&gateway, "a__lookup", json!({"key": "k"}), CLIENT_TRACE).await;
                assert_ne!(
                    result.is_error,
                    Some(true),
                    "retried and answered: {result:?}"
                );

                let spans = trace_of(&receiver, CLIENT_TRACE, 2).await;
                let spans: Vec<_> = spans.iter().collect();
                let server = of_kind(&spans, SpanKind::Server)[0];
                let mut clients = of_kind(&spans, SpanKind::Client);
                clients.sort_by_key(|s| s.int_attr("mcp_supervisor.attempt"));
                assert_eq!(clients.len(), 2, "{spans:#?}");
                assert_named_by_the_convention(&spans);
                let (first, second) = (clients[0], clients[1]);
                for span in [first, second] {
                    assert_eq!(span.parent_span_id, server.span_id);
                }
                assert_eq!(first.int_attr("mcp_supervisor.attempt"), Some(1));
                assert_eq!(first.str_attr("error.type"), Some("server"));
                assert_eq!(
                    first.str_attr("mcp_supervisor.failure.kind"),
                    Some("server")
                );
                assert_eq!(
                    first.str_attr("mcp_supervisor.policy.decision"),
                    Some("retry")
                );
                assert_eq!(
                    first.int_attr("mcp_supervisor.upstream.http_status"),
                    Some(503)
                );
                assert_eq!(first.status, StatusCode::Error);
                assert_eq!(second.int_attr("mcp_supervisor.attempt"), Some(2));
                assert_eq!(second.str_attr("error.type"), None);
                assert_eq!(server.str_attr("error.type"), None, "the call succeeded");

                // The attempt that reached the tool carried the second span's id.
                let seen = upstream.seen_traces();
                assert_eq!(seen.len(), 1, "{seen:?}");
                assert_eq!(
                    seen[0].meta.as_deref(),
                    Some(traceparent(CLIENT_TRACE, &second.span_id).as_str())
                );
            });
        },
    );
}

#[test]
fn a_parked_connections_answer_is_a_span_with_the_park_decision_and_no_client_span() {
    in_own_process(
        "a_parked_connections_answer_is_a_span_with_the_park_decision_and_no_client_span",
        || {
            run(|| async {
                let receiver = OtlpReceiver::start().await;
                let upstream = upstream().await;
                let config = traced(
                    &upstream,
                    &receiver,
                    "http/protobuf",
                    "[supervisor.quarantine]\nbase_cooldown = \"60s\"\n",
                );
                install(&config);
                let gateway = ServedGateway::start(config).await;
                let lifecycle = actix::Actor::start(telemetry::LifecycleSpans);
                gateway
                    .registry
                    .send(mcp_supervisor::registry::Subscribe(lifecycle.recipient()))
                    .await
                    .unwrap();
                upstream
                    .faults()
                    .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));

                // Three attempts fail: parked.
                let first =
                    call_traced(&gateway, "a__lookup", json!({"key": "k"}), CLIENT_TRACE).await;
                assert_eq!(first.is_error, Some(true), "{first:?}");
                let spans = trace_of(&receiver, CLIENT_TRACE, 3).await;
                let spans: Vec<_> = spans.iter().collect();
                let last = of_kind(&spans, SpanKind::Client)
                    .into_iter()
                    .max_by_key(|s| s.int_attr("mcp_supervisor.attempt"))
                    .unwrap();
                assert_eq!(
                    last.str_attr("mcp_supervisor.policy.decision"),
                    Some("park")
                );
                assert!(last.has_event("mcp_supervisor.park"), "{last:#?}");

                // Parked: answered without sending anything.
                const PARKED_TRACE: &str = "5bf92f3577b34da6a3ce929d0e0e4737";
                let calls_before = upstream.tool_calls("lookup");
                let second =
                    call_traced(&gateway, "a__lookup", json!({"key": "k"}), PARKED_TRACE).await;
                assert_eq!(second.is_error, Some(true), "{second:?}");
                assert_eq!(
                    upstream.tool_calls("lookup"),
                    calls_before,
                    "nothing was sent"
                );
                let spans = trace_of(&receiver, PARKED_TRACE, 0).await;
                let spans: Vec<_> = spans.iter().collect();
                assert!(of_kind(&spans, SpanKind::Client).is_empty(), "{spans:#?}");
                let server = of_kind(&spans, SpanKind::Server)[0];
                assert_eq!(
                    server.str_attr("mcp_supervisor.policy.decision"),
                    Some("park")
                );
                assert_eq!(
                    server.str_attr("mcp_supervisor.connection.state"),
                    Some("parked")
                );
                assert_eq!(
                    server.str_attr("error.type"),
                    Some("server"),
                    "the park's failure kind"
                );
                assert!(server.has_event("mcp_supervisor.refused"), "{server:#?}");
                assert_eq!(server.status, StatusCode::Error);

                // The park itself is a span of its own (no request to hang it on).
                let spans = receiver
                    .wait_for_spans(WAIT, |spans| {
                        spans.iter().any(|s| s.name == "mcp_supervisor.park a")
                    })
                    .await;
                let park = spans
                    .iter()
                    .find(|s| s.name == "mcp_supervisor.park a")
                    .unwrap();
                assert_eq!(park.kind, SpanKind::Internal);
                assert_eq!(park.str_attr("mcp_supervisor.failure.kind"), Some("server"));
                assert_eq!(park.int_attr("mcp_supervisor.strikes"), Some(1));
            });
        },
    );
}

#[test]
fn a_tools_own_error_is_tool_error_and_not_retried() {
    in_own_process("a_tools_own_error_is_tool_error_and_not_retried", || {
        run(|| async {
            let (receiver, _upstream, config) = traced_setup("http/protobuf", "").await;
            let gateway = ServedGateway::start(config).await;

            let result =
                call_traced(&gateway, "a__fail", json!({"message": "no"}), CLIENT_TRACE).await;
            assert_eq!(result.is_error, Some(true));
            let spans = trace_of(&receiver, CLIENT_TRACE, 1).await;
            let spans: Vec<_> = spans.iter().collect();
            let clients = of_kind(&spans, SpanKind::Client);
            assert_eq!(clients.len(), 1, "not retried: {spans:#?}");
            assert_eq!(clients[0].str_attr("error.type"), Some("tool_error"));
            let server = of_kind(&spans, SpanKind::Server)[0];
            assert_eq!(server.str_attr("error.type"), Some("tool_error"));
            assert_eq!(server.status, StatusCode::Error);
        });
    });
}

#[test]
fn a_library_callers_tracing_span_is_the_parent_of_its_calls_spans() {
    in_own_process(
        "a_library_callers_tracing_span_is_the_parent_of_its_calls_spans",
        || {
            use tracing_subscriber::layer::SubscriberExt as _;

            run(|| async {
                let (receiver, upstream, config) = traced_setup("http/protobuf", "").await;
                let tracer = telemetry::installed().unwrap().tracer();
                let subscriber = tracing_subscriber::registry()
                    .with(tracing_opentelemetry::layer().with_tracer(tracer));
                let _default = tracing::subscriber::set_default(subscriber);
                let registry = actix::Actor::start(Registry::new(config));

                let agent = tracing::info_span!("agent");
                let call = {
                    let _entered = agent.enter();
                    CallTool {
                        connection: "a".into(),
                        tool: "lookup".into(),
                        arguments: json!({"key": "k"}).as_object().cloned(),
                        timeout: None,
                        trace: TraceParent::current(),
                    }
                };
                let outcome = registry.send(call).await.unwrap();
                assert!(
                    matches!(outcome, mcp_supervisor::CallOutcome::Success(_)),
                    "{outcome:?}"
                );
                drop(agent);

                let spans = receiver
                    .wait_for_spans(WAIT, |spans| {
                        spans.iter().any(|s| s.name == "agent")
                            && spans.iter().any(|s| s.kind == SpanKind::Client)
                    })
                    .await;
                let agent = spans.iter().find(|s| s.name == "agent").unwrap();
                let client = spans.iter().find(|s| s.kind == SpanKind::Client).unwrap();
                assert_eq!(client.trace_id, agent.trace_id);
                assert_eq!(client.parent_span_id, agent.span_id, "{spans:#?}");
                let seen = upstream.seen_traces();
                assert_eq!(
                    seen[0].meta.as_deref(),
                    Some(traceparent(&agent.trace_id, &client.span_id).as_str())
                );
            });
        },
    );
}

#[test]
fn a_collector_that_never_answers_costs_calls_nothing_and_dropped_spans_are_counted() {
    in_own_process(
        "a_collector_that_never_answers_costs_calls_nothing_and_dropped_spans_are_counted",
        || {
            run(|| async {
                let receiver = OtlpReceiver::start().await;
                receiver.set_delay(Duration::from_secs(60));
                let upstream = upstream().await;
                let config = traced(
                    &upstream,
                    &receiver,
                    "http/protobuf",
                    "max_queue = 4\ntimeout = \"30s\"\n",
                );
                install(&config);
                let registry = actix::Actor::start(Registry::new(config));
                let started = std::time::Instant::now();
                for _ in 0..100 {
                    let outcome = support::call(&registry, "a", "echo", support::echo_args()).await;
                    assert!(
                        matches!(outcome, mcp_supervisor::CallOutcome::Success(_)),
                        "{outcome:?}"
                    );
                }
                // A hundred local calls take well under a second; an export in the
                // call path would take 60 s for the first.
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{:?}",
                    started.elapsed()
                );
                assert!(telemetry::spans_dropped() > 0, "the queue of 4 overflowed");
                let metrics = mcp_supervisor::admin::metrics_text(&[], None, None);
                assert!(
                    metrics.contains("mcp_supervisor_telemetry_spans_dropped_total"),
                    "{metrics}"
                );
                // The /metrics copy of the client duration counts every call.
                assert!(
            metrics.contains(
                "mcp_client_operation_duration_seconds_count{connection=\"a\",mcp_method_name=\"tools/call\",error_type=\"\"} 100"
            ),
            "{metrics}"
        );
            });
        },
    );
}

#[test]
fn a_collector_that_is_not_there_costs_calls_nothing_and_failed_exports_are_counted() {
    in_own_process(
        "a_collector_that_is_not_there_costs_calls_nothing_and_failed_exports_are_counted",
        || {
            run(|| async {
                let upstream = upstream().await;
                // Nothing listens on port 1.
                let config = config(&format!(
                    "{}\n[telemetry]\nendpoint = \"http://127.0.0.1:1\"\nbatch_delay = \"10ms\"\n",
                    http_connection("a", &upstream.url(), "")
                ));
                install(&config);
                let registry = actix::Actor::start(Registry::new(config));
                for _ in 0..20 {
                    let outcome = support::call(&registry, "a", "echo", support::echo_args()).await;
                    assert!(
                        matches!(outcome, mcp_supervisor::CallOutcome::Success(_)),
                        "{outcome:?}"
                    );
                }
                telemetry::installed()
                    .unwrap()
                    .shutdown(Duration::from_secs(5))
                    .await;
                assert!(
                    telemetry::export_failures() > 0,
                    "the exports failed, counted"
                );
            });
        },
    );
}

#[test]
fn a_stdio_upstream_gets_the_context_in_meta_and_its_span_says_pipe() {
    in_own_process(
        "a_stdio_upstream_gets_the_context_in_meta_and_its_span_says_pipe",
        || {
            run(|| async {
                let receiver = OtlpReceiver::start().await;
                let dir = tempfile::tempdir().unwrap();
                let requests = dir.path().join("requests");
                let binary = mcp_test_support::test_server_binary();
                let config = config(&format!(
                    "{}\n[telemetry]\nendpoint = \"{}\"\nbatch_delay = \"50ms\"\n",
                    support::stdio_connection(
                        "s",
                        binary.to_str().unwrap(),
                        &["--count-file", requests.to_str().unwrap()],
                        ""
                    ),
                    receiver.http_endpoint()
                ));
                install(&config);
                let gateway = ServedGateway::start(config).await;
                call_traced(&gateway, "s__echo", json!({"text": "x"}), CLIENT_TRACE).await;

                let spans = trace_of(&receiver, CLIENT_TRACE, 1).await;
                let spans: Vec<_> = spans.iter().collect();
                let client = of_kind(&spans, SpanKind::Client)[0];
                assert_eq!(client.str_attr("network.transport"), Some("pipe"));
                assert_eq!(client.str_attr("server.address"), None);
                let log = std::fs::read_to_string(&requests).unwrap();
                let expected = format!(
                    "tools/call:echo traceparent={}",
                    traceparent(CLIENT_TRACE, &client.span_id)
                );
                assert!(log.lines().any(|line| line == expected), "{log}");
            });
        },
    );
}

#[test]
fn the_durations_go_out_as_the_conventions_histograms() {
    in_own_process("the_durations_go_out_as_the_conventions_histograms", || {
        run(|| async {
            let (receiver, _upstream, config) = traced_setup("http/protobuf", "").await;
            let gateway = ServedGateway::start(config).await;
            call_traced(&gateway, "a__lookup", json!({"key": "k"}), CLIENT_TRACE).await;

            for name in [
                "mcp.server.operation.duration",
                "mcp.client.operation.duration",
            ] {
                let points = receiver.wait_for_metric(WAIT, name).await;
                let point = &points[0];
                assert_eq!(point.unit, "s");
                let mcp_test_support::otlp::PointView::Histogram { count, bounds, .. } =
                    &point.point
                else {
                    panic!("{name} is a histogram: {point:?}");
                };
                assert!(*count >= 1);
                assert_eq!(
                    point
                        .attributes
                        .get("mcp.method.name")
                        .map(ToString::to_string)
                        .as_deref(),
                    Some("tools/call"),
                    "{point:?}"
                );
                assert!(
                    point.attributes.contains_key("gen_ai.tool.name"),
                    "{point:?}"
                );
                assert_eq!(
                    bounds,
                    &[
                        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0,
                        300.0
                    ]
                );
            }
        });
    });
}

/// A caller's identity is on its SERVER span: the client its key names,
/// and its groups (never the key).
#[test]
fn a_callers_identity_is_on_its_server_span() {
    in_own_process("a_callers_identity_is_on_its_server_span", || {
        run(|| async {
            const KEY: &str = "ops-key-CANARY-0c4d";
            let hash = support::key_digest(KEY);
            let keys = format!(
                "\n[gateway.keys.ops-bot]\nsha256 = \"{hash}\"\ngroups = [\"ops\", \"ci\"]\n"
            );
            let (receiver, _upstream, config) = traced_setup("http/protobuf", &keys).await;
            let gateway = ServedGateway::start(config).await;
            let client = gateway
                .connect_as(
                    (),
                    rmcp::service::ClientLifecycleMode::Initialize,
                    Some(KEY),
                )
                .await;
            let mut params = CallToolRequestParams::new("a__lookup")
                .with_arguments(json!({"key": "k"}).as_object().cloned().unwrap());
            params.set_traceparent(&traceparent(CLIENT_TRACE, CLIENT_SPAN));
            client.call_tool(params).await.unwrap();
            let spans = trace_of(&receiver, CLIENT_TRACE, 1).await;
            let spans: Vec<_> = spans.iter().collect();
            assert_named_by_the_convention(&spans);
            let server = of_kind(&spans, SpanKind::Server)[0];
            assert_eq!(server.str_attr("mcp_supervisor.client.id"), Some("ops-bot"));
            assert_eq!(
                server.str_attr("user.id"),
                None,
                "a key names a client, not a user"
            );
            let roles = format!("{:?}", server.attributes.get("user.roles"));
            assert!(roles.contains("ops") && roles.contains("ci"), "{roles}");
            assert!(!format!("{spans:?}").contains("CANARY"));
        });
    });
}
