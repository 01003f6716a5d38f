//! The bearer stays home (docs/FLEET.md, "Sessions across nodes"): a node
//! that forwards a request to the node holding its session strips the
//! client's credentials and vouches for the caller instead; the holding
//! node takes a valid voucher in place of the bearer, and refuses the mark
//! without one. A real gateway with `[gateway] auth` on a real
//! `redis-server`; the "other node" is a capture server that records what
//! reaches it, announced by a heartbeat sealed with the fleet's key.
//!
//! The MACs (session ids, heartbeats, vouchers) are computed here from the
//! documented derivations, outside the library: a change of any of them
//! fails here.

mod support;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{Router, http::HeaderMap, routing::any};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use mcp_supervisor::{config::FleetKey, fleet::Seal, registry::FleetOverview, tallies::Protection};
use mcp_test_support::{RedisServer, TestServer, TestServerOptions};
use reqwest::header;
use serde_json::json;
use sha2::Sha256;
use support::{raw::http, *};

const KEY: [u8; 32] = *b"0123456789abcdef0123456789abcdef";
const CANARY: &str = "canary-bearer-4f1d9a";

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// A session id of `node`: `{node}.{random}.{mac}` (docs/FLEET.md).
fn session_id(node: &str) -> String {
    let key = hmac(&KEY, &[b"mcp-supervisor/gateway-session-ids/v1"]);
    let random = URL_SAFE_NO_PAD.encode([9u8; 16]);
    let mac = hmac(&key, &[format!("{node}.{random}").as_bytes()]);
    format!("{node}.{random}.{}", URL_SAFE_NO_PAD.encode(&mac[..16]))
}

/// `from`'s voucher for a request forwarded to `to` at `at_ms`.
fn voucher(from: &str, to: &str, at_ms: u128, method: &str, session: &str) -> String {
    voucher_with(from, to, at_ms, &rand::random(), (method, session, ""))
}

/// `from`'s voucher with `nonce` (docs/FLEET.md), covering the
/// `mcp-supervisor-caller` value `caller` (empty: none).
fn voucher_with(
    from: &str,
    to: &str,
    at_ms: u128,
    nonce: &[u8; 12],
    (method, session, caller): (&str, &str, &str),
) -> String {
    let key = hmac(&KEY, &[b"mcp-supervisor/forwarded-requests/v1\0t"]);
    let at = at_ms.to_string();
    let mut covered: Vec<&[u8]> = vec![
        from.as_bytes(),
        to.as_bytes(),
        at.as_bytes(),
        nonce,
        method.as_bytes(),
        session.as_bytes(),
    ];
    if !caller.is_empty() {
        covered.push(caller.as_bytes());
    }
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for part in covered {
        parts.push((part.len() as u64).to_be_bytes().to_vec());
        parts.push(part.to_vec());
    }
    let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let mac = hmac(&key, &slices);
    format!(
        "{from}.{at}.{}.{}",
        URL_SAFE_NO_PAD.encode(nonce),
        URL_SAFE_NO_PAD.encode(&mac[..16])
    )
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// What reached the capture server.
type Seen = Arc<Mutex<Vec<HeaderMap>>>;

async fn capture() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let router = Router::new().fallback(any({
        let seen = seen.clone();
        move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(headers);
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
                )
            }
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    actix_rt::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (url, seen)
}

/// Node "one": a gateway with `[gateway] auth` (the canary) and `[fleet]`
/// on `redis`, with connection `a` to `upstream`.
async fn node_one(redis: &RedisServer, upstream: &TestServer) -> ServedGateway {
    let gateway = format!("[gateway]\nauth = {{ kind = \"bearer\", token = \"{CANARY}\" }}\n");
    node_one_with(redis, upstream, &gateway).await
}

/// Node one of a fleet in Redis, with `gateway` (its `[gateway]` table and
/// any rules).
async fn node_one_with(redis: &RedisServer, upstream: &TestServer, gateway: &str) -> ServedGateway {
    let key = tempfile::NamedTempFile::new().unwrap();
    let key_b64 = base64::engine::general_purpose::STANDARD.encode(KEY);
    std::fs::write(key.path(), format!("{key_b64}\n")).unwrap();
    let toml = format!(
        "{gateway}\
         [fleet]\nredis = \"{}\"\nnode = \"one\"\nnamespace = \"t\"\nkey_file = {}\n{}",
        redis.url(),
        toml_string(&key.path().to_string_lossy()),
        http_connection("a", &upstream.url(), ""),
    );
    // Read when the config is: the file may go.
    ServedGateway::start(config(&toml)).await
}

fn ping(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string()
}

fn post(url: &str, session: &str, body: String) -> reqwest::RequestBuilder {
    http()
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(body)
}

#[test]
fn a_forwarded_request_carries_a_voucher_and_never_the_bearer() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let (capture_url, seen) = capture().await;
        let one = node_one(&redis, &upstream).await;

        // Node "two", as far as node one can tell: a fresh heartbeat sealed
        // with the fleet's key, its gateway the capture server.
        let seal = Seal::new(&FleetKey::new(KEY), "t");
        let heartbeat = |seq: u64| {
            seal.seal(&format!(
                r#"{{"v":2,"node":"two","at":{},"seq":{seq},"kind":"alive","parked":0,"retired":0,"gateway":"{capture_url}"}}"#,
                now_ms()
            ))
        };
        let mut heard = false;
        for seq in 1..=100 {
            redis
                .query(&["PUBLISH", "t:events", &heartbeat(seq)])
                .unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            let view = one.registry.send(FleetOverview).await.unwrap().unwrap();
            if view.nodes.iter().any(|node| node.node == "two") {
                heard = true;
                break;
            }
        }
        assert!(heard, "node one never heard node two's heartbeat");

        // A request of a session node two holds, with the client's bearer,
        // and the marks only a node may set, forged by the client (with
        // another caller's token as its subject): none of them is passed on.
        let theirs = session_id("two");
        let answer = post(&one.url, &theirs, ping(1))
            .header(header::AUTHORIZATION, format!("Bearer {CANARY}"))
            .header(header::COOKIE, format!("c={CANARY}"))
            .header("mcp-supervisor-subject", CANARY)
            .header("Mcp-Supervisor-Caller", CANARY)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "forwarded and answered");
        let forwarded = seen
            .lock()
            .unwrap()
            .pop()
            .expect("the request reached node two");
        for (name, value) in &forwarded {
            let value = String::from_utf8_lossy(value.as_bytes());
            assert!(!value.contains(CANARY), "{name}: {value}");
        }
        assert!(!forwarded.contains_key(header::AUTHORIZATION));
        assert!(!forwarded.contains_key("mcp-supervisor-subject"));
        assert_eq!(forwarded.get_all("mcp-supervisor-caller").iter().count(), 1);
        let mark = forwarded["mcp-supervisor-forwarded"].to_str().unwrap();
        let (from_at_nonce, _) = mark.rsplit_once('.').unwrap();
        let (from_at, nonce) = from_at_nonce.rsplit_once('.').unwrap();
        let at: u128 = from_at.strip_prefix("one.").unwrap().parse().unwrap();
        let nonce: [u8; 12] = URL_SAFE_NO_PAD.decode(nonce).unwrap().try_into().unwrap();
        let caller = forwarded["mcp-supervisor-caller"].to_str().unwrap();
        let named: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(caller).unwrap()).unwrap();
        assert_eq!(named, json!({"via": "bearer"}), "the bearer names nobody");
        assert_eq!(
            mark,
            voucher_with("one", "two", at, &nonce, ("POST", &theirs, caller)),
            "the documented voucher"
        );
        // Without the bearer, nothing is forwarded.
        let before = seen.lock().unwrap().len();
        let refused = post(&one.url, &theirs, ping(2)).send().await.unwrap();
        assert_eq!(refused.status(), 401);
        assert_eq!(seen.lock().unwrap().len(), before);
    });
}

