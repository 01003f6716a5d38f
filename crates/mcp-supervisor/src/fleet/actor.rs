//! The `Fleet` actor: this process's member of the fleet (docs/FLEET.md).
//!
//! It hears the registry's events and tells the store what this node learned
//! (a park, a `Retry-After` window, a retirement, a reset); it hears the
//! store and tells the registry what other nodes learned. It keeps the
//! mirror: the last standing known per connection and who said it, so an
//! event it caused itself is not sent back. Nothing on a call's path waits
//! on it: the connection actors hold the standing, the mirror only feeds them.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, SystemTime},
};

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, Message, MessageResult, Recipient,
    StreamHandler, WrapFuture,
};
use tokio::time::Instant;

use super::{
    freshness::{Freshness, Heard as HeardAs},
    store::{Heard, Store, StoreError},
    wire::{Message as Wire, Refusal, Seal, Shared, Told},
};
use crate::{RetireReason, events::ConnectionEvent};

/// How often a node says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// A node not heard from for this long is no longer listed.
const GONE_AFTER: Duration = Duration::from_secs(5);

/// What the fleet tells the registry about one connection.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Learned {
    pub connection: String,
    pub news: News,
}

/// What another node learned.
#[derive(Debug, Clone, PartialEq)]
pub enum News {
    /// Take on this standing.
    Standing(Shared),
    /// A person reset the connection: forget its standing.
    Reset,
    /// Another node found its upstream back: revive it.
    Revived,
    /// Its contracts changed on another node: list it again now.
    ContractsChanged,
    /// A person approved these of its contracts on another node.
    ContractsApproved(Vec<crate::contracts::Contract>),
}

/// What this node's contract book learned, for every node
/// (docs/CONTRACTS.md, "The fleet").
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub enum ContractsEverywhere {
    /// A listing here found `connection`'s contracts changed.
    Changed { connection: String },
    /// A person approved these contracts of `connection` here.
    Approved {
        connection: String,
        approved: Vec<crate::contracts::Contract>,
    },
}

/// A person reset `connection` here: every node forgets its standing.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ResetEverywhere {
    pub connection: String,
}

/// This node reloaded its config: every node re-reads its own.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct ReloadEverywhere;

/// `node` reloaded its config (told to the registry).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ReloadedElsewhere {
    pub node: String,
}

/// What this node knows of the fleet, for `/status` and `/metrics`.
#[derive(Message, Debug, Clone)]
#[rtype(result = "FleetView")]
pub struct FleetStatus;

/// The fleet as this node sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetView {
    /// This node's name.
    pub node: String,
    /// Whether the store is reachable, since when, and why not.
    pub store: StoreHealth,
    /// Other nodes heard from in the last few seconds, by name.
    pub nodes: Vec<NodeSeen>,
    /// Standings shared now (parks, windows and retirements not yet over).
    pub shared: Vec<SharedNow>,
    /// Messages from the store that were refused, by reason (every reason,
    /// in [`Refusal::ALL`] order).
    pub refused: Vec<(Refusal, u64)>,
}

/// The store's health as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreHealth {
    /// Not heard from yet.
    Starting,
    Up {
        since: SystemTime,
    },
    /// The node works alone; `why` is our own text.
    Down {
        since: SystemTime,
        why: String,
    },
}

impl StoreHealth {
    /// The name `/status` and the metrics show.
    pub fn as_str(&self) -> &'static str {
        match self {
            StoreHealth::Starting => "starting",
            StoreHealth::Up { .. } => "up",
            StoreHealth::Down { .. } => "down",
        }
    }
}

/// Another node, as last heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSeen {
    pub node: String,
    pub seen: SystemTime,
    /// Connections it has parked and retired.
    pub parked: u32,
    pub retired: u32,
    /// Where its gateway is reached (`[fleet] advertise`).
    pub gateway: Option<url::Url>,
}

/// One shared standing.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedNow {
    pub connection: String,
    pub shared: Shared,
    /// The node that learned it.
    pub node: String,
}

