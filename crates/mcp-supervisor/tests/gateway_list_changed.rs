//! `tools/list_changed` from an upstream reaches a downstream gateway client,
//! and the next listing shows the new tool.

mod support;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use actix::Actor;
use mcp_supervisor::{
    config::{Expose, Prefix},
    gateway::{GatewayState, ListChangedForwarder, serve_http},
    http::{HttpRecorder, RecordingClient},
    registry::{Registry, Subscribe},
    session::shared_http_client,
};
use mcp_test_support::{TestServer, TestServerOptions, eventually};
use rmcp::{
    ClientHandler, ServiceExt,
    model::ClientConfig,
    service::{NotificationContext, RoleClient},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use support::*;

/// A downstream client that counts `tools/list_changed` notifications.
#[derive(Clone, Default)]
struct Counting(Arc<AtomicUsize>);

impl ClientHandler for Counting {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn an_upstream_list_change_reaches_downstream_clients() {
    // Paused time: the clock moves only once every task waits, so the
    // check for a duplicate below comes after all that was sent arrived.
    run_paused(|| async {
        let upstream = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let config = config(&http_connection("up", &upstream.url(), ""));
        let registry = Registry::new(config.clone()).start();
        let state = GatewayState::new(registry.clone(), Expose::Namespaced, Prefix::Always);
        let forwarder = ListChangedForwarder::new(state.clone()).start();
        registry
            .send(Subscribe(forwarder.recipient()))
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let shutdown = mcp_supervisor::gateway::GatewayShutdown::new();
        let settings = config.gateway.clone();
        actix_rt::spawn({
            let shutdown = shutdown.clone();
            async move {
                serve_http(listener, state, &settings, shutdown)
                    .await
                    .unwrap()
            }
        });

        let seen = Counting::default();
        let transport = StreamableHttpClientTransport::with_client(
            RecordingClient::new(shared_http_client(), HttpRecorder::default()),
            StreamableHttpClientTransportConfig::with_uri(url.as_str()),
        );
        let client = seen.clone().serve(transport).await.unwrap();
        let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
            tools
                .into_iter()
                .map(|tool| tool.name.to_string())
                .collect()
        };
        let before = names(client.list_all_tools().await.unwrap());
        assert!(before.contains(&"up__echo".to_owned()), "{before:?}");
        assert!(!before.contains(&"up__late_tool".to_owned()));
        // Calls must not register the session again (each registration is one
        // more copy of every notification).
        for _ in 0..5 {
            let mut call = rmcp::model::CallToolRequestParams::new("up__echo");
            call.arguments = serde_json::json!({"text": "hi"}).as_object().cloned();
            client.call_tool(call).await.unwrap();
        }

        upstream.set_late_tool(true).await;
        eventually!(seen.0.load(Ordering::SeqCst) >= 1);
        let after = names(client.list_all_tools().await.unwrap());
        assert!(after.contains(&"up__late_tool".to_owned()), "{after:?}");
        // Duplicates would travel right behind the first on the same stream:
        // on the paused clock this returns once every task waits.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            seen.0.load(Ordering::SeqCst),
            1,
            "one notification per change"
        );
        shutdown.end_sessions();
    });
}
