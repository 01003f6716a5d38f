//! One module per subcommand.

mod admin_client;
mod browser;
mod check;
mod contracts;
mod dashboard;
mod import;
mod login;
mod oneshot;
mod reset;
mod serve;
mod status;

use mcp_supervisor::contracts::ItemKind;

use crate::{
    cli::{Command, Contracts},
    exit::Exit,
};

/// Runs one subcommand to completion.
pub(crate) fn run(command: Command) -> Result<(), Exit> {
    match command {
        Command::Check { config, connect } => check::run(&config, connect),
        Command::Import { file } => import::run(&file),
        Command::Serve { config, stdio } => serve::run(config, stdio),
        Command::Tools { config, connection } => oneshot::tools(&config, connection),
        Command::Call {
            config,
            connection,
            tool,
            arguments,
        } => oneshot::call(&config, connection, tool, arguments),
        Command::Status { admin } => status::run(admin),
        Command::Reset { connection, admin } => reset::run(&connection, admin),
        Command::Dashboard { admin, open } => dashboard::run(admin, open),
        Command::Login {
            config,
            connection,
            timeout,
        } => login::login(&config, &connection, timeout),
        Command::Logout { config, connection } => login::logout(&config, &connection),
        Command::Contracts { action } => match action {
            Contracts::Lock { config } => contracts::lock(&config),
            Contracts::Diff { connection, admin } => contracts::diff(connection.as_deref(), admin),
            Contracts::Approve {
                what,
                prompt,
                template,
                sha256,
                admin,
            } => {
                let item = match (prompt, template) {
                    (Some(prompt), _) => Some((ItemKind::Prompt, prompt)),
                    (None, Some(template)) => Some((ItemKind::ResourceTemplate, template)),
                    (None, None) => None,
                };
                contracts::approve(&what, item, sha256.as_deref(), admin)
            }
        },
    }
}
