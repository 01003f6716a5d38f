//! `GET /status`: the registry's status snapshot as JSON (docs/SUPERVISION.md,
//! "GET /status").

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::{
    RetireReason,
    fleet::{FleetView, Shared, StoreHealth},
    outcome::OutcomeKind,
    registry::ConnectionStatus,
};

/// `{"connections":[…],"fleet":…}`: one object per connection, in the
/// snapshot's order (the registry's is by name), and the fleet as this node
/// sees it (`null` when the process is alone). Timestamps are RFC 3339 UTC
/// with `Z`.
pub fn status_json(connections: &[ConnectionStatus], fleet: Option<&FleetView>) -> Value {
    json!({
        "connections": connections.iter().map(connection_json).collect::<Vec<_>>(),
        "fleet": fleet.map(fleet_json),
    })
}

fn fleet_json(fleet: &FleetView) -> Value {
    let (since, why) = match &fleet.store {
        StoreHealth::Starting => (None, None),
        StoreHealth::Up { since } => (Some(rfc3339(*since)), None),
        StoreHealth::Down { since, why } => (Some(rfc3339(*since)), Some(why.clone())),
    };
    json!({
        "node": fleet.node,
        "store": { "state": fleet.store.as_str(), "since": since, "why": why },
        "nodes": fleet.nodes.iter().map(|node| json!({
            "node": node.node,
            "seen": rfc3339(node.seen),
            "parked": node.parked,
            "retired": node.retired,
            "gateway": node.gateway.as_ref().map(ToString::to_string),
        })).collect::<Vec<_>>(),
        "shared": fleet.shared.iter().map(|now| {
            let (kind, reason) = match &now.shared {
                Shared::Parked { failure, .. } | Shared::Held { failure, .. } => {
                    (Some(failure.kind.as_str()), None)
                }
                Shared::Retired { reason, failure } => {
                    (failure.as_ref().map(|f| f.kind.as_str()), Some(reason.as_str()))
                }
            };
            json!({
                "connection": now.connection,
                "state": now.shared.label(),
                "until": now.shared.until().map(rfc3339),
                "kind": kind,
                "retired_reason": reason,
                "node": now.node,
            })
        }).collect::<Vec<_>>(),
        "refused": fleet
            .refused
            .iter()
            .map(|(refusal, count)| (refusal.as_str().to_owned(), Value::from(*count)))
            .collect::<serde_json::Map<_, _>>(),
    })
}

fn connection_json(status: &ConnectionStatus) -> Value {
    let last_failure = status.last_failure.as_ref().map(|(failure, at)| {
        json!({
            "kind": failure.kind.as_str(),
            "status": failure.status,
            "at": rfc3339(*at),
        })
    });
    let calls = &status.calls;
    let needs_login = status.needs_login();
    let oauth = status.oauth.as_ref().map(|oauth| {
        json!({
            "logged_in": oauth.logged_in,
            "grant": if oauth.by_itself { "client_credentials" } else { "authorization_code" },
            "needs_login": needs_login,
            "expires_at": oauth.expires_at.map(rfc3339),
            "scopes": oauth.scopes,
            "refreshable": oauth.refreshable,
            "wanted_scopes": oauth.wanted_scopes,
        })
    });
    json!({
        "name": status.name,
        "transport": status.transport,
        "protocol": status.protocol,
        "state": status.state.as_str(),
        "since": rfc3339(status.since),
        "tool_count": status.tool_count,
        "dead": status.dead,
        "last_failure": last_failure,
        "parks": status.parks,
        "probes": status.probes,
        "parked_until": status.parked_until.map(rfc3339),
        "held_until": status.held_until.map(rfc3339),
        "retired_reason": status.retired_reason.map(RetireReason::as_str),
        "restarts": status.restarts,
        "in_flight": status.in_flight,
        "queued": status.queued,
        "calls": OutcomeKind::ALL
            .map(|kind| (kind.as_str().to_owned(), Value::from(calls.get(kind))))
            .into_iter()
            .collect::<serde_json::Map<_, _>>(),
        "oauth": oauth,
        "contracts": status.contracts.as_deref().map(|judged| contracts_json(judged, false)),
    })
}

