//! OpenTelemetry from the real `mcp-supervisor serve`: the spans of the last
//! calls are sent at SIGTERM within `shutdown_timeout` (and a collector that
//! never answers does not hold the exit up), and the Python SDK 2.x's own
//! spans and ours are one trace.

use std::time::{Duration, Instant};

use e2e::{HttpUpstream, SdkClient, Served, gateway_call_text, run_bounded, toml_string};
use mcp_test_support::otlp::{OtlpReceiver, SpanKind, SpanView};
use serde_json::{Value, json};

const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);
/// Slack for a slow 2-core machine; the assertion is "bounded", not "fast".
const MARGIN: Duration = Duration::from_secs(5);

/// A runtime for the receiver, alive for the whole test.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// `serve` with one HTTP connection `up` and `[telemetry]` to `endpoint`;
/// nothing is sent before shutdown unless `batch_delay` says so.
fn served(upstream: &HttpUpstream, endpoint: &str, batch_delay: &str) -> Served {
    Served::start(&format!(
        "[supervisor]\nshutdown_timeout = \"{}s\"\n\
         [connections.up]\ntransport = \"http\"\nurl = {}\n\
         [telemetry]\nendpoint = {}\nbatch_delay = \"{batch_delay}\"\nmetrics_interval = \"60s\"\n",
        SHUTDOWN_TIMEOUT.as_secs(),
        toml_string(&upstream.url),
        toml_string(endpoint),
    ))
}

fn kinds<'a>(spans: &'a [SpanView], kind: SpanKind, name: &str) -> Vec<&'a SpanView> {
    spans
        .iter()
        .filter(|s| s.kind == kind && s.name == name)
        .collect()
}

#[test]
fn sigterm_sends_the_last_spans_and_metrics_within_shutdown_timeout() {
    let runtime = runtime();
    let receiver = runtime.block_on(OtlpReceiver::start());
    let upstream = HttpUpstream::start();
    let mut served = served(&upstream, &receiver.http_endpoint(), "60s");

    let text = gateway_call_text(&served.gateway_url, "up__echo", json!({"text": "hi"}));
    assert_eq!(text, "hi");
    assert!(
        receiver.spans().is_empty(),
        "nothing is sent before the batch delay"
    );
    let signalled = Instant::now();
    let code = served.terminate(SHUTDOWN_TIMEOUT + MARGIN);
    assert_eq!(code, Some(0), "{}", served.stderr());
    let took = signalled.elapsed();

    let spans = receiver.spans();
    assert_eq!(
        kinds(&spans, SpanKind::Server, "tools/call up__echo").len(),
        1,
        "{spans:#?}"
    );
    assert_eq!(
        kinds(&spans, SpanKind::Client, "tools/call echo").len(),
        1,
        "{spans:#?}"
    );
    let names: Vec<_> = receiver.metrics().into_iter().map(|m| m.name).collect();
    assert!(
        names.iter().any(|n| n == "mcp.client.operation.duration"),
        "the last collection of the metrics went out: {names:?}"
    );
    assert!(took < SHUTDOWN_TIMEOUT + MARGIN, "{took:?}");
    let log = served.stderr();
    assert!(
        log.contains("telemetry: exporting spans and metrics over OTLP"),
        "{log}"
    );
}

#[test]
fn a_collector_that_never_answers_does_not_hold_the_exit_up() {
    let runtime = runtime();
    let receiver = runtime.block_on(OtlpReceiver::start());
    receiver.set_delay(Duration::from_secs(120));
    let upstream = HttpUpstream::start();
    let mut served = served(&upstream, &receiver.http_endpoint(), "10ms");

    // Calls go on while every export hangs.
    for n in 0..5 {
        let text = gateway_call_text(
            &served.gateway_url,
            "up__echo",
            json!({"text": n.to_string()}),
        );
        assert_eq!(text, n.to_string());
    }
    let signalled = Instant::now();
    let code = served.terminate(SHUTDOWN_TIMEOUT + MARGIN);
    assert_eq!(code, Some(0), "{}", served.stderr());
    assert!(
        signalled.elapsed() < SHUTDOWN_TIMEOUT + MARGIN,
        "{:?}",
        signalled.elapsed()
    );
}

/// The Python SDK 2.x records its own CLIENT span per request and writes its
/// context into `_meta` (SEP-414): our SERVER span is its child, in its trace.
fn the_python_sdks_trace_is_ours(sdk: SdkClient) {
    let runtime = runtime();
    let receiver = runtime.block_on(OtlpReceiver::start());
    let upstream = HttpUpstream::start();
    let served = served(&upstream, &receiver.http_endpoint(), "50ms");

    let mut command = sdk.command(
        &served.gateway_url,
        &["--otel", "--no-list"],
        &[("up__echo", json!({"text": "traced"}))],
    );
    let run = run_bounded(&mut command, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{run:?}\n{}", served.stderr());
    let output: Value = serde_json::from_str(&run.stdout).unwrap();
    let python_spans = output["otel_spans"].as_array().unwrap();
    let python_call = python_spans
        .iter()
        .find(|s| s["kind"] == "CLIENT" && s["name"].as_str().unwrap().contains("tools/call"))
        .unwrap_or_else(|| panic!("the SDK recorded its call: {python_spans:#?}"));
    let agent = python_spans.iter().find(|s| s["name"] == "agent").unwrap();
    let trace = python_call["trace_id"].as_str().unwrap().to_owned();
    assert_eq!(agent["trace_id"], trace.as_str());

    let spans = runtime.block_on(receiver.wait_for_spans(Duration::from_secs(15), |spans| {
        spans
            .iter()
            .any(|s| s.kind == SpanKind::Server && s.name == "tools/call up__echo")
    }));
    let ours = kinds(&spans, SpanKind::Server, "tools/call up__echo")[0];
    assert_eq!(ours.trace_id, trace, "one trace: {spans:#?}");
    assert_eq!(
        ours.parent_span_id,
        python_call["span_id"].as_str().unwrap(),
        "our SERVER span is the child of the SDK's CLIENT span"
    );
    let client = spans
        .iter()
        .find(|s| s.kind == SpanKind::Client && s.parent_span_id == ours.span_id)
        .unwrap_or_else(|| panic!("our CLIENT span: {spans:#?}"));
    assert_eq!(client.trace_id, trace);
}

#[test]
fn the_python_sdk_2_traces_join_ours() {
    the_python_sdks_trace_is_ours(SdkClient::V2Auto);
}

#[test]
fn the_python_sdk_2_legacy_traces_join_ours() {
    the_python_sdks_trace_is_ours(SdkClient::V2Legacy);
}
