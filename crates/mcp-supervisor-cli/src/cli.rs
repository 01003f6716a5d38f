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
    /// Run the long-lived process: the MCP gateway and the admin API.
    Serve {
        /// The TOML config file (default: the embedded config/default.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Serve the gateway over stdin/stdout instead of HTTP (logs go to stderr).
        #[arg(long)]
        stdio: bool,
    },
    /// Validate a config file and print a summary (never a secret).
    Check {
        /// The TOML config file.
        #[arg(long, short)]
        config: PathBuf,
        /// Also connect to every upstream and list its tools (a line per connection).
        #[arg(long)]
        connect: bool,
    },
    /// List tools: every connection's count, or one connection's tools.
    Tools {
        #[arg(long, short)]
        config: PathBuf,
        /// The connection whose tools to list.
        connection: Option<String>,
    },
    /// Call one tool and print its result (exit 1 with the supervisor's message on failure).
    Call {
        #[arg(long, short)]
        config: PathBuf,
        /// The connection.
        connection: String,
        /// The tool.
        tool: String,
        /// The arguments, as a JSON object.
        arguments: Option<String>,
    },
    /// Show every connection's state, from a running process's admin API.
    Status {
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Clear a connection's park or retirement in a running process (it reconnects on next use).
    Reset {
        /// The connection to reset.
        connection: String,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Print a link that opens a running process's dashboard (with `[admin] auth`: a one-time
    /// login link, good for 5 minutes).
    Dashboard {
        #[command(flatten)]
        admin: AdminTarget,
        /// Also open it with `$BROWSER`.
        #[arg(long)]
        open: bool,
    },
    /// Log in to an OAuth connection: prints a URL to open (and runs `$BROWSER` with it), waits
    /// for the authorization, stores the tokens, and has a supervisor running on the config use
    /// them.
    Login {
        #[arg(long, short)]
        config: PathBuf,
        /// The connection (its `auth.kind` must be "oauth").
        connection: String,
        /// How long to wait for the authorization.
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Remove an OAuth connection's stored tokens.
    Logout {
        #[arg(long, short)]
        config: PathBuf,
        /// The connection.
        connection: String,
    },
    /// Tool contracts: write the lock file, show what changed, approve a change.
    Contracts {
        #[command(subcommand)]
        action: Contracts,
    },
    /// Convert an `mcpServers` JSON file (desktop MCP clients' format) to TOML on stdout.
    Import {
        /// The JSON file to convert (`-` for stdin).
        file: PathBuf,
    },
}

/// `mcp-supervisor contracts …` (docs/CONTRACTS.md).
#[derive(Debug, Subcommand)]
pub(crate) enum Contracts {
    /// Connect to every upstream and write the lock file (`[contracts] lock`, else
    /// mcp-supervisor.lock beside the config) from what each lists now.
    Lock {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Show, field by field, what a running process lists that differs from the approved
    /// contracts.
    Diff {
        /// Only this connection.
        connection: Option<String>,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Approve a running process's current definitions of a connection (NAME), one tool
    /// (NAME__TOOL), or one prompt or resource template (NAME --prompt P, NAME --template T);
    /// the process updates the lock file and serves them again.
    Approve {
        /// NAME or NAME__TOOL.
        what: String,
        /// One prompt of connection NAME.
        #[arg(long, value_name = "PROMPT", conflicts_with = "template")]
        prompt: Option<String>,
        /// One resource template of connection NAME.
        #[arg(long, value_name = "TEMPLATE")]
        template: Option<String>,
        /// With one item: approve only if it is still listed with this hash (the one
        /// `contracts diff` showed), so a change made since is not approved unseen.
        #[arg(long, value_name = "HASH")]
        sha256: Option<String>,
        #[command(flatten)]
        admin: AdminTarget,
    },
}

impl Command {
    /// The long-lived process logs its lifecycle at info; one-shots stay quiet.
    pub(crate) fn is_long_lived(&self) -> bool {
        matches!(self, Command::Serve { .. })
    }
}

/// Where a running `mcp-supervisor serve` has its admin API.
#[derive(Debug, clap::Args)]
pub(crate) struct AdminTarget {
    /// The admin API's address (default: the embedded default config's, 127.0.0.1:7301).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "config")]
    pub(crate) admin: Option<String>,
    /// Take the admin address (`admin.listen`) from this config file.
    #[arg(long, short)]
    pub(crate) config: Option<PathBuf>,
}