/// A connection's judged contracts: how many changes were seen, what is
/// held, and each item's hash and verdict; with `forms`, an item that is not
/// the approved one also carries both contracts (`GET /contracts`, for a
/// field-by-field diff).
pub(crate) fn contracts_json(judged: &crate::contracts::Judged, forms: bool) -> Value {
    let items: Vec<Value> = judged
        .items
        .iter()
        .map(|seen| {
            let change = seen.verdict.change();
            let mut item = json!({
                "kind": seen.contract.kind.as_str(),
                "name": seen.contract.name,
                "sha256": seen.contract.sha256,
                "verdict": seen.verdict.as_str(),
                "changed": change.map(|change| change.fields.iter().map(|f| f.as_str()).collect::<Vec<_>>()),
                "dangers": change.map(|change| change.dangers.iter().map(ToString::to_string).collect::<Vec<_>>()),
                "approved_sha256": change.map(|change| change.approved.sha256.as_str()),
            });
            if forms && seen.verdict != crate::contracts::Verdict::Approved {
                item["contract"] = Value::Object((*seen.contract.form).clone());
                item["approved_contract"] =
                    change.map_or(Value::Null, |change| Value::Object((*change.approved.form).clone()));
            }
            item
        })
        .collect();
    json!({
        "changes": judged.changes,
        "held": judged.items.iter().filter(|seen| seen.verdict.holds()).count(),
        "items": items,
    })
}

/// The last second humantime can format (9999-12-31T23:59:59Z).
const LATEST_FORMATTABLE: Duration = Duration::from_secs(253_402_300_799);