/// Who this node is in the fleet.
#[derive(Debug, Clone)]
pub struct Member {
    pub node: String,
    /// The fleet key: every message is sealed with a key derived from it
    /// and the namespace.
    pub key: crate::config::FleetKey,
    pub namespace: String,
    /// The tolerated difference between nodes' clocks.
    pub skew: Duration,
    /// Where this node's gateway is reached, told in every heartbeat.
    pub advertise: Option<url::Url>,
    /// The furthest a shared deadline may be: the longest window any node
    /// sets (`max_cooldown`) plus the tolerated clock skew.
    pub furthest: Duration,
    /// Shared OAuth tokens that did not open, counted by this node's
    /// [`super::FleetTokens`]; shown as [`Refusal::Unsealed`].
    pub unsealed: Arc<std::sync::atomic::AtomicU64>,
}

/// This process's member of the fleet.
pub struct Fleet {
    node: String,
    seal: Seal,
    /// The sequence number of the next message this node sends.
    next_seq: u64,
    /// What is fresh from the other nodes.
    freshness: Freshness,
    skew: Duration,
    advertise: Option<url::Url>,
    furthest: Duration,
    store: Arc<dyn Store>,
    registry: Recipient<Learned>,
    reloads: Recipient<ReloadedElsewhere>,
    /// The last standing known per connection, and who learned it.
    mirror: HashMap<String, (Shared, String)>,
    health: StoreHealth,
    /// The subscription's last word (`None` before the first), and the last
    /// command's result: the store's health follows both.
    subscription: Option<Result<(), String>>,
    commands: Result<(), String>,
    nodes: HashMap<String, (Instant, NodeSeen)>,
    refused: HashMap<Refusal, u64>,
    unsealed: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("node", &self.node)
            .field("store", &self.store)
            .field("health", &self.health.as_str())
            .finish_non_exhaustive()
    }
}

impl Fleet {
    pub fn new(
        settings: Member,
        store: Arc<dyn Store>,
        registry: Recipient<Learned>,
        reloads: Recipient<ReloadedElsewhere>,
    ) -> Self {
        Fleet {
            seal: Seal::new(&settings.key, &settings.namespace),
            next_seq: first_seq(),
            freshness: Freshness::default(),
            skew: settings.skew,
            node: settings.node,
            advertise: settings.advertise,
            furthest: settings.furthest,
            store,
            registry,
            reloads,
            mirror: HashMap::new(),
            health: StoreHealth::Starting,
            subscription: None,
            commands: Ok(()),
            nodes: HashMap::new(),
            refused: HashMap::new(),
            unsealed: settings.unsealed,
        }
    }

    /// `told` as this node's next message.
    fn wire(&mut self, told: Told) -> Wire {
        let message = Wire {
            node: self.node.clone(),
            at: SystemTime::now(),
            seq: self.next_seq,
            told,
        };
        self.next_seq += 1;
        self.freshness.sent(&message);
        message
    }

    /// Runs a store operation off the actor; a failure marks the store down.
    fn store_op<F>(&self, ctx: &mut Context<Self>, op: F)
    where
        F: std::future::Future<Output = Result<(), StoreError>> + 'static,
    {
        ctx.spawn(op.into_actor(self).map(|result, fleet, ctx| {
            fleet.commands = result.map_err(|error| error.0);
            fleet.judge_health(ctx);
        }));
    }

    /// Shares `shared`, learned here, unless it is what the fleet told us.
    fn share(&mut self, connection: &str, shared: Shared, ctx: &mut Context<Self>) {
        if self
            .mirror
            .get(connection)
            .is_some_and(|(known, _)| same(known, &shared))
        {
            return; // adopted from the fleet: already known there
        }
        self.mirror
            .insert(connection.to_owned(), (shared.clone(), self.node.clone()));
        self.keep(connection, shared, ctx);
    }

