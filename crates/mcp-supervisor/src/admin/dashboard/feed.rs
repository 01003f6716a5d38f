//! The live feed behind `/events` (docs/DECISIONS.md #103): one [`Feed`]
//! actor per process, started by the first page that listens, so a process
//! nobody watches pays nothing.
//!
//! It follows the registry's events: a park, hold, revive, retirement,
//! reconnect or restart refreshes the rows within [`EVENT_DELAY`]. While a
//! page listens, it also refreshes every [`TICK`] for what changes without an
//! event (counts, in-flight, latency). A refresh asks the registry for its
//! status, compares each connection's [`Row`] with the last one sent, and
//! broadcasts only the rows that changed, as one JSON text serialized once
//! for every listener. A listener that falls [`BUFFER`] frames behind is told
//! to resync (it fetches every row again) rather than slow anyone down.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::{Duration, SystemTime},
};

use actix::{
    Actor, ActorFutureExt, Addr, AsyncContext, Context, Handler, Message, ResponseActFuture,
    WrapFuture,
};
use serde::Serialize;
use tokio::sync::broadcast;

use super::{
    html::epoch_ms,
    model::{Row, counts},
};
use crate::{
    events::ConnectionEvent,
    registry::{Moved, Registry, StatusMoved, Subscribe},
};

/// How soon an event's change is sent (events come in bursts: one refresh).
pub(crate) const EVENT_DELAY: Duration = Duration::from_millis(50);
/// How often rows are compared while a page listens (only the connections
/// that moved since the last look are asked).
pub(crate) const TICK: Duration = Duration::from_secs(1);
/// Every this many ticks every connection is asked, for what changes with
/// time alone (the latency window's slots expiring, a token's expiry).
const FULL_EVERY: u32 = 10;
/// Frames a listener may fall behind before it must resync.
pub(crate) const BUFFER: usize = 64;

/// A frame of the feed: the rows that changed since the last one, and the
/// connections removed.
#[derive(Debug, Serialize)]
pub(crate) struct Frame<'a> {
    pub(crate) seq: u64,
    /// The server's clock (ms since the epoch), which the page counts down by.
    pub(crate) now: u64,
    pub(crate) rows: Vec<&'a Row>,
    pub(crate) removed: Vec<&'a str>,
    /// Connections per state (the overview's header).
    pub(crate) counts: BTreeMap<&'static str, usize>,
}

impl Frame<'_> {
    pub(crate) fn text(&self) -> Arc<str> {
        serde_json::to_string(self)
            .unwrap_or_else(|_| "{}".to_owned())
            .into()
    }
}

/// The rows last sent, and the frames that bring a listener up to date.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    rows: BTreeMap<String, Row>,
    /// Each connection's generation when its row was last made.
    generations: HashMap<String, u64>,
    seq: u64,
}

impl Rows {
    /// What to ask the registry: the generations seen (`complete`: none, so
    /// every connection is reported).
    pub(crate) fn ask(&self, complete: bool) -> StatusMoved {
        StatusMoved {
            seen: if complete {
                HashMap::new()
            } else {
                self.generations.clone()
            },
        }
    }

    /// Takes the registry's answer (`complete`: it reports every
    /// connection, so one it leaves out is gone): the frame of what changed
    /// (`None`: nothing did).
    pub(crate) fn apply(&mut self, answer: Moved, complete: bool) -> Option<Arc<str>> {
        let mut changed = Vec::new();
        let mut reported = BTreeSet::new();
        for (status, generation) in answer.moved {
            self.generations.insert(status.name.clone(), generation);
            let row = Row::from_status(&status);
            if self.rows.get(&status.name) != Some(&row) {
                changed.push(status.name.clone());
                self.rows.insert(status.name.clone(), row);
            }
            reported.insert(status.name);
        }
        let removed: Vec<String> = if complete {
            self.rows
                .keys()
                .filter(|name| !reported.contains(*name))
                .cloned()
                .collect()
        } else {
            answer
                .removed
                .into_iter()
                .filter(|name| self.rows.contains_key(name))
                .collect()
        };
        for name in &removed {
            self.rows.remove(name);
            self.generations.remove(name);
        }
        if changed.is_empty() && removed.is_empty() {
            return None;
        }
        self.seq += 1;
        let frame = Frame {
            seq: self.seq,
            now: epoch_ms(SystemTime::now()),
            rows: changed
                .iter()
                .filter_map(|name| self.rows.get(name))
                .collect(),
            removed: removed.iter().map(String::as_str).collect(),
            counts: counts(self.rows.values()).into_iter().collect(),
        };
        Some(frame.text())
    }

    /// Every row, as one frame.
    pub(crate) fn full(&self) -> Arc<str> {
        Frame {
            seq: self.seq,
            now: epoch_ms(SystemTime::now()),
            rows: self.rows.values().collect(),
            removed: Vec::new(),
            counts: counts(self.rows.values()).into_iter().collect(),
        }
        .text()
    }
}

/// The feed's actor.
#[derive(Debug)]
pub(crate) struct Feed {
    registry: Addr<Registry>,
    rows: Rows,
    tx: broadcast::Sender<Arc<str>>,
    /// A refresh is due after an event.
    scheduled: bool,
    /// A refresh is waiting for the registry; another is not sent meanwhile.
    refreshing: bool,
    ticks: u32,
}

impl Feed {
    pub(crate) fn new(registry: Addr<Registry>) -> Self {
        Feed {
            registry,
            rows: Rows::default(),
            tx: broadcast::channel(BUFFER).0,
            scheduled: false,
            refreshing: false,
            ticks: 0,
        }
    }

