//! The plain-HTTP lane: requests to an `http://` upstream go straight to
//! hyper's HTTP/1 connections instead of through reqwest.
//!
//! reqwest stacks a redirect layer, a retry layer and a proxy matcher over
//! hyper's pooled client, and parses the request's URL twice on the way
//! (the redirect policy asks for it whatever the policy is): about an eighth
//! of a gateway call's instructions (docs/DECISIONS.md #117). hyper-util's
//! pooled client under it then costs a call about as much again: a pool
//! keyed by origin (hashed on every checkout and return), a task spawned per
//! request to return its connection once the answer is read, and the URL
//! rewritten per request (docs/DECISIONS.md #124). This lane keeps what the
//! connection's requests rely on (keep-alive connections reused, `TCP_NODELAY`,
//! the connect timeout, idle connections closed after the idle timeout, a
//! request on a reused connection that closed before it was written sent
//! again on a new one, no redirects followed) with a pool of its own per
//! origin, held where the origin's reuse verdict is (so found without a
//! lookup per request), and hands the answer back as an [`Answered`], as the
//! reqwest lane does, so everything after the send is shared. `https://`
//! upstreams, origins where reuse stalls, and every request while a proxy
//! is configured in the environment keep reqwest.

use std::{
    fmt,
    future::Future,
    io,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures::task::AtomicWaker;
use http_body::{Body as _, Frame, SizeHint};
use hyper::{body::Incoming, client::conn::http1};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::drain::Draining;

type HttpError = StreamableHttpError<reqwest::Error>;

/// An upstream's answer, from either lane: its head, and its body as
/// reqwest's (whose read errors are reqwest's). Not a `reqwest::Response`:
/// making one of hyper's answer cost the lane a URL, two boxes and an
/// extension map per request, for nothing read after.
pub(crate) type Answered = http::Response<reqwest::Body>;
type Sender = http1::SendRequest<reqwest::Body>;

/// The environment variables reqwest takes an `http://` request's proxy from.
const PROXY_VARIABLES: [&str; 4] = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

/// How `http://` upstreams are reached: the settings every endpoint's pool
/// shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainLane {
    connect_timeout: Duration,
    idle_timeout: Duration,
}

impl PlainLane {
    /// The lane, set up as the reqwest client it stands in for (`TCP_NODELAY`,
    /// a 30 s connect timeout, idle connections kept 60 s); `None` when a
    /// proxy for `http://` requests is configured in the environment, which
    /// reqwest honours and this lane would not.
    pub(crate) fn new(connect_timeout: Duration, idle_timeout: Duration) -> Option<Self> {
        Self::unless_proxied(|name| std::env::var_os(name), connect_timeout, idle_timeout)
    }