    fn keep(&mut self, connection: &str, shared: Shared, ctx: &mut Context<Self>) {
        let expires = shared.until();
        let message = self
            .wire(Told::Standing {
                connection: connection.to_owned(),
                shared,
            })
            .encode(&self.seal);
        let store = self.store.clone();
        let connection = connection.to_owned();
        self.store_op(ctx, async move {
            store.keep(&connection, &message, expires).await
        });
    }

    /// The store is up while this node both hears it (its subscription)
    /// and can write to it (its last command). Either failing makes it down;
    /// both working again makes it up, and then the node tells the store
    /// what it learned meanwhile and reads what the others kept.
    fn judge_health(&mut self, ctx: &mut Context<Self>) {
        let failure = match (&self.subscription, &self.commands) {
            (Some(Ok(())), Ok(())) => None,
            (None, Ok(())) => return, // not heard from yet
            (Some(Err(why)), _) | (_, Err(why)) => Some(why.clone()),
        };
        match failure {
            Some(why) if !matches!(self.health, StoreHealth::Down { .. }) => {
                tracing::warn!(node = %self.node, %why, "fleet store unreachable; this node works alone until it returns");
                self.health = StoreHealth::Down {
                    since: SystemTime::now(),
                    why,
                };
            }
            Some(_) => {}
            None if !matches!(self.health, StoreHealth::Up { .. }) => self.up(ctx),
            None => {}
        }
    }

    fn up(&mut self, ctx: &mut Context<Self>) {
        if matches!(self.health, StoreHealth::Down { .. }) {
            tracing::info!(node = %self.node, "fleet store reachable again");
        } else if matches!(self.health, StoreHealth::Starting) {
            tracing::info!(node = %self.node, store = ?self.store, "joined the fleet");
        }
        self.health = StoreHealth::Up {
            since: SystemTime::now(),
        };
        // What this node learned while the store was away is told now …
        let mine: Vec<(String, Shared)> = self
            .mirror
            .iter()
            .filter(|(_, (shared, node))| *node == self.node && !over(shared))
            .map(|(connection, (shared, _))| (connection.clone(), shared.clone()))
            .collect();
        for (connection, shared) in mine {
            self.keep(&connection, shared, ctx);
        }
        // … and what the others kept meanwhile is read.
        let store = self.store.clone();
        ctx.spawn(
            async move { store.kept().await }
                .into_actor(self)
                .map(|kept, fleet, ctx| match kept {
                    Ok(kept) => {
                        for message in kept {
                            fleet.heard(&message, HeardAs::Kept);
                        }
                    }
                    Err(error) => {
                        fleet.commands = Err(error.0);
                        fleet.judge_health(ctx);
                    }
                }),
        );
    }

    /// A message from the store, heard `how`: checked, then acted on.
    fn heard(&mut self, bytes: &[u8], how: HeardAs) {
        let now = SystemTime::now();
        let message = match Wire::decode(bytes, now + self.furthest, &self.seal) {
            Ok(message) if message.node == self.node => return, // our own, back
            Ok(message) => match self.freshness.take(&message, how, now, self.skew) {
                Ok(()) => message,
                Err(refusal) => return self.refuse(refusal),
            },
            Err(refusal) => return self.refuse(refusal),
        };
        match message.told {
            Told::Alive {
                parked,
                retired,
                gateway,
            } => {
                let seen = NodeSeen {
                    node: message.node.clone(),
                    seen: SystemTime::now(),
                    parked,
                    retired,
                    gateway,
                };
                self.nodes.insert(message.node, (Instant::now(), seen));
            }
            Told::Standing { connection, shared } => {
                if over(&shared) {
                    return;
                }
                self.mirror
                    .insert(connection.clone(), (shared.clone(), message.node));
                self.registry.do_send(Learned {
                    connection,
                    news: News::Standing(shared),
                });
            }
            Told::Reload => self
                .reloads
                .do_send(ReloadedElsewhere { node: message.node }),
            Told::Reset { connection } => {
                self.mirror.remove(&connection);
                self.registry.do_send(Learned {
                    connection,
                    news: News::Reset,
                });
            }
            Told::Revived { connection } => {
                self.mirror.remove(&connection);
                self.registry.do_send(Learned {
                    connection,
                    news: News::Revived,
                });
            }
            Told::ContractsChanged { connection } => self.registry.do_send(Learned {
                connection,
                news: News::ContractsChanged,
            }),
            Told::ContractsApproved {
                connection,
                approved,
            } => self.registry.do_send(Learned {
                connection,
                news: News::ContractsApproved(approved),
            }),
        }
    }

