//! Listing through the gateway never waits on a sick upstream, and a name a
//! client once listed stays routable: while its connection is slow, parked
//! or retired, it answers with the supervisor's value, never "Unknown tool".
//! Real loopback HTTP, rmcp's client downstream.

mod support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions, eventually};
use rmcp::{
    ClientHandler,
    model::{CallToolRequestParams, CallToolResult, ClientConfig},
    service::{NotificationContext, RoleClient, RunningService},
};
use serde_json::json;
use support::*;

/// A listing answers within this even when an upstream takes seconds to
/// list (loopback hops only; generous for a slow 2-core machine).
const PROMPTLY: Duration = Duration::from_secs(2);

/// A downstream client that counts `tools/list_changed` notifications.
#[derive(Clone, Default)]
struct Counting(Arc<AtomicUsize>);

impl Counting {
    fn seen(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl ClientHandler for Counting {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

type Client = RunningService<RoleClient, Counting>;

async fn servers() -> (TestServer, TestServer) {
    let a = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let b = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    (a, b)
}

async fn tool_names(client: &Client) -> Vec<String> {
    let tools = answered_within(PROMPTLY, "tools/list", client.list_all_tools())
        .await
        .unwrap();
    tools
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

async fn call_echo(client: &Client, name: &str) -> CallToolResult {
    call(client, name, json!({"text": "hi"})).await
}

async fn call(client: &Client, name: &str, arguments: serde_json::Value) -> CallToolResult {
    let mut call = CallToolRequestParams::new(name.to_owned());
    call.arguments = arguments.as_object().cloned();
    client
        .call_tool(call)
        .await
        .unwrap_or_else(|error| panic!("{name}: a value, not a protocol error: {error:?}"))
}

/// Upstream `a` lists its tools in 4 s, `b` at once: a first listing shows
/// `b`'s tools at once, and when `a`'s arrive the client is told the list
/// changed, and the next listing has them.
#[test]
fn a_slow_upstream_does_not_slow_the_listing_and_its_tools_follow() {
    run(|| async {
        let (a, b) = servers().await;
        a.faults().push(FaultRule::once(
            Match::method("tools/list"),
            Fault::delay(Duration::from_secs(4)),
        ));
        let toml = http_connection("a", &a.url(), "") + &http_connection("b", &b.url(), "");
        let gateway = ServedGateway::start(config(&toml)).await;
        let seen = Counting::default();
        let client = gateway.connect(seen.clone()).await;

        let first = tool_names(&client).await;
        assert!(first.contains(&"b__echo".to_owned()), "{first:?}");
        assert!(!first.contains(&"a__echo".to_owned()), "{first:?}");

        eventually!(seen.seen() >= 1, Duration::from_secs(15));
        let later = tool_names(&client).await;
        assert!(later.contains(&"a__echo".to_owned()), "{later:?}");
        assert_eq!(text(&call_echo(&client, "a__echo").await), "hi");
    });
}

/// Six upstreams list their tools late (after the listing stopped waiting
/// for them), within moments of each other, as at a start where every
/// upstream is slow: the client is told the list changed once for them all
/// (twice if they straddle the gathering window), not once per upstream
/// (each of which also rebuilt the view from every connection: quadratic at
/// a thousand), and the next listing has all their tools.
#[test]
fn late_catalogs_that_come_together_are_announced_together() {
    run(|| async {
        const SLOW: usize = 6;
        let mut upstreams = Vec::new();
        let mut toml = String::new();
        for i in 0..SLOW {
            let upstream = TestServer::start(TestServerOptions::default())
                .await
                .unwrap();
            upstream.faults().push(FaultRule::once(
                Match::method("tools/list"),
                Fault::delay(Duration::from_secs(3)),
            ));
            toml += &http_connection(&format!("s{i}"), &upstream.url(), "");
            upstreams.push(upstream);
        }
        let gateway = ServedGateway::start(config(&toml)).await;
        let seen = Counting::default();
        let client = gateway.connect(seen.clone()).await;

        let first = tool_names(&client).await;
        assert!(first.is_empty(), "{first:?}");
        eventually!(seen.seen() >= 1, Duration::from_secs(15));
        // Any other announcement would follow within moments.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            seen.seen() <= 2,
            "told {} times for {SLOW} late catalogs",
            seen.seen()
        );
        let later = tool_names(&client).await;
        for i in 0..SLOW {
            assert!(later.contains(&format!("s{i}__echo")), "{later:?}");
        }
    });
}

/// A listing of several pages asks the connections for their catalogs
/// once, for its first page; the later pages continue from that view (each
/// page used to rebuild it from every connection, waiting again on those
/// still loading: 40 pages for 20,000 tools).
#[test]
fn a_listings_later_pages_ask_no_connection_again() {
    run(|| async {
        let mut options = TestServerOptions::default();
        options.behavior.extra_tools = 600;
        let upstream = TestServer::start(options).await.unwrap();
        let gateway =
            ServedGateway::start(config(&http_connection("a", &upstream.url(), ""))).await;
        let client = gateway.connect(Counting::default()).await;
        let first = tool_names(&client).await;
        assert!(
            first.len() > mcp_supervisor::gateway::paging::PAGE_SIZE,
            "one page only: {}",
            first.len()
        );

        let before = gateway.state.refreshes();
        let again = tool_names(&client).await;
        assert_eq!(again, first);
        assert_eq!(
            gateway.state.refreshes() - before,
            1,
            "the view was rebuilt for more than the first page"
        );
    });
}

/// A client listed `a__echo`; then `a` parks. The tool is still listed (the
/// last good catalog), and a call answers the supervisor's unavailable
/// value, not -32602 "Unknown tool", also after `a`'s catalog is reloaded
/// and cannot be listed.
#[test]
fn a_parked_connections_listed_tool_answers_the_unavailable_value() {
    // Paused time: each 300 ms pause ends only once every task waits, so the
    // catalog reload the list change starts has been tried by the next
    // round, and the 30 s park cannot end meanwhile.
    run_paused(|| async {
        let (a, b) = servers().await;
        let toml = "[supervisor.quarantine]\nbase_cooldown = \"30s\"\n".to_owned()
            + &http_connection("a", &a.url(), "")
            + &http_connection("b", &b.url(), "");
        let gateway = ServedGateway::start(config(&toml)).await;
        let client = gateway.connect(Counting::default()).await;
        assert!(tool_names(&client).await.contains(&"a__echo".to_owned()));

        // Everything `a` is asked fails from now on; a list change makes the
        // supervisor reload (and lose) its catalog.
        a.faults()
            .push(FaultRule::always(Match::Any, Fault::status(503)));
        // A read-only tool: its 503 parks the connection (echo's would be
        // "may have run").
        let parked = call(&client, "a__lookup", json!({"key": "k"})).await;
        assert_eq!(parked.is_error, Some(true), "{parked:?}");
        assert!(
            text(&parked).contains("temporarily unavailable"),
            "{parked:?}"
        );
        a.set_late_tool(true).await;

        for _ in 0..3 {
            let names = tool_names(&client).await;
            assert!(names.contains(&"a__echo".to_owned()), "{names:?}");
            assert!(names.contains(&"b__echo".to_owned()), "{names:?}");
            let again = call_echo(&client, "a__echo").await;
            assert!(
                text(&again).contains("temporarily unavailable"),
                "{again:?}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert_eq!(text(&call_echo(&client, "b__echo").await), "hi");
    });
}

/// A listing's first page with nothing changed keeps the view as it was
/// (the registry's lineup and a comparison, no rebuild); a retirement is
/// seen by the next first page, which leaves the retired connection's tools
/// out (docs/DECISIONS.md #176).
#[test]
fn an_unchanged_first_page_keeps_the_view_and_a_retirement_changes_it() {
    run_paused(|| async {
        let (a, b) = servers().await;
        let toml = "[supervisor.quarantine]\nretire_after = 1\n".to_owned()
            + &http_connection("a", &a.url(), "")
            + &http_connection("b", &b.url(), "");
        let gateway = ServedGateway::start(config(&toml)).await;
        let client = gateway.connect(Counting::default()).await;
        let first = tool_names(&client).await;
        assert!(first.contains(&"b__echo".to_owned()), "{first:?}");

        let (refreshes, rebuilds) = (gateway.state.refreshes(), gateway.state.rebuilds());
        assert_eq!(tool_names(&client).await, first);
        assert_eq!(gateway.state.refreshes() - refreshes, 1);
        assert_eq!(
            gateway.state.rebuilds(),
            rebuilds,
            "nothing changed, yet the view was built again"
        );

        b.faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
        let retired = call(&client, "b__lookup", json!({"key": "k"})).await;
        assert!(
            text(&retired).contains("will not be retried"),
            "{retired:?}"
        );
        // The registry hears of the retirement one mailbox hop after the call.
        let mut later = tool_names(&client).await;
        for _ in 0..20 {
            if !later.contains(&"b__echo".to_owned()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            later = tool_names(&client).await;
        }
        assert!(!later.contains(&"b__echo".to_owned()), "{later:?}");
        assert!(later.contains(&"a__echo".to_owned()), "{later:?}");
        assert!(gateway.state.rebuilds() > rebuilds);
        // Still routable: its calls are answered with the supervisor's value.
        let refused = call_echo(&client, "b__echo").await;
        assert!(
            text(&refused).contains("will not be retried"),
            "{refused:?}"
        );
    });
}
