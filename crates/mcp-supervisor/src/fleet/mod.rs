//! The fleet: supervisors in several processes (gateway replicas, agent
//! workers that embed the library) that share what they learn about their
//! upstreams through a store, Redis (docs/FLEET.md).
//!
//! What is shared, per connection name: parks and their cause, `Retry-After`
//! windows, retirements and their reason, resets, that a node reloaded
//! its config, and OAuth tokens (sealed, renewed once for the fleet:
//! [`FleetTokens`]). Each connection actor
//! still owns its standing; the [`Fleet`] actor only tells the others what
//! this node learned and tells this node's registry what they learned. A
//! call never waits on the store, and a store that is away leaves every node
//! working alone until it returns.
//!
//! Layout:
//! - [`wire`]: the messages, their JSON form, and the checks a message from
//!   the store passes before anything acts on it; `freshness`, the checks
//!   that it is not an old one written again;
//! - [`store`]: the [`Store`] trait and the in-process [`LocalStore`];
//! - `redis`: the [`RedisStore`];
//! - `probes`: [`ProbeLeases`], one prober per parked connection;
//! - `tokens`: [`FleetTokens`], the OAuth tokens the fleet shares, sealed
//!   with the fleet key;
//! - `actor`: the [`Fleet`] actor and its view for `/status`.

mod actor;
mod freshness;
mod probes;
mod redis;
pub mod store;
mod tokens;
pub mod wire;

pub use actor::{
    ContractsEverywhere, Fleet, FleetStatus, FleetView, Learned, Member, News, NodeSeen,
    ReloadEverywhere, ReloadedElsewhere, ResetEverywhere, SharedNow, StoreHealth,
};
pub use probes::ProbeLeases;
pub use redis::RedisStore;
pub use store::{Heard, LocalStore, Store, StoreError};
pub use tokens::FleetTokens;
pub use wire::{Refusal, Seal, Shared};
