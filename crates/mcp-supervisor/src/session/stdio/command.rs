//! From a configured stdio command to a program path and an environment.
//!
//! Resolution is ours rather than `execvp`'s so that the rules are the same
//! everywhere and the child is always started from an absolute (or
//! cwd-anchored) path:
//!
//! - a command containing `/` is a path; a relative one is taken relative to
//!   the configured `cwd` (like `cd cwd && ./server` in a shell), or to our
//!   own working directory when there is none;
//! - any other command is looked up on the child's `PATH` (the configured
//!   `PATH` if the connection sets one, else ours), then in the directory of
//!   the running executable, so servers shipped beside `mcp-supervisor`
//!   (such as `mcp-demo-server`) work without being on `PATH`. Empty and
//!   relative `PATH` entries are skipped: they would depend on the child's
//!   working directory, and an empty entry would run whatever sits there.

use std::{
    ffi::{OsStr, OsString},
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
};

use secrecy::{ExposeSecret as _, SecretString};
use tokio::process::Command;

use crate::failure::Failure;

/// Variables passed through from our own environment (docs/CONFIG.md, `env`
/// of `[connections.NAME]`). Nothing else
/// is: the supervisor's own secrets (tokens for other connections) must
/// never reach an upstream.
pub(super) const INHERITED_ENV: [&str; 7] =
    ["PATH", "HOME", "USER", "LANG", "TERM", "SHELL", "LOGNAME"];

/// The program to run for `command`, following the rules in the module docs.
///
/// `child_path` is the `PATH` the child will see; `exe_dir` the directory of
/// the running executable. The failure names the command, never its args.
pub(super) fn resolve(
    command: &str,
    cwd: Option<&Path>,
    child_path: Option<&OsStr>,
    exe_dir: Option<&Path>,
) -> Result<PathBuf, Failure> {
    if command.contains('/') {
        let path = match cwd {
            Some(cwd) => cwd.join(command),
            None => PathBuf::from(command),
        };
        return if is_executable_file(&path) {
            Ok(path)
        } else if path.exists() {
            Err(not_run(format!(
                "command '{command}' is not an executable file"
            )))
        } else {
            Err(not_run(format!("command '{command}' not found")))
        };
    }
    let on_path = child_path
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| dir.is_absolute());
    on_path
        .chain(exe_dir.map(Path::to_path_buf))
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable_file(candidate))
        .ok_or_else(|| {
            not_run(format!(
                "command '{command}' not found on PATH or beside the supervisor executable"
            ))
        })
}

/// The `PATH` the child will see: the configured one if set, else ours.
pub(super) fn child_path(configured: &[(String, SecretString)]) -> Option<OsString> {
    match configured.iter().find(|(name, _)| name == "PATH") {
        Some((_, value)) => Some(OsString::from(value.expose_secret())),
        None => std::env::var_os("PATH"),
    }
}

/// Gives `command` exactly the minimal inherited environment plus the
/// configured variables (which win over inherited ones of the same name).
///
/// This is the only place configured values are exposed; `Command` keeps them
/// and its `Debug` shows them, so a `Command` must never be logged.
pub(super) fn apply_env(command: &mut Command, configured: &[(String, SecretString)]) {
    command.env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    for (name, value) in configured {
        command.env(name, value.expose_secret());
    }
}

/// A spawn or resolution failure: nothing ran, so any call is safe to retry.
pub(super) fn not_run(reason: String) -> Failure {
    Failure::transport(reason).with_not_run()
}

/// A regular file (after symlinks) with at least one execute bit.
fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use std::{fs, os::unix::fs::PermissionsExt as _};

    use super::*;
    use crate::failure::FailureKind;

    fn write_file(path: &Path, mode: u32) {
        fs::write(path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn paths(dirs: &[&Path]) -> OsString {
        std::env::join_paths(dirs).unwrap()
    }

    #[test]
    fn bare_names_are_found_on_path_before_the_exe_dir() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        let exe_dir = tempfile::tempdir().unwrap();
        write_file(&second.path().join("server"), 0o755);
        write_file(&exe_dir.path().join("server"), 0o755);
        let path = paths(&[first.path(), second.path()]);

        let found = resolve("server", None, Some(&path), Some(exe_dir.path())).unwrap();
        assert_eq!(found, second.path().join("server"));
    }

    #[test]
    fn bare_names_fall_back_to_the_exe_dir() {
        let on_path = tempfile::tempdir().unwrap();
        let exe_dir = tempfile::tempdir().unwrap();
        write_file(&exe_dir.path().join("bundled"), 0o755);
        let path = paths(&[on_path.path()]);

        let found = resolve("bundled", None, Some(&path), Some(exe_dir.path())).unwrap();
        assert_eq!(found, exe_dir.path().join("bundled"));
        // No PATH at all still finds it beside the executable.
        let found = resolve("bundled", None, None, Some(exe_dir.path())).unwrap();
        assert_eq!(found, exe_dir.path().join("bundled"));
    }

    #[test]
    fn non_executables_directories_and_relative_entries_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write_file(&dir.path().join("plain"), 0o644);
        fs::create_dir(dir.path().join("adir")).unwrap();
        let path = OsString::from(format!(":.:relative:{}", dir.path().display()));

        for name in ["plain", "adir", "missing"] {
            let failure = resolve(name, None, Some(&path), None).unwrap_err();
            assert_eq!(failure.kind, FailureKind::Transport);
            assert!(failure.not_run);
            assert!(failure.reason.contains(&format!("'{name}'")), "{failure}");
        }
    }

    #[test]
    fn paths_with_a_slash_are_used_as_is_or_under_cwd() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("bin")).unwrap();
        write_file(&dir.path().join("bin/server"), 0o755);
        let absolute = dir.path().join("bin/server");
        let absolute = absolute.to_str().unwrap();

        assert_eq!(
            resolve(absolute, None, None, None).unwrap(),
            Path::new(absolute)
        );
        // An absolute command ignores cwd (`join` keeps the absolute path).
        assert_eq!(
            resolve(absolute, Some(Path::new("/elsewhere")), None, None).unwrap(),
            Path::new(absolute)
        );
        assert_eq!(
            resolve("./bin/server", Some(dir.path()), None, None).unwrap(),
            dir.path().join("./bin/server")
        );
        // A slash means "a path": never looked up on PATH.
        let path = paths(&[dir.path()]);
        let failure = resolve("bin/server", None, Some(&path), None).unwrap_err();
        assert!(failure.not_run);
        assert!(
            failure.reason.contains("'bin/server' not found"),
            "{failure}"
        );
    }

    #[test]
    fn a_path_to_a_non_executable_says_so() {
        let dir = tempfile::tempdir().unwrap();
        write_file(&dir.path().join("data"), 0o600);
        let failure = resolve("./data", Some(dir.path()), None, None).unwrap_err();
        assert!(failure.reason.contains("not an executable"), "{failure}");
    }

    #[test]
    fn the_configured_path_wins_over_ours() {
        let configured = vec![("PATH".to_owned(), SecretString::from("/opt/x/bin"))];
        assert_eq!(child_path(&configured), Some(OsString::from("/opt/x/bin")));
        assert_eq!(child_path(&[]), std::env::var_os("PATH"));
    }
}
