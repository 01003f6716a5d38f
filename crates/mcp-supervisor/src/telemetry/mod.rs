//! OpenTelemetry: a trace per request that shows what the supervisor
//! decided, and the MCP duration metrics (docs/OBSERVABILITY.md).
//!
//! Off unless [`install`]ed (the `[telemetry]` table): then nothing is
//! built per request but an atomic load, no `_meta` or header is written,
//! and the only figures kept are the `/metrics` copies of the durations.
//!
//! On: the gateway starts a SERVER span per request it serves
//! (`spans::ServerSpan`), its parent taken from the request's `_meta` or
//! headers (`propagate`); every attempt sent upstream is a CLIENT span
//! (`spans::ClientSpan`) whose context goes upstream in `_meta` (and, over
//! HTTP, headers). A library caller's current `tracing` span is the parent
//! of its call's spans when its subscriber has a `tracing-opentelemetry`
//! layer ([`TraceParent::current`]). Names are in [`semconv`].
//!
//! Export runs on a thread of its own with a bounded queue
//! (`export`): a slow or absent collector never slows or fails a call;
//! what did not fit is dropped and counted.

pub(crate) mod durations;
mod export;
mod lifecycle;
pub(crate) mod propagate;
pub mod semconv;
pub(crate) mod spans;

use std::sync::{Arc, Mutex, OnceLock, atomic::Ordering};
use std::time::Duration;

use opentelemetry::{
    Context, InstrumentationScope, KeyValue,
    metrics::{Histogram, MeterProvider as _},
    propagation::TextMapCompositePropagator,
    trace::{TraceContextExt, TracerProvider as _},
};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::{
    Resource,
    metrics::{PeriodicReader, SdkMeterProvider},
    trace::{Sampler, SdkTracer, SdkTracerProvider, SpanExporter as _},
};
use secrecy::ExposeSecret;
use tokio::sync::{mpsc, oneshot};

use crate::config::{OtlpProtocol, TelemetrySettings};
use export::{BoundedSpans, Counters, OnExportRuntime};

pub use lifecycle::LifecycleSpans;
pub use spans::TraceParent;

/// Why telemetry could not start (a startup error: never silently off).
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("telemetry is already installed in this process")]
    AlreadyInstalled,
    #[error("could not start the export thread: {0}")]
    Runtime(#[from] std::io::Error),
    #[error("could not build the OTLP exporter: {0}")]
    Exporter(String),
}

/// The installed telemetry: the tracer, the instruments and the export side.
#[derive(Debug)]
pub struct Telemetry {
    tracer: SdkTracer,
    meter_provider: SdkMeterProvider,
    pub(crate) propagator: TextMapCompositePropagator,
    pub(crate) instruments: Instruments,
    pub(crate) capture_content: bool,
    counters: Arc<Counters>,
    flushes: mpsc::UnboundedSender<oneshot::Sender<()>>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

/// The convention's histograms.
#[derive(Debug)]
pub(crate) struct Instruments {
    pub(crate) server_operation: Histogram<f64>,
    pub(crate) client_operation: Histogram<f64>,
    pub(crate) client_session: Histogram<f64>,
}

static INSTALLED: OnceLock<Telemetry> = OnceLock::new();

/// The telemetry [`install`] started, if any.
pub fn installed() -> Option<&'static Telemetry> {
    INSTALLED.get()
}

/// Spans dropped because the export queue was full (0 when not installed).
pub fn spans_dropped() -> u64 {
    installed().map_or(0, |t| t.counters.dropped.load(Ordering::Relaxed))
}

/// Export requests that failed or timed out (0 when not installed).
pub fn export_failures() -> u64 {
    installed().map_or(0, |t| t.counters.failures.load(Ordering::Relaxed))
}

/// Starts exporting as `settings` say, once per process. Nothing connects
/// yet: an unreachable collector is not an error here (its exports fail,
/// counted, later).
pub fn install(settings: &TelemetrySettings) -> Result<&'static Telemetry, TelemetryError> {
    if INSTALLED.get().is_some() {
        return Err(TelemetryError::AlreadyInstalled);
    }
    let telemetry = Telemetry::start(settings)?;
    INSTALLED
        .set(telemetry)
        .map_err(|_| TelemetryError::AlreadyInstalled)?;
    installed().ok_or(TelemetryError::AlreadyInstalled)
}

