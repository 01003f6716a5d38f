//! libFuzzer target; the harness and its invariants are in `src/retry_after.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_supervisor_fuzz::retry_after::run(data));
