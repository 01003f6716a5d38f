//! Tool contracts under supervision (docs/CONTRACTS.md): each listed tool,
//! prompt and resource template has a contract (a hash over the fields an
//! agent trusts it by); the [`ContractBook`] judges every listing against
//! the approved contracts and says what is held.
//!
//! - `contract`: [`Contract`], its canonical form and hash.
//! - `risk`: [`Change`], how a contract differs, what passes, what is dangerous.
//! - `lock`: [`Lock`], the lock file.
//! - `book`: [`ContractBook`], approvals and judgements.

mod book;
mod contract;
mod lock;
mod risk;

pub use book::{ApproveError, ContractBook, Judged, Seen, Verdict};
pub use contract::{Contract, Field, ItemKind, approve_target};
pub use lock::{Approved, Lock, LockError};
pub use risk::{Change, Danger, Hint};
