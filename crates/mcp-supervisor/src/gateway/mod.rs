//! The gateway: one MCP endpoint (streamable HTTP or stdio) re-exposing every
//! supervised upstream as a transparent proxy (docs/ARCHITECTURE.md, "The
//! gateway").
//!
//! Layout:
//! - [`naming`]: exposed names (`{connection}__{name}` or plain, by `prefix`)
//!   and prefixed resource URIs;
//! - [`directory`]: the merged view of every upstream, with the routes back;
//! - [`paging`]: downstream cursors;
//! - [`state`]: what every downstream session shares (the view, sessions,
//!   subscriptions, notifications);
//! - [`downstream`]: one downstream session, and one forwarded request's
//!   link back to its client (progress, sampling, elicitation, roots);
//! - `mrtr`: multi-round requests (`input_required`) across both protocol
//!   generations, and `rounds`, their bookkeeping (sealed states, requests
//!   waiting for a client's answers);
//! - [`handler`]: the rmcp `ServerHandler`;
//! - [`http`]: the HTTP endpoint with its callers' credentials (`callers`:
//!   the bearer, keys, access tokens), Host allowlist, body limit;
//! - `session_ids` and `elsewhere`: in a fleet, session ids that name their
//!   node, and the forwarding of a request to the node holding its session,
//!   with `vouch`, the forwarding node's word for the caller instead of its
//!   credentials;
//! - `direct`: a 2025 session's plain tool calls, answered by the HTTP
//!   endpoint without rmcp's server, and `direct_sessions`, the sessions
//!   whose calls may take that path;
//! - `door`: a call whose arguments not every reader reads alike, refused
//!   before anything else sees it, on every way in; `stdio`, the gateway
//!   over stdio with the door in front;
//! - [`forward`]: relays what upstreams announce (list changes, resource
//!   updates, logs) to downstream sessions.

mod answer;
mod audit;
mod callers;
mod direct;
mod direct_sessions;
pub mod directory;
mod door;
pub mod downstream;
mod elsewhere;
pub mod forward;
pub mod handler;
pub mod http;
mod mrtr;
pub mod naming;
pub mod paging;
mod quotas;
mod rights;
mod rounds;
mod session_ids;
mod sessions;
pub mod state;
mod stdio;
mod tool_call;
mod traced;
mod vouch;

pub use forward::ListChangedForwarder;
pub use handler::GatewayHandler;
pub use http::{GatewayShutdown, LARGE_AT_ONCE, LARGE_BODY_BYTES, serve_http};
pub use state::GatewayState;
pub use stdio::serve_stdio;
