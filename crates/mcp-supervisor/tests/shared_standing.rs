//! No client can hurt what other clients share (docs/RELIABILITY.md): a
//! call whose arguments not every reader reads alike is its sender's
//! problem. Through a real gateway on loopback HTTP, to three real
//! upstreams: the in-repo `mcp-test-server` over stdio (rmcp), the Python
//! SDK's FastMCP over streamable HTTP (another parser altogether), and the
//! in-process rmcp test server over HTTP; by a 2025 session on the direct
//! path, one on rmcp's (its client declared sampling), and 2026-07-28
//! requests on both. Each bad call is answered its sender with `-32602`;
//! no connection's standing moves, no child is respawned, no upstream sees
//! a request for it, and another client's next call succeeds at once.

mod support;

use mcp_supervisor::{ConnectionState, registry::Status};
use mcp_test_support::{TestServer, TestServerOptions, test_server_binary};
use reqwest::header;
use serde_json::{Value, json};
use support::{raw::*, *};

/// The bodies that parked a shared upstream before the door (issue 46),
/// as a call's arguments.
fn unreadable_arguments() -> Vec<String> {
    vec![
        r#"{"text":"\ud800","name":"x"}"#.to_owned(),
        r#"{"text":"x","name":"x","n":1e400}"#.to_owned(),
        format!(
            r#"{{"text":"x","name":"x","d":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        ),
        format!(r#"{{"text":"x","name":"x","n":{}}}"#, "9".repeat(400)),
        r#"{"text":"a","name":"x","text":"b"}"#.to_owned(),
    ]
}

/// A connection and a call that works on it.
struct Upstream {
    tool: &'static str,
    arguments: Value,
}

fn upstreams() -> [Upstream; 3] {
    [
        Upstream {
            tool: "s__echo",
            arguments: json!({"text": "still here"}),
        },
        Upstream {
            tool: "p__greet",
            arguments: json!({"name": "still here"}),
        },
        Upstream {
            tool: "r__echo",
            arguments: json!({"text": "still here"}),
        },
    ]
}

fn call(id: u64, tool: &str, arguments: &str, modern: bool) -> String {
    let meta = if modern {
        r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#
    } else {
        ""
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}{meta}}}}}"#
    )
}

/// A 2026-07-28 request (no session) of `body`: with the SEP-2243 headers
/// the direct path takes, or (`rmcp`) with one it does not.
fn modern(
    http: &reqwest::Client,
    url: &str,
    tool: &str,
    body: String,
    rmcp: bool,
) -> reqwest::RequestBuilder {
    let request = http
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool);
    if rmcp {
        // Not the direct path's: rmcp's server reads it.
        request.header("mcp-param-extra", "1").body(body)
    } else {
        request.body(body)
    }
}

/// What must not move: each connection's standing and the work it did.
#[derive(Debug, PartialEq)]
struct Standing {
    state: ConnectionState,
    parks: u64,
    restarts: u32,
    last_failure: bool,
    failures: u64,
    rejected: u64,
    unavailable: u64,
}

