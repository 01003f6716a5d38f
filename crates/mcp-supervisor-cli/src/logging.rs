//! Log output: always stderr (stdout belongs to command output, and to the MCP
//! channel under `serve --stdio`), filtered by `RUST_LOG`.

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Without `RUST_LOG`: our crates at `info` in the long-lived process
/// (`verbose`); only errors for one-shot commands, which print their own
/// outcome (a failed call's classified message) and are not a log. Either way the libraries we drive (rmcp, hyper,
/// reqwest, actix) are silent: each failure they see reaches the user once,
/// as our classified line, never as their raw error dump. `RUST_LOG=rmcp=debug`
/// brings them back for debugging.
const QUIET_LIBRARIES: &str =
    "rmcp=off,hyper=off,hyper_util=off,reqwest=off,h2=off,actix_server=off,actix_http=off";

/// Installs the global subscriber. An empty `RUST_LOG` counts as unset; an
/// unparsable one is reported and replaced by the default.
pub(crate) fn init(format: LogFormat, verbose: bool) {
    let ours = if verbose {
        "warn,mcp_supervisor=info,mcp_supervisor_cli=info"
    } else {
        "error"
    };
    let default = || EnvFilter::new(format!("{ours},{QUIET_LIBRARIES}"));
    let filter = match std::env::var("RUST_LOG") {
        Ok(value) if !value.trim().is_empty() => {
            EnvFilter::try_new(&value).unwrap_or_else(|error| {
                eprintln!("warning: ignoring RUST_LOG ({error}); using the default filter");
                default()
            })
        }
        _ => default(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests) is harmless; ignore it.
    let _ = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
