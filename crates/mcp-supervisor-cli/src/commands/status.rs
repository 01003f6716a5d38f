//! `mcp-supervisor status [--admin HOST:PORT | --config FILE]`: a running
//! process's `/status` as a table.

use std::fmt::Write as _;

use reqwest::Method;
use serde::Deserialize;

use super::admin_client::{AdminClient, block_on};
use crate::{cli::AdminTarget, exit::Exit};

/// `GET /status` (docs/SUPERVISION.md, "GET /status"). Only what the table
/// shows; other keys are ignored, so a newer server still works.
#[derive(Debug, Deserialize)]
struct StatusBody {
    connections: Vec<Row>,
    /// Absent from servers older than the fleet, `null` when alone.
    #[serde(default)]
    fleet: Option<Fleet>,
}

/// The fleet as the node sees it.
#[derive(Debug, Deserialize)]
struct Fleet {
    node: String,
    store: Store,
    nodes: Vec<Node>,
    shared: Vec<SharedRow>,
    refused: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, Deserialize)]
struct Store {
    state: String,
    since: Option<String>,
    why: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Node {
    node: String,
}

#[derive(Debug, Deserialize)]
struct SharedRow {
    connection: String,
    state: String,
    until: Option<String>,
    kind: Option<String>,
    retired_reason: Option<String>,
    node: String,
}

#[derive(Debug, Deserialize)]
struct Row {
    name: String,
    transport: String,
    /// Absent from servers older than the column.
    #[serde(default)]
    protocol: Option<String>,
    state: String,
    tool_count: Option<u64>,
    last_failure: Option<LastFailure>,
    parks: u64,
    parked_until: Option<String>,
    retired_reason: Option<String>,
    restarts: u64,
    in_flight: u64,
    queued: u64,
    calls: Calls,
    #[serde(default)]
    oauth: Option<OAuth>,
}

/// An OAuth connection's tokens.
#[derive(Debug, Deserialize)]
struct OAuth {
    needs_login: bool,
    expires_at: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    wanted_scopes: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct LastFailure {
    kind: String,
    status: Option<u16>,
}

#[derive(Debug, Deserialize)]
struct Calls {
    ok: u64,
    tool_error: u64,
    rejected: u64,
    unavailable: u64,
    busy: u64,
    timed_out: u64,
}

pub(crate) fn run(target: AdminTarget) -> Result<(), Exit> {
    let client = AdminClient::new(target)?;
    let answer = block_on(client.request(Method::GET, &["status"]))??;
    if !answer.status.is_success() {
        return Err(Exit::Failed(answer.error_message()));
    }
    let body: StatusBody = serde_json::from_value(answer.body).map_err(|error| {
        Exit::Failed(format!(
            "the admin API's /status has an unexpected shape: {error}"
        ))
    })?;
    print!("{}", table(&body.connections));
    if let Some(fleet) = &body.fleet {
        print!("{}", fleet_lines(fleet));
    }
    Ok(())
}

/// After the table: the node, the store's health, the other nodes, and
/// each standing the fleet shares.
fn fleet_lines(fleet: &Fleet) -> String {
    let mut out = format!(
        "\nfleet: this node is {}; store {}",
        fleet.node, fleet.store.state
    );
    if let Some(since) = &fleet.store.since {
        let _ = write!(out, " since {since}");
    }
    if let Some(why) = &fleet.store.why {
        let _ = write!(out, " ({why}; this node works alone)");
    }
    let others: Vec<&str> = fleet.nodes.iter().map(|node| node.node.as_str()).collect();
    let _ = writeln!(
        out,
        "; other nodes: {}",
        if others.is_empty() {
            "none".to_owned()
        } else {
            others.join(", ")
        }
    );
    for shared in &fleet.shared {
        let mut line = format!("  {}: {}", shared.connection, shared.state);
        if let Some(until) = &shared.until {
            let _ = write!(line, " until {until}");
        }
        match (&shared.retired_reason, &shared.kind) {
            (Some(reason), _) => {
                let _ = write!(line, " ({reason})");
            }
            (None, Some(kind)) => {
                let _ = write!(line, " ({kind})");
            }
            (None, None) => {}
        }
        let _ = writeln!(line, ", learned by {}", shared.node);
        out.push_str(&line);
    }
    let refused: u64 = fleet.refused.values().sum();
    if refused > 0 {
        let _ = writeln!(
            out,
            "  {refused} messages from the store refused (see /metrics)"
        );
    }
    out
}

const HEADER: [&str; 13] = [
    "NAME",
    "TRANSPORT",
    "PROTOCOL",
    "STATE",
    "TOOLS",
    "IN-FLIGHT",
    "QUEUED",
    "OK",
    "ERR",
    "PARKS",
    "RESTARTS",
    "LAST FAILURE",
    "OAUTH",
];

/// One line per connection, columns aligned, two spaces apart.
fn table(rows: &[Row]) -> String {
    let cells: Vec<[String; 13]> = rows.iter().map(cells).collect();
    let mut widths = HEADER.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header = HEADER.map(str::to_owned);
    for row in std::iter::once(&header).chain(&cells) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(widths) {
            let _ = write!(line, "{cell:<width$}  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn cells(row: &Row) -> [String; 13] {
    let calls = &row.calls;
    // Every answer that was not the tool's own result.
    let errors =
        calls.tool_error + calls.rejected + calls.unavailable + calls.busy + calls.timed_out;
    let state = match (&row.parked_until, &row.retired_reason) {
        (Some(until), _) => format!("{} until {until}", row.state),
        (None, Some(reason)) => format!("{} ({reason})", row.state),
        (None, None) => row.state.clone(),
    };
    let last_failure = row.last_failure.as_ref().map_or_else(
        || "-".to_owned(),
        |failure| match failure.status {
            Some(status) => format!("{}/{status}", failure.kind),
            None => format!("{}/none", failure.kind),
        },
    );
    [
        row.name.clone(),
        row.transport.clone(),
        row.protocol.clone().unwrap_or_else(|| "-".to_owned()),
        state,
        row.tool_count
            .map_or_else(|| "-".to_owned(), |count| count.to_string()),
        row.in_flight.to_string(),
        row.queued.to_string(),
        calls.ok.to_string(),
        errors.to_string(),
        row.parks.to_string(),
        row.restarts.to_string(),
        last_failure,
        row.oauth
            .as_ref()
            .map_or_else(|| "-".to_owned(), |oauth| oauth_cell(&row.name, oauth)),
    ]
}

/// `needs login: mcp-supervisor login NAME`, or the token's expiry and scopes.
fn oauth_cell(name: &str, oauth: &OAuth) -> String {
    if oauth.needs_login {
        let wanted = if oauth.wanted_scopes.is_empty() {
            String::new()
        } else {
            format!(" (with scopes {})", oauth.wanted_scopes.join(" "))
        };
        return format!("needs login{wanted}: mcp-supervisor login {name}");
    }
    let mut cell = match &oauth.expires_at {
        Some(at) => format!("token until {at}"),
        None => "logged in".to_owned(),
    };
    if !oauth.scopes.is_empty() {
        let _ = write!(cell, ", scopes {}", oauth.scopes.join(" "));
    }
    if !oauth.wanted_scopes.is_empty() {
        let _ = write!(
            cell,
            "; the server wants {}: mcp-supervisor login {name}",
            oauth.wanted_scopes.join(" ")
        );
    }
    cell
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_fleet_follows_the_table() {
        let body: StatusBody = serde_json::from_value(json!({"connections": [], "fleet": {
            "node": "gw-1",
            "store": {"state": "down", "since": "2026-01-01T00:00:00Z", "why": "connection refused"},
            "nodes": [{"node": "gw-2", "seen": "x", "parked": 0, "retired": 0, "gateway": null}],
            "shared": [
                {"connection": "github", "state": "held", "until": "2026-01-01T00:00:10Z",
                 "kind": "rate_limit", "retired_reason": null, "node": "gw-2"},
                {"connection": "docs", "state": "retired", "until": null, "kind": null,
                 "retired_reason": "needs_login", "node": "gw-1"}
            ],
            "refused": {"malformed": 2, "too_far": 0}
        }}))
        .unwrap();
        assert_eq!(
            fleet_lines(body.fleet.as_ref().unwrap()),
            "\nfleet: this node is gw-1; store down since 2026-01-01T00:00:00Z (connection refused; \
             this node works alone); other nodes: gw-2\n  \
             github: held until 2026-01-01T00:00:10Z (rate_limit), learned by gw-2\n  \
             docs: retired (needs_login), learned by gw-1\n  \
             2 messages from the store refused (see /metrics)\n"
        );
        // Alone (or an older server): nothing after the table.
        let alone: StatusBody = serde_json::from_value(json!({"connections": []})).unwrap();
        assert!(alone.fleet.is_none());
    }

    fn rows(value: serde_json::Value) -> Vec<Row> {
        serde_json::from_value::<StatusBody>(value)
            .unwrap()
            .connections
    }

    #[test]
    fn the_table_shows_every_column_with_err_summed_and_park_deadline() {
        let body = json!({"connections": [
            {"name": "files", "transport": "stdio", "protocol": "2026-07-28", "state": "ready",
             "since": "2026-01-01T00:00:00Z", "tool_count": 14, "dead": false,
             "last_failure": null, "parks": 0, "parked_until": null, "retired_reason": null,
             "restarts": 0, "in_flight": 1, "queued": 2,
             "calls": {"ok": 10, "tool_error": 0, "rejected": 0, "unavailable": 0, "busy": 0, "timed_out": 0}},
            {"name": "github", "transport": "http", "protocol": null, "state": "parked",
             "since": "2026-01-01T00:00:00Z", "tool_count": null, "dead": false,
             "last_failure": {"kind": "server", "status": 503, "at": "2026-01-01T00:00:00Z"},
             "parks": 1, "parked_until": "2026-01-01T00:00:30Z", "retired_reason": null,
             "restarts": 2, "in_flight": 0, "queued": 0,
             "calls": {"ok": 3, "tool_error": 1, "rejected": 2, "unavailable": 3, "busy": 4, "timed_out": 5}},
            {"name": "old", "transport": "stdio", "state": "retired",
             "since": "2026-01-01T00:00:00Z", "tool_count": 1, "dead": true,
             "last_failure": {"kind": "transport", "status": null, "at": "2026-01-01T00:00:00Z"},
             "parks": 3, "parked_until": null, "retired_reason": "crash_loop",
             "restarts": 6, "in_flight": 0, "queued": 0,
             "calls": {"ok": 0, "tool_error": 0, "rejected": 0, "unavailable": 0, "busy": 0, "timed_out": 0}}
        ]});
        let text = table(&rows(body));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        let columns = |line: &str| {
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            columns(lines[0]),
            [
                "NAME",
                "TRANSPORT",
                "PROTOCOL",
                "STATE",
                "TOOLS",
                "IN-FLIGHT",
                "QUEUED",
                "OK",
                "ERR",
                "PARKS",
                "RESTARTS",
                "LAST",
                "FAILURE",
                "OAUTH"
            ]
        );
        assert_eq!(
            columns(lines[1]),
            [
                "files",
                "stdio",
                "2026-07-28",
                "ready",
                "14",
                "1",
                "2",
                "10",
                "0",
                "0",
                "0",
                "-",
                "-"
            ]
        );
        assert_eq!(
            columns(lines[2]),
            [
                "github",
                "http",
                "-",
                "parked",
                "until",
                "2026-01-01T00:00:30Z",
                "-",
                "0",
                "0",
                "3",
                "15",
                "1",
                "2",
                "server/503",
                "-"
            ]
        );
        assert_eq!(
            columns(lines[3]),
            [
                "old",
                "stdio",
                "-",
                "retired",
                "(crash_loop)",
                "1",
                "0",
                "0",
                "0",
                "0",
                "3",
                "6",
                "transport/none",
                "-"
            ]
        );
        // Aligned: every column starts at the same offset on every line.
        let ok_at = lines[0].find("OK").unwrap();
        assert_eq!(&lines[1][ok_at..ok_at + 2], "10");
        assert_eq!(&lines[2][ok_at..ok_at + 1], "3");
    }

    #[test]
    fn an_oauth_connection_shows_its_token_or_the_login_it_needs() {
        let row = |name: &str, oauth: serde_json::Value| {
            json!({"name": name, "transport": "http", "state": "ready",
             "since": "2026-01-01T00:00:00Z", "tool_count": 1, "dead": false,
             "last_failure": null, "parks": 0, "parked_until": null, "retired_reason": null,
             "restarts": 0, "in_flight": 0, "queued": 0,
             "calls": {"ok": 0, "tool_error": 0, "rejected": 0, "unavailable": 0, "busy": 0, "timed_out": 0},
             "oauth": oauth})
        };
        let text = table(&rows(json!({"connections": [
            row("docs", json!({"logged_in": true, "needs_login": false,
                "expires_at": "2026-01-01T01:00:00Z", "scopes": ["read", "write"], "refreshable": true})),
            row("mail", json!({"logged_in": false, "needs_login": true,
                "expires_at": null, "scopes": [], "refreshable": false})),
        ]})));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].ends_with("token until 2026-01-01T01:00:00Z, scopes read write"),
            "{text}"
        );
        assert!(
            lines[2].ends_with("needs login: mcp-supervisor login mail"),
            "{text}"
        );
    }

    #[test]
    fn no_connections_is_just_the_header() {
        assert_eq!(table(&rows(json!({"connections": []}))).lines().count(), 1);
    }
}
