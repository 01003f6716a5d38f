//! `mcp-supervisor`: the command line and the long-lived process.
//!
//! Exit codes (README.md, "Command line"): 0 ok, 1 the operation failed, 2 usage or config error.

mod cli;
mod commands;
mod exit;
mod logging;

use clap::Parser;

use crate::cli::Cli;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format, cli.command.is_long_lived());
    match commands::run(cli.command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(exit) => exit.report(),
    }
}
