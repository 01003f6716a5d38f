//! How a command ends when it does not succeed: a message and an exit code.

use std::process::ExitCode;

/// A failed command: what to tell the user, and which exit code.
#[derive(Debug)]
pub(crate) enum Exit {
    /// The operation itself failed (exit 1).
    Failed(String),
    /// Bad usage or bad config (exit 2).
    Usage(String),
}

impl Exit {
    /// Prints the message to stderr and returns the exit code.
    pub(crate) fn report(self) -> ExitCode {
        match self {
            Exit::Failed(message) => {
                eprintln!("error: {message}");
                ExitCode::from(1)
            }
            Exit::Usage(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
        }
    }
}
