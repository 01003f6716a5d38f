//! What one connection is doing, and a watchdog that says when it has
//! waited too long.
//!
//! A connection is always in one [`Phase`]:
//!
//! ```text
//!  accepted ─► Waiting ── first byte ──► Head ── head parsed ──► Busy ── response written ──► Idle
//!                                         ▲                                                    │
//!                                         └──────────── first byte of the next request ────────┘
//! ```
//!
//! [`WatchedIo`] sees the bytes arrive, [`WatchedService`] sees requests begin
//! and their responses end (the response body is dropped once written or
//! abandoned). `Waiting` and `Head` together may last `header_timeout`, `Idle`
//! `idle_timeout`; `Busy` has no limit here (the routes bound their own work,
//! and a long-lived event stream is busy by design).
//!
//! A connection that is `Waiting` or `Idle` has no request in progress: at
//! the connection cap the one that has been so longest is closed to admit a
//! new one ([`Activity::idle_since`], [`Activity::evict`]).

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
    body::{Body, Bytes, HttpBody},
    extract::Request,
    response::Response,
};
use hyper::{
    body::{Frame, Incoming, SizeHint},
    service::Service,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::Notify,
    time::Instant,
};
use tokio_util::sync::CancellationToken;

/// The two limits the watchdog enforces.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    pub(super) header: Duration,
    pub(super) idle: Duration,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Accepted at `since`; nothing received yet.
    Waiting { since: Instant },
    /// Receiving a request head: since its first byte (a new connection:
    /// since it was accepted).
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
    /// Wakes whoever waits for the connection to begin a request.
    began: Notify,
    /// Cancelled when the connection is to be closed to make room.
    evicted: CancellationToken,
    timeouts: Timeouts,
}

impl Activity {
    /// A connection just accepted: its first request head is due.
    pub(super) fn new(timeouts: Timeouts) -> Arc<Self> {
        Arc::new(Activity {
            phase: Mutex::new(Phase::Waiting {
                since: Instant::now(),
            }),
            began: Notify::new(),
            evicted: CancellationToken::new(),
            timeouts,
        })
    }

