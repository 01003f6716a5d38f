//! Supervised client connections to many MCP (Model Context Protocol) servers.
//!
//! Each connection is an actix actor that owns its live rmcp session; a registry
//! actor supervises them; a quarantine policy actor decides, from classified
//! failures, when to retry, park for a cooldown, or retire a connection. Every
//! call comes back as a value.
//!
//! # Layout
//! - [`config`]: the TOML file, parsed (`raw`) then validated into typed settings;
//!   secrets become `SecretString` the moment they are read.
//! - [`failure`]: [`Failure`] and the one [`classify`] for every error source.
//! - [`http`]: the connection's own rmcp HTTP client, recording every status.
//! - [`outcome`]: [`CallOutcome`], what every call comes back as, and the §8 texts.
//! - [`policy`]: the pure retry/park/retire decision and the `QuarantinePolicy` actor.
//! - [`session`]: one live rmcp client session and its deadline-bounded operations.

pub mod config;
pub mod failure;
pub mod http;
pub mod outcome;
pub mod policy;
pub mod session;

pub use failure::{Failure, FailureKind, classify};
pub use outcome::CallOutcome;
