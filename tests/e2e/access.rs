//! Who may use what, end to end (docs/SECURITY.md): the built
//! `mcp-supervisor serve` as an OAuth resource server for a real OpenID
//! provider (`oidc-provider`, `mcp_test_support::idp`), with per-client API
//! keys and `[[access]]` rules, in front of `mcp-conformance-server`
//! (`prefix = "auto"`, so the fixture's names pass through), used by real
//! clients:
//!
//! - the Python SDK 2.x logging in by itself (its own `OAuthClientProvider`:
//!   the 401, the protected-resource metadata, the IdP's metadata, dynamic
//!   registration, the authorization code with PKCE; the IdP logs its
//!   default user in at once) as `alice` of group `readers`, then as `bob`
//!   of no group (`tests/interop/python_oauth_client_v2.py`);
//! - the MCP Inspector's CLI with a per-client key (`--header`);
//! - a machine client with a client-credentials token of the IdP.
//!
//! Each lists only what its rules allow, reaches nothing else (a hidden tool
//! is answered as an unknown one, by its name and through `call_mcp`), and
//! the audit log has one line per decided use with no token or key in it.

use std::{
    panic::{AssertUnwindSafe, catch_unwind, resume_unwind},
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use e2e::{
    PythonSdk, Run, Served, UpstreamTransport, conformance_connection, inspector, repo_root,
    run_bounded, toml_string,
};
use mcp_test_support::idp::{Idp, IdpClient, IdpOptions, IdpUser};
use serde_json::{Value, json};

/// The CI bot's key (`[gateway.keys.ci-bot]`) and its SHA-256, hex
/// (`printf %s KEY | sha256sum`).
const CI_KEY: &str = "ci-bot-key-CANARY-4d2e";
const CI_KEY_SHA256: &str = "201341a3d3fe503d2ae12dc7a6876d46b62fbd497e512bf9aa4e262b6b26d390";

/// A static client of the IdP, of group `deploy`, that gets its tokens by
/// client credentials.
const DEPLOYER: &str = "deployer";
const DEPLOYER_SECRET: &str = "deployer-secret-CANARY-77b1";

const META_TOOLS: [&str; 5] = [
    "call_mcp",
    "describe_mcp",
    "get_mcp_tool_schema",
    "list_mcps",
    "search_mcp_tools",
];

const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

/// The rules: `readers` use two tools, the CI bot two others, `deploy` the
/// `*_content` tools but audio; anyone else nothing (a rule exists, so no
/// match is a denial).
const RULES: &str = r#"
[[access]]
who = ["group:readers"]
allow = ["test_simple_text", "test_image_content"]

[[access]]
who = ["client:ci-bot"]
allow = ["test_error_handling", "test_multiple_content_types"]

[[access]]
who = ["group:deploy"]
allow = ["test_simple_text", "test_*_content"]
deny = ["test_audio_content"]
"#;

/// An IdP, and a gateway taking its tokens in front of the conformance
/// server (a stdio child of the supervisor).
struct Setup {
    /// Declared first: stopped before the IdP it asks for keys.
    served: Served,
    idp: Idp,
    /// Drives the IdP's handle; dropped after it.
    runtime: tokio::runtime::Runtime,
    /// `http://127.0.0.1:PORT/mcp`: the gateway's URL and its `public_url`.
    public_url: String,
    audit: PathBuf,
    dir: tempfile::TempDir,
}

impl Setup {
    fn start() -> Setup {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let idp = runtime
            .block_on(Idp::start_with(IdpOptions {
                clients: vec![IdpClient::new(DEPLOYER, DEPLOYER_SECRET).groups(&["deploy"])],
                // alice, the first, logs in when an authorization names no one.
                users: vec![
                    IdpUser::new("alice", &["readers"]),
                    IdpUser::new("bob", &[]),
                ],
                ..IdpOptions::default()
            }))
            .expect("the IdP starts");
        let dir = tempfile::tempdir().unwrap();
        let audit = dir.path().join("audit.jsonl");
        let (connection, _no_http_upstream) = conformance_connection(UpstreamTransport::Stdio);
        // The resource identifier must be the URL clients use (the SDK checks
        // the metadata's `resource` against it), so the port is chosen here;
        // another process may take it in between: then try another.
        let mut attempt = 0;
        let (served, public_url) = loop {
            attempt += 1;
            let port = free_port();
            let public_url = format!("http://127.0.0.1:{port}/mcp");
            let config = format!(
                "[gateway]\nlisten = \"127.0.0.1:{port}\"\npublic_url = {url}\nprefix = \"auto\"\n\
                 expose = \"both\"\naudit_log = {audit}\n\
                 auth = {{ kind = \"oauth\", issuer = {issuer}, scopes = [\"tools:call\"] }}\n\n\
                 [gateway.keys.ci-bot]\nsha256 = \"{CI_KEY_SHA256}\"\ngroups = [\"ci\"]\n\
                 {RULES}\n{connection}",
                url = toml_string(&public_url),
                audit = toml_string(&audit.to_string_lossy()),
                issuer = toml_string(&idp.issuer()),
            );
            match catch_unwind(AssertUnwindSafe(|| Served::start(&config))) {
                Ok(served) => break (served, public_url),
                Err(panic) if attempt >= 3 => resume_unwind(panic),
                Err(_) => continue,
            }
        };
        assert_eq!(served.gateway_url, public_url);
        Setup {
            served,
            idp,
            runtime,
            public_url,
            audit,
            dir,
        }
    }

    /// `tests/interop/python_oauth_client_v2.py` against the gateway with
    /// `options` and `TOOL ARGS_JSON` pairs; it must succeed. Returns its
    /// document and the access token it used (`--token-out`).
    fn python(&self, options: &[&str], calls: &[(&str, Value)]) -> (Value, String) {
        let token_file = self.dir.path().join(format!("token-{}", next_run()));
        let mut command = Command::new(PythonSdk::V2.python());
        command
            .arg(repo_root().join("tests/interop/python_oauth_client_v2.py"))
            .arg("--token-out")
            .arg(&token_file)
            .args(options)
            .arg(&self.public_url)
            .env("NO_PROXY", "127.0.0.1,localhost");
        for (tool, arguments) in calls {
            command.arg(tool).arg(arguments.to_string());
        }
        // The script bounds each request and its whole run (90 s) itself;
        // this only stops a hung interpreter.
        let run = run_bounded(&mut command, Duration::from_secs(120));
        let output = self.document(&run);
        let token = std::fs::read_to_string(&token_file).expect("the script wrote its token");
        assert!(!token.is_empty(), "{run:?}");
        (output, token)
    }

    /// The JSON document of a run that must have succeeded.
    fn document(&self, run: &Run) -> Value {
        assert_eq!(
            run.code,
            Some(0),
            "the client failed: {run:?}\nsupervisor:\n{}",
            self.served.stderr()
        );
        serde_json::from_str(&run.stdout)
            .unwrap_or_else(|error| panic!("the client printed no JSON ({error}): {run:?}"))
    }

    /// The Inspector's CLI (`--cli --format json`) in protocol `era` with
    /// `args`, sending `header` when given, against the gateway.
    fn inspector(&self, home: &Path, era: &str, header: Option<&str>, args: &[&str]) -> Run {
        let mut all = vec!["--cli", "--protocol-era", era, "--format", "json"];
        all.extend_from_slice(args);
        if let Some(header) = header {
            // `--header` takes several values: an option must follow it.
            all.extend(["--header", header]);
        }
        all.extend(["--transport", "http", "--server-url", &self.public_url]);
        inspector(home, &all)
    }

    /// The audit log's records, once it has at least `count` (it is
    /// written as each use ends); then it must have exactly `count`.
    fn audit(&self, count: usize) -> Vec<Value> {
        let read = || -> Vec<Value> {
            std::fs::read_to_string(&self.audit)
                .unwrap_or_default()
                .lines()
                .map(|line| {
                    serde_json::from_str(line).unwrap_or_else(|error| {
                        panic!("an audit line is not JSON ({error}): {line}")
                    })
                })
                .collect()
        };
        e2e::wait_until(Duration::from_secs(10), || read().len() >= count);
        let records = read();
        assert_eq!(
            records.len(),
            count,
            "not one audit line per decided use: {records:#?}"
        );
        records
    }

    /// Neither the audit log nor the gateway's own log holds any of
    /// `secrets`, nor anything shaped like a JWT.
    fn assert_no_secret_logged(&self, secrets: &[&str]) {
        let audit = std::fs::read_to_string(&self.audit).unwrap_or_default();
        let log = self.served.stderr();
        for (what, text) in [("the audit log", &audit), ("the gateway's log", &log)] {
            for secret in secrets {
                assert!(!secret.is_empty());
                assert!(!text.contains(secret), "{what} holds a credential:\n{text}");
            }
            assert!(!text.contains("eyJ"), "{what} holds a JWT:\n{text}");
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A number distinct for every client run of the test process.
fn next_run() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    RUNS.fetch_add(1, Ordering::Relaxed)
}

/// The names listed in `output["tools"]` other than the meta-tools, sorted;
/// the meta-tools must all be there (`expose = "both"`).
fn upstream_tools(output: &Value) -> Vec<String> {
    let all: Vec<String> = output["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {output:#}"))
        .iter()
        .map(|name| name.as_str().unwrap().to_owned())
        .collect();
    split_meta(all)
}

/// `names` without the meta-tools, sorted; checks that all are there.
fn split_meta(names: Vec<String>) -> Vec<String> {
    for meta in META_TOOLS {
        assert!(
            names.iter().any(|name| name == meta),
            "{meta} is not listed: {names:?}"
        );
    }
    let mut upstream: Vec<String> = names
        .into_iter()
        .filter(|name| !META_TOOLS.contains(&name.as_str()))
        .collect();
    upstream.sort();
    upstream
}

/// The record of the `index`th call in a script's document.
fn call(output: &Value, index: usize) -> &Value {
    &output["calls"][index]
}

/// The text of a call that worked.
fn call_text(output: &Value, index: usize) -> &str {
    let record = call(output, index);
    assert_eq!(record["ok"], true, "{record:#}");
    record["text"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {record:#}"))
}

/// The error of a call answered with one, its tool's name taken out (so
/// that a hidden tool's can be compared with an unknown one's).
fn call_error(output: &Value, index: usize) -> (i64, String) {
    let record = call(output, index);
    assert_eq!(record["ok"], false, "{record:#}");
    let tool = record["tool"].as_str().unwrap();
    (
        record["error"]["code"].as_i64().unwrap(),
        record["error"]["message"]
            .as_str()
            .unwrap()
            .replace(tool, "NAME"),
    )
}

/// The text of a `call_mcp` answer (a tool result) with `tool` taken out.
fn meta_text(output: &Value, index: usize, tool: &str) -> (bool, String) {
    let record = call(output, index);
    assert_eq!(record["ok"], true, "{record:#}");
    (
        record["is_error"].as_bool().unwrap(),
        record["text"][0].as_str().unwrap().replace(tool, "NAME"),
    )
}

/// Checks an audit record: who (`via`, `client`, `groups`), what, the
/// decision and its outcome; a record of an allowed use names its rule.
fn assert_record(record: &Value, who: (&str, &str, &[&str]), name: &str, outcome: &str) {
    let (via, client, groups) = who;
    assert_eq!(record["via"], via, "{record}");
    assert_eq!(record["client"], client, "{record}");
    assert_eq!(record["groups"], json!(groups), "{record}");
    assert_eq!(record["method"], "tools/call", "{record}");
    assert_eq!(record["name"], name, "{record}");
    assert_eq!(record["connection"], "conformance", "{record}");
    assert_eq!(record["outcome"], outcome, "{record}");
    let allowed = outcome != "denied";
    assert_eq!(
        record["decision"],
        if allowed { "allow" } else { "deny" },
        "{record}"
    );
    if allowed {
        assert!(
            record["rule"]
                .as_str()
                .is_some_and(|rule| rule.starts_with("access[")),
            "{record}"
        );
    }
    assert!(
        record["time"]
            .as_str()
            .is_some_and(|time| time.ends_with('Z')),
        "{record}"
    );
}

/// (a) The Python SDK's own OAuth client, as `alice` (group `readers`),
/// then `bob` (no group): each logs in by itself, lists only what the rules
/// give its groups, calls what it may, and a hidden tool is answered as an
/// unknown one — by its name and through `call_mcp`.
#[test]
fn the_python_sdk_logs_in_by_itself_and_its_user_uses_only_what_the_rules_allow() {
    let setup = Setup::start();
    let calls = [
        ("test_simple_text", json!({})),
        ("test_error_handling", json!({})),
        ("no_such_tool", json!({})),
    ];

    let (alice, alice_token) = setup.python(&[], &calls);
    assert_eq!(alice["protocol_version"], "2026-07-28", "{alice:#}");
    let oauth = &alice["oauth"];
    assert_eq!(oauth["flow"], "authorization_code", "{oauth}");
    assert_eq!(oauth["authorizations"], 1, "{oauth}");
    let authorization_url = oauth["authorization_url"].as_str().unwrap();
    assert!(
        authorization_url.starts_with(&setup.idp.url("/auth?")),
        "the SDK did not find the IdP through the gateway's metadata: {authorization_url}"
    );
    let alice_client = oauth["client_id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| panic!("no client registered: {oauth}"))
        .to_owned();
    assert_eq!(
        upstream_tools(&alice),
        ["test_image_content", "test_simple_text"]
    );
    assert_eq!(call_text(&alice, 0), SIMPLE_TEXT);
    let hidden = call_error(&alice, 1);
    assert_eq!(hidden.0, -32602, "{alice:#}");
    assert_eq!(
        hidden,
        call_error(&alice, 2),
        "a hidden tool is answered unlike an unknown one"
    );

    // Someone whose groups no rule names uses nothing (only the meta-tools
    // are listed, and they reach nothing).
    setup.runtime.block_on(setup.idp.set_default_user("bob"));
    let (bob, bob_token) = setup.python(&[], &[("test_simple_text", json!({}))]);
    assert_eq!(upstream_tools(&bob), Vec::<String>::new(), "{bob:#}");
    assert_eq!(call_error(&bob, 0), hidden, "{bob:#}");

    // One line per decided use; the unknown name is no use of anything.
    let records = setup.audit(3);
    let alice_is = ("token", alice_client.as_str(), &["readers"][..]);
    assert_record(&records[0], alice_is, "test_simple_text", "ok");
    assert_eq!(records[0]["user"], "alice", "{}", records[0]);
    assert_eq!(records[0]["rule"], "access[0]", "{}", records[0]);
    assert_record(&records[1], alice_is, "test_error_handling", "denied");
    assert_eq!(records[2]["user"], "bob", "{}", records[2]);
    assert_eq!(records[2]["decision"], "deny", "{}", records[2]);
    assert_eq!(records[2]["name"], "test_simple_text", "{}", records[2]);
    setup.assert_no_secret_logged(&[&alice_token, &bob_token]);

    // Through the meta-tools (and in the legacy era, with the initialize
    // handshake): a hidden tool is one the connection does not have.
    setup.runtime.block_on(setup.idp.set_default_user("alice"));
    let through = |tool: &str| json!({"connection": "conformance", "tool": tool, "arguments": {}});
    let (legacy, _) = setup.python(
        &["--mode", "legacy"],
        &[
            ("call_mcp", through("test_simple_text")),
            ("call_mcp", through("test_error_handling")),
            ("call_mcp", through("no_such_tool")),
        ],
    );
    assert_eq!(legacy["protocol_version"], "2025-11-25", "{legacy:#}");
    assert_eq!(
        upstream_tools(&legacy),
        ["test_image_content", "test_simple_text"]
    );
    assert_eq!(call_text(&legacy, 0), SIMPLE_TEXT);
    let hidden = meta_text(&legacy, 1, "test_error_handling");
    assert!(hidden.0, "{legacy:#}");
    assert_eq!(hidden, meta_text(&legacy, 2, "no_such_tool"), "{legacy:#}");
}

/// (b) The Inspector's CLI with the CI bot's key in an `Authorization`
/// header: in both protocol eras it lists only the bot's tools, calls one,
/// and cannot call another's; with no key it is sent to log in (it found the
/// gateway's OAuth metadata from the 401).
#[test]
fn the_inspector_with_a_client_key_lists_and_calls_only_that_clients_tools() {
    let setup = Setup::start();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let bearer = format!("Authorization: Bearer {CI_KEY}");
    for era in ["legacy", "modern"] {
        let run = setup.inspector(home, era, Some(&bearer), &["--method", "tools/list"]);
        let listed = setup.document(&run);
        let names: Vec<String> = listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{era}: no tools: {listed:#}"))
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            split_meta(names),
            ["test_error_handling", "test_multiple_content_types"],
            "{era}"
        );
    }
    let called = setup.inspector(
        home,
        "modern",
        Some(&bearer),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "test_multiple_content_types",
        ],
    );
    let called = setup.document(&called);
    assert_ne!(called["result"]["isError"], true, "{called:#}");
    assert!(
        !called["result"]["content"].as_array().unwrap().is_empty(),
        "{called:#}"
    );
    // The Inspector checks the listing before it calls: a hidden tool is
    // not there to call.
    let hidden = setup.inspector(
        home,
        "legacy",
        Some(&bearer),
        &["--method", "tools/call", "--tool-name", "test_simple_text"],
    );
    assert_ne!(hidden.code, Some(0), "{hidden:?}");
    assert!(hidden.all_output().contains("not found"), "{hidden:?}");
    for header in [None, Some("Authorization: Bearer not-a-key")] {
        let refused = setup.inspector(home, "modern", header, &["--method", "tools/list"]);
        assert_ne!(refused.code, Some(0), "{refused:?}");
        assert!(
            refused.all_output().contains("auth_required"),
            "{header:?}: {refused:?}"
        );
    }

    let records = setup.audit(1);
    assert_record(
        &records[0],
        ("key", "ci-bot", &["ci"]),
        "test_multiple_content_types",
        "ok",
    );
    assert_eq!(records[0]["rule"], "access[1]", "{}", records[0]);
    assert!(records[0].get("user").is_none(), "{}", records[0]);
    setup.assert_no_secret_logged(&[CI_KEY]);
}

/// (c) A machine client: a client-credentials token of the IdP for the
/// gateway's `public_url` (what the 401 and the metadata point it to),
/// used as a bearer token, reaches what its client's group may use and
/// nothing else; a token for another resource is refused.
#[test]
fn a_client_credentials_token_reaches_only_what_its_clients_group_may_use() {
    let setup = Setup::start();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let origin = setup.public_url.trim_end_matches("/mcp");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "machine", "version": "1"}}});
    let post = |token: Option<String>| {
        let mut request = http
            .post(&setup.public_url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let (challenge, metadata) = setup.runtime.block_on(async {
        let refused = post(None).await.unwrap();
        assert_eq!(refused.status(), 401);
        let challenge = refused.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        let metadata: Value = http
            .get(format!("{origin}/.well-known/oauth-protected-resource/mcp"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (challenge, metadata)
    });
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\""
        )) && challenge.contains("scope=\"tools:call\""),
        "{challenge}"
    );
    assert_eq!(
        metadata["resource"],
        setup.public_url.as_str(),
        "{metadata}"
    );
    assert_eq!(
        metadata["authorization_servers"],
        json!([setup.idp.issuer()])
    );

    let token = setup.runtime.block_on(setup.idp.client_credentials(
        DEPLOYER,
        DEPLOYER_SECRET,
        &setup.public_url,
        "tools:call",
    ));
    let elsewhere = setup.runtime.block_on(setup.idp.client_credentials(
        DEPLOYER,
        DEPLOYER_SECRET,
        "http://other.example/mcp",
        "tools:call",
    ));
    let status = setup
        .runtime
        .block_on(async { post(Some(elsewhere.clone())).await.unwrap().status() });
    assert_eq!(status, 401, "a token for another resource was taken");

    let (output, used) = setup.python(
        &["--token", &token],
        &[
            ("test_simple_text", json!({})),
            ("test_audio_content", json!({})),
            ("test_error_handling", json!({})),
        ],
    );
    assert_eq!(used, token);
    assert_eq!(output["oauth"]["flow"], "token", "{output:#}");
    assert_eq!(
        upstream_tools(&output),
        ["test_image_content", "test_simple_text"]
    );
    assert_eq!(call_text(&output, 0), SIMPLE_TEXT);
    // Denied by the rule's `deny`, and by no rule at all: both not there.
    let denied = call_error(&output, 1);
    assert_eq!(denied.0, -32602, "{output:#}");
    assert_eq!(denied, call_error(&output, 2));

    let records = setup.audit(3);
    let deployer = ("token", DEPLOYER, &["deploy"][..]);
    assert_record(&records[0], deployer, "test_simple_text", "ok");
    assert_eq!(records[0]["rule"], "access[2]", "{}", records[0]);
    assert_record(&records[1], deployer, "test_audio_content", "denied");
    assert_record(&records[2], deployer, "test_error_handling", "denied");
    setup.assert_no_secret_logged(&[&token, &elsewhere, DEPLOYER_SECRET]);
}

/// (d) A call through `call_mcp` is a use like any other: one audit line
/// each, allowed or denied, naming the tool called (docs/SECURITY.md, "The
/// audit log": "each call … allowed or denied").
#[test]
fn calls_through_call_mcp_are_audited_like_direct_ones() {
    let setup = Setup::start();
    let through = |tool: &str| json!({"connection": "conformance", "tool": tool, "arguments": {}});
    let (output, token) = setup.python(
        &[],
        &[
            ("call_mcp", through("test_simple_text")),
            ("call_mcp", through("test_error_handling")),
        ],
    );
    assert_eq!(call_text(&output, 0), SIMPLE_TEXT);
    let client = output["oauth"]["client_id"].as_str().unwrap();
    let records = setup.audit(2);
    let alice = ("token", client, &["readers"][..]);
    assert_record(&records[0], alice, "test_simple_text", "ok");
    assert_record(&records[1], alice, "test_error_handling", "denied");
    setup.assert_no_secret_logged(&[&token]);
}
