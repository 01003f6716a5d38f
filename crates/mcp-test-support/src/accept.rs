//! The accept loop of every HTTP server here (the test MCP server, the OTLP
//! receiver): our own, so stopping a server really closes its kept-alive
//! sockets, streams and hung requests, as a crashed process would.

use std::time::Duration;

use axum::Router;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
    service::TowerToHyperService,
};
use tokio::{net::TcpListener, task::JoinSet};
use tokio_util::sync::CancellationToken;

/// What a server speaks on its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocols {
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/1.1 and HTTP/2 without TLS (h2c), as gRPC needs.
    Http1AndH2c,
}

/// How [`accept_loop`] serves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Serving {
    pub(crate) protocols: Protocols,
    pub(crate) nodelay: bool,
    /// Names the server in its logs.
    pub(crate) name: &'static str,
}

/// Serves `router` on `listener` until `shutdown`, calling `accepted` for
/// each connection; ending (or aborting) the task drops every connection,
/// which closes its socket.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    router: Router,
    serving: Serving,
    accepted: impl Fn(),
    shutdown: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            next = listener.accept() => match next {
                Ok((stream, _peer)) => {
                    accepted();
                    if serving.nodelay && let Err(error) = stream.set_nodelay(true) {
                        tracing::debug!(%error, "cannot set TCP_NODELAY");
                    }
                    let service = TowerToHyperService::new(router.clone());
                    let io = TokioIo::new(stream);
                    let name = serving.name;
                    connections.spawn(async move {
                        let served = match serving.protocols {
                            Protocols::Http1 => hyper::server::conn::http1::Builder::new()
                                .serve_connection(io, service)
                                .await
                                .map_err(Into::into),
                            Protocols::Http1AndH2c => auto::Builder::new(TokioExecutor::new())
                                .serve_connection(io, service)
                                .await,
                        };
                        if let Err(error) = served {
                            tracing::debug!(%error, "{name} connection ended with an error");
                        }
                    });
                }
                Err(error) => {
                    // Out of file descriptors and the like: back off briefly.
                    tracing::warn!(%error, "{} accept failed", serving.name);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}
