//! A posted message read, as far as the gateway's direct path cares: a
//! plain `tools/call` of a 2025 session, a 2026-07-28 client's plain call
//! with its context in `_meta`, or a cancellation (docs/DECISIONS.md #78,
//! #81, #140, #179). The usual call of either generation is read by hand
//! ([`quick`]); its twin, serde's derived reading ([`Posted::read_fully`],
//! [`StatelessCall::read_fully`]), reads everything else and is what the
//! hand reading is held to. A call's arguments are kept as sent,
//! checked ([`Checked`]), never parsed.

// Logging is deprecated by SEP-2577 (protocol 2026-07-28), yet a 2026-07-28
// request may still ask for log messages at a level.
#![allow(deprecated)]

mod quick;

use std::borrow::Cow;

use rmcp::model::{ClientCapabilities, LoggingLevel, ProgressToken, ProtocolVersion, RequestId};
use serde::{Deserialize, de::IgnoredAny};
use serde_json::value::RawValue;

use super::json_check::Checked;

/// A POSTed message, as far as the direct path cares.
#[derive(Debug)]
pub(crate) enum Posted {
    /// A plain `tools/call`.
    Call(PostedCall),
    /// `notifications/cancelled` for this request id.
    Cancelled(RequestId),
    /// Anything else: rmcp's.
    Other,
}

/// A plain `tools/call`: a name, arguments, and in its `_meta` a progress
/// token and trace context.
#[derive(Debug)]
pub(crate) struct PostedCall {
    pub(crate) id: RequestId,
    /// The tool, by the name the gateway exposes.
    pub(crate) name: String,
    /// As the client sent them (an object every reader reads alike).
    pub(crate) arguments: Option<Checked>,
    /// The client's progress token, when it sent one.
    pub(crate) progress: Option<ProgressToken>,
    /// The trace context in its `_meta` (SEP-414).
    pub(crate) trace: TraceText,
}

/// The trace context fields of a `_meta`, as sent.
#[derive(Debug, Default)]
pub(crate) struct TraceText {
    pub(crate) traceparent: Option<String>,
    pub(crate) tracestate: Option<String>,
    pub(crate) baggage: Option<String>,
}

/// A 2026-07-28 client's plain `tools/call`: no session, its client's
/// context in `_meta`.
#[derive(Debug)]
pub(crate) struct StatelessCall {
    pub(crate) call: PostedCall,
    pub(crate) capabilities: ClientCapabilities,
    pub(crate) log_level: Option<LoggingLevel>,
}

/// A JSON-RPC message read with its params as `P` in the same pass: a
/// message whose params are not a `P` is not read at all.
#[derive(Deserialize)]
struct Envelope<'a, P> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    #[serde(default, deserialize_with = "crate::ids::optional_id")]
    id: Option<RequestId>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: Option<P>,
}

impl<P> Envelope<'_, P> {
    /// Its params, if it is a JSON-RPC 2.0 `method` request (`request`)
    /// or notification, with its id for a request.
    fn of(self, method: &str, request: bool) -> Option<(Option<RequestId>, P)> {
        (self.jsonrpc == "2.0" && self.method == method && self.id.is_some() == request)
            .then_some(self.params)
            .flatten()
            .map(|params| (self.id, params))
    }
}

/// `tools/call` params with nothing but a name, arguments and a progress
/// token.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainCall {
    name: String,
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
    #[serde(rename = "_meta", default)]
    meta: Option<ProgressOnly>,
}

/// A `_meta` holding a progress token (what rmcp's client sends with every
/// request), trace context (SEP-414), and keys of others, which are passed
/// over: the gateway does not forward a client's `_meta` on either path
/// (docs/DECISIONS.md #31), so rmcp's server would pass them over too. A
/// reserved key it does not know ([`reserved`]) is rmcp's to read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProgressOnly {
    #[serde(default, deserialize_with = "crate::ids::optional_token")]
    progress_token: Option<ProgressToken>,
    #[serde(default)]
    traceparent: Option<String>,
    #[serde(default)]
    tracestate: Option<String>,
    #[serde(default)]
    baggage: Option<String>,
    #[serde(flatten)]
    others: Others,
}

