//! What a test sees of the received telemetry: spans and metric data points
//! flattened out of their resource/scope nesting, with ids as lowercase hex
//! and attributes in sorted maps, so assertions and failure dumps read
//! plainly.

use std::{collections::BTreeMap, fmt};

use opentelemetry_proto::tonic::{
    collector::{metrics::v1::ExportMetricsServiceRequest, trace::v1::ExportTraceServiceRequest},
    common::v1::{AnyValue, KeyValue, any_value},
    metrics::v1::{metric, number_data_point},
    trace::v1::{span, status},
};

/// One received span, with its resource.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanView {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    /// 16 lowercase hex digits; `""` for a root span.
    pub parent_span_id: String,
    pub name: String,
    pub kind: SpanKind,
    pub attributes: BTreeMap<String, AttrValue>,
    /// In the order the exporter sent them.
    pub events: Vec<EventView>,
    pub links: Vec<LinkView>,
    pub status: StatusCode,
    pub status_message: String,
    /// The resource's `service.name` (`""` when it has none).
    pub service_name: String,
    /// Every resource attribute, `service.name` included.
    pub resource: BTreeMap<String, AttrValue>,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
}

impl SpanView {
    /// The attribute `key`, if the span has it.
    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attributes.get(key)
    }

    /// The attribute `key` when it is a string.
    pub fn str_attr(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(AttrValue::as_str)
    }

    /// The attribute `key` when it is an integer.
    pub fn int_attr(&self, key: &str) -> Option<i64> {
        self.attr(key).and_then(AttrValue::as_i64)
    }

    /// Whether the span has an event called `name`.
    pub fn has_event(&self, name: &str) -> bool {
        self.events.iter().any(|event| event.name == name)
    }

    /// Whether the span has no parent.
    pub fn is_root(&self) -> bool {
        self.parent_span_id.is_empty()
    }
}

/// One line: `trace_id span_id parent kind name` (parent `-` for a root
/// span), then status and attributes, for failure dumps.
impl fmt::Display for SpanView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parent = if self.is_root() {
            "-"
        } else {
            &self.parent_span_id
        };
        write!(
            f,
            "{} {} {parent} {} {:?} status={}",
            self.trace_id, self.span_id, self.kind, self.name, self.status
        )?;
        if !self.status_message.is_empty() {
            write!(f, "({:?})", self.status_message)?;
        }
        write!(f, " service={:?}", self.service_name)?;
        for (key, value) in &self.attributes {
            write!(f, " {key}={value:?}")?;
        }
        for event in &self.events {
            write!(f, " event:{:?}", event.name)?;
        }
        Ok(())
    }
}

/// An event on a span.
#[derive(Debug, Clone, PartialEq)]
pub struct EventView {
    pub name: String,
    pub attributes: BTreeMap<String, AttrValue>,
}

/// A link from a span to another span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
}

/// The span kinds of OTLP (`Span.SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpanKind {
    Unspecified,
    Internal,
    Server,
    Client,
    Producer,
    Consumer,
}

impl SpanKind {
    /// Every kind, in protocol order.
    pub const ALL: [SpanKind; 6] = [
        SpanKind::Unspecified,
        SpanKind::Internal,
        SpanKind::Server,
        SpanKind::Client,
        SpanKind::Producer,
        SpanKind::Consumer,
    ];

    /// Lowercase name, as printed by `mcp-test-server --otlp`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Unspecified => "unspecified",
            SpanKind::Internal => "internal",
            SpanKind::Server => "server",
            SpanKind::Client => "client",
            SpanKind::Producer => "producer",
            SpanKind::Consumer => "consumer",
        }
    }

    /// An unknown wire value reads as `Unspecified`.
    fn from_wire(value: i32) -> Self {
        match span::SpanKind::try_from(value) {
            Ok(span::SpanKind::Internal) => SpanKind::Internal,
            Ok(span::SpanKind::Server) => SpanKind::Server,
            Ok(span::SpanKind::Client) => SpanKind::Client,
            Ok(span::SpanKind::Producer) => SpanKind::Producer,
            Ok(span::SpanKind::Consumer) => SpanKind::Consumer,
            Ok(span::SpanKind::Unspecified) | Err(_) => SpanKind::Unspecified,
        }
    }
}

impl fmt::Display for SpanKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A span's status code (`Status.StatusCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusCode {
    Unset,
    Ok,
    Error,
}

impl StatusCode {
    /// Every code, in protocol order.
    pub const ALL: [StatusCode; 3] = [StatusCode::Unset, StatusCode::Ok, StatusCode::Error];

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusCode::Unset => "unset",
            StatusCode::Ok => "ok",
            StatusCode::Error => "error",
        }
    }

    /// An unknown wire value reads as `Unset`.
    fn from_wire(value: i32) -> Self {
        match status::StatusCode::try_from(value) {
            Ok(status::StatusCode::Ok) => StatusCode::Ok,
            Ok(status::StatusCode::Error) => StatusCode::Error,
            Ok(status::StatusCode::Unset) | Err(_) => StatusCode::Unset,
        }
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    /// Arrays, maps and bytes (and an absent value), as the debug text of
    /// their protobuf form: enough to look for a string in them.
    Other(String),
}

