//! The registry's routes (docs/DECISIONS.md #118): the gateway sends a
//! request straight to a connection's actor when the registry has a route
//! to it, and the registry keeps each route true to what it would do
//! itself: a route exists only while the connection's actor runs with its
//! catalog loaded, under the config it runs with; a reset, a restart, a
//! reload, a catalog reload and the shutdown take it away. Real loopback
//! HTTP, a real test server upstream.

mod support;

use std::time::Duration;

use actix::{Actor, Addr};
use mcp_supervisor::{
    CallOutcome, Forwarded,
    call::ToolCall,
    registry::{
        CrashConnection, Forward, ListConnections, Registry, Reload, Routes, ShareRoutes, Shutdown,
    },
    telemetry::TraceParent,
};
use mcp_test_support::{TestServer, TestServerOptions, eventually};
use rmcp::model::{CallToolRequestParams, ServerResult};
use support::*;

/// `echo` of "hi" on `connection`, as the gateway forwards it.
fn echo_forward(connection: &str) -> Forward {
    Forward {
        connection: connection.into(),
        request: ToolCall::new("echo", echo_args()).into(),
        link: None,
        trace: TraceParent::none(),
    }
}

/// What `routes` makes of an `echo` on `a`: `None` when it has no route.
async fn on_route(routes: &Routes) -> Option<Forwarded> {
    Some(routes.get("a")?.forward(echo_forward("a")).await)
}

fn echoed(forwarded: &Forwarded) -> bool {
    matches!(
        forwarded,
        Forwarded::Answered(result)
            if matches!(&**result, ServerResult::CallToolResult(result) if text(result) == "hi")
    )
}

/// A test server, a registry whose connection `a` points at it, and the
/// registry's routes.
async fn registry_with_routes() -> (TestServer, Addr<Registry>, Routes) {
    let upstream = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let toml = http_connection("a", &upstream.url(), "");
    let registry = Registry::new(config(&toml)).start();
    let routes = registry.send(ShareRoutes).await.unwrap();
    (upstream, registry, routes)
}

#[test]
fn a_route_is_there_only_while_the_registry_would_send_the_same_way() {
    run(|| async {
        let (upstream, registry, routes) = registry_with_routes().await;

        // Not started yet: the registry's.
        assert!(!routes.has("a"));
        assert!(on_route(&routes).await.is_none());

        // Started, catalog loaded: a route, which reaches the upstream.
        assert_eq!(echo_text(&registry, "a").await, "hi");
        assert!(routes.has("a"));
        let calls = upstream.tool_calls("echo");
        let sent = on_route(&routes).await.expect("a route after a call");
        assert!(echoed(&sent), "{sent:?}");
        assert_eq!(upstream.tool_calls("echo"), calls + 1);

        // A reset stops the actor: no route until the next use.
        reset(&registry, "a").await;
        assert!(!routes.has("a"));
        assert_eq!(echo_text(&registry, "a").await, "hi");
        assert!(routes.has("a"));

        // A crash: the restarted actor loads its catalog again first.
        registry
            .send(CrashConnection {
                connection: "a".into(),
            })
            .await
            .unwrap();
        eventually!(!routes.has("a"));
        assert_eq!(echo_text(&registry, "a").await, "hi");
        assert!(routes.has("a"));
        assert!(echoed(&on_route(&routes).await.unwrap()));

        // A reload that changes the connection: the route goes; once back,
        // it carries the new allowlist.
        let changed = http_connection("a", &upstream.url(), "allowed_tools = [\"add\"]");
        registry.send(Reload(config(&changed))).await.unwrap();
        assert!(!routes.has("a"));
        let refused = call(&registry, "a", "echo", echo_args()).await;
        assert!(
            matches!(refused, CallOutcome::Rejected { .. }),
            "{refused:?}"
        );
        let sum = call(
            &registry,
            "a",
            "add",
            args(&[("a", serde_json::json!(1)), ("b", serde_json::json!(2))]),
        )
        .await;
        assert_eq!(text_of(&sum), "3");
        assert!(routes.has("a"));
        let calls = upstream.tool_calls("echo");
        let refused = on_route(&routes).await.unwrap();
        assert!(
            matches!(refused, Forwarded::Refused(CallOutcome::Rejected { .. })),
            "{refused:?}"
        );
        assert_eq!(upstream.tool_calls("echo"), calls);

        // Removed by a reload: no route, and the registry says it is unknown.
        registry
            .send(Reload(config(&http_connection("b", &upstream.url(), ""))))
            .await
            .unwrap();
        assert!(!routes.has("a"));
        assert_eq!(registry.send(ListConnections).await.unwrap().len(), 1);

        // Shut down: no route to anything.
        assert_eq!(echo_text(&registry, "b").await, "hi");
        assert!(routes.has("b"));
        registry.send(Shutdown).await.unwrap();
        assert!(!routes.has("b"));
    });
}

/// A catalog loaded again (the upstream said its tools changed) is the
/// route's catalog once it is there: a tool only the new one lists is
/// called on the route.
#[test]
fn a_reloaded_catalog_is_the_routes() {
    run(|| async {
        let (upstream, registry, routes) = registry_with_routes().await;
        assert_eq!(echo_text(&registry, "a").await, "hi");
        let late = || Forward {
            request: ToolCall::new(mcp_test_support::LATE_TOOL, None).into(),
            ..echo_forward("a")
        };
        let unknown = routes.get("a").unwrap().forward(late()).await;
        assert!(
            matches!(unknown, Forwarded::Refused(CallOutcome::Rejected { .. })),
            "{unknown:?}"
        );

        upstream.set_late_tool(true).await;
        let called = mcp_test_support::wait_until_async(Duration::from_secs(10), || async {
            match routes.get("a") {
                Some(route) => matches!(route.forward(late()).await, Forwarded::Answered(_)),
                None => false,
            }
        })
        .await;
        assert!(called, "late_tool never reached on the route");
        assert_eq!(upstream.tool_calls(mcp_test_support::LATE_TOOL), 1);
    });
}

/// Through the gateway: a reload that narrows a connection's allowlist
/// holds at once for a client that has already called it (its route is
/// gone, not kept with the old config).
#[test]
fn the_gateway_keeps_to_a_reloaded_allowlist() {
    run(|| async {
        let upstream = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let gateway =
            ServedGateway::start(config(&http_connection("a", &upstream.url(), ""))).await;
        let client = gateway.connect(()).await;
        let echo = || {
            let mut params = CallToolRequestParams::new("a__echo");
            params.arguments = echo_args();
            params
        };
        let answer = client.call_tool(echo()).await.unwrap();
        assert_eq!(text(&answer), "hi");
        assert!(gateway.state.routes().await.has("a"));

        let narrowed = http_connection("a", &upstream.url(), "allowed_tools = [\"add\"]");
        gateway
            .registry
            .send(Reload(config(&narrowed)))
            .await
            .unwrap();
        let calls = upstream.tool_calls("echo");
        let refused = client.call_tool(echo()).await;
        assert!(
            refused.as_ref().is_ok_and(
                |answer| answer.is_error == Some(true) && text(answer).contains("Unknown tool")
            ),
            "{refused:?}"
        );
        assert_eq!(upstream.tool_calls("echo"), calls);
        client.cancel().await.unwrap();
    });
}