/// The keys of a `_meta` the gateway passes over.
type Others = std::collections::HashMap<String, IgnoredAny>;

/// Whether `key` is in a namespace MCP reserves (a prefix with the label
/// `modelcontextprotocol` or `mcp`, as `io.modelcontextprotocol/`): one
/// the gateway does not read is left to rmcp.
pub(crate) fn reserved(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        prefix
            .split('.')
            .any(|label| label == "modelcontextprotocol" || label == "mcp")
    })
}

impl ProgressOnly {
    /// It has a key (an empty `_meta` is rmcp's, as before), and no
    /// reserved one the gateway does not read.
    fn says_something(&self) -> bool {
        (self.known() || !self.others.is_empty()) && !self.others.keys().any(|key| reserved(key))
    }

    /// It has a key the gateway reads.
    fn known(&self) -> bool {
        self.progress_token.is_some()
            || self.traceparent.is_some()
            || self.tracestate.is_some()
            || self.baggage.is_some()
    }

    fn split(meta: Option<ProgressOnly>) -> (Option<ProgressToken>, TraceText) {
        match meta {
            Some(meta) => (
                meta.progress_token,
                TraceText {
                    traceparent: meta.traceparent,
                    tracestate: meta.tracestate,
                    baggage: meta.baggage,
                },
            ),
            None => (None, TraceText::default()),
        }
    }
}

/// A call's `arguments` as sent: `Some(None)` when it sent none (or
/// `null`), `None` when they are not an object every later reader reads
/// alike (the call is then not taken by the direct path: the gateway's
/// door refuses it before rmcp's server).
fn object_or_none(arguments: Option<Box<RawValue>>) -> Option<Option<Checked>> {
    match arguments {
        None => Some(None),
        Some(raw) => Checked::new(raw).ok().map(Some),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelledParams {
    #[serde(deserialize_with = "crate::ids::id")]
    request_id: RequestId,
}

impl Posted {
    /// What `body` is; [`Posted::Other`] for whatever is not plainly one of
    /// the others (rmcp then answers it, errors included).
    pub(crate) fn read(body: &[u8]) -> Posted {
        quick::call(body).unwrap_or_else(|| Posted::read_fully(body))
    }

    /// What `body` is, read with serde (see [`quick`] for the usual call).
    fn read_fully(body: &[u8]) -> Posted {
        // A plain call is read in one pass; a message that is not one, once
        // more as a cancellation (its params are no call's).
        if let Ok(envelope) = serde_json::from_slice::<Envelope<'_, PlainCall>>(body) {
            return envelope
                .of("tools/call", true)
                // An empty `_meta` is rmcp's, as before.
                .filter(|(_, call)| call.meta.as_ref().is_none_or(ProgressOnly::says_something))
                .and_then(|(id, call)| {
                    let arguments = object_or_none(call.arguments)?;
                    let (progress, trace) = ProgressOnly::split(call.meta);
                    Some(Posted::Call(PostedCall {
                        id: id?,
                        name: call.name,
                        arguments,
                        progress,
                        trace,
                    }))
                })
                .unwrap_or(Posted::Other);
        }
        serde_json::from_slice::<Envelope<'_, CancelledParams>>(body)
            .ok()
            .and_then(|envelope| envelope.of("notifications/cancelled", false))
            .map_or(Posted::Other, |(_, cancelled)| {
                Posted::Cancelled(cancelled.request_id)
            })
    }
}

/// `body` read by hand, when the hand reading answers, beside the full
/// reading (as `Debug` text), for the fuzz target `codec`: as a 2025
/// session's message and as a 2026-07-28 client's call.
#[cfg(feature = "twins")]
pub(crate) fn twins(body: &[u8]) -> Vec<(String, String)> {
    let session = quick::call(body).map(|quick| {
        (
            format!("{quick:?}"),
            format!("{:?}", Posted::read_fully(body)),
        )
    });
    let stateless = quick::stateless(body).map(|quick| {
        (
            format!("{:?}", Some(quick)),
            format!("{:?}", StatelessCall::read_fully(body)),
        )
    });
    session.into_iter().chain(stateless).collect()
}

/// A 2026-07-28 `tools/call`'s params with nothing but a name, arguments
/// and the request `_meta` rmcp's client sends.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatelessParams {
    name: String,
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
    #[serde(rename = "_meta")]
    meta: ClientContext,
}

