//! Log output: always stderr (stdout belongs to command output, and to the MCP
//! channel under `serve --stdio`), filtered by `RUST_LOG`.

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber. When `RUST_LOG` is unset: `info` for our
/// crates in the long-lived process (`verbose`), `warn` for one-shot commands,
/// whose output is the answer, not the log.
pub(crate) fn init(format: LogFormat, verbose: bool) {
    let default = if verbose {
        "warn,mcp_supervisor=info,mcp_supervisor_cli=info"
    } else {
        "warn"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests) is harmless; ignore it.
    let _ = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
