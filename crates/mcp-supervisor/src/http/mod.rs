//! The connection's own HTTP client for rmcp's streamable HTTP transport.
//!
//! rmcp's bundled reqwest client loses HTTP statuses (a 5xx carrying a JSON-RPC
//! body arrives as a plain JSON-RPC error; a 400 or an unchallenged 401 only as
//! text). [`RecordingClient`] implements rmcp's `StreamableHttpClient` itself so
//! that every response is recorded ([`HttpRecorder`]) and every non-2xx answer
//! reaches the classifier as a typed status error.

mod client;
mod plain;
pub(crate) use plain::{LaneError, LaneTarget, PlainLane};
mod recorder;
mod reuse;
mod sse_limit;

pub(crate) use client::PostOutgoing;
pub use client::{RecordingClient, ServerStreamDecision, SessionIds};
pub use recorder::{HttpObservation, HttpRecorder};
pub use reuse::{HttpClients, OriginReuse, Reuse};
pub(crate) use reuse::{PROBE_PINGS, Ping, probe_verdict};