impl Telemetry {
    fn start(settings: &TelemetrySettings) -> Result<Self, TelemetryError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otel-export")
            .enable_all()
            .build()?;
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .with_attributes([
                KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
                KeyValue::new("service.instance.id", instance_id()),
            ])
            .build();
        // tonic's channel and the HTTP client are made on the export runtime.
        let handle = runtime.handle().clone();
        let (mut spans, metrics) = std::thread::scope(|scope| {
            scope
                .spawn(|| handle.block_on(async { exporters(settings) }))
                .join()
                .unwrap_or_else(|_| Err(TelemetryError::Exporter("the builder panicked".into())))
        })?;
        spans.set_resource(&resource);
        let counters = Arc::new(Counters::default());
        let processor = BoundedSpans::start(
            runtime.handle(),
            spans,
            settings.max_queue,
            settings.batch_delay,
            settings.timeout,
            counters.clone(),
        );
        let flushes = processor.flusher();
        let tracer_provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                settings.sample_ratio.get(),
            ))))
            .with_resource(resource.clone())
            .build();
        let reader = PeriodicReader::builder(OnExportRuntime {
            inner: metrics,
            runtime: runtime.handle().clone(),
            timeout: settings.timeout,
            counters: counters.clone(),
        })
        .with_interval(settings.metrics_interval)
        .build();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(resource)
            .build();
        let scope = InstrumentationScope::builder("mcp-supervisor")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let tracer = tracer_provider.tracer_with_scope(scope.clone());
        let meter = meter_provider.meter_with_scope(scope);
        let histogram = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(semconv::DURATION_BUCKETS.to_vec())
                .build()
        };
        let instruments = Instruments {
            server_operation: histogram(
                semconv::SERVER_OPERATION_DURATION,
                "MCP request duration as observed on the receiver",
            ),
            client_operation: histogram(
                semconv::CLIENT_OPERATION_DURATION,
                "MCP request duration as observed on the sender",
            ),
            client_session: histogram(
                semconv::CLIENT_SESSION_DURATION,
                "The duration of the MCP session as observed on the MCP client",
            ),
        };
        Ok(Telemetry {
            tracer,
            meter_provider,
            propagator: propagate::propagator(),
            instruments,
            capture_content: settings.capture_content,
            counters,
            flushes,
            runtime: Mutex::new(Some(runtime)),
        })
    }

    /// The tracer our spans come from: give it to a `tracing-opentelemetry`
    /// layer (`tracing_opentelemetry::layer().with_tracer(..)`) so a
    /// library caller's `tracing` spans join the same traces.
    pub fn tracer(&self) -> SdkTracer {
        self.tracer.clone()
    }

    pub(crate) fn sdk_tracer(&self) -> &SdkTracer {
        &self.tracer
    }

    /// Sends what is queued (spans, then a last collection of the metrics)
    /// and stops the export thread, within `within` whatever the collector
    /// does.
    pub async fn shutdown(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        let (done, flushed) = oneshot::channel();
        if self.flushes.send(done).is_ok()
            && tokio::time::timeout_at(deadline, flushed).await.is_err()
        {
            tracing::warn!("telemetry: the collector did not take the last spans in time");
        }
        let meters = self.meter_provider.clone();
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let metrics = tokio::task::spawn_blocking(move || meters.shutdown_with_timeout(left));
        let _late = tokio::time::timeout_at(deadline, metrics).await;
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
    }
}

/// `service.instance.id`: random per process.
fn instance_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The span and metric exporters for `settings`, built on the export runtime.
fn exporters(
    settings: &TelemetrySettings,
) -> Result<
    (
        opentelemetry_otlp::SpanExporter,
        opentelemetry_otlp::MetricExporter,
    ),
    TelemetryError,
> {
    let failed =
        |error: opentelemetry_otlp::ExporterBuildError| TelemetryError::Exporter(error.to_string());
    let headers: Vec<(http::HeaderName, http::HeaderValue)> = settings
        .headers
        .iter()
        .filter_map(|(name, value)| {
            let mut value = http::HeaderValue::from_str(value.expose_secret()).ok()?;
            value.set_sensitive(true);
            Some((http::HeaderName::from_bytes(name.as_bytes()).ok()?, value))
        })
        .collect();
    let base = settings.endpoint.as_str().trim_end_matches('/').to_owned();
    match settings.protocol {
        OtlpProtocol::Grpc => {
            let spans = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(base.clone())
                .with_timeout(settings.timeout)
                .with_interceptor(Headers(Arc::new(headers.clone())))
                .build()
                .map_err(failed)?;
            let metrics = opentelemetry_otlp::MetricExporter::builder()
                .with_tonic()
                .with_endpoint(base)
                .with_timeout(settings.timeout)
                .with_interceptor(Headers(Arc::new(headers)))
                .build()
                .map_err(failed)?;
            Ok((spans, metrics))
        }
        OtlpProtocol::HttpProtobuf => {
            let client = reqwest::Client::builder()
                .timeout(settings.timeout)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|error| TelemetryError::Exporter(error.to_string()))?;
            let client = HeadersClient {
                client,
                headers: Arc::new(headers),
            };
            let spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(format!("{base}/v1/traces"))
                .with_timeout(settings.timeout)
                .with_http_client(client.clone())
                .build()
                .map_err(failed)?;
            let metrics = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_endpoint(format!("{base}/v1/metrics"))
                .with_timeout(settings.timeout)
                .with_http_client(client)
                .build()
                .map_err(failed)?;
            Ok((spans, metrics))
        }
    }
}

/// The file's headers, set on every gRPC export last (so they win over
/// `OTEL_EXPORTER_OTLP_HEADERS`, which the exporter adds itself).
#[derive(Clone)]
struct Headers(Arc<Vec<(http::HeaderName, http::HeaderValue)>>);

impl tonic::service::Interceptor for Headers {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let mut map = std::mem::take(request.metadata_mut()).into_headers();
        for (name, value) in self.0.iter() {
            map.insert(name.clone(), value.clone());
        }
        *request.metadata_mut() = tonic::metadata::MetadataMap::from_headers(map);
        Ok(request)
    }
}

/// The HTTP exporter's client: ours, with the file's headers set last.
#[derive(Clone)]
struct HeadersClient {
    client: reqwest::Client,
    headers: Arc<Vec<(http::HeaderName, http::HeaderValue)>>,
}

impl std::fmt::Debug for HeadersClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeadersClient")
            .field("headers", &self.headers.len())
            .finish()
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for HeadersClient {
    async fn send_bytes(
        &self,
        mut request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        for (name, value) in self.headers.iter() {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        self.client.send_bytes(request).await
    }
}

/// Whether `cx` carries a span to be a parent.
pub(crate) fn has_span(cx: &Context) -> bool {
    cx.span().span_context().is_valid()
}
