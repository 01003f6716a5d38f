//! How our HTTP servers (the gateway and the admin API) accept, keep and
//! close connections, and the request checks both share.
//!
//! [`serve`] is our own accept loop over hyper's HTTP/1 connection, in place
//! of `axum::serve`, which holds every connection for as long as the client
//! likes. Here (docs/DECISIONS.md #59):
//!
//! - every accepted socket gets `TCP_NODELAY` (see [`set_nodelay`]);
//! - at most `max_connections` are open at once, fewer when the open-file
//!   limit cannot hold that many ([`Server::connection_cap`]); at the cap the
//!   connection that has had no request in progress for longest (idle
//!   between requests, or accepted and silent) is closed to admit the new
//!   one, as nginx reuses idle keep-alive connections; only when every
//!   connection has a request in progress is the new one answered `503`
//!   with `Retry-After: 1` and closed;
//! - a watchdog per connection ([`activity`]) closes it when a request head
//!   takes longer than `header_timeout` from its first byte (or a new
//!   connection sends nothing for that long), or when it stays idle between
//!   requests for `idle_timeout`;
//! - while the server drains ([`Server::draining`]) it keeps accepting, and
//!   each connection closes after its next answer (the one in progress, if
//!   any), so clients reconnect for what they send next;
//! - on shutdown the loop stops accepting, connections finish the request in
//!   progress and close, and [`serve`] returns once all are closed.
//!
//! How long a request *body* may take is up to the routes that read one (the
//! gateway: `body_timeout`); the admin API reads no request body.
//!
//! # Layout
//! - [`activity`]: what a connection is doing and when it has waited too long.
//! - [`guard`]: bearer token, `Host` and `Origin` checks.
//! - [`tallies`]: what the servers' protections did, for `/metrics`.

mod activity;
pub(crate) mod forwarded;
pub(crate) mod guard;
pub mod tallies;

use std::{
    collections::HashMap,
    io,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use axum::{
    Router,
    extract::Request,
    response::{IntoResponse, Response},
};
use hyper::server::conn::http1;
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub(crate) use activity::Peer;
use activity::{Activity, Expired, Timeouts, WatchedIo, WatchedService};
use tallies::{Protection, Tallies};

use crate::woken::WhenWoken;

/// File descriptors left for everything but accepted connections: the
/// listeners, the runtime, stdio children's pipes, upstream connections.
const FD_RESERVE: u64 = 64;

/// Connections over the cap being answered 503 at once, per server; beyond
/// this they are closed without an answer.
const MAX_REFUSALS: usize = 16;

/// How long answering an over-the-cap connection may take, draining what
/// the client sent included.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// At most this much of an over-the-cap client's request is read (and
/// dropped) so that closing the socket does not reset it before the client
/// has read the 503.
const REFUSAL_DRAIN_BYTES: usize = 64 * 1024;

/// At most one "connection limit reached" warning per server this often.
const CAP_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// How long an accepted connection waits for the slot of the idle one
/// closed to make room (it frees at once; this only bounds a surprise).
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// Which of the two servers, for logs and its share of the open-file limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Port {
    /// The MCP endpoint: three quarters of the usable descriptors.
    Gateway,
    /// The admin API: one quarter, so a flood on the gateway cannot take the
    /// descriptors `/healthz` needs.
    Admin,
}

impl Port {
    fn name(self) -> &'static str {
        match self {
            Port::Gateway => "gateway",
            Port::Admin => "admin API",
        }
    }

    /// This port's share of `usable` descriptors.
    fn share(self, usable: u64) -> u64 {
        match self {
            Port::Gateway => usable / 4 * 3,
            Port::Admin => usable / 4,
        }
    }
}

/// How one server treats its connections.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub(crate) port: Port,
    /// See `gateway.header_timeout`.
    pub(crate) header_timeout: Duration,
    /// See `gateway.idle_timeout`.
    pub(crate) idle_timeout: Duration,
    /// See `gateway.max_connections`.
    pub(crate) max_connections: usize,
    /// JSON body of the 503 a connection over the cap gets.
    pub(crate) busy_body: &'static str,
    /// Cancelled when the server starts draining (see the module).
    pub(crate) draining: CancellationToken,
    /// Where evictions and refusals are counted.
    pub(crate) tallies: Arc<Tallies>,
}

