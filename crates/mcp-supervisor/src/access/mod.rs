//! Who may use what (docs/SECURITY.md): the caller a request comes from
//! ([`Caller`]), and the one decision every way in asks before it reveals
//! or uses a tool, a prompt or a resource ([`Rules::decide`]).
//!
//! Who a caller is, is the gateway's to find out (the bearer, a key, an
//! access token: `gateway::callers`); what it may use is decided here,
//! from the ordered `[[access]]` rules of the configuration, and nowhere
//! else: `tools/list` and `tools/call`, prompts, resources, completion,
//! the meta-tools, both protocol generations, the direct path and rmcp's,
//! all ask [`Rules::decide`]. How many calls a caller may make is
//! [`Limits`]'s. This module knows no transport, no session
//! and no upstream: it is the ground floor the rest builds on.

mod caller;
mod limits;
mod rules;

pub use caller::{Caller, Subject, Via};
pub use limits::{Limit, Limits};
pub use rules::{Decision, Item, Kind, Pattern, Rule, Rules, Who};

#[cfg(test)]
mod tests;
