//! `mcp-supervisor serve` under hostile input, as users run it: the CLI
//! against a token-protected admin API, and a flood of idle sockets under a
//! low open-file limit that must lock out neither `/healthz` nor a new MCP
//! client.
//! (Each promise in detail, in process: crates/mcp-supervisor/tests/listener_limits.rs.)

use std::{
    io::{BufRead, BufReader},
    net::TcpStream,
    process::{Child, Command, Stdio},
    time::Duration,
};

use e2e::{Served, bin, stdio_connection, supervisor};

const ADMIN_TOKEN: &str = "e2e-admin-t0ken";

#[test]
fn status_and_reset_send_the_admin_token_of_the_config() {
    let served = Served::start_with_env(
        &format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\nauth = {{ kind = \"bearer\", token_env = \"ADMIN_TOKEN\" }}\n{}",
            stdio_connection("demo", &bin("mcp-demo-server"), &[], "")
        ),
        &[("ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    // `Served` writes its own `listen` lines only when the text has none: the
    // file's admin address is 127.0.0.1:0, so `--config` cannot find the
    // port. Point a copy of the file at the real one.
    let port = served.admin_url.rsplit(':').next().unwrap();
    let text = std::fs::read_to_string(&served.config_path)
        .unwrap()
        .replace("127.0.0.1:0\"\nauth", &format!("127.0.0.1:{port}\"\nauth"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("client.toml");
    std::fs::write(&config, text).unwrap();
    let config = config.to_str().unwrap();

    let env = [("ADMIN_TOKEN", ADMIN_TOKEN)];
    let status = supervisor(&["status", "--config", config], &env);
    assert_eq!(status.code, Some(0), "{status:?}");
    assert!(status.stdout.contains("demo"), "{}", status.stdout);
    let reset = supervisor(&["reset", "demo", "--config", config], &env);
    assert_eq!(reset.code, Some(0), "{reset:?}");

    // Without the variable: a usage error naming the key, nothing sent.
    let status = supervisor(&["status", "--config", config], &[]);
    assert_eq!(status.code, Some(2), "{status:?}");
    assert!(
        status.stderr.contains("admin.auth.token_env"),
        "{}",
        status.stderr
    );

    // Without the config (no token): the API's 401 message.
    let address = served.admin_url.trim_start_matches("http://");
    let status = supervisor(&["status", "--admin", address], &[]);
    assert_eq!(status.code, Some(1), "{status:?}");
    assert!(
        status.stderr.contains("missing or invalid bearer token"),
        "{}",
        status.stderr
    );
    assert!(!status.all_output().contains(ADMIN_TOKEN));
    assert!(!served.stderr().contains(ADMIN_TOKEN));
}

/// `mcp-supervisor serve` run under `ulimit -n {limit}`; killed on drop.
struct Limited {
    child: Child,
    gateway: String,
    admin: String,
    dir: tempfile::TempDir,
}

impl Limited {
    fn start(limit: u32) -> Limited {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("supervisor.toml");
        // Slow timeouts: only making room can free a slot during the test.
        std::fs::write(
            &config,
            "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"meta\"\nheader_timeout = \"60s\"\n\
             idle_timeout = \"600s\"\n[admin]\nlisten = \"127.0.0.1:0\"\n",
        )
        .unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n {limit} && exec \"$0\" serve --config \"$1\""
            ))
            .arg(bin("mcp-supervisor"))
            .arg(&config)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut gateway, mut admin) = (None, None);
        while gateway.is_none() || admin.is_none() {
            let line = lines
                .next()
                .expect("serve prints where it listens")
                .unwrap();
            let address = line
                .split_whitespace()
                .find_map(|word| word.strip_prefix("http://"))
                .map(|rest| rest.split('/').next().unwrap().to_owned());
            if line.starts_with("gateway listening on ") {
                gateway = address;
            } else if line.starts_with("admin API listening on ") {
                admin = address;
            }
        }
        Limited {
            child,
            gateway: gateway.unwrap(),
            admin: admin.unwrap(),
            dir,
        }
    }

    /// What the process logged so far.
    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// More idle sockets than the open-file limit lets the gateway hold: the
/// admin API still answers, and a new MCP client is served at once (the
/// gateway closes the connections idle for longest to make room).
#[tokio::test]
async fn idle_sockets_beyond_the_open_file_limit_lock_out_neither_healthz_nor_a_client() {
    let served = Limited::start(256);
    // More idle sockets than the process may open files.
    let flood: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(&served.gateway).ok())
        .collect();
    assert!(flood.len() > 256, "{} sockets", flood.len());
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let health = client
        .get(format!("http://{}/healthz", served.admin))
        .send()
        .await
        .expect("the admin API answers within 5 s");
    assert_eq!(health.status(), 200);
    // A 2026-07-28 client lists and calls a tool, each on a connection the
    // gateway made room for, well within the (60 s) header timeout.
    let url = format!("http://{}/mcp", served.gateway);
    for (method, params) in [
        ("tools/list", serde_json::json!({})),
        (
            "tools/call",
            serde_json::json!({"name": "list_mcps", "arguments": {}}),
        ),
    ] {
        let mut params = params;
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "new", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let mut request = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            // A connection of its own each time: each must be made room for.
            .header("connection", "close");
        if method == "tools/call" {
            request = request.header("mcp-name", "list_mcps");
        }
        let answer = request
            .body(
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
                    .to_string(),
            )
            .send()
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "{method}: the gateway answers within 5 s: {error:?}\n{}",
                    served.stderr()
                )
            });
        assert_eq!(answer.status(), 200, "{method}: {}", served.stderr());
        let body: serde_json::Value = answer.json().await.unwrap();
        assert!(body.get("result").is_some(), "{method}: {body}");
    }
    drop(flood);
}
