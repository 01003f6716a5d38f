//! The registry's public messages (docs/ARCHITECTURE.md, "Actors and messages")
//! and their handlers.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use actix::{Context, Handler, Message, MessageResult, Recipient, ResponseFuture};
use futures::future::join_all;
use rmcp::model::JsonObject;

use super::{
    Catalog, Registry,
    entries::{Entry, drain_catalog},
};
use crate::{
    CallOutcome, ConnectionState, Failure, FailureKind, Forwarded, RetireReason, Unavailable,
    call::UpstreamRequest,
    connection::{
        Adopt, CallCounts, ConnectionDied, ConnectionSnapshot, Snapshot, Stop, stats::History,
    },
    events::ConnectionEvent,
    fleet::{Learned, News, ResetEverywhere},
    policy::ResetConnection,
    session::DownstreamLink,
    telemetry::TraceParent,
};

/// Call `tool` on `connection`. Always answered with a value.
#[derive(Message, Debug, Clone)]
#[rtype(result = "CallOutcome")]
pub struct CallTool {
    pub connection: String,
    pub tool: String,
    pub arguments: Option<JsonObject>,
    /// Overrides the connection's `call_timeout` for this call.
    pub timeout: Option<Duration>,
    /// The span the call's spans hang under: [`TraceParent::current`] makes
    /// it the caller's current span (empty when telemetry is off).
    pub trace: TraceParent,
}

/// Send `request` to `connection` as it is: the gateway's proxying of any
/// request (a `tools/call`, `resources/read`, `prompts/get`, …). Admitted,
/// deadline-bound (`call_timeout`), classified and retried like a call;
/// reads are retry-safe. The upstream's JSON-RPC errors come back as they
/// are (`Forwarded::Error`). Always answered.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Forwarded")]
pub struct Forward {
    pub connection: String,
    /// Cloning shares its arguments: a caller that may send it again
    /// (another input round) keeps it without a copy.
    pub request: UpstreamRequest,
    /// Where the upstream's progress and server-to-client requests go.
    pub link: Option<DownstreamLink>,
    /// The span its attempts' spans hang under (the gateway's SERVER span).
    pub trace: TraceParent,
}

/// The registry's [`Routes`](super::Routes), for a sender that goes
/// straight to a connection's actor when it can (the gateway).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "super::Routes")]
pub struct ShareRoutes;

/// The connection's catalog (loaded on first request, then cached).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Arc<Catalog>, Unavailable>")]
pub struct ListTools {
    pub connection: String,
}

/// Every configured connection, in name order, with what agents need to pick one.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Vec<ConnectionSummary>")]
pub struct ListConnections;

/// Every configured connection, in name order, as the gateway's merged view
/// needs it: answered from the registry's own books at once, asking no
/// connection (a listing over 1,000 connections costs one message).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Vec<LineupMember>")]
pub struct Lineup;

/// One connection in the [`Lineup`].
#[derive(Debug, Clone)]
pub struct LineupMember {
    pub name: String,
    /// Its actor said it retired, and no session was built since.
    pub retired: bool,
    /// Its catalog, when loaded.
    pub catalog: Option<Arc<Catalog>>,
}

/// One connection, as `list_mcps` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionSummary {
    pub name: String,
    /// The configured `notes`, shown to agents as the connection's purpose.
    pub description: Option<String>,
    /// `None` while the catalog is not loaded.
    pub tool_count: Option<usize>,
    pub state: ConnectionState,
    /// Retired: it will not be retried.
    pub dead: bool,
    /// Retired because its OAuth login is missing or no longer good.
    pub needs_login: bool,
}

/// Per-connection status (docs/SUPERVISION.md, "GET /status").
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Vec<ConnectionStatus>")]
pub struct Status;

