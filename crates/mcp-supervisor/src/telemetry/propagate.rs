//! Trace context in and out: W3C `traceparent`/`tracestate` and `baggage`,
//! in a request's `params._meta` (SEP-414) and in HTTP headers.
//!
//! In: `_meta` is the request's own context and wins; the HTTP request's
//! headers are the parent only when `_meta` has none, and a different header
//! context becomes a link. Out: written into the upstream request's `_meta`
//! (one source of truth), and the HTTP client mirrors it into headers.

use http::HeaderMap;
use opentelemetry::{
    Context,
    propagation::{Extractor, Injector, TextMapCompositePropagator, TextMapPropagator},
    trace::{SpanContext, TraceContextExt},
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use rmcp::model::JsonObject;
use serde_json::Value;

/// The keys, in `_meta` and as header names.
pub(crate) const TRACEPARENT: &str = "traceparent";
pub(crate) const TRACESTATE: &str = "tracestate";
pub(crate) const BAGGAGE: &str = "baggage";
const KEYS: [&str; 3] = [TRACEPARENT, TRACESTATE, BAGGAGE];

/// Longer values are ignored (W3C's own limits, with room).
const MAX_TRACESTATE: usize = 512;
const MAX_BAGGAGE: usize = 8192;

pub(crate) fn propagator() -> TextMapCompositePropagator {
    TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ])
}

fn within_limits(key: &str, value: &str) -> bool {
    match key {
        TRACESTATE => value.len() <= MAX_TRACESTATE,
        BAGGAGE => value.len() <= MAX_BAGGAGE,
        _ => true,
    }
}

/// Reads the context from a `_meta` object.
pub(crate) struct MetaCarrier<'a>(&'a JsonObject);

/// The context in a `_meta` object, to read.
pub(crate) fn meta_carrier(meta: &JsonObject) -> MetaCarrier<'_> {
    MetaCarrier(meta)
}

/// The three trace context fields the direct path reads from `_meta`.
#[derive(Debug, Default)]
pub(crate) struct TraceFields {
    pub(crate) traceparent: Option<String>,
    pub(crate) tracestate: Option<String>,
    pub(crate) baggage: Option<String>,
}

impl TraceFields {
    /// The fields, boxed, when there is one at all (most calls carry none).
    pub(crate) fn boxed(
        traceparent: Option<String>,
        tracestate: Option<String>,
        baggage: Option<String>,
    ) -> Option<Box<Self>> {
        (traceparent.is_some() || tracestate.is_some() || baggage.is_some()).then(|| {
            Box::new(TraceFields {
                traceparent,
                tracestate,
                baggage,
            })
        })
    }
}

impl Extractor for TraceFields {
    fn get(&self, key: &str) -> Option<&str> {
        let value = match key {
            TRACEPARENT => self.traceparent.as_deref(),
            TRACESTATE => self.tracestate.as_deref(),
            BAGGAGE => self.baggage.as_deref(),
            _ => None,
        }?;
        within_limits(key, value).then_some(value)
    }

    fn keys(&self) -> Vec<&str> {
        KEYS.into_iter().filter(|k| self.get(k).is_some()).collect()
    }
}

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .and_then(Value::as_str)
            .filter(|value| within_limits(key, value))
    }

    fn keys(&self) -> Vec<&str> {
        KEYS.into_iter()
            .filter(|k| self.0.contains_key(*k))
            .collect()
    }
}

/// Reads the context from HTTP headers.
struct HeaderCarrier<'a>(&'a HeaderMap);

impl Extractor for HeaderCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .and_then(|value| value.to_str().ok())
            .filter(|value| within_limits(key, value))
    }

    fn keys(&self) -> Vec<&str> {
        KEYS.into_iter()
            .filter(|k| self.0.contains_key(*k))
            .collect()
    }
}

/// Writes the context into a `_meta` object.
struct MetaWriter<'a>(&'a mut JsonObject);

impl Injector for MetaWriter<'_> {
    fn set(&mut self, key: &str, value: String) {
        // An empty `tracestate` or `baggage` says nothing.
        if !value.is_empty() {
            self.0.insert(key.to_owned(), Value::String(value));
        }
    }
}

/// Where a request's parent comes from, and a link to the transport's
/// context when that differs.
#[derive(Debug, Default)]
pub(crate) struct Incoming {
    pub(crate) parent: Option<Context>,
    pub(crate) link: Option<SpanContext>,
}