async fn standing(gateway: &ServedGateway) -> Vec<(String, Standing)> {
    let mut all = gateway.registry.send(Status).await.unwrap();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all.into_iter()
        .map(|status| {
            let standing = Standing {
                state: status.state,
                parks: status.parks,
                restarts: status.restarts,
                last_failure: status.last_failure.is_some(),
                failures: status.failures.values().sum(),
                rejected: status.calls.rejected,
                unavailable: status.calls.unavailable,
            };
            (status.name, standing)
        })
        .collect()
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

#[test]
fn unreadable_arguments_are_their_senders_problem_on_every_way_and_upstream() {
    run(|| async {
        let rmcp_upstream = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (pid_file, count_file) = (dir.path().join("pid"), dir.path().join("count"));
        let (mut python_server, python_url) = python_http_server().await;
        let test_server = test_server_binary().display().to_string();
        let toml = format!(
            "[supervisor]\ncall_timeout = \"30s\"\nconnect_timeout = \"30s\"\n{}{}{}",
            stdio_connection(
                "s",
                &test_server,
                &[
                    "--pid-file",
                    path_str(&pid_file),
                    "--count-file",
                    path_str(&count_file)
                ],
                ""
            ),
            http_connection("p", &python_url, ""),
            http_connection("r", &rmcp_upstream.url(), ""),
        );
        let gateway = ServedGateway::start(config(&toml)).await;
        let http = http();
        let url = &gateway.url;

        // Another client, whose calls must keep working; it warms every
        // connection first (the child started, every session open).
        let neighbour = session(&http, url, json!({})).await;
        let works = |id: u64| {
            let (http, neighbour) = (&http, &neighbour);
            async move {
                for upstream in upstreams() {
                    let body = call(id, upstream.tool, &upstream.arguments.to_string(), false);
                    let answer =
                        exchange(http, url, neighbour, &serde_json::from_str(&body).unwrap()).await;
                    let answer = answer.last().unwrap();
                    assert_eq!(
                        answer["result"]["isError"], false,
                        "{}: {answer}",
                        upstream.tool
                    );
                    assert!(
                        answer["result"]["content"][0]["text"]
                            .as_str()
                            .unwrap()
                            .contains("still here")
                    );
                }
            }
        };
        works(1).await;
        let before = standing(&gateway).await;
        assert!(
            before
                .iter()
                .all(|(_, s)| s.state == ConnectionState::Ready),
            "{before:?}"
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stdio_requests = lines(&count_file);
        let rmcp_requests = rmcp_upstream.counts();

        let direct = session(&http, url, json!({})).await;
        let through_rmcp = session(&http, url, json!({"sampling": {}})).await;
        let mut id = 100;
        let mut refused = 0;
        for upstream in upstreams() {
            for arguments in unreadable_arguments() {
                for way in WAYS {
                    id += 1;
                    let response = match way {
                        "direct" | "rmcp" => {
                            let session = if way == "direct" {
                                &direct
                            } else {
                                &through_rmcp
                            };
                            let body: String = call(id, upstream.tool, &arguments, false);
                            let request = http
                                .post(url)
                                .header(header::CONTENT_TYPE, "application/json")
                                .header(header::ACCEPT, "application/json, text/event-stream")
                                .header("mcp-session-id", session)
                                .header("mcp-protocol-version", "2025-11-25")
                                .body(body);
                            request.send().await.unwrap()
                        }
                        _ => {
                            let body = call(id, upstream.tool, &arguments, true);
                            let request =
                                modern(&http, url, upstream.tool, body, way == "2026 rmcp");
                            // rmcp serves a 2026-07-28 request per request
                            // under an id it does not know, too.
                            let request = match way {
                                "2026 under a stranger's id" => {
                                    request.header("mcp-session-id", "nope")
                                }
                                "2026 under an unreadable id" => request.header(
                                    "mcp-session-id",
                                    header::HeaderValue::from_bytes(b"\xff").unwrap(),
                                ),
                                _ => request,
                            };
                            request.send().await.unwrap()
                        }
                    };
                    let status = response.status();
                    let answer = messages(&response.text().await.unwrap());
                    let answer = answer.last().unwrap();
                    let what = format!(
                        "{} by {way}: {}",
                        upstream.tool,
                        &arguments[..arguments.len().min(30)]
                    );
                    assert_eq!(status, 200, "{what}");
                    assert_eq!(answer["id"], id, "{what}: {answer}");
                    assert_eq!(answer["error"]["code"], -32602, "{what}: {answer}");
                    let said = answer["error"]["message"].as_str().unwrap();
                    assert!(
                        said.starts_with("the tool call's arguments were refused"),
                        "{what}: {said}"
                    );
                    refused += 1;
                }
            }
        }
        assert_eq!(refused, 3 * 5 * WAYS.len() as u64);

        assert_eq!(
            standing(&gateway).await,
            before,
            "no connection's standing moved"
        );
        assert_eq!(
            std::fs::read_to_string(&pid_file).unwrap(),
            pid,
            "the child was not respawned"
        );
        assert_eq!(
            lines(&count_file),
            stdio_requests,
            "the stdio upstream saw nothing"
        );
        assert_eq!(
            rmcp_upstream.counts().requests,
            rmcp_requests.requests,
            "the HTTP upstream saw nothing"
        );
        assert_eq!(
            gateway
                .tallies()
                .get(mcp_supervisor::tallies::Protection::UnreadableArguments),
            refused,
            "each refusal counted once"
        );
        works(2).await;
        assert_eq!(standing(&gateway).await, before);
        python_server.kill();
    });
}

/// Every way a call reaches the gateway's door.
const WAYS: [&str; 6] = [
    "direct",
    "rmcp",
    "2026 direct",
    "2026 rmcp",
    "2026 under a stranger's id",
    "2026 under an unreadable id",
];

fn path_str(path: &std::path::Path) -> &str {
    path.to_str().unwrap()
}

/// One HTTP upstream `a` behind a gateway, and a client's session that
/// has called it once.
struct One {
    upstream: TestServer,
    gateway: ServedGateway,
    http: reqwest::Client,
    session: String,
}

impl One {
    async fn start() -> One {
        let upstream = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let gateway =
            ServedGateway::start(config(&http_connection("a", &upstream.url(), ""))).await;
        let http = http();
        let session = session(&http, &gateway.url, json!({})).await;
        exchange(&http, &gateway.url, &session, &echo(1)).await;
        One {
            upstream,
            gateway,
            http,
            session,
        }
    }
}

/// A call of `a`'s `echo`.
fn echo(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "a__echo", "arguments": {"text": "hi"}},
    })
}