/// One connection's status. Never a URL, token, header or argument value.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionStatus {
    pub name: String,
    pub transport: &'static str,
    /// The protocol version spoken (agreed, or pinned before the first
    /// session); `None` before the first session when not pinned.
    pub protocol: Option<String>,
    pub state: ConnectionState,
    pub since: SystemTime,
    pub tool_count: Option<usize>,
    pub dead: bool,
    pub last_failure: Option<(Failure, SystemTime)>,
    /// Parks so far (counting or not).
    pub parks: u64,
    /// Probes sent while parked so far.
    pub probes: u64,
    pub parked_until: Option<SystemTime>,
    /// The end of a `Retry-After` window every request waits out.
    pub held_until: Option<SystemTime>,
    pub retired_reason: Option<RetireReason>,
    pub restarts: u32,
    pub in_flight: usize,
    pub queued: usize,
    pub calls: CallCounts,
    pub durations: crate::connection::stats::DurationHistogram,
    pub failures: crate::connection::stats::FailuresByKind,
    /// Call latency over the last five minutes (`None` without calls).
    pub latency: Option<crate::connection::stats::LatencySummary>,
    /// An OAuth connection's tokens (`None` for other connections).
    pub oauth: Option<crate::oauth::OAuthStatus>,
    /// The contracts of what its upstream lists, judged (`None` before
    /// the first listing).
    pub contracts: Option<Arc<crate::contracts::Judged>>,
}

impl ConnectionStatus {
    /// Whether a person must log in before the connection works: retired for
    /// it, or an OAuth connection that never logged in and cannot by itself.
    pub fn needs_login(&self) -> bool {
        self.retired_reason.is_some_and(RetireReason::needs_login)
            || self
                .oauth
                .as_ref()
                .is_some_and(|oauth| !(oauth.logged_in || oauth.by_itself))
    }

    /// A connection that was never used: no session, no calls, no failures.
    pub fn idle(name: &str, transport: &'static str) -> Self {
        ConnectionStatus {
            name: name.to_owned(),
            transport,
            protocol: None,
            state: ConnectionState::Idle,
            since: SystemTime::now(),
            tool_count: None,
            dead: false,
            last_failure: None,
            parks: 0,
            probes: 0,
            parked_until: None,
            held_until: None,
            retired_reason: None,
            restarts: 0,
            in_flight: 0,
            queued: 0,
            calls: CallCounts::default(),
            durations: Default::default(),
            failures: Default::default(),
            latency: None,
            oauth: None,
            contracts: None,
        }
    }
}

/// One connection's recent calls and failures (the dashboard's view of it).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<RecentActivity, UnknownConnection>")]
pub struct RecentOf {
    pub connection: String,
}

/// What [`RecentOf`] answers, newest first. Never an argument or a result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecentActivity {
    pub calls: Vec<crate::connection::stats::CallRecord>,
    pub failures: Vec<crate::connection::stats::FailureRecord>,
}

/// Every connection's catalog as far as it is loaded, in name order (`None`:
/// not loaded yet). Never connects: looking must not change what it looks at.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Vec<(String, Option<Arc<Catalog>>)>")]
pub struct LoadedCatalogs;

impl Handler<RecentOf> for Registry {
    type Result = Result<RecentActivity, UnknownConnection>;

    fn handle(&mut self, msg: RecentOf, _: &mut Context<Self>) -> Self::Result {
        let entry = self
            .entries
            .get(&msg.connection)
            .ok_or(UnknownConnection(msg.connection))?;
        let recent = entry.history.recent();
        Ok(RecentActivity {
            calls: recent.calls().cloned().collect(),
            failures: recent.failures().cloned().collect(),
        })
    }
}

impl Handler<LoadedCatalogs> for Registry {
    type Result = MessageResult<LoadedCatalogs>;

    fn handle(&mut self, _: LoadedCatalogs, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.entries
                .iter()
                .map(|(name, entry)| (name.clone(), entry.loaded_catalog()))
                .collect(),
        )
    }
}

/// Sends every future [`ConnectionEvent`] to `0`.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Subscribe(pub Recipient<ConnectionEvent>);

