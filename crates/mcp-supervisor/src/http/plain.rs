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
    fmt, io,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use hyper::{body::Incoming, client::conn::http1};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_client::StreamableHttpError;

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
        request
            .headers_mut()
            .entry(http::header::HOST)
            .or_insert_with(|| to.host.clone());
        let response = loop {
            let (mut sender, reused) = match to.pool.checkout() {
                Some(sender) => (sender, true),
                None => (self.connect(to).await.map_err(into_http)?, false),
            };
            // A reused connection is ready once its last answer was read
            // (at once, in all but a race with its task); one that closed
            // meanwhile is dropped for the next.
            if sender.ready().await.is_err() && reused {
                continue;
            }
            match sender.try_send_request(request).await {
                Ok(response) => break response.map(|body| (body, sender)),
                Err(mut error) => match error.take_message() {
                    // Closed before the request was written: nothing was
                    // sent, so it goes again, on another connection.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(into_http(LaneError::Send(error.into_error()))),
                },
            }
        };
        let (parts, (body, sender)) = response.into_parts();
        let body = Returning {
            body,
            back: Some((sender, to.pool.clone(), self.idle_timeout)),
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
    async fn connect(&self, to: &LaneTarget) -> Result<Sender, LaneError> {
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
        crate::beside::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "plain-HTTP lane connection ended");
            }
        });
        Ok(sender)
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
        let path = uri.path_and_query()?.as_str().parse().ok()?;
        Some(LaneTarget {
            path,
            host,
            address,
            pool,
        })
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
    sender: Sender,
    /// Used since the sweeper last looked.
    used: bool,
}

impl LanePool {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The most recently used idle connection not known to be closed.
    fn checkout(&self) -> Option<Sender> {
        let mut idle = self.idle();
        while let Some(Idle { sender, .. }) = idle.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    /// Takes `sender` back, its answer read; starts the sweeper if none runs.
    /// Outside a runtime (an answer dropped after its runtime ended) there
    /// is no sweeper to run, and nothing to reuse the connection: it is
    /// closed.
    fn put(self: &Arc<Self>, sender: Sender, idle_timeout: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if sender.is_closed() {
            return;
        }
        self.idle().push(Idle { sender, used: true });
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
        idle.retain_mut(|entry| std::mem::take(&mut entry.used) && !entry.sender.is_closed());
        if idle.is_empty() {
            // Under the lock: a `put` after this starts a new sweeper.
            pool.sweeping.store(false, Ordering::Release);
            return;
        }
    }
}

/// An answer's body that gives its connection back to its endpoint's pool
/// once it has been read to its end; a body dropped before that closes it
/// (what is left of the answer would still be on it).
struct Returning {
    body: Incoming,
    back: Option<(Sender, Arc<LanePool>, Duration)>,
}

impl Returning {
    fn give_back(&mut self) {
        if let Some((sender, pool, idle_timeout)) = self.back.take() {
            pool.put(sender, idle_timeout);
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
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.give_back(),
            Poll::Ready(Some(Err(_))) => self.back = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        // An answer without a body is read without polling it.
        if self.body.is_end_stream() {
            self.give_back();
        }
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
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(30);

    /// Sends the request `build` makes for a loopback server's URL on a
    /// lane; the server reads the request as far as its head (and whatever
    /// came with it), then answers `answer`. Returns the URL, the answer and
    /// the request as it arrived, each within 10 s (a test fails, never
    /// hangs).
    async fn exchange(
        answer: &'static str,
        build: impl FnOnce(&str) -> reqwest::RequestBuilder,
    ) -> (String, Answered, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp?key=1", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buffer = [0; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buffer).await.unwrap();
                assert!(n > 0, "the request ended before its head did");
                head.extend_from_slice(&buffer[..n]);
            }
            socket.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8(head).unwrap()
        });
        let lane = PlainLane::unless_proxied(|_| None, TIMEOUT, TIMEOUT).unwrap();
        let request = build(&url).build().unwrap();
        let bound = Duration::from_secs(10);
        let to = LaneTarget::new(&reqwest::Url::parse(&url).unwrap(), Arc::default()).unwrap();
        let sent = lane.send_built(request, &to);
        let response = tokio::time::timeout(bound, sent).await.expect("answered");
        let head = tokio::time::timeout(bound, served).await.expect("served");
        (url, response.unwrap(), head.unwrap().to_ascii_lowercase())
    }

