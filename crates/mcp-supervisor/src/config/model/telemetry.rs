//! `[telemetry]`: where spans and metrics are exported over OTLP, and how
//! much of them.

use std::fmt;
use std::time::Duration;

use secrecy::SecretString;

use super::redact::{RedactedPairs, RedactedUrl, secret_pairs_eq};

/// `[telemetry]`: where spans and metrics go over OTLP, and how much of them.
#[derive(Clone)]
pub struct TelemetrySettings {
    /// The collector's base URL: `/v1/traces` and `/v1/metrics` are appended
    /// for HTTP; gRPC uses it as it is. No credentials, query or fragment.
    pub endpoint: url::Url,
    /// `grpc` or `http/protobuf`.
    pub protocol: OtlpProtocol,
    /// Sent with every export request, values from `env` or `file`.
    pub headers: Vec<(String, SecretString)>,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// The share of new traces sampled; a remote parent's choice is followed.
    pub sample_ratio: SampleRatio,
    /// The longest one export request may take.
    pub timeout: Duration,
    /// The longest a finished span waits before it is sent.
    pub batch_delay: Duration,
    /// Finished spans waiting to be sent; beyond this they are dropped and counted.
    pub max_queue: usize,
    /// How often metrics are sent.
    pub metrics_interval: Duration,
    /// Record tool arguments and results (`gen_ai.tool.call.arguments`,
    /// `.result`), each cut to [`CAPTURE_MAX_BYTES`]. Off by default.
    pub capture_content: bool,
}

/// How much of a tool's arguments or result `capture_content` records.
pub const CAPTURE_MAX_BYTES: usize = 4096;

impl fmt::Debug for TelemetrySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetrySettings")
            .field("endpoint", &RedactedUrl(self.endpoint.as_str()))
            .field("protocol", &self.protocol)
            .field("headers", &RedactedPairs(&self.headers))
            .field("service_name", &self.service_name)
            .field("sample_ratio", &self.sample_ratio)
            .field("timeout", &self.timeout)
            .field("batch_delay", &self.batch_delay)
            .field("max_queue", &self.max_queue)
            .field("metrics_interval", &self.metrics_interval)
            .field("capture_content", &self.capture_content)
            .finish()
    }
}

/// `telemetry.protocol`: how spans and metrics travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (a collector's port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (a collector's port 4318).
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The name used in the file and by `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }
}

/// A sampling ratio in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRatio(f64);

impl SampleRatio {
    /// `ratio` when it is a number in `0.0..=1.0`.
    pub fn new(ratio: f64) -> Option<Self> {
        (0.0..=1.0).contains(&ratio).then_some(SampleRatio(ratio))
    }

    /// The ratio.
    pub fn get(self) -> f64 {
        self.0
    }
}

// Never NaN (`new` refuses it), so equality is total.
impl Eq for SampleRatio {}

impl PartialEq for TelemetrySettings {
    fn eq(&self, other: &Self) -> bool {
        self.endpoint == other.endpoint
            && self.protocol == other.protocol
            && secret_pairs_eq(&self.headers, &other.headers)
            && self.service_name == other.service_name
            && self.sample_ratio == other.sample_ratio
            && self.timeout == other.timeout
            && self.batch_delay == other.batch_delay
            && self.max_queue == other.max_queue
            && self.metrics_interval == other.metrics_interval
            && self.capture_content == other.capture_content
    }
}

impl Eq for TelemetrySettings {}