    fn unless_proxied(
        variable: impl Fn(&str) -> Option<std::ffi::OsString>,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Option<Self> {
        let proxied = PROXY_VARIABLES
            .iter()
            .any(|name| variable(name).is_some_and(|value| !value.is_empty()));
        (!proxied).then_some(PlainLane {
            connect_timeout,
            idle_timeout,
        })
    }

    /// Sends a request with `method`, `headers` and `body` to `to` (made
    /// from the `http://` URL `url`) and returns its answer's head with the
    /// body still streaming, as reqwest's.
    pub(crate) async fn send(
        &self,
        method: http::Method,
        headers: http::HeaderMap,
        body: Option<Vec<u8>>,
        to: &LaneTarget,
    ) -> Result<Answered, HttpError> {
        let mut request = http::Request::new(reqwest::Body::from(body.unwrap_or_default()));
        *request.method_mut() = method;
        *request.uri_mut() = to.path.clone();
        *request.headers_mut() = headers;
        // Looked for before it is added: `HeaderMap::entry` makes room for
        // one more first, growing a copied map even when it holds the key.
        if !request.headers().contains_key(http::header::HOST) {
            request
                .headers_mut()
                .insert(http::header::HOST, to.host.clone());
        }
        let response = loop {
            let (Connection { mut sender, left }, reused) = match to.pool.checkout() {
                Some(connection) => (connection, true),
                None => (self.connect(to).await.map_err(into_http)?, false),
            };
            // A reused connection is ready once its last answer was read
            // (at once, in all but a race with its task); one that closed
            // meanwhile is dropped for the next.
            if sender.ready().await.is_err() && reused {
                continue;
            }
            match sender.try_send_request(request).await {
                Ok(response) => break response.map(|body| (body, Connection { sender, left })),
                Err(mut error) => match error.take_message() {
                    // Closed before the request was written: nothing was
                    // sent, so it goes again, on another connection.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(into_http(LaneError::Send(error.into_error()))),
                },
            }
        };
        let (parts, (body, connection)) = response.into_parts();
        let body = Returning {
            body: Some(body),
            back: Some(Back {
                connection,
                pool: to.pool.clone(),
                idle_timeout: self.idle_timeout,
            }),
        };
        Ok(http::Response::from_parts(parts, reqwest::Body::wrap(body)))
    }

    /// Sends what reqwest's builder made (tests build their requests so).
    #[cfg(test)]
    pub(crate) async fn send_built(
        &self,
        request: reqwest::Request,
        to: &LaneTarget,
    ) -> Result<Answered, HttpError> {
        let body = request
            .body()
            .and_then(reqwest::Body::as_bytes)
            .map(<[u8]>::to_vec);
        let (method, headers) = (request.method().clone(), request.headers().clone());
        self.send(method, headers, body, to).await
    }

    /// A new connection to `to`, its task spawned.
    async fn connect(&self, to: &LaneTarget) -> Result<Connection, LaneError> {
        let connected = tokio::time::timeout(
            self.connect_timeout,
            tokio::net::TcpStream::connect(to.address.as_str()),
        )
        .await;
        let stream = match connected {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return Err(LaneError::Connect(error)),
            Err(_) => {
                return Err(LaneError::Connect(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connect timed out",
                )));
            }
        };
        stream.set_nodelay(true).map_err(LaneError::Connect)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(LaneError::Send)?;
        // It ends when its sender is dropped (idle or broken off) or the
        // upstream closes it; its failures reach the request as its own.
        let left = Arc::new(Left::default());
        crate::beside::spawn(Driver {
            connection,
            left: left.clone(),
            draining: None,
        });
        Ok(Connection { sender, left })
    }
}

/// Where a lane's requests go, worked out once per endpoint: its URL as
/// hyper's `Uri` in the form written on the request line, the `Host`
/// header, the address to connect to, and its origin's idle connections.
#[derive(Debug, Clone)]
pub(crate) struct LaneTarget {
    /// The path and query, as HTTP/1 writes them to an origin.
    path: http::Uri,
    host: http::HeaderValue,
    /// `host:port`, as the socket address resolver takes it.
    address: String,
    pool: Arc<LanePool>,
}

impl LaneTarget {
    /// For an `http://` URL whose origin's idle connections are `pool`;
    /// `None` for any other URL, or one hyper's `Uri` cannot take (reqwest
    /// sends those).
    pub(crate) fn new(url: &reqwest::Url, pool: Arc<LanePool>) -> Option<Self> {
        let (uri, host, address) = Self::origin(url)?;
        let path = uri.path_and_query()?.as_str().parse().ok()?;
        Some(LaneTarget {
            path,
            host,
            address,
            pool,
        })
    }

    /// The `Host` header of a request to the `http://` URL `url` on the
    /// lane (`None` for any other URL): a sender that keeps its headers
    /// made puts it among them, so a request finds it there instead of
    /// growing its copy of them by one.
    pub(crate) fn host_of(url: &reqwest::Url) -> Option<http::HeaderValue> {
        Self::origin(url).map(|(_, host, _)| host)
    }

    /// `url` as hyper's `Uri`, its `Host` header and the address to
    /// connect to; `None` for a URL that is not `http://`.
    fn origin(url: &reqwest::Url) -> Option<(http::Uri, http::HeaderValue, String)> {
        if url.scheme() != "http" {
            return None;
        }
        let uri: http::Uri = url.as_str().parse().ok()?;
        // As hyper's client writes it: the host, and the port unless it
        // is http's own.
        let host = uri.host()?;
        let port = uri.port_u16().unwrap_or(80);
        let address = format!("{host}:{port}");
        let host = if port == 80 {
            host.to_owned()
        } else {
            address.clone()
        };
        let host = http::HeaderValue::from_str(&host).ok()?;
        Some((uri, host, address))
    }
}