impl Server {
    /// `max_connections`, lowered to what this port's share of the open-file
    /// limit holds (less [`FD_RESERVE`], and less the sockets of refusals in
    /// progress) when that is smaller: running out of descriptors would stop
    /// *both* servers from accepting, `/healthz` included.
    fn connection_cap(&self) -> usize {
        let Some(limit) = open_file_limit() else {
            return self.max_connections;
        };
        let share = self.port.share(limit.saturating_sub(FD_RESERVE));
        let share = usize::try_from(share)
            .unwrap_or(usize::MAX)
            .saturating_sub(MAX_REFUSALS)
            .max(1);
        if share < self.max_connections {
            tracing::warn!(
                server = self.port.name(),
                max_connections = self.max_connections,
                open_file_limit = limit,
                using = share,
                "max_connections does not fit the open-file limit; raise `ulimit -n` to allow more"
            );
            share
        } else {
            self.max_connections
        }
    }
}

/// The soft `RLIMIT_NOFILE`, or `None` when unlimited or unknown.
fn open_file_limit() -> Option<u64> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, _hard)) if soft != RLIM_INFINITY => Some(soft),
        _ => None,
    }
}

/// What a server answers: its routes, and in front of them, optionally,
/// the one path nearly every request takes ([`Front`]).
#[derive(Debug, Clone)]
pub(crate) struct App<F = NoFront> {
    router: TowerToHyperService<Router>,
    front: F,
}

impl App {
    /// `router` answers every request.
    pub(crate) fn routes(router: Router) -> Self {
        App::fronted(router, NoFront)
    }
}

impl<F: Front> App<F> {
    /// `front` answers what it takes, `router` the rest.
    pub(crate) fn fronted(router: Router, front: F) -> Self {
        App {
            router: TowerToHyperService::new(router),
            front,
        }
    }
}

/// A path served in front of a server's router, past axum's routing: the
/// gateway's MCP endpoint, which every call takes, and where the router's
/// path match, the boxed route service it clones per request and its
/// response mapping cost a call about 2,200 instructions
/// (docs/DECISIONS.md #187). What it does not take is the router's.
pub(crate) trait Front: Clone + Send + Sync + 'static {
    /// Whether `request` is this front's.
    fn takes(&self, request: &Request) -> bool;

    /// The answer to a request it takes.
    fn serve(&self, request: Request) -> impl Future<Output = Response> + Send + 'static;
}

/// No front: the router answers everything.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoFront;

impl Front for NoFront {
    fn takes(&self, _: &Request) -> bool {
        false
    }

    fn serve(&self, _: Request) -> impl Future<Output = Response> + Send + 'static {
        std::future::ready(axum::http::StatusCode::NOT_FOUND.into_response())
    }
}

/// Serves `app` on `listener` under `server`'s limits until `shutdown` is
/// cancelled, then lets the connections finish their requests and returns
/// once every one is closed.
pub(crate) async fn serve<F: Front>(
    listener: TcpListener,
    app: App<F>,
    server: Server,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let cap = server.connection_cap();
    let permits = Arc::new(Semaphore::new(cap));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let timeouts = Timeouts {
        header: server.header_timeout,
        idle: server.idle_timeout,
    };
    let connections = TaskTracker::new();
    let open = OpenConnections::default();
    let mut warned_at: Option<tokio::time::Instant> = None;
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(server.port, &error).await;
                    continue;
                }
            },
        };
        set_nodelay(&stream);
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => make_room(&open, &permits, &server.tallies).await,
        };
        match permit {
            Some(permit) => {
                let activity = Activity::new(timeouts);
                let registered = open.register(activity.clone());
                let ends = Ends {
                    shutdown: shutdown.clone(),
                    draining: server.draining.clone(),
                };
                let served = connection(
                    stream,
                    Peer(peer.ip()),
                    app.clone(),
                    activity,
                    ends,
                    (permit, registered),
                );
                crate::beside::spawn(connections.track_future(served));
            }
            None => {
                server.tallies.count(Protection::ConnectionRefused);
                if warned_at.is_none_or(|at| at.elapsed() >= CAP_WARNING_INTERVAL) {
                    warned_at = Some(tokio::time::Instant::now());
                    tracing::warn!(
                        server = server.port.name(),
                        max_connections = cap,
                        "connection limit reached and every connection busy; answering new \
                         connections 503"
                    );
                }
                if let Ok(permit) = refusals.clone().try_acquire_owned() {
                    tokio::spawn(refuse(stream, server.busy_body, permit));
                }
            }
        }
    }
    // New connections now wait in the backlog until the listener is dropped.
    drop(listener);
    connections.close();
    connections.wait().await;
    Ok(())
}

