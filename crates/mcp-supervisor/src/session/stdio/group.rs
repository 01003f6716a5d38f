//! The child's process group, and the guarantees that no process of it
//! outlives its session or the supervisor (docs/SUPERVISION.md, "No orphans").
//!
//! - [`OwnGroup`] makes the child the leader of a new process group, asks the
//!   kernel to SIGKILL it when we die (`PR_SET_PDEATHSIG`), and makes every
//!   signal rmcp sends (SIGTERM on close, SIGKILL on drop) reach the whole
//!   group, grandchildren included.
//! - [`ChildGroup`] is the handle the session keeps: it can tell whether any
//!   process of the group still runs, and kills the group when dropped.
//!
//! - The [`guardian`] process kills every group still registered if this
//!   process dies without cleaning up: the parent-death signal is armed for
//!   the direct child only (the kernel clears it on fork), so without it a
//!   grandchild that ignores stdin EOF would survive `kill -9` of the
//!   supervisor.
//!
//! Limit: a process that leaves the group (`setsid`, `setpgid`) is beyond
//! any group kill.
//!
//! We do not use process-wrap's own `ProcessGroup` wrapper: its hooks are
//! `#[instrument]`ed with the `Command` as a field, and a `Command`'s `Debug`
//! prints every argument and environment value, so debug logging for
//! `process_wrap` would leak them.

use std::io;

use nix::{
    errno::Errno,
    sys::signal::{Signal, killpg},
    unistd::Pid,
};
use process_wrap::tokio::{ChildWrapper, CommandWrap, CommandWrapper};
use tokio::process::Command;

use super::guardian;

/// The identity of a stdio child's process group (the child is its leader,
/// so the group id is the child's pid), and the means to end it.
///
/// Dropping it SIGKILLs whatever is left of the group. It is deliberately
/// not `Clone`: exactly one owner (the session) decides when the group dies.
#[derive(Debug)]
pub struct ChildGroup {
    /// The child we started, which is also the group leader.
    pid: u32,
    pgid: Pid,
}

impl ChildGroup {
    /// The handle for the group led by `pid` (a child started with
    /// [`OwnGroup`]); `None` for a number no process can have.
    pub(super) fn new(pid: u32) -> Option<Self> {
        let pgid = Pid::from_raw(i32::try_from(pid).ok()?);
        guardian::watch(pgid.as_raw());
        Some(ChildGroup { pid, pgid })
    }

    /// Process id of the child the session started.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Process group id of the child and everything it started (= [`Self::pid`]).
    pub fn pgid(&self) -> u32 {
        self.pid
    }

    /// Sends SIGKILL to every process of the group. A group that is already
    /// gone is fine; nothing is waited for (the leader is reaped by rmcp's
    /// transport, grandchildren by init).
    ///
    /// The group id stays reserved while any member (even a zombie leader)
    /// exists, so this cannot hit another group unless ours fully died and
    /// its number was reused by a new group leader in between.
    pub fn kill_group(&self) {
        kill_group(self.pgid, Signal::SIGKILL);
    }

    /// Whether any process of the group is still running. Zombies (exited,
    /// not yet reaped) do not count: they hold no resources but a pid.
    ///
    /// Reads `/proc` when the group is not obviously gone, so this costs a
    /// directory scan; it is meant for shutdown checks and status, not hot paths.
    pub fn is_alive(&self) -> bool {
        match killpg(self.pgid, None) {
            Err(Errno::ESRCH) => false,
            // Without /proc (not Linux) the existence check is all we have.
            _ => running_member(self.pgid).unwrap_or(true),
        }
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        // The last line of defence: whatever path the session took (closed,
        // dropped, failed handshake), nothing of the group survives it.
        self.kill_group();
        guardian::forget(self.pgid.as_raw());
    }
}

/// Sends `signal` to the group, treating "no such group" as success.
fn kill_group(pgid: Pid, signal: Signal) {
    match killpg(pgid, signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(error) => tracing::debug!(pgid = pgid.as_raw(), %error, "cannot signal child group"),
    }
}

/// Whether a process of group `pgid` is in a state other than zombie/dead,
/// scanning `/proc`; `None` when `/proc` cannot be read.
fn running_member(pgid: Pid) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let running = entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        // A process may exit between the listing and this read: then it is gone.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| parse_stat(&stat))
            .is_some_and(|(state, group)| group == pgid.as_raw() && !matches!(state, 'Z' | 'X'))
    });
    Some(running)
}

