//! Finding the built `mcp-test-server` binary from another crate's tests.

use std::path::PathBuf;

/// Environment variable that overrides where [`test_server_binary`] looks.
pub const BINARY_ENV: &str = "MCP_TEST_SERVER_BIN";

/// Path of the `mcp-test-server` binary, for tests outside this package
/// (inside it, use `env!("CARGO_BIN_EXE_mcp-test-server")`).
///
/// Order: `$MCP_TEST_SERVER_BIN`, then the profile directory of the running
/// test executable (`target/debug/deps/t-…` → `target/debug/mcp-test-server`).
/// Cargo puts it there whenever this package's targets are built, e.g. by
/// `cargo test --workspace` or `cargo build -p mcp-test-support`. A crate
/// that must not depend on that can ship its own one-line bin calling
/// [`crate::cli::run`].
///
/// # Panics
///
/// When the binary is not found, with a message saying how to build it.
pub fn test_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the current test executable has a path");
    let name = format!("mcp-test-server{}", std::env::consts::EXE_SUFFIX);
    let candidates = exe
        .ancestors()
        .skip(1)
        .take(3)
        .map(|dir| dir.join(&name))
        .collect::<Vec<_>>();
    candidates
        .iter()
        .find(|path| path.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "mcp-test-server not found (looked at {candidates:?}); \
                 run `cargo build -p mcp-test-support --bins` or set {BINARY_ENV}"
            )
        })
}
