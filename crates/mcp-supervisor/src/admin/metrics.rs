//! `GET /metrics`: a status snapshot as Prometheus text (format 0.0.4).
//!
//! The connection actors already keep every number (`CallCounts`,
//! `DurationHistogram`, failures by kind), so nothing is instrumented twice:
//! each scrape asks the registry for a [`Status`](crate::registry::Status)
//! snapshot and a [`Collector`] encodes it. The only labels are the
//! connection's name and fixed vocabularies (outcome, kind, state, `le`); never
//! a URL, token, header or argument.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet, prometheus_text},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};

use crate::{
    ConnectionState, FailureKind,
    connection::stats::DURATION_BUCKETS,
    contracts::Verdict,
    fleet::{FleetView, StoreHealth},
    outcome::OutcomeKind,
    registry::ConnectionStatus,
    tallies::{Family, Protection, Tallies},
};

/// `Content-Type` of [`metrics_text`]: `text/plain; version=0.0.4; charset=utf-8`.
pub const METRICS_CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// The snapshot as Prometheus text exposition, with the gateway's
/// evictions and refusals when there is a gateway.
pub fn metrics_text(
    connections: &[ConnectionStatus],
    gateway: Option<&Tallies>,
    fleet: Option<&FleetView>,
) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(StatusCollector(connections.to_vec())));
    if let Some(fleet) = fleet {
        registry.register_collector(Box::new(FleetCollector(fleet.clone())));
    }
    if let Some(tallies) = gateway {
        let counts = Protection::ALL.map(|protection| (protection, tallies.get(protection)));
        registry.register_collector(Box::new(GatewayCollector(counts)));
    }
    crate::telemetry::durations::register(&mut registry);
    if crate::telemetry::installed().is_some() {
        registry.register_collector(Box::new(TelemetryCollector {
            dropped: crate::telemetry::spans_dropped(),
            failures: crate::telemetry::export_failures(),
        }));
    }
    let mut text = String::new();
    // Writing into a String cannot fail, and our collector never returns an
    // error of its own.
    let _ = prometheus_text::encode(&mut text, &registry);
    text
}

/// What OpenTelemetry export lost: spans dropped (queue full), export
/// requests that failed.
#[derive(Debug)]
struct TelemetryCollector {
    dropped: u64,
    failures: u64,
}

impl Collector for TelemetryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, help, value) in [
            (
                "mcp_supervisor_telemetry_spans_dropped",
                "Spans dropped because the export queue was full",
                self.dropped,
            ),
            (
                "mcp_supervisor_telemetry_export_failures",
                "OTLP export requests that failed or timed out",
                self.failures,
            ),
        ] {
            let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            ConstCounter::new(value).encode(metric)?;
        }
        Ok(())
    }
}

/// One scrape's snapshot. A fresh one per scrape, so no metric outlives its
/// connection after a reload.
#[derive(Debug)]
struct StatusCollector(Vec<ConnectionStatus>);

