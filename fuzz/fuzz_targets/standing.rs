//! libFuzzer target; the harness and its invariants are in `src/standing.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_supervisor_fuzz::standing::run(data));
