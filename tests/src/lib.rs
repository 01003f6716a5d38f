//! Helpers for the end-to-end suite: locating the built binaries and running them.
//!
//! The suite runs the real `mcp-supervisor` binary (never its library) the way a
//! user would, against real servers on loopback and real child processes.

pub mod conformance;
pub mod fleet;

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

/// `mcp-supervisor ARGS…` in the repository root, not started yet.
pub fn supervisor_command<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    let mut command = Command::new(bin("mcp-supervisor"));
    command.args(args).current_dir(repo_root());
    command
}

/// Runs `mcp-supervisor` with `args` and extra environment, to completion.
pub fn supervisor(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = supervisor_command(args);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("mcp-supervisor runs").into()
}

/// Runs `command` to completion, its output going to files (a full pipe
/// would block it) and its stdin closed; killed after `bound`, with `code`
/// then `None`. For commands that might hang: a client that waits forever, a
/// login that never gets its redirect.
pub fn run_bounded(command: &mut Command, bound: std::time::Duration) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&stdout).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr).expect("stderr file"));
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("{command:?} does not start: {error}"));
    let status = wait_bounded(&mut child, bound);
    Run {
        code: status.and_then(|status| status.code()),
        stdout: std::fs::read_to_string(stdout).unwrap_or_default(),
        stderr: std::fs::read_to_string(stderr).unwrap_or_default(),
    }
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
    /// What it printed on stdout up to and with its two "listening" lines.
    pub listening: Vec<String>,
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
        let mut command = supervisor_command(&["serve", "--config"]);
        command.arg(&config_path).env("RUST_LOG", "info");
        for (key, value) in env {
            command.env(key, value);
        }
        Self::spawn(command, dir, config_path)
    }

    /// Starts `command`, an `mcp-supervisor serve` on `config_path`, and
    /// waits for its "listening" lines; its stderr goes to a file in `dir`,
    /// which lives as long as the process.
    pub fn spawn(mut command: Command, dir: tempfile::TempDir, config_path: PathBuf) -> Served {
        use std::io::{BufRead, BufReader};
        let stderr_log = dir.path().join("stderr.log");
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr_log).expect("stderr log"));
        let mut child = command.spawn().expect("mcp-supervisor serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut listening = Vec::new();
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
            listening.push(line);
        }
        Served {
            child,
            gateway_url: gateway_url.unwrap(),
            admin_url: admin_url.unwrap(),
            config_path,
            listening,
            _dir: dir,
            stderr_log,
        }
    }

    /// `HOST:PORT` of the gateway.
    pub fn gateway_address(&self) -> &str {
        authority(&self.gateway_url)
    }

    /// `HOST:PORT` of the admin API (what `status --admin` takes).
    pub fn admin_address(&self) -> &str {
        authority(&self.admin_url)
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

/// `HOST:PORT` of an `http://HOST:PORT[/PATH]` URL.
fn authority(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http:// URL: {url}"));
    rest.split('/').next().unwrap_or(rest)
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
        let mut command = std::process::Command::new(bin(name));
        command.args(["--http", "127.0.0.1:0"]).args(extra);
        Self::start_command(command)
    }

    /// Starts `command`, a server that prints `listening on URL` first.
    pub fn start_command(mut command: std::process::Command) -> Self {
        use std::io::{BufRead, BufReader};
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("{command:?} does not start: {error}"));
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

/// The SDK client scripts the suite drives (`tests/interop/`), each on its
/// pinned SDK ([`PythonSdk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdkClient {
    /// `mcp` 1.x's `ClientSession` (protocol 2025-11-25).
    V1,
    /// `mcp` 2.x's `Client(url)` with its default `mode="auto"`.
    V2Auto,
    /// `mcp` 2.x's `Client(url, mode="legacy")` (the `initialize` handshake).
    V2Legacy,
}

