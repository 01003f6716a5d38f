//! Export off the call path: a thread of its own, a bounded queue, and a
//! count of what was dropped.
//!
//! The SDK's stock batch processor and periodic reader run exports under a
//! plain `block_on` on threads of their own, where neither tonic nor async
//! reqwest can run (they need a tokio reactor). So the exporters live on the
//! `otel-export` runtime: spans go there through a bounded channel
//! ([`BoundedSpans`]: `on_end` never waits, a full queue drops the span and
//! counts it), and the metric reader's exports are driven on it
//! ([`OnExportRuntime`]).

use std::sync::{
    Arc, Mutex, PoisonError,
    atomic::{AtomicU64, Ordering},
};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::{
    error::{OTelSdkError, OTelSdkResult},
    metrics::{Temporality, data::ResourceMetrics, exporter::PushMetricExporter},
    trace::{Span, SpanData, SpanExporter, SpanProcessor},
};
use tokio::sync::{Notify, mpsc, oneshot};

/// What the export side counts (shown on `/metrics`).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Spans dropped because the queue was full.
    pub(crate) dropped: AtomicU64,
    /// Export requests that failed or timed out (their spans are lost).
    pub(crate) failures: AtomicU64,
}

/// Spans the batching task sends at most in one request.
const MAX_BATCH: usize = 512;

/// Queues finished spans for the export task; never blocks the caller.
///
/// The queue is a plain vector under a mutex held for a push: ending a span
/// wakes nobody until a batch is full (or `batch_delay` passes), so a
/// traced call costs no hand-off to the export thread.
#[derive(Debug)]
pub(crate) struct BoundedSpans {
    queue: Arc<Queue>,
    flushes: mpsc::UnboundedSender<oneshot::Sender<()>>,
    /// How long `force_flush` and `shutdown` wait when the SDK calls them.
    wait: Duration,
}

#[derive(Debug)]
struct Queue {
    spans: Mutex<Vec<SpanData>>,
    max: usize,
    full_batch: Notify,
    counters: Arc<Counters>,
}

impl Queue {
    fn take(&self) -> Vec<SpanData> {
        let mut spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *spans)
    }
}

impl BoundedSpans {
    /// Starts the batching task on `runtime`. `exporter` already knows its
    /// resource.
    pub(crate) fn start<E: SpanExporter + 'static>(
        runtime: &tokio::runtime::Handle,
        exporter: E,
        max_queue: usize,
        batch_delay: Duration,
        timeout: Duration,
        counters: Arc<Counters>,
    ) -> Self {
        let queue = Arc::new(Queue {
            spans: Mutex::new(Vec::new()),
            max: max_queue,
            full_batch: Notify::new(),
            counters: counters.clone(),
        });
        let (flushes, flush_asked) = mpsc::unbounded_channel();
        let batching = Batching {
            exporter,
            queue: queue.clone(),
            flush_asked,
            batch_delay,
            timeout,
            counters,
        };
        runtime.spawn(batching.run());
        BoundedSpans {
            queue,
            flushes,
            wait: timeout,
        }
    }

    /// A handle to ask for a flush with (see [`BoundedSpans::flush`]).
    pub(crate) fn flusher(&self) -> mpsc::UnboundedSender<oneshot::Sender<()>> {
        self.flushes.clone()
    }

    /// Sends everything queued so far; answers when done (or when the
    /// export task is gone).
    pub(crate) fn flush(&self) -> oneshot::Receiver<()> {
        let (done, flushed) = oneshot::channel();
        let _gone = self.flushes.send(done);
        flushed
    }
}

impl SpanProcessor for BoundedSpans {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let queued = {
            let mut spans = self
                .queue
                .spans
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if spans.len() >= self.queue.max {
                None
            } else {
                spans.push(span);
                Some(spans.len())
            }
        };
        match queued {
            None => {
                self.queue.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Some(len) if len == MAX_BATCH => self.queue.full_batch.notify_one(),
            Some(_) => {}
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        wait_blocking(self.flush(), self.wait)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        wait_blocking(self.flush(), timeout)
    }
}

/// Waits for `done` on a thread that may block (the SDK's own calls).
fn wait_blocking(done: oneshot::Receiver<()>, within: Duration) -> OTelSdkResult {
    let deadline = std::time::Instant::now() + within;
    let mut done = done;
    loop {
        match done.try_recv() {
            Ok(()) | Err(oneshot::error::TryRecvError::Closed) => return Ok(()),
            Err(oneshot::error::TryRecvError::Empty) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(oneshot::error::TryRecvError::Empty) => return Err(OTelSdkError::Timeout(within)),
        }
    }
}

/// The task that sends what is queued: every `batch_delay`, when a batch
/// is full, and when asked to flush; one request at a time.
struct Batching<E> {
    exporter: E,
    queue: Arc<Queue>,
    flush_asked: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    batch_delay: Duration,
    timeout: Duration,
    counters: Arc<Counters>,
}

impl<E: SpanExporter> Batching<E> {
    async fn run(mut self) {
        loop {
            let flushed = tokio::select! {
                () = self.queue.full_batch.notified() => None,
                () = tokio::time::sleep(self.batch_delay) => None,
                asked = self.flush_asked.recv() => match asked {
                    Some(done) => Some(done),
                    None => break,
                },
            };
            let spans = self.queue.take();
            self.send_all(spans).await;
            if let Some(done) = flushed {
                let _asker_gone = done.send(());
            }
        }
        let spans = self.queue.take();
        self.send_all(spans).await;
    }

    async fn send_all(&self, mut spans: Vec<SpanData>) {
        while !spans.is_empty() {
            let rest = spans.split_off(spans.len().min(MAX_BATCH));
            self.send(spans).await;
            spans = rest;
        }
    }

    async fn send(&self, spans: Vec<SpanData>) {
        match tokio::time::timeout(self.timeout, self.exporter.export(spans)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%error, "span export failed");
            }
            Err(_) => {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("span export timed out");
            }
        }
    }
}

/// A metric exporter whose exports run on the export runtime (the SDK's
/// reader calls it from a thread of its own, outside any runtime).
#[derive(Debug)]
pub(crate) struct OnExportRuntime<E> {
    pub(crate) inner: E,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) timeout: Duration,
    pub(crate) counters: Arc<Counters>,
}

impl<E: PushMetricExporter> PushMetricExporter for OnExportRuntime<E> {
    fn export(
        &self,
        metrics: &ResourceMetrics,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        // The reader's thread is not a runtime's: blocking on the export
        // runtime from it is allowed (its worker drives the I/O).
        let exported = if tokio::runtime::Handle::try_current().is_ok() {
            Err(OTelSdkError::InternalFailure(
                "metrics exported from inside a runtime".to_owned(),
            ))
        } else {
            self.runtime.block_on(async {
                match tokio::time::timeout(self.timeout, self.inner.export(metrics)).await {
                    Ok(result) => result,
                    Err(_) => Err(OTelSdkError::Timeout(self.timeout)),
                }
            })
        };
        if exported.is_err() {
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
        }
        std::future::ready(exported)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}
