//! Listening sockets for our HTTP servers (gateway and admin API).

use axum::serve::{Listener, ListenerExt};
use tokio::net::{TcpListener, TcpStream};

/// `listener`, with `TCP_NODELAY` set on every accepted socket.
///
/// axum leaves Nagle on. With keep-alive clients (every MCP client, and
/// scrapers of `/metrics`), Nagle on our side plus delayed ACKs on theirs
/// stalls each answer written in two segments by ~40 ms.
pub(crate) fn without_nagle(
    listener: TcpListener,
) -> impl Listener<Io = TcpStream, Addr = std::net::SocketAddr> {
    listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY on an accepted connection");
        }
    })
}
