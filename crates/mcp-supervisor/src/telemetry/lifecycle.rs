//! What happens to a connection with no request to hang it on: a park, a
//! `Retry-After` hold, a revive, a retirement, a session built again, a
//! crash restart. Each is a short INTERNAL span of its own, named
//! `mcp_supervisor.{what} {connection}` (the request that caused a park or
//! retirement also carries it, as an event on its CLIENT span).
//!
//! [`LifecycleSpans`] is an actor subscribed to the registry's events
//! (`Subscribe(addr.recipient())`); `serve` starts one with `[telemetry]`.

use actix::{Actor, Context, Handler};
use opentelemetry::{
    KeyValue,
    trace::{Span as _, SpanKind, Tracer},
};

use super::{installed, semconv as sc};
use crate::events::ConnectionEvent;

/// Emits a span per lifecycle event (see the module doc).
#[derive(Debug, Default)]
pub struct LifecycleSpans;

impl Actor for LifecycleSpans {
    type Context = Context<Self>;
}

impl Handler<ConnectionEvent> for LifecycleSpans {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, _: &mut Context<Self>) {
        let Some((what, connection, attributes)) = described(&event) else {
            return;
        };
        let Some(telemetry) = installed() else { return };
        let tracer = telemetry.sdk_tracer();
        let mut span = tracer
            .span_builder(format!("mcp_supervisor.{what} {connection}"))
            .with_kind(SpanKind::Internal)
            .start(tracer);
        if span.is_recording() {
            span.set_attribute(KeyValue::new(sc::CONNECTION, connection.to_owned()));
            span.set_attributes(attributes);
        }
        span.end();
    }
}

/// The span an event becomes: what happened, to which connection, and its
/// attributes; `None` for events that are not a change of standing.
fn described(event: &ConnectionEvent) -> Option<(&'static str, &str, Vec<KeyValue>)> {
    Some(match event {
        ConnectionEvent::Parked {
            connection,
            failure,
            cooldown,
            attempt,
            strikes,
            ..
        } => (
            "park",
            connection,
            vec![
                KeyValue::new(sc::FAILURE_KIND, failure.kind.as_str()),
                KeyValue::new(sc::COOLDOWN, cooldown.as_secs_f64()),
                KeyValue::new(sc::ATTEMPT, i64::from(*attempt)),
                KeyValue::new(sc::STRIKES, i64::from(*strikes)),
            ],
        ),
        ConnectionEvent::Held {
            connection,
            failure,
            until,
        } => (
            "hold",
            connection,
            vec![
                KeyValue::new(sc::FAILURE_KIND, failure.kind.as_str()),
                KeyValue::new(sc::RETRY_AFTER, until.remaining().as_secs_f64()),
            ],
        ),
        ConnectionEvent::Revived { connection } => ("revive", connection, Vec::new()),
        ConnectionEvent::Retired {
            connection,
            reason,
            failure,
        } => {
            let mut attributes = vec![KeyValue::new(sc::RETIRE_REASON, reason.as_str())];
            if let Some(failure) = failure {
                attributes.push(KeyValue::new(sc::FAILURE_KIND, failure.kind.as_str()));
            }
            ("retire", connection, attributes)
        }
        ConnectionEvent::Ready {
            connection,
            revived,
        } => (
            "connect",
            connection,
            vec![KeyValue::new(sc::REVIVED, *revived)],
        ),
        ConnectionEvent::Restarted {
            connection,
            restarts,
        } => (
            "restart",
            connection,
            vec![KeyValue::new(sc::RESTARTS, i64::from(*restarts))],
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Failure, FailureKind};

    #[test]
    fn standing_changes_are_described_and_other_events_are_not() {
        let parked = ConnectionEvent::Parked {
            connection: "a".into(),
            failure: Failure::new(FailureKind::Server, "503"),
            cooldown: Duration::from_secs(30),
            until: crate::Deadline::after(Duration::from_secs(30)),
            attempt: 3,
            strikes: 1,
        };
        let (what, connection, attributes) = described(&parked).unwrap();
        assert_eq!((what, connection), ("park", "a"));
        let keys: Vec<&str> = attributes.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(
            keys,
            [sc::FAILURE_KIND, sc::COOLDOWN, sc::ATTEMPT, sc::STRIKES]
        );
        let revived = ConnectionEvent::Revived {
            connection: "a".into(),
        };
        assert_eq!(described(&revived).unwrap().0, "revive");
        let log = ConnectionEvent::Stopped {
            connection: "a".into(),
        };
        assert!(described(&log).is_none());
    }
}