#[test]
fn a_voucher_stands_for_the_bearer_and_the_mark_without_one_is_refused() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let one = node_one(&redis, &upstream).await;
        let tallies = one.tallies();
        // A session node one holds, opened with the bearer.
        let initialize = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}},
        });
        let opened = http()
            .post(&one.url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header(header::AUTHORIZATION, format!("Bearer {CANARY}"))
            .body(initialize.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(opened.status(), 200);
        let ours = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(ours.starts_with("one."), "{ours}");
        let initialized =
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        let sent = post(&one.url, &ours, initialized)
            .header(header::AUTHORIZATION, format!("Bearer {CANARY}"))
            .send()
            .await
            .unwrap();
        assert_eq!(sent.status(), 202);

        // Node two's voucher, no bearer: taken.
        let taken = voucher("two", "one", now_ms(), "POST", &ours);
        let vouched = post(&one.url, &ours, ping(3))
            .header("mcp-supervisor-forwarded", &taken)
            .send()
            .await
            .unwrap();
        assert_eq!(vouched.status(), 200, "{}", vouched.text().await.unwrap());
        assert_eq!(tallies.get(Protection::ForwardedIn), 1);

        // The mark without a valid voucher, with or without the bearer: a
        // client forging the loop-prevention mark, an old voucher, one for
        // another request or another node, one node one would make itself,
        // the voucher taken above sent again (by whoever saw it pass).
        let old = voucher("two", "one", now_ms() - 60_000, "POST", &ours);
        let forged = [
            "1".to_owned(),
            old,
            voucher("two", "one", now_ms(), "DELETE", &ours),
            voucher("two", "three", now_ms(), "POST", &ours),
            voucher("one", "one", now_ms(), "POST", &ours),
            taken,
        ];
        for (at, mark) in forged.iter().enumerate() {
            for bearer in [false, true] {
                let mut request = post(&one.url, &ours, ping(10 + at as u64))
                    .header("mcp-supervisor-forwarded", mark);
                if bearer {
                    request = request.header(header::AUTHORIZATION, format!("Bearer {CANARY}"));
                }
                let answer = request.send().await.unwrap();
                assert_eq!(answer.status(), 401, "{mark} (bearer: {bearer})");
            }
        }
        assert_eq!(tallies.get(Protection::ForgedForwarding), 12);

        // A valid voucher on a request that names no session of node one:
        // none (a 2026-07-28 request, served per request), another node's,
        // or one node one never minted under another's name. Only a
        // session's request is ever forwarded.
        let theirs = session_id("two");
        for (session, sent) in [("", ping(30)), (theirs.as_str(), ping(31))] {
            let mut request = http()
                .post(&one.url)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header(
                    "mcp-supervisor-forwarded",
                    voucher("two", "one", now_ms(), "POST", session),
                )
                .body(sent);
            if !session.is_empty() {
                request = request.header("mcp-session-id", session);
            }
            let answer = request.send().await.unwrap();
            assert_eq!(answer.status(), 401, "session {session:?}");
        }
        assert_eq!(tallies.get(Protection::ForgedForwarding), 14);
        assert_eq!(tallies.get(Protection::ForwardedIn), 1);
    });
}

