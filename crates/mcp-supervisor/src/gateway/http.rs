//! The gateway over streamable HTTP: rmcp's own server implementation behind
//! our bearer check. rmcp enforces the Host allowlist (DNS-rebinding
//! protection) and the request body limit itself.

use std::{io, sync::Arc};

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::any,
};
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::LocalSessionManager,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{handler::GatewayHandler, state::GatewayState};
use crate::{
    config::{BearerToken, GatewaySettings},
    listener::without_nagle,
};

#[derive(Clone)]
struct Endpoint {
    mcp: StreamableHttpService<GatewayHandler, LocalSessionManager>,
    token: Option<Arc<BearerToken>>,
}

/// Serves the gateway on `listener` at `settings.path` until `shutdown`.
pub async fn serve_http(
    listener: TcpListener,
    state: Arc<GatewayState>,
    settings: &GatewaySettings,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(settings.allowed_hosts.clone())
        .with_cancellation_token(shutdown.child_token());
    config.max_request_body_bytes = settings.max_body_bytes;
    let mcp = StreamableHttpService::new(
        move || Ok(GatewayHandler::new(state.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let endpoint = Endpoint {
        mcp,
        token: settings.auth.clone().map(Arc::new),
    };
    let router = Router::new()
        .route(&settings.path, any(mcp_endpoint))
        .with_state(endpoint);
    axum::serve(without_nagle(listener), router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn mcp_endpoint(State(endpoint): State<Endpoint>, request: Request) -> Response {
    if let Some(token) = &endpoint.token
        && !authorized(request.headers(), token)
    {
        return unauthorized();
    }
    endpoint.mcp.handle(request).await.map(Body::new)
}

/// Constant-time comparison of the presented bearer token with ours, so the
/// time taken does not reveal how many leading bytes were right.
fn authorized(headers: &HeaderMap, token: &BearerToken) -> bool {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    constant_time_eq(presented.as_bytes(), token.expose().as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | (std::hint::black_box(x ^ y)));
    difference == 0
}

fn unauthorized() -> Response {
    let mut response =
        (StatusCode::UNAUTHORIZED, "missing or invalid bearer token").into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"mcp-supervisor\""),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
