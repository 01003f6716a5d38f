//! The gateway: one MCP endpoint (streamable HTTP or stdio) re-exposing every
//! supervised upstream (SPEC §10).
//!
//! Layout:
//! - [`naming`]: `{connection}__{tool}` names, shortened deterministically;
//! - [`handler`]: the rmcp `ServerHandler` (listing, calls, meta-tools);
//! - [`http`]: the HTTP endpoint with bearer auth, Host allowlist, body limit;
//! - [`forward`]: forwards `tools/list_changed` from upstreams downstream.

pub mod forward;
pub mod handler;
pub mod http;
pub mod naming;

pub use forward::ListChangedForwarder;
pub use handler::{GatewayHandler, GatewayState};
pub use http::serve_http;

use rmcp::ServiceExt;

/// Serves the gateway over this process's stdin/stdout until the client
/// closes it (`serve --stdio`). Logs must go to stderr.
pub async fn serve_stdio(state: std::sync::Arc<GatewayState>) -> std::io::Result<()> {
    let service = GatewayHandler::new(state)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    service.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
