//! The audit log (`[gateway] audit_log`): one JSON line per access
//! decision of a use (a call, a prompt got, a resource read or subscribed,
//! a completion), allowed or denied, with what came of it
//! (docs/SECURITY.md, "The audit log").
//!
//! A record holds who, what, which rule, the decision, the outcome's kind,
//! the latency and the trace id; never arguments, results or credentials.
//! A file is appended to and reopened on SIGHUP, so a log rotator can move
//! it away; a record that cannot be written is counted in a warning, and
//! the call it records goes on.

use std::{
    fs::{File, OpenOptions},
    io::{self, Write},
    path::PathBuf,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime},
};

use serde::Serialize;

use crate::{
    access::{Caller, Decision},
    config::AuditLog,
};

/// What one record says.
#[derive(Debug, Serialize)]
pub(super) struct Record<'a> {
    pub(super) time: String,
    pub(super) via: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) user: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) client: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub(super) groups: &'a [String],
    pub(super) method: &'a str,
    /// The exposed name or URI the caller asked for.
    pub(super) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) connection: Option<String>,
    /// `access[N]`, the rule that decided; absent when none did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) rule: Option<String>,
    pub(super) decision: &'static str,
    pub(super) outcome: &'a str,
    pub(super) latency_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) trace_id: Option<String>,
    /// The called tool's contract hash, as listed (docs/CONTRACTS.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) contract: Option<std::sync::Arc<str>>,
}

impl<'a> Record<'a> {
    /// A record of `caller`'s `method` on `name`, decided by `decision`.
    pub(super) fn new(
        caller: &'a Caller,
        method: &'a str,
        name: &str,
        connection: Option<&str>,
        decision: Decision,
    ) -> Self {
        Record {
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            via: caller.via.as_str(),
            user: caller.user.as_deref(),
            client: caller.client.as_deref(),
            groups: &caller.groups,
            method,
            name: name.to_owned(),
            connection: connection.map(str::to_owned),
            rule: decision.rule.map(|rule| format!("access[{rule}]")),
            decision: if decision.allowed { "allow" } else { "deny" },
            outcome: if decision.allowed { "" } else { "denied" },
            latency_ms: 0.0,
            trace_id: crate::telemetry::TraceParent::attached().trace_id(),
            contract: None,
        }
    }

    /// With what came of the use, `took` after it was decided.
    pub(super) fn ended(mut self, outcome: &'a str, took: Duration) -> Self {
        self.outcome = outcome;
        self.latency_ms = took.as_secs_f64() * 1000.0;
        self
    }
}

/// Where records go; nowhere when no `audit_log` is configured.
#[derive(Debug, Clone, Default)]
pub(super) struct Audit {
    sink: Option<Arc<Sink>>,
}

#[derive(Debug)]
enum Sink {
    Stdout,
    File {
        path: PathBuf,
        file: Mutex<File>,
        /// A SIGHUP came: reopen before the next record.
        reopen: AtomicBool,
    },
}

impl Audit {
    /// The audit log `log` names, opened (a file is created if missing,
    /// appended to otherwise); with a file, reopened on each SIGHUP.
    pub(super) fn open(log: Option<&AuditLog>) -> io::Result<Self> {
        let sink = match log {
            None => return Ok(Audit::default()),
            Some(AuditLog::Stdout) => Arc::new(Sink::Stdout),
            Some(AuditLog::File(path)) => {
                let sink = Arc::new(Sink::File {
                    file: Mutex::new(append(path)?),
                    path: path.clone(),
                    reopen: AtomicBool::new(false),
                });
                reopen_on_hangup(Arc::downgrade(&sink));
                sink
            }
        };
        Ok(Audit { sink: Some(sink) })
    }

    pub(super) fn is_on(&self) -> bool {
        self.sink.is_some()
    }

    /// Writes `record` as one line.
    pub(super) fn write(&self, record: &Record<'_>) {
        let Some(sink) = &self.sink else { return };
        let mut line = serde_json::to_vec(record).expect("a record serializes");
        line.push(b'\n');
        let written = match &**sink {
            Sink::Stdout => io::stdout().lock().write_all(&line),
            Sink::File { path, file, reopen } => {
                let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
                if reopen.swap(false, Ordering::Relaxed) {
                    match append(path) {
                        Ok(reopened) => *file = reopened,
                        Err(error) => {
                            tracing::warn!(path = %path.display(), %error, "the audit log could not be reopened; writing on to the old file")
                        }
                    }
                }
                file.write_all(&line)
            }
        };
        if let Err(error) = written {
            tracing::warn!(%error, "an audit record could not be written");
        }
    }
}

fn append(path: &PathBuf) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Marks `sink` for reopening on each SIGHUP, while it lives.
fn reopen_on_hangup(sink: std::sync::Weak<Sink>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("SIGHUP cannot be listened for: the audit log is never reopened");
            return;
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let Some(sink) = sink.upgrade() else { return };
                if let Sink::File { reopen, .. } = &*sink {
                    reopen.store(true, Ordering::Relaxed);
                }
            }
        });
    }
}