impl SdkClient {
    /// The protocol version the client must end up with against the gateway.
    pub fn protocol(self) -> &'static str {
        match self {
            SdkClient::V2Auto => "2026-07-28",
            SdkClient::V1 | SdkClient::V2Legacy => "2025-11-25",
        }
    }

    /// The script against `url` with `options` (before the URL) and
    /// `TOOL ARGS_JSON` pairs, ready to run.
    pub fn command(
        self,
        url: &str,
        options: &[&str],
        calls: &[(&str, serde_json::Value)],
    ) -> Command {
        let (sdk, script, mode) = match self {
            SdkClient::V1 => (PythonSdk::V1, "python_client.py", None),
            SdkClient::V2Auto => (PythonSdk::V2, "python_client_v2.py", Some("auto")),
            SdkClient::V2Legacy => (PythonSdk::V2, "python_client_v2.py", Some("legacy")),
        };
        let mut command = Command::new(sdk.python());
        command.arg(repo_root().join("tests/interop").join(script));
        if let Some(mode) = mode {
            command.args(["--mode", mode]);
        }
        command.args(options).arg(url);
        for (tool, arguments) in calls {
            command.arg(tool).arg(arguments.to_string());
        }
        command
    }
}

/// The Inspector's `bin` (`inspector`, `mcp-inspector` in its package.json):
/// the launcher, which runs the CLI with `--cli`.
const INSPECTOR_LAUNCHER: &str =
    "node/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js";

