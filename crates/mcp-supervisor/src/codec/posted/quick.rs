//! A posted plain `tools/call` read in one hand-written pass
//! (docs/DECISIONS.md #140).
//!
//! serde's derived reading of a posted call ([`Posted::read_fully`]) costs
//! about as much as a fifth of the rest of the gateway's own work on a call:
//! each key goes through a field visitor, each value through its
//! deserializer, and the arguments are copied twice. Here the call a client
//! usually sends is read by a scanner that knows its one shape, and answers
//! only when it is sure: keys and strings of plain ASCII (no escapes), an
//! integer or string id, each key once, nothing but `jsonrpc`, `id`,
//! `method` and `params` (`name`, `arguments`, `_meta` with a progress
//! token and trace context). Anything else — another method, an escape,
//! a float id, a `null`, an unknown key, a key twice, a malformed body — is
//! not answered here (`None`) and goes to the full reading, which decides
//! it as before. The arguments are checked by serde_json (they must be one
//! JSON object) and kept as sent.
//!
//! The tests hold the two readings to the same answer on every body the
//! scanner answers, including thousands of mutations of real calls.

use rmcp::model::ProgressToken;
use serde_json::value::RawValue;

use super::{Posted, PostedCall, ProgressOnly, object_or_none};
use crate::codec::json_scan::Scan;

/// `body` as a plain call, when it plainly is one; `None` when the full
/// reading must decide.
pub(super) fn call(body: &[u8]) -> Option<Posted> {
    let mut scan = Scan::new(body);
    let mut id = None;
    let mut method_seen = false;
    let mut params = None;
    let mut jsonrpc_seen = false;
    scan.object(|scan, key| match key {
        b"jsonrpc" => scan.literal_once(&mut jsonrpc_seen, b"2.0"),
        b"id" if id.is_none() => {
            id = Some(scan.id()?);
            Some(())
        }
        b"method" => scan.literal_once(&mut method_seen, b"tools/call"),
        b"params" if params.is_none() => {
            params = Some(call_params(scan)?);
            Some(())
        }
        _ => None,
    })?;
    scan.end()?;
    let (Some(id), true, true, Some((name, arguments, meta))) =
        (id, jsonrpc_seen, method_seen, params)
    else {
        return None;
    };
    // An empty `_meta` is rmcp's (see `Posted::read_fully`).
    if meta.as_ref().is_some_and(|meta| !meta.says_something()) {
        return None;
    }
    let arguments = object_or_none(arguments)?;
    let (progress, trace) = ProgressOnly::split(meta);
    Some(Posted::Call(PostedCall {
        id,
        name: name.to_owned(),
        arguments,
        progress,
        trace,
    }))
}

/// The call's params: its name, its arguments as sent, its `_meta`.
type Params<'a> = (&'a str, Option<Box<RawValue>>, Option<ProgressOnly>);

/// A `tools/call`'s params with nothing but a name, arguments (an object,
/// checked and kept as sent) and a `_meta`.
fn call_params<'a>(scan: &mut Scan<'a>) -> Option<Params<'a>> {
    let mut name = None;
    let mut arguments = None;
    let mut meta = None;
    scan.object(|scan, key| {
        match key {
            b"name" if name.is_none() => name = Some(scan.plain_str()?),
            b"arguments" if arguments.is_none() => arguments = Some(scan.raw_object()?),
            b"_meta" if meta.is_none() => meta = Some(progress_only(scan)?),
            _ => return None,
        }
        Some(())
    })?;
    Some((name?, arguments, meta))
}

/// A `_meta` of a progress token and trace context.
fn progress_only(scan: &mut Scan<'_>) -> Option<ProgressOnly> {
    let mut meta = ProgressOnly {
        progress_token: None,
        traceparent: None,
        tracestate: None,
        baggage: None,
    };
    scan.object(|scan, key| {
        let (slot, value) = match key {
            b"progressToken" if meta.progress_token.is_none() => {
                meta.progress_token = Some(ProgressToken(scan.id()?));
                return Some(());
            }
            b"traceparent" => (&mut meta.traceparent, scan.plain_str()?),
            b"tracestate" => (&mut meta.tracestate, scan.plain_str()?),
            b"baggage" => (&mut meta.baggage, scan.plain_str()?),
            _ => return None,
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(value.to_owned());
        Some(())
    })?;
    Some(meta)
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest,
        NumberOrString, RequestId,
    };

    use super::*;

    /// What the full reading makes of `body`.
    fn fully(body: &[u8]) -> String {
        format!("{:?}", Posted::read_fully(body))
    }

    /// `body` read here: `None` when left to the full reading, else the
    /// full reading's answer, which it must be.
    fn agreed(body: &[u8]) -> Option<String> {
        let quick = format!("{:?}", call(body)?);
        assert_eq!(
            quick,
            fully(body),
            "the readings differ on {:?}",
            String::from_utf8_lossy(body)
        );
        Some(quick)
    }

    /// A call as rmcp's client writes it.
    fn rmcps(id: i64, token: Option<i64>) -> Vec<u8> {
        let mut params = CallToolRequestParams::new("a__echo");
        params.arguments = Some(
            serde_json::json!({"text": "héllo \"q\"", "n": [1, 2.5, {"z": null}]})
                .as_object()
                .unwrap()
                .clone(),
        );
        let mut request = CallToolRequest::new(params);
        if let Some(token) = token {
            request
                .params
                .meta
                .get_or_insert_default()
                .set_progress_token(ProgressToken(NumberOrString::Number(token)));
        }
        let message = ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(request),
            RequestId::Number(id),
        );
        serde_json::to_vec(&message).unwrap()
    }

    const TRACED: &str = r#" { "id" : "c-1" , "jsonrpc":"2.0","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"k=v","baggage":"a=b","progressToken":"p"},"arguments":{},"name":"t"},"method":"tools/call"}
"#;

    /// The bodies a client usually sends are read here, as fully.
    #[test]
    fn a_usual_call_is_read_here_as_fully() {
        for body in [
            rmcps(7, Some(7)),
            rmcps(-9_223_372_036_854_775_808, None),
            TRACED.as_bytes().to_vec(),
            br#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"x"}}"#.to_vec(),
        ] {
            let read = agreed(&body);
            assert!(
                read.as_deref()
                    .is_some_and(|read| read.starts_with("Call(")),
                "{:?} was not read here",
                String::from_utf8_lossy(&body)
            );
        }
    }

    /// What is not plainly a call is left to the full reading.
    #[test]
    fn anything_unusual_is_left_to_the_full_reading() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ü"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}} x"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}]"#,
        ] {
            assert_eq!(call(body.as_bytes()).map(|_| ()), None, "{body}");
        }
    }

    /// Every single-byte change to real calls (a byte dropped, doubled, or
    /// replaced by one of JSON's meaningful bytes) is either left to the
    /// full reading or read here as fully.
    #[test]
    fn mutated_calls_are_read_as_fully_or_not_at_all() {
        let mut read_here = 0;
        let mut mutants = 0;
        for body in [rmcps(12, Some(3)), TRACED.as_bytes().to_vec()] {
            for variant in crate::codec::json_scan::mutations(&body) {
                mutants += 1;
                read_here += usize::from(agreed(&variant).is_some());
            }
        }
        // Some mutants are still plain calls (a digit of the id changed,
        // whitespace, a letter of an argument) and are read here.
        assert!(read_here > 100, "{read_here} of {mutants}");
    }
}
