//! A canary secret planted everywhere a secret can be (an upstream's bearer
//! token and header, its URL's query, a tool argument, the collector's own
//! key) appears in no byte the OTLP receiver gets: spans and metrics, both
//! protocols, flushed at shutdown. With `capture_content = true` the
//! argument does appear: the scan would catch it.

mod support;

use std::time::Duration;

use mcp_supervisor::telemetry;
use mcp_test_support::{TestServer, TestServerOptions, in_own_process, otlp::OtlpReceiver};
use rmcp::model::{CallToolRequestParams, RequestParamsMeta as _};
use serde_json::json;
use support::{ServedGateway, run, toml_string};

const CANARY: &str = "canary-7f3e9a1c-secret";

fn planted(protocol: &'static str, capture: bool) -> Vec<u8> {
    let received = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let into = received.clone();
    run(move || async move {
        let receiver = OtlpReceiver::start().await;
        let upstream = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let endpoint = match protocol {
            "grpc" => receiver.grpc_endpoint(),
            _ => receiver.http_endpoint(),
        };
        let url = format!("{}?api_key={CANARY}", upstream.url());
        let text = format!(
            "[connections.a]\ntransport = \"http\"\nurl = {}\n\
             auth = {{ kind = \"bearer\", token = \"{CANARY}\" }}\n\
             headers = {{ \"x-api-key\" = \"{CANARY}\" }}\n\
             [telemetry]\nendpoint = \"{endpoint}\"\nprotocol = \"{protocol}\"\n\
             headers = {{ \"x-collector-key\" = {{ env = \"COLLECTOR_KEY\" }} }}\n\
             capture_content = {capture}\n",
            toml_string(&url)
        );
        // The collector's key comes from the environment, as it must.
        let config = mcp_supervisor::config::Config::from_toml_str(
            &text,
            std::path::Path::new("test.toml"),
            &|name| (name == "COLLECTOR_KEY").then(|| "collector-key-value".to_owned()),
        )
        .unwrap();
        let installed = telemetry::install(config.telemetry.as_ref().unwrap()).unwrap();
        let gateway = ServedGateway::start(config).await;
        let client = gateway.connect(()).await;
        for tool in ["a__echo", "a__fail"] {
            let key = if tool == "a__echo" { "text" } else { "message" };
            let mut params = CallToolRequestParams::new(tool)
                .with_arguments(json!({ key: CANARY }).as_object().cloned().unwrap());
            params.set_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
            client.call_tool(params).await.unwrap();
        }
        client.cancel().await.unwrap();
        assert!(
            upstream
                .seen_traces()
                .iter()
                .all(|seen| seen.header.is_some()),
            "the calls went upstream traced"
        );
        installed.shutdown(Duration::from_secs(5)).await;
        assert!(
            receiver.spans().len() >= 4,
            "two SERVER and two CLIENT spans were exported"
        );
        assert!(!receiver.metrics().is_empty(), "the metrics were exported");
        assert!(
            receiver
                .headers()
                .iter()
                .any(|(name, value)| name == "x-collector-key" && value == "collector-key-value"),
            "the collector's key went to the collector: {:?}",
            receiver.headers()
        );
        *into.borrow_mut() = receiver.raw_bytes();
    });
    received.take()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[test]
fn no_secret_is_exported_over_http_protobuf() {
    in_own_process("no_secret_is_exported_over_http_protobuf", || {
        let received = planted("http/protobuf", false);
        assert!(!contains(&received, CANARY));
        assert!(!contains(&received, "api_key"));
    });
}

#[test]
fn no_secret_is_exported_over_grpc() {
    in_own_process("no_secret_is_exported_over_grpc", || {
        let received = planted("grpc", false);
        assert!(!contains(&received, CANARY));
        assert!(!contains(&received, "api_key"));
    });
}

#[test]
fn captured_content_is_exported_so_the_scan_would_see_a_leak() {
    in_own_process(
        "captured_content_is_exported_so_the_scan_would_see_a_leak",
        || {
            let received = planted("http/protobuf", true);
            assert!(
                contains(&received, CANARY),
                "capture_content sends the argument"
            );
            assert!(!contains(&received, "api_key"), "but never the URL's query");
        },
    );
}
