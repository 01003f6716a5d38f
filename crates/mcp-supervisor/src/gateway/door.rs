//! The door: a client's `tools/call` whose arguments not every later reader
//! reads alike is answered `-32602` (invalid params) here, before rmcp's
//! server or anything of the supervisor sees it (`crate::codec::json_check`;
//! docs/RELIABILITY.md, "No client can hurt what others share").
//!
//! rmcp's server parses what the gateway hands it with serde, which keeps
//! the last of a key given twice and nests up to 128 levels; the upstream
//! may read the same request otherwise, and an upstream's refusal would be
//! taken for its failure. So every way in checks a call's arguments first:
//! the direct path as it reads the call (`direct.rs`, which leaves a call
//! it cannot admit to the door), the HTTP endpoint before rmcp's server
//! ([`refusal`]), and the stdio transport on each line (`stdio.rs`). The
//! caller gets the error; no connection's standing moves.

use std::borrow::Cow;

use rmcp::model::{ErrorData, RequestId, ServerJsonRpcMessage};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::codec::json_check::{self, Unreadable};

/// The part of a message the door reads: a request's method and id, and a
/// call's arguments as they were sent.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(default, deserialize_with = "crate::ids::optional_id")]
    id: Option<RequestId>,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// Whether `message` (one JSON-RPC message, as sent) is a `tools/call`
/// whose arguments are refused, and why, with the request's id. Anything
/// else (another method, a message that does not parse: rmcp answers it)
/// passes.
pub(super) fn refused(message: &[u8]) -> Option<(RequestId, Unreadable)> {
    let envelope: Envelope<'_> = serde_json::from_slice(message).ok()?;
    if envelope.method != "tools/call" {
        return None;
    }
    let why = json_check::arguments(envelope.params?.arguments?.get()).err()?;
    Some((envelope.id?, why))
}

/// The answer to a refused call: `-32602`, saying why.
pub(super) fn refusal((id, why): (RequestId, Unreadable)) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(ErrorData::invalid_params(why.to_string(), None), Some(id))
}

/// [`refused`], then [`refusal`].
pub(super) fn answer(message: &[u8]) -> Option<ServerJsonRpcMessage> {
    refused(message).map(refusal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(arguments: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{{"name":"t","arguments":{arguments},"_meta":{{"progressToken":1}}}}}}"#
        )
    }

    #[test]
    fn a_call_with_unreadable_arguments_is_refused_with_its_id() {
        for (arguments, why) in [
            (r#"{"a":"\ud800"}"#, Unreadable::LoneSurrogate),
            (r#"{"a":1,"a":2}"#, Unreadable::DuplicateKey),
            (r#"{"a":1e400}"#, Unreadable::NumberOutOfRange),
            (r#"[1]"#, Unreadable::NotAnObject),
        ] {
            assert_eq!(
                refused(call(arguments).as_bytes()),
                Some((RequestId::String("r1".into()), why)),
                "{arguments}"
            );
        }
        let ServerJsonRpcMessage::Error(error) =
            refusal((RequestId::Number(3), Unreadable::TooDeep))
        else {
            panic!("an error")
        };
        assert_eq!(error.error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert_eq!(error.id, Some(RequestId::Number(3)));
        assert!(error.error.message.contains("deeper than 64"));
    }

    #[test]
    fn everything_else_passes() {
        for message in [
            call(r#"{"a":"\ud83d\ude00","b":[1,2.5]}"#),
            call("null"),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"t","arguments":{"a":1,"a":2}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            "not json".to_owned(),
        ] {
            assert_eq!(refused(message.as_bytes()), None, "{message}");
        }
    }
}