    fn watched(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    fn refresh(&mut self, ctx: &mut Context<Self>, complete: bool) {
        if self.refreshing {
            return;
        }
        self.refreshing = true;
        let asked = self.registry.send(self.rows.ask(complete));
        ctx.spawn(asked.into_actor(self).map(move |answer, feed, _| {
            feed.refreshing = false;
            if let Ok(answer) = answer {
                feed.apply(answer, complete);
            }
        }));
    }

    fn apply(&mut self, answer: Moved, complete: bool) {
        if let Some(frame) = self.rows.apply(answer, complete) {
            // No listener: nothing to send (a send error says only that).
            let _ = self.tx.send(frame);
        }
    }
}

impl Actor for Feed {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.registry.do_send(Subscribe(ctx.address().recipient()));
        ctx.run_interval(TICK, |feed, ctx| {
            if feed.watched() {
                feed.ticks = feed.ticks.wrapping_add(1);
                feed.refresh(ctx, feed.ticks % FULL_EVERY == 0);
            }
        });
    }
}

impl Handler<ConnectionEvent> for Feed {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, ctx: &mut Context<Self>) {
        let moves = matches!(
            event,
            ConnectionEvent::Connecting { .. }
                | ConnectionEvent::Ready { .. }
                | ConnectionEvent::Parked { .. }
                | ConnectionEvent::Held { .. }
                | ConnectionEvent::Revived { .. }
                | ConnectionEvent::Retired { .. }
                | ConnectionEvent::Restarted { .. }
                | ConnectionEvent::Stopped { .. }
                | ConnectionEvent::CatalogChanged { .. }
        );
        if !moves || self.scheduled || !self.watched() {
            return;
        }
        self.scheduled = true;
        ctx.run_later(EVENT_DELAY, |feed, ctx| {
            feed.scheduled = false;
            feed.refresh(ctx, false);
        });
    }
}

/// A new listener: every row now, then every change after it.
#[derive(Message)]
#[rtype(result = "Result<(Arc<str>, broadcast::Receiver<Arc<str>>), actix::MailboxError>")]
pub(crate) struct Join;

impl Handler<Join> for Feed {
    type Result = ResponseActFuture<
        Self,
        Result<(Arc<str>, broadcast::Receiver<Arc<str>>), actix::MailboxError>,
    >;

    fn handle(&mut self, _: Join, _: &mut Context<Self>) -> Self::Result {
        let asked = self.registry.send(self.rows.ask(true));
        Box::pin(asked.into_actor(self).map(|answer, feed, _| {
            feed.apply(answer?, true);
            // Subscribed with the rows just sent to everyone else, in one
            // step: the listener misses no change after its first frame.
            let rx = feed.tx.subscribe();
            Ok((feed.rows.full(), rx))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConnectionState, registry::ConnectionStatus};

    fn frame(text: Option<Arc<str>>) -> serde_json::Value {
        serde_json::from_str(&text.expect("a frame")).unwrap()
    }

    fn answer(statuses: &[(&ConnectionStatus, u64)]) -> Moved {
        Moved {
            moved: statuses.iter().map(|(s, g)| ((*s).clone(), *g)).collect(),
            removed: Vec::new(),
        }
    }

    #[test]
    fn a_frame_holds_only_the_rows_that_changed() {
        let mut rows = Rows::default();
        let a = ConnectionStatus::idle("a", "stdio");
        let mut b = ConnectionStatus::idle("b", "http");
        let first = frame(rows.apply(answer(&[(&a, 1), (&b, 1)]), true));
        assert_eq!(first["rows"].as_array().unwrap().len(), 2);
        assert!(
            rows.apply(answer(&[(&a, 1), (&b, 1)]), true).is_none(),
            "nothing changed"
        );
        // What to ask next: only what moved since these generations.
        let ask = rows.ask(false);
        assert_eq!((ask.seen["a"], ask.seen["b"]), (1, 1));
        assert!(
            rows.ask(true).seen.is_empty(),
            "a complete look asks for all"
        );
        b.state = ConnectionState::Parked;
        let second = frame(rows.apply(answer(&[(&b, 2)]), false));
        assert_eq!(second["rows"].as_array().unwrap().len(), 1);
        assert_eq!(second["rows"][0]["name"], "b");
        assert_eq!(second["rows"][0]["state"], "parked");
        assert_eq!(second["seq"], 2);
        assert_eq!(
            (&second["counts"]["parked"], &second["counts"]["idle"]),
            (&serde_json::json!(1), &serde_json::json!(1))
        );
        assert_eq!(rows.ask(false).seen["b"], 2);
        // A partial answer leaving `a` out does not remove it; a complete one does.
        let gone = Moved {
            moved: Vec::new(),
            removed: vec!["a".to_owned()],
        };
        let third = frame(rows.apply(gone, false));
        assert_eq!(third["removed"], serde_json::json!(["a"]));
        assert_eq!(third["rows"], serde_json::json!([]));
        assert!(!rows.ask(false).seen.contains_key("a"));
        let fourth = frame(rows.apply(answer(&[]), true));
        assert_eq!(fourth["removed"], serde_json::json!(["b"]));
        let full: serde_json::Value = serde_json::from_str(&rows.full()).unwrap();
        assert_eq!(full["rows"], serde_json::json!([]));
        assert_eq!(full["seq"], 4);
    }
}
