//! The processes a benchmark runs against: the in-repo upstream
//! (`mcp-test-server --http`), the gateway (`mcp-supervisor serve`), and the
//! harness's own worker processes (one per measured round).

use std::{
    io::{BufRead, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

use crate::{measure::LoopResult, worker::Spec};

/// Where the release binaries live: beside this one, unless overridden.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    pub(crate) bench: PathBuf,
    pub(crate) test_server: PathBuf,
    pub(crate) supervisor: PathBuf,
    /// mcp-proxy, the peer gateway (`scripts/install-peers.sh`), if installed.
    pub(crate) peer: Option<PathBuf>,
    /// Another build of `mcp-supervisor` to compare with
    /// (`MCP_BENCH_BASELINE_BIN`: the commit before a change, say); P9 runs
    /// it beside this one.
    pub(crate) baseline: Option<PathBuf>,
}

impl Binaries {
    pub(crate) fn locate(root: &Path) -> anyhow::Result<Self> {
        let bench = std::env::current_exe().context("locating mcp-bench")?;
        let dir = bench
            .parent()
            .context("mcp-bench has no parent directory")?
            .to_owned();
        let find = |env: &str, name: &str| -> anyhow::Result<PathBuf> {
            let path = std::env::var_os(env)
                .map(PathBuf::from)
                .unwrap_or_else(|| dir.join(name));
            if !path.is_file() {
                bail!(
                    "{} not found; build it with `cargo build --release -p mcp-bench \
                     -p mcp-test-support -p mcp-supervisor-cli --bins` (or set {env})",
                    path.display()
                );
            }
            Ok(path)
        };
        Ok(Binaries {
            test_server: find("MCP_TEST_SERVER_BIN", "mcp-test-server")?,
            supervisor: find("MCP_SUPERVISOR_BIN", "mcp-supervisor")?,
            peer: std::env::var_os("MCP_PROXY_BIN")
                .map(PathBuf::from)
                .or_else(|| Some(root.join(".tools/mcp-proxy/bin/mcp-proxy")))
                .filter(|path| path.is_file()),
            baseline: std::env::var_os("MCP_BENCH_BASELINE_BIN")
                .map(PathBuf::from)
                .filter(|path| path.is_file()),
            bench,
        })
    }
}

/// A child process killed (SIGTERM, then SIGKILL) and reaped on drop.
#[derive(Debug)]
pub(crate) struct Guarded {
    child: Child,
    /// What it announced on its first stdout line (a URL).
    pub(crate) url: String,
    /// The `http://…` word of each announcement line, in marker order.
    pub(crate) urls: Vec<String>,
}

impl Guarded {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` to the process (not to its group).
    pub(crate) fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, signal);
    }

    /// Waits up to `timeout` for the process to exit; `None` if it did not.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        if self.wait_exit(Duration::from_secs(5)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts a child and waits for a stdout line containing each of `markers`
/// in turn, taking the `http://…` word of each as a URL. Everything the
/// child prints on stdout (announcements included) goes to `{log}.stdout`,
/// its stderr to `log`.
pub(crate) fn start_announcing(
    mut command: Command,
    markers: &[&str],
    log: &Path,
) -> anyhow::Result<Guarded> {
    let stderr =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut stdout_log = {
        let mut path = log.as_os_str().to_owned();
        path.push(".stdout");
        std::fs::File::create(&path)
            .with_context(|| format!("creating {}", Path::new(&path).display()))?
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("spawning {command:?}"))?;
    let stdout = child.stdout.take().context("child stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut urls = Vec::new();
    for marker in markers {
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    let _ = writeln!(stdout_log, "{line}");
                    if !line.contains(marker) {
                        continue;
                    }
                    match line
                        .split_whitespace()
                        .find(|word| word.starts_with("http://"))
                    {
                        Some(url) => break url.to_owned(),
                        None => bail!("no URL in {line:?}"),
                    }
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!(
                        "{command:?} exited before announcing itself; see {}",
                        log.display()
                    );
                }
            }
        };
        urls.push(url);
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = writeln!(stdout_log, "{line}");
        }
    });
    Ok(Guarded {
        child,
        url: urls.first().cloned().unwrap_or_default(),
        urls,
    })
}

/// `mcp-test-server --http 127.0.0.1:0` (with Nagle left on if `nodelay` is false).
pub(crate) fn start_upstream(
    bins: &Binaries,
    nodelay: bool,
    logs: &Path,
) -> anyhow::Result<Guarded> {
    let (args, log): (&[&str], _) = if nodelay {
        (&[], "upstream.log")
    } else {
        (&["--no-nodelay"], "upstream-no-nodelay.log")
    };
    start_upstream_with(bins, args, &logs.join(log))
}

