//! Two processes that embed the library with the same `[fleet]` share a
//! park: the `mcp-bench fleet-worker` agent worker, twice, on a real
//! `redis-server`, in front of one test server hosted here.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use mcp_test_support::{Fault, FaultRule, Match, RedisServer, TestServer, TestServerOptions};

/// One worker process and its command pipe.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn start(config: &std::path::Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-bench"))
            .args(["fleet-worker", "--config"])
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("mcp-bench runs");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Worker {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one command and reads its one-line answer.
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim_end().to_owned()
    }

    /// Asks until the answer is `want`, for at most `within`.
    fn until(&mut self, command: &str, want: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let answer = self.ask(command);
            if answer == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{command}: {answer}, not {want} within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_the_same_fleet_share_a_park() {
    let redis = RedisServer::start().unwrap();
    let upstream = TestServer::start(TestServerOptions::legacy())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fleet.key"),
        "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n",
    )
    .unwrap();
    let config = |node: &str| {
        let path = dir.path().join(format!("{node}.toml"));
        std::fs::write(
            &path,
            format!(
                "[supervisor.quarantine]\nbase_cooldown = \"30s\"\n\
                 [fleet]\nredis = \"{}\"\nkey_file = \"fleet.key\"\nnode = \"{node}\"\n\
                 [connections.a]\ntransport = \"http\"\nurl = \"{}\"\n",
                redis.url(),
                upstream.url()
            ),
        )
        .unwrap();
        path
    };
    let (one_config, two_config) = (config("worker-1"), config("worker-2"));
    let (mut one, mut two) = tokio::task::spawn_blocking(move || {
        let mut one = Worker::start(&one_config);
        let mut two = Worker::start(&two_config);
        one.until("fleet", "fleet up 1", Duration::from_secs(10));
        two.until("fleet", "fleet up 1", Duration::from_secs(10));
        (one, two)
    })
    .await
    .unwrap();

    upstream
        .faults()
        .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
    let (one, mut two) = tokio::task::spawn_blocking(move || {
        let answer = one.ask(r#"call a lookup {"key":"k"}"#);
        assert!(
            answer.starts_with("outcome unavailable MCP connection 'a' is temporarily unavailable (kind=server, status=503)"),
            "{answer}"
        );
        assert_eq!(one.ask("state a"), "state parked");
        // Generous, across processes: the park lasts 30 s.
        two.until("state a", "state parked", Duration::from_secs(20));
        (one, two)
    })
    .await
    .unwrap();
    let before = upstream.requests("initialize");
    let answer = tokio::task::spawn_blocking(move || {
        let answer = two.ask(r#"call a echo {"text":"hi"}"#);
        (answer, two)
    })
    .await
    .unwrap()
    .0;
    assert!(
        answer.starts_with("outcome unavailable MCP connection 'a' is temporarily unavailable (kind=server, status=503); retrying in about"),
        "{answer}"
    );
    assert_eq!(
        upstream.tool_calls("echo"),
        0,
        "the parked worker sent nothing"
    );
    assert_eq!(upstream.requests("initialize"), before);
    drop(one);
}