impl Collector for StatusCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let connections = &self.0;

        // Counter names are given without `_total`: the encoder appends it.
        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_calls",
            "Calls answered, by connection and outcome.",
            None,
            MetricType::Counter,
        )?;
        for status in connections {
            for outcome in OutcomeKind::ALL {
                let labels = [
                    ("connection", status.name.as_str()),
                    ("outcome", outcome.as_str()),
                ];
                ConstCounter::new(status.calls.get(outcome))
                    .encode(family.encode_family(&labels)?)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_call_duration_seconds",
            "Call durations, from admission to answer.",
            None,
            MetricType::Histogram,
        )?;
        for status in connections {
            let durations = &status.durations;
            // Non-cumulative counts per upper bound; the encoder accumulates
            // them and writes `+Inf` from the overflow.
            let buckets: Vec<(f64, u64)> = DURATION_BUCKETS
                .into_iter()
                .zip(durations.buckets)
                .chain([(f64::INFINITY, durations.overflow)])
                .collect();
            let labels = [("connection", status.name.as_str())];
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(
                    durations.sum_seconds,
                    durations.count,
                    &buckets,
                    None,
                )?;
        }

        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_failures",
            "Classified failures seen by attempts, by connection and kind.",
            None,
            MetricType::Counter,
        )?;
        for status in connections {
            // Every kind, zeros included, so rates work from the first failure.
            for kind in FailureKind::ALL.map(FailureKind::as_str) {
                let value = status.failures.get(kind).copied().unwrap_or(0);
                let labels = [("connection", status.name.as_str()), ("kind", kind)];
                ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_parks",
            "Times the connection was parked.",
            None,
            MetricType::Counter,
        )?;
        for status in connections {
            let labels = [("connection", status.name.as_str())];
            ConstCounter::new(status.parks).encode(family.encode_family(&labels)?)?;
        }

        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_probes",
            "Probes sent to the upstream while the connection was parked.",
            None,
            MetricType::Counter,
        )?;
        for status in connections {
            let labels = [("connection", status.name.as_str())];
            ConstCounter::new(status.probes).encode(family.encode_family(&labels)?)?;
        }

        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_restarts",
            "Restarts of the connection's actor after it died.",
            None,
            MetricType::Counter,
        )?;
        for status in connections {
            let labels = [("connection", status.name.as_str())];
            ConstCounter::new(u64::from(status.restarts)).encode(family.encode_family(&labels)?)?;
        }

        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_contract_changes",
            "Tool, prompt and template contracts seen changed since the process started.",
            None,
            MetricType::Counter,
        )?;
        for status in connections {
            let changes = status.contracts.as_ref().map_or(0, |judged| judged.changes);
            let labels = [("connection", status.name.as_str())];
            ConstCounter::new(changes).encode(family.encode_family(&labels)?)?;
        }

        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_contracts",
            "Listed items by what the contract book said of them.",
            None,
            MetricType::Gauge,
        )?;
        for status in connections {
            let Some(judged) = &status.contracts else {
                continue;
            };
            for verdict in Verdict::WORDS {
                let labels = [("connection", status.name.as_str()), ("verdict", verdict)];
                let value = judged.count(verdict) as i64;
                ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "mcp_supervisor_connection_state",
            "1 for the connection's current state, 0 for the others.",
            None,
            MetricType::Gauge,
        )?;
        for status in connections {
            for state in ConnectionState::ALL {
                let labels = [
                    ("connection", status.name.as_str()),
                    ("state", state.as_str()),
                ];
                let value = i64::from(status.state == state);
                ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// The fleet as this node sees it at one scrape.
#[derive(Debug)]
struct FleetCollector(FleetView);

impl Collector for FleetCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let fleet = &self.0;
        let up = i64::from(matches!(fleet.store, StoreHealth::Up { .. }));
        ConstGauge::new(up).encode(encoder.encode_descriptor(
            "mcp_supervisor_fleet_store_up",
            "1 while the fleet's store (Redis) is reachable; 0 while this node works alone.",
            None,
            MetricType::Gauge,
        )?)?;
        ConstGauge::new(fleet.nodes.len() as i64).encode(encoder.encode_descriptor(
            "mcp_supervisor_fleet_nodes",
            "Other nodes of the fleet heard from in the last few seconds.",
            None,
            MetricType::Gauge,
        )?)?;
        let mut shared = encoder.encode_descriptor(
            "mcp_supervisor_fleet_shared",
            "Standings the fleet shares now, by state (parked, held, retired).",
            None,
            MetricType::Gauge,
        )?;
        for label in ["parked", "held", "retired"] {
            let count = fleet
                .shared
                .iter()
                .filter(|now| now.shared.label() == label)
                .count() as i64;
            ConstGauge::new(count).encode(shared.encode_family(&[("state", label)])?)?;
        }
        let mut refused = encoder.encode_descriptor(
            "mcp_supervisor_fleet_refused",
            "Messages from the fleet's store that were not acted on, by reason.",
            None,
            MetricType::Counter,
        )?;
        for (refusal, count) in &fleet.refused {
            ConstCounter::new(*count)
                .encode(refused.encode_family(&[("reason", refusal.as_str())])?)?;
        }
        Ok(())
    }
}

/// The gateway's evictions and refusals at one scrape.
#[derive(Debug)]
struct GatewayCollector([(Protection, u64); Protection::ALL.len()]);

impl Collector for GatewayCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (family, name, help) in [
            (
                Family::Evictions,
                "mcp_supervisor_gateway_evictions",
                "Connections and sessions the gateway closed to admit new ones, by limit.",
            ),
            (
                Family::Refusals,
                "mcp_supervisor_gateway_refusals",
                "Connections, sessions and requests the gateway turned away, by limit or reason.",
            ),
            (
                Family::Forwards,
                "mcp_supervisor_gateway_forwarded",
                "Requests of sessions another node holds, forwarded there or taken from there.",
            ),
            (
                Family::Rests,
                "mcp_supervisor_gateway_rests",
                "Sessions that gave up their memory while quiet, and were restored by a request.",
            ),
        ] {
            let mut series = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (protection, value) in self.0 {
                if protection.family() == family {
                    let labels = [("what", protection.what()), ("reason", protection.reason())];
                    ConstCounter::new(value).encode(series.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::BTreeMap,
        time::{Duration, SystemTime},
    };

    use super::*;
    use crate::connection::CallCounts;

    fn status(name: &str, state: ConnectionState) -> ConnectionStatus {
        ConnectionStatus {
            state,
            since: SystemTime::UNIX_EPOCH,
            ..ConnectionStatus::idle(name, "http")
        }
    }

    fn sample() -> Vec<ConnectionStatus> {
        let mut github = status("github", ConnectionState::Parked);
        github.calls = CallCounts {
            ok: 7,
            tool_error: 1,
            rejected: 2,
            unavailable: 3,
            busy: 4,
            timed_out: 5,
        };
        for millis in [3, 3, 40, 700] {
            github.durations.record(Duration::from_millis(millis));
        }
        github.durations.record(Duration::from_secs(90));
        github.failures = BTreeMap::from([("server", 3), ("timeout", 1)]);
        github.parks = 2;
        github.probes = 3;
        github.restarts = 1;
        vec![github, status("files", ConnectionState::Idle)]
    }

    /// `name{labels}` → value, for every sample line.
    fn samples(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').expect("`series value`");
                (series.to_owned(), value.parse().expect("a number"))
            })
            .collect()
    }

    fn value(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
        *samples
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in {samples:#?}"))
    }

    #[test]
    fn calls_failures_parks_restarts_are_counters_with_their_labels() {
        let text = metrics_text(&sample(), None, None);
        let samples = samples(&text);
        // The labels are written out, not taken from `OutcomeKind`: a label
        // renamed or paired with the wrong count must fail here.
        for (series, expected) in [
            (
                r#"mcp_supervisor_calls_total{connection="github",outcome="ok"}"#,
                7.0,
            ),
            (
                r#"mcp_supervisor_calls_total{connection="github",outcome="tool_error"}"#,
                1.0,
            ),
            (
                r#"mcp_supervisor_calls_total{connection="github",outcome="rejected"}"#,
                2.0,
            ),
            (
                r#"mcp_supervisor_calls_total{connection="github",outcome="unavailable"}"#,
                3.0,
            ),
            (
                r#"mcp_supervisor_calls_total{connection="github",outcome="busy"}"#,
                4.0,
            ),
            (
                r#"mcp_supervisor_calls_total{connection="github",outcome="timed_out"}"#,
                5.0,
            ),
        ] {
            assert_eq!(value(&samples, series), expected, "{series}");
        }
        let outcomes = samples
            .keys()
            .filter(|s| s.starts_with("mcp_supervisor_calls_total{connection=\"github\""))
            .count();
        assert_eq!(outcomes, 6, "one series per outcome, no more");
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_calls_total{connection="files",outcome="ok"}"#
            ),
            0.0
        );
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_failures_total{connection="github",kind="server"}"#
            ),
            3.0
        );
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_failures_total{connection="github",kind="timeout"}"#
            ),
            1.0
        );
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_failures_total{connection="github",kind="auth"}"#
            ),
            0.0
        );
        let kinds = samples
            .keys()
            .filter(|s| s.starts_with("mcp_supervisor_failures_total{connection=\"files\""))
            .count();
        assert_eq!(kinds, FailureKind::ALL.len());
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_parks_total{connection="github"}"#
            ),
            2.0
        );
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_probes_total{connection="github"}"#
            ),
            3.0
        );
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_restarts_total{connection="github"}"#
            ),
            1.0
        );
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_restarts_total{connection="files"}"#
            ),
            0.0
        );
        for family in ["calls", "failures", "parks", "probes", "restarts"] {
            let type_line = format!("# TYPE mcp_supervisor_{family}_total counter");
            assert!(text.contains(&type_line), "{type_line} in\n{text}");
        }
    }

    #[test]
    fn durations_are_a_cumulative_histogram_with_inf_sum_and_count() {
        let text = metrics_text(&sample(), None, None);
        let samples = samples(&text);
        assert!(text.contains("# TYPE mcp_supervisor_call_duration_seconds histogram"));
        let bucket = |le: &str| {
            value(
                &samples,
                &format!(
                    "mcp_supervisor_call_duration_seconds_bucket{{connection=\"github\",le=\"{le}\"}}"
                ),
            )
        };
        assert_eq!(bucket("0.001"), 0.0);
        assert_eq!(bucket("0.005"), 2.0);
        assert_eq!(bucket("0.025"), 2.0);
        assert_eq!(bucket("0.05"), 3.0);
        assert_eq!(bucket("0.5"), 3.0);
        assert_eq!(bucket("1"), 4.0);
        assert_eq!(bucket("60"), 4.0);
        assert_eq!(bucket("+Inf"), 5.0);
        let sum = value(
            &samples,
            r#"mcp_supervisor_call_duration_seconds_sum{connection="github"}"#,
        );
        assert!((sum - 90.746).abs() < 1e-9, "{sum}");
        assert_eq!(
            value(
                &samples,
                r#"mcp_supervisor_call_duration_seconds_count{connection="github"}"#
            ),
            5.0
        );
        // Exactly one +Inf bucket per connection.
        let infs = text
            .lines()
            .filter(|line| line.contains("le=\"+Inf\""))
            .count();
        assert_eq!(infs, 2, "{text}");
        // Monotonic buckets, as Prometheus requires.
        let github_buckets: Vec<f64> = text
            .lines()
            .filter(|line| {
                line.starts_with(
                    "mcp_supervisor_call_duration_seconds_bucket{connection=\"github\"",
                )
            })
            .map(|line| line.rsplit_once(' ').unwrap().1.parse().unwrap())
            .collect();
        assert_eq!(github_buckets.len(), DURATION_BUCKETS.len() + 1);
        assert!(
            github_buckets.windows(2).all(|pair| pair[0] <= pair[1]),
            "{github_buckets:?}"
        );
    }

    #[test]
    fn the_state_gauge_is_one_for_the_current_state_only() {
        let samples = samples(&metrics_text(&sample(), None, None));
        // Written out, not taken from `ConnectionState`, so a state missing from the
        // gauge or renamed fails here.
        let states = [
            "idle",
            "connecting",
            "ready",
            "parked",
            "retired",
            "stopped",
        ];
        for (connection, current) in [("github", "parked"), ("files", "idle")] {
            for state in states {
                let series = format!(
                    "mcp_supervisor_connection_state{{connection=\"{connection}\",state=\"{state}\"}}"
                );
                let expected = if state == current { 1.0 } else { 0.0 };
                assert_eq!(value(&samples, &series), expected, "{series}");
            }
            let prefix = format!("mcp_supervisor_connection_state{{connection=\"{connection}\"");
            let series = samples.keys().filter(|s| s.starts_with(&prefix)).count();
            assert_eq!(series, states.len(), "{connection}: one series per state");
        }
    }

    #[test]
    fn no_connections_still_describes_every_family() {
        let text = metrics_text(&[], None, None);
        assert!(samples(&text).is_empty(), "{text}");
        assert_eq!(
            text.lines()
                .filter(|line| line.starts_with("# TYPE"))
                .count(),
            9,
            "{text}"
        );
    }

    #[test]
    fn every_label_is_from_a_fixed_vocabulary_or_the_name() {
        let text = metrics_text(&sample(), None, None);
        let allowed = ["connection", "outcome", "kind", "state", "le"];
        for line in text.lines().filter(|line| !line.starts_with('#')) {
            let labels = line
                .split_once('{')
                .and_then(|(_, rest)| rest.split_once('}'))
                .map(|(labels, _)| labels)
                .unwrap_or_default();
            for pair in labels.split(',').filter(|pair| !pair.is_empty()) {
                let key = pair.split_once('=').unwrap().0;
                assert!(allowed.contains(&key), "label {key} in {line}");
            }
        }
    }

    #[test]
    fn the_gateways_evictions_and_refusals_are_counted_by_limit() {
        let tallies = Tallies::default();
        tallies.count(Protection::SessionEvictedAtCap);
        tallies.count(Protection::SessionEvictedAtCap);
        tallies.count(Protection::ConnectionRefused);
        tallies.count(Protection::RefusedWhileDraining);
        tallies.count(Protection::UnreadableArguments);
        tallies.count(Protection::ForwardedOut);
        let text = metrics_text(&[], Some(&tallies), None);
        for line in [
            r#"mcp_supervisor_gateway_evictions_total{what="connection",reason="max_connections"} 0"#,
            r#"mcp_supervisor_gateway_evictions_total{what="session",reason="max_sessions"} 2"#,
            r#"mcp_supervisor_gateway_evictions_total{what="session",reason="max_sessions_per_client"} 0"#,
            r#"mcp_supervisor_gateway_refusals_total{what="connection",reason="max_connections"} 1"#,
            r#"mcp_supervisor_gateway_refusals_total{what="session",reason="max_sessions"} 0"#,
            r#"mcp_supervisor_gateway_refusals_total{what="session",reason="max_sessions_per_client"} 0"#,
            r#"mcp_supervisor_gateway_refusals_total{what="request",reason="draining"} 1"#,
            r#"mcp_supervisor_gateway_refusals_total{what="request",reason="unreadable_arguments"} 1"#,
            r#"mcp_supervisor_gateway_refusals_total{what="request",reason="forged_forwarding"} 0"#,
            r#"mcp_supervisor_gateway_forwarded_total{what="request",reason="to_holder"} 1"#,
            r#"mcp_supervisor_gateway_forwarded_total{what="request",reason="from_node"} 0"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line} in:\n{text}"
            );
        }
        assert!(
            !metrics_text(&[], None, None).contains("gateway_"),
            "no gateway, no series"
        );
    }
}

