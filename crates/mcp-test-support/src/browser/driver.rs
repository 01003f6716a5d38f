//! The processes behind a [`Browser`](super::Browser): finding chromedriver
//! and Chromium, starting chromedriver on a free port, and ending every
//! process the browser started, however the test ends.
//!
//! Why the sweep: deleting the session makes chromedriver close Chromium,
//! but Chromium's zygotes outlive it for seconds, and killing chromedriver
//! alone (a test that panics) orphans the whole browser. Every Chromium
//! process carries the `--user-data-dir` of its profile on its command
//! line, and each browser here has a profile of its own, so the processes
//! to end are exactly those whose command line (`/proc/PID/cmdline`,
//! Linux) holds that flag.

use std::{
    ffi::OsString,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use tempfile::TempDir;

use super::wire::Wire;

/// What a machine without the browser is told.
const MISSING: &str = "headless Chromium is needed: install the Debian packages `chromium` \
                       and `chromium-driver` (scripts/install-test-deps.sh does it when run as root)";

/// How long chromedriver may take to answer `/status` with `ready`.
const DRIVER_START: Duration = Duration::from_secs(20);

/// How long the browser's processes may take to be gone once killed.
const SWEEP_PATIENCE: Duration = Duration::from_secs(5);

/// The two programs, found once per browser.
#[derive(Debug)]
pub(super) struct Binaries {
    pub(super) chromedriver: PathBuf,
    pub(super) chromium: PathBuf,
}

impl Binaries {
    /// `$CHROMEDRIVER` / `$CHROMIUM` when set, else the first on `PATH`,
    /// else `/usr/bin`, where Debian puts them.
    pub(super) fn locate() -> anyhow::Result<Self> {
        Ok(Self {
            chromedriver: locate("CHROMEDRIVER", "chromedriver")?,
            chromium: locate("CHROMIUM", "chromium")?,
        })
    }
}

fn locate(variable: &str, program: &str) -> anyhow::Result<PathBuf> {
    locate_with(variable, std::env::var_os(variable), program)
}

/// [`locate`] with the variable's value given (tests cannot set it safely).
fn locate_with(variable: &str, set: Option<OsString>, program: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = set {
        let path = PathBuf::from(path);
        if !is_executable(&path) {
            bail!(
                "{variable}={} is not an executable file; {MISSING}",
                path.display()
            );
        }
        return Ok(path);
    }
    let on_path = std::env::var_os("PATH")
        .map(|dirs| std::env::split_paths(&dirs).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|path| is_executable(path))
        .with_context(|| format!("{MISSING} (no `{program}` on PATH nor in /usr/bin)"))
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// A running chromedriver and the profile directory of its browser; ends
/// both (and the browser) when dropped.
#[derive(Debug)]
pub(super) struct Processes {
    chromedriver: Child,
    /// The browser's `--user-data-dir`: a fresh profile (no cookies, no
    /// cache from another test), and the mark its processes are found by.
    profile: TempDir,
}

impl Processes {
    /// Starts chromedriver on a free loopback port and waits until it is
    /// ready; returns it with a [`Wire`] to it.
    pub(super) async fn start(chromedriver: &Path) -> anyhow::Result<(Self, Wire)> {
        let profile = tempfile::Builder::new()
            .prefix("mcp-browser-")
            .tempdir()
            .context("creating the browser's profile directory")?;
        // A free port can be taken between asking and binding: try a few.
        let mut last = None;
        for _ in 0..3 {
            let port = crate::free_loopback_port();
            let mut child = Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| format!("running {}; {MISSING}", chromedriver.display()))?;
            let wire = Wire::new(port)?;
            match until_ready(&mut child, &wire).await {
                Ok(()) => {
                    let processes = Self {
                        chromedriver: child,
                        profile,
                    };
                    return Ok((processes, wire));
                }
                Err(error) => {
                    // No browser yet: chromedriver is all there is to end.
                    let _ = child.kill();
                    let _ = child.wait();
                    last = Some(error);
                }
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("chromedriver did not start")))
    }

    /// The browser's profile directory.
    pub(super) fn profile(&self) -> &Path {
        self.profile.path()
    }

    /// Kills the browser's processes until none is left, then chromedriver,
    /// and waits for chromedriver. (Killed browser processes that were not
    /// chromedriver's children are reaped by init, as zombies for a moment.)
    fn end(&mut self) {
        let mark = format!("--user-data-dir={}", self.profile.path().display());
        let deadline = Instant::now() + SWEEP_PATIENCE;
        loop {
            let left = processes_with_arg(&mark);
            if left.is_empty() {
                break;
            }
            for pid in &left {
                // Gone already is fine: this is a sweep.
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            if Instant::now() > deadline {
                tracing::warn!(?left, "browser processes outlived SIGKILL");
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.chromedriver.kill();
        let _ = self.chromedriver.wait();
    }
}

/// Waits until `chromedriver` reports ready, exits, or takes too long.
async fn until_ready(chromedriver: &mut Child, wire: &Wire) -> anyhow::Result<()> {
    let deadline = Instant::now() + DRIVER_START;
    loop {
        if wire.ready().await {
            return Ok(());
        }
        if let Some(status) = chromedriver.try_wait()? {
            bail!("chromedriver exited at start: {status}");
        }
        if Instant::now() > deadline {
            bail!("chromedriver did not report ready within {DRIVER_START:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.end();
    }
}

/// Pids of the live processes with `arg` as one of their arguments
/// (zombies have an empty command line, so they are not listed).
fn processes_with_arg(arg: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            has_arg(&cmdline, arg.as_bytes()).then_some(pid)
        })
        .collect()
}

/// Whether `arg` is a whole argument of `cmdline`. Arguments are separated
/// by NULs, except in Chromium's children (renderers, zygotes, GPU), which
/// rewrite their title into one string with spaces between arguments (so a
/// profile path with a space in it would be missed there; temporary
/// directories have none).
fn has_arg(cmdline: &[u8], arg: &[u8]) -> bool {
    cmdline
        .split(|byte| *byte == 0 || *byte == b' ')
        .any(|candidate| candidate == arg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep finds a process by an argument of its command line, and
    /// only while it lives.
    #[test]
    fn processes_are_found_by_an_argument() {
        // An argument `sleep` takes (a duration), unique to this process.
        let mark = format!("1000.{}", std::process::id());
        let mut child = Command::new("sleep").arg(&mark).spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // Until it has exec'd, the child has our command line.
        let deadline = Instant::now() + Duration::from_secs(10);
        while processes_with_arg(&mark).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(processes_with_arg(&mark), vec![pid]);
        assert!(processes_with_arg(&mark[..mark.len() - 1]).is_empty());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(processes_with_arg(&mark).is_empty());
    }

    #[test]
    fn an_argument_is_matched_whole_in_either_form() {
        let mark = b"--user-data-dir=/tmp/p1";
        assert!(has_arg(b"chromium\0--user-data-dir=/tmp/p1\0--x", mark));
        assert!(has_arg(
            b"chromium --type=renderer --user-data-dir=/tmp/p1",
            mark
        ));
        assert!(!has_arg(b"chromium\0--user-data-dir=/tmp/p12\0", mark));
        assert!(!has_arg(b"chromium --user-data-dir=/tmp/p", mark));
        assert!(!has_arg(b"", mark));
    }

    #[test]
    fn a_missing_override_names_the_packages() {
        let set = Some(OsString::from("/nonexistent/chromium"));
        let error = locate_with("CHROMIUM", set, "chromium").unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.contains("CHROMIUM=/nonexistent/chromium"),
            "{message}"
        );
        assert!(message.contains("`chromium-driver`"), "{message}");
    }

    #[test]
    fn a_missing_program_names_the_packages() {
        let error = locate_with("X", None, "no-such-program-mcp").unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.starts_with("headless Chromium is needed"),
            "{message}"
        );
        assert!(
            message.contains("no `no-such-program-mcp` on PATH"),
            "{message}"
        );
    }
}