impl AttrValue {
    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::Str(text) => Some(text),
            _ => None,
        }
    }

    /// The integer, when this is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            AttrValue::Int(value) => Some(*value),
            _ => None,
        }
    }

    fn from_wire(value: Option<&AnyValue>) -> Self {
        match value.and_then(|value| value.value.as_ref()) {
            Some(any_value::Value::StringValue(text)) => AttrValue::Str(text.clone()),
            Some(any_value::Value::IntValue(value)) => AttrValue::Int(*value),
            Some(any_value::Value::DoubleValue(value)) => AttrValue::Double(*value),
            Some(any_value::Value::BoolValue(value)) => AttrValue::Bool(*value),
            Some(other) => AttrValue::Other(format!("{other:?}")),
            None => AttrValue::Other("None".to_owned()),
        }
    }
}

/// The bare value: strings unquoted.
impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Str(text) | AttrValue::Other(text) => f.write_str(text),
            AttrValue::Int(value) => write!(f, "{value}"),
            AttrValue::Double(value) => write!(f, "{value}"),
            AttrValue::Bool(value) => write!(f, "{value}"),
        }
    }
}

/// One data point of a received metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricView {
    pub name: String,
    pub unit: String,
    /// The data point's attributes (not the resource's).
    pub attributes: BTreeMap<String, AttrValue>,
    pub point: PointView,
}

/// The value of a data point.
#[derive(Debug, Clone, PartialEq)]
pub enum PointView {
    /// An explicit-bucket histogram. An exponential histogram reads as one
    /// with its count and sum and no buckets.
    Histogram {
        count: u64,
        sum: Option<f64>,
        bounds: Vec<f64>,
        bucket_counts: Vec<u64>,
    },
    /// A sum's or a gauge's value (integers converted).
    Number(f64),
}

impl fmt::Display for MetricView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}] {:?}", self.name, self.unit, self.point)?;
        for (key, value) in &self.attributes {
            write!(f, " {key}={value:?}")?;
        }
        Ok(())
    }
}

/// Every span of an export request, flattened.
pub(super) fn spans_of(request: &ExportTraceServiceRequest) -> Vec<SpanView> {
    let mut spans = Vec::new();
    for resource_spans in &request.resource_spans {
        let resource = resource_spans
            .resource
            .as_ref()
            .map(|resource| attributes(&resource.attributes))
            .unwrap_or_default();
        let service_name = resource
            .get("service.name")
            .and_then(AttrValue::as_str)
            .unwrap_or_default()
            .to_owned();
        for scope_spans in &resource_spans.scope_spans {
            for span in &scope_spans.spans {
                let status = span.status.as_ref();
                spans.push(SpanView {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name.clone(),
                    kind: SpanKind::from_wire(span.kind),
                    attributes: attributes(&span.attributes),
                    events: span
                        .events
                        .iter()
                        .map(|event| EventView {
                            name: event.name.clone(),
                            attributes: attributes(&event.attributes),
                        })
                        .collect(),
                    links: span
                        .links
                        .iter()
                        .map(|link| LinkView {
                            trace_id: hex(&link.trace_id),
                            span_id: hex(&link.span_id),
                        })
                        .collect(),
                    status: status.map_or(StatusCode::Unset, |s| StatusCode::from_wire(s.code)),
                    status_message: status.map(|s| s.message.clone()).unwrap_or_default(),
                    service_name: service_name.clone(),
                    resource: resource.clone(),
                    start_unix_nanos: span.start_time_unix_nano,
                    end_unix_nanos: span.end_time_unix_nano,
                });
            }
        }
    }
    spans
}

/// Every data point of an export request, flattened. Summaries (which no
/// OpenTelemetry SDK produces) are left out.
pub(super) fn metrics_of(request: &ExportMetricsServiceRequest) -> Vec<MetricView> {
    let mut points = Vec::new();
    let all = request
        .resource_metrics
        .iter()
        .flat_map(|resource| &resource.scope_metrics)
        .flat_map(|scope| &scope.metrics);
    for metric in all {
        let view = |attrs: &[KeyValue], point: PointView| MetricView {
            name: metric.name.clone(),
            unit: metric.unit.clone(),
            attributes: attributes(attrs),
            point,
        };
        match &metric.data {
            Some(metric::Data::Histogram(histogram)) => {
                points.extend(histogram.data_points.iter().map(|point| {
                    let value = PointView::Histogram {
                        count: point.count,
                        sum: point.sum,
                        bounds: point.explicit_bounds.clone(),
                        bucket_counts: point.bucket_counts.clone(),
                    };
                    view(&point.attributes, value)
                }));
            }
            Some(metric::Data::ExponentialHistogram(histogram)) => {
                points.extend(histogram.data_points.iter().map(|point| {
                    let value = PointView::Histogram {
                        count: point.count,
                        sum: point.sum,
                        bounds: Vec::new(),
                        bucket_counts: Vec::new(),
                    };
                    view(&point.attributes, value)
                }));
            }
            Some(metric::Data::Sum(sum)) => points.extend(
                sum.data_points
                    .iter()
                    .map(|point| view(&point.attributes, number(point.value))),
            ),
            Some(metric::Data::Gauge(gauge)) => points.extend(
                gauge
                    .data_points
                    .iter()
                    .map(|point| view(&point.attributes, number(point.value))),
            ),
            Some(metric::Data::Summary(_)) | None => {}
        }
    }
    points
}

