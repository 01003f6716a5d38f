//! `mcp-supervisor import FILE`: `mcpServers` JSON to our TOML, on stdout.

use std::{io::Read, path::Path};

use mcp_supervisor::config::import_mcp_servers;

use crate::exit::Exit;

pub(crate) fn run(path: &Path) -> Result<(), Exit> {
    let json = read_input(path)
        .map_err(|error| Exit::Usage(format!("{}: cannot read: {error}", path.display())))?;
    let toml = import_mcp_servers(&json)
        .map_err(|error| Exit::Usage(format!("{}: {error}", path.display())))?;
    print!("{toml}");
    Ok(())
}

fn read_input(path: &Path) -> std::io::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        return Ok(text);
    }
    std::fs::read_to_string(path)
}
