//! What one connection is doing, and a watchdog that says when it has
//! waited too long.
//!
//! A connection is always in one [`Phase`]:
//!
//! ```text
//!  accepted ─► Head ── head parsed ──► Busy ── response written ──► Idle
//!               ▲                                                    │
//!               └──────────── first byte of the next request ────────┘
//! ```
//!
//! [`WatchedIo`] sees the bytes arrive, [`WatchedService`] sees requests begin
//! and their responses end (the response body is dropped once written or
//! abandoned). `Head` may last `header_timeout`, `Idle` `idle_timeout`;
//! `Busy` has no limit here (the routes bound their own work, and a
//! long-lived event stream is busy by design).

use std::{
    convert::Infallible,
    future::Future,
    io,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes, HttpBody},
    extract::Request,
    response::Response,
};
use hyper::{
    body::{Frame, Incoming, SizeHint},
    service::Service,
};
use hyper_util::service::TowerToHyperService;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::Notify,
    time::Instant,
};

/// The two limits the watchdog enforces.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    pub(super) header: Duration,
    pub(super) idle: Duration,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a request head: since its first byte, or since the
    /// connection was accepted.
    Head { since: Instant },
    /// Answering `requests` requests (hyper answers one at a time; the next
    /// head may already be parsed while the last response is being dropped).
    Busy { requests: usize },
    /// Between requests, since `since`.
    Idle { since: Instant },
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expired {
    /// A request head took longer than `header_timeout`.
    Head,
    /// No request for `idle_timeout`.
    Idle,
}

impl Expired {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Expired::Head => "request head not received within header_timeout",
            Expired::Idle => "idle for idle_timeout",
        }
    }
}

/// One connection's phase, shared by its IO, its service and its watchdog.
#[derive(Debug)]
pub(super) struct Activity {
    phase: Mutex<Phase>,
    /// Wakes the watchdog when the phase changes.
    changed: Notify,
    timeouts: Timeouts,
}

impl Activity {
    /// A connection just accepted: its first request head is due.
    pub(super) fn new(timeouts: Timeouts) -> Arc<Self> {
        Arc::new(Activity {
            phase: Mutex::new(Phase::Head {
                since: Instant::now(),
            }),
            changed: Notify::new(),
            timeouts,
        })
    }

    fn update<T>(&self, change: impl FnOnce(&mut Phase) -> T) -> T {
        // The phase is plain data, always consistent; a panic elsewhere while
        // holding the lock cannot leave it half-written.
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut phase)
    }

    /// Bytes came from the client: an idle connection starts a request head.
    fn received(&self) {
        let started = self.update(|phase| match phase {
            Phase::Idle { .. } => {
                *phase = Phase::Head {
                    since: Instant::now(),
                };
                true
            }
            Phase::Head { .. } | Phase::Busy { .. } => false,
        });
        if started {
            self.changed.notify_one();
        }
    }

    /// A request head was parsed; the connection is busy until the returned
    /// guard is dropped.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.update(|phase| {
            *phase = match *phase {
                Phase::Busy { requests } => Phase::Busy {
                    requests: requests + 1,
                },
                Phase::Head { .. } | Phase::Idle { .. } => Phase::Busy { requests: 1 },
            }
        });
        self.changed.notify_one();
        InFlight(self.clone())
    }

    fn end(&self) {
        self.update(|phase| {
            if let Phase::Busy { requests } = *phase {
                *phase = if requests > 1 {
                    Phase::Busy {
                        requests: requests - 1,
                    }
                } else {
                    Phase::Idle {
                        since: Instant::now(),
                    }
                };
            }
        });
        self.changed.notify_one();
    }

    /// When the current phase runs out, and why; `None` while busy.
    fn deadline(&self) -> Option<(Instant, Expired)> {
        self.update(|phase| match *phase {
            Phase::Head { since } => Some((since + self.timeouts.header, Expired::Head)),
            Phase::Idle { since } => Some((since + self.timeouts.idle, Expired::Idle)),
            Phase::Busy { .. } => None,
        })
    }

    /// Resolves when the connection has waited too long for a request head,
    /// or has been idle too long.
    pub(super) async fn expired(&self) -> Expired {
        loop {
            // A change between reading the deadline and waiting is not lost:
            // `notify_one` stores a permit when nobody waits.
            match self.deadline() {
                Some((deadline, why)) if Instant::now() >= deadline => return why,
                Some((deadline, _)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline) => {}
                        () = self.changed.notified() => {}
                    }
                }
                None => self.changed.notified().await,
            }
        }
    }
}

/// Ends one request's busy time when dropped.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The accepted socket, telling [`Activity`] when bytes arrive.
#[derive(Debug)]
pub(super) struct WatchedIo {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl WatchedIo {
    pub(super) fn new(stream: TcpStream, activity: Arc<Activity>) -> Self {
        WatchedIo { stream, activity }
    }
}

impl AsyncRead for WatchedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.received();
        }
        polled
    }
}

impl AsyncWrite for WatchedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// The router, telling [`Activity`] when a request begins and when its
/// response has been written.
#[derive(Debug, Clone)]
pub(super) struct WatchedService {
    router: TowerToHyperService<Router>,
    activity: Arc<Activity>,
}

impl WatchedService {
    pub(super) fn new(router: TowerToHyperService<Router>, activity: Arc<Activity>) -> Self {
        WatchedService { router, activity }
    }
}

impl Service<Request<Incoming>> for WatchedService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        let answer = self.router.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| TrackedBody {
                body,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A response body that keeps its request in flight until hyper drops it.
#[derive(Debug)]
pub(super) struct TrackedBody {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity() -> Arc<Activity> {
        Activity::new(Timeouts {
            header: Duration::from_secs(2),
            idle: Duration::from_secs(10),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_must_send_a_head_within_the_header_timeout() {
        let activity = activity();
        let started = Instant::now();
        assert_eq!(activity.expired().await, Expired::Head);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_never_expires_and_idles_after() {
        let activity = activity();
        let in_flight = activity.begin();
        let waited = tokio::time::timeout(Duration::from_secs(3600), activity.expired()).await;
        assert!(waited.is_err(), "busy connections do not expire");
        drop(in_flight);
        let idle_from = Instant::now();
        assert_eq!(activity.expired().await, Expired::Idle);
        assert_eq!(idle_from.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_on_an_idle_connection_start_the_header_clock() {
        let activity = activity();
        drop(activity.begin());
        tokio::time::advance(Duration::from_secs(9)).await;
        activity.received();
        let head_from = Instant::now();
        assert_eq!(activity.expired().await, Expired::Head);
        assert_eq!(head_from.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_while_busy_or_in_a_head_change_nothing() {
        let activity = activity();
        let accepted = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        activity.received();
        assert_eq!(activity.expired().await, Expired::Head);
        assert_eq!(accepted.elapsed(), Duration::from_secs(2));
        let in_flight = activity.begin();
        activity.received();
        assert!(activity.deadline().is_none());
        drop(in_flight);
    }
}
