//! `mcp-bench relay`: an HTTP relay with no MCP logic, the floor of any
//! gateway on this machine (docs/BENCHMARKS.md, "The floor").
//!
//! Every request is passed to the upstream as it came (method, path, query,
//! headers, body streamed), and the upstream's answer back as it came (status,
//! headers, body streamed, SSE included), over pooled keep-alive connections:
//! two HTTP hops and nothing else. A gateway must do at least this much per
//! call, so the relay's throughput in the same rounds is the most any gateway
//! here could reach. One thread (a current-thread runtime), as a gateway
//! sharing the machine with its client and upstream would want; Nagle off on
//! both sides. It announces `relay listening on http://ADDR/PATH` on stdout,
//! PATH being the upstream's.

use std::{convert::Infallible, net::SocketAddr};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::{
    Request, Response, StatusCode, Uri,
    body::Incoming,
    header::{HOST, HeaderValue},
    http::uri::Scheme,
    service::service_fn,
};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioIo},
};

/// The relay's command line.
#[derive(Debug, clap::Args)]
pub(crate) struct RelayArgs {
    /// The upstream's MCP endpoint (`http://host:port/path`).
    #[arg(long)]
    upstream: Uri,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

type Body = Either<Incoming, Full<Bytes>>;

/// Runs the relay until the process is stopped.
pub(crate) fn run(args: &RelayArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let relay = Relay::bind(args).await?;
        println!("relay listening on {}", relay.url);
        relay.serve().await
    })
}

/// A bound relay: its listener, its upstream and the URL it answers on.
struct Relay {
    listener: tokio::net::TcpListener,
    upstream: Upstream,
    url: String,
}

/// Where requests go (plain http), and the pooled client that takes them there.
#[derive(Clone)]
struct Upstream {
    authority: hyper::http::uri::Authority,
    host: HeaderValue,
    client: Client<HttpConnector, Incoming>,
}

impl Relay {
    async fn bind(args: &RelayArgs) -> anyhow::Result<Self> {
        let parts = args.upstream.clone().into_parts();
        let (Some(scheme), Some(authority)) = (parts.scheme, parts.authority) else {
            anyhow::bail!(
                "--upstream {} is not an absolute http:// URL",
                args.upstream
            );
        };
        if scheme != Scheme::HTTP {
            anyhow::bail!(
                "--upstream {}: the relay speaks plain http only",
                args.upstream
            );
        }
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let path = parts
            .path_and_query
            .map_or_else(|| "/".to_owned(), |path| path.to_string());
        let url = format!("http://{}{path}", listener.local_addr()?);
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Ok(Relay {
            listener,
            upstream: Upstream {
                host: HeaderValue::from_str(authority.as_str())?,
                authority,
                client: Client::builder(TokioExecutor::new()).build(connector),
            },
            url,
        })
    }

    async fn serve(self) -> anyhow::Result<()> {
        loop {
            let (stream, _) = self.listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let upstream = self.upstream.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let upstream = upstream.clone();
                    async move { Ok::<_, Infallible>(upstream.forward(request).await) }
                });
                // A client that goes away mid-request ends its connection only.
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

impl Upstream {
    /// One request to the upstream and its answer back; 502 if it cannot be reached.
    async fn forward(&self, request: Request<Incoming>) -> Response<Body> {
        let (mut parts, body) = request.into_parts();
        let mut uri = Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(self.authority.clone());
        if let Some(path) = parts.uri.path_and_query() {
            uri = uri.path_and_query(path.clone());
        }
        parts.uri = match uri.build() {
            Ok(uri) => uri,
            Err(error) => {
                return answer(StatusCode::BAD_REQUEST, format!("bad request URI: {error}"));
            }
        };
        parts.headers.insert(HOST, self.host.clone());
        match self.client.request(Request::from_parts(parts, body)).await {
            Ok(response) => response.map(Either::Left),
            Err(error) => answer(
                StatusCode::BAD_GATEWAY,
                format!("relay: upstream {} unreachable: {error}", self.authority),
            ),
        }
    }
}

fn answer(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(text))));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use mcp_test_support::{TestServer, TestServerOptions};
    use rmcp::model::CallToolRequestParams;

    use super::*;
    use crate::worker::{Client as Flavour, raw_session};

    async fn relay_to(upstream: &str) -> String {
        let args = RelayArgs {
            upstream: upstream.parse().expect("an upstream URI"),
            listen: "127.0.0.1:0".parse().expect("an address"),
        };
        let relay = Relay::bind(&args).await.expect("the relay binds");
        let url = relay.url.clone();
        tokio::spawn(relay.serve());
        url
    }

    #[tokio::test]
    async fn a_call_crosses_the_relay_in_either_generation() {
        let server = TestServer::start(TestServerOptions::default())
            .await
            .expect("the test server starts");
        let url = relay_to(&server.url()).await;
        for flavour in [Flavour::RawPooled, Flavour::RawModern] {
            let session = raw_session(flavour, &url)
                .await
                .expect("a session through the relay");
            let mut params = CallToolRequestParams::new("echo");
            params.arguments = serde_json::json!({"text": "through"}).as_object().cloned();
            let result = session
                .peer()
                .call_tool(params)
                .await
                .expect("the call is answered");
            assert_ne!(result.is_error, Some(true), "{flavour:?}: {result:?}");
            assert!(
                serde_json::to_string(&result.content)
                    .unwrap()
                    .contains("through"),
                "{flavour:?}: {result:?}"
            );
            let _ = session.cancel().await;
        }
        assert_eq!(server.tool_calls("echo"), 2);
    }

    #[tokio::test]
    async fn an_unreachable_upstream_is_answered_502() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let url = relay_to(&format!("http://127.0.0.1:{port}/mcp")).await;
        let response = reqwest::Client::new()
            .post(&url)
            .body("{}")
            .send()
            .await
            .expect("the relay answers");
        assert_eq!(response.status(), reqwest::StatusCode::BAD_GATEWAY);
        assert!(response.text().await.unwrap().contains("unreachable"));
    }
}
