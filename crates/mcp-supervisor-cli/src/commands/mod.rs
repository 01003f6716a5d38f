//! One module per subcommand.

mod check;
mod import;

use crate::{cli::Command, exit::Exit};

/// Runs one subcommand to completion.
pub(crate) fn run(command: Command) -> Result<(), Exit> {
    match command {
        Command::Check { config } => check::run(&config),
        Command::Import { file } => import::run(&file),
    }
}
