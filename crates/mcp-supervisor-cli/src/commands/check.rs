//! `mcp-supervisor check --config FILE`: validate and summarize.

use std::path::Path;

use mcp_supervisor::config::{Config, summary};

use crate::exit::Exit;

pub(crate) fn run(path: &Path) -> Result<(), Exit> {
    let config = Config::from_file(path).map_err(|error| Exit::Usage(error.to_string()))?;
    println!("{}: ok", path.display());
    print!("{}", summary(&config));
    Ok(())
}
