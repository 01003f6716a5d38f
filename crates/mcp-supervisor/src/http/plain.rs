//! The plain-HTTP lane: requests to an `http://` upstream go straight to
//! hyper's pooled client instead of through reqwest.
//!
//! reqwest stacks a redirect layer, a retry layer and a proxy matcher over
//! the same hyper client, and parses the request's URL twice on the way (the
//! redirect policy asks for it whatever the policy is): about an eighth of a
//! gateway call's instructions (docs/DECISIONS.md #117). This lane keeps what
//! the connection's requests rely on (pooled keep-alive, `TCP_NODELAY`, the
//! connect timeout, no redirects followed) and hands the answer back as a
//! `reqwest::Response`, so everything after the send is shared with the
//! reqwest lane. `https://` upstreams, origins where reuse stalls, and every
//! request while a proxy is configured in the environment keep reqwest.

use std::{io, time::Duration};

use hyper_util::{
    client::legacy::{Client, Error as LaneError, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};
use rmcp::transport::streamable_http_client::StreamableHttpError;

type HttpError = StreamableHttpError<reqwest::Error>;

/// The environment variables reqwest takes an `http://` request's proxy from.
const PROXY_VARIABLES: [&str; 4] = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

/// hyper's pooled client for `http://` upstreams.
#[derive(Clone)]
pub(crate) struct PlainLane(Client<HttpConnector, reqwest::Body>);

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
        if proxied {
            return None;
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(connect_timeout));
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(idle_timeout)
            .build(connector);
        Some(PlainLane(client))
    }

    /// Sends `request` (to the `http://` URL `to` was made from) and
    /// returns its answer's head with the body still streaming.
    pub(crate) async fn send(
        &self,
        request: reqwest::Request,
        to: &LaneTarget,
    ) -> Result<reqwest::Response, HttpError> {
        let url = request.url().clone();
        let request = hypers(request, to);
        let mut response = self.0.request(request).await.map_err(lane_error)?;
        // reqwest's conversion takes the answer's URL from its extensions,
        // and parses a placeholder URL for each answer without one (about
        // 3,500 instructions, a fiftieth of a call).
        response.extensions_mut().extend(url_extension(url));
        Ok(reqwest::Response::from(response.map(reqwest::Body::wrap)))
    }
}

/// Where a lane's requests go, worked out once per endpoint: its URL as
/// hyper's `Uri` (reqwest's own conversion parses the URL's text on every
/// request), and the `Host` header hyper's client would make of it on every
/// request (a format and an allocation each time).
#[derive(Debug, Clone)]
pub(crate) struct LaneTarget {
    uri: http::Uri,
    host: http::HeaderValue,
}

impl LaneTarget {
    /// For an `http://` URL; `None` for any other, or one hyper's `Uri`
    /// cannot take (reqwest sends those).
    pub(crate) fn new(url: &reqwest::Url) -> Option<Self> {
        if url.scheme() != "http" {
            return None;
        }
        let uri: http::Uri = url.as_str().parse().ok()?;
        // As hyper's client writes it: the host, and the port unless it
        // is http's own.
        let host = uri.host()?;
        let host = match uri.port_u16() {
            Some(port) if port != 80 => format!("{host}:{port}"),
            _ => host.to_owned(),
        };
        let host = http::HeaderValue::from_str(&host).ok()?;
        Some(LaneTarget { uri, host })
    }
}

/// `request` as hyper's, for `to`. reqwest's request extensions stay
/// behind: they are reqwest's own, and its builder adds none to ours.
fn hypers(mut request: reqwest::Request, to: &LaneTarget) -> http::Request<reqwest::Body> {
    // What reqwest sends for a request without a body.
    let body = request
        .body_mut()
        .take()
        .unwrap_or_else(|| bytes::Bytes::new().into());
    let mut sent = http::Request::new(body);
    *sent.method_mut() = request.method().clone();
    *sent.uri_mut() = to.uri.clone();
    *sent.version_mut() = request.version();
    *sent.headers_mut() = std::mem::take(request.headers_mut());
    sent.headers_mut()
        .entry(http::header::HOST)
        .or_insert_with(|| to.host.clone());
    sent
}

/// The extension that tells reqwest a response's URL (its type is private
/// to reqwest; its builder extension sets it).
fn url_extension(url: reqwest::Url) -> http::Extensions {
    use reqwest::ResponseBuilderExt;
    let mut builder = http::response::Builder::new().url(url);
    builder
        .extensions_mut()
        .map(std::mem::take)
        .unwrap_or_default()
}

/// A failed send, as an I/O error carrying hyper's error (the classifier
/// reads whether the connection was ever made from it); its kind is the
/// underlying socket error's, when there is one.
fn lane_error(error: LaneError) -> HttpError {
    let kind = socket_error(&error).map_or(io::ErrorKind::Other, io::Error::kind);
    StreamableHttpError::Io(io::Error::new(kind, error))
}

/// The socket error under a lane error, if any.
pub(crate) fn socket_error(error: &LaneError) -> Option<&io::Error> {
    let mut source = std::error::Error::source(error);
    while let Some(node) = source {
        if let Some(io) = node.downcast_ref::<io::Error>() {
            return Some(io);
        }
        source = node.source();
    }
    None
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
    ) -> (String, reqwest::Response, String) {
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
        let to = LaneTarget::new(&reqwest::Url::parse(&url).unwrap()).unwrap();
        let sent = lane.send(request, &to);
        let response = tokio::time::timeout(bound, sent).await.expect("answered");
        let head = tokio::time::timeout(bound, served).await.expect("served");
        (url, response.unwrap(), head.unwrap().to_ascii_lowercase())
    }

    #[tokio::test]
    async fn an_answer_comes_back_as_reqwests_with_the_requests_url() {
        let (url, response, head) = exchange(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            |url| reqwest::Client::new().get(url).header("mcp-session-id", "s1"),
        )
        .await;
        assert_eq!(response.status(), 200);
        // Without the URL carried over, reqwest names a placeholder.
        assert_eq!(response.url().as_str(), url);
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.bytes().await.unwrap().as_ref(), b"{}");
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

    #[test]
    fn a_lanes_host_header_is_the_one_hypers_client_would_write() {
        let host = |url: &str| {
            LaneTarget::new(&reqwest::Url::parse(url).unwrap())
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