/// `mcp-test-server --http 127.0.0.1:0` with more arguments (`--extra-tools
/// 13`, …), logging errors only to `log`.
pub(crate) fn start_upstream_with(
    bins: &Binaries,
    args: &[&str],
    log: &Path,
) -> anyhow::Result<Guarded> {
    let mut command = Command::new(&bins.test_server);
    command
        .args(["--http", "127.0.0.1:0"])
        .args(args)
        .env("MCP_TEST_SERVER_LOG", "error");
    start_announcing(command, &["listening on"], log)
}

/// An upstream built on an official SDK, for P11's rows beside the rmcp one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SdkUpstream {
    /// `tests/interop/python_server.py`: FastMCP of the Python `mcp` 1.x
    /// SDK (`.tools/venv`), stateful streamable HTTP.
    Python,
    /// `tests/interop/ts_server.mjs`: the TypeScript SDK v2 on Node 22
    /// (`.tools/node`).
    TypeScript,
}

impl SdkUpstream {
    pub(crate) fn name(self) -> &'static str {
        match self {
            SdkUpstream::Python => "a Python-SDK (FastMCP) upstream",
            SdkUpstream::TypeScript => "a TypeScript-SDK upstream",
        }
    }

    /// Its short name, for file names.
    pub(crate) fn key(self) -> &'static str {
        match self {
            SdkUpstream::Python => "python",
            SdkUpstream::TypeScript => "ts",
        }
    }

    /// A plain tool of it, and its arguments.
    pub(crate) fn tool(self) -> (&'static str, serde_json::Value) {
        match self {
            SdkUpstream::Python => ("greet", serde_json::json!({"name": "bench"})),
            SdkUpstream::TypeScript => ("add", serde_json::json!({"a": 1, "b": 2})),
        }
    }

    /// Starts it over streamable HTTP on loopback; its log goes to `logs`.
    pub(crate) fn start(self, root: &Path, logs: &Path) -> anyhow::Result<Guarded> {
        match self {
            SdkUpstream::TypeScript => {
                let node = root.join(".tools/node/node_modules/.bin/node");
                let mut command = Command::new(&node);
                command
                    .arg(root.join("tests/interop/ts_server.mjs"))
                    .arg("--http");
                start_announcing(command, &["listening on"], &logs.join("ts-upstream.log"))
            }
            SdkUpstream::Python => {
                let python = root.join(".tools/venv/bin/python");
                // It takes a port rather than announcing one: a free one.
                let port = std::net::TcpListener::bind("127.0.0.1:0")?
                    .local_addr()?
                    .port();
                let log = logs.join("python-upstream.log");
                let stderr = std::fs::File::create(&log)
                    .with_context(|| format!("creating {}", log.display()))?;
                let mut child = Command::new(&python)
                    .arg(root.join("tests/interop/python_server.py"))
                    .args(["--http", &port.to_string()])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(stderr)
                    .spawn()
                    .with_context(|| format!("spawning {}", python.display()))?;
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                    if std::time::Instant::now() > deadline || child.try_wait()?.is_some() {
                        let _ = child.kill();
                        let _ = child.wait();
                        bail!("the Python upstream did not listen; see {}", log.display());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let url = format!("http://127.0.0.1:{port}/mcp");
                Ok(Guarded {
                    child,
                    url: url.clone(),
                    urls: vec![url],
                })
            }
        }
    }
}

/// `mcp-supervisor serve` with one connection `up` to `upstream_url` (8 calls
/// in flight, like the 8 callers of the throughput run), `extra` keys added
/// to it; its config and log are `{name}.toml` and `{name}.log` in `dir`.
/// The URL is the gateway's MCP endpoint.
pub(crate) fn start_gateway(
    bins: &Binaries,
    upstream_url: &str,
    dir: &Path,
    name: &str,
    extra: &str,
) -> anyhow::Result<Guarded> {
    let config = write_gateway_config(upstream_url, dir, name, extra)?;
    serve(bins, &config, dir, name)
}

/// Writes the config [`start_gateway`] serves to `{name}.toml` in `dir`.
pub(crate) fn write_gateway_config(
    upstream_url: &str,
    dir: &Path,
    name: &str,
    extra: &str,
) -> anyhow::Result<PathBuf> {
    write_config(dir, name, &gateway_config(upstream_url, "", extra))
}

/// [`start_gateway`] with `gateway_keys` added to its `[gateway]` table
/// (`auth = …`, `public_url = …`).
pub(crate) fn start_gateway_with(
    bins: &Binaries,
    upstream_url: &str,
    dir: &Path,
    name: &str,
    gateway_keys: &str,
    extra: &str,
) -> anyhow::Result<Guarded> {
    let config = write_config(
        dir,
        name,
        &gateway_config(upstream_url, gateway_keys, extra),
    )?;
    serve(bins, &config, dir, name)
}

/// The text of [`start_gateway`]'s config: `gateway_keys` in `[gateway]`,
/// `extra` after the connection's keys (its own keys, or tables after it).
fn gateway_config(upstream_url: &str, gateway_keys: &str, extra: &str) -> String {
    format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"namespaced\"\n{gateway_keys}\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n\n\
         [connections.up]\ntransport = \"http\"\nurl = \"{upstream_url}\"\n\
         max_concurrent_calls = 8\n{extra}"
    )
}