/// The per-request client context (SEP-2575) and a progress token; others'
/// keys are passed over, as in [`ProgressOnly`].
#[derive(Deserialize)]
struct ClientContext {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: ProtocolVersion,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    capabilities: ClientCapabilities,
    /// Who the client is: nothing the gateway acts on.
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    _client_info: Option<IgnoredAny>,
    #[serde(rename = "io.modelcontextprotocol/logLevel", default)]
    log_level: Option<LoggingLevel>,
    #[serde(
        rename = "progressToken",
        default,
        deserialize_with = "crate::ids::optional_token"
    )]
    progress_token: Option<ProgressToken>,
    #[serde(default)]
    traceparent: Option<String>,
    #[serde(default)]
    tracestate: Option<String>,
    #[serde(default)]
    baggage: Option<String>,
    #[serde(flatten)]
    others: Others,
}

impl StatelessCall {
    /// `body` as a 2026-07-28 client's plain call; `None` for anything else
    /// (rmcp then answers it, errors included).
    pub(crate) fn read(body: &[u8]) -> Option<StatelessCall> {
        quick::stateless(body).or_else(|| StatelessCall::read_fully(body))
    }

    /// `body` as a 2026-07-28 client's plain call, read with serde (see
    /// [`quick`] for the usual call).
    fn read_fully(body: &[u8]) -> Option<StatelessCall> {
        let envelope = serde_json::from_slice::<Envelope<'_, StatelessParams>>(body).ok()?;
        let (id, params) = envelope.of("tools/call", true)?;
        let id = id?;
        StatelessCall::of(id, params.name, params.arguments, params.meta)
    }