/// Node one with a reader's key, rules, and a session the reader opened.
const READER_KEY: &str = "reader-key-CANARY-2b7e";

fn reader_rules() -> String {
    let digest = key_digest(READER_KEY);
    format!(
        "[gateway]\n[gateway.keys.reader]\nsha256 = \"{digest}\"\ngroups = [\"readers\"]\n\
         [[access]]\nwho = [\"group:readers\"]\nallow = [\"a__echo\"]\n\
         [[access]]\nwho = [\"group:admins\"]\nallow = [\"connection:*\"]\n"
    )
}

fn caller_value(caller: serde_json::Value) -> String {
    URL_SAFE_NO_PAD.encode(caller.to_string())
}

/// The tools a `tools/list` on `session` lists, sent with `headers`.
async fn listed(url: &str, session: &str, headers: &[(&str, String)]) -> (u16, Vec<String>) {
    let mut request = post(
        url,
        session,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string(),
    );
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    let text = answer.text().await.unwrap();
    let body = text
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(&text);
    let names = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|message| {
            message["result"]["tools"].as_array().map(|tools| {
                tools
                    .iter()
                    .map(|tool| tool["name"].as_str().unwrap().to_owned())
                    .collect()
            })
        })
        .unwrap_or_default();
    (status, names)
}

#[test]
fn a_forwarded_requests_caller_is_the_one_vouched_for_and_no_client_can_name_itself() {
    run(|| async {
        let redis = RedisServer::start().unwrap();
        let upstream = TestServer::start(TestServerOptions::legacy())
            .await
            .unwrap();
        let one = node_one_with(&redis, &upstream, &reader_rules()).await;
        let bearer = ("authorization", format!("Bearer {READER_KEY}"));
        let initialize = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}},
        });
        let opened = http()
            .post(&one.url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header(bearer.0, &bearer.1)
            .body(initialize.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(opened.status(), 200);
        let ours = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let initialized =
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        post(&one.url, &ours, initialized)
            .header(bearer.0, &bearer.1)
            .send()
            .await
            .unwrap();
        assert_eq!(
            listed(&one.url, &ours, std::slice::from_ref(&bearer)).await,
            (200, vec!["a__echo".to_owned()])
        );

        // A client naming itself an admin, with its own key: the header is
        // not its to send, and it is still the reader.
        let admin = caller_value(json!({"via": "key", "client": "root", "groups": ["admins"]}));
        let claimed = listed(
            &one.url,
            &ours,
            &[bearer.clone(), ("mcp-supervisor-caller", admin.clone())],
        )
        .await;
        assert_eq!(claimed, (200, vec!["a__echo".to_owned()]));

        // Node two vouching for the reader: the reader's view.
        let reader = caller_value(json!({"via": "key", "client": "reader", "groups": ["readers"]}));
        let at = now_ms();
        let vouched = voucher_with("two", "one", at, &rand::random(), ("POST", &ours, &reader));
        let forwarded = listed(
            &one.url,
            &ours,
            &[
                ("mcp-supervisor-forwarded", vouched),
                ("mcp-supervisor-caller", reader.clone()),
            ],
        )
        .await;
        assert_eq!(forwarded, (200, vec!["a__echo".to_owned()]));

        // The reader's voucher with an admin's caller put in its place, or
        // with the caller taken off: refused.
        let nonce = rand::random();
        let for_reader = voucher_with("two", "one", now_ms(), &nonce, ("POST", &ours, &reader));
        for swapped in [vec![("mcp-supervisor-caller", admin.clone())], vec![]] {
            let mut headers = vec![("mcp-supervisor-forwarded", for_reader.clone())];
            headers.extend(swapped);
            assert_eq!(listed(&one.url, &ours, &headers).await.0, 401);
        }
    });
}