/// An origin's idle connections on the lane, the most recently used last.
#[derive(Default)]
pub(crate) struct LanePool {
    idle: Mutex<Vec<Idle>>,
    /// Whether a sweeper task is closing its idle connections as they age.
    sweeping: AtomicBool,
}

impl fmt::Debug for LanePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanePool").finish_non_exhaustive()
    }
}

struct Idle {
    connection: Connection,
    /// Used since the sweeper last looked.
    used: bool,
}

/// A connection of the lane: where its requests go, and where an answer's
/// body left before its end goes to be read by the connection's task.
struct Connection {
    sender: Sender,
    left: Arc<Left>,
}

impl LanePool {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The most recently used idle connection not known to be closed.
    fn checkout(&self) -> Option<Connection> {
        let mut idle = self.idle();
        while let Some(Idle { connection, .. }) = idle.pop() {
            if !connection.sender.is_closed() {
                return Some(connection);
            }
        }
        None
    }

    /// Takes `sender` back, its answer read; starts the sweeper if none runs.
    /// Outside a runtime (an answer dropped after its runtime ended) there
    /// is no sweeper to run, and nothing to reuse the connection: it is
    /// closed.
    fn put(self: &Arc<Self>, connection: Connection, idle_timeout: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if connection.sender.is_closed() {
            return;
        }
        self.idle().push(Idle {
            connection,
            used: true,
        });
        if !self.sweeping.swap(true, Ordering::AcqRel) {
            runtime.spawn(sweep(Arc::downgrade(self), idle_timeout));
        }
    }
}

/// Closes the pool's connections left unused for an idle timeout (between
/// one and two of them, checked once per timeout); ends when the pool has
/// nothing idle left, or is gone.
async fn sweep(pool: std::sync::Weak<LanePool>, idle_timeout: Duration) {
    loop {
        tokio::time::sleep(idle_timeout).await;
        let Some(pool) = pool.upgrade() else { return };
        let mut idle = pool.idle();
        idle.retain_mut(|entry| {
            std::mem::take(&mut entry.used) && !entry.connection.sender.is_closed()
        });
        if idle.is_empty() {
            // Under the lock: a `put` after this starts a new sweeper.
            pool.sweeping.store(false, Ordering::Release);
            return;
        }
    }
}

/// An answer's body that gives its connection back to its endpoint's pool
/// once it has been read to its end. One left before that is handed to the
/// connection's task, which reads the rest (`super::drain`) and then gives
/// the connection back, or closes it.
struct Returning {
    /// `None` once handed over.
    body: Option<Incoming>,
    back: Option<Back>,
}

/// Where a connection goes back once its answer is read.
struct Back {
    connection: Connection,
    pool: Arc<LanePool>,
    idle_timeout: Duration,
}

impl Back {
    fn give(self) {
        self.pool.put(self.connection, self.idle_timeout);
    }
}

impl Returning {
    fn give_back(&mut self) {
        if let Some(back) = self.back.take() {
            back.give();
        }
    }
}

impl http_body::Body for Returning {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.give_back(),
            Poll::Ready(Some(Err(_))) => self.back = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Incoming::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Incoming::size_hint)
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        let (Some(body), Some(back)) = (self.body.take(), self.back.take()) else {
            return;
        };
        // An answer without a body is read without polling it.
        if body.is_end_stream() {
            back.give();
        } else {
            back.connection.left.clone().hand_over(body, back);
        }
    }
}

/// Where an answer's body left before its end waits for its connection's
/// task to read the rest.
#[derive(Default)]
struct Left {
    /// A body waits in `slot`: looked at without the lock.
    handed: AtomicBool,
    slot: Mutex<Slot>,
    /// The connection's task.
    driver: AtomicWaker,
}

