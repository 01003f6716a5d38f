//! The connection's own HTTP client for rmcp's streamable HTTP transport.
//!
//! rmcp's bundled reqwest client loses HTTP statuses (a 5xx carrying a JSON-RPC
//! body arrives as a plain JSON-RPC error; a 400 or an unchallenged 401 only as
//! text). [`RecordingClient`] implements rmcp's `StreamableHttpClient` itself so
//! that every response is recorded ([`HttpRecorder`]) and every non-2xx answer
//! reaches the classifier as a typed status error.

mod client;
mod drain;
mod plain;
pub(crate) use plain::{LaneError, LaneTarget, PlainLane};
mod events;
mod recorder;
mod reuse;
mod sse_limit;

pub(crate) use client::{PostOutgoing, Posted, header_map, with_post_headers};
pub use client::{RecordingClient, ServerStreamDecision, SessionIds};
pub use recorder::{HttpObservation, HttpRecorder};
pub use reuse::{HttpClients, OriginReuse, Reuse};
pub(crate) use reuse::{PROBE_PINGS, Ping, probe_verdict};

/// `chunks` read as an event stream by hand and by `sse_stream`, each item
/// as `Debug` text, for the fuzz target `codec` (`crate::twins`).
#[cfg(feature = "twins")]
pub(crate) fn event_twins(chunks: &[bytes::Bytes]) -> (Vec<String>, Vec<String>) {
    use futures::StreamExt;
    let body = || {
        futures::stream::iter(
            chunks
                .iter()
                .map(|chunk| Ok::<_, std::io::Error>(chunk.clone()))
                .collect::<Vec<_>>(),
        )
    };
    let read = |items: futures::stream::BoxStream<'_, String>| {
        futures::executor::block_on(items.collect::<Vec<_>>())
    };
    (
        read(
            events::Events::new(body())
                .map(|item| format!("{item:?}"))
                .boxed(),
        ),
        read(
            sse_stream::SseStream::from_bytes_stream(body())
                .map(|item| format!("{item:?}"))
                .boxed(),
        ),
    )
}
