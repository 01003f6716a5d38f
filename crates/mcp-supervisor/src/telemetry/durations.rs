//! The `/metrics` copies of the convention's duration histograms, kept
//! whether or not OTLP export is on, with the same buckets.
//!
//! Labels come from fixed vocabularies and the connection's name only: the
//! method, `error.type` (a JSON-RPC code, `tool_error` or a failure kind) —
//! not the tool's name (unbounded on the Prometheus side).

use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, OnceLock};

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder},
    metrics::{family::Family, histogram::Histogram},
    registry::{Registry, Unit},
};

use super::semconv::{DURATION_BUCKETS, TOOL_ERROR};
use crate::FailureKind;

/// A label value that costs no allocation per observation when it is one of
/// ours (a method, a failure kind) or the connection's shared name.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Static(&'static str),
    Shared(Arc<str>),
    Owned(String),
}

impl Value {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Value::Static(text) => text,
            Value::Shared(text) => text,
            Value::Owned(text) => text,
        }
    }

    /// `text`, borrowed from `known` when it is there.
    fn of(text: &str, known: impl IntoIterator<Item = &'static str>) -> Self {
        known
            .into_iter()
            .find(|known| *known == text)
            .map_or_else(|| Value::Owned(text.to_owned()), Value::Static)
    }
}

// Equal by their text, whatever holds it: one series per label text.
impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

/// A label set's hash for its family's map, taken once per observation: its
/// texts hashed by foldhash into one word, which is all the map's SipHash
/// then reads (hashing the texts themselves with it cost about 330
/// instructions a lookup, two lookups a call). Equal sets hash alike.
fn label_hash<H: Hasher>(texts: &[&Value], state: &mut H) {
    use std::hash::BuildHasher;
    let mut words = foldhash::fast::FixedState::with_seed(0).build_hasher();
    for text in texts {
        text.hash(&mut words);
    }
    state.write_u64(words.finish());
}

impl EncodeLabelValue for Value {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.as_str().encode(encoder)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    mcp_method_name: Value,
    error_type: Value,
}

impl Hash for ServerLabels {
    fn hash<H: Hasher>(&self, state: &mut H) {
        label_hash(&[&self.mcp_method_name, &self.error_type], state);
    }
}

#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
struct ClientLabels {
    connection: Value,
    mcp_method_name: Value,
    error_type: Value,
}