/// Clears a connection's park or retirement and strikes; it reconnects on next use.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), UnknownConnection>")]
pub struct Reset {
    pub connection: String,
}

/// The named connection is not configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown MCP connection '{0}'")]
pub struct UnknownConnection(pub String);

impl Handler<ListTools> for Registry {
    type Result = ResponseFuture<Result<Arc<Catalog>, Unavailable>>;

    fn handle(&mut self, msg: ListTools, ctx: &mut Context<Self>) -> Self::Result {
        let fetch = self.catalog(&msg.connection, ctx);
        Box::pin(async move {
            match fetch {
                Some(fetch) => fetch.get(&msg.connection).await,
                None => Err(Unavailable {
                    failure: Failure::new(FailureKind::Protocol, "unknown connection")
                        .with_not_run(),
                    retry_in: None,
                    message: format!("Unknown MCP connection '{}'.", msg.connection),
                }),
            }
        })
    }
}

/// One connection as the registry reports it: its cached catalog, restarts,
/// history, and its actor's snapshot.
struct Reported {
    catalog: Option<Arc<Catalog>>,
    restarts: u32,
    history: History,
    latency: Option<crate::connection::stats::LatencySummary>,
    snapshot: ConnectionSnapshot,
    oauth: Option<crate::oauth::OAuthStatus>,
}

impl Reported {
    fn status(self) -> ConnectionStatus {
        let Reported {
            catalog,
            restarts,
            history,
            latency,
            snapshot: s,
            oauth,
        } = self;
        ConnectionStatus {
            dead: s.state == ConnectionState::Retired,
            tool_count: catalog.as_ref().map(|catalog| catalog.len()),
            contracts: catalog.map(|catalog| catalog.contracts.clone()),
            parks: history.parks,
            probes: history.probes,
            restarts,
            name: s.name,
            transport: s.transport,
            protocol: s.protocol,
            state: s.state,
            since: s.since,
            last_failure: history.last_failure,
            parked_until: s.parked_until,
            held_until: s.held_until,
            retired_reason: s.retired_reason,
            in_flight: s.in_flight,
            queued: s.queued,
            calls: history.calls,
            durations: history.durations,
            failures: history.failures,
            latency,
            oauth,
        }
    }
}

impl Registry {
    /// Every connection's report (idle ones without asking an actor).
    fn snapshots(&mut self) -> impl std::future::Future<Output = Vec<Reported>> + use<> {
        self.snapshots_where(&|_, _| true)
    }

    /// The reports of the connections `wanted` picks, in name order.
    fn snapshots_where(
        &mut self,
        wanted: &dyn Fn(&str, &Entry) -> bool,
    ) -> impl std::future::Future<Output = Vec<Reported>> + use<> {
        let asks: Vec<_> = self
            .entries
            .iter()
            .filter(|(name, entry)| wanted(name, entry))
            .map(|(_, entry)| {
                let actor = entry.actor.clone().filter(|actor| actor.connected());
                let idle = idle_snapshot(entry);
                let catalog = entry.loaded_catalog();
                let restarts = entry.restarts;
                let history = entry.history.clone();
                let oauth = crate::oauth::settings_of(&entry.config).cloned();
                async move {
                    let snapshot = match actor {
                        Some(actor) => actor.send(Snapshot).await.unwrap_or(idle),
                        None => idle,
                    };
                    // Read after the actor answered, so the history is at
                    // least as recent as the snapshot.
                    let latency = history.recent().latency(std::time::Instant::now());
                    let history = history.lock().clone();
                    let oauth = match oauth {
                        Some(settings) => Some(crate::oauth::status(&settings).await),
                        None => None,
                    };
                    Reported {
                        catalog,
                        restarts,
                        history,
                        latency,
                        snapshot,
                        oauth,
                    }
                }
            })
            .collect();
        join_all(asks)
    }
}

