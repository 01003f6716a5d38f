//! Who may call what, over real loopback HTTP with per-client API keys
//! (docs/SECURITY.md): each caller lists only what the `[[access]]` rules
//! allow it, and cannot reach the rest by any route — a call (2025 session
//! and 2026-07-28 stateless, the direct path and rmcp's), a prompt, a
//! resource, the meta-tools — each answered exactly as an unknown name is;
//! the upstream never sees a caller's credentials; the audit log has one
//! line per decided use, without arguments or keys.

mod support;

use mcp_test_support::{TestServer, TestServerOptions};
use rmcp::{
    model::{
        CallToolRequestParams, ErrorCode, GetPromptRequestParams, ProtocolVersion,
        ReadResourceRequestParams,
    },
    service::{ClientLifecycleMode, RoleClient, RunningService},
};
use serde_json::{Value, json};
use support::*;

const READER_KEY: &str = "reader-key-CANARY-7f3a";
const ADMIN_KEY: &str = "admin-key-CANARY-91bc";
/// A tool argument no audit record may hold.
const SECRET_ARGUMENT: &str = "argument-CANARY-55e1";

struct Setup {
    gateway: ServedGateway,
    upstreams: (TestServer, TestServer),
    audit: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let a = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let b = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let toml = format!(
        r#"
[gateway]
expose = "both"
audit_log = "{audit}"

[gateway.keys.reader]
sha256 = "{reader}"
groups = ["readers"]

[gateway.keys.admin]
sha256 = "{admin}"
groups = ["admins"]

[[access]]
who = ["group:readers"]
allow = ["a__echo", "a__add", "a__late_tool", "prompt:a__*", "resource:*"]
deny = ["resource:mcp-supervisor://b/*"]

[[access]]
who = ["group:admins"]
allow = ["connection:*"]
deny = ["b__fail"]
"#,
        audit = audit.display(),
        reader = key_digest(READER_KEY),
        admin = key_digest(ADMIN_KEY),
    ) + &http_connection("a", &a.url(), "")
        + &http_connection("b", &b.url(), "");
    Setup {
        gateway: ServedGateway::start(config(&toml)).await,
        upstreams: (a, b),
        audit,
        _dir: dir,
    }
}

type Client = RunningService<RoleClient, ()>;

async fn client(gateway: &ServedGateway, key: &str, lifecycle: ClientLifecycleMode) -> Client {
    gateway.connect_as((), lifecycle, Some(key)).await
}

fn session() -> ClientLifecycleMode {
    ClientLifecycleMode::Initialize
}

fn stateless() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

async fn tool_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    names
}