/// The open connections of one server, for choosing which to close at the
/// cap.
#[derive(Debug, Clone, Default)]
struct OpenConnections(Arc<Mutex<OpenTable>>);

#[derive(Debug, Default)]
struct OpenTable {
    next: u64,
    activities: HashMap<u64, Arc<Activity>>,
}

impl OpenConnections {
    fn table(&self) -> std::sync::MutexGuard<'_, OpenTable> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `activity` until the returned guard is dropped.
    fn register(&self, activity: Arc<Activity>) -> Registered {
        let mut table = self.table();
        table.next += 1;
        let key = table.next;
        table.activities.insert(key, activity);
        Registered {
            open: self.clone(),
            key,
        }
    }

    /// The connection with no request in progress for longest, if any.
    fn longest_idle(&self) -> Option<Arc<Activity>> {
        self.table()
            .activities
            .values()
            .filter_map(|activity| Some((activity.idle_since()?, activity)))
            .min_by_key(|(since, _)| *since)
            .map(|(_, activity)| activity.clone())
    }
}

/// Keeps a connection in its server's [`OpenConnections`] while it lives.
#[derive(Debug)]
struct Registered {
    open: OpenConnections,
    key: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.open.table().activities.remove(&self.key);
    }
}

/// At the cap: closes the connection idle for longest and takes its slot;
/// `None` when every connection has a request in progress.
async fn make_room(
    open: &OpenConnections,
    permits: &Arc<Semaphore>,
    tallies: &Tallies,
) -> Option<OwnedSemaphorePermit> {
    let idle = open.longest_idle()?;
    idle.evict();
    tallies.count(Protection::ConnectionEvicted);
    tracing::debug!("connection limit reached: closing the connection idle for longest");
    tokio::time::timeout(EVICTION_WAIT, permits.clone().acquire_owned())
        .await
        .ok()?
        .ok()
}

/// What ends a connection besides its client and its watchdog.
#[derive(Debug)]
struct Ends {
    /// Finish the request in progress, then close.
    shutdown: CancellationToken,
    /// Close after the next answer.
    draining: CancellationToken,
}