/// `(state, pgrp)` from a `/proc/PID/stat` line. The command name (field 2)
/// may contain spaces and parentheses, so fields are counted after the last `)`.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// process-wrap wrapper: new process group, parent-death signal, kill on
/// drop, and group-wide signals for the child it returns.
#[derive(Debug, Clone, Copy)]
pub(super) struct OwnGroup;

impl CommandWrapper for OwnGroup {
    fn pre_spawn(&mut self, command: &mut Command, _core: &CommandWrap) -> io::Result<()> {
        // 0 = a new group whose id is the child's pid.
        command.process_group(0);
        // Only reaches the leader; a safety net for when rmcp's own drop
        // (which kills the group through us) cannot run.
        command.kill_on_drop(true);
        die_with_parent(command);
        Ok(())
    }

    fn wrap_child(
        &mut self,
        inner: Box<dyn ChildWrapper>,
        _core: &CommandWrap,
    ) -> io::Result<Box<dyn ChildWrapper>> {
        let pid = inner
            .id()
            .ok_or_else(|| io::Error::other("child exited before it could be tracked"))?;
        let pgid = Pid::from_raw(i32::try_from(pid).map_err(io::Error::other)?);
        Ok(Box::new(OwnGroupChild { inner, pgid }))
    }
}

/// The child as rmcp sees it: `start_kill` (used by rmcp's drop and final
/// kill) and `signal` (its SIGTERM on close) go to the whole group. Waiting
/// stays the leader's: the grandchildren are not our children to reap.
#[derive(Debug)]
struct OwnGroupChild {
    inner: Box<dyn ChildWrapper>,
    pgid: Pid,
}

impl ChildWrapper for OwnGroupChild {
    fn inner(&self) -> &dyn ChildWrapper {
        self.inner.as_ref()
    }

    fn inner_mut(&mut self) -> &mut dyn ChildWrapper {
        self.inner.as_mut()
    }

    fn into_inner(self: Box<Self>) -> Box<dyn ChildWrapper> {
        self.inner
    }

    fn start_kill(&mut self) -> io::Result<()> {
        // Never an error for a group already gone: rmcp's `kill()` would
        // otherwise skip the wait and leave the leader's zombie unreaped.
        kill_group(self.pgid, Signal::SIGKILL);
        Ok(())
    }

    fn signal(&self, signal: i32) -> io::Result<()> {
        let signal = Signal::try_from(signal)?;
        match killpg(self.pgid, signal) {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

/// Makes the kernel SIGKILL the child when the thread that spawned it dies
/// (`PR_SET_PDEATHSIG`), so even `kill -9` of the supervisor leaves no child
/// behind. Note the *thread*: children must be spawned from threads that live
/// as long as the runtime (tokio workers, actix arbiters), never from a
/// short-lived blocking-pool thread.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[allow(unsafe_code)]
fn die_with_parent(command: &mut Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: `pre_exec` closures run in the forked child before `exec`, where
    // only async-signal-safe code may run (another thread may have held the
    // allocator lock at fork time). This one only makes the `prctl` and
    // `getppid` system calls through nix's thin wrappers and builds an
    // `io::Error` from a raw errno; none of it allocates, locks or touches
    // state shared with other threads.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // If we died between fork and prctl, the signal was never armed
            // and the child was already reparented: give up instead of
            // running as an orphan.
            if nix::unistd::getppid() != parent {
                return Err(Errno::ESRCH.into());
            }
            Ok(())
        });
    }
}

/// No parent-death signal outside Linux; group kills on close and drop remain.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn die_with_parent(_command: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_after_the_last_parenthesis() {
        assert_eq!(
            parse_stat("42 (sleep) S 1 42 42 0 -1 4194304"),
            Some(('S', 42))
        );
        assert_eq!(
            parse_stat("7 (a) b) (c) Z 1 5 5 0"),
            Some(('Z', 5)),
            "a command name may hold spaces and parentheses"
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) R 0"), None);
    }

    #[test]
    fn a_group_that_never_existed_is_not_alive_and_killing_it_is_harmless() {
        // pid_max is at most 2^22 on Linux, so this group cannot exist.
        let group = ChildGroup::new(i32::MAX as u32).unwrap();
        assert!(!group.is_alive());
        group.kill_group();
    }
}
