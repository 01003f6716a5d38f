//! A posted plain `tools/call` read in one hand-written pass
//! (docs/DECISIONS.md #140, #179).
//!
//! serde's derived reading of a posted call ([`Posted::read_fully`]) costs
//! about as much as a fifth of the rest of the gateway's own work on a call:
//! each key goes through a field visitor, each value through its
//! deserializer, and the arguments are copied twice. Here the call a client
//! usually sends is read by a scanner that knows its one shape, and answers
//! only when it is sure: keys and strings of plain ASCII (no escapes), an
//! integer or string id, each key once, nothing but `jsonrpc`, `id`,
//! `method` and `params` (`name`, `arguments`, `_meta` with a progress
//! token and trace context, and for a 2026-07-28 call its client's context:
//! see [`stateless`]). Anything else — another method, an escape,
//! a float id, a `null`, an unknown key, a key twice, a malformed body — is
//! not answered here (`None`) and goes to the full reading, which decides
//! it as before. The arguments are checked by serde_json (they must be one
//! JSON object) and kept as sent.
//!
//! The tests hold the two readings to the same answer on every body the
//! scanner answers, including thousands of mutations of real calls.

use rmcp::model::{ClientCapabilities, LoggingLevel, ProgressToken, ProtocolVersion, RequestId};
use serde::{Deserialize, de::IntoDeserializer};
use serde_json::value::RawValue;

use super::{
    ClientContext, Others, Posted, PostedCall, ProgressOnly, StatelessCall, object_or_none,
};
use crate::codec::json_scan::{self, Scan};

/// `body` as a 2025 session's plain call, when it plainly is one; `None`
/// when the full reading must decide.
pub(super) fn call(body: &[u8]) -> Option<Posted> {
    let (id, (name, arguments, meta)) = envelope(body, progress_only)?;
    // An empty `_meta` is rmcp's (see `Posted::read_fully`).
    let meta = match meta {
        Some((meta, others)) if meta.known() || others => Some(meta),
        Some(_) => return None,
        None => None,
    };
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

/// `body` as a 2026-07-28 client's plain call, when it plainly is one;
/// `None` when the full reading must decide. Its `_meta` is read for what
/// the gateway acts on: the protocol version, the client's capabilities
/// (read by serde from their text, or none at all when they are `{}`), a
/// log level, a progress token and trace context; the client's info is
/// passed over.
pub(super) fn stateless(body: &[u8]) -> Option<StatelessCall> {
    let (id, (name, arguments, context)) = envelope(body, client_context)?;
    StatelessCall::of(id, name.to_owned(), arguments, context?)
}

/// A `tools/call` request's id and params, its `_meta` read by `meta`.
fn envelope<'a, M>(
    body: &'a [u8],
    meta: impl Fn(&mut Scan<'a>) -> Option<M>,
) -> Option<(RequestId, Params<'a, M>)> {
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
            params = Some(call_params(scan, &meta)?);
            Some(())
        }
        _ => None,
    })?;
    scan.end()?;
    let (Some(id), true, true, Some(params)) = (id, jsonrpc_seen, method_seen, params) else {
        return None;
    };
    Some((id, params))
}

/// The call's params: its name, its arguments as sent, its `_meta`.
type Params<'a, M> = (&'a str, Option<Box<RawValue>>, Option<M>);

/// A `tools/call`'s params with nothing but a name, arguments (an object,
/// checked and kept as sent) and a `_meta` (read by `meta`).
fn call_params<'a, M>(
    scan: &mut Scan<'a>,
    meta: &impl Fn(&mut Scan<'a>) -> Option<M>,
) -> Option<Params<'a, M>> {
    let mut name = None;
    let mut arguments = None;
    let mut read_meta = None;
    scan.object(|scan, key| {
        match key {
            b"name" if name.is_none() => name = Some(scan.plain_str()?),
            b"arguments" if arguments.is_none() => arguments = Some(scan.raw_object()?),
            b"_meta" if read_meta.is_none() => read_meta = Some(meta(scan)?),
            _ => return None,
        }
        Some(())
    })?;
    Some((name?, arguments, read_meta))
}

