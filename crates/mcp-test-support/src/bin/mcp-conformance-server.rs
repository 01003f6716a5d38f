//! `mcp-conformance-server`: see `mcp_test_support::conformance` (or `--help`).

fn main() {
    mcp_test_support::conformance::cli::run()
}
