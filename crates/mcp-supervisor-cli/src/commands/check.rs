//! `mcp-supervisor check --config FILE [--connect]`: validate and summarize;
//! with `--connect`, also connect to every upstream, list what it offers, and
//! check that the names the gateway would expose do not clash.

use std::path::Path;

use mcp_supervisor::{
    config::summary,
    gateway::{directory::Directory, naming::Naming},
};

use super::oneshot::{connect_all, load, with_registry};
use crate::exit::Exit;

pub(crate) fn run(path: &Path, connect: bool) -> Result<(), Exit> {
    let config = load(path)?;
    println!("{}: ok", path.display());
    for warning in &config.warnings {
        println!("warning: {warning}");
    }
    print!("{}", summary(&config));
    if !connect {
        return Ok(());
    }
    println!("connecting:");
    let naming = Naming::new(config.gateway.prefix, config.connections.len());
    let file = path.display().to_string();
    with_registry(config, move |registry| async move {
        let catalogs = connect_all(&registry).await?;
        let clashes = Directory::build(naming, &catalogs).clashes;
        if clashes.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = clashes.iter().map(ToString::to_string).collect();
        Err(Exit::Usage(format!(
            "{file}: gateway.prefix: names must be unique without a prefix, but {}",
            listed.join("; ")
        )))
    })
}
