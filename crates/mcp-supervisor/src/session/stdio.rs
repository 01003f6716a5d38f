//! Opening a session to an upstream that runs as our child process and speaks
//! MCP over its stdin/stdout (docs/CONFIG.md, `transport = "stdio"`;
//! docs/SUPERVISION.md, "No orphans").
//!
//! The child gets a minimal environment, runs as the leader of its own
//! process group with a parent-death signal, and has its stderr drained into
//! our debug log. The [`Session`] it yields owns a [`ChildGroup`]: closing
//! the session ends rmcp's graceful goodbye (close stdin, SIGTERM, SIGKILL,
//! each sent to the whole group) with a SIGKILL to whatever of the group is
//! left, and dropping the session kills the group at once.
//!
//! Arguments and environment values may hold credentials: they go into the
//! `Command` and nowhere else — never into a [`Failure`], a log line or `Debug`.
//!
//! Layout:
//! - `command`: resolving the program and building its environment;
//! - `group`: the process group, the parent-death signal and [`ChildGroup`];
//! - `stderr`: the bounded stderr drain.

mod command;
mod group;
mod guardian;
mod stderr;

use std::{io, process::Stdio};

use process_wrap::tokio::CommandWrap;
use rmcp::{service::ClientServiceExt, transport::TokioChildProcess};
use tokio::{
    process::{ChildStderr, Command},
    time::Instant,
};

pub use group::ChildGroup;

use super::{Session, SessionHandler};
use crate::{config::StdioTransport, failure::Failure};

/// Starts the configured command and initializes an MCP session over its
/// stdio, within `deadline`.
///
/// On any failure the child's whole process group is killed before this
/// returns: a failed or timed-out handshake leaves no process behind.
/// Failures to start (command not found, not executable, missing `cwd`) are
/// `transport` failures marked `not_run`.
///
/// Call it from a thread that lives as long as the session (a runtime worker
/// or an actix arbiter): Linux delivers the parent-death signal when the
/// spawning *thread* exits, not only when the whole process does.
pub async fn open_stdio(
    connection: &str,
    transport: &StdioTransport,
    handler: SessionHandler,
    deadline: Instant,
) -> Result<Session, Failure> {
    let (child, group, stderr) = start(transport)?;
    // From here on every return kills the group (`ChildGroup` does on drop).
    tracing::debug!(connection, pid = group.pid(), "started stdio upstream");
    if let Some(stderr) = stderr {
        tokio::spawn(stderr::drain(connection.to_owned(), stderr));
    }
    let ended = tokio_util::sync::CancellationToken::new();
    let watched = super::watch::Watched::new(child, ended.clone());
    let lifecycle = handler.lifecycle();
    let serving = handler.clone().serve_with_lifecycle(watched, lifecycle);
    let result = match tokio::time::timeout_at(deadline, serving).await {
        Ok(Ok(service)) => return Ok(Session::with_child(service, group, ended)),
        Ok(Err(error)) => match handler.after_failed_discover(&error) {
            // A fresh child for the `initialize` handshake.
            Some(legacy) => {
                group.kill_group();
                return Box::pin(open_stdio(connection, transport, legacy, deadline)).await;
            }
            None => Err(super::classify(&error)),
        },
        Err(_) => Err(Failure::timeout("initialize did not complete in time")),
    };
    // rmcp has dropped the transport by now, which only schedules a kill on
    // the runtime; kill the group ourselves so it is gone when we answer.
    group.kill_group();
    result
}

/// Where bundled servers live: beside the executable, or, for cargo's test
/// and example binaries (`target/debug/deps/…`, `target/debug/examples/…`),
/// beside the workspace's binaries one level up.
fn bundle_dir(exe: &std::path::Path) -> Option<std::path::PathBuf> {
    let dir = exe.parent()?;
    match dir.file_name().and_then(|name| name.to_str()) {
        Some("deps" | "examples") => dir.parent().map(ToOwned::to_owned),
        _ => Some(dir.to_owned()),
    }
}

/// Resolves and spawns the command: the rmcp transport over its stdio, its
/// process group and its stderr.
fn start(
    transport: &StdioTransport,
) -> Result<(TokioChildProcess, ChildGroup, Option<ChildStderr>), Failure> {
    let name = transport.command.as_str();
    let cwd = transport.cwd.as_deref();
    if let Some(cwd) = cwd
        && !cwd.is_dir()
    {
        return Err(command::not_run(format!(
            "working directory of command '{name}' does not exist: {}",
            cwd.display()
        )));
    }
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| bundle_dir(&exe));
    let program = command::resolve(
        name,
        cwd,
        command::child_path(&transport.env).as_deref(),
        exe_dir.as_deref(),
    )?;

    let mut child_command = Command::new(program);
    child_command.args(&transport.args);
    command::apply_env(&mut child_command, &transport.env);
    if let Some(cwd) = cwd {
        child_command.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(child_command);
    wrapped.wrap(group::OwnGroup);
    let (child, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| spawn_failure(name, &error))?;
    // Without a pid there is nothing to track; rmcp's drop kills the child.
    let Some(group) = child.id().and_then(ChildGroup::new) else {
        return Err(Failure::transport(format!(
            "command '{name}' exited before it was tracked"
        )));
    };
    Ok((child, group, stderr))
}

/// The failure of a `spawn` that did not start the program. The io error's
/// text is not used: only its kind, which cannot carry arguments.
fn spawn_failure(name: &str, error: &io::Error) -> Failure {
    let reason = match error.kind() {
        io::ErrorKind::NotFound => format!("command '{name}' not found"),
        io::ErrorKind::PermissionDenied => format!("command '{name}' is not executable"),
        kind => format!("command '{name}' could not be started: {kind}"),
    };
    command::not_run(reason)
}