/// `2026-01-01T00:00:00Z`. humantime panics before the epoch and fails after
/// year 9999; a status page must do neither, so the time is clamped first.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let clamped = time.clamp(UNIX_EPOCH, UNIX_EPOCH + LATEST_FORMATTABLE);
    humantime::format_rfc3339_seconds(clamped).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConnectionState, Failure, FailureKind, connection::CallCounts};

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// 2026-01-01T00:00:00Z.
    const NEW_YEAR_2026: u64 = 1_767_225_600;

    fn idle(name: &str) -> ConnectionStatus {
        ConnectionStatus {
            since: at(NEW_YEAR_2026),
            ..ConnectionStatus::idle(name, "stdio")
        }
    }

    #[test]
    fn an_idle_connection_has_every_key_with_nulls() {
        let value = status_json(&[idle("files")], None);
        assert_eq!(
            value,
            json!({"connections":[{
                "name": "files", "transport": "stdio", "protocol": null, "state": "idle",
                "since": "2026-01-01T00:00:00Z", "tool_count": null, "dead": false,
                "last_failure": null, "parks": 0, "probes": 0, "parked_until": null, "held_until": null,
                "retired_reason": null, "restarts": 0, "in_flight": 0, "queued": 0,
                "calls": {"ok": 0, "tool_error": 0, "rejected": 0, "unavailable": 0,
                          "busy": 0, "timed_out": 0},
                "oauth": null, "contracts": null
            }], "fleet": null})
        );
    }

    #[test]
    fn an_oauth_connection_shows_its_token_and_whether_it_needs_a_login() {
        use crate::oauth::OAuthStatus;
        let mut docs = idle("docs");
        docs.oauth = Some(OAuthStatus {
            by_itself: false,
            logged_in: true,
            expires_at: Some(at(NEW_YEAR_2026 + 3600)),
            scopes: vec!["read".into()],
            refreshable: true,
            wanted_scopes: Vec::new(),
        });
        let mut revoked = docs.clone();
        revoked.state = ConnectionState::Retired;
        revoked.retired_reason = Some(RetireReason::Failure(FailureKind::NeedsLogin));
        revoked.last_failure = Some((Failure::needs_login("x"), at(NEW_YEAR_2026)));
        // Retired for another reason, its last failure needs_login: the
        // retirement decides (one definition of needs_login).
        let mut crashed = revoked.clone();
        crashed.retired_reason = Some(RetireReason::CrashLoop);
        let value = status_json(&[docs, revoked, crashed], None);
        assert_eq!(
            value["connections"][0]["oauth"],
            json!({"grant": "authorization_code", "logged_in": true, "needs_login": false,
                   "expires_at": "2026-01-01T01:00:00Z", "scopes": ["read"], "refreshable": true,
                   "wanted_scopes": []})
        );
        assert_eq!(value["connections"][1]["oauth"]["needs_login"], true);
        assert_eq!(value["connections"][2]["oauth"]["needs_login"], false);
    }

    #[test]
    fn a_parked_connection_shows_its_failure_and_cooldown() {
        let mut parked = idle("github");
        parked.transport = "http";
        parked.protocol = Some("2025-11-25".into());
        parked.state = ConnectionState::Parked;
        parked.tool_count = Some(14);
        parked.last_failure = Some((Failure::from_status(503, None), at(NEW_YEAR_2026 + 61)));
        parked.parks = 2;
        parked.parked_until = Some(at(NEW_YEAR_2026 + 3600));
        parked.restarts = 1;
        parked.in_flight = 3;
        parked.queued = 4;
        parked.calls = CallCounts {
            ok: 10,
            tool_error: 1,
            rejected: 2,
            unavailable: 3,
            busy: 4,
            timed_out: 5,
        };
        let value = status_json(&[idle("a"), parked], None);
        let connection = &value["connections"][1];
        assert_eq!(connection["name"], "github");
        assert_eq!(connection["transport"], "http");
        assert_eq!(connection["protocol"], "2025-11-25");
        assert_eq!(connection["state"], "parked");
        assert_eq!(connection["tool_count"], 14);
        assert_eq!(
            connection["last_failure"],
            json!({"kind": "server", "status": 503, "at": "2026-01-01T00:01:01Z"})
        );
        assert_eq!(connection["parks"], 2);
        assert_eq!(connection["parked_until"], "2026-01-01T01:00:00Z");
        assert_eq!(connection["restarts"], 1);
        assert_eq!(
            (
                connection["in_flight"].clone(),
                connection["queued"].clone()
            ),
            (json!(3), json!(4))
        );
        assert_eq!(
            connection["calls"],
            json!({"ok": 10, "tool_error": 1, "rejected": 2, "unavailable": 3, "busy": 4, "timed_out": 5})
        );
    }

    #[test]
    fn a_retired_connection_has_a_reason_and_a_failure_without_status() {
        let mut retired = idle("files");
        retired.state = ConnectionState::Retired;
        retired.dead = true;
        retired.retired_reason = Some(RetireReason::CrashLoop);
        retired.last_failure = Some((
            Failure::new(FailureKind::Transport, "child exited"),
            at(NEW_YEAR_2026),
        ));
        let connection = &status_json(&[retired], None)["connections"][0];
        assert_eq!(connection["dead"], true);
        assert_eq!(connection["retired_reason"], "crash_loop");
        assert_eq!(
            connection["last_failure"],
            json!({"kind": "transport", "status": null, "at": "2026-01-01T00:00:00Z"})
        );
        // The failure's reason, method and path stay out of the JSON.
        let keys: Vec<_> = connection["last_failure"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys.len(), 3, "{keys:?}");
    }

    #[test]
    fn no_connections_is_an_empty_list() {
        assert_eq!(
            status_json(&[], None),
            json!({"connections": [], "fleet": null})
        );
    }

    /// The fleet section, written out (a contract of `/status`).
    #[test]
    fn the_fleet_is_shown_as_this_node_sees_it() {
        use crate::fleet::{NodeSeen, Refusal, SharedNow};
        let mut failure = Failure::new(FailureKind::RateLimit, "HTTP 429");
        failure.status = Some(429);
        let fleet = FleetView {
            node: "gw-1".into(),
            store: StoreHealth::Down {
                since: at(NEW_YEAR_2026),
                why: "Redis at r:6379 could not be reached: connection refused".into(),
            },
            nodes: vec![NodeSeen {
                node: "gw-2".into(),
                seen: at(NEW_YEAR_2026 + 1),
                parked: 1,
                retired: 0,
                gateway: Some(url::Url::parse("http://10.0.0.6:7300").unwrap()),
            }],
            shared: vec![
                SharedNow {
                    connection: "github".into(),
                    shared: Shared::Held {
                        until: at(NEW_YEAR_2026 + 10),
                        failure,
                    },
                    node: "gw-2".into(),
                },
                SharedNow {
                    connection: "docs".into(),
                    shared: Shared::Retired {
                        reason: RetireReason::Failure(FailureKind::NeedsLogin),
                        failure: None,
                    },
                    node: "gw-1".into(),
                },
            ],
            refused: Refusal::ALL.map(|refusal| (refusal, 0)).to_vec(),
        };
        assert_eq!(
            status_json(&[], Some(&fleet))["fleet"],
            json!({
                "node": "gw-1",
                "store": {
                    "state": "down",
                    "since": "2026-01-01T00:00:00Z",
                    "why": "Redis at r:6379 could not be reached: connection refused",
                },
                "nodes": [{
                    "node": "gw-2", "seen": "2026-01-01T00:00:01Z", "parked": 1, "retired": 0,
                    "gateway": "http://10.0.0.6:7300/",
                }],
                "shared": [
                    {"connection": "github", "state": "held", "until": "2026-01-01T00:00:10Z",
                     "kind": "rate_limit", "retired_reason": null, "node": "gw-2"},
                    {"connection": "docs", "state": "retired", "until": null,
                     "kind": null, "retired_reason": "needs_login", "node": "gw-1"},
                ],
                "refused": {"unauthenticated": 0, "malformed": 0, "unknown_version": 0, "unknown_name": 0, "too_far": 0, "unsealed": 0, "stale": 0, "replayed": 0},
            })
        );
    }

    #[test]
    fn timestamps_outside_humantime_range_are_clamped_not_panics() {
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(u64::MAX / 4)),
            "9999-12-31T23:59:59Z"
        );
        assert_eq!(
            rfc3339(at(NEW_YEAR_2026) + Duration::from_millis(999)),
            "2026-01-01T00:00:00Z"
        );
    }
}
