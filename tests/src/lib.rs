//! Helpers for the end-to-end suite: locating the built binaries and running them.
//!
//! The suite runs the real `mcp-supervisor` binary (never its library) the way a
//! user would, against real servers on loopback and real child processes.

pub mod conformance;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::OnceLock,
};

/// The repository root (where `Cargo.toml`, `config/` and `target/` live).
pub fn repo_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
    })
}

/// Path of a workspace binary (`mcp-supervisor`, `mcp-demo-server`,
/// `mcp-test-server`), building the workspace's binaries once if missing (a
/// lone `cargo test -p e2e` does not build other packages' binaries).
pub fn bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    let path = profile_dir().join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !path.is_file() {
        BUILT.get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "--workspace", "--bins"])
                .current_dir(repo_root())
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building the workspace binaries failed");
        });
    }
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// `target/<profile>`: the directory holding this test executable's `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test executables live in target/<profile>/deps")
        .to_path_buf()
}

/// The result of one command run, with its output as text.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout and stderr together, for "never appears anywhere" checks.
    pub fn all_output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

impl From<Output> for Run {
    fn from(output: Output) -> Self {
        Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Runs `mcp-supervisor` with `args` and extra environment, to completion.
pub fn supervisor(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(bin("mcp-supervisor"));
    command.args(args).current_dir(repo_root());
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("mcp-supervisor runs").into()
}

/// A running `mcp-supervisor serve` with a temporary config, stopped on drop.
#[derive(Debug)]
pub struct Served {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub gateway_url: String,
    /// `http://127.0.0.1:PORT`
    pub admin_url: String,
    pub config_path: PathBuf,
    _dir: tempfile::TempDir,
    stderr_log: PathBuf,
}

impl Served {
    /// Starts `serve` on `config_toml` (gateway and admin on free ports unless
    /// the text sets them) and waits for its "listening" lines.
    pub fn start(config_toml: &str) -> Served {
        Self::start_with_env(config_toml, &[])
    }

    pub fn start_with_env(config_toml: &str, env: &[(&str, &str)]) -> Served {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir().expect("temp dir");
        let config_path = dir.path().join("supervisor.toml");
        let mut text = config_toml.to_owned();
        if !text.contains("[gateway]") {
            text = format!("[gateway]\nlisten = \"127.0.0.1:0\"\n{text}");
        }
        if !text.contains("[admin]") {
            text = format!("[admin]\nlisten = \"127.0.0.1:0\"\n{text}");
        }
        std::fs::write(&config_path, text).expect("write config");
        let stderr_log = dir.path().join("stderr.log");
        let mut command = Command::new(bin("mcp-supervisor"));
        command
            .args(["serve", "--config"])
            .arg(&config_path)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr_log).expect("stderr log"));
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("mcp-supervisor serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut gateway_url = None;
        let mut admin_url = None;
        while gateway_url.is_none() || admin_url.is_none() {
            let Some(Ok(line)) = lines.next() else {
                let log = std::fs::read_to_string(&stderr_log).unwrap_or_default();
                panic!("serve exited before listening:\n{log}");
            };
            let url = line
                .split_whitespace()
                .find(|word| word.starts_with("http://"));
            if line.starts_with("gateway listening on ") {
                gateway_url = url.map(str::to_owned);
            } else if line.starts_with("admin API listening on ") {
                admin_url = url.map(str::to_owned);
            }
        }
        Served {
            child,
            gateway_url: gateway_url.unwrap(),
            admin_url: admin_url.unwrap(),
            config_path,
            _dir: dir,
            stderr_log,
        }
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }

    /// Waits up to `bound` for `text` to appear on the process's stderr (a
    /// log line: the event a test waits for instead of sleeping); panics
    /// with the log if it does not.
    pub async fn wait_for_log(&self, text: &str, bound: std::time::Duration) {
        let logged = mcp_test_support::wait_until(bound, || self.stderr().contains(text)).await;
        assert!(
            logged,
            "{text:?} not logged within {bound:?}:\n{}",
            self.stderr()
        );
    }

    /// `GET /status` of the admin API.
    pub async fn status(&self) -> serde_json::Value {
        reqwest::get(format!("{}/status", self.admin_url))
            .await
            .expect("the admin API answers")
            .json()
            .await
            .expect("/status is JSON")
    }

    /// Calls in flight on `connection`, from `/status` (0 when it is not
    /// listed).
    pub async fn in_flight(&self, connection: &str) -> u64 {
        self.status().await["connections"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|entry| entry["name"] == connection)
            .and_then(|entry| entry["in_flight"].as_u64())
            .unwrap_or(0)
    }

    /// Waits up to `bound` until `connection` has `calls` calls in flight.
    pub async fn wait_for_in_flight(
        &self,
        connection: &str,
        calls: u64,
        bound: std::time::Duration,
    ) {
        let reached = || async { self.in_flight(connection).await == calls };
        assert!(
            mcp_test_support::wait_until_async(bound, reached).await,
            "{connection} never had {calls} call(s) in flight within {bound:?}"
        );
    }

    /// Sends a signal to the process (`SIGHUP`, `SIGTERM`, …).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// SIGTERM, then waits up to `bound` for the exit; returns the exit code.
    pub fn terminate(&mut self, bound: std::time::Duration) -> Option<i32> {
        self.signal("TERM");
        let started = std::time::Instant::now();
        while started.elapsed() < bound {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let started = std::time::Instant::now();
            while started.elapsed() < std::time::Duration::from_secs(15) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A standalone `mcp-test-server --http` (or another of our test servers) on
/// a free port, killed on drop.
#[derive(Debug)]
pub struct HttpUpstream {
    child: std::process::Child,
    pub url: String,
}

impl HttpUpstream {
    /// Starts one; `extra` are more `mcp-test-server` flags.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_binary("mcp-test-server", extra)
    }

    /// Starts test server binary `name` with `--http 127.0.0.1:0` and `extra`
    /// flags; it must print `listening on URL` first.
    pub fn start_binary(name: &str, extra: &[&str]) -> Self {
        use std::io::{BufRead, BufReader};
        let mut child = std::process::Command::new(bin(name))
            .args(["--http", "127.0.0.1:0"])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected banner {line:?}"))
            .to_owned();
        HttpUpstream { child, url }
    }

    /// Writes a config with this upstream as connection `t`.
    pub fn config(&self, dir: &Path) -> std::path::PathBuf {
        let path = dir.join("upstream.toml");
        std::fs::write(
            &path,
            format!(
                "[connections.t]\ntransport = \"http\"\nurl = \"{}\"\n",
                self.url
            ),
        )
        .unwrap();
        path
    }
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TOML basic string holding `value` (JSON string escapes are valid TOML).
pub fn toml_string(value: &str) -> String {
    serde_json::to_string(value).expect("a string serializes")
}

/// A `[connections.NAME]` table for a stdio upstream running `command args…`.
pub fn stdio_connection(name: &str, command: &Path, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|arg| toml_string(arg)).collect();
    format!(
        "[connections.{name}]\ntransport = \"stdio\"\ncommand = {}\nargs = [{}]\n{extra}\n",
        toml_string(&command.to_string_lossy()),
        args.join(", ")
    )
}

/// A file that `scripts/install-test-deps.sh` installs under `.tools/`
/// (e.g. `venv/bin/python`). Missing, the test fails (it is never skipped)
/// saying how to install it.
pub fn installed_tool(relative: &str) -> PathBuf {
    let path = repo_root().join(".tools").join(relative);
    assert!(
        path.exists(),
        "{} is missing: run ./scripts/install-test-deps.sh (make test does) to install \
         the pinned test dependencies (see docs/TESTING.md)",
        path.display()
    );
    path
}

/// Waits up to `bound` for `child` to exit; kills it (and reaps it) if it
/// has not. Returns the exit status, or `None` if it had to be killed.
pub fn wait_bounded(
    child: &mut std::process::Child,
    bound: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let started = std::time::Instant::now();
    while started.elapsed() < bound {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// How a gateway reaches its upstream test server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// `--http 127.0.0.1:0`, a process of the test's own.
    Http,
    /// A child of the supervisor.
    Stdio,
}

/// `mcp-conformance-server` (the conformance upstream, crate
/// `mcp-test-support`) as connection `conformance`: its
/// `[connections.conformance]` table and, over HTTP, the upstream process the
/// table points to (killed on drop; keep it alive as long as the gateway).
pub fn conformance_connection(transport: UpstreamTransport) -> (String, Option<HttpUpstream>) {
    conformance_connection_with(transport, &[])
}

/// Like [`conformance_connection`], with more `mcp-conformance-server` flags
/// (`--legacy-only`: it answers like a 2025-era server).
pub fn conformance_connection_with(
    transport: UpstreamTransport,
    flags: &[&str],
) -> (String, Option<HttpUpstream>) {
    match transport {
        UpstreamTransport::Http => {
            let upstream = HttpUpstream::start_binary("mcp-conformance-server", flags);
            let table = format!(
                "[connections.conformance]\ntransport = \"http\"\nurl = {}\n",
                toml_string(&upstream.url)
            );
            (table, Some(upstream))
        }
        UpstreamTransport::Stdio => (
            stdio_connection("conformance", &bin("mcp-conformance-server"), flags, ""),
            None,
        ),
    }
}

/// A running `serve` whose only connection is `mcp-conformance-server`, with
/// `prefix = "auto"`: the fixture's tools, prompts and resources pass through
/// under their own names (`test_simple_text`, `test://static-text`, …).
#[derive(Debug)]
pub struct ConformanceGateway {
    /// Declared first: the supervisor stops before its HTTP upstream.
    pub served: Served,
    _upstream: Option<HttpUpstream>,
}

impl ConformanceGateway {
    pub fn start(transport: UpstreamTransport) -> Self {
        Self::start_with(transport, &[])
    }

    /// Like [`ConformanceGateway::start`], with more upstream flags.
    pub fn start_with(transport: UpstreamTransport, flags: &[&str]) -> Self {
        let (connection, upstream) = conformance_connection_with(transport, flags);
        let served = Served::start(&format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\nprefix = \"auto\"\n{connection}"
        ));
        ConformanceGateway {
            served,
            _upstream: upstream,
        }
    }
}