#[cfg(test)]
mod fleet_tests {
    use std::time::SystemTime;

    use super::*;
    use crate::{
        Failure,
        fleet::{Refusal, Shared, SharedNow},
    };

    #[test]
    fn the_fleet_is_measured_with_literal_names() {
        let fleet = FleetView {
            node: "gw-1".into(),
            store: StoreHealth::Up {
                since: SystemTime::now(),
            },
            nodes: Vec::new(),
            shared: vec![SharedNow {
                connection: "a".into(),
                shared: Shared::Parked {
                    until: SystemTime::now(),
                    failure: Failure::new(FailureKind::Server, "HTTP 503"),
                    strikes: 1,
                },
                node: "gw-2".into(),
            }],
            refused: Refusal::ALL
                .map(|refusal| (refusal, u64::from(refusal == Refusal::TooFar)))
                .to_vec(),
        };
        let text = metrics_text(&[], None, Some(&fleet));
        for line in [
            "mcp_supervisor_fleet_store_up 1",
            "mcp_supervisor_fleet_nodes 0",
            r#"mcp_supervisor_fleet_shared{state="parked"} 1"#,
            r#"mcp_supervisor_fleet_shared{state="held"} 0"#,
            r#"mcp_supervisor_fleet_shared{state="retired"} 0"#,
            r#"mcp_supervisor_fleet_refused_total{reason="unauthenticated"} 0"#,
            r#"mcp_supervisor_fleet_refused_total{reason="malformed"} 0"#,
            r#"mcp_supervisor_fleet_refused_total{reason="unknown_version"} 0"#,
            r#"mcp_supervisor_fleet_refused_total{reason="unknown_name"} 0"#,
            r#"mcp_supervisor_fleet_refused_total{reason="too_far"} 1"#,
            r#"mcp_supervisor_fleet_refused_total{reason="unsealed"} 0"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line} in:\n{text}"
            );
        }
        assert!(
            !metrics_text(&[], None, None).contains("fleet_"),
            "alone, no series"
        );
    }
}