/// An upstream's JSON-RPC error answer to a client's call (here `-32603`,
/// the way a server refuses what it cannot do) is that call's answer,
/// passed on: the connection answered, so nothing goes on its record. An
/// HTTP error status with the same body is still a failure (`policy_rows`).
#[test]
fn an_upstreams_error_answer_to_a_call_is_not_held_against_it() {
    use mcp_test_support::fault::{Fault, FaultRule, Match};
    run(|| async {
        let One {
            upstream,
            gateway,
            http,
            session,
        } = One::start().await;
        let before = standing(&gateway).await;
        upstream.faults().push(FaultRule::once(
            Match::tool("echo"),
            Fault::status(200).with_jsonrpc_body(),
        ));
        let answer = exchange(&http, &gateway.url, &session, &echo(2)).await;
        assert_eq!(
            answer.last().unwrap()["error"]["code"],
            -32603,
            "{answer:?}"
        );
        let mut after = standing(&gateway).await;
        assert_eq!(
            after[0].1.rejected,
            before[0].1.rejected + 1,
            "counted as the call's outcome"
        );
        after[0].1.rejected = before[0].1.rejected;
        assert_eq!(after, before, "nothing on the connection's record");
        assert_eq!(upstream.tool_calls("echo"), 2, "not retried");
    });
}

/// An upstream that refuses a call for its size (HTTP 413, 414 or 431:
/// a client's large arguments, a long tool name in a header), or answers
/// it with a JSON-RPC error under the status the 2026-07-28 protocol gives
/// that error, answered that call; the caller is told, and nothing goes on
/// the connection's record.
#[test]
fn an_upstream_refusing_a_call_as_too_large_or_by_protocol_is_not_held_against_it() {
    use mcp_test_support::fault::{Fault, FaultRule, Match};
    run(|| async {
        let One {
            upstream,
            gateway,
            http,
            session,
        } = One::start().await;
        let before = standing(&gateway).await;
        for (id, status) in [(2, 413), (3, 414), (4, 431)] {
            upstream
                .faults()
                .push(FaultRule::once(Match::tool("echo"), Fault::status(status)));
            let answer = exchange(&http, &gateway.url, &session, &echo(id)).await;
            let answer = answer.last().unwrap().to_string();
            assert!(
                answer.contains(&format!("refused this call as too large (status={status})")),
                "{answer}"
            );
        }
        // A 2026-07-28 server answers a method it does not serve with 404,
        // a header that does not match its body or a missing capability
        // with 400, each with the JSON-RPC error: answers too, passed on.
        for (id, status, code) in [(5, 404, -32601), (6, 400, -32020), (7, 400, -32021)] {
            upstream.faults().push(FaultRule::once(
                Match::tool("echo"),
                Fault::status(status).with_jsonrpc_error(code),
            ));
            let answer = exchange(&http, &gateway.url, &session, &echo(id)).await;
            assert_eq!(answer.last().unwrap()["error"]["code"], code, "{answer:?}");
        }
        let mut after = standing(&gateway).await;
        assert_eq!(after[0].1.rejected, before[0].1.rejected + 6);
        after[0].1.rejected = before[0].1.rejected;
        assert_eq!(after, before, "nothing on the connection's record");
        assert_eq!(upstream.tool_calls("echo"), 7, "none retried");
        let answer = exchange(&http, &gateway.url, &session, &echo(8)).await;
        assert_eq!(answer.last().unwrap()["result"]["isError"], false);

        // A 400 without an error the protocol gives it is the connection's.
        upstream
            .faults()
            .push(FaultRule::once(Match::tool("echo"), Fault::status(400)));
        let answer = exchange(&http, &gateway.url, &session, &echo(9)).await;
        let after = standing(&gateway).await;
        assert!(after[0].1.last_failure, "{answer:?} {after:?}");
        assert_eq!(after[0].1.failures, before[0].1.failures + 1);
    });
}
