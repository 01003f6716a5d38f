//! The `/metrics` copies of the convention's duration histograms, kept
//! whether or not OTLP export is on, with the same buckets.
//!
//! Labels come from fixed vocabularies and the connection's name only: the
//! method, `error.type` (a JSON-RPC code, `tool_error` or a failure kind) —
//! not the tool's name (unbounded on the Prometheus side).

use std::sync::LazyLock;

use prometheus_client::{
    metrics::{family::Family, histogram::Histogram},
    registry::{Registry, Unit},
};

use super::semconv::DURATION_BUCKETS;

type Labels = Vec<(&'static str, String)>;

#[derive(Debug)]
struct Durations {
    server: Family<Labels, Histogram>,
    client: Family<Labels, Histogram>,
    session: Family<Labels, Histogram>,
}

fn histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

static DURATIONS: LazyLock<Durations> = LazyLock::new(|| Durations {
    server: Family::new_with_constructor(histogram),
    client: Family::new_with_constructor(histogram),
    session: Family::new_with_constructor(histogram),
});

/// A request the gateway served took `seconds`.
pub(crate) fn server(method: &str, error_type: Option<&str>, seconds: f64) {
    let labels = vec![
        ("mcp_method_name", method.to_owned()),
        ("error_type", error_type.unwrap_or("").to_owned()),
    ];
    DURATIONS.server.get_or_create(&labels).observe(seconds);
}

/// An attempt sent upstream on `connection` took `seconds`.
pub(crate) fn client(method: &str, error_type: Option<&str>, connection: &str, seconds: f64) {
    let labels = vec![
        ("connection", connection.to_owned()),
        ("mcp_method_name", method.to_owned()),
        ("error_type", error_type.unwrap_or("").to_owned()),
    ];
    DURATIONS.client.get_or_create(&labels).observe(seconds);
}

/// An upstream session of `connection` lasted `seconds`, ready to gone.
pub(crate) fn client_session(connection: &str, seconds: f64) {
    let labels = vec![("connection", connection.to_owned())];
    DURATIONS.session.get_or_create(&labels).observe(seconds);
}

/// Adds the histograms to a scrape's registry
/// (`mcp_server_operation_duration_seconds`, `mcp_client_operation_duration_seconds`,
/// `mcp_client_session_duration_seconds`).
pub(crate) fn register(registry: &mut Registry) {
    registry.register_with_unit(
        "mcp_server_operation_duration",
        "MCP requests the gateway served, received to answered (OpenTelemetry mcp.server.operation.duration)",
        Unit::Seconds,
        DURATIONS.server.clone(),
    );
    registry.register_with_unit(
        "mcp_client_operation_duration",
        "Attempts sent upstream, sent to answered (OpenTelemetry mcp.client.operation.duration)",
        Unit::Seconds,
        DURATIONS.client.clone(),
    );
    registry.register_with_unit(
        "mcp_client_session_duration",
        "Upstream sessions, ready to gone (OpenTelemetry mcp.client.session.duration)",
        Unit::Seconds,
        DURATIONS.session.clone(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copies_are_prometheus_histograms_with_the_conventions_buckets() {
        server("tools/call", Some("tool_error"), 0.03);
        client("tools/call", None, "a", 0.004);
        client_session("a", 12.0);
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE mcp_server_operation_duration_seconds histogram",
            "mcp_server_operation_duration_seconds_bucket{le=\"0.05\",mcp_method_name=\"tools/call\",error_type=\"tool_error\"} 1",
            "mcp_server_operation_duration_seconds_bucket{le=\"0.02\",mcp_method_name=\"tools/call\",error_type=\"tool_error\"} 0",
            "mcp_client_operation_duration_seconds_bucket{le=\"0.01\",connection=\"a\",mcp_method_name=\"tools/call\",error_type=\"\"} 1",
            "mcp_client_session_duration_seconds_bucket{le=\"30.0\",connection=\"a\"} 1",
            "mcp_client_session_duration_seconds_bucket{le=\"10.0\",connection=\"a\"} 0",
            "mcp_client_session_duration_seconds_bucket{le=\"300.0\",connection=\"a\"} 1",
            "mcp_client_session_duration_seconds_bucket{le=\"+Inf\",connection=\"a\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        let buckets = text
            .lines()
            .filter(|l| l.starts_with("mcp_client_session_duration_seconds_bucket"))
            .count();
        assert_eq!(buckets, 15, "the 14 bounds and +Inf");
    }
}
