//! `mcp-supervisor reset NAME [--admin HOST:PORT | --config FILE]`: clear a
//! connection's park or retirement in a running process.

use reqwest::Method;

use super::admin_client::{AdminClient, block_on};
use crate::{cli::AdminTarget, exit::Exit};

pub(crate) fn run(connection: &str, target: AdminTarget) -> Result<(), Exit> {
    let client = AdminClient::new(target)?;
    let answer = block_on(client.request(Method::POST, &["connections", connection, "reset"]))??;
    if !answer.status.is_success() {
        // 404: `unknown MCP connection 'NAME'`.
        return Err(Exit::Failed(answer.error_message()));
    }
    println!("MCP connection '{connection}' reset; it reconnects on next use.");
    Ok(())
}
