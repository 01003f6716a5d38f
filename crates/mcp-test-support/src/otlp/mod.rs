//! A real OTLP collector stand-in for tests: it takes what an OpenTelemetry
//! exporter sends, over OTLP/HTTP (protobuf) and OTLP/gRPC, decodes it with
//! the protocol's own messages (`opentelemetry-proto`, never the exporter
//! crate under test) and keeps it for assertions.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use mcp_test_support::otlp::{OtlpReceiver, SpanKind};
//!
//! let collector = OtlpReceiver::start().await;
//! // … point an exporter at collector.http_endpoint() or grpc_endpoint() …
//! let spans = collector
//!     .wait_for_spans(Duration::from_secs(10), |spans| {
//!         spans.iter().any(|span| span.kind == SpanKind::Server)
//!     })
//!     .await;
//! # let _ = spans;
//! # }
//! ```
//!
//! What it accepts:
//!
//! - OTLP/HTTP: `POST /v1/traces` and `POST /v1/metrics` with
//!   `Content-Type: application/x-protobuf`, answered `200` with the encoded
//!   `Export*ServiceResponse`. Any other content type (OTLP/JSON included)
//!   is `415`, and so is any `Content-Encoding`: the receiver takes no
//!   compressed bodies, so what it records is what travelled. Bodies over
//!   16 MiB are `413`, undecodable ones `400`.
//! - OTLP/gRPC: `TraceService/Export` and `MetricsService/Export` over h2c,
//!   without compression.
//!
//! Only accepted exports are recorded (spans, data points, body bytes,
//! headers, the request count). [`OtlpReceiver::set_failing`] refuses every
//! export (`503` / `UNAVAILABLE`) and [`OtlpReceiver::set_delay`] makes the
//! collector slow.
//!
//! # Layout
//!
//! - this file: [`OtlpReceiver`] and the record every transport writes to;
//! - `serve`: the listeners, the HTTP handlers and the gRPC services;
//! - `view`: [`SpanView`], [`MetricView`] and the flattening of the
//!   protocol's messages into them.

mod serve;
mod view;