    /// An answer's body, read to its end.
    async fn body_of(response: Answered) -> Vec<u8> {
        use http_body_util::BodyExt;
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn an_answer_comes_back_with_its_head_and_body() {
        let (_, response, head) = exchange(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            |url| reqwest::Client::new().get(url).header("mcp-session-id", "s1"),
        )
        .await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(body_of(response).await, b"{}");
        assert!(head.starts_with("get /mcp?key=1 http/1.1\r\n"), "{head}");
        assert!(head.contains("\r\nhost: 127.0.0.1:"), "{head}");
        assert_eq!(head.matches("\r\nhost:").count(), 1, "{head}");
        assert!(head.contains("\r\nmcp-session-id: s1\r\n"), "{head}");
        // No body: nothing says one follows.
        assert!(!head.contains("transfer-encoding"), "{head}");
    }

    #[tokio::test]
    async fn a_redirect_is_an_answer_not_followed() {
        let (_, response, head) = exchange(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:9/elsewhere\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            |url| reqwest::Client::new().post(url).body("{}"),
        )
        .await;
        assert_eq!(response.status(), 307);
        assert!(head.starts_with("post /mcp?key=1 http/1.1\r\n"), "{head}");
        assert!(head.contains("\r\ncontent-length: 2\r\n"), "{head}");
    }

    /// A loopback server answering every request on a connection with
    /// `body` (keep-alive), closing each connection after `per_connection`
    /// answers; counts the connections it accepted, and those the lane
    /// closed (read to their end without a request pending).
    struct Counting {
        url: String,
        accepted: Arc<std::sync::atomic::AtomicUsize>,
        closed_by_lane: Arc<std::sync::atomic::AtomicUsize>,
    }

    async fn counting(body: &'static str, per_connection: usize) -> Counting {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed_by_lane = Arc::new(AtomicUsize::new(0));
        let (counted, closed) = (accepted.clone(), closed_by_lane.clone());
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                let closed = closed.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0; 1024];
                    for _ in 0..per_connection {
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match socket.read(&mut buffer).await {
                                Ok(0) | Err(_) => {
                                    closed.fetch_add(1, Ordering::SeqCst);
                                    return;
                                }
                                Ok(n) => head.extend_from_slice(&buffer[..n]),
                            }
                        }
                        head.clear();
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        socket.write_all(answer.as_bytes()).await.unwrap();
                    }
                    // Closed by the server, as an upstream ends an idle connection.
                });
            }
        });
        Counting {
            url,
            accepted,
            closed_by_lane,
        }
    }

    /// GETs `url` on `lane` and `to`, reading the answer's body to its end
    /// or (`read: false`) not at all; bounded to 10 s.
    async fn get(lane: &PlainLane, to: &LaneTarget, url: &str, read: bool) -> String {
        let request = reqwest::Client::new().get(url).build().unwrap();
        let bound = Duration::from_secs(10);
        let response = tokio::time::timeout(bound, lane.send_built(request, to))
            .await
            .expect("answered")
            .unwrap();
        assert_eq!(response.status(), 200);
        if !read {
            return String::new();
        }
        let body = tokio::time::timeout(bound, body_of(response))
            .await
            .expect("read");
        String::from_utf8(body).unwrap()
    }

    fn lane_for(url: &str, idle: Duration) -> (PlainLane, LaneTarget) {
        let lane = PlainLane::unless_proxied(|_| None, TIMEOUT, idle).unwrap();
        let to = LaneTarget::new(&reqwest::Url::parse(url).unwrap(), Arc::default()).unwrap();
        (lane, to)
    }

    #[tokio::test]
    async fn an_endpoints_requests_reuse_one_connection_once_each_answer_is_read() {
        let server = counting("hello", usize::MAX).await;
        let (lane, to) = lane_for(&server.url, TIMEOUT);
        for _ in 0..5 {
            assert_eq!(get(&lane, &to, &server.url, true).await, "hello");
        }
        assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
        // An answer not read to its end keeps its connection out of the
        // pool: the next request opens another.
        get(&lane, &to, &server.url, false).await;
        assert_eq!(get(&lane, &to, &server.url, true).await, "hello");
        assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_while_idle_is_not_used_again() {
        // One answer per connection, then the server closes it.
        let server = counting("once", 1).await;
        let (lane, to) = lane_for(&server.url, TIMEOUT);
        for round in 1..=3 {
            assert_eq!(get(&lane, &to, &server.url, true).await, "once");
            assert_eq!(server.accepted.load(Ordering::SeqCst), round);
            // Let the lane's connection task see the close.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The same, without waiting: a request on a connection that closed
        // before it was written goes again on a new one.
        for _ in 0..3 {
            assert_eq!(get(&lane, &to, &server.url, true).await, "once");
        }
    }

    #[tokio::test]
    async fn idle_connections_are_closed_after_the_idle_timeout() {
        let server = counting("idle", usize::MAX).await;
        let (lane, to) = lane_for(&server.url, Duration::from_millis(50));
        assert_eq!(get(&lane, &to, &server.url, true).await, "idle");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while server.closed_by_lane.load(Ordering::SeqCst) == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the idle connection is still open"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Its pool starts over: the next request connects anew.
        assert_eq!(get(&lane, &to, &server.url, true).await, "idle");
        assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
    }

    /// An answer without a body, dropped on a thread outside any runtime,
    /// closes its connection quietly (no sweeper to start there, no panic).
    #[test]
    fn an_answer_dropped_outside_a_runtime_closes_its_connection() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let response = runtime.block_on(async {
            let server = counting("", usize::MAX).await;
            let (lane, to) = lane_for(&server.url, TIMEOUT);
            let request = reqwest::Client::new().get(&server.url).build().unwrap();
            lane.send_built(request, &to).await.unwrap()
        });
        assert_eq!(response.body().size_hint().exact(), Some(0));
        let dropped = std::thread::spawn(move || drop(response)).join();
        assert!(dropped.is_ok(), "dropping the answer panicked");
    }

    #[test]
    fn a_lanes_host_header_is_the_one_hypers_client_would_write() {
        let host = |url: &str| {
            LaneTarget::new(&reqwest::Url::parse(url).unwrap(), Arc::default())
                .map(|to| to.host.to_str().unwrap().to_owned())
        };
        assert_eq!(
            host("http://127.0.0.1:7410/mcp").as_deref(),
            Some("127.0.0.1:7410")
        );
        assert_eq!(
            host("http://Example.com:80/mcp").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            host("http://example.com/mcp?k=1").as_deref(),
            Some("example.com")
        );
        assert_eq!(host("http://[::1]:8080/").as_deref(), Some("[::1]:8080"));
        let to = LaneTarget::new(
            &reqwest::Url::parse("http://[::1]/m?k=1").unwrap(),
            Arc::default(),
        )
        .unwrap();
        assert_eq!(to.address, "[::1]:80");
        assert_eq!(to.path, "/m?k=1");
        assert_eq!(host("https://example.com/mcp"), None);
    }

    #[test]
    fn a_proxy_in_the_environment_turns_the_lane_off() {
        let none = |_: &str| None;
        assert!(PlainLane::unless_proxied(none, TIMEOUT, TIMEOUT).is_some());
        for name in PROXY_VARIABLES {
            let set = |asked: &str| (asked == name).then(|| "http://proxy:3128".into());
            assert!(
                PlainLane::unless_proxied(set, TIMEOUT, TIMEOUT).is_none(),
                "{name}"
            );
        }
        let empty = |_: &str| Some(std::ffi::OsString::new());
        assert!(PlainLane::unless_proxied(empty, TIMEOUT, TIMEOUT).is_some());
        let https_only = |asked: &str| (asked == "HTTPS_PROXY").then(|| "http://proxy:3128".into());
        assert!(PlainLane::unless_proxied(https_only, TIMEOUT, TIMEOUT).is_some());
    }
}
