//! `mcp-supervisor check --config FILE [--connect]`: validate and summarize;
//! with `--connect`, also connect to every upstream and list its tools.

use std::path::Path;

use mcp_supervisor::config::summary;

use super::oneshot::{connect_all, load, with_registry};
use crate::exit::Exit;

pub(crate) fn run(path: &Path, connect: bool) -> Result<(), Exit> {
    let config = load(path)?;
    println!("{}: ok", path.display());
    print!("{}", summary(&config));
    if !connect {
        return Ok(());
    }
    println!("connecting:");
    with_registry(
        config,
        |registry| async move { connect_all(&registry).await },
    )
}
