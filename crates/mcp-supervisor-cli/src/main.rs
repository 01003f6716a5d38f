//! `mcp-supervisor`: the command line and the long-lived process.
//!
//! Exit codes (README.md, "Command line"): 0 ok, 1 the operation failed, 2 usage or config error.

mod cli;
mod commands;
mod exit;
mod logging;

use clap::Parser;

use crate::cli::Cli;

/// jemalloc, with its background thread purging freed memory: a burst of
/// large payloads leaves memory to the OS within seconds, where glibc's
/// allocator kept it (measured in docs/BENCHMARKS.md, "Large payloads").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    // Without it, freed pages go back only when the process allocates again.
    // (Cannot fail on Linux; without it we would only keep more memory.)
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    let cli = Cli::parse();
    logging::init(cli.log_format, cli.command.is_long_lived());
    match commands::run(cli.command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(exit) => exit.report(),
    }
}
