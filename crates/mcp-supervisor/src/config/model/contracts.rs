//! `[contracts]`: tool contracts enforced against a lock file
//! (docs/CONTRACTS.md).

use std::path::PathBuf;

use super::Choice;

/// The lock file's default name, beside the config file.
pub const DEFAULT_LOCK_FILE: &str = "mcp-supervisor.lock";

/// `[contracts]`: approved contracts are read from (and written to) `lock`;
/// an item whose contract differs is held or only warned about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractSettings {
    /// The lock file (relative paths are relative to the config file).
    pub lock: PathBuf,
    /// What a changed contract does.
    pub on_change: OnChange,
    /// What an item the lock does not know does.
    pub on_new: OnNew,
    /// Changes that pass without approval.
    pub allow: Vec<Allowance>,
    /// How many changes within how long park the connection.
    pub park_after: ChurnLimit,
}

/// `contracts.park_after = { changes, within }`: a connection whose
/// contracts change this many times within this long is parked (failure
/// kind `contract_churn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChurnLimit {
    pub changes: u32,
    pub within: std::time::Duration,
}

impl Default for ChurnLimit {
    fn default() -> Self {
        ChurnLimit {
            changes: 3,
            within: std::time::Duration::from_secs(600),
        }
    }
}

/// `contracts.on_change`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnChange {
    /// The item is withdrawn until approved or reverted.
    #[default]
    Hold,
    /// The item is served as it now is; the change is logged and shown.
    Warn,
}

impl Choice for OnChange {
    const ALL: &'static [Self] = &[Self::Hold, Self::Warn];

    fn as_str(self) -> &'static str {
        match self {
            Self::Hold => "hold",
            Self::Warn => "warn",
        }
    }
}

/// `contracts.on_new`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnNew {
    /// A new item is served and its first contract approved (trust on
    /// first use), written to the lock.
    #[default]
    Allow,
    /// A new item is held until approved.
    Hold,
}

impl Choice for OnNew {
    const ALL: &'static [Self] = &[Self::Allow, Self::Hold];

    fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Hold => "hold",
        }
    }
}

/// A kind of change `contracts.allow` lets pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Allowance {
    /// Title or description differ only in whitespace.
    Whitespace,
    /// The input schema only gains properties it does not require.
    OptionalInput,
}

impl Choice for Allowance {
    const ALL: &'static [Self] = &[Self::Whitespace, Self::OptionalInput];

    fn as_str(self) -> &'static str {
        match self {
            Self::Whitespace => "whitespace",
            Self::OptionalInput => "optional_input",
        }
    }
}
