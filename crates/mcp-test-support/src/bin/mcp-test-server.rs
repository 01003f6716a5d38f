//! `mcp-test-server`: see `mcp_test_support::cli` (or `--help`).

fn main() {
    mcp_test_support::cli::run()
}
