//! The hand-written JSON steps beside their serde twins, for the fuzz
//! target `codec` (feature `twins`; never in the shipped binary). Each
//! function answers what both readings make of the same input, and the
//! target holds them to one answer (docs/TESTING.md, "Fuzzing").

use crate::codec::json_check::{self, Unreadable};

/// The verdicts on `bytes` as a call's arguments: the one-pass check that
/// runs, then its twin composed of serde's readings.
pub fn arguments(bytes: &[u8]) -> (Result<(), &'static str>, Result<(), &'static str>) {
    let name = |verdict: Result<(), Unreadable>| verdict.map_err(Unreadable::as_str);
    (
        name(json_check::check(bytes)),
        name(json_check::by_serde(bytes)),
    )
}

/// A posted `tools/call` read by hand, when the hand reading answers, and
/// read fully by serde, each as `Debug` text.
pub fn posted_call(body: &[u8]) -> Option<(String, String)> {
    crate::codec::posted::twins(body)
}

/// An upstream's tool answer read by hand, when the hand reading answers,
/// and read by serde (`None`: serde does not read it as one), each as
/// `Debug` text.
pub fn tool_answer(data: &str) -> Option<(String, Option<String>)> {
    crate::codec::answers::twins(data)
}
