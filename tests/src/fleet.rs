//! A fleet on loopback, as a deployment runs one: a real `redis-server`,
//! three `mcp-supervisor serve` processes with `[fleet]` (one key, read from
//! a file; nodes `node-1`..`node-3`, gateways on free ports), one upstream
//! (`mcp-conformance-server` over HTTP, `prefix = "auto"`), and HAProxy in
//! front of the three gateways: `balance roundrobin`, no stickiness, so
//! consecutive requests of one session land on different nodes.
//!
//! [`Fleet::start`] returns once every node forwards to every other (each
//! node's session is reachable through each other node), so a test never
//! races the heartbeats. Everything is stopped by pid on drop.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use mcp_test_support::{RedisServer, wait_until_async};
use serde_json::{Value, json};

use crate::{HttpUpstream, Served, UpstreamTransport, conformance_connection, toml_string};

/// The fleet key every node reads (`openssl rand -base64 32`).
pub const FLEET_KEY: &str = "q0Gk0GQhnW5uFQ2bH5z2u9i7xQy1hWm6Yj1oO2tCz9U=";

/// How long the nodes have to hear each other's heartbeats (one a second).
const JOIN_BOUND: Duration = Duration::from_secs(30);

/// Three nodes behind HAProxy. Fields drop in order: the proxy first, the
/// upstream and Redis last.
#[derive(Debug)]
pub struct Fleet {
    pub proxy: HaProxy,
    /// `node-1`, `node-2`, `node-3`, in that order.
    pub nodes: Vec<Served>,
    _upstream: Option<HttpUpstream>,
    pub redis: RedisServer,
    dir: tempfile::TempDir,
}

impl Fleet {
    /// Starts it all and waits until every node reaches every other.
    pub async fn start() -> Fleet {
        let (connection, upstream) = conformance_connection(UpstreamTransport::Http);
        Self::start_with(connection, upstream).await
    }

    /// The same with another upstream: `connection` is its `[connections.…]`
    /// table, `upstream` the process kept alive with the fleet.
    pub async fn start_with(connection: String, upstream: Option<HttpUpstream>) -> Fleet {
        let redis = RedisServer::start().expect("redis-server starts");
        let dir = tempfile::tempdir().expect("temp dir");
        let key_file = dir.path().join("fleet.key");
        std::fs::write(&key_file, format!("{FLEET_KEY}\n")).expect("write the key");
        let nodes: Vec<Served> = (1..=3)
            .map(|n| {
                Served::start(&node_config(
                    &format!("node-{n}"),
                    &redis.url(),
                    &key_file,
                    "fleet",
                    &connection,
                ))
            })
            .collect();
        let backends: Vec<String> = nodes
            .iter()
            .map(|node| node.gateway_address().to_owned())
            .collect();
        let proxy = HaProxy::start(dir.path().to_path_buf(), &backends);
        let fleet = Fleet {
            proxy,
            nodes,
            _upstream: upstream,
            redis,
            dir,
        };
        fleet.wait_until_joined().await;
        fleet
    }

    /// The MCP endpoint a client uses: HAProxy's.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.proxy.address)
    }

    /// A fourth process in another fleet (its own key and namespace on the
    /// same Redis) whose node is named `node`, as a member here is: the ids
    /// it hands out name that node with another key's MAC.
    pub fn stranger(&self, node: &str) -> Served {
        let key_file = self.dir.path().join("other.key");
        std::fs::write(&key_file, "YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=\n")
            .expect("write the other key");
        let (connection, _) = conformance_connection(UpstreamTransport::Stdio);
        Served::start(&node_config(
            node,
            &self.redis.url(),
            &key_file,
            "strangers",
            &connection,
        ))
    }

    /// Waits until each node's session answers a ping through each other
    /// node: every node has heard every other's heartbeat (with its gateway
    /// address) and forwards to it.
    async fn wait_until_joined(&self) {
        for holder in &self.nodes {
            let session = initialize(&holder.gateway_url).await;
            for other in self
                .nodes
                .iter()
                .filter(|other| other.gateway_url != holder.gateway_url)
            {
                let reached = wait_until_async(JOIN_BOUND, || async {
                    post(&other.gateway_url, Some(&session), &ping()).await.0 == 200
                })
                .await;
                assert!(
                    reached,
                    "{} never reached {}'s session {session} within {JOIN_BOUND:?}\n{}:\n{}",
                    other.gateway_url,
                    holder.gateway_url,
                    holder.gateway_url,
                    other.stderr()
                );
            }
            assert_eq!(delete(&holder.gateway_url, &session).await, 200);
        }
    }
}

/// A node's config: gateway on a free port of its own (so the default
/// `advertise`, `http://{listen}`, names it), `prefix = "auto"`.
fn node_config(
    node: &str,
    redis: &str,
    key_file: &std::path::Path,
    namespace: &str,
    connection: &str,
) -> String {
    format!(
        "[gateway]\nlisten = \"127.0.0.1:{}\"\nprefix = \"auto\"\n\
         [fleet]\nredis = {}\nkey_file = {}\nnode = \"{node}\"\nnamespace = \"{namespace}\"\n\
         {connection}",
        free_port(),
        toml_string(redis),
        toml_string(&key_file.to_string_lossy()),
    )
}

pub use mcp_test_support::free_loopback_port as free_port;

