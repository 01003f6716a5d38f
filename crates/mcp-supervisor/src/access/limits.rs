//! Per-caller limits (`[[limits]]`): how many calls a minute, and how many
//! at once, a caller may make. Ordered like the access rules: the first
//! limit that is for the caller is its limit; a caller no limit is for has
//! none.

use super::{caller::Caller, rules::Who};

/// One `[[limits]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub who: Vec<Who>,
    /// Calls a minute, at most (a bucket that refills evenly).
    pub per_minute: Option<u32>,
    /// Calls in progress at once, at most.
    pub at_once: Option<u32>,
}

/// The ordered limits. None: no caller is limited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    limits: Vec<Limit>,
}

impl Limits {
    pub fn new(limits: Vec<Limit>) -> Self {
        Limits { limits }
    }

    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// The limit at `index` (as [`Limits::of`] numbers them).
    pub fn get(&self, index: usize) -> Option<&Limit> {
        self.limits.get(index)
    }

    /// The first limit for `caller`, with its index.
    pub fn of(&self, caller: &Caller) -> Option<(usize, &Limit)> {
        self.limits
            .iter()
            .enumerate()
            .find(|(_, limit)| limit.who.iter().any(|who| who.matches(caller)))
    }
}