    /// Since when the connection has had no request in progress and none
    /// begun (accepted and silent, or idle between requests); `None` while a
    /// request is being received or answered.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        self.update(|phase| match *phase {
            Phase::Waiting { since } | Phase::Idle { since } => Some(since),
            Phase::Head { .. } | Phase::Busy { .. } => None,
        })
    }

    /// Asks the connection to close (see [`Self::evicted`]).
    pub(super) fn evict(&self) {
        self.evicted.cancel();
    }

    /// Resolves once the connection has been asked to close to make room.
    pub(super) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    /// Resolves once a request is in progress (at once if one is).
    pub(super) async fn busy(&self) {
        loop {
            let began = self.began.notified();
            tokio::pin!(began);
            // Registered before the check, so a request that begins in
            // between still wakes us.
            began.as_mut().enable();
            if self.update(|phase| matches!(phase, Phase::Busy { .. })) {
                return;
            }
            began.await;
        }
    }

    fn update<T>(&self, change: impl FnOnce(&mut Phase) -> T) -> T {
        // The phase is plain data, always consistent; a panic elsewhere while
        // holding the lock cannot leave it half-written.
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut phase)
    }

    /// Bytes came from the client: an idle connection starts a request head.
    fn received(&self) {
        self.update(|phase| match *phase {
            Phase::Idle { .. } => {
                *phase = Phase::Head {
                    since: Instant::now(),
                };
            }
            // The header clock of a new connection runs from its acceptance.
            Phase::Waiting { since } => *phase = Phase::Head { since },
            Phase::Head { .. } | Phase::Busy { .. } => {}
        });
    }

    /// A request head was parsed; the connection is busy until the returned
    /// guard is dropped.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.update(|phase| {
            *phase = match *phase {
                Phase::Busy { requests } => Phase::Busy {
                    requests: requests + 1,
                },
                Phase::Waiting { .. } | Phase::Head { .. } | Phase::Idle { .. } => {
                    Phase::Busy { requests: 1 }
                }
            }
        });
        self.began.notify_waiters();
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
    }

    /// When the current phase runs out, and why; `None` while busy.
    fn deadline(&self) -> Option<(Instant, Expired)> {
        self.update(|phase| match *phase {
            Phase::Waiting { since } | Phase::Head { since } => {
                Some((since + self.timeouts.header, Expired::Head))
            }
            Phase::Idle { since } => Some((since + self.timeouts.idle, Expired::Idle)),
            Phase::Busy { .. } => None,
        })
    }

    /// Resolves when the connection has waited too long for a request head,
    /// or has been idle too long.
    ///
    /// Nothing wakes the watchdog when the phase changes (a wake per change
    /// would poll the connection again per change; docs/DECISIONS.md #133):
    /// it looks again at the phase's deadline, and at least every `step`
    /// (the shorter timeout). No change can bring a deadline closer than
    /// that: a head begun at `t` runs out at `t + header`, an idle time begun
    /// at `t` at `t + idle`, both no earlier than `t + step`. So the
    /// watchdog is never late, and a busy or idle connection costs it one
    /// timer every `step`.
    pub(super) async fn expired(&self) -> Expired {
        let step = self.timeouts.header.min(self.timeouts.idle).max(MIN_STEP);
        loop {
            let now = Instant::now();
            let wake = match self.deadline() {
                Some((deadline, why)) if now >= deadline => return why,
                Some((deadline, _)) => deadline.min(now + step),
                None => now + step,
            };
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// The watchdog's shortest look-again interval (a zero timeout would spin it).
const MIN_STEP: Duration = Duration::from_millis(1);

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

/// The server's app, telling [`Activity`] when a request begins and when
/// its response has been written.
#[derive(Debug, Clone)]
pub(super) struct WatchedService<F> {
    app: super::App<F>,
    activity: Arc<Activity>,
    /// Handed to every request as its [`Peer`].
    peer: Peer,
}

impl<F> WatchedService<F> {
    pub(super) fn new(app: super::App<F>, activity: Arc<Activity>, peer: Peer) -> Self {
        WatchedService {
            app,
            activity,
            peer,
        }
    }
}

/// The address of the client that sent a request (a request extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Peer(pub(crate) std::net::IpAddr);

impl<F: super::Front> Service<Request<Incoming>> for WatchedService<F> {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        request.extensions_mut().insert(self.peer);
        let request = request.map(Body::new);
        let tracked = |response: Response| {
            response.map(|body| TrackedBody {
                body,
                _in_flight: in_flight,
            })
        };
        if self.app.front.takes(&request) {
            // The front's future is made in the box, at the first poll: made
            // here, it would be copied whole into it (a call's is several KB).
            let front = self.app.front.clone();
            return crate::boxed::in_place(move || async move {
                Ok(tracked(front.serve(request).await))
            });
        }
        let routed = self.app.router.call(request);
        crate::boxed::in_place(move || async move { Ok(tracked(routed.await?)) })
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

    /// The watchdog is told of no change: one already waiting must still
    /// see each new deadline, neither early nor late.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_watchdog_sees_every_change_on_time() {
        let activity = activity();
        drop(activity.begin());
        let idle_from = Instant::now();
        let watchdog = tokio::spawn({
            let activity = activity.clone();
            async move { (activity.expired().await, Instant::now()) }
        });
        // A head begun while it waits out the idle time (10 s) is due 2 s
        // later, before the idle time would have ended.
        tokio::time::advance(Duration::from_secs(1)).await;
        activity.received();
        let (why, at) = watchdog.await.unwrap();
        assert_eq!(why, Expired::Head);
        assert_eq!(at - idle_from, Duration::from_secs(3));

        // Busy for an hour while it waits, then idle: due 10 s after.
        let activity = self::activity();
        let in_flight = activity.begin();
        let watchdog = tokio::spawn({
            let activity = activity.clone();
            async move { (activity.expired().await, Instant::now()) }
        });
        tokio::time::advance(Duration::from_secs(3600)).await;
        drop(in_flight);
        let idle_from = Instant::now();
        let (why, at) = watchdog.await.unwrap();
        assert_eq!(why, Expired::Idle);
        assert_eq!(at - idle_from, Duration::from_secs(10));
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

    #[tokio::test(start_paused = true)]
    async fn only_a_connection_without_a_request_in_progress_is_idle() {
        let activity = activity();
        let accepted = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(activity.idle_since(), Some(accepted), "accepted and silent");
        activity.received();
        assert_eq!(activity.idle_since(), None, "a head on its way");
        let in_flight = activity.begin();
        assert_eq!(activity.idle_since(), None, "answering");
        drop(in_flight);
        assert_eq!(
            activity.idle_since(),
            Some(Instant::now()),
            "idle from the answer"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_a_request_ends_when_one_begins() {
        let activity = activity();
        let waiting = tokio::spawn({
            let activity = activity.clone();
            async move { activity.busy().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        let in_flight = activity.begin();
        waiting.await.unwrap();
        // Already busy: at once.
        activity.busy().await;
        drop(in_flight);
    }
}