    /// The call read from its parts: `None` for another protocol version,
    /// a reserved `_meta` key the gateway does not read, or arguments that
    /// are not an object every reader reads alike.
    fn of(
        id: RequestId,
        name: String,
        arguments: Option<Box<RawValue>>,
        context: ClientContext,
    ) -> Option<StatelessCall> {
        if context.protocol_version != ProtocolVersion::V_2026_07_28
            || context.others.keys().any(|key| reserved(key))
        {
            return None;
        }
        Some(StatelessCall {
            call: PostedCall {
                id,
                name,
                arguments: object_or_none(arguments)?,
                progress: context.progress_token,
                trace: TraceText {
                    traceparent: context.traceparent,
                    tracestate: context.tracestate,
                    baggage: context.baggage,
                },
            },
            capabilities: context.capabilities,
            log_level: context.log_level,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str) -> Posted {
        Posted::read(body.as_bytes())
    }

    fn raw_text(arguments: Option<Checked>) -> Option<String> {
        Some(arguments?.into_raw().get().to_owned())
    }

    #[test]
    fn only_plain_calls_and_cancellations_are_read() {
        let Posted::Call(call) = read(
            r#"{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"a__echo","arguments":{"text":"x"}}}"#,
        ) else {
            panic!("a plain call")
        };
        assert_eq!(call.id, RequestId::String("c1".into()));
        assert_eq!(call.name, "a__echo");
        assert_eq!(raw_text(call.arguments), Some(r#"{"text":"x"}"#.into()));
        // As sent: key order and number text stay; they are only checked
        // (an object every reader reads alike), never parsed into a tree.
        let Posted::Call(call) = read(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments": {"z":1.0,"a":[1e2,12345678901234567890]} }}"#,
        ) else {
            panic!("a plain call")
        };
        assert_eq!(
            raw_text(call.arguments),
            Some(r#"{"z":1.0,"a":[1e2,12345678901234567890]}"#.into())
        );
        // Arguments the grammar allows but readers read apart (a key twice,
        // a lone surrogate's escape, an integer beyond 64 bits) are not
        // taken here: the gateway's door refuses them.
        for unreadable in [
            r#"{"z":1,"z":2}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":123456789012345678901234567890}"#,
        ] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{unreadable}}}}}"#
            );
            assert!(matches!(read(&body), Posted::Other), "{body}");
        }
        let Posted::Call(call) = read(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null}}"#,
        ) else {
            panic!("a call with null arguments")
        };
        assert!(call.arguments.is_none());
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#),
            Posted::Call(_)
        ));
        let Posted::Call(call) = read(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":4}}}"#,
        ) else {
            panic!("a call with a progress token")
        };
        assert_eq!(call.progress, Some(ProgressToken(RequestId::Number(4))));
        // Trace context (SEP-414) stays on the direct path, and is kept.
        let Posted::Call(call) = read(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":4,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"k=v","baggage":"b=1"}}}"#,
        ) else {
            panic!("a traced call")
        };
        let trace = call.trace;
        assert_eq!(
            trace.traceparent.as_deref(),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        );
        assert_eq!(trace.tracestate.as_deref(), Some("k=v"));
        assert_eq!(trace.baggage.as_deref(), Some("b=1"));
        assert!(matches!(
            read(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"traceparent":"x"}}}"#
            ),
            Posted::Call(_)
        ));
        // Another's keys are passed over, alone or beside a token.
        for others in [
            r#"{"x":2}"#,
            r#"{"progressToken":1,"example.com/x":{"a":[1,null]}}"#,
        ] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","_meta":{others}}}}}"#
            );
            assert!(matches!(read(&body), Posted::Call(_)), "{body}");
        }
        // A hostile client's others' keys: a reserved key disguised by an
        // escape is still reserved (rmcp's), a value nested past serde's
        // limit or not JSON is no call: neither panics nor passes.
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        for meta in [
            r#"{"progressToken":1,"io.modelcontextprotocol\/x":1}"#.to_owned(),
            format!(r#"{{"progressToken":1,"example.com/x":{deep}}}"#),
            r#"{"progressToken":1,"example.com/x":[1,}"#.to_owned(),
            // Half a surrogate pair in a string of its value (found by the
            // fuzzer): every full reading refuses it.
            r#"{"progressToken":1,"example.com/x":{"p\ud800":1}}"#.to_owned(),
        ] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","_meta":{meta}}}}}"#
            );
            assert!(matches!(read(&body), Posted::Other), "{meta:.80}");
            let context = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}"#;
            let stateless = body.replace(r#""_meta":{"#, &format!(r#""_meta":{{{context},"#));
            assert!(
                StatelessCall::read(stateless.as_bytes()).is_none(),
                "{meta:.80}"
            );
        }
        assert!(reserved("io.modelcontextprotocol/x") && reserved("dev.mcp/y"));
        assert!(!reserved("example.com/x") && !reserved("x") && !reserved("mcpx.io/y"));
        for other in [
            // `_meta` without a progress token or with more, a task, a
            // retry's fields: rmcp's.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1,"io.modelcontextprotocol/x":2}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"dev.mcp/x":2}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","requestState":"s"}}"#,
            // Arguments that are not an object, no name, no id, a null id.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"{}"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":01}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
            // Another version, another method, a batch, not JSON.
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}]"#,
            "{not json",
        ] {
            assert!(matches!(read(other), Posted::Other), "{other}");
        }
        assert!(matches!(
            read(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"r"}}"#
            ),
            Posted::Cancelled(RequestId::Number(7))
        ));
    }
}
