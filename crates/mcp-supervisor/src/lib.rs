//! Supervised client connections to many MCP (Model Context Protocol) servers.
//!
//! Each connection is an actix actor that owns its live rmcp session; a registry
//! actor supervises them; a quarantine policy actor decides, from classified
//! failures, when to retry, park for a cooldown, or retire a connection. Every
//! call comes back as a value.
//!
//! # Layout
//! - [`access`]: who is calling ([`access::Caller`]) and the one decision of what
//!   each caller may use ([`access::Rules::decide`]), from the `[[access]]` rules.
//! - [`admin`]: the admin HTTP API (`/status`, `/metrics`, reset, reload) over the registry.
//! - [`call`]: a request on its way upstream in our own types ([`call::ToolCall`],
//!   its [`call::Arguments`]), from the gateway's door to the upstream's socket.
//! - [`config`]: the TOML file, parsed (`raw`) then validated into typed settings;
//!   secrets become `SecretString` the moment they are read.
//! - [`connection`]: one connection's actor: its session, lifecycle, admission and
//!   standing (park, retirement), and its history.
//! - [`contracts`]: tool contracts: their hashes, the lock file, and the book that
//!   holds a tool whose contract changed after approval.
//! - [`events`]: [`events::ConnectionEvent`], what the registry's subscribers are told.
//! - [`failure`]: [`Failure`] and the one [`classify`] for every error source.
//! - [`fleet`]: supervisors in several processes sharing parks, `Retry-After`
//!   windows, retirements, resets and sealed OAuth tokens through Redis.
//! - [`gateway`]: the MCP endpoint (streamable HTTP or stdio) that proxies every upstream.
//! - [`generation`]: [`generation::Generation`], the protocol's two generations
//!   (2025 sessions, 2026-07-28 stateless requests), one word for gateway and session.
//! - [`http`]: the connection's own rmcp HTTP client, recording every status.
//! - [`meta`]: the meta-tools (`list_mcps`, `search_mcp_tools`, …).
//! - [`oauth`]: OAuth logins, token storage and refresh for HTTP connections
//!   (once for a fleet, through a [`oauth::TokenShare`]).
//! - [`outcome`]: [`CallOutcome`], what every call comes back as, and the agent-facing texts.
//! - [`policy`]: the pure retry/park/retire decision and the `QuarantinePolicy` actor.
//! - [`registry`]: the registry actor: name → connection actor, routing, catalogs,
//!   restarts, reloads, status.
//! - [`session`]: one live rmcp client session and its deadline-bounded operations.
//! - [`standing`]: a connection's standing and its fixed vocabularies ([`ConnectionState`], [`RetireReason`]).
//! - [`telemetry`]: OpenTelemetry spans and MCP duration metrics over OTLP, and trace
//!   context in `_meta` and headers.
//! - [`tallies`]: the gateway's evictions and refusals, by limit.

pub mod access;
pub mod admin;
mod beside;
mod boxed;
pub mod call;
mod codec;
pub mod config;
pub mod connection;
pub mod contracts;
pub mod events;
pub mod failure;
pub mod fleet;
pub mod gateway;
pub mod generation;
mod heavy;
pub mod http;
mod ids;
mod listener;
pub use listener::tallies;
pub mod meta;
pub mod oauth;
pub mod outcome;
pub mod policy;
pub mod registry;
pub mod session;
pub mod standing;
pub mod telemetry;
mod tool_answer;
pub use tool_answer::ToolAnswer;
#[cfg(feature = "twins")]
#[doc(hidden)]
pub mod twins;
mod woken;

pub use failure::{Failure, FailureKind};
pub use outcome::{CallOutcome, Forwarded, OutcomeKind, Unavailable};
pub use session::classify;
pub use standing::{ConnectionState, Deadline, RetireReason};

// The Rust examples of README.md and docs/CONFIG.md are doc tests, so a
// renamed type or a changed signature fails `cargo test --doc` (issue 33).
// rustdoc tests only the `rust` blocks; tests/e2e/docs.rs runs the others
// (`sh`, `text`, `python`, `toml`, `json`).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}

#[cfg(doctest)]
#[doc = include_str!("../../../docs/CONFIG.md")]
mod config_doc {}

#[cfg(test)]
mod layout;