/// One connection, until it ends, its watchdog expires, it is closed to make
/// room, or shutdown (or a drain) has let its request in progress finish.
async fn connection<F: Front>(
    stream: TcpStream,
    peer: Peer,
    app: App<F>,
    activity: Arc<Activity>,
    ends: Ends,
    _slot: (OwnedSemaphorePermit, Registered),
) {
    let io = TokioIo::new(WatchedIo::new(stream, activity.clone()));
    let service = WatchedService::new(app, activity.clone(), peer);
    let mut builder = http1::Builder::new();
    // The watchdog times heads (and idle time); hyper's own header timer
    // would also run while a kept-alive connection is idle.
    builder.header_read_timeout(None);
    let connection = builder.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let mut closing = false;
    let mut draining = false;
    loop {
        // What may end the connection, polled only when one of them is
        // woken: not with each of the connection's own wakes
        // (docs/DECISIONS.md #138).
        let (was_closing, was_draining) = (closing, draining);
        let end = WhenWoken::new(async {
            tokio::select! {
                () = ends.shutdown.cancelled(), if !was_closing => End::Shutdown,
                () = ends.draining.cancelled(), if !was_draining => End::Draining,
                // Draining: the answer in progress (or the next one) is the
                // last; hyper marks it `Connection: close`. An idle
                // connection is not closed under a client that may be
                // sending on it.
                () = activity.busy(), if was_draining && !was_closing => End::Busy,
                expired = activity.expired() => End::Expired(expired),
                () = activity.evicted() => End::Evicted,
            }
        });
        let end = tokio::select! {
            biased;
            ended = connection.as_mut() => {
                if let Err(error) = ended {
                    tracing::debug!(%error, "HTTP connection ended with an error");
                }
                return;
            }
            end = end => end,
        };
        match end {
            End::Shutdown | End::Busy => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            End::Draining => draining = true,
            End::Expired(expired) => {
                tracing::debug!(reason = expired.as_str(), "closing an HTTP connection");
                // Dropping the connection closes the socket.
                return;
            }
            End::Evicted => return,
        }
    }
}

/// What ends (or begins to end) a connection besides its client.
enum End {
    /// Shutdown: the request in progress finishes, then it closes.
    Shutdown,
    /// A drain began: the next answer is the last.
    Draining,
    /// Draining, and a request began: its answer is the last.
    Busy,
    /// Its watchdog ran out.
    Expired(Expired),
    /// Closed to make room.
    Evicted,
}

/// How long a connection over the cap may take to send its request head
/// before it is answered `503` anyway.
const REFUSAL_HEAD_WAIT: Duration = Duration::from_millis(200);

/// Answers a connection over the cap `503` and closes it.
async fn refuse(mut stream: TcpStream, body: &'static str, _permit: OwnedSemaphorePermit) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        // Answer the request, not the connection: a client that gets a
        // response before it has sent its request sees a protocol error
        // (hyper: "unexpected message"), not the 503. So wait (briefly) for
        // the end of its request head first.
        let mut head = Vec::new();
        let mut chunk = [0u8; 1024];
        let _ = tokio::time::timeout(REFUSAL_HEAD_WAIT, async {
            while head.len() < REFUSAL_DRAIN_BYTES && !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => head.extend_from_slice(&chunk[..read]),
                }
            }
        })
        .await;
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        // Closing with unread input resets the connection, which can make the
        // client drop our answer unread; take what it sends until it closes.
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < REFUSAL_DRAIN_BYTES {
            let read = stream.read(&mut sink).await?;
            if read == 0 {
                break;
            }
            drained += read;
        }
        io::Result::Ok(())
    })
    .await;
}

/// An `accept` error. The ones about a single connection are skipped; others
/// (out of file descriptors, above all) are logged and retried after a pause,
/// as `axum::serve` does.
async fn accept_failed(port: Port, error: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(server = port.name(), %error, "cannot accept a connection; retrying in 1s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Sets `TCP_NODELAY` on an accepted socket.
///
/// hyper leaves Nagle on. With keep-alive clients (every MCP client, and
/// scrapers of `/metrics`), Nagle on our side plus delayed ACKs on theirs
/// stalls each answer written in two segments by ~40 ms.
fn set_nodelay(stream: &TcpStream) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "could not set TCP_NODELAY on an accepted connection");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_the_descriptors_add_up_to_at_most_all() {
        for usable in [0, 1, 7, 192, 960, 1_000_000] {
            assert!(Port::Gateway.share(usable) + Port::Admin.share(usable) <= usable);
        }
        assert_eq!(Port::Gateway.share(192), 144);
        assert_eq!(Port::Admin.share(192), 48);
    }

    #[test]
    fn the_cap_never_exceeds_max_connections() {
        let server = Server {
            port: Port::Admin,
            header_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            max_connections: 3,
            busy_body: "{}",
            draining: CancellationToken::new(),
            tallies: Arc::default(),
        };
        assert!((1..=3).contains(&server.connection_cap()));
    }
}