async fn call(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<String, (ErrorCode, String)> {
    let mut call = CallToolRequestParams::new(name.to_owned());
    call.arguments = arguments.as_object().cloned();
    match client.call_tool(call).await {
        Ok(result) => Ok(text(&result)),
        Err(rmcp::ServiceError::McpError(error)) => Err((error.code, error.message.to_string())),
        Err(other) => panic!("{name}: {other:?}"),
    }
}

/// What the gateway answers of `name` with the name itself taken out, so
/// a hidden name's answer can be compared with an unknown one's.
fn unnamed(
    answer: Result<String, (ErrorCode, String)>,
    name: &str,
) -> Result<String, (ErrorCode, String)> {
    answer.map_err(|(code, message)| (code, message.replace(name, "NAME")))
}

const META_TOOLS: [&str; 5] = [
    "call_mcp",
    "describe_mcp",
    "get_mcp_tool_schema",
    "list_mcps",
    "search_mcp_tools",
];

fn with_meta(names: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = names
        .iter()
        .chain(META_TOOLS.iter())
        .map(|name| (*name).to_owned())
        .collect();
    all.sort();
    all
}

#[test]
fn a_reader_lists_only_what_the_rules_allow_and_reaches_nothing_else() {
    run(|| async {
        let setup = setup().await;
        for lifecycle in [session(), stateless()] {
            let reader = client(&setup.gateway, READER_KEY, lifecycle).await;
            assert_eq!(tool_names(&reader).await, with_meta(&["a__add", "a__echo"]));
            let echoed = call(&reader, "a__echo", json!({"text": SECRET_ARGUMENT})).await;
            assert_eq!(echoed, Ok(SECRET_ARGUMENT.to_owned()));
            // Hidden tools are answered as unknown ones, by either path.
            let unknown = unnamed(
                call(&reader, "zz__echo", json!({"text": "x"})).await,
                "zz__echo",
            );
            assert!(
                matches!(&unknown, Err((code, _)) if *code == ErrorCode::INVALID_PARAMS),
                "{unknown:?}"
            );
            for hidden in ["b__echo", "a__fail", "a__sleep"] {
                let answer = unnamed(call(&reader, hidden, json!({"text": "x"})).await, hidden);
                assert_eq!(answer, unknown, "{hidden}");
            }
            reader.cancel().await.unwrap();
        }
        let (a, b) = &setup.upstreams;
        assert_eq!(b.tool_calls("echo"), 0, "a hidden tool was called upstream");
        assert_eq!(a.tool_calls("fail"), 0);
    });
}

#[test]
fn the_meta_tools_find_describe_and_call_only_what_the_caller_may_use() {
    run(|| async {
        let setup = setup().await;
        let reader = client(&setup.gateway, READER_KEY, session()).await;
        let listed: Value =
            serde_json::from_str(&call(&reader, "list_mcps", json!({})).await.unwrap()).unwrap();
        let names: Vec<&str> = listed["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a"], "{listed}");
        assert_eq!(listed["connections"][0]["tool_count"], 2, "{listed}");
        let found = call(
            &reader,
            "search_mcp_tools",
            json!({"connection": "a", "query": "fail sleep echo"}),
        )
        .await
        .unwrap();
        assert!(
            found.contains("echo") && !found.contains("\"fail\"") && !found.contains("\"sleep\""),
            "{found}"
        );
        let described = call(&reader, "describe_mcp", json!({"connection": "a"}))
            .await
            .unwrap();
        assert!(!described.contains("\"fail\""), "{described}");
        // A connection the reader reaches nothing of is unknown; a tool it
        // may not use is one its connection does not have.
        let of_b = call(&reader, "describe_mcp", json!({"connection": "b"}))
            .await
            .unwrap();
        let of_nothing = call(&reader, "describe_mcp", json!({"connection": "zz"}))
            .await
            .unwrap();
        assert_eq!(
            of_b.replace("'b'", "'X'"),
            of_nothing.replace("'zz'", "'X'")
        );
        let hidden = call(
            &reader,
            "call_mcp",
            json!({"connection": "a", "tool": "fail", "arguments": {"message": "m"}}),
        )
        .await
        .unwrap();
        let unknown = call(
            &reader,
            "call_mcp",
            json!({"connection": "a", "tool": "nope", "arguments": {}}),
        )
        .await
        .unwrap();
        assert_eq!(
            hidden.replace("'fail'", "'X'"),
            unknown.replace("'nope'", "'X'")
        );
        let schema = call(
            &reader,
            "get_mcp_tool_schema",
            json!({"connection": "a", "tool": "fail"}),
        )
        .await
        .unwrap();
        assert!(schema.contains("Unknown tool 'fail'"), "{schema}");
        let through_b = call(
            &reader,
            "call_mcp",
            json!({"connection": "b", "tool": "echo", "arguments": {"text": "x"}}),
        )
        .await
        .unwrap();
        assert!(
            through_b.contains("'b'") && !through_b.contains('x'),
            "{through_b}"
        );
        assert_eq!(setup.upstreams.0.tool_calls("fail"), 0);
        assert_eq!(setup.upstreams.1.tool_calls("echo"), 0);
        // What it may use, it may call through call_mcp too.
        let echoed = call(
            &reader,
            "call_mcp",
            json!({"connection": "a", "tool": "echo", "arguments": {"text": "hey"}}),
        )
        .await
        .unwrap();
        assert_eq!(echoed, "hey");
    });
}

#[test]
fn prompts_and_resources_follow_the_same_rules() {
    run(|| async {
        let setup = setup().await;
        let reader = client(&setup.gateway, READER_KEY, session()).await;
        let prompts: Vec<String> = reader
            .list_all_prompts()
            .await
            .unwrap()
            .into_iter()
            .map(|prompt| prompt.name)
            .collect();
        assert!(
            prompts.iter().all(|name| name.starts_with("a__")) && !prompts.is_empty(),
            "{prompts:?}"
        );
        let hidden = reader
            .get_prompt(GetPromptRequestParams::new("b__greet"))
            .await
            .unwrap_err()
            .to_string();
        let unknown = reader
            .get_prompt(GetPromptRequestParams::new("zz__greet"))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            hidden.replace("b__greet", "X"),
            unknown.replace("zz__greet", "X")
        );
        // Both upstreams serve the same resources: exposed prefixed, and b's
        // are denied.
        let resources: Vec<String> = reader
            .list_all_resources()
            .await
            .unwrap()
            .into_iter()
            .map(|resource| resource.uri)
            .collect();
        assert!(
            !resources.is_empty()
                && resources
                    .iter()
                    .all(|uri| !uri.starts_with("mcp-supervisor://b/")),
            "{resources:?}"
        );
        let denied = resources[0].replace("mcp-supervisor://a/", "mcp-supervisor://b/");
        let read = reader
            .read_resource(ReadResourceRequestParams::new(denied.clone()))
            .await
            .unwrap_err()
            .to_string();
        let missing = reader
            .read_resource(ReadResourceRequestParams::new("file:///nowhere"))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            read.replace(&denied, "X"),
            missing.replace("file:///nowhere", "X")
        );
        reader
            .read_resource(ReadResourceRequestParams::new(resources[0].clone()))
            .await
            .unwrap();
    });
}