#[derive(Default)]
enum Slot {
    #[default]
    Empty,
    Handed(Incoming, Back),
    /// The connection's task ended: a body handed over now is dropped (its
    /// `Back` holds this very slot: kept here it would never be freed).
    Gone,
}

impl Left {
    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hand_over(&self, body: Incoming, back: Back) {
        {
            let mut slot = self.slot();
            // Dropped after the lock is.
            if matches!(*slot, Slot::Gone) {
                return;
            }
            *slot = Slot::Handed(body, back);
        }
        self.handed.store(true, Ordering::Release);
        self.driver.wake();
    }

    fn take(&self) -> Option<(Incoming, Back)> {
        if !self.handed.swap(false, Ordering::AcqRel) {
            return None;
        }
        match std::mem::take(&mut *self.slot()) {
            Slot::Handed(body, back) => Some((body, back)),
            Slot::Empty | Slot::Gone => None,
        }
    }

    /// The connection's task is over: nothing handed over waits any more.
    fn close(&self) {
        let left = std::mem::replace(&mut *self.slot(), Slot::Gone);
        drop(left);
    }
}

impl Drop for Driver {
    /// Ended or dropped with its runtime, it frees a body handed over.
    fn drop(&mut self) {
        self.left.close();
    }
}

/// A lane connection's task: drives the connection, and reads an answer's
/// body left before its end (`super::drain`), giving the connection back
/// once it is read. It ends when the connection does: its sender dropped
/// (idle, broken off, a left body cut off) or the upstream closing it.
struct Driver {
    connection: http1::Connection<TokioIo<tokio::net::TcpStream>, reqwest::Body>,
    left: Arc<Left>,
    draining: Option<(Draining<Incoming>, Back)>,
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        // The connection first: what it reads is what the left body waits for.
        if let Poll::Ready(ended) = Pin::new(&mut this.connection).poll(cx) {
            if let Err(error) = ended {
                tracing::debug!(%error, "plain-HTTP lane connection ended");
            }
            // What is left is freed as the ended task is dropped (`Drop`).
            return Poll::Ready(());
        }
        // Registered before looking: a body handed over in between is seen
        // now or wakes the task.
        this.left.driver.register(cx.waker());
        if this.draining.is_none() {
            this.draining = this
                .left
                .take()
                .map(|(body, back)| (Draining::new(body), back));
        }
        if let Some((draining, _)) = &mut this.draining
            && let Poll::Ready(read) = draining.poll_end(cx)
            && let Some((_, back)) = this.draining.take()
        {
            // Read to its end, the connection takes the next request; cut
            // off, its sender is dropped and the connection closes.
            if read {
                back.give();
            }
        }
        Poll::Pending
    }
}

/// Why a send on the lane failed.
#[derive(Debug)]
pub(crate) enum LaneError {
    /// No connection was made: nothing was sent.
    Connect(io::Error),
    /// The connection failed the request.
    Send(hyper::Error),
}

impl fmt::Display for LaneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaneError::Connect(_) => f.write_str("could not connect"),
            LaneError::Send(_) => f.write_str("HTTP request failed"),
        }
    }
}

impl std::error::Error for LaneError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LaneError::Connect(error) => Some(error),
            LaneError::Send(error) => Some(error),
        }
    }
}

impl LaneError {
    /// Whether no connection was made.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, LaneError::Connect(_))
    }

    /// The socket error under it, if any.
    pub(crate) fn socket_error(&self) -> Option<&io::Error> {
        let mut source = std::error::Error::source(self);
        while let Some(node) = source {
            if let Some(io) = node.downcast_ref::<io::Error>() {
                return Some(io);
            }
            source = node.source();
        }
        None
    }
}

/// A failed send, as an I/O error carrying the lane's error (the classifier
/// reads whether the connection was ever made from it); its kind is the
/// underlying socket error's, when there is one.
fn into_http(error: LaneError) -> HttpError {
    let kind = error
        .socket_error()
        .map_or(io::ErrorKind::Other, io::Error::kind);
    StreamableHttpError::Io(io::Error::new(kind, error))
}

#[cfg(test)]
mod tests;