use std::{
    fmt,
    net::SocketAddr,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use opentelemetry_proto::tonic::collector::{
    metrics::v1::ExportMetricsServiceRequest, trace::v1::ExportTraceServiceRequest,
};
use tokio::{net::TcpListener, sync::Notify, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::accept::{Protocols, Serving, accept_loop};

/// Both listeners take HTTP/1.1 and h2c (gRPC).
const SERVING: Serving = Serving {
    protocols: Protocols::Http1AndH2c,
    nodelay: true,
    name: "OTLP receiver",
};

pub use view::{
    AttrValue, EventView, LinkView, MetricView, PointView, SpanKind, SpanView, StatusCode,
};

/// A running OTLP collector on loopback: HTTP on one port, gRPC on another.
///
/// Dropping it stops both listeners and closes every open connection.
pub struct OtlpReceiver {
    http: SocketAddr,
    grpc: SocketAddr,
    shared: Arc<Shared>,
    /// Stops both accept loops (which drop their connections).
    shutdown: CancellationToken,
    tasks: [JoinHandle<()>; 2],
}

impl OtlpReceiver {
    /// Starts both listeners on `127.0.0.1:0` (free ports).
    ///
    /// # Panics
    ///
    /// When loopback cannot be bound, or outside a tokio runtime.
    pub async fn start() -> OtlpReceiver {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        Self::start_on(loopback, loopback)
            .await
            .expect("binding the OTLP receiver on loopback")
    }

    /// Starts OTLP/HTTP on `http` and OTLP/gRPC on `grpc` (port 0 picks a
    /// free port). Must be called inside a tokio runtime.
    pub async fn start_on(http: SocketAddr, grpc: SocketAddr) -> std::io::Result<OtlpReceiver> {
        let http_listener = TcpListener::bind(http).await?;
        let grpc_listener = TcpListener::bind(grpc).await?;
        let (http, grpc) = (http_listener.local_addr()?, grpc_listener.local_addr()?);
        let shared = Arc::new(Shared::default());
        let shutdown = CancellationToken::new();
        let tasks = [
            tokio::spawn(accept_loop(
                http_listener,
                serve::http_router(shared.clone()),
                SERVING,
                || {},
                shutdown.clone(),
            )),
            tokio::spawn(accept_loop(
                grpc_listener,
                serve::grpc_router(shared.clone()),
                SERVING,
                || {},
                shutdown.clone(),
            )),
        ];
        tracing::debug!(%http, %grpc, "OTLP receiver listening");
        Ok(OtlpReceiver {
            http,
            grpc,
            shared,
            shutdown,
            tasks,
        })
    }

    /// `http://127.0.0.1:PORT`: the OTLP/HTTP base URL (an exporter appends
    /// `/v1/traces` and `/v1/metrics`).
    pub fn http_endpoint(&self) -> String {
        format!("http://{}", self.http)
    }

    /// `http://127.0.0.1:PORT`: the OTLP/gRPC endpoint.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// Every span received so far, over both transports, in arrival order.
    pub fn spans(&self) -> Vec<SpanView> {
        self.shared.record().spans.clone()
    }

    /// Waits until `pred` holds for the spans received so far, and returns
    /// them.
    ///
    /// # Panics
    ///
    /// After `timeout`, with a dump of every span received (ids, kind,
    /// name, status, attributes).
    pub async fn wait_for_spans(
        &self,
        timeout: Duration,
        pred: impl Fn(&[SpanView]) -> bool,
    ) -> Vec<SpanView> {
        let waited = self
            .shared
            .wait_until(timeout, |record| {
                pred(&record.spans).then(|| record.spans.clone())
            })
            .await;
        waited.unwrap_or_else(|| {
            let record = self.shared.record();
            panic!(
                "OTLP receiver: the expected spans did not arrive within {timeout:?}; \
                 {} export requests, {} spans received:\n{}",
                record.requests,
                record.spans.len(),
                dump(&record.spans),
            )
        })
    }

    /// Every metric data point received so far, over both transports.
    pub fn metrics(&self) -> Vec<MetricView> {
        self.shared.record().metrics.clone()
    }

    /// Waits until at least one data point of the metric `name` has
    /// arrived, and returns all of them.
    ///
    /// # Panics
    ///
    /// After `timeout`, with a dump of every data point received.
    pub async fn wait_for_metric(&self, timeout: Duration, name: &str) -> Vec<MetricView> {
        let of_name = |record: &Record| -> Vec<MetricView> {
            record
                .metrics
                .iter()
                .filter(|point| point.name == name)
                .cloned()
                .collect()
        };
        let waited = self
            .shared
            .wait_until(timeout, |record| {
                let points = of_name(record);
                (!points.is_empty()).then_some(points)
            })
            .await;
        waited.unwrap_or_else(|| {
            let record = self.shared.record();
            panic!(
                "OTLP receiver: no data point of metric {name:?} within {timeout:?}; \
                 {} export requests, {} data points received:\n{}",
                record.requests,
                record.metrics.len(),
                dump(&record.metrics),
            )
        })
    }

    /// Every accepted export request as it travelled: for each, its header
    /// (or gRPC metadata) names and values as `name: value\n` lines, then
    /// its body as received (for gRPC, with the message framing), before
    /// any decoding. For "this secret is in no exported byte" scans.
    pub fn raw_bytes(&self) -> Vec<u8> {
        self.shared.record().raw.clone()
    }

    /// The headers (HTTP) or metadata (gRPC) of every accepted export
    /// request, in order, names lowercase. Values that are not UTF-8 are
    /// converted lossily.
    pub fn headers(&self) -> Vec<(String, String)> {
        self.shared.record().headers.clone()
    }

    /// Export requests accepted so far (traces and metrics, both
    /// transports). Refused ones (`set_failing`, `415`, `400`, …) are not
    /// counted.
    pub fn requests(&self) -> usize {
        self.shared.record().requests
    }

    /// Export requests refused because of [`set_failing`](Self::set_failing)
    /// so far (both kinds, both transports): how a test counts an
    /// exporter's retries.
    pub fn refused(&self) -> usize {
        self.shared.record().refused
    }

    /// From now on, wait this long before answering any export request (a
    /// slow collector). `Duration::ZERO` turns it off.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.record().delay = delay;
    }

    /// While `true`, every export request is answered `503` (HTTP) or
    /// `UNAVAILABLE` (gRPC) and nothing of it is recorded.
    pub fn set_failing(&self, failing: bool) {
        self.shared.record().failing = failing;
    }

    /// Waits until more than `seen` spans have arrived and returns the new
    /// ones (`mcp-test-server --otlp` prints them as they come).
    pub(crate) async fn spans_after(&self, seen: usize) -> Vec<SpanView> {
        let waited = self
            .shared
            .wait_until(Duration::MAX, |record| {
                record
                    .spans
                    .get(seen..)
                    .filter(|new| !new.is_empty())
                    .map(<[SpanView]>::to_vec)
            })
            .await;
        waited.unwrap_or_default()
    }
}

impl fmt::Debug for OtlpReceiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let record = self.shared.record();
        f.debug_struct("OtlpReceiver")
            .field("http", &self.http)
            .field("grpc", &self.grpc)
            .field("requests", &record.requests)
            .field("spans", &record.spans.len())
            .field("metrics", &record.metrics.len())
            .finish_non_exhaustive()
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.shutdown.cancel();
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn dump<T: fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "  (none)".to_owned();
    }
    items
        .iter()
        .map(|item| format!("  {item}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The two signals a collector takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    /// The OTLP/HTTP path of the signal.
    fn http_path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }
}

