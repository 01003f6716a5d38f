//! libFuzzer target; the harness and its invariants are in `src/codec.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_supervisor_fuzz::codec::run(data));
