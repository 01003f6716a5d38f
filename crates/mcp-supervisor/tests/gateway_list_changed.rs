//! A change of an upstream's lists reaches every downstream client that
//! asked for it, once the gateway has the new list: a 2025 session and a
//! 2026-07-28 `subscriptions/listen` stream, whether the upstream announced
//! the change or it changed while the gateway was away from it; and the
//! next listing shows it, however slow the upstream is to list.

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
use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions, eventually};
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
        let served = actix_rt::spawn({
            let shutdown = shutdown.clone();
            async move { serve_http(listener, state, &settings, None, shutdown).await }
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
        // An announcement after which the list reads the same is passed on
        // too, once the gateway has listed again.
        let listings = upstream.requests("tools/list");
        upstream.control().announce_tools_changed().await;
        eventually!(seen.0.load(Ordering::SeqCst) >= 2);
        assert!(
            upstream.requests("tools/list") > listings,
            "listed again first"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(seen.0.load(Ordering::SeqCst), 2, "once");
        if served.is_finished() {
            panic!("the gateway stopped serving: {:?}", served.await);
        }
        shutdown.end_sessions();
    });
}

fn tool_names(tools: Vec<rmcp::model::Tool>) -> Vec<String> {
    tools
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

/// The gateway in front of `upstream` (one connection, `up`).
async fn gateway_for(upstream: &TestServer) -> ServedGateway {
    ServedGateway::start(config(&http_connection("up", &upstream.url(), ""))).await
}

/// A 2025 client of the gateway in front of an upstream of `options`, having
/// listed the tools once (without `late_tool`).
struct Watching {
    upstream: TestServer,
    client: rmcp::service::RunningService<RoleClient, Telling>,
    told: tokio::sync::mpsc::UnboundedReceiver<()>,
    _gateway: ServedGateway,
}

impl Watching {
    async fn start(options: TestServerOptions) -> Self {
        let upstream = TestServer::start(options).await.unwrap();
        let gateway = gateway_for(&upstream).await;
        let (telling, told) = tokio::sync::mpsc::unbounded_channel();
        let client = gateway.connect(Telling(telling)).await;
        let before = tool_names(client.list_all_tools().await.unwrap());
        assert!(!before.contains(&"up__late_tool".to_owned()), "{before:?}");
        Watching {
            upstream,
            client,
            told,
            _gateway: gateway,
        }
    }

    /// Waits to be told the tools changed, then lists them at once: the
    /// listing must show `late_tool`.
    async fn is_told_and_lists_the_late_tool(&mut self) {
        tokio::time::timeout(std::time::Duration::from_secs(30), self.told.recv())
            .await
            .expect("told of the change")
            .unwrap();
        let after = tool_names(self.client.list_all_tools().await.unwrap());
        assert!(after.contains(&"up__late_tool".to_owned()), "{after:?}");
    }
}

/// An upstream slow to list (as a large server is) announces a change: the
/// client is told only once the gateway has the new list, so the listing it
/// sends at once shows the new tool (told first, it got the last list held).
#[test]
fn a_client_told_of_a_change_lists_the_new_tools_even_from_a_slow_upstream() {
    run(|| async {
        let mut watching = Watching::start(TestServerOptions::default()).await;
        watching.upstream.faults().push(FaultRule::always(
            Match::method("tools/list"),
            Fault::delay(std::time::Duration::from_millis(500)),
        ));
        watching.upstream.set_late_tool(true).await;
        watching.is_told_and_lists_the_late_tool().await;
    });
}

/// The upstream's list changed while the gateway was away from it (it was
/// restarted with another list and announced nothing): when the gateway's
/// session is built again, the clients are told, and list the new tools. A
/// 2025 upstream (a session `initialize`d again) and a 2026-07-28 one (a
/// listen stream opened again).
#[test]
fn a_change_while_the_gateway_was_away_is_told_once_it_reconnects() {
    for options in [TestServerOptions::legacy(), TestServerOptions::default()] {
        run(|| async {
            let mut watching = Watching::start(options).await;
            watching.upstream.stop().await;
            // Nobody is connected to hear it.
            watching.upstream.set_late_tool(true).await;
            watching.upstream.restart_on_same_port().await.unwrap();
            // The next call finds the old session gone and builds a new one.
            let mut call = rmcp::model::CallToolRequestParams::new("up__echo");
            call.arguments = serde_json::json!({"text": "hi"}).as_object().cloned();
            let _ = watching.client.call_tool(call).await;
            watching.is_told_and_lists_the_late_tool().await;
        });
    }
}

/// A 2026-07-28 client's `subscriptions/listen` stream is told of a change
/// too (within the bound the docs promise, with a margin for a loaded
/// machine).
#[test]
fn a_listen_stream_is_told_of_a_change() {
    run(|| async {
        let upstream = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let gateway = gateway_for(&upstream).await;
        let client = gateway
            .connect_with(
                (),
                rmcp::service::ClientLifecycleMode::Discover {
                    preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                },
            )
            .await;
        let before = tool_names(client.list_all_tools().await.unwrap());
        assert!(!before.contains(&"up__late_tool".to_owned()), "{before:?}");
        let mut filter = rmcp::model::SubscriptionFilter::new();
        filter.tools_list_changed = Some(true);
        let mut subscription = client.peer().listen(filter).await.unwrap();
        upstream.set_late_tool(true).await;
        let told = tokio::time::timeout(std::time::Duration::from_secs(5), subscription.next())
            .await
            .expect("told within 5 s")
            .unwrap();
        assert!(
            matches!(
                told,
                Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))
            ),
            "{told:?}"
        );
        let after = tool_names(client.list_all_tools().await.unwrap());
        assert!(after.contains(&"up__late_tool".to_owned()), "{after:?}");
    });
}

/// A downstream client that says when it is told the tools changed.
#[derive(Clone)]
struct Telling(tokio::sync::mpsc::UnboundedSender<()>);

impl ClientHandler for Telling {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }
}

/// A catalog change costs what changed: when one connection's tools
/// change, or nineteen at once, only those catalogs join the gateway's
/// view (no refresh asks every connection again) and each client is told
/// once per batch, not once per connection.
#[test]
fn a_change_updates_only_its_catalogs_and_is_told_once_per_batch() {
    run_paused(|| async {
        let one = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let many = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let mut toml = http_connection("a", &one.url(), "");
        for n in 0..19 {
            toml.push_str(&http_connection(&format!("b{n}"), &many.url(), ""));
        }
        let gateway = ServedGateway::start(config(&toml)).await;
        let seen = Counting::default();
        let client = gateway.connect(seen.clone()).await;
        let before = tool_names(client.list_all_tools().await.unwrap());
        assert_eq!(
            before.len(),
            20 * before.iter().filter(|n| n.starts_with("a__")).count()
        );

        let refreshes = gateway.state.refreshes();
        one.set_late_tool(true).await;
        eventually!(seen.0.load(Ordering::SeqCst) >= 1);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(seen.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            gateway.state.refreshes(),
            refreshes,
            "no connection but the one that changed was asked"
        );
        let after = tool_names(client.list_all_tools().await.unwrap());
        assert!(after.contains(&"a__late_tool".to_owned()), "{after:?}");

        // Nineteen connections change together: one notification.
        many.set_late_tool(true).await;
        eventually!(seen.0.load(Ordering::SeqCst) >= 2);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(seen.0.load(Ordering::SeqCst), 2, "once for the batch");
        let after = tool_names(client.list_all_tools().await.unwrap());
        assert_eq!(
            after
                .iter()
                .filter(|name| name.ends_with("__late_tool"))
                .count(),
            20
        );
    });
}