/// One decoded export request.
#[derive(Debug)]
enum Decoded {
    Traces(ExportTraceServiceRequest),
    Metrics(ExportMetricsServiceRequest),
}

/// An export request as it travelled, before decoding.
#[derive(Debug, Clone, Default)]
struct Travelled {
    headers: Vec<(String, String)>,
    body: bytes::Bytes,
}

impl Travelled {
    fn from_http(headers: &http::HeaderMap, body: bytes::Bytes) -> Self {
        let headers = headers
            .iter()
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                (name.as_str().to_owned(), value)
            })
            .collect();
        Self { headers, body }
    }
}

/// What every transport records into, and what waiters watch.
#[derive(Debug, Default)]
struct Shared {
    record: Mutex<Record>,
    /// Woken (all waiters) after every accepted or refused export.
    changed: Notify,
}

/// Everything received, and the test's settings.
#[derive(Debug, Default)]
struct Record {
    spans: Vec<SpanView>,
    metrics: Vec<MetricView>,
    raw: Vec<u8>,
    headers: Vec<(String, String)>,
    requests: usize,
    /// Exports refused while `failing`.
    refused: usize,
    /// Waited before every answer.
    delay: Duration,
    /// Refuse every export.
    failing: bool,
}

/// Whether an export is to be recorded or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    Accept,
    /// `set_failing(true)`.
    Refuse,
}

impl Shared {
    fn record(&self) -> MutexGuard<'_, Record> {
        // A panicking test thread cannot leave the record half-written:
        // every update is a few pushes.
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits the configured delay, then tells whether to accept.
    async fn admit(&self) -> Admission {
        let delay = self.record().delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut record = self.record();
        if !record.failing {
            return Admission::Accept;
        }
        record.refused += 1;
        drop(record);
        self.changed.notify_waiters();
        Admission::Refuse
    }

    /// Records one accepted export and wakes the waiters.
    fn accept(&self, travelled: Travelled, decoded: &Decoded) {
        let mut record = self.record();
        for (name, value) in &travelled.headers {
            record.raw.extend_from_slice(name.as_bytes());
            record.raw.extend_from_slice(b": ");
            record.raw.extend_from_slice(value.as_bytes());
            record.raw.push(b'\n');
        }
        record.raw.extend_from_slice(&travelled.body);
        record.headers.extend(travelled.headers);
        record.requests += 1;
        match decoded {
            Decoded::Traces(request) => record.spans.extend(view::spans_of(request)),
            Decoded::Metrics(request) => record.metrics.extend(view::metrics_of(request)),
        }
        drop(record);
        self.changed.notify_waiters();
    }

    /// Polls `ready` on every change until it gives a value or `timeout`
    /// passes (`None`).
    async fn wait_until<T>(
        &self,
        timeout: Duration,
        mut ready: impl FnMut(&Record) -> Option<T>,
    ) -> Option<T> {
        let wait = async {
            loop {
                // Registered before the check, so a change between the
                // check and the await still wakes us.
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if let Some(value) = ready(&self.record()) {
                    return value;
                }
                changed.await;
            }
        };
        match tokio::time::Instant::now().checked_add(timeout) {
            Some(deadline) => tokio::time::timeout_at(deadline, wait).await.ok(),
            None => Some(wait.await),
        }
    }
}