/// Writes `text` to `{name}.toml` in `dir`; its path.
fn write_config(dir: &Path, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, text)?;
    Ok(config)
}

/// `mcp-supervisor serve` with the config `text` (which must listen with
/// both the gateway and the admin API), written to `{name}.toml` in `dir`;
/// its log is `{name}.log`. `url` (and `urls[0]`) is the gateway's MCP
/// endpoint, `urls[1]` the admin API.
pub(crate) fn start_gateway_config(
    bins: &Binaries,
    dir: &Path,
    name: &str,
    text: &str,
) -> anyhow::Result<Guarded> {
    let config = write_config(dir, name, text)?;
    serve(bins, &config, dir, name)
}

/// The markers `serve` announces its gateway and admin API with.
pub(crate) const SERVE_MARKERS: [&str; 2] = ["gateway listening on", "admin API listening on"];

/// `mcp-supervisor serve --config {config}`, logging to `{name}.log` in `dir`.
fn serve(bins: &Binaries, config: &Path, dir: &Path, name: &str) -> anyhow::Result<Guarded> {
    let mut command = Command::new(&bins.supervisor);
    command.arg("serve").arg("--config").arg(config);
    start_announcing(command, &SERVE_MARKERS, &dir.join(format!("{name}.log")))
}

/// `mcp-bench relay --upstream {upstream_url}` (docs/BENCHMARKS.md, "The
/// floor"): an HTTP relay with no MCP logic; its log is `relay.log` in `dir`.
pub(crate) fn start_relay(
    bins: &Binaries,
    upstream_url: &str,
    dir: &Path,
) -> anyhow::Result<Guarded> {
    let mut command = Command::new(&bins.bench);
    command.args(["relay", "--upstream", upstream_url]);
    start_announcing(command, &["relay listening on"], &dir.join("relay.log"))
}

/// Runs one measured round in a fresh worker process (clean CPU and RSS).
pub(crate) fn run_worker(bins: &Binaries, spec: &Spec) -> anyhow::Result<LoopResult> {
    crate::measure::note_load();
    let json = serde_json::to_string(spec)?;
    let output = Command::new(&bins.bench)
        .arg("worker")
        .arg(&json)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running a worker")?;
    if !output.status.success() {
        bail!("worker {json} failed with {}", output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).with_context(|| format!("parsing worker output {last:?}"))
}

/// Runs the Python SDK client loop (`scripts/bench-python-client.py`).
pub(crate) fn run_python(
    python: &Path,
    script: &Path,
    url: &str,
    seconds: f64,
    warmup_seconds: f64,
) -> anyhow::Result<LoopResult> {
    crate::measure::note_load();
    let output = Command::new(python)
        .arg(script)
        .args(["--url", url])
        .args(["--seconds", &seconds.to_string()])
        .args(["--warmup-seconds", &warmup_seconds.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !output.status.success() {
        bail!("{} failed with {}", script.display(), output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).with_context(|| format!("parsing python output {last:?}"))
}

/// The peer gateway `make bench PEERS=1` compares ours with: `mcp-proxy`
/// 0.6.0 (`scripts/install-peers.sh`) with one backend `up` at
/// `upstream_url`, logging at info (at its default it logs every call at
/// debug, which would measure its logging). Its MCP endpoint is `/`; its
/// tools are named `up/{tool}`. It announces nothing on stdout, so it gets a
/// port picked here and is ready when `/readyz` answers 200.
pub(crate) fn start_peer_gateway(
    binary: &Path,
    upstream_url: &str,
    dir: &Path,
) -> anyhow::Result<Guarded> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config = dir.join("mcp-proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nname = \"bench-peer\"\n\n\
             [proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\n\
             [[backends]]\nname = \"up\"\ntransport = \"http\"\nurl = \"{upstream_url}\"\n\n\
             [observability]\nlog_level = \"info\"\n"
        ),
    )?;
    let log = dir.join("mcp-proxy.log");
    let mut child = Command::new(binary)
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("mcp-proxy.log.stdout"))?)
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| format!("spawning {}", binary.display()))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !answers_200(port, "/readyz") {
        if let Ok(Some(status)) = child.try_wait() {
            bail!(
                "mcp-proxy exited ({status}) before it was ready; see {}",
                log.display()
            );
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("mcp-proxy was not ready within 30 s; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/");
    Ok(Guarded {
        child,
        url: url.clone(),
        urls: vec![url],
    })
}

/// Does `GET path` on 127.0.0.1:`port` answer 200?
fn answers_200(port: u16, path: &str) -> bool {
    use std::io::Read as _;
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let mut head = [0u8; 12];
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_exact(&mut head).is_ok()
        && head.starts_with(b"HTTP/1.1 200")
}