/// A `_meta` of the client's context (SEP-2575: protocol version 2026-07-28
/// and capabilities, optionally its info and a log level), a progress token
/// and trace context, each once.
fn client_context(scan: &mut Scan<'_>) -> Option<ClientContext> {
    let (mut version, mut capabilities, mut info, mut log_level) = (false, None, false, None);
    let mut token = None;
    let mut trace: [Option<String>; 3] = [None, None, None];
    scan.object(|scan, key| {
        match key {
            b"io.modelcontextprotocol/protocolVersion" => {
                scan.literal_once(
                    &mut version,
                    ProtocolVersion::V_2026_07_28.as_str().as_bytes(),
                )?;
            }
            b"io.modelcontextprotocol/clientCapabilities" if capabilities.is_none() => {
                // `{}` (rmcp's client declares nothing) is read in place.
                capabilities = Some(if scan.empty_object() {
                    ClientCapabilities::default()
                } else {
                    serde_json::from_str(scan.object_text()?.get()).ok()?
                });
            }
            // Its usual shape, an object of plain strings, is passed over
            // here; any other is the full reading's.
            b"io.modelcontextprotocol/clientInfo" if !info => {
                scan.object(|scan, key| {
                    json_scan::plain(key)?;
                    scan.plain_str().map(drop)
                })?;
                info = true;
            }
            b"io.modelcontextprotocol/logLevel" if log_level.is_none() => {
                let level: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
                    scan.plain_str()?.into_deserializer();
                log_level = Some(LoggingLevel::deserialize(level).ok()?);
            }
            b"progressToken" if token.is_none() => token = Some(ProgressToken(scan.id()?)),
            // Twice (a reserved key twice is the full reading's too).
            b"progressToken" => return None,
            b"traceparent" | b"tracestate" | b"baggage" => {
                let slot = match key {
                    b"traceparent" => &mut trace[0],
                    b"tracestate" => &mut trace[1],
                    _ => &mut trace[2],
                };
                if slot.is_some() {
                    return None;
                }
                *slot = Some(scan.plain_str()?.to_owned());
            }
            other => pass_over(scan, other)?,
        }
        Some(())
    })?;
    let [traceparent, tracestate, baggage] = trace;
    version.then_some(ClientContext {
        protocol_version: ProtocolVersion::V_2026_07_28,
        capabilities: capabilities?,
        _client_info: None,
        log_level,
        progress_token: token,
        traceparent,
        tracestate,
        baggage,
        others: Others::default(),
    })
}