/// The parent of a request's span from its `_meta` and its HTTP headers.
pub(crate) fn incoming(
    propagator: &TextMapCompositePropagator,
    meta: Option<&dyn Extractor>,
    headers: Option<&HeaderMap>,
) -> Incoming {
    let remote = |cx: Context| cx.span().span_context().is_valid().then_some(cx);
    let from_meta = meta.and_then(|meta| remote(propagator.extract(meta)));
    let from_headers =
        headers.and_then(|headers| remote(propagator.extract(&HeaderCarrier(headers))));
    match (from_meta, from_headers) {
        (Some(meta), Some(headers)) => {
            let header_span = headers.span().span_context().clone();
            let differs = header_span.span_id() != meta.span().span_context().span_id();
            Incoming {
                parent: Some(meta),
                link: differs.then_some(header_span),
            }
        }
        (Some(parent), None) | (None, Some(parent)) => Incoming {
            parent: Some(parent),
            link: None,
        },
        (None, None) => Incoming::default(),
    }
}

/// Writes `cx` into `meta` (replacing any context already there).
pub(crate) fn inject(propagator: &TextMapCompositePropagator, cx: &Context, meta: &mut JsonObject) {
    for key in KEYS {
        meta.remove(key);
    }
    propagator.inject_context(cx, &mut MetaWriter(meta));
}

/// The trace context in a `_meta` object, as header pairs, for the HTTP
/// client to mirror.
pub(crate) fn header_pairs(meta: &JsonObject) -> impl Iterator<Item = (&'static str, &str)> {
    KEYS.into_iter()
        .filter_map(|key| Some((key, meta.get(key)?.as_str()?)))
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const OTHER: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

    fn meta(pairs: &[(&str, &str)]) -> JsonObject {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap()))
            .collect()
    }

    fn span_id(cx: &Context) -> String {
        cx.span().span_context().span_id().to_string()
    }

    #[test]
    fn meta_is_the_parent_and_a_different_header_context_a_link() {
        let p = propagator();
        let got = incoming(
            &p,
            Some(&MetaCarrier(&meta(&[(TRACEPARENT, PARENT)]))),
            Some(&headers(&[(TRACEPARENT, OTHER)])),
        );
        assert_eq!(span_id(got.parent.as_ref().unwrap()), "b7ad6b7169203331");
        assert_eq!(got.link.unwrap().span_id().to_string(), "00f067aa0ba902b7");

        let same = incoming(
            &p,
            Some(&MetaCarrier(&meta(&[(TRACEPARENT, PARENT)]))),
            Some(&headers(&[(TRACEPARENT, PARENT)])),
        );
        assert!(same.link.is_none());
    }

    #[test]
    fn headers_alone_are_the_parent_and_nothing_valid_is_no_parent() {
        let p = propagator();
        let got = incoming(
            &p,
            Some(&MetaCarrier(&meta(&[]))),
            Some(&headers(&[(TRACEPARENT, OTHER)])),
        );
        assert_eq!(span_id(got.parent.as_ref().unwrap()), "00f067aa0ba902b7");
        let bad = incoming(
            &p,
            Some(&MetaCarrier(&meta(&[(TRACEPARENT, "00-zz-yy-01")]))),
            None,
        );
        assert!(bad.parent.is_none());
        assert!(incoming(&p, None, None).parent.is_none());
        let wrong_type: JsonObject =
            serde_json::from_value(serde_json::json!({ "traceparent": 7 })).unwrap();
        assert!(
            incoming(&p, Some(&MetaCarrier(&wrong_type)), None)
                .parent
                .is_none()
        );
    }

    #[test]
    fn an_oversized_tracestate_is_ignored_and_the_trace_kept() {
        let p = propagator();
        let long = "k=".to_owned() + &"v".repeat(MAX_TRACESTATE);
        let got = incoming(
            &p,
            Some(&MetaCarrier(&meta(&[
                (TRACEPARENT, PARENT),
                (TRACESTATE, &long),
            ]))),
            None,
        );
        let parent = got.parent.unwrap();
        assert_eq!(span_id(&parent), "b7ad6b7169203331");
        assert_eq!(parent.span().span_context().trace_state().header(), "");
    }

    #[test]
    fn inject_replaces_what_was_there_and_round_trips() {
        let p = propagator();
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cx = Context::new().with_remote_span_context(span);
        let mut out = meta(&[(TRACEPARENT, PARENT), ("progressToken", "7")]);
        inject(&p, &cx, &mut out);
        assert_eq!(
            out[TRACEPARENT],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(out["progressToken"], "7");
        let back = incoming(&p, Some(&MetaCarrier(&out)), None).parent.unwrap();
        assert_eq!(span_id(&back), "00f067aa0ba902b7");
        let pairs: Vec<_> = header_pairs(&out).collect();
        assert_eq!(pairs.len(), 1);
        assert_eq!(pairs[0].0, TRACEPARENT);
    }
}