#[test]
fn an_admin_uses_every_connection_but_what_its_rule_denies() {
    run(|| async {
        let setup = setup().await;
        let admin = client(&setup.gateway, ADMIN_KEY, session()).await;
        let names = tool_names(&admin).await;
        assert!(
            names.contains(&"b__echo".to_owned()) && names.contains(&"a__fail".to_owned()),
            "{names:?}"
        );
        assert!(!names.contains(&"b__fail".to_owned()), "{names:?}");
        assert_eq!(
            call(&admin, "b__echo", json!({"text": "hi"})).await,
            Ok("hi".to_owned())
        );
        assert!(
            call(&admin, "b__fail", json!({"message": "m"}))
                .await
                .is_err()
        );
    });
}

#[test]
fn a_request_without_a_known_key_is_refused_and_no_credential_reaches_an_upstream() {
    run(|| async {
        let setup = setup().await;
        let http = reqwest::Client::new();
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        for authorization in [None, Some("Bearer wrong-key"), Some("Basic cmVhZGVyOng=")] {
            let mut request = http
                .post(&setup.gateway.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .json(&initialize);
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{authorization:?}");
            let challenge = response.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .to_owned();
            assert!(challenge.starts_with("Bearer "), "{challenge}");
        }
        let reader = client(&setup.gateway, READER_KEY, session()).await;
        let _ = call(&reader, "a__echo", json!({"text": "x"})).await;
        let admin = client(&setup.gateway, ADMIN_KEY, stateless()).await;
        let _ = call(&admin, "b__echo", json!({"text": "x"})).await;
        for upstream in [&setup.upstreams.0, &setup.upstreams.1] {
            let seen = upstream.control().seen_authorizations();
            assert!(
                seen.iter().all(|value| !value.contains("CANARY")),
                "a caller's key reached an upstream: {seen:?}"
            );
        }
    });
}

#[test]
fn the_audit_log_has_a_line_per_decided_use_and_never_an_argument_or_key() {
    run(|| async {
        let setup = setup().await;
        let reader = client(&setup.gateway, READER_KEY, session()).await;
        let _ = call(&reader, "a__echo", json!({"text": SECRET_ARGUMENT})).await;
        let _ = call(&reader, "b__echo", json!({"text": SECRET_ARGUMENT})).await;
        let _ = call(&reader, "a__add", json!({"a": 1, "b": "not a number"})).await;
        let text = std::fs::read_to_string(&setup.audit).unwrap();
        assert!(!text.contains("CANARY"), "{text}");
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        let allowed = &lines[0];
        assert_eq!(allowed["decision"], "allow");
        assert_eq!(allowed["via"], "key");
        assert_eq!(allowed["client"], "reader");
        assert_eq!(allowed["groups"], json!(["readers"]));
        assert_eq!(allowed["method"], "tools/call");
        assert_eq!(allowed["name"], "a__echo");
        assert_eq!(allowed["connection"], "a");
        assert_eq!(allowed["rule"], "access[0]");
        assert_eq!(allowed["outcome"], "ok");
        assert!(allowed["latency_ms"].as_f64().unwrap() > 0.0);
        let contract = allowed["contract"]
            .as_str()
            .expect("the tool's contract hash");
        assert!(
            contract.len() == 64 && contract.chars().all(|c| c.is_ascii_hexdigit()),
            "{allowed}"
        );
        assert!(allowed["time"].as_str().unwrap().ends_with('Z'));
        let denied = &lines[1];
        assert_eq!(denied["decision"], "deny");
        assert_eq!(denied["name"], "b__echo");
        assert_eq!(denied["outcome"], "denied");
        assert!(denied.get("rule").is_none(), "{denied}");
        assert_eq!(lines[2]["outcome"], "tool_error", "{}", lines[2]);
    });
}

/// A 2026-07-28 listen stream is subscribed to what the caller may use
/// only: a hidden resource is decided (and denied) like a read.
#[test]
fn a_listen_stream_subscribes_to_no_hidden_resource() {
    run(|| async {
        let setup = setup().await;
        let reader = client(&setup.gateway, READER_KEY, stateless()).await;
        let listed: Vec<String> = reader
            .list_all_resources()
            .await
            .unwrap()
            .into_iter()
            .map(|resource| resource.uri)
            .collect();
        let allowed = listed[0].clone();
        let denied = allowed.replace("mcp-supervisor://a/", "mcp-supervisor://b/");
        let mut filter = rmcp::model::SubscriptionFilter::new();
        filter.resource_subscriptions = Some(vec![allowed.clone(), denied.clone()]);
        let _subscription = reader.peer().listen(filter).await.unwrap();
        let decided = |audit: &str| {
            audit
                .lines()
                .map(|line| serde_json::from_str::<Value>(line).unwrap())
                .filter(|line| line["method"] == "subscriptions/listen")
                .map(|line| {
                    (
                        line["name"].as_str().unwrap().to_owned(),
                        line["decision"].as_str().unwrap().to_owned(),
                    )
                })
                .collect::<Vec<_>>()
        };
        mcp_test_support::eventually!(
            decided(&std::fs::read_to_string(&setup.audit).unwrap_or_default()).len() == 2,
            std::time::Duration::from_secs(5)
        );
        let decisions = decided(&std::fs::read_to_string(&setup.audit).unwrap());
        assert!(
            decisions.contains(&(allowed, "allow".to_owned())),
            "{decisions:?}"
        );
        assert!(
            decisions.contains(&(denied, "deny".to_owned())),
            "{decisions:?}"
        );
    });
}

/// A caller over its limit is told so, as a tool's error with when to
/// retry, and nothing is sent upstream; other callers are not held back.
#[test]
fn a_caller_over_its_limit_is_told_when_to_retry() {
    run(|| async {
        let a = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let toml = format!(
            r#"
[gateway]
expose = "both"

[gateway.keys.reader]
sha256 = "{reader}"
groups = ["readers"]

[gateway.keys.admin]
sha256 = "{admin}"
groups = ["admins"]

[[limits]]
who = ["client:reader"]
calls_per_minute = 3
"#,
            reader = key_digest(READER_KEY),
            admin = key_digest(ADMIN_KEY),
        ) + &http_connection("a", &a.url(), "");
        let gateway = ServedGateway::start(config(&toml)).await;
        let reader = client(&gateway, READER_KEY, session()).await;
        for n in 0..3 {
            assert_eq!(
                call(&reader, "a__echo", json!({"text": format!("{n}")})).await,
                Ok(format!("{n}"))
            );
        }
        let mut over = CallToolRequestParams::new("a__echo");
        over.arguments = json!({"text": "x"}).as_object().cloned();
        let refused = reader.call_tool(over).await.unwrap();
        assert_eq!(refused.is_error, Some(true));
        assert!(
            text(&refused).contains("client:reader may make 3 calls a minute"),
            "{}",
            text(&refused)
        );
        let retry_in = refused.structured_content.as_ref().unwrap()["retry_in_s"]
            .as_f64()
            .unwrap();
        assert!(retry_in > 0.0 && retry_in <= 20.0, "{retry_in}");
        // Through call_mcp too.
        let through_meta = call(
            &reader,
            "call_mcp",
            json!({"connection": "a", "tool": "echo", "arguments": {"text": "y"}}),
        )
        .await
        .unwrap();
        assert!(through_meta.contains("Too many calls"), "{through_meta}");
        assert_eq!(a.tool_calls("echo"), 3);
        let admin = client(&gateway, ADMIN_KEY, session()).await;
        assert_eq!(
            call(&admin, "a__echo", json!({"text": "z"})).await,
            Ok("z".to_owned())
        );
    });
}

/// Counts the `tools/list_changed` notifications its session is sent.
#[derive(Clone, Default)]
struct Told(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl rmcp::ClientHandler for Told {
    async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<RoleClient>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Told {
    fn count(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A caller is told its tool list changed only when what it may see did:
/// a tool it may not use coming is not news to it (nor a way to learn of
/// it).
#[test]
fn a_list_change_is_told_only_to_those_who_see_it() {
    run(|| async {
        let setup = setup().await;
        let (reader_told, admin_told) = (Told::default(), Told::default());
        let reader = setup
            .gateway
            .connect_as(reader_told.clone(), session(), Some(READER_KEY))
            .await;
        let admin = setup
            .gateway
            .connect_as(admin_told.clone(), session(), Some(ADMIN_KEY))
            .await;
        let (a, b) = &setup.upstreams;
        b.set_late_tool(true).await;
        mcp_test_support::eventually!(admin_told.count() >= 1, std::time::Duration::from_secs(10));
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            reader_told.count(),
            0,
            "b__late_tool is hidden from the reader"
        );
        a.set_late_tool(true).await;
        mcp_test_support::eventually!(reader_told.count() >= 1, std::time::Duration::from_secs(10));
        let names: Vec<String> = reader
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|tool| tool.name.to_string())
            .collect();
        assert!(
            names.contains(&"a__late_tool".to_owned())
                && !names.contains(&"b__late_tool".to_owned()),
            "{names:?}"
        );
        drop(admin);
    });
}