/// Runs the MCP Inspector (pinned, on the installed Node 22) with `args` in
/// a scratch `home` (it keeps a catalog and settings under
/// `~/.mcp-inspector`). One run is about a second; 120 s only stops a hung
/// one.
pub fn inspector(home: &Path, args: &[&str]) -> Run {
    let mut command = Command::new(installed_tool("node/node_modules/.bin/node"));
    command
        .arg(installed_tool(INSPECTOR_LAUNCHER))
        .args(args)
        .current_dir(home)
        .env("HOME", home);
    run_bounded(&mut command, std::time::Duration::from_secs(120))
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

/// Polls `condition` every 50 ms until it holds or `bound` has passed;
/// returns whether it held. For conditions that no event announces to the
/// test (a line in a process's log).
pub fn wait_until(bound: std::time::Duration, mut condition: impl FnMut() -> bool) -> bool {
    let started = std::time::Instant::now();
    loop {
        if condition() {
            return true;
        }
        if started.elapsed() >= bound {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
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

/// A `$BROWSER` for `mcp-supervisor login`: it follows the authorization
/// URL's redirects, as a browser would (the test authorization server of
/// `mcp-test-server --oauth` approves at once), ending at login's redirect
/// listener.
pub const BROWSER: &str = "curl -sSL -o /dev/null";

/// The pinned Python MCP SDKs, each in a venv of its own (1.x and 2.x cannot
/// be installed side by side; docs/TESTING.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PythonSdk {
    /// `mcp` 1.30.0 in `.tools/venv`.
    V1,
    /// `mcp` 2.3.0 in `.tools/venv2`.
    V2,
}

impl PythonSdk {
    /// The venv's interpreter (the test fails if it is not installed).
    pub fn python(self) -> PathBuf {
        installed_tool(match self {
            PythonSdk::V1 => "venv/bin/python",
            PythonSdk::V2 => "venv2/bin/python",
        })
    }
}

/// The text of the first content of `tool`'s answer to `arguments`, called
/// through the gateway at `url` by rmcp's client in a session of its own.
pub fn gateway_call_text(url: &str, tool: &str, arguments: serde_json::Value) -> String {
    use rmcp::{
        ServiceExt, model::CallToolRequestParams, transport::StreamableHttpClientTransport,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = ().serve(StreamableHttpClientTransport::from_uri(url)).await.unwrap();
        let mut call = CallToolRequestParams::new(tool.to_owned());
        call.arguments = arguments.as_object().cloned();
        let answer = client.call_tool(call).await.unwrap();
        let _ = client.cancel().await;
        answer.content[0].as_text().unwrap().text.clone()
    })
}

/// The fenced code blocks of the Markdown files a user reads (README.md,
/// docs/*.md), so that tests run the examples where they are written and
/// nowhere else keeps a copy.
pub mod markdown {
    use std::path::Path;

    /// One fenced code block.
    #[derive(Debug, Clone)]
    pub struct CodeBlock {
        /// The file, relative to the repository root (for messages).
        pub file: String,
        /// 1-based line of the opening fence.
        pub line: usize,
        /// The first word of the info string (`toml`, `sh`, …; empty if none).
        pub lang: String,
        /// The lines between the fences, each ending in `\n`.
        pub text: String,
        /// The title of the nearest heading above the block.
        pub section: String,
        /// `X` of a `<!-- docs-test: X -->` comment on the line just above
        /// the fence: how a test is to check the block (invisible on GitHub).
        pub marker: Option<String>,
    }

    impl CodeBlock {
        /// `file:line`, for messages.
        pub fn place(&self) -> String {
            format!("{}:{}", self.file, self.line)
        }
    }

    /// The code blocks of `relative` (a path from the repository root), in
    /// order.
    pub fn code_blocks(relative: &str) -> Vec<CodeBlock> {
        let path = crate::repo_root().join(relative);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
        parse(relative, &text)
    }

    /// The code blocks in `section` of `relative` whose language is `lang`.
    pub fn section_blocks(relative: &str, section: &str, lang: &str) -> Vec<CodeBlock> {
        code_blocks(relative)
            .into_iter()
            .filter(|block| block.section == section && block.lang == lang)
            .collect()
    }

    /// The prose and code of `section` of `relative`: from its heading to
    /// the next heading of any level.
    pub fn section_text(relative: &str, section: &str) -> String {
        let path = crate::repo_root().join(relative);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
        let mut inside = false;
        let mut fenced = false;
        let mut found = String::new();
        for line in text.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
            } else if !fenced && line.starts_with('#') {
                inside = line.trim_start_matches('#').trim() == section;
                continue;
            }
            if inside {
                found.push_str(line);
                found.push('\n');
            }
        }
        assert!(!found.is_empty(), "{relative} has no section {section:?}");
        found
    }

    /// Every `docs/*.md`, relative to the repository root, sorted.
    pub fn docs_files() -> Vec<String> {
        let dir = crate::repo_root().join("docs");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .map(|path| {
                let name = path.file_name().and_then(|name| name.to_str()).unwrap();
                Path::new("docs").join(name).to_string_lossy().into_owned()
            })
            .collect();
        files.sort();
        files
    }

    fn parse(file: &str, markdown: &str) -> Vec<CodeBlock> {
        let mut blocks = Vec::new();
        let mut section = String::new();
        let mut previous = "";
        let mut open: Option<CodeBlock> = None;
        for (index, line) in markdown.lines().enumerate() {
            if let Some(block) = open.as_mut() {
                if line.trim_end() == "```" {
                    blocks.extend(open.take());
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                }
            } else if let Some(info) = line.strip_prefix("```") {
                let marker = previous
                    .trim()
                    .strip_prefix("<!-- docs-test:")
                    .and_then(|rest| rest.strip_suffix("-->"))
                    .map(|marker| marker.trim().to_owned());
                open = Some(CodeBlock {
                    file: file.to_owned(),
                    line: index + 1,
                    lang: info.split_whitespace().next().unwrap_or("").to_owned(),
                    text: String::new(),
                    section: section.clone(),
                    marker,
                });
            } else if line.starts_with('#') {
                section = line.trim_start_matches('#').trim().to_owned();
            }
            previous = line;
        }
        assert!(open.is_none(), "{file}: a code block is never closed");
        blocks
    }
}