    /// Counts a message refused for `refusal`, and says so once per reason.
    fn refuse(&mut self, refusal: Refusal) {
        let count = self.refused.entry(refusal).or_insert(0);
        *count += 1;
        if *count == 1 {
            tracing::warn!(node = %self.node, refusal = refusal.as_str(), "refused a message from the fleet store (counted in /metrics; logged once per reason)");
        }
    }

    fn alive(&mut self, ctx: &mut Context<Self>) {
        self.nodes.retain(|_, (at, _)| at.elapsed() < GONE_AFTER);
        self.mirror.retain(|_, (shared, _)| !over(shared));
        let count = |label| {
            self.mirror
                .values()
                .filter(|(shared, node)| *node == self.node && shared.label() == label)
                .count() as u32
        };
        let message = self
            .wire(Told::Alive {
                parked: count("parked"),
                retired: count("retired"),
                gateway: self.advertise.clone(),
            })
            .encode(&self.seal);
        let store = self.store.clone();
        self.store_op(ctx, async move { store.send(&message).await });
    }
}

/// The first sequence number of this process: its start time in
/// microseconds, so a node's numbers keep rising across its restarts.
fn first_seq() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}

/// The same standing, as far as the wire can tell (deadlines in ms).
fn same(a: &Shared, b: &Shared) -> bool {
    let ms = |at: Option<SystemTime>| {
        at.and_then(|at| at.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|since| since.as_millis())
    };
    match (a, b) {
        (Shared::Retired { reason: x, .. }, Shared::Retired { reason: y, .. }) => x == y,
        _ => a.label() == b.label() && ms(a.until()) == ms(b.until()),
    }
}

/// A park or window already over.
fn over(shared: &Shared) -> bool {
    shared
        .until()
        .is_some_and(|until| until <= SystemTime::now())
}

impl Actor for Fleet {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.add_stream(tokio_stream(self.store.listen()));
        // A heartbeat a second; four a second while the store is down, so
        // a store that returns is seen working again within a quarter second.
        let mut ticks = 0u32;
        ctx.run_interval(HEARTBEAT / 4, move |fleet, ctx| {
            ticks = ticks.wrapping_add(1);
            if ticks.is_multiple_of(4) || matches!(fleet.health, StoreHealth::Down { .. }) {
                fleet.alive(ctx);
            }
        });
    }
}

fn tokio_stream(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Heard>,
) -> impl futures::Stream<Item = Heard> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

impl StreamHandler<Heard> for Fleet {
    fn handle(&mut self, heard: Heard, ctx: &mut Context<Self>) {
        match heard {
            Heard::Up => {
                self.subscription = Some(Ok(()));
                if matches!(self.health, StoreHealth::Up { .. }) {
                    // Subscribed again without a failed command in between:
                    // messages may have been missed, so read again.
                    self.up(ctx);
                } else {
                    self.judge_health(ctx);
                }
            }
            Heard::Down { why } => {
                self.subscription = Some(Err(why));
                self.judge_health(ctx);
            }
            Heard::Message(bytes) => self.heard(&bytes, HeardAs::Sent),
        }
    }
}

