//! Fuzz harnesses for mcp-supervisor: one module per target, each with a
//! `run(data: &[u8])` that must never panic for any input. A panic, on any
//! thread, is a bug; so is a broken invariant, which the harness turns into a
//! panic with a message saying which.
//!
//! Two drivers feed them: libFuzzer (`fuzz_targets/`, `cargo fuzz run`) and the
//! deterministic short run (`tests/short_run.rs`, `cargo test`). See
//! docs/TESTING.md, "Fuzzing".

use std::sync::{Mutex, Once};

pub mod classify;
pub mod codec;
pub mod config_parse;
pub mod gateway_http;
mod http1;
pub mod jsonrpc_parse;
pub mod mutate;
pub mod retry_after;
mod served;
pub mod standing;

/// A harness: runs one input, panics on a bug.
pub type Harness = fn(&[u8]);

/// Every target, by the name of its seed folder (`seeds/NAME`) and libFuzzer binary.
pub const TARGETS: [(&str, Harness); 7] = [
    ("config_parse", config_parse::run),
    ("retry_after", retry_after::run),
    ("classify", classify::run),
    ("jsonrpc_parse", jsonrpc_parse::run),
    ("gateway_http", gateway_http::run),
    ("standing", standing::run),
    ("codec", codec::run),
];

/// The harness function of target `name`.
pub fn target(name: &str) -> Option<Harness> {
    TARGETS
        .iter()
        .find(|(target, _)| *target == name)
        .map(|(_, run)| *run)
}

/// Every panic the process has seen: the thread's name and the message.
static PANICS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static WATCH: Once = Once::new();

/// Records every panic in the process, on any thread (a tokio task's panic is
/// caught by tokio and would otherwise go unnoticed), then runs the previous
/// hook (libFuzzer's aborts the process, which is how it sees a crash).
pub fn watch_panics() {
    WATCH.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current()
                .name()
                .unwrap_or("<unnamed>")
                .to_owned();
            if let Ok(mut panics) = PANICS.lock() {
                panics.push((thread, info.to_string()));
            }
            previous(info);
        }));
    });
}

/// How many panics the process has seen on threads not named in `ignored`,
/// and the last one (`thread 'NAME': MESSAGE`). The short run runs every
/// target in one process, each on a test thread named after it: a target
/// that watches the whole process ignores the others' threads.
pub fn panics_seen(ignored: &[&str]) -> (usize, String) {
    let Ok(panics) = PANICS.lock() else {
        return (0, String::new());
    };
    let counted: Vec<&(String, String)> = panics
        .iter()
        .filter(|(thread, _)| !ignored.contains(&thread.as_str()))
        .collect();
    let last = counted
        .last()
        .map(|(thread, message)| format!("thread '{thread}': {message}"))
        .unwrap_or_default();
    (counted.len(), last)
}