fn idle_snapshot(entry: &Entry) -> ConnectionSnapshot {
    ConnectionSnapshot {
        name: entry.config.name.clone(),
        transport: entry.config.transport.kind(),
        state: ConnectionState::Idle,
        since: SystemTime::now(),
        parked_until: None,
        held_until: None,
        retired_reason: None,
        in_flight: 0,
        queued: 0,
        peak_in_flight: 0,
        protocol: crate::session::pinned_version(entry.config.protocol)
            .map(|version| version.to_string()),
    }
}

impl Handler<Lineup> for Registry {
    type Result = MessageResult<Lineup>;

    fn handle(&mut self, _: Lineup, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.entries
                .iter()
                .map(|(name, entry)| LineupMember {
                    name: name.clone(),
                    retired: entry.retired,
                    catalog: entry.loaded_catalog(),
                })
                .collect(),
        )
    }
}

impl Handler<ListConnections> for Registry {
    type Result = ResponseFuture<Vec<ConnectionSummary>>;

    fn handle(&mut self, _: ListConnections, _: &mut Context<Self>) -> Self::Result {
        let notes: Vec<Option<String>> = self
            .entries
            .values()
            .map(|entry| entry.config.notes.clone())
            .collect();
        let snapshots = self.snapshots();
        Box::pin(async move {
            snapshots
                .await
                .into_iter()
                .zip(notes)
                .map(|(reported, description)| ConnectionSummary {
                    dead: reported.snapshot.state == ConnectionState::Retired,
                    needs_login: reported
                        .snapshot
                        .retired_reason
                        .is_some_and(RetireReason::needs_login),
                    name: reported.snapshot.name,
                    description,
                    tool_count: reported.catalog.map(|catalog| catalog.len()),
                    state: reported.snapshot.state,
                })
                .collect()
        })
    }
}

impl Handler<Status> for Registry {
    type Result = ResponseFuture<Vec<ConnectionStatus>>;

    fn handle(&mut self, _: Status, _: &mut Context<Self>) -> Self::Result {
        let snapshots = self.snapshots();
        Box::pin(async move { snapshots.await.into_iter().map(Reported::status).collect() })
    }
}

/// The status of the connections that moved since a reader last looked
/// (`seen`: each connection's [`SharedHistory`](crate::connection::stats::SharedHistory)
/// generation then), and the names it saw that are gone. The dashboard's
/// feed asks this every second instead of [`Status`], so a refresh costs
/// what changed, not what exists.
#[derive(Message, Debug, Clone, Default)]
#[rtype(result = "Moved")]
pub struct StatusMoved {
    pub seen: std::collections::HashMap<String, u64>,
}

/// What [`StatusMoved`] answers.
#[derive(Debug, Clone, Default)]
pub struct Moved {
    /// Each moved (or new) connection's status and its generation, read
    /// before the status was.
    pub moved: Vec<(ConnectionStatus, u64)>,
    pub removed: Vec<String>,
}

impl Handler<StatusMoved> for Registry {
    type Result = ResponseFuture<Moved>;

    fn handle(&mut self, msg: StatusMoved, _: &mut Context<Self>) -> Self::Result {
        // Read once, before the statuses: a move after this is seen next time.
        let picked: std::collections::BTreeMap<String, u64> = self
            .entries
            .iter()
            .filter_map(|(name, entry)| {
                let now = entry.history.generation();
                (msg.seen.get(name) != Some(&now)).then(|| (name.clone(), now))
            })
            .collect();
        let removed = msg
            .seen
            .keys()
            .filter(|name| !self.entries.contains_key(*name))
            .cloned()
            .collect();
        let snapshots = self.snapshots_where(&|name, _| picked.contains_key(name));
        Box::pin(async move {
            // Both in name order.
            let moved = snapshots
                .await
                .into_iter()
                .map(Reported::status)
                .zip(picked.into_values())
                .collect();
            Moved { moved, removed }
        })
    }
}

impl Handler<Subscribe> for Registry {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        self.subscribers.push(msg.0);
    }
}

