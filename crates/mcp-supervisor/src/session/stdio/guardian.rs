//! A watchman process that kills our stdio children's process groups if this
//! process dies without cleaning up (`kill -9`, the OOM killer).
//!
//! `PR_SET_PDEATHSIG` reaches only the direct child (the kernel clears it
//! across fork), so a grandchild that ignores stdin EOF would outlive a
//! supervisor killed with SIGKILL. The guardian is a small `/bin/sh` loop that
//! reads `+PGID` and `-PGID` lines from a pipe whose only writer is this
//! process. When the pipe reaches EOF — this process exited, however it died —
//! it SIGKILLs every group still registered and exits.
//!
//! It runs only while stdio groups exist: started with the first, told to
//! exit (EOF with nothing registered) after the last is gone, so a supervisor
//! without stdio children has no extra process. Its own process group keeps a
//! terminal's Ctrl-C from taking it down before it has done its job.

use std::{
    collections::BTreeSet,
    io::{self, Write},
    os::unix::process::CommandExt,
    process::{Child, ChildStdin, Command, Stdio},
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

/// Ignores the signals a terminal or a service manager sends to stop *us*;
/// kills what is registered at EOF. Group ids are plain integers we wrote.
const SCRIPT: &str = r#"trap '' INT TERM HUP QUIT
groups=''
while IFS= read -r line; do
  case $line in
    +*) groups="$groups ${line#+}" ;;
    -*) kept=''
        for g in $groups; do [ "$g" = "${line#-}" ] || kept="$kept $g"; done
        groups=$kept ;;
  esac
done
for g in $groups; do kill -9 "-$g" 2>/dev/null; done
"#;

/// The running guardian and the groups it was told about.
struct Guardian {
    child: Child,
    pipe: ChildStdin,
    groups: BTreeSet<i32>,
}

static GUARDIAN: Mutex<Option<Guardian>> = Mutex::new(None);
/// Whether "cannot start the guardian" was logged already.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Registers a new child's process group, starting the guardian if needed.
pub(super) fn watch(pgid: i32) {
    let mut slot = lock();
    if slot.is_none() {
        match start() {
            Ok(guardian) => *slot = Some(guardian),
            Err(error) => {
                if !WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        %error,
                        "cannot start the stdio guardian; a grandchild that ignores stdin EOF \
                         may outlive this process if it is killed"
                    );
                }
                return;
            }
        }
    }
    let Some(guardian) = slot.as_mut() else {
        return;
    };
    if writeln!(guardian.pipe, "+{pgid}").is_ok() {
        guardian.groups.insert(pgid);
    } else if let Some(gone) = slot.take() {
        // The guardian died; the next child starts a new one.
        gone.retire();
    }
}

/// Unregisters a group that was killed; the last one lets the guardian exit.
pub(super) fn forget(pgid: i32) {
    let mut slot = lock();
    let Some(guardian) = slot.as_mut() else {
        return;
    };
    if !guardian.groups.remove(&pgid) {
        return;
    }
    let written = writeln!(guardian.pipe, "-{pgid}").is_ok();
    if (!written || guardian.groups.is_empty())
        && let Some(done) = slot.take()
    {
        done.retire();
    }
}

fn start() -> io::Result<Guardian> {
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("mcp-supervisor-guardian")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_clear()
        .process_group(0)
        .spawn()?;
    let pipe = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("no pipe to the guardian"))?;
    Ok(Guardian {
        child,
        pipe,
        groups: BTreeSet::new(),
    })
}

impl Guardian {
    /// Closes the pipe (the guardian kills what is still registered, nothing
    /// after a clean shutdown, and exits) and reaps it off this thread.
    fn retire(self) {
        let Guardian {
            mut child, pipe, ..
        } = self;
        drop(pipe);
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<Guardian>> {
    // Every update is a single insert/remove/replace: a panic elsewhere while
    // holding the lock cannot leave it inconsistent.
    GUARDIAN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