/// A `_meta` of a progress token and trace context, and whether it has
/// others' keys (passed over, see [`pass_over`]).
fn progress_only(scan: &mut Scan<'_>) -> Option<(ProgressOnly, bool)> {
    let mut meta = ProgressOnly {
        progress_token: None,
        traceparent: None,
        tracestate: None,
        baggage: None,
        others: Default::default(),
    };
    let mut others = false;
    scan.object(|scan, key| {
        let (slot, value) = match key {
            b"progressToken" if meta.progress_token.is_none() => {
                meta.progress_token = Some(ProgressToken(scan.id()?));
                return Some(());
            }
            b"progressToken" => return None,
            b"traceparent" => (&mut meta.traceparent, scan.plain_str()?),
            b"tracestate" => (&mut meta.tracestate, scan.plain_str()?),
            b"baggage" => (&mut meta.baggage, scan.plain_str()?),
            other => {
                pass_over(scan, other)?;
                others = true;
                return Some(());
            }
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(value.to_owned());
        Some(())
    })?;
    Some((meta, others))
}

/// Passes over another's `_meta` key (`key`) and its value, checked as
/// JSON every reader reads alike (`json_check::value`: the full reading
/// decodes every string of it, and refuses half a surrogate pair); `None`
/// (the full reading's to decide) for a key with an escape, one in a
/// namespace MCP reserves, or a value the check does not admit.
fn pass_over(scan: &mut Scan<'_>, key: &[u8]) -> Option<()> {
    if super::reserved(json_scan::plain(key)?) {
        return None;
    }
    crate::codec::json_check::value(scan.value_text()?.get()).ok()
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

    const TRACED: &str = r#" { "id" : "c-1" , "jsonrpc":"2.0","params":{"_meta":{"vendor":[1,{"a":null}],"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"k=v","baggage":"a=b","progressToken":"p"},"arguments":{},"name":"t"},"method":"tools/call"}
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

    /// What the full reading makes of `body` as a 2026-07-28 call.
    fn fully_stateless(body: &[u8]) -> String {
        format!("{:?}", StatelessCall::read_fully(body))
    }

    /// `body` read here as a 2026-07-28 call: `None` when left to the full
    /// reading, else the full reading's answer, which it must be.
    fn agreed_stateless(body: &[u8]) -> Option<String> {
        let quick = format!("{:?}", Some(stateless(body)?));
        assert_eq!(
            quick,
            fully_stateless(body),
            "the readings differ on {:?}",
            String::from_utf8_lossy(body)
        );
        Some(quick)
    }

    /// A 2026-07-28 call as rmcp's client writes it: its client's context
    /// in `_meta`, and a progress token.
    fn rmcps_stateless(id: i64, capabilities: ClientCapabilities) -> Vec<u8> {
        use rmcp::model::{Implementation, RequestMetaObject};
        let mut params = CallToolRequestParams::new("a__echo");
        params.arguments = Some(
            serde_json::json!({"text": "héllo", "n": [1, {"z": null}]})
                .as_object()
                .unwrap()
                .clone(),
        );
        let mut meta = RequestMetaObject::with_client_context(
            ProtocolVersion::V_2026_07_28,
            Implementation::new("bench-client", "1.0.0"),
            capabilities,
        );
        meta.set_progress_token(ProgressToken(NumberOrString::Number(id)));
        let mut request = CallToolRequest::new(params);
        request.params.meta = Some(meta);
        let message = ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(request),
            RequestId::Number(id),
        );
        serde_json::to_vec(&message).unwrap()
    }

    const STATELESS: &str = r#"{"method":"tools/call","params":{"_meta":{"example.com/note":{"a":[1,"b"]},"io.modelcontextprotocol/logLevel":"warning","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{"form":{}},"roots":{"listChanged":true},"experimental":{"x":{"y":1}}},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"p-1","tracestate":"k=v"},"name":"t"},"id":"s","jsonrpc":"2.0"}"#;

    /// The 2026-07-28 calls a client usually sends are read here, as fully,
    /// with the context the gateway acts on.
    #[test]
    fn a_usual_2026_call_is_read_here_as_fully() {
        let elicits = ClientCapabilities::builder().enable_elicitation().build();
        // What the Python SDK 2.x (`mcp` 2.3, `Client(url)`) posts.
        let python = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"mcp","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true}},"progressToken":2}}}"#;
        for body in [
            rmcps_stateless(7, ClientCapabilities::default()),
            rmcps_stateless(8, elicits),
            STATELESS.as_bytes().to_vec(),
            python.to_vec(),
        ] {
            assert!(
                agreed_stateless(&body).is_some(),
                "{:?} was not read here",
                String::from_utf8_lossy(&body)
            );
        }
        let call = stateless(STATELESS.as_bytes()).unwrap();
        assert!(call.capabilities.sampling.is_some());
        assert!(call.capabilities.roots.is_some());
        assert_eq!(call.log_level, Some(LoggingLevel::Warning));
        assert_eq!(call.call.trace.tracestate.as_deref(), Some("k=v"));
        assert_eq!(
            call.call.progress,
            Some(ProgressToken(NumberOrString::String("p-1".into())))
        );
    }

    /// What is not plainly a 2026-07-28 call is left to the full reading
    /// (which refuses most of these too).
    #[test]
    fn anything_unusual_in_a_2026_call_is_left_to_the_full_reading() {
        let context = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}"#;
        for meta in [
            // Half the context, another version, an escape in it.
            r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#.to_owned(),
            context.replace("2026-07-28", "2025-11-25"),
            context.replace("2026-07-28", r"2026\u002d07-28"),
            // A reserved key the gateway does not read, a key twice, a null
            // where a value is read.
            format!(r#"{context},"io.modelcontextprotocol/x":1"#),
            format!(r#"{context},"example.com/x":1,"dev.mcp/y":1"#),
            format!(
                r#"{context},"io.modelcontextprotocol/logLevel":"info","io.modelcontextprotocol/logLevel":"info""#
            ),
            format!(r#"{context},"progressToken":1,"progressToken":2"#),
            format!(r#"{context},"io.modelcontextprotocol/logLevel":null"#),
            format!(r#"{context},"io.modelcontextprotocol/logLevel":"loud""#),
            format!(r#"{context},"traceparent":null"#),
            context.replace("{}", "null"),
            context.replace("{}", r#"{"sampling":1}"#),
            // Another's value whose text no full reading reads (half a
            // surrogate pair in a key of it, found by the fuzzer; a number
            // beyond a double), or reads in a way others do not.
            format!(r#"{context},"_meta":{{"p\ud800":":"}}"#),
            format!(r#"{context},"example.com/x":["\udc00"]"#),
            format!(r#"{context},"example.com/x":1e400"#),
            format!(r#"{context},"example.com/x":{{"a":1,"a":2}}"#),
            // Nested deep enough that serde's limit, counted from the body,
            // may refuse it.
            context.replace(
                "{}",
                &format!(
                    r#"{{"experimental":{{"x":{{"y":{}1{}}}}}}}"#,
                    "[".repeat(124),
                    "]".repeat(124)
                ),
            ),
        ] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","_meta":{{{meta}}}}}}}"#
            );
            assert!(stateless(body.as_bytes()).is_none(), "{body}");
        }
        // A 2025 session's call is no 2026-07-28 call.
        assert!(stateless(&rmcps(1, Some(1))).is_none());
    }

    /// Every single-byte change to real 2026-07-28 calls is either left to
    /// the full reading or read here as fully.
    #[test]
    fn mutated_2026_calls_are_read_as_fully_or_not_at_all() {
        let mut read_here = 0;
        for body in [
            rmcps_stateless(12, ClientCapabilities::default()),
            STATELESS.as_bytes().to_vec(),
        ] {
            for variant in crate::codec::json_scan::mutations(&body) {
                read_here += usize::from(agreed_stateless(&variant).is_some());
            }
        }
        assert!(read_here > 100, "{read_here}");
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
