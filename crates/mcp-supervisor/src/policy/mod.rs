//! When to retry, park, or retire (docs/SUPERVISION.md, "Retries" and "Park,
//! retire, revive").
//!
//! Layout:
//! - [`schedule`]: validated timing values, the retry backoff and the park cooldowns;
//! - [`decide`](mod@decide): the pure decision function, table-tested;
//! - [`actor`]: the `QuarantinePolicy` actor that holds every connection's strikes
//!   and cooldowns, applies the mass-retirement guard, and answers with decisions.

pub mod actor;
pub mod decide;
pub mod schedule;

pub use actor::{
    ConnectionPolicyState, Forget, QuarantinePolicy, RegisterConnections, ReportFailure,
    ReportIdleDeath, ReportSuccess, ResetConnection, UpdateSettings,
};
pub use decide::{Decision, Phase, Situation, decide, decide_idle_death};
pub use schedule::{Cooldowns, PolicySettings, RetryBackoff, ScheduleError};