/// HAProxy (`/usr/sbin/haproxy -db`, Debian's package) in front of
/// `backends`, round robin, keep-alive to the backends, no stickiness; with
/// its statistics page on a port of its own. Killed by pid on drop.
#[derive(Debug)]
pub struct HaProxy {
    child: Child,
    /// `127.0.0.1:PORT`: the frontend.
    pub address: String,
    /// `127.0.0.1:PORT`: `/stats;csv`.
    stats: String,
    log: PathBuf,
}

/// Where Debian's package puts it.
const HAPROXY: &str = "/usr/sbin/haproxy";

impl HaProxy {
    fn start(dir: PathBuf, backends: &[String]) -> HaProxy {
        let address = format!("127.0.0.1:{}", free_port());
        let stats = format!("127.0.0.1:{}", free_port());
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(index, backend)| format!("    server node-{} {backend}\n", index + 1))
            .collect();
        // Long client and server timeouts: a session's GET stream stays
        // open (rmcp sends a keep-alive comment every 15 s).
        let config = format!(
            "global\n    maxconn 256\n\
             defaults\n    mode http\n    timeout connect 5s\n    timeout client 300s\n    \
             timeout server 300s\n    timeout http-keep-alive 60s\n\
             frontend mcp\n    bind {address}\n    default_backend nodes\n\
             backend nodes\n    balance roundrobin\n{servers}\
             listen stats\n    bind {stats}\n    stats enable\n    stats uri /stats\n"
        );
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).expect("write haproxy.cfg");
        let log = dir.join("haproxy.log");
        assert!(
            std::path::Path::new(HAPROXY).is_file(),
            "{HAPROXY} is missing: install Debian's package `haproxy` \
             (./scripts/install-test-deps.sh does so when run as root)"
        );
        let child = Command::new(HAPROXY)
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("haproxy log"))
            .spawn()
            .expect("haproxy starts");
        let mut proxy = HaProxy {
            child,
            address,
            stats,
            log,
        };
        let listening = crate::wait_until(Duration::from_secs(10), || {
            std::net::TcpStream::connect(&proxy.address).is_ok()
                && std::net::TcpStream::connect(&proxy.stats).is_ok()
        });
        if !listening {
            let _ = proxy.child.kill();
            panic!(
                "haproxy did not listen within 10 s:\n{}",
                std::fs::read_to_string(&proxy.log).unwrap_or_default()
            );
        }
        proxy
    }

    /// 2xx answers each backend gave so far, by server name (`node-1`, …),
    /// from HAProxy's own statistics (`hrsp_2xx`).
    pub async fn answered_by_node(&self) -> Vec<(String, u64)> {
        let csv = reqwest::get(format!("http://{}/stats;csv", self.stats))
            .await
            .expect("haproxy's statistics answer")
            .text()
            .await
            .expect("statistics text");
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .expect("a header line")
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let column = |name: &str| {
            header
                .iter()
                .position(|field| *field == name)
                .unwrap_or_else(|| panic!("no {name} column in {csv}"))
        };
        let (proxy, server, answered) = (column("pxname"), column("svname"), column("hrsp_2xx"));
        lines
            .map(|line| line.split(',').collect::<Vec<&str>>())
            .filter(|fields| fields.get(proxy) == Some(&"nodes"))
            .filter(|fields| fields[server].starts_with("node-"))
            .map(|fields| {
                (
                    fields[server].to_owned(),
                    fields[answered].parse().unwrap_or(0),
                )
            })
            .collect()
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// --- Raw MCP over HTTP, for what no SDK would send ----------------------------

/// The protocol version the raw requests speak (a 2025 session).
pub const PROTOCOL: &str = "2025-11-25";

/// `initialize` and `notifications/initialized` at `url`; the session id.
pub async fn initialize(url: &str) -> String {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "fleet-e2e", "version": "1"}
        }
    });
    let response = request(reqwest::Method::POST, url, None)
        .json(&initialize)
        .send()
        .await
        .expect("initialize is answered");
    assert_eq!(response.status(), 200, "initialize at {url}");
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|id| id.to_str().ok())
        .unwrap_or_else(|| panic!("no Mcp-Session-Id from {url}"))
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, body) = post(url, Some(&session), &initialized).await;
    assert_eq!(status, 202, "notifications/initialized at {url}: {body}");
    session
}

/// A `ping` request.
pub fn ping() -> Value {
    json!({"jsonrpc": "2.0", "id": "p", "method": "ping"})
}

/// POSTs `message` to `url` in `session`; the status and body.
pub async fn post(url: &str, session: Option<&str>, message: &Value) -> (u16, String) {
    let response = request(reqwest::Method::POST, url, session)
        .json(message)
        .send()
        .await
        .unwrap_or_else(|error| panic!("POST {url}: {error}"));
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// `DELETE` of `session` at `url`; the status.
pub async fn delete(url: &str, session: &str) -> u16 {
    request(reqwest::Method::DELETE, url, Some(session))
        .send()
        .await
        .unwrap_or_else(|error| panic!("DELETE {url}: {error}"))
        .status()
        .as_u16()
}

fn request(method: reqwest::Method, url: &str, session: Option<&str>) -> reqwest::RequestBuilder {
    let mut request = reqwest::Client::new()
        .request(method, url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .timeout(Duration::from_secs(30));
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
}
