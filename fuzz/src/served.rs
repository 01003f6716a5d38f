//! The gateway a harness POSTs to: served from a config over loopback HTTP
//! on the calling actix system, as `serve` serves it.

use std::net::SocketAddr;

use actix::{Actor, Addr};
use mcp_supervisor::{
    config::Config,
    gateway::{GatewayShutdown, GatewayState, serve_http},
    registry::Registry,
};

/// Serves `toml`'s connections through a gateway on a loopback port: its
/// address, and its registry.
pub async fn serve(toml: &str) -> (SocketAddr, Addr<Registry>) {
    let config = Config::from_toml_str(toml, std::path::Path::new("fuzz.toml"), &|_| None)
        .expect("the harness's config is valid");
    let registry = Registry::new(config.clone()).start();
    let state = GatewayState::start(&registry, &config)
        .await
        .expect("no audit log to open");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    let settings = config.gateway.clone();
    actix_rt::spawn(async move {
        serve_http(listener, state, &settings, None, GatewayShutdown::new())
            .await
            .expect("the gateway serves");
    });
    (addr, registry)
}
