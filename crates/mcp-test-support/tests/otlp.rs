//! The OTLP receiver, fed real protobuf over both transports: OTLP/HTTP
//! with reqwest, OTLP/gRPC with the tonic clients of `opentelemetry-proto`,
//! and the `mcp-test-server --otlp` binary.

use std::{process::Stdio, time::Duration};

use mcp_test_support::{
    otlp::{AttrValue, OtlpReceiver, PointView, SpanKind, StatusCode},
    wait_until_async,
};
use opentelemetry_proto::tonic::{
    collector::{
        metrics::v1::{ExportMetricsServiceRequest, metrics_service_client::MetricsServiceClient},
        trace::v1::{
            ExportTraceServiceRequest, ExportTraceServiceResponse,
            trace_service_client::TraceServiceClient,
        },
    },
    common::v1::{AnyValue, KeyValue, any_value},
    metrics::v1::{Histogram, HistogramDataPoint, Metric, ResourceMetrics, ScopeMetrics, metric},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, Status, span, status},
};
use prost::Message as _;
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// Generous bound for any single step on a slow, busy machine.
const STEP: Duration = Duration::from_secs(15);

/// A value that must come back out of `raw_bytes()`.
const PLANTED: &str = "planted-secret-5e0c7a";

const TRACE_ID: [u8; 16] = [
    0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c,
];
const SPAN_ID: [u8; 8] = [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31];
const PARENT_ID: [u8; 8] = [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7];

