//! `[telemetry]`: off without its table, the SDK's defaults, the `OTEL_*`
//! variables filling what the table leaves out, and bad values refused.

use std::path::Path;
use std::time::Duration;

use super::*;

fn load_env(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Config::from_toml_str(text, Path::new("test.toml"), &move |name| {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
}

fn telemetry(text: &str, env: &[(&str, &str)]) -> TelemetrySettings {
    load_env(text, env).unwrap().telemetry.expect("[telemetry]")
}

fn telemetry_error(text: &str) -> String {
    load_env(text, &[("KEY", "k1")]).unwrap_err().to_string()
}

#[test]
fn telemetry_is_off_without_its_table_whatever_the_environment_says() {
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")];
    assert!(load_env("", &env).unwrap().telemetry.is_none());
    // And OTEL_SDK_DISABLED switches a present table off.
    let off = load_env("[telemetry]\n", &[("OTEL_SDK_DISABLED", "true")]).unwrap();
    assert!(off.telemetry.is_none());
}

#[test]
fn an_empty_telemetry_table_takes_the_sdks_defaults() {
    let t = telemetry("[telemetry]\n", &[]);
    assert_eq!(t.endpoint.as_str(), "http://localhost:4318/");
    assert_eq!(t.protocol, OtlpProtocol::HttpProtobuf);
    assert!(t.headers.is_empty());
    assert_eq!(t.service_name, "mcp-supervisor");
    assert_eq!(t.sample_ratio.get(), 1.0);
    assert_eq!(t.timeout, Duration::from_secs(10));
    assert_eq!(t.batch_delay, Duration::from_secs(5));
    assert_eq!(t.max_queue, 2048);
    assert_eq!(t.metrics_interval, Duration::from_secs(60));
    assert!(!t.capture_content);
    let grpc = telemetry("[telemetry]\nprotocol = \"grpc\"\n", &[]);
    assert_eq!(grpc.endpoint.as_str(), "http://localhost:4317/");
}

#[test]
fn the_otel_variables_fill_only_what_the_table_leaves_out() {
    let env = [
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://env-collector:4318/base/",
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_SERVICE_NAME", "from-env"),
        ("OTEL_BSP_SCHEDULE_DELAY", "250"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "64"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "10000"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-env=from%20env,x-both=env"),
        ("KEY", "file-value"),
    ];
    let t = telemetry(
        "[telemetry]\nprotocol = \"http/protobuf\"\nservice_name = \"from-file\"\n\
         headers = { \"X-Both\" = { env = \"KEY\" } }\n",
        &env,
    );
    assert_eq!(t.protocol, OtlpProtocol::HttpProtobuf, "the file's");
    assert_eq!(t.endpoint.as_str(), "http://env-collector:4318/base");
    assert_eq!(t.service_name, "from-file");
    assert_eq!(t.batch_delay, Duration::from_millis(250));
    assert_eq!(t.max_queue, 64);
    assert_eq!(t.timeout, Duration::from_millis(1500));
    assert_eq!(t.metrics_interval, Duration::from_secs(10));
    assert_eq!(t.sample_ratio.get(), 0.25);
    let headers: Vec<(&str, &str)> = t
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), secrecy::ExposeSecret::expose_secret(v)))
        .collect();
    assert_eq!(headers, [("x-both", "file-value"), ("x-env", "from env")]);
}

#[test]
fn bad_telemetry_values_are_refused_naming_the_key() {
    for (text, key, problem) in [
        (
            "protocol = \"http/json\"",
            "telemetry.protocol",
            "not supported",
        ),
        (
            "protocol = \"udp\"",
            "telemetry.protocol",
            "expected \"grpc\"",
        ),
        (
            "sample_ratio = 1.5",
            "telemetry.sample_ratio",
            "from 0 to 1",
        ),
        (
            "sample_ratio = -0.1",
            "telemetry.sample_ratio",
            "from 0 to 1",
        ),
        (
            "endpoint = \"http://c:4318/?key=s3cret\"",
            "telemetry.endpoint",
            "query",
        ),
        (
            "endpoint = \"http://u:pw@c:4318\"",
            "telemetry.endpoint",
            "credentials",
        ),
        ("endpoint = \"ftp://c\"", "telemetry.endpoint", "http://"),
        (
            "protocol = \"grpc\"\nendpoint = \"https://c:4317\"",
            "telemetry.endpoint",
            "http/protobuf",
        ),
        ("max_queue = 0", "telemetry.max_queue", "greater than zero"),
        (
            "batch_delay = \"0s\"",
            "telemetry.batch_delay",
            "greater than zero",
        ),
        (
            "headers = { \"content-type\" = { env = \"KEY\" } }",
            "telemetry.headers.content-type",
            "set by the exporter",
        ),
        (
            "headers = { \"x-k\" = { env = \"MISSING\" } }",
            "telemetry.headers.x-k.env",
            "MISSING",
        ),
        (
            "headers = { \"x-k\" = {} }",
            "telemetry.headers.x-k",
            "exactly one",
        ),
        ("unknown = 1", "telemetry", "unknown"),
    ] {
        let error = telemetry_error(&format!("[telemetry]\n{text}\n"));
        assert!(error.contains(key), "{text}: {error}");
        assert!(error.contains(problem), "{text}: {error}");
        assert!(
            !error.contains("s3cret") && !error.contains(":pw@"),
            "{error}"
        );
    }
    // A header's value is never written in the file.
    let literal = telemetry_error("[telemetry]\nheaders = { \"x-k\" = \"s3cret\" }\n");
    assert!(
        literal.contains("{ env = \\\"NAME\\\" }") || literal.contains("env = "),
        "{literal}"
    );
    assert!(!literal.contains("s3cret"), "{literal}");
}

#[test]
fn telemetry_settings_debug_and_summary_show_header_names_only() {
    let t = telemetry(
        "[telemetry]\nheaders = { \"x-api-key\" = { env = \"KEY\" } }\n",
        &[("KEY", "canary-otlp-key")],
    );
    let debug = format!("{t:?}");
    assert!(
        debug.contains("x-api-key") && !debug.contains("canary-otlp-key"),
        "{debug}"
    );
    let config = load_env(
        "[telemetry]\nheaders = { \"x-api-key\" = { env = \"KEY\" } }\n",
        &[("KEY", "canary-otlp-key")],
    )
    .unwrap();
    let text = summary(&config);
    assert!(
        text.contains("telemetry endpoint=http://localhost:4318"),
        "{text}"
    );
    assert!(text.contains("headers=x-api-key"), "{text}");
    assert!(!text.contains("canary-otlp-key"), "{text}");
}