fn number(value: Option<number_data_point::Value>) -> PointView {
    PointView::Number(match value {
        Some(number_data_point::Value::AsDouble(value)) => value,
        // Precision loss past 2^53 is irrelevant for test counters.
        #[allow(clippy::cast_precision_loss)]
        Some(number_data_point::Value::AsInt(value)) => value as f64,
        None => f64::NAN,
    })
}

fn attributes(pairs: &[KeyValue]) -> BTreeMap<String, AttrValue> {
    pairs
        .iter()
        .map(|pair| (pair.key.clone(), AttrValue::from_wire(pair.value.as_ref())))
        .collect()
}

/// Lowercase hex, `""` for no bytes (an absent parent).
fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::{
        common::v1::ArrayValue,
        metrics::v1::{Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum},
        resource::v1::Resource,
        trace::v1::{ResourceSpans, ScopeSpans, Span, Status},
    };

    use super::*;

    fn pair(key: &str, value: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue { value: Some(value) }),
            ..KeyValue::default()
        }
    }

    #[test]
    fn hex_is_lowercase_and_empty_for_no_bytes() {
        assert_eq!(hex(&[0x0a, 0xff, 0x00]), "0aff00");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn wire_enums_map_every_value_and_unknown_ones_to_the_default() {
        for (wire, kind) in (0..).zip(SpanKind::ALL) {
            assert_eq!(SpanKind::from_wire(wire), kind);
        }
        assert_eq!(SpanKind::from_wire(42), SpanKind::Unspecified);
        for (wire, code) in (0..).zip(StatusCode::ALL) {
            assert_eq!(StatusCode::from_wire(wire), code);
        }
        assert_eq!(StatusCode::from_wire(-1), StatusCode::Unset);
    }

    #[test]
    fn a_span_is_flattened_with_its_resource() {
        let span = Span {
            trace_id: vec![0xab; 16],
            span_id: vec![0x01; 8],
            name: "tools/call".to_owned(),
            kind: span::SpanKind::Server as i32,
            attributes: vec![
                pair("n", any_value::Value::IntValue(7)),
                pair(
                    "list",
                    any_value::Value::ArrayValue(ArrayValue {
                        values: vec![AnyValue {
                            value: Some(any_value::Value::StringValue("inside".to_owned())),
                        }],
                    }),
                ),
            ],
            status: Some(Status {
                message: "boom".to_owned(),
                code: status::StatusCode::Error as i32,
            }),
            ..Span::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![pair(
                        "service.name",
                        any_value::Value::StringValue("svc".to_owned()),
                    )],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![span],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let [view] = spans_of(&request).try_into().unwrap();
        assert_eq!(view.trace_id, "ab".repeat(16));
        assert_eq!(view.span_id, "0101010101010101");
        assert!(view.is_root());
        assert_eq!(view.kind, SpanKind::Server);
        assert_eq!(view.int_attr("n"), Some(7));
        assert!(
            matches!(view.attr("list"), Some(AttrValue::Other(text)) if text.contains("inside"))
        );
        assert_eq!(
            (view.status, view.status_message.as_str()),
            (StatusCode::Error, "boom")
        );
        assert_eq!(view.service_name, "svc");
        assert!(
            view.to_string().contains(" - server \"tools/call\""),
            "{view}"
        );
    }

    #[test]
    fn sums_read_as_numbers() {
        let request = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![Metric {
                        name: "calls".to_owned(),
                        unit: "{call}".to_owned(),
                        data: Some(metric::Data::Sum(Sum {
                            data_points: vec![NumberDataPoint {
                                value: Some(number_data_point::Value::AsInt(3)),
                                ..NumberDataPoint::default()
                            }],
                            ..Sum::default()
                        })),
                        ..Metric::default()
                    }],
                    ..ScopeMetrics::default()
                }],
                ..ResourceMetrics::default()
            }],
        };
        let [point] = metrics_of(&request).try_into().unwrap();
        assert_eq!(
            (point.name.as_str(), point.unit.as_str()),
            ("calls", "{call}")
        );
        assert_eq!(point.point, PointView::Number(3.0));
    }
}
