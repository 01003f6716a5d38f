//! When to retry, park, or retire (docs/SUPERVISION.md, "Retries" and "Park,
//! retire, revive").
//!
//! Layout:
//! - [`schedule`]: validated timing values, the retry backoff and the park cooldowns;
//! - [`decide`](mod@decide): the pure decision function, table-tested;
//! - [`actor`]: the `QuarantinePolicy` actor that answers failure reports with
//!   decisions, and knows which connections are parked now (the
//!   mass-retirement guard).

pub mod actor;
pub mod decide;
pub mod schedule;

pub use crate::failure::Phase;
pub use actor::{
    ConnectionPolicyState, Forget, QuarantinePolicy, RegisterConnections, ReportFailure,
    ReportIdleDeath, ResetConnection, UpdateSettings,
};
pub use decide::{Decision, Situation, decide, decide_idle_death};
pub use schedule::{Cooldowns, PolicySettings, RetryBackoff, ScheduleError};
