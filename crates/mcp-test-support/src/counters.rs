//! What reached the test server, counted so tests can assert on it.

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    io::Write as _,
    path::Path,
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use serde::{Deserialize, Serialize};

/// Request counters shared by the HTTP fault layer, the stdio pump and the
/// tool handler.
///
/// Two views are kept apart on purpose: `requests`/`tool_calls` count what
/// *reached* the server (including requests answered by an injected fault),
/// `completed` counts tool bodies that actually ran to the end. A test of
/// "never duplicate a side effect" needs the second, a test of retries the
/// first.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// JSON-RPC method → number of messages received with it.
    requests: Mutex<HashMap<String, u64>>,
    /// Tool name → `tools/call` requests received for it.
    tool_calls: Mutex<HashMap<String, u64>>,
    /// Tool name → calls whose tool body returned.
    completed: Mutex<HashMap<String, u64>>,
    /// `delete_item` id → times its body ran with that id, so a harness
    /// can tell exactly whether a non-idempotent call ran twice.
    deleted_ids: Mutex<HashMap<String, u64>>,
    /// Tool calls executing right now (inside the handler).
    in_flight: AtomicUsize,
    /// Highest `in_flight` seen since the last reset.
    peak: AtomicUsize,
    /// Optional append-only log, one line per received request, for tests
    /// that count from outside a child process.
    count_file: Option<Mutex<File>>,
}

