//! Helpers for the end-to-end suite: locating the built binaries and running them.
//!
//! The suite runs the real `mcp-supervisor` binary (never its library) the way a
//! user would, against real servers on loopback and real child processes.

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
