//! What operation futures tell their connection actor (`operation.rs`
//! sends them, `messages.rs` handles them): below both, so neither imports
//! the other.

use std::time::Duration;

use actix::Message;

use super::lifecycle::{Lease, LeaseError};
use crate::{failure::Failure, failure::Phase, policy::Decision};

/// Give me a session: the current one, the build in progress, or a new build.
#[derive(Message, Debug)]
#[rtype(result = "Result<Lease, LeaseError>")]
pub(crate) struct Acquire;

/// One attempt failed: dispose if session-level, ask the policy, apply.
#[derive(Message, Debug)]
#[rtype(result = "Decision")]
pub(crate) struct AttemptFailed {
    pub(crate) failure: Failure,
    pub(crate) phase: Phase,
    pub(crate) attempt: u32,
    /// The session generation the attempt used (`None`: building it failed).
    pub(crate) generation: Option<u64>,
    pub(crate) remaining: Duration,
    pub(crate) call_retry_allowed: bool,
}

/// An attempt succeeded: strikes reset.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct AttemptSucceeded;
