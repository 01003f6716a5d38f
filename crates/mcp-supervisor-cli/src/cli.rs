//! The command line, as clap types.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Supervised client connections to many MCP servers.
#[derive(Debug, Parser)]
#[command(name = "mcp-supervisor", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// Log line format (logs always go to stderr; filter with RUST_LOG).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Pretty)]
    pub(crate) log_format: LogFormat,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Validate a config file and print a summary (never a secret).
    Check {
        /// The TOML config file.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Convert an `mcpServers` JSON file (desktop MCP clients' format) to TOML on stdout.
    Import {
        /// The JSON file to convert (`-` for stdin).
        file: PathBuf,
    },
}
