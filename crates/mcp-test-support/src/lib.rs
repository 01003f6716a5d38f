//! Test MCP servers with runtime fault injection, for the supervisor's tests
//! and benchmarks.
//!
//! One MCP server ([`TestMcpServer`]) with predictable tools (`echo`, `add`,
//! `sleep`, `lookup` (read-only), `delete_item` (destructive), `set_value`
//! (idempotent), `fail` (tool error) and a switchable `late_tool`), served
//! two ways:
//!
//! - in process over loopback streamable HTTP ([`TestServer`]), behind a
//!   fault layer that can answer any request with a status, a delay, a hang,
//!   a dropped connection, an expired session or garbage ([`Fault`]), and
//!   that counts what reached it;
//! - as the `mcp-test-server` binary over stdio (or `--http ADDR`), with
//!   flags to delay, hang, exit, answer garbage, ignore stdin EOF or SIGTERM,
//!   log every request to a file and list N more tools (`--extra-tools N`:
//!   `extra_000`, … with varied descriptions) ([`cli::Args`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions};
//!
//! let server = TestServer::start(TestServerOptions::default()).await?;
//! server.faults().push(FaultRule::once(
//!     Match::tool("echo"),
//!     Fault::status(503).with_retry_after_secs(2),
//! ));
//! // … point a client at server.url() …
//! assert_eq!(server.tool_calls("echo"), 0);
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - [`server`]: the rmcp `ServerHandler` and its shared [`ServerControl`]
//!   (counters, fault script, `late_tool` switch, connected clients).
//! - [`fault`]: the fault script ([`FaultRule`], [`Match`], [`Fault`]) and
//!   its JSON form.
//! - [`http`]: [`TestServer`], the accept loop and the fault layer in front
//!   of rmcp's `StreamableHttpService`; `/_control/*` endpoints.
//! - [`stdio`]: the stdio server and the line pump behind its flags.
//! - [`cli`]: the `mcp-test-server` command line.
//! - [`binary`]: locating the built binary from other crates' tests.
//! - [`wait`]: [`wait_until`] and the [`eventually!`] assertion.
//! - `counters`: what reached the server ([`Counts`]).
//! - `extra_tools`: the optional long tail of tools, `extra_000`, …
//!   ([`ServerBehavior::extra_tools`], `mcp-test-server --extra-tools N`).
//! - `seen_trace`: the trace context each `tools/call` arrived with
//!   ([`SeenTrace`], [`TestServer::seen_traces`]); over HTTP also its
//!   `arguments` as the body held them ([`TestServer::seen_arguments`]).
//! - [`conformance`]: the `mcp-conformance-server` upstream, with every
//!   fixture the official MCP conformance suite calls.
//! - [`redis`]: a real `redis-server` on loopback for the fleet's tests
//!   ([`RedisServer`]), with a RESP client of its own.
//! - [`otlp`]: a real OTLP collector on loopback ([`OtlpReceiver`]), over
//!   HTTP and gRPC, that decodes and keeps every span and metric it gets
//!   (`mcp-test-server --otlp ADDR`).
//! - [`browser`]: a real headless Chromium driven over W3C WebDriver
//!   ([`Browser`]), for end-to-end tests of web pages, and
//!   [`serve_page`](browser::serve_page) for a second origin.
//! - [`alone`]: [`in_own_process`], for a test that installs what a
//!   process holds once (telemetry), so that it passes under `cargo test` too.
//! - [`asking`]: a 2026-07-28 server that asks its client with requests on
//!   the call's stream (`mcp-test-server --http ADDR --asks-by-request`).

mod accept;
pub mod alone;
pub mod asking;
pub mod binary;
pub mod browser;
pub mod cli;
pub mod conformance;
mod counters;
mod extra_tools;
pub mod fault;
pub mod http;
pub mod idp;
pub mod oauth;
pub mod otlp;
pub mod redis;
mod seen_trace;
pub mod server;
pub mod stdio;
pub mod wait;

pub use alone::in_own_process;
pub use binary::test_server_binary;
pub use browser::Browser;
pub use counters::Counts;
pub use fault::{Fault, FaultHandle, FaultRule, Match, RetryAfter};
pub use http::{TestServer, TestServerOptions};
pub use idp::Idp;
pub use otlp::OtlpReceiver;
pub use redis::RedisServer;
pub use seen_trace::SeenTrace;
pub use server::{LATE_TOOL, PROMPT, ServerBehavior, ServerControl, Speaks, TestMcpServer};
pub use stdio::{StdioOptions, serve_stdio};
pub use wait::{wait_until, wait_until_async};

/// A loopback TCP port that nothing listens on right now.
pub fn free_loopback_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}
