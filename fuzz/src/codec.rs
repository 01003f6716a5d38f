//! Every hand-written JSON step beside its serde twin, on any bytes: the
//! one-pass check of a call's arguments (`json_check`), the posted call's
//! hand reading (`codec/posted/quick.rs`), the upstream tool answer's
//! (`plain_tool_answer`), the client answer's hand writing
//! (`codec/reply.rs`) and the upstream call's (`codec/request.rs`). A fast step that answers differently from its
//! twin is a bug, not a speed-up (docs/TESTING.md, "Fuzzing").
//!
//! The input is tried as it is, as the arguments of a posted call (so
//! what the fuzzer writes reaches the scanner's argument reading and the
//! door's check of it in one body), and as the client capabilities of a
//! 2026-07-28 call.
//!
//! Invariants:
//! - the arguments check admits exactly what its serde twin admits;
//! - a posted call the hand reading answers is read so by serde too;
//! - an upstream's answer the hand reading answers is read so by serde too;
//! - an answer the hand writes is written byte for byte as serde writes it;
//! - an upstream's tool answer passed on by hand, its structured content as
//!   the upstream wrote it, means what serde's reading and writing make of
//!   it (the input as the answer, and as its structured content);
//! - an event stream, whole or in small chunks, gives the same items read by
//!   hand (`http/events.rs`) as `sse_stream` gives;
//! - a call to an upstream, its arguments raw or parsed, means what rmcp
//!   writes for it.

use mcp_supervisor::twins;

pub fn run(data: &[u8]) {
    let (hand, serde) = twins::arguments(data);
    assert_eq!(
        hand.is_ok(),
        serde.is_ok(),
        "the arguments check says {hand:?}, its serde twin {serde:?}: {:?}",
        String::from_utf8_lossy(data)
    );
    let wrapped = [
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":"#
            .as_slice(),
        data,
        br#","_meta":{"progressToken":1}}}"#.as_slice(),
    ]
    .concat();
    let stateless = [
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"#
            .as_slice(),
        data,
        br#","io.modelcontextprotocol/clientInfo":{"name":"f","version":"1"}}}}"#.as_slice(),
    ]
    .concat();
    for body in [data, wrapped.as_slice(), stateless.as_slice()] {
        for (quick, full) in twins::posted_call(body) {
            assert_eq!(
                quick,
                full,
                "the posted call's readings differ on {:?}",
                String::from_utf8_lossy(body)
            );
        }
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Some((plain, serde)) = twins::tool_answer(text)
    {
        assert_eq!(
            Some(&plain),
            serde.as_ref(),
            "the tool answer's readings differ on {text:?}"
        );
    }
    for (hand, theirs) in twins::event_stream(data) {
        assert_eq!(
            hand,
            theirs,
            "the event stream's readings differ on {:?}",
            String::from_utf8_lossy(data)
        );
    }
    for (hand, serde) in twins::passed_answer(data) {
        assert_eq!(
            hand,
            serde,
            "the answer passed on differs on {:?}",
            String::from_utf8_lossy(data)
        );
    }
    if let Some((hand, serde)) = twins::reply(data) {
        assert_eq!(
            String::from_utf8_lossy(&hand),
            String::from_utf8_lossy(&serde),
            "the answer's writings differ on {:?}",
            String::from_utf8_lossy(data)
        );
    }
    for (hand, rmcp) in twins::upstream_call(data).into_iter().flatten() {
        assert_eq!(
            hand,
            rmcp,
            "the upstream call's writings differ on {:?}",
            String::from_utf8_lossy(data)
        );
    }
}