impl Counters {
    /// Counters that also append every received request to `path`.
    pub(crate) fn with_count_file(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            count_file: Some(Mutex::new(file)),
            ..Self::default()
        })
    }

    /// Records one received JSON-RPC message (`tool` is set for `tools/call`,
    /// `traceparent` when its `_meta` has one).
    ///
    /// The count file gets `method`, or `tools/call:TOOL`, followed by
    /// ` traceparent=VALUE` when the call carried one.
    pub(crate) fn record_request(
        &self,
        method: &str,
        tool: Option<&str>,
        traceparent: Option<&str>,
    ) {
        bump(&self.requests, method);
        if let Some(tool) = tool {
            bump(&self.tool_calls, tool);
        }
        if let Some(file) = &self.count_file {
            let mut line = match tool {
                Some(tool) => format!("{method}:{tool}"),
                None => method.to_owned(),
            };
            if let Some(traceparent) = traceparent {
                line.push_str(" traceparent=");
                line.push_str(traceparent);
            }
            line.push('\n');
            // One write per line on an O_APPEND file: lines never interleave,
            // and a File has no user-space buffer to flush.
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(error) = file.write_all(line.as_bytes()) {
                tracing::warn!(%error, "cannot append to the count file");
            }
        }
    }

    /// Marks a tool call as executing until the guard is dropped (also when
    /// the call is cancelled and its future dropped).
    pub(crate) fn enter_call(&self) -> Counted<'_> {
        let (guard, now) = Counted::enter(&self.in_flight);
        self.peak.fetch_max(now, Ordering::SeqCst);
        guard
    }

    pub(crate) fn record_completed(&self, tool: &str) {
        bump(&self.completed, tool);
    }

    /// Records one execution of `delete_item` with this id.
    pub(crate) fn record_deleted_id(&self, id: &str) {
        bump(&self.deleted_ids, id);
    }

    pub(crate) fn requests(&self, method: &str) -> u64 {
        get(&self.requests, method)
    }

    pub(crate) fn tool_calls(&self, tool: &str) -> u64 {
        get(&self.tool_calls, tool)
    }

    pub(crate) fn completed_calls(&self, tool: &str) -> u64 {
        get(&self.completed, tool)
    }

    pub(crate) fn in_flight_peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Resets the peak to the number of calls executing right now.
    pub(crate) fn reset_peak(&self) {
        self.peak
            .store(self.in_flight.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    pub(crate) fn snapshot(&self) -> Counts {
        Counts {
            requests: sorted(&self.requests),
            tool_calls: sorted(&self.tool_calls),
            completed_calls: sorted(&self.completed),
            deleted_ids: sorted(&self.deleted_ids),
            in_flight: self.in_flight.load(Ordering::SeqCst),
            in_flight_peak: self.in_flight_peak(),
        }
    }
}

/// One counted in a gauge (tool calls in flight, calls held) until dropped,
/// also when the future holding it is dropped (a cancelled call).
#[derive(Debug)]
pub(crate) struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    /// Counts one in `gauge`; also returns the gauge's new value.
    pub(crate) fn enter(gauge: &'a AtomicUsize) -> (Self, usize) {
        let now = gauge.fetch_add(1, Ordering::SeqCst) + 1;
        (Counted(gauge), now)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A point-in-time copy of the counters, as served by `GET /_control/counts`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// JSON-RPC method → messages received (faulted ones included).
    pub requests: BTreeMap<String, u64>,
    /// Tool name → `tools/call` requests received (faulted ones included).
    pub tool_calls: BTreeMap<String, u64>,
    /// Tool name → calls whose tool body ran to the end.
    pub completed_calls: BTreeMap<String, u64>,
    /// `delete_item` id → times the tool's body ran with that id.
    #[serde(default)]
    pub deleted_ids: BTreeMap<String, u64>,
    /// Tool calls executing now.
    pub in_flight: usize,
    /// Most tool calls executing at once since the last reset.
    pub in_flight_peak: usize,
}

impl Counts {
    /// Messages received with this JSON-RPC method (0 when none).
    pub fn requests(&self, method: &str) -> u64 {
        self.requests.get(method).copied().unwrap_or(0)
    }

    /// `tools/call` requests received for this tool (0 when none).
    pub fn tool_calls(&self, tool: &str) -> u64 {
        self.tool_calls.get(tool).copied().unwrap_or(0)
    }

    /// Calls of this tool that ran to the end (0 when none).
    pub fn completed_calls(&self, tool: &str) -> u64 {
        self.completed_calls.get(tool).copied().unwrap_or(0)
    }
}

fn bump(map: &Mutex<HashMap<String, u64>>, key: &str) {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    match map.get_mut(key) {
        Some(count) => *count += 1,
        None => {
            map.insert(key.to_owned(), 1);
        }
    }
}

fn get(map: &Mutex<HashMap<String, u64>>, key: &str) -> u64 {
    let map = map.lock().unwrap_or_else(|e| e.into_inner());
    map.get(key).copied().unwrap_or(0)
}

fn sorted(map: &Mutex<HashMap<String, u64>>) -> BTreeMap<String, u64> {
    let map = map.lock().unwrap_or_else(|e| e.into_inner());
    map.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_tools_and_peak() {
        let counters = Counters::default();
        counters.record_request("tools/call", Some("echo"), None);
        counters.record_request("tools/call", Some("echo"), None);
        counters.record_request("tools/list", None, None);
        assert_eq!(counters.requests("tools/call"), 2);
        assert_eq!(counters.tool_calls("echo"), 2);
        assert_eq!(counters.tool_calls("add"), 0);

        let a = counters.enter_call();
        let b = counters.enter_call();
        drop(a);
        let _c = counters.enter_call();
        assert_eq!(counters.in_flight_peak(), 2);
        drop(b);
        counters.reset_peak();
        assert_eq!(counters.in_flight_peak(), 1);

        let snapshot = counters.snapshot();
        assert_eq!(snapshot.requests("tools/list"), 1);
        assert_eq!(snapshot.in_flight, 1);
    }

    #[test]
    fn count_file_gets_one_line_per_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("count");
        let counters = Counters::with_count_file(&path).unwrap();
        counters.record_request("initialize", None, None);
        counters.record_request("tools/call", Some("add"), None);
        let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        counters.record_request("tools/call", Some("echo"), Some(traceparent));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!("initialize\ntools/call:add\ntools/call:echo traceparent={traceparent}\n")
        );
    }
}
