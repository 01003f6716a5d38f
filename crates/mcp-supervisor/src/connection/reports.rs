//! What operation futures tell their connection actor (`operation.rs`
//! sends them, `messages.rs` handles them): below both, so neither imports
//! the other.

use std::time::Duration;

use actix::Message;

use super::lifecycle::{Lease, LeaseError};
use crate::{failure::Failure, failure::Phase, outcome::OutcomeKind, policy::Decision};

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

/// A call ended: count its outcome and free its slot.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct Finished {
    /// A `tools/call` (other requests are not counted).
    pub(crate) call: Option<CallDone>,
    pub(crate) held_slot: bool,
}

/// How a `tools/call` ended, for the counters and the recent calls.
#[derive(Debug)]
pub(crate) struct CallDone {
    pub(crate) kind: OutcomeKind,
    /// From admission to answer.
    pub(crate) elapsed: Duration,
    /// The upstream's name for the tool.
    pub(crate) tool: String,
    /// Attempts sent (0: answered before any).
    pub(crate) attempts: u32,
    /// Waiting for a slot.
    pub(crate) queued: Duration,
    /// Who called ([`crate::connection::stats::CallRecord::caller`]).
    pub(crate) caller: Option<std::sync::Arc<str>>,
}
