//! The connection's lifecycle: one enum, every transition through
//! [`ConnectionActor::transition`](super::ConnectionActor), a comment per arm.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use tokio::sync::oneshot;

use crate::{ConnectionState, Deadline, RetireReason, failure::Failure, session::Session};

/// A session handed to an operation, tagged with its generation so a failure
/// report can tell whether the session it used is still the current one.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub(crate) session: Arc<Session>,
    pub(crate) generation: u64,
}

/// Why no session could be handed out.
#[derive(Debug, Clone)]
pub(crate) enum LeaseError {
    /// Building the session failed: a connect-phase failure of the caller's attempt.
    ConnectFailed(Failure),
    /// The connection refuses work (parked, retired, stopped): answer at once.
    Refused(crate::Unavailable),
    /// The upstream asked to be left alone until `until`: wait that long if
    /// the caller's budget allows, else answer `refusal`.
    Held {
        until: Deadline,
        refusal: crate::Unavailable,
    },
}

pub(crate) type Waiter = oneshot::Sender<Result<Lease, LeaseError>>;

/// Outcome of asking for a session.
pub(crate) enum LeaseAttempt {
    Ready(Lease),
    Wait(tokio::sync::oneshot::Receiver<Result<Lease, LeaseError>>),
    Refused(crate::Unavailable),
    Held {
        until: Deadline,
        refusal: crate::Unavailable,
    },
}

impl LeaseAttempt {
    /// Waits for the lease (if a build is in flight); `if_dropped` says why
    /// not if the build is dropped unanswered (made only then).
    pub(crate) async fn resolve(
        self,
        if_dropped: impl FnOnce() -> crate::Unavailable,
    ) -> Result<Lease, LeaseError> {
        match self {
            LeaseAttempt::Ready(lease) => Ok(lease),
            LeaseAttempt::Refused(unavailable) => Err(LeaseError::Refused(unavailable)),
            LeaseAttempt::Held { until, refusal } => Err(LeaseError::Held { until, refusal }),
            LeaseAttempt::Wait(rx) => rx
                .await
                .unwrap_or_else(|_| Err(LeaseError::Refused(if_dropped()))),
        }
    }
}

/// Where a connection is in its life.
#[derive(Debug)]
pub(crate) enum Lifecycle {
    /// No live session: never used yet, or the last one was disposed after a
    /// failure. The next use builds one.
    Idle,
    /// One session build is in flight; every caller that needs a session meanwhile
    /// waits here, so concurrent callers share one rebuild.
    Connecting { waiters: Vec<Waiter>, revived: bool },
    /// A healthy session. Only ever used while in this state.
    Ready(Lease),
    /// Refuses all work until `until` (no I/O, no strike); the first use after
    /// it revives the connection.
    Parked { until: Deadline, failure: Failure },
    /// Permanently unavailable until a reset or a reload that changes it.
    Retired {
        failure: Option<Failure>,
        reason: RetireReason,
    },
    /// Shut down (supervisor shutdown, or removed by a reload). Terminal.
    Stopped,
}

/// What a crashed actor hands to the next one: a park or a retirement
/// outlives the actor, so a restart never talks to an upstream mid-cooldown
/// or after it was retired.
#[derive(Debug, Clone)]
pub enum Standing {
    Parked {
        until: Deadline,
        failure: Failure,
    },
    Retired {
        failure: Option<Failure>,
        reason: RetireReason,
    },
}

/// What an actor that ended on its own hands to the one that replaces it:
/// its park or retirement, and its strikes (counting parks since its last
/// success), so a crash neither ends a park nor forgives a strike.
#[derive(Debug, Clone, Default)]
pub struct Handover {
    pub standing: Option<Standing>,
    pub strikes: u32,
}

impl From<Standing> for Lifecycle {
    fn from(standing: Standing) -> Self {
        match standing {
            Standing::Parked { until, failure } => Lifecycle::Parked { until, failure },
            Standing::Retired { failure, reason } => Lifecycle::Retired { failure, reason },
        }
    }
}

impl Lifecycle {
    /// The park or retirement to hand over, if any.
    pub(crate) fn standing(&self) -> Option<Standing> {
        match self {
            Lifecycle::Parked { until, failure } => Some(Standing::Parked {
                until: *until,
                failure: failure.clone(),
            }),
            Lifecycle::Retired { failure, reason } => Some(Standing::Retired {
                failure: failure.clone(),
                reason: *reason,
            }),
            _ => None,
        }
    }

    /// The state this is, as `/status` tells it.
    pub(crate) fn state(&self) -> ConnectionState {
        match self {
            Lifecycle::Idle => ConnectionState::Idle,
            Lifecycle::Connecting { .. } => ConnectionState::Connecting,
            Lifecycle::Ready(_) => ConnectionState::Ready,
            Lifecycle::Parked { .. } => ConnectionState::Parked,
            Lifecycle::Retired { .. } => ConnectionState::Retired,
            Lifecycle::Stopped => ConnectionState::Stopped,
        }
    }
}

/// Parks since the connection's last success: the `retire_after`-th
/// retires. Kept by its actor, told to the policy with each failure and
/// handed over on a crash. Whether there are any is shown to the
/// connection's requests, so that a success tells the actor only when it
/// has strikes to forget (docs/DECISIONS.md #187).
#[derive(Debug)]
pub(crate) struct Strikes {
    count: u32,
    any: Arc<AtomicBool>,
}

impl Strikes {
    pub(crate) fn new(count: u32) -> Self {
        Strikes {
            count,
            any: Arc::new(AtomicBool::new(count > 0)),
        }
    }

    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// Whether there are any, as the requests see it.
    pub(crate) fn shown(&self) -> Arc<AtomicBool> {
        self.any.clone()
    }

    /// One more park.
    pub(crate) fn add(&mut self) {
        self.set(self.count.saturating_add(1));
    }

    /// At least `count` (what another node of the fleet counted).
    pub(crate) fn at_least(&mut self, count: u32) {
        self.set(self.count.max(count));
    }

    /// A success: separate bursts never add up.
    pub(crate) fn forgive(&mut self) {
        self.set(0);
    }

    fn set(&mut self, count: u32) {
        self.count = count;
        self.any.store(count > 0, Ordering::Relaxed);
    }
}