impl Hash for ClientLabels {
    fn hash<H: Hasher>(&self, state: &mut H) {
        label_hash(
            &[&self.connection, &self.mcp_method_name, &self.error_type],
            state,
        );
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    connection: Value,
}

#[derive(Debug)]
struct Durations {
    server: Family<ServerLabels, Histogram>,
    client: Family<ClientLabels, Histogram>,
    session: Family<SessionLabels, Histogram>,
}

fn histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

static DURATIONS: LazyLock<Durations> = LazyLock::new(|| Durations {
    server: Family::new_with_constructor(histogram),
    client: Family::new_with_constructor(histogram),
    session: Family::new_with_constructor(histogram),
});

/// The methods the gateway serves and sends.
const METHODS: [&str; 12] = [
    "tools/call",
    "tools/list",
    "prompts/get",
    "prompts/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "completion/complete",
    "resources/subscribe",
    "resources/unsubscribe",
    "initialize",
    "ping",
];

/// A method name, borrowed when it is one of the served methods.
pub(crate) fn method(text: &str) -> Value {
    Value::of(text, METHODS)
}

/// An `error.type`: empty on success; ours are static, a JSON-RPC code is not.
fn error_type(text: Option<&str>) -> Value {
    match text {
        None => Value::Static(""),
        Some(text) => Value::of(
            text,
            FailureKind::ALL.iter().map(|kind| kind.as_str()).chain([
                TOOL_ERROR,
                "cancelled",
                "busy",
                "timeout",
            ]),
        ),
    }
}

/// The usual observation's series at hand: a `tools/call` answered. The
/// family's lookup (its labels built, hashed and compared under a lock) cost
/// a call about 500 instructions, each of these histograms once.
const CALL: &str = "tools/call";

static SERVER_CALLS: LazyLock<Histogram> = LazyLock::new(|| {
    let labels = ServerLabels {
        mcp_method_name: Value::Static(CALL),
        error_type: error_type(None),
    };
    DURATIONS.server.get_or_create(&labels).clone()
});

/// A connection's series of `tools/call` attempts answered, made on its
/// first (a connection that is never called has none).
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnectionCalls(OnceLock<Histogram>);

impl ConnectionCalls {
    fn histogram(&self, connection: &Arc<str>) -> &Histogram {
        self.0.get_or_init(|| {
            let labels = ClientLabels {
                connection: Value::Shared(connection.clone()),
                mcp_method_name: Value::Static(CALL),
                error_type: error_type(None),
            };
            DURATIONS.client.get_or_create(&labels).clone()
        })
    }
}

/// A request the gateway served took `seconds`.
pub(crate) fn server(method_name: &Value, error: Option<&str>, seconds: f64) {
    if error.is_none() && method_name.as_str() == CALL {
        SERVER_CALLS.observe(seconds);
        return;
    }
    let labels = ServerLabels {
        mcp_method_name: method_name.clone(),
        error_type: error_type(error),
    };
    DURATIONS.server.get_or_create(&labels).observe(seconds);
}

/// An attempt sent upstream on `connection` (whose answered calls' series
/// is `calls`) took `seconds`.
pub(crate) fn client(
    method_name: &Value,
    error: Option<&str>,
    (connection, calls): (&Arc<str>, &ConnectionCalls),
    seconds: f64,
) {
    if error.is_none() && method_name.as_str() == CALL {
        calls.histogram(connection).observe(seconds);
        return;
    }
    let labels = ClientLabels {
        connection: Value::Shared(connection.clone()),
        mcp_method_name: method_name.clone(),
        error_type: error_type(error),
    };
    DURATIONS.client.get_or_create(&labels).observe(seconds);
}

/// An upstream session of `connection` lasted `seconds`, ready to gone.
pub(crate) fn client_session(connection: &Arc<str>, seconds: f64) {
    let labels = SessionLabels {
        connection: Value::Shared(connection.clone()),
    };
    DURATIONS.session.get_or_create(&labels).observe(seconds);
}

/// Adds the histograms to a scrape's registry
/// (`mcp_server_operation_duration_seconds`, `mcp_client_operation_duration_seconds`,
/// `mcp_client_session_duration_seconds`).
pub(crate) fn register(registry: &mut Registry) {
    registry.register_with_unit(
        "mcp_server_operation_duration",
        "MCP requests the gateway served, received to answered (OpenTelemetry mcp.server.operation.duration)",
        Unit::Seconds,
        DURATIONS.server.clone(),
    );
    registry.register_with_unit(
        "mcp_client_operation_duration",
        "Attempts sent upstream, sent to answered (OpenTelemetry mcp.client.operation.duration)",
        Unit::Seconds,
        DURATIONS.client.clone(),
    );
    registry.register_with_unit(
        "mcp_client_session_duration",
        "Upstream sessions, ready to gone (OpenTelemetry mcp.client.session.duration)",
        Unit::Seconds,
        DURATIONS.session.clone(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copies_are_prometheus_histograms_with_the_conventions_buckets() {
        let call = method("tools/call");
        server(&call, Some("tool_error"), 0.03);
        let a: Arc<str> = "a".into();
        let calls = ConnectionCalls::default();
        client(&call, None, (&a, &calls), 0.004);
        // The same text held another way is the same series.
        client(
            &Value::Owned("tools/call".into()),
            Some(&String::from("server")),
            (&a, &calls),
            0.5,
        );
        client(&call, Some("server"), (&"a".into(), &calls), 0.5);
        // A call answered is observed on the series kept at hand, which is
        // the family's: another connection's copy of it, a method held
        // another way and a lookup by labels all count in one.
        let b: Arc<str> = "durations-b".into();
        let (one, other) = (ConnectionCalls::default(), ConnectionCalls::default());
        client(&call, None, (&b, &one), 0.004);
        client(
            &Value::Owned("tools/call".into()),
            None,
            (&b, &other),
            0.004,
        );
        DURATIONS
            .client
            .get_or_create(&ClientLabels {
                connection: Value::Shared(b.clone()),
                mcp_method_name: method("tools/call"),
                error_type: error_type(None),
            })
            .observe(0.004);
        server(&method("tools/list"), None, 0.004);
        server(&call, None, 0.004);
        DURATIONS
            .server
            .get_or_create(&ServerLabels {
                mcp_method_name: Value::Owned("tools/call".into()),
                error_type: error_type(None),
            })
            .observe(0.004);
        client_session(&a, 12.0);
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE mcp_server_operation_duration_seconds histogram",
            "mcp_server_operation_duration_seconds_bucket{le=\"0.05\",mcp_method_name=\"tools/call\",error_type=\"tool_error\"} 1",
            "mcp_server_operation_duration_seconds_bucket{le=\"0.02\",mcp_method_name=\"tools/call\",error_type=\"tool_error\"} 0",
            "mcp_client_operation_duration_seconds_bucket{le=\"0.01\",connection=\"a\",mcp_method_name=\"tools/call\",error_type=\"\"} 1",
            "mcp_client_session_duration_seconds_bucket{le=\"30.0\",connection=\"a\"} 1",
            "mcp_client_session_duration_seconds_bucket{le=\"10.0\",connection=\"a\"} 0",
            "mcp_client_session_duration_seconds_bucket{le=\"300.0\",connection=\"a\"} 1",
            "mcp_client_session_duration_seconds_bucket{le=\"+Inf\",connection=\"a\"} 1",
            "mcp_client_operation_duration_seconds_count{connection=\"a\",mcp_method_name=\"tools/call\",error_type=\"server\"} 2",
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",error_type=\"tool_error\"} 1",
            "mcp_client_operation_duration_seconds_count{connection=\"durations-b\",mcp_method_name=\"tools/call\",error_type=\"\"} 3",
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/list\",error_type=\"\"} 1",
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",error_type=\"\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        let buckets = text
            .lines()
            .filter(|l| l.starts_with("mcp_client_session_duration_seconds_bucket"))
            .count();
        assert_eq!(buckets, 15, "the 14 bounds and +Inf");
    }
}
