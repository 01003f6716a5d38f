//! A real `redis-server` on loopback, for the fleet's tests: started on a
//! free port in a temporary directory, stopped by pid (and again on drop),
//! restartable on the same port, and asked things over its own protocol
//! (RESP) with a tiny client of our own, so a test can see what the
//! supervisor wrote without trusting the supervisor's client.
//!
//! `redis-server` comes from Debian's `redis-server` package, which
//! `scripts/install-test-deps.sh` installs when run as root.

use std::{
    io::{BufRead, BufReader, Write},
    net::TcpStream,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    password: Option<String>,
    child: Option<Child>,
}

/// What a RESP answer holds, as far as the tests need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Nil,
    Int(i64),
    Text(String),
    Error(String),
    List(Vec<Reply>),
}

impl Reply {
    /// The text of a string answer.
    pub fn text(&self) -> Option<&str> {
        match self {
            Reply::Text(text) => Some(text),
            _ => None,
        }
    }
}

impl RedisServer {
    /// Starts one with no password.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(None)
    }

    /// Starts one that requires `password` (`requirepass`).
    pub fn start_with_password(password: &str) -> anyhow::Result<Self> {
        Self::start_with(Some(password.to_owned()))
    }

    fn start_with(password: Option<String>) -> anyhow::Result<Self> {
        let mut server = RedisServer {
            port: 0,
            password,
            child: None,
        };
        // A free port can be taken between asking and binding: try a few.
        let mut last = None;
        for _ in 0..5 {
            server.port = crate::free_loopback_port();
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .args(["--loglevel", "warning"])
            .args(["--dir", &std::env::temp_dir().to_string_lossy()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(password) = &self.password {
            command.args(["--requirepass", password]);
        }
        let child = command.spawn().map_err(|error| {
            anyhow::anyhow!(
                "cannot run redis-server ({error}): install Debian's package `redis-server` \
                 (./scripts/install-test-deps.sh does so when run as root)"
            )
        })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Reply::Text(pong)) = self.query(&["PING"])
                && pong == "PONG"
            {
                return Ok(());
            }
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                bail!(
                    "redis-server on port {} exited at start: {status}",
                    self.port
                );
            }
            if Instant::now() > deadline {
                self.stop();
                bail!("redis-server on port {} did not answer PING", self.port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills it (SIGKILL, as a crash would) and waits for it to be gone.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty (nothing is saved).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        self.spawn()
    }

    /// Sends one command and reads its answer.
    pub fn query(&self, args: &[&str]) -> anyhow::Result<Reply> {
        let stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut writer = stream;
        if let Some(password) = &self.password {
            writer.write_all(&encode(&["AUTH", password]))?;
            if let Reply::Error(error) = read(&mut reader)? {
                bail!("AUTH refused: {error}");
            }
        }
        writer.write_all(&encode(args))?;
        read(&mut reader)
    }

    /// How many commands the server has processed since it started
    /// (`INFO stats`' `total_commands_processed`), this query's own
    /// commands included.
    pub fn commands_processed(&self) -> anyhow::Result<u64> {
        let info = self.query(&["INFO", "stats"])?;
        let text = info.text().context("INFO answered no text")?;
        text.lines()
            .find_map(|line| line.strip_prefix("total_commands_processed:"))
            .context("INFO stats has no total_commands_processed")?
            .trim()
            .parse()
            .context("total_commands_processed is not a number")
    }
}

impl RedisServer {
    /// How many times `command` (lowercase, e.g. `publish`) has run since
    /// the server started (`INFO commandstats`), 0 if never.
    pub fn command_calls(&self, command: &str) -> anyhow::Result<u64> {
        let info = self.query(&["INFO", "commandstats"])?;
        let text = info.text().context("INFO answered no text")?;
        let prefix = format!("cmdstat_{command}:calls=");
        Ok(text
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.trim().parse().ok())
            .unwrap_or(0))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn read(reader: &mut impl BufRead) -> anyhow::Result<Reply> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        bail!("the connection closed");
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(1.min(line.len()));
    Ok(match kind {
        "+" => Reply::Text(rest.to_owned()),
        "-" => Reply::Error(rest.to_owned()),
        ":" => Reply::Int(rest.parse()?),
        "$" => {
            let len: i64 = rest.parse()?;
            if len < 0 {
                return Ok(Reply::Nil);
            }
            let mut bytes = vec![0; usize::try_from(len)? + 2];
            reader.read_exact(&mut bytes)?;
            bytes.truncate(bytes.len() - 2);
            Reply::Text(String::from_utf8_lossy(&bytes).into_owned())
        }
        "*" => {
            let len: i64 = rest.parse()?;
            if len < 0 {
                return Ok(Reply::Nil);
            }
            let mut items = Vec::new();
            for _ in 0..len {
                items.push(read(reader)?);
            }
            Reply::List(items)
        }
        _ => bail!("not a RESP answer: {line:?}"),
    })
}
