//! A page of a test's own on an origin of its own: the other side of a
//! cross-origin or cross-site test (a page that tries to reach the
//! dashboard), or a fixture for the harness's own tests.

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context as _;
use axum::{Router, http::StatusCode, response::Html, routing::get};
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::accept::{Protocols, Serving, accept_loop};

/// A running page server; dropping it stops it and closes its connections.
#[derive(Debug)]
pub struct ServedPage {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl ServedPage {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/`, the page.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The page's URL with `host` in place of the IP address, e.g.
    /// `localhost`: to a browser, `http://localhost:P` and
    /// `http://127.0.0.1:Q` are different sites, while `http://127.0.0.1:P`
    /// and `http://127.0.0.1:Q` are the same site but different origins.
    /// (Chromium resolves `localhost` to loopback itself, so a server on
    /// `127.0.0.1` answers it.)
    pub fn url_on(&self, host: &str) -> String {
        format!("http://{host}:{}/", self.addr.port())
    }
}

impl Drop for ServedPage {
    fn drop(&mut self) {
        // Ends the accept loop, which drops (closes) every connection.
        self.accept.abort();
    }
}

/// Serves `html` at `/` on a free port of 127.0.0.1.
pub async fn serve_page(html: String) -> anyhow::Result<ServedPage> {
    serve_page_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), html).await
}

/// Serves `html` at `/` on `addr` (port 0: a free one). `/favicon.ico` is
/// answered `204 No Content`, so the browser's own request for it logs no
/// error; any other path is `404`.
pub async fn serve_page_on(addr: SocketAddr, html: String) -> anyhow::Result<ServedPage> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding a page server on {addr}"))?;
    let addr = listener.local_addr()?;
    let router = Router::new()
        .route("/", get(move || std::future::ready(Html(html.clone()))))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }));
    let serving = Serving {
        protocols: Protocols::Http1,
        nodelay: true,
        name: "page server",
    };
    // Never cancelled: the guard aborts the task instead.
    let accept = tokio::spawn(accept_loop(
        listener,
        router,
        serving,
        || {},
        CancellationToken::new(),
    ));
    Ok(ServedPage { addr, accept })
}
