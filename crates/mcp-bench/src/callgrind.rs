//! P11: instructions per call, counted by callgrind (docs/BENCHMARKS.md,
//! "Instructions per call").
//!
//! Times on a shared 2-core machine move by several per cent from run to
//! run; the instructions a process executes for the same work do not. Each
//! hop (our gateway, the relay) runs under `valgrind --tool=callgrind`; one
//! rmcp client in this process opens a session through it, warms it up,
//! then `callgrind_control --zero` clears the counts, `calls` calls run one
//! after another, and `callgrind_control --dump` writes what they cost:
//! every thread of the hop, its idle timers included, divided by the calls.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;

use crate::{
    procs::{self, Binaries, Guarded},
    worker::{Client, raw_session},
};

/// How many calls warm a hop up and how many are counted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) warmup: usize,
    pub(crate) calls: usize,
}

impl Plan {
    pub(crate) fn new(quick: bool) -> Self {
        if quick {
            Plan {
                warmup: 50,
                calls: 200,
            }
        } else {
            Plan {
                warmup: 100,
                calls: 1_000,
            }
        }
    }
}

/// Where a hop's log goes (the run's scratch directory) and where its
/// dumps are kept for a person to `callgrind_annotate`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dirs<'a> {
    pub(crate) logs: &'a Path,
    pub(crate) dumps: &'a Path,
}

/// A hop running under callgrind: the process, and where its dumps go.
pub(crate) struct Counted {
    process: Guarded,
    out: PathBuf,
}

/// Is valgrind there to count with?
pub(crate) fn available() -> anyhow::Result<()> {
    for tool in ["valgrind", "callgrind_control"] {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success());
        if !found {
            bail!(
                "{tool} not found: P11 counts instructions with callgrind; install Debian's \
                 `valgrind` (scripts/install-test-deps.sh does, as root)"
            );
        }
    }
    Ok(())
}

impl Counted {
    /// `program args` under callgrind, announcing `markers` as
    /// [`procs::start_announcing`] expects; its log goes to `dirs.logs`, its
    /// dumps to `dirs.dumps` (`{name}.callgrind.N`).
    pub(crate) fn start(
        program: &Path,
        args: &[&str],
        markers: &[&str],
        dirs: Dirs<'_>,
        name: &str,
    ) -> anyhow::Result<Counted> {
        let out = dirs.dumps.join(format!("{name}.callgrind"));
        let mut command = Command::new("valgrind");
        command
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out.display()))
            .args(["--dump-line=no", "--compress-strings=no"])
            .arg(program)
            .args(args);
        let process =
            procs::start_announcing(command, markers, &dirs.logs.join(format!("{name}.log")))?;
        Ok(Counted { process, out })
    }

    /// Our gateway (`serve`) in front of `upstream_url`, as P5 runs it; its
    /// dumps are `{name}.callgrind.N`.
    pub(crate) fn gateway(
        bins: &Binaries,
        upstream_url: &str,
        dirs: Dirs<'_>,
        name: &str,
    ) -> anyhow::Result<Self> {
        let config =
            procs::write_gateway_config(upstream_url, dirs.logs, &format!("{name}-callgrind"), "")?;
        let config = config.display().to_string();
        Counted::start(
            &bins.supervisor,
            &["serve", "--config", &config],
            &procs::SERVE_MARKERS,
            dirs,
            name,
        )
    }

    /// The relay (`mcp-bench relay`) in front of `upstream_url`; its dumps
    /// are `{name}.callgrind.N`.
    pub(crate) fn relay(
        bins: &Binaries,
        upstream_url: &str,
        dirs: Dirs<'_>,
        name: &str,
    ) -> anyhow::Result<Self> {
        Counted::start(
            &bins.bench,
            &["relay", "--upstream", upstream_url],
            &["relay listening on"],
            dirs,
            name,
        )
    }

    pub(crate) fn url(&self) -> &str {
        &self.process.url
    }

    /// Instructions per call of `plan.calls` calls of `tool` by one
    /// `client` session through this hop.
    pub(crate) fn per_call(
        &self,
        client: Client,
        tool: &str,
        arguments: &serde_json::Value,
        plan: Plan,
    ) -> anyhow::Result<f64> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let label = format!("{client:?}");
        let pid = self.process.pid().to_string();
        let instructions = runtime.block_on(async {
            let session = raw_session(client, self.url()).await?;
            let mut params = CallToolRequestParams::new(tool.to_owned());
            params.arguments = arguments.as_object().cloned();
            let call = || async {
                let result = session.peer().call_tool(params.clone()).await?;
                anyhow::ensure!(result.is_error != Some(true), "{tool} failed: {result:?}");
                anyhow::Ok(())
            };
            for _ in 0..plan.warmup {
                call().await?;
            }
            control(&pid, "--zero")?;
            for _ in 0..plan.calls {
                call().await?;
            }
            let dump = self.dump(&pid, &label)?;
            let _ = session.cancel().await;
            anyhow::Ok(dump)
        })?;
        Ok(instructions as f64 / plan.calls as f64)
    }

    /// Dumps the counts since the last zero; the instructions in them.
    fn dump(&self, pid: &str, label: &str) -> anyhow::Result<u64> {
        let before = self.dumps()?;
        control(pid, &format!("--dump={label}"))?;
        // The dump is written before callgrind_control returns; allow the
        // file system a moment all the same.
        for _ in 0..50 {
            let fresh: Vec<PathBuf> = self
                .dumps()?
                .into_iter()
                .filter(|path| !before.contains(path))
                .collect();
            if let [path] = fresh.as_slice() {
                return total_instructions(path);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "callgrind wrote no dump for pid {pid} next to {}",
            self.out.display()
        )
    }

    /// The dump files written so far (`{out}.N`).
    fn dumps(&self) -> anyhow::Result<Vec<PathBuf>> {
        let dir = self.out.parent().context("the dumps' directory")?;
        let prefix = format!(
            "{}.",
            self.out
                .file_name()
                .context("the dumps' name")?
                .to_string_lossy()
        );
        Ok(std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with(&prefix))
            })
            .collect())
    }
}

/// `callgrind_control ARG PID`, which waits for callgrind to act.
fn control(pid: &str, arg: &str) -> anyhow::Result<()> {
    let output = Command::new("callgrind_control")
        .args([arg, pid])
        .output()
        .context("running callgrind_control")?;
    if !output.status.success() {
        bail!(
            "callgrind_control {arg} {pid} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// The `Ir` total of a callgrind dump (its `totals:` or `summary:` line).
fn total_instructions(path: &Path) -> anyhow::Result<u64> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("totals:")
                .or_else(|| line.strip_prefix("summary:"))
        })
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no totals in {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_read_from_a_dump() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.callgrind.1");
        std::fs::write(
            &path,
            "version: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd: x\npart: 1\n\
             desc: Trigger: Client Request: measured\nevents: Ir\nfl=(1) a\nfn=(1) b\n0 5\n\
             totals: 212345\n",
        )
        .unwrap();
        assert_eq!(total_instructions(&path).unwrap(), 212_345);
        std::fs::write(&path, "events: Ir\nsummary: 74000\n").unwrap();
        assert_eq!(total_instructions(&path).unwrap(), 74_000);
        std::fs::write(&path, "events: Ir\n").unwrap();
        assert!(total_instructions(&path).is_err());
    }
}