impl Handler<ConnectionEvent> for Registry {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, ctx: &mut Context<Self>) {
        self.note_standing(&event);
        match &event {
            ConnectionEvent::ListChanged { connection, list } => {
                self.list_changed(connection, Some(*list), ctx);
            }
            ConnectionEvent::Ready { connection, .. } => self.session_rebuilt(connection, ctx),
            _ => {}
        }
        // The policy's guard follows the connections' standing.
        if matches!(
            event,
            ConnectionEvent::Parked { .. }
                | ConnectionEvent::Ready { .. }
                | ConnectionEvent::Revived { .. }
                | ConnectionEvent::Retired { .. }
                | ConnectionEvent::Stopped { .. }
        ) {
            self.policy.do_send(event.clone());
        }
        self.subscribers.retain(|subscriber| subscriber.connected());
        self.publish(&event);
    }
}

impl Handler<ConnectionDied> for Registry {
    type Result = ();

    fn handle(&mut self, died: ConnectionDied, ctx: &mut Context<Self>) {
        self.restart(&died.connection, died.incarnation, died.handover, ctx);
    }
}

impl Handler<Reset> for Registry {
    type Result = Result<(), UnknownConnection>;

    fn handle(&mut self, msg: Reset, _: &mut Context<Self>) -> Self::Result {
        self.reset_here(&msg.connection)?;
        tracing::info!(connection = %msg.connection, "reset");
        if let Some(fleet) = &self.fleet {
            fleet.do_send(ResetEverywhere {
                connection: msg.connection,
            });
        }
        Ok(())
    }
}

impl Registry {
    /// Keeps the entry's `retired` with what its actor says.
    fn note_standing(&mut self, event: &ConnectionEvent) {
        let retired = match event {
            ConnectionEvent::Retired { .. } => true,
            ConnectionEvent::Connecting { .. }
            | ConnectionEvent::Ready { .. }
            | ConnectionEvent::Revived { .. } => false,
            _ => return,
        };
        if let Some(entry) = self.entries.get_mut(event.connection()) {
            entry.retired = retired;
        }
    }

    /// Forgets `connection`'s standing in this process: its actor stops and
    /// the next use starts a fresh one.
    fn reset_here(&mut self, connection: &str) -> Result<(), UnknownConnection> {
        let entry = self
            .entries
            .get_mut(connection)
            .ok_or_else(|| UnknownConnection(connection.to_owned()))?;
        if let Some(actor) = entry.actor.take() {
            actor.do_send(Stop);
        }
        entry.retired = false;
        entry.catalog = drain_catalog(
            std::mem::replace(&mut entry.catalog, super::entries::CatalogState::Unloaded),
            connection,
        );
        entry.recent_restarts.clear();
        self.reroute(connection);
        self.policy.do_send(ResetConnection {
            connection: connection.to_owned(),
        });
        Ok(())
    }
}

/// What another node of the fleet learned: taken on by the connection's
/// actor (started for it if it is not running), or a reset done here.
impl Handler<Learned> for Registry {
    type Result = ();

    fn handle(&mut self, msg: Learned, ctx: &mut Context<Self>) {
        if self.shutting_down {
            return;
        }
        match msg.news {
            news @ (News::ContractsChanged | News::ContractsApproved(_)) => {
                self.contracts_learned(&msg.connection, news, ctx);
            }
            News::Reset => {
                if self.reset_here(&msg.connection).is_ok() {
                    tracing::info!(connection = %msg.connection, "reset: by another node of the fleet");
                }
            }
            News::Revived => {
                if let Some(actor) = self.actor(&msg.connection, ctx) {
                    actor.do_send(crate::connection::Revive);
                }
            }
            News::Standing(shared) => match self.actor(&msg.connection, ctx) {
                Some(actor) => actor.do_send(Adopt(shared)),
                // Another node's config has it, this one's does not.
                None => {
                    tracing::debug!(connection = %msg.connection, "the fleet told of a connection not configured here")
                }
            },
        }
    }
}