/// What this node learned, from the registry's events.
impl Handler<ConnectionEvent> for Fleet {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, ctx: &mut Context<Self>) {
        let (connection, shared) = match event {
            ConnectionEvent::Parked {
                connection,
                failure,
                until,
                strikes,
                ..
            } => (
                connection,
                Shared::Parked {
                    until: until.wall(),
                    failure,
                    strikes,
                },
            ),
            ConnectionEvent::Held {
                connection,
                failure,
                until,
            } => (
                connection,
                Shared::Held {
                    until: until.wall(),
                    failure,
                },
            ),
            // A crash loop is this process's trouble, not the upstream's.
            ConnectionEvent::Retired {
                connection,
                reason: reason @ RetireReason::Failure(_),
                failure,
            } => (connection, Shared::Retired { reason, failure }),
            ConnectionEvent::Ready {
                connection,
                revived: true,
            } => return self.revived(connection, ctx),
            _ => return,
        };
        self.share(&connection, shared, ctx);
    }
}

impl Fleet {
    /// `connection` came back from a park here (a probe, or the first use
    /// after it): the fleet's park of it is over. Told only while the
    /// fleet knows it parked, so a revival told by another node is not
    /// told again.
    fn revived(&mut self, connection: String, ctx: &mut Context<Self>) {
        if !self
            .mirror
            .get(&connection)
            .is_some_and(|(shared, _)| matches!(shared, Shared::Parked { .. }))
        {
            return;
        }
        self.mirror.remove(&connection);
        let message = self
            .wire(Told::Revived {
                connection: connection.clone(),
            })
            .encode(&self.seal);
        let store = self.store.clone();
        self.store_op(
            ctx,
            async move { store.forget(&connection, &message).await },
        );
    }
}

impl Handler<ResetEverywhere> for Fleet {
    type Result = ();

    fn handle(&mut self, msg: ResetEverywhere, ctx: &mut Context<Self>) {
        self.mirror.remove(&msg.connection);
        let message = self
            .wire(Told::Reset {
                connection: msg.connection.clone(),
            })
            .encode(&self.seal);
        let store = self.store.clone();
        self.store_op(
            ctx,
            async move { store.forget(&msg.connection, &message).await },
        );
    }
}

impl Handler<ContractsEverywhere> for Fleet {
    type Result = ();

    fn handle(&mut self, msg: ContractsEverywhere, ctx: &mut Context<Self>) {
        let told = match msg {
            ContractsEverywhere::Changed { connection } => Told::ContractsChanged { connection },
            ContractsEverywhere::Approved {
                connection,
                approved,
            } => Told::ContractsApproved {
                connection,
                approved,
            },
        };
        let message = self.wire(told).encode(&self.seal);
        let store = self.store.clone();
        self.store_op(ctx, async move { store.send(&message).await });
    }
}

impl Handler<ReloadEverywhere> for Fleet {
    type Result = ();

    fn handle(&mut self, _: ReloadEverywhere, ctx: &mut Context<Self>) {
        let message = self.wire(Told::Reload).encode(&self.seal);
        let store = self.store.clone();
        self.store_op(ctx, async move { store.send(&message).await });
    }
}

impl Handler<FleetStatus> for Fleet {
    type Result = MessageResult<FleetStatus>;

    fn handle(&mut self, _: FleetStatus, _: &mut Context<Self>) -> Self::Result {
        self.refused.insert(
            Refusal::Unsealed,
            self.unsealed.load(std::sync::atomic::Ordering::Relaxed),
        );
        let mut nodes: Vec<NodeSeen> = self
            .nodes
            .values()
            .filter(|(at, _)| at.elapsed() < GONE_AFTER)
            .map(|(_, seen)| seen.clone())
            .collect();
        nodes.sort_by(|a, b| a.node.cmp(&b.node));
        let mut shared: Vec<SharedNow> = self
            .mirror
            .iter()
            .filter(|(_, (shared, _))| !over(shared))
            .map(|(connection, (shared, node))| SharedNow {
                connection: connection.clone(),
                shared: shared.clone(),
                node: node.clone(),
            })
            .collect();
        shared.sort_by(|a, b| a.connection.cmp(&b.connection));
        MessageResult(FleetView {
            node: self.node.clone(),
            store: self.health.clone(),
            nodes,
            shared,
            refused: Refusal::ALL
                .map(|refusal| (refusal, self.refused.get(&refusal).copied().unwrap_or(0)))
                .to_vec(),
        })
    }
}
