//! A conformance upstream: an MCP server with the whole fixture surface the
//! official conformance suite (`@modelcontextprotocol/conformance`
//! 0.2.0-alpha.12) expects of a server under test, so the suite can be run
//! directly against an rmcp server and the supervisor can be tested against
//! a server that passes it.
//!
//! It serves streamable HTTP ([`ConformanceHttpServer`], `--http ADDR`) and
//! stdio (the default) from one handler ([`ConformanceServer`]); the
//! `mcp-conformance-server` binary is [`cli::run`]. Legacy clients
//! (`initialize`, up to 2025-11-25) get a session; 2026-07-28 clients are
//! served statelessly, with per-request `_meta`, `server/discover`,
//! `subscriptions/listen`, caching hints and multi round-trip requests.
//!
//! ```sh
//! mcp-conformance-server --http 127.0.0.1:0     # prints: listening on http://127.0.0.1:PORT/mcp
//! node …/conformance/dist/index.js server --url http://127.0.0.1:PORT/mcp --suite all
//! ```
//!
//! # Layout
//!
//! - `handler`: the rmcp `ServerHandler`, routing each request.
//! - `catalog`: the listed tools and their literal schemas.
//! - `tools`: content, logging, progress, error and client-input fixtures.
//! - `mrtr`: the `input-required-result-*` fixtures (SEP-2322).
//! - `stateless`: `server-stateless` diagnostics and `subscriptions/listen`.
//! - `tasks`: the tasks extension fixtures and `tasks/*` (SEP-2663).
//! - `resources`, `prompts`: resources, prompts and completion.
//! - `skills`: the skills extension's one skill (SEP-2640).
//! - `ask`: asking the client for input, by request or by `InputRequiredResult`.
//! - `logging`: which log messages a request may get.
//! - `state`: process-wide and per-session state.
//! - `http`: the HTTP endpoint and the stream cut `server-sse-polling` needs.
//! - `fixtures`: names, texts, payloads and schemas the scenarios look for.
//! - [`cli`]: the command line.
//!
//! # What does not pass, and why
//!
//! Against `@modelcontextprotocol/conformance` 0.2.0-alpha.12 every server
//! scenario passes: `--suite all` runs 65 scenarios (276 checks SUCCESS, no
//! FAILURE, no WARNING) and `--requirements 2026-07-28` runs 50 (197
//! SUCCESS). The extensions (tasks, SEP-2663; skills, SEP-2640) are
//! implemented and run too. What remains:
//!
//! - `tasks-status-notifications`: its only check is SKIPPED by the suite
//!   itself (its harness awaits a rewrite against `subscriptions/listen`).
//!   This server could not pass it yet anyway: rmcp 3.11's
//!   `SubscriptionSink::send` refuses `notifications/tasks`
//!   (`SubscriptionFilter` has no `taskIds`), so a client sees task status
//!   changes only by polling `tasks/get`.
//! - `server-sse-polling` passes, with the result really delivered on the
//!   resumed stream, but the stream cut is not rmcp's: a handler cannot
//!   close its own SSE stream in rmcp 3.11 (`LocalSessionHandle::
//!   close_sse_stream` needs the HTTP request id, which handlers never see),
//!   so `http` cuts `test_reconnection`'s response after the priming event
//!   and the tool waits for the client's `Last-Event-ID` resume.

mod ask;
mod catalog;
pub mod cli;
mod fixtures;
mod handler;
mod http;
mod logging;
mod mrtr;
mod prompts;
mod resources;
mod skills;
mod state;
mod stateless;
mod tasks;
mod tools;

pub use handler::ConformanceServer;
pub use http::{ConformanceHttpServer, MCP_PATH};
