//! `notifications/message`: when a tool may log, and at what level.
//!
//! A legacy session chooses its level once with `logging/setLevel`. A
//! 2026-07-28 request carries its own `io.modelcontextprotocol/logLevel` in
//! `_meta`, and a request without one must get no log at all (SEP-2575;
//! `server-stateless` checks it).

#![allow(deprecated)] // Logging: SEP-2577 deprecates it, the suite still tests it.

use rmcp::{
    RoleServer,
    model::{LoggingLevel, LoggingMessageNotificationParam},
    service::RequestContext,
};
use serde_json::Value;

use super::{
    ask::is_stateless,
    fixtures::LOGGER,
    state::{Session, lock},
};

/// Severity rank, lowest first (`LoggingLevel` has no `Ord`).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The least severe level this request may be sent, `None` for no logs.
fn threshold(context: &RequestContext<RoleServer>, session: &Session) -> Option<LoggingLevel> {
    if let Some(level) = context.meta.log_level() {
        return Some(level);
    }
    if is_stateless(context) {
        return None;
    }
    // A legacy session that never set a level gets everything, as the
    // reference server does.
    Some(lock(&session.log_level).unwrap_or(LoggingLevel::Debug))
}

/// Sends one log message if the request's level lets it through. A closed
/// connection is not the tool's problem, so send errors are only traced.
pub(crate) async fn log(
    context: &RequestContext<RoleServer>,
    session: &Session,
    level: LoggingLevel,
    data: impl Into<Value>,
) {
    let Some(threshold) = threshold(context, session) else {
        return;
    };
    if rank(level) < rank(threshold) {
        return;
    }
    let message = LoggingMessageNotificationParam::new(level, data.into()).with_logger(LOGGER);
    if let Err(error) = context.peer.notify_logging_message(message).await {
        tracing::debug!(%error, "log notification not delivered");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_syslog_severity() {
        assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Info));
        assert!(rank(LoggingLevel::Warning) < rank(LoggingLevel::Error));
        assert!(rank(LoggingLevel::Alert) < rank(LoggingLevel::Emergency));
    }
}