fn pair(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

fn service(name: &str) -> Option<Resource> {
    Some(Resource {
        attributes: vec![pair(
            "service.name",
            any_value::Value::StringValue(name.to_owned()),
        )],
        ..Resource::default()
    })
}

/// One client span named `name`, child of [`PARENT_ID`], with the planted
/// value in an attribute.
fn one_span(name: &str) -> ExportTraceServiceRequest {
    let span = Span {
        trace_id: TRACE_ID.to_vec(),
        span_id: SPAN_ID.to_vec(),
        parent_span_id: PARENT_ID.to_vec(),
        name: name.to_owned(),
        kind: span::SpanKind::Client as i32,
        start_time_unix_nano: 1_000,
        end_time_unix_nano: 2_000,
        attributes: vec![
            pair("mcp.tool", any_value::Value::StringValue("echo".to_owned())),
            pair("attempt", any_value::Value::IntValue(2)),
            pair("note", any_value::Value::StringValue(PLANTED.to_owned())),
        ],
        events: vec![span::Event {
            name: "retry".to_owned(),
            ..span::Event::default()
        }],
        status: Some(Status {
            message: "upstream failed".to_owned(),
            code: status::StatusCode::Error as i32,
        }),
        ..Span::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: service("svc-under-test"),
            scope_spans: vec![ScopeSpans {
                spans: vec![span],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

fn one_histogram(name: &str) -> ExportMetricsServiceRequest {
    let point = HistogramDataPoint {
        attributes: vec![pair(
            "outcome",
            any_value::Value::StringValue("ok".to_owned()),
        )],
        count: 3,
        sum: Some(0.75),
        explicit_bounds: vec![0.1, 1.0],
        bucket_counts: vec![1, 2, 0],
        ..HistogramDataPoint::default()
    };
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: service("svc-under-test"),
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: name.to_owned(),
                    unit: "s".to_owned(),
                    data: Some(metric::Data::Histogram(Histogram {
                        data_points: vec![point],
                        aggregation_temporality: 2,
                    })),
                    ..Metric::default()
                }],
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}

/// POSTs `body` to `{base}{path}` with the given content type.
async fn post(base: &str, path: &str, content_type: &str, body: Vec<u8>) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", content_type)
        .header("x-test-key", "http-header-value")
        .body(body)
        .timeout(STEP)
        .send()
        .await
        .expect("POST failed")
}

async fn trace_client(receiver: &OtlpReceiver) -> TraceServiceClient<tonic::transport::Channel> {
    tokio::time::timeout(STEP, TraceServiceClient::connect(receiver.grpc_endpoint()))
        .await
        .expect("connecting timed out")
        .expect("connecting failed")
}

/// An export request with a piece of gRPC metadata.
fn with_metadata<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("x-grpc-key", "grpc-metadata-value".parse().unwrap());
    request
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test]
async fn a_span_over_http_is_decoded_and_kept_as_it_travelled() {
    let receiver = OtlpReceiver::start().await;
    let response = post(
        &receiver.http_endpoint(),
        "/v1/traces",
        "application/x-protobuf",
        one_span("tools/call echo").encode_to_vec(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-protobuf");
    let answer = response.bytes().await.unwrap();
    ExportTraceServiceResponse::decode(answer).expect("an encoded ExportTraceServiceResponse");

    let [span] = receiver.spans().try_into().unwrap();
    assert_eq!(span.trace_id, "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(span.span_id, "b7ad6b7169203331");
    assert_eq!(span.parent_span_id, "00f067aa0ba902b7");
    assert_eq!(span.name, "tools/call echo");
    assert_eq!(span.kind, SpanKind::Client);
    assert_eq!(span.str_attr("mcp.tool"), Some("echo"));
    assert_eq!(span.int_attr("attempt"), Some(2));
    assert_eq!(span.int_attr("mcp.tool"), None, "a string is not an int");
    assert!(span.has_event("retry") && !span.has_event("other"));
    assert_eq!(span.status, StatusCode::Error);
    assert_eq!(span.status_message, "upstream failed");
    assert_eq!(span.service_name, "svc-under-test");
    assert_eq!(
        span.resource.get("service.name"),
        Some(&AttrValue::Str("svc-under-test".to_owned()))
    );
    assert_eq!((span.start_unix_nanos, span.end_unix_nanos), (1_000, 2_000));

    assert_eq!(receiver.requests(), 1);
    assert!(contains(&receiver.raw_bytes(), PLANTED));
    assert!(contains(&receiver.raw_bytes(), "http-header-value"));
    assert!(
        receiver
            .headers()
            .contains(&("x-test-key".to_owned(), "http-header-value".to_owned())),
        "{:?}",
        receiver.headers()
    );
}

#[tokio::test]
async fn a_span_over_grpc_is_decoded_with_its_metadata() {
    let receiver = OtlpReceiver::start().await;
    let mut client = trace_client(&receiver).await;
    client
        .export(with_metadata(one_span("over grpc")))
        .await
        .expect("export failed");

    let spans = receiver
        .wait_for_spans(STEP, |spans| !spans.is_empty())
        .await;
    let [span] = spans.try_into().unwrap();
    assert_eq!(span.name, "over grpc");
    assert_eq!(span.trace_id, "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(span.kind, SpanKind::Client);
    assert_eq!(span.service_name, "svc-under-test");
    assert_eq!(receiver.requests(), 1);
    assert!(contains(&receiver.raw_bytes(), PLANTED));
    let headers = receiver.headers();
    assert!(
        headers.contains(&("x-grpc-key".to_owned(), "grpc-metadata-value".to_owned())),
        "{headers:?}"
    );
    assert!(
        headers.contains(&("content-type".to_owned(), "application/grpc".to_owned())),
        "{headers:?}"
    );
}

#[tokio::test]
async fn other_content_types_and_any_content_encoding_get_415() {
    let receiver = OtlpReceiver::start().await;
    let base = receiver.http_endpoint();
    let body = one_span("refused").encode_to_vec();
    let json = post(&base, "/v1/traces", "application/json", b"{}".to_vec()).await;
    assert_eq!(json.status(), 415);
    let gzip = reqwest::Client::new()
        .post(format!("{base}/v1/metrics"))
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "gzip")
        .body(body.clone())
        .timeout(STEP)
        .send()
        .await
        .unwrap();
    assert_eq!(gzip.status(), 415);
    let garbage = post(
        &base,
        "/v1/traces",
        "application/x-protobuf",
        b"\xff\xff\xff".to_vec(),
    )
    .await;
    assert_eq!(garbage.status(), 400);
    assert_eq!(
        post(&base, "/v1/logs", "application/x-protobuf", body)
            .await
            .status(),
        404
    );
    assert_eq!(receiver.requests(), 0);
    assert!(receiver.spans().is_empty());
    assert!(receiver.raw_bytes().is_empty());
}

#[tokio::test]
async fn a_failing_collector_refuses_both_transports_and_records_nothing() {
    let receiver = OtlpReceiver::start().await;
    receiver.set_failing(true);
    let http = post(
        &receiver.http_endpoint(),
        "/v1/traces",
        "application/x-protobuf",
        one_span("refused").encode_to_vec(),
    )
    .await;
    assert_eq!(http.status(), 503);
    let mut client = trace_client(&receiver).await;
    let status = client
        .export(with_metadata(one_span("refused")))
        .await
        .expect_err("a failing collector must refuse");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(receiver.requests(), 0);
    assert_eq!(receiver.refused(), 2);
    assert!(receiver.spans().is_empty());
    assert!(receiver.headers().is_empty());
    assert!(receiver.raw_bytes().is_empty());

    receiver.set_failing(false);
    client.export(one_span("accepted")).await.unwrap();
    assert_eq!(receiver.spans().len(), 1);
}

#[tokio::test]
async fn a_histogram_round_trips_over_both_transports() {
    let receiver = OtlpReceiver::start().await;
    let response = post(
        &receiver.http_endpoint(),
        "/v1/metrics",
        "application/x-protobuf",
        one_histogram("over.http").encode_to_vec(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let mut client = MetricsServiceClient::connect(receiver.grpc_endpoint())
        .await
        .unwrap();
    client
        .export(with_metadata(one_histogram("over.grpc")))
        .await
        .unwrap();

    for name in ["over.http", "over.grpc"] {
        let [point] = receiver
            .wait_for_metric(STEP, name)
            .await
            .try_into()
            .unwrap();
        assert_eq!(point.unit, "s");
        assert_eq!(
            point.attributes.get("outcome"),
            Some(&AttrValue::Str("ok".to_owned()))
        );
        assert_eq!(
            point.point,
            PointView::Histogram {
                count: 3,
                sum: Some(0.75),
                bounds: vec![0.1, 1.0],
                bucket_counts: vec![1, 2, 0],
            }
        );
    }
    assert_eq!(receiver.metrics().len(), 2);
    assert_eq!(receiver.requests(), 2);
    assert!(receiver.spans().is_empty());
}

#[tokio::test]
async fn a_slow_collector_answers_after_its_delay() {
    let receiver = OtlpReceiver::start().await;
    let delay = Duration::from_millis(300);
    receiver.set_delay(delay);
    let started = std::time::Instant::now();
    let mut client = trace_client(&receiver).await;
    client.export(one_span("slow")).await.unwrap();
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    assert_eq!(receiver.spans().len(), 1);
}

#[tokio::test]
async fn waiting_in_vain_panics_with_a_dump_of_what_arrived() {
    let receiver = OtlpReceiver::start().await;
    let mut client = trace_client(&receiver).await;
    client.export(one_span("the-only-span")).await.unwrap();
    let waited = tokio::spawn(async move {
        receiver
            .wait_for_spans(Duration::from_millis(100), |spans| spans.len() > 1)
            .await
    })
    .await;
    let panic = waited.expect_err("waiting must time out").into_panic();
    let message = panic
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(message.contains("1 spans received"), "{message}");
    assert!(
        message.contains("0af7651916cd43dd8448eb211c80319c b7ad6b7169203331 00f067aa0ba902b7 client \"the-only-span\""),
        "{message}"
    );
    assert!(message.contains("note=Str(\"planted"), "{message}");
}

#[tokio::test]
async fn dropping_the_receiver_closes_both_ports() {
    let receiver = OtlpReceiver::start().await;
    let addrs: Vec<String> = [receiver.http_endpoint(), receiver.grpc_endpoint()]
        .iter()
        .map(|endpoint| endpoint.trim_start_matches("http://").to_owned())
        .collect();
    for addr in &addrs {
        tokio::net::TcpStream::connect(addr)
            .await
            .expect("listening");
    }
    drop(receiver);
    for addr in addrs {
        let closed = wait_until_async(STEP, || async {
            tokio::net::TcpStream::connect(&addr).await.is_err()
        })
        .await;
        assert!(closed, "{addr} still accepts connections");
    }
}

#[tokio::test]
async fn the_binary_prints_its_endpoints_then_every_span() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-test-server"))
        .args(["--otlp", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut line = async || {
        tokio::time::timeout(STEP, lines.next_line())
            .await
            .expect("no line from the child")
            .unwrap()
            .expect("stdout closed")
    };
    let http = line().await;
    let grpc = line().await;
    let http = http.strip_prefix("otlp http on ").expect(&http).to_owned();
    let grpc = grpc.strip_prefix("otlp grpc on ").expect(&grpc).to_owned();

    let response = post(
        &http,
        "/v1/traces",
        "application/x-protobuf",
        one_span("from http").encode_to_vec(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        line().await,
        "0af7651916cd43dd8448eb211c80319c b7ad6b7169203331 00f067aa0ba902b7 client from http"
    );
    let mut client = TraceServiceClient::connect(grpc).await.unwrap();
    let mut root = one_span("root over grpc");
    root.resource_spans[0].scope_spans[0].spans[0].parent_span_id = Vec::new();
    client.export(root).await.unwrap();
    assert_eq!(
        line().await,
        "0af7651916cd43dd8448eb211c80319c b7ad6b7169203331 - client root over grpc"
    );
    child.kill().await.unwrap();
}

#[test]
fn dropping_a_receiver_outside_a_runtime_is_fine() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let receiver = runtime.block_on(OtlpReceiver::start());
    drop(runtime);
    drop(receiver);
}
