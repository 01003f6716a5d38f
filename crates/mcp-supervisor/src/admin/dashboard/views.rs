//! The dashboard's pages, as pure functions of what the registry reported
//! (tested without actors). Complete without JavaScript: tables, filter
//! forms, paging links, and countdowns as text at render time.

use std::{fmt::Write, time::SystemTime};

use rmcp::model::Tool;

use super::{
    html::{Esc, Segment},
    model::{Row, SPARK_SIZE, STATE_ORDER, counts, duration_text, remaining_text},
    search::{Hit, ToolSearch},
};
use crate::{
    admin::status::rfc3339,
    connection::stats::{CallRecord, FailureRecord},
    fleet::{FleetView, Shared, StoreHealth},
    policy::Decision,
    registry::RecentActivity,
};

/// Rows on one page of the overview and of the tool table.
pub(crate) const PAGE_ROWS: usize = 100;
/// Tools on one page of a connection's catalog.
pub(crate) const CATALOG_ROWS: usize = 50;

/// The overview's filter: a word of the name, a state, a page.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub(crate) struct Filter {
    #[serde(default)]
    pub(crate) q: String,
    #[serde(default)]
    pub(crate) state: String,
    #[serde(default)]
    pub(crate) page: usize,
}

impl Filter {
    fn keeps(&self, row: &Row) -> bool {
        (self.state.is_empty() || row.state == self.state)
            && (self.q.is_empty() || row.name.to_lowercase().contains(&self.q.to_lowercase()))
    }

    /// The query string for another page of the same filter.
    fn page_link(&self, path: &str, page: usize) -> String {
        format!(
            "{path}?q={}&amp;state={}&amp;page={page}",
            Segment(&self.q),
            Segment(&self.state)
        )
    }
}

/// `<span class="badge">` for a row's state, updated live.
fn badge(out: &mut String, row: &Row) {
    let _ = write!(
        out,
        "<span class=\"badge\" data-field=\"badge\" data-state=\"{}\">{}</span>",
        row.state,
        Esc(&row.badge)
    );
}

/// The countdown to the end of a park or hold (text at render time; the
/// script counts down from `data-until`).
fn countdown(out: &mut String, row: &Row, now: SystemTime) {
    let (until, text) = match row.until {
        Some(ms) => {
            let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms);
            (
                ms.to_string(),
                format!("{} ({})", remaining_text(at, now), rfc3339(at)),
            )
        }
        None => (String::new(), String::new()),
    };
    let _ = write!(
        out,
        "<span class=\"until\" data-field=\"until\" data-until=\"{until}\">{text}</span>"
    );
}

fn spark(out: &mut String, row: &Row) {
    let (width, height) = SPARK_SIZE;
    let _ = write!(
        out,
        "<svg class=\"spark\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" \
         height=\"{height}\" role=\"img\" aria-label=\"median latency, last 5 minutes\">\
         <polyline data-field=\"spark\" points=\"{}\"/></svg>",
        row.spark
    );
}

fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "<span data-field=\"{name}\">{value}</span>");
}

/// `/`: every connection, problems first, [`PAGE_ROWS`] to a page.
pub(crate) fn overview(rows: &[Row], filter: &Filter, now: SystemTime) -> String {
    let mut out = String::with_capacity(600 + rows.len().min(PAGE_ROWS) * 900);
    out.push_str("<h1>Connections</h1><p class=\"counts\">");
    let _ = write!(out, "{} connections:", rows.len());
    for (state, count) in counts(rows) {
        let _ = write!(
            out,
            " <a href=\"/?state={state}\" class=\"count\" data-count=\"{state}\">{count} {state}</a>"
        );
    }
    out.push_str("</p>");
    let _ = write!(
        out,
        "<form method=\"get\" action=\"/\" role=\"search\" class=\"filter\">\
         <label for=\"q\">Name contains</label>\
         <input id=\"q\" name=\"q\" type=\"search\" value=\"{}\">\
         <label for=\"state\">State</label><select id=\"state\" name=\"state\">",
        Esc(&filter.q)
    );
    for state in std::iter::once("").chain(STATE_ORDER) {
        let selected = if filter.state == state {
            " selected"
        } else {
            ""
        };
        let label = if state.is_empty() { "any" } else { state };
        let _ = write!(out, "<option value=\"{state}\"{selected}>{label}</option>");
    }
    out.push_str("</select><button type=\"submit\">Filter</button></form>");
    let kept: Vec<&Row> = rows.iter().filter(|row| filter.keeps(row)).collect();
    let pages = kept.len().div_ceil(PAGE_ROWS).max(1);
    let page = filter.page.clamp(1, pages);
    out.push_str(
        "<div class=\"scroll\"><table class=\"connections\"><caption>Connections, problems first\
         </caption><thead><tr><th scope=\"col\">Connection</th><th scope=\"col\">State</th>\
         <th scope=\"col\">Until</th><th scope=\"col\">Transport</th>\
         <th scope=\"col\">Protocol</th><th scope=\"col\">Tools</th>\
         <th scope=\"col\">In flight</th><th scope=\"col\">Queued</th><th scope=\"col\">OK</th>\
         <th scope=\"col\">Errors</th><th scope=\"col\">Last failure</th>\
         <th scope=\"col\">OAuth</th><th scope=\"col\">p50</th><th scope=\"col\">p99</th>\
         <th scope=\"col\">Latency, 5 min</th></tr></thead><tbody>",
    );
    for row in kept.iter().skip((page - 1) * PAGE_ROWS).take(PAGE_ROWS) {
        let _ = write!(
            out,
            "<tr data-conn=\"{name}\"><th scope=\"row\"><a href=\"/connections/{link}\">{name}</a></th><td>",
            name = Esc(&row.name),
            link = Segment(&row.name),
        );
        badge(&mut out, row);
        out.push_str("</td><td>");
        countdown(&mut out, row, now);
        let _ = write!(out, "</td><td>{}</td><td>", row.transport);
        field(&mut out, "protocol", Esc(&row.protocol));
        out.push_str("</td><td>");
        field(&mut out, "tools", &row.tools);
        out.push_str("</td><td>");
        field(&mut out, "in_flight", row.in_flight);
        out.push_str("</td><td>");
        field(&mut out, "queued", row.queued);
        out.push_str("</td><td>");
        field(&mut out, "ok", row.ok);
        out.push_str("</td><td>");
        field(&mut out, "errors", row.errors);
        out.push_str("</td><td>");
        field(&mut out, "last_failure", Esc(&row.last_failure));
        out.push_str("</td><td>");
        field(&mut out, "oauth", Esc(&row.oauth));
        out.push_str("</td><td>");
        field(&mut out, "p50", &row.p50);
        out.push_str("</td><td>");
        field(&mut out, "p99", &row.p99);
        out.push_str("</td><td>");
        spark(&mut out, row);
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table></div>");
    if kept.is_empty() {
        out.push_str("<p>No connection matches.</p>");
    }
    pager(&mut out, page, pages, |n| filter.page_link("/", n));
    out
}

fn pager(out: &mut String, page: usize, pages: usize, link: impl Fn(usize) -> String) {
    if pages <= 1 {
        return;
    }
    out.push_str("<nav class=\"pager\" aria-label=\"Pages\">");
    if page > 1 {
        let _ = write!(
            out,
            "<a href=\"{}\" rel=\"prev\">Previous</a> ",
            link(page - 1)
        );
    }
    let _ = write!(out, "<span>Page {page} of {pages}</span>");
    if page < pages {
        let _ = write!(out, " <a href=\"{}\" rel=\"next\">Next</a>", link(page + 1));
    }
    out.push_str("</nav>");
}

/// Everything one connection's page shows.
#[derive(Debug)]
pub(crate) struct ConnectionView<'a> {
    pub(crate) row: &'a Row,
    pub(crate) parks: u64,
    pub(crate) restarts: u32,
    pub(crate) recent: &'a RecentActivity,
    /// `None`: not loaded yet (looking never connects).
    pub(crate) tools: Option<&'a [Tool]>,
    /// The `--config` file `serve` runs, for the exact commands to show.
    pub(crate) config: Option<&'a str>,
}

/// `/connections/{name}`.
pub(crate) fn connection(view: &ConnectionView<'_>, filter: &Filter, now: SystemTime) -> String {
    let row = view.row;
    let name = Esc(&row.name);
    let config = view.config.map_or_else(
        || " --config FILE".to_owned(),
        |path| format!(" --config {}", Esc(&shell_quote(path))),
    );
    let mut out = String::with_capacity(8_000);
    let _ = write!(
        out,
        "<p class=\"crumbs\"><a href=\"/\">Connections</a> ›</p><h1>{name}</h1>\
         <section aria-labelledby=\"standing\"><h2 id=\"standing\">Standing</h2>\
         <dl class=\"facts\" data-conn=\"{name}\"><dt>State</dt><dd>"
    );
    badge(&mut out, row);
    out.push(' ');
    countdown(&mut out, row, now);
    let _ = write!(
        out,
        "</dd><dt>Transport</dt><dd>{}</dd><dt>Protocol</dt><dd>",
        row.transport
    );
    field(&mut out, "protocol", Esc(&row.protocol));
    let facts: [(&str, &str, String); 9] = [
        ("Tools", "tools", row.tools.clone()),
        ("In flight", "in_flight", row.in_flight.to_string()),
        ("Queued", "queued", row.queued.to_string()),
        ("OK calls", "ok", row.ok.to_string()),
        ("Errors", "errors", row.errors.to_string()),
        ("Last failure", "last_failure", row.last_failure.clone()),
        ("OAuth", "oauth", row.oauth.clone()),
        ("p50, 5 min", "p50", row.p50.clone()),
        ("p99, 5 min", "p99", row.p99.clone()),
    ];
    for (label, key, value) in facts {
        let _ = write!(out, "</dd><dt>{label}</dt><dd>");
        field(&mut out, key, Esc(&value));
    }
    let _ = write!(out, "</dd><dt>Latency, 5 min</dt><dd>");
    spark(&mut out, row);
    let _ = write!(
        out,
        "</dd><dt>Parks</dt><dd>{}</dd><dt>Restarts</dt><dd>{}</dd></dl></section>",
        view.parks, view.restarts
    );
    let _ = write!(
        out,
        "<section aria-labelledby=\"actions\"><h2 id=\"actions\">Actions</h2>\
         <p><button type=\"button\" class=\"reset\" data-reset=\"{name}\" hidden>Reset</button> \
         Reset clears a park or retirement and its strikes; the connection reconnects on next use.</p>\
         <p class=\"result\" data-reset-result role=\"status\" aria-live=\"polite\"></p>\
         <noscript><p>Reset needs JavaScript here; or run \
         <code>mcp-supervisor reset {name}{config}</code></p></noscript>"
    );
    if row.needs_login {
        let _ = write!(
            out,
            "<p class=\"login\">This connection needs a person to log in. Run \
             <code>mcp-supervisor login{config} {name}</code> on this machine.</p>"
        );
    }
    out.push_str("</section>");
    recent_calls(&mut out, &view.recent.calls);
    recent_failures(&mut out, &view.recent.failures);
    catalog(&mut out, &row.name, view.tools, filter);
    out
}

/// A path as one shell word (shown in commands to copy).
fn shell_quote(path: &str) -> String {
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        path.to_owned()
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    }
}

fn recent_calls(out: &mut String, calls: &[CallRecord]) {
    out.push_str(
        "<section aria-labelledby=\"calls\"><h2 id=\"calls\">Recent calls</h2>\
         <p class=\"note\">The last 50 tool calls; never their arguments or results.</p>",
    );
    if calls.is_empty() {
        out.push_str("<p>No calls yet.</p></section>");
        return;
    }
    out.push_str(
        "<div class=\"scroll\"><table><caption>Recent calls, newest first</caption><thead><tr>\
         <th scope=\"col\">At</th><th scope=\"col\">Tool</th><th scope=\"col\">Outcome</th>\
         <th scope=\"col\">Attempts</th><th scope=\"col\">Latency</th>\
         <th scope=\"col\">Queue wait</th></tr></thead><tbody>",
    );
    for call in calls {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td><span class=\"outcome\" data-kind=\"{kind}\">{kind}</span></td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            rfc3339(call.at),
            Esc(&call.tool),
            call.attempts,
            duration_text(call.latency),
            duration_text(call.queued),
            kind = call.kind.as_str(),
        );
    }
    out.push_str("</tbody></table></div></section>");
}

/// A decision as the failure table words it.
fn decision_text(decision: &Decision) -> String {
    match decision {
        Decision::Retry { after } => format!("retry after {}", duration_text(*after)),
        Decision::Reject => "reject".to_owned(),
        Decision::GiveUp => "give up".to_owned(),
        Decision::Park { cooldown, counts } => format!(
            "park for {}{}",
            duration_text(*cooldown),
            if *counts { "" } else { " (not counted)" }
        ),
        Decision::Retire => "retire".to_owned(),
    }
}

fn recent_failures(out: &mut String, failures: &[FailureRecord]) {
    out.push_str(
        "<section aria-labelledby=\"failures\"><h2 id=\"failures\">Recent failures and decisions</h2>",
    );
    if failures.is_empty() {
        out.push_str("<p>No failures.</p></section>");
        return;
    }
    out.push_str(
        "<div class=\"scroll\"><table><caption>The last 20 failed attempts, newest first\
         </caption><thead><tr><th scope=\"col\">At</th><th scope=\"col\">Kind</th>\
         <th scope=\"col\">HTTP</th><th scope=\"col\">Phase</th><th scope=\"col\">Attempt</th>\
         <th scope=\"col\">Reason</th><th scope=\"col\">Decision</th></tr></thead><tbody>",
    );
    for failure in failures {
        let standing = if failure.standing {
            " (already standing)"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td><span class=\"decision\">{}</span>{standing}</td></tr>",
            rfc3339(failure.at),
            failure.kind,
            failure.status.map(|s| s.to_string()).unwrap_or_default(),
            failure.phase.as_str(),
            failure.attempt,
            Esc(&failure.reason),
            decision_text(&failure.decision),
        );
    }
    out.push_str("</tbody></table></div></section>");
}

fn catalog(out: &mut String, connection: &str, tools: Option<&[Tool]>, filter: &Filter) {
    out.push_str("<section aria-labelledby=\"catalog\"><h2 id=\"catalog\">Tools</h2>");
    let Some(tools) = tools else {
        out.push_str(
            "<p>Not loaded yet: the catalog is loaded on the connection's first use \
             (looking here never connects).</p></section>",
        );
        return;
    };
    let search = ToolSearch::new(&filter.q);
    let kept: Vec<&Tool> = tools.iter().filter(|tool| search.matches(tool)).collect();
    let _ = write!(
        out,
        "<form method=\"get\" role=\"search\" class=\"filter\"><label for=\"q\">Search tools</label>\
         <input id=\"q\" name=\"q\" type=\"search\" value=\"{}\">\
         <button type=\"submit\">Search</button></form><p>{} of {} tools.</p>",
        Esc(&filter.q),
        kept.len(),
        tools.len()
    );
    let pages = kept.len().div_ceil(CATALOG_ROWS).max(1);
    let page = filter.page.clamp(1, pages);
    out.push_str(
        "<div class=\"scroll\"><table class=\"catalog\"><caption>Tools this connection offers\
         </caption><thead><tr><th scope=\"col\">Tool</th><th scope=\"col\">Description</th>\
         <th scope=\"col\">Input schema</th></tr></thead><tbody>",
    );
    for tool in kept
        .iter()
        .skip((page - 1) * CATALOG_ROWS)
        .take(CATALOG_ROWS)
    {
        let schema = serde_json::to_string_pretty(&*tool.input_schema).unwrap_or_default();
        let _ = write!(
            out,
            "<tr><th scope=\"row\"><code>{}</code></th><td>{}</td><td><details><summary>schema\
             </summary><pre>{}</pre></details></td></tr>",
            Esc(&tool.name),
            Esc(tool.description.as_deref().unwrap_or("")),
            Esc(&schema),
        );
    }
    out.push_str("</tbody></table></div>");
    let base = format!("/connections/{}", Segment(connection));
    pager(out, page, pages, |n| {
        format!("{base}?q={}&amp;page={n}", Segment(&filter.q))
    });
    out.push_str("</section>");
}

/// `/tools`: every loaded tool across every connection.
pub(crate) fn tools(
    search: &ToolSearch,
    hits: &[Hit<'_>],
    unloaded: &[String],
    page: usize,
) -> String {
    let mut out = String::with_capacity(2_000 + hits.len().min(PAGE_ROWS) * 400);
    let _ = write!(
        out,
        "<h1>Tools</h1><form method=\"get\" action=\"/tools\" role=\"search\" class=\"filter\">\
         <label for=\"q\">Search name, title and description</label>\
         <input id=\"q\" name=\"q\" type=\"search\" value=\"{}\">\
         <button type=\"submit\">Search</button></form><p>{} tools match.</p>",
        Esc(search.query()),
        hits.len()
    );
    let pages = hits.len().div_ceil(PAGE_ROWS).max(1);
    let page = page.clamp(1, pages);
    out.push_str(
        "<div class=\"scroll\"><table class=\"tools\"><caption>Tools across every connection\
         </caption><thead><tr><th scope=\"col\">Tool</th><th scope=\"col\">Connection</th>\
         <th scope=\"col\">State</th><th scope=\"col\">Description</th></tr></thead><tbody>",
    );
    for hit in hits.iter().skip((page - 1) * PAGE_ROWS).take(PAGE_ROWS) {
        let _ = write!(
            out,
            "<tr data-conn=\"{conn}\"><th scope=\"row\"><code>{tool}</code></th>\
             <td><a href=\"/connections/{link}\">{conn}</a></td><td>",
            conn = Esc(hit.connection),
            link = Segment(hit.connection),
            tool = Esc(&hit.tool.name),
        );
        match hit.row {
            Some(row) => badge(&mut out, row),
            None => out.push('—'),
        }
        let _ = write!(
            out,
            "</td><td>{}</td></tr>",
            Esc(hit.tool.description.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</tbody></table></div>");
    pager(&mut out, page, pages, |n| {
        format!("/tools?q={}&amp;page={n}", Segment(search.query()))
    });
    if !unloaded.is_empty() {
        out.push_str("<p class=\"note\">Not loaded yet (their tools show after their first use): ");
        for (index, name) in unloaded.iter().enumerate() {
            let comma = if index == 0 { "" } else { ", " };
            let _ = write!(
                out,
                "{comma}<a href=\"/connections/{}\">{}</a>",
                Segment(name),
                Esc(name)
            );
        }
        out.push_str("</p>");
    }
    out
}

/// `/fleet`: the nodes and what each knows.
pub(crate) fn fleet(view: Option<&FleetView>) -> String {
    let Some(fleet) = view else {
        return "<h1>Fleet</h1><p>This process is not in a fleet (no <code>[fleet]</code> \
                in its config).</p>"
            .to_owned();
    };
    let mut out = String::with_capacity(4_000);
    let store = match &fleet.store {
        StoreHealth::Starting => "not heard from yet".to_owned(),
        StoreHealth::Up { since } => format!("up since {}", rfc3339(*since)),
        StoreHealth::Down { since, why } => {
            format!("down since {}: {}", rfc3339(*since), Esc(why))
        }
    };
    let _ = write!(
        out,
        "<h1>Fleet</h1><dl class=\"facts\"><dt>This node</dt><dd>{}</dd><dt>Store</dt>\
         <dd>{store}</dd></dl><h2>Other nodes</h2>",
        Esc(&fleet.node)
    );
    if fleet.nodes.is_empty() {
        out.push_str("<p>No other node heard from.</p>");
    } else {
        out.push_str(
            "<table><caption>Nodes heard from in the last few seconds</caption><thead><tr>\
             <th scope=\"col\">Node</th><th scope=\"col\">Last seen</th>\
             <th scope=\"col\">Parked</th><th scope=\"col\">Retired</th>\
             <th scope=\"col\">Gateway</th></tr></thead><tbody>",
        );
        for node in &fleet.nodes {
            let _ = write!(
                out,
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                Esc(&node.node),
                rfc3339(node.seen),
                node.parked,
                node.retired,
                Esc(&node
                    .gateway
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()),
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("<h2>Shared standings</h2>");
    if fleet.shared.is_empty() {
        out.push_str("<p>No connection is parked, held or retired across the fleet.</p>");
    } else {
        out.push_str(
            "<table><caption>Standings every node follows</caption><thead><tr>\
             <th scope=\"col\">Connection</th><th scope=\"col\">Standing</th>\
             <th scope=\"col\">Until</th><th scope=\"col\">Why</th>\
             <th scope=\"col\">Learned by</th></tr></thead><tbody>",
        );
        for now in &fleet.shared {
            let why = match &now.shared {
                Shared::Parked { failure, .. } | Shared::Held { failure, .. } => {
                    failure.kind.as_str()
                }
                Shared::Retired { reason, .. } => reason.as_str(),
            };
            let _ = write!(
                out,
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{why}</td><td>{}</td></tr>",
                Esc(&now.connection),
                now.shared.label(),
                now.shared.until().map(rfc3339).unwrap_or_default(),
                Esc(&now.node),
            );
        }
        out.push_str("</tbody></table>");
    }
    out
}

/// What a browser without a session gets on a dashboard page.
pub(crate) fn login_needed() -> String {
    "<h1>Log in</h1><p>This dashboard needs the admin API's token, which a page cannot \
     ask for. Run <code>mcp-supervisor dashboard --config FILE</code> on this machine and \
     open the one-time link it prints (it works once, for 5 minutes).</p>"
        .to_owned()
}

/// `/login` with a good link: the cookie is set by the answer, and the page
/// moves on to `/` by itself. (A refresh, not a redirect: a link opened from
/// another site would make a redirect cross-site, and the browser would not
/// send the new `SameSite=Strict` cookie with it.)
pub(crate) fn logged_in() -> String {
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
     <meta http-equiv=\"refresh\" content=\"0;url=/\"><title>Logged in · mcp-supervisor</title>\
     </head><body><p>Logged in. <a href=\"/\">Open the dashboard</a>.</p></body></html>\n"
        .to_owned()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::{
        ConnectionState, OutcomeKind,
        connection::stats::{CallRecord, FailureRecord},
        failure::{Failure, FailureKind, Phase},
        registry::ConnectionStatus,
    };

    const HOSTILE: &str = "<script>alert(1)</script>\"'&</pre>";

    fn hostile_tool() -> Tool {
        let schema = serde_json::json!({"type":"object","description": HOSTILE});
        Tool::new(
            HOSTILE.to_owned(),
            HOSTILE.to_owned(),
            std::sync::Arc::new(schema.as_object().unwrap().clone()),
        )
    }

    fn assert_no_markup_from(html: &str) {
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("</pre>\"'"), "{html}");
        assert!(
            html.contains("&lt;script&gt;"),
            "the text is still shown: {html}"
        );
    }

    fn hostile_status() -> ConnectionStatus {
        let mut status = ConnectionStatus::idle(HOSTILE, "http");
        status.protocol = Some(HOSTILE.to_owned());
        status.state = ConnectionState::Retired;
        status.retired_reason = Some(crate::RetireReason::Failure(FailureKind::NeedsLogin));
        status
    }

    #[test]
    fn hostile_text_is_escaped_in_every_view() {
        let row = Row::from_status(&hostile_status());
        let now = UNIX_EPOCH;
        assert_no_markup_from(&overview(
            std::slice::from_ref(&row),
            &Filter::default(),
            now,
        ));
        let mut failure = Failure::new(FailureKind::Server, HOSTILE);
        failure.status = Some(503);
        let recent = RecentActivity {
            calls: vec![CallRecord {
                at: now,
                tool: HOSTILE.into(),
                kind: OutcomeKind::Ok,
                attempts: 1,
                latency: Duration::from_millis(3),
                queued: Duration::ZERO,
            }],
            failures: vec![FailureRecord::new(
                &failure,
                Phase::Call,
                1,
                Decision::GiveUp,
                false,
            )],
        };
        let tools = [hostile_tool()];
        let view = ConnectionView {
            row: &row,
            parks: 0,
            restarts: 0,
            recent: &recent,
            tools: Some(&tools),
            config: Some(HOSTILE),
        };
        let page = connection(
            &view,
            &Filter {
                q: HOSTILE.into(),
                ..Filter::default()
            },
            now,
        );
        assert_no_markup_from(&page);
        assert!(page.contains("mcp-supervisor login --config"), "{page}");
        let search = ToolSearch::new("");
        let hits = [Hit {
            connection: HOSTILE,
            tool: &tools[0],
            row: Some(&row),
        }];
        assert_no_markup_from(&tools_page(&search, &hits, &[HOSTILE.to_owned()]));
    }

    fn tools_page(search: &ToolSearch, hits: &[Hit<'_>], unloaded: &[String]) -> String {
        tools(search, hits, unloaded, 1)
    }

    #[test]
    fn no_view_has_inline_script_style_or_handlers() {
        let row = Row::from_status(&hostile_status());
        let recent = RecentActivity::default();
        let view = ConnectionView {
            row: &row,
            parks: 1,
            restarts: 2,
            recent: &recent,
            tools: None,
            config: None,
        };
        let pages = [
            overview(std::slice::from_ref(&row), &Filter::default(), UNIX_EPOCH),
            connection(&view, &Filter::default(), UNIX_EPOCH),
            tools(&ToolSearch::new(""), &[], &[], 1),
            fleet(None),
            login_needed(),
        ];
        for page in pages {
            assert!(!page.contains("<script"), "{page}");
            assert!(!page.contains("style="), "{page}");
            let handler = page.match_indices(" on").any(|(at, _)| {
                let name: String = page[at + 3..]
                    .chars()
                    .take_while(char::is_ascii_lowercase)
                    .collect();
                page[at + 3 + name.len()..].starts_with('=')
            });
            assert!(!handler, "an on* attribute: {page}");
        }
    }

    #[test]
    fn the_overview_pages_problems_first() {
        let mut statuses: Vec<ConnectionStatus> = (0..250)
            .map(|n| ConnectionStatus::idle(&format!("c{n:03}"), "stdio"))
            .collect();
        statuses[200].state = ConnectionState::Parked;
        let rows = super::super::model::sorted(&statuses);
        let first = overview(&rows, &Filter::default(), UNIX_EPOCH);
        assert_eq!(first.matches("<tr data-conn=").count(), PAGE_ROWS);
        assert!(first.find("c200").unwrap() < first.find("c000").unwrap());
        assert!(first.contains("250 connections: "));
        assert!(first.contains(">1 parked</a>") && first.contains(">249 idle</a>"));
        assert!(first.contains("data-count=\"retired\">0 retired</a>"));
        assert!(first.contains("Page 1 of 3"));
        let last = overview(
            &rows,
            &Filter {
                page: 3,
                ..Filter::default()
            },
            UNIX_EPOCH,
        );
        assert_eq!(last.matches("<tr data-conn=").count(), 50);
        let parked = overview(
            &rows,
            &Filter {
                state: "parked".into(),
                ..Filter::default()
            },
            UNIX_EPOCH,
        );
        assert_eq!(parked.matches("<tr data-conn=").count(), 1);
        let named = overview(
            &rows,
            &Filter {
                q: "C24".into(),
                ..Filter::default()
            },
            UNIX_EPOCH,
        );
        assert_eq!(named.matches("<tr data-conn=").count(), 10);
    }

    #[test]
    fn a_connection_page_shows_calls_and_decisions() {
        let row = Row::from_status(&ConnectionStatus::idle("files", "stdio"));
        let mut failure = Failure::new(FailureKind::Server, "HTTP 503");
        failure.status = Some(503);
        let recent = RecentActivity {
            calls: vec![CallRecord {
                at: UNIX_EPOCH,
                tool: "search".into(),
                kind: OutcomeKind::Unavailable,
                attempts: 3,
                latency: Duration::from_millis(40),
                queued: Duration::from_millis(2),
            }],
            failures: vec![FailureRecord::new(
                &failure,
                Phase::Call,
                3,
                Decision::Park {
                    cooldown: Duration::from_secs(30),
                    counts: true,
                },
                false,
            )],
        };
        let view = ConnectionView {
            row: &row,
            parks: 1,
            restarts: 0,
            recent: &recent,
            tools: None,
            config: Some("/etc/my config.toml"),
        };
        let page = connection(&view, &Filter::default(), UNIX_EPOCH);
        assert!(
            page.contains("<td>search</td><td><span class=\"outcome\" data-kind=\"unavailable\">")
        );
        assert!(
            page.contains("<td>3</td><td>40 ms</td><td>2.0 ms</td>"),
            "{page}"
        );
        assert!(page.contains("park for 30.0 s"), "{page}");
        assert!(page.contains("mcp-supervisor reset files --config &#39;/etc/my config.toml&#39;"));
        assert!(page.contains("Not loaded yet"));
        assert!(!page.contains("needs a person to log in"));
    }

    #[test]
    fn the_fleet_page_shows_the_nodes_and_what_they_share() {
        use crate::fleet::{NodeSeen, SharedNow};
        assert!(fleet(None).contains("not in a fleet"));
        let view = FleetView {
            node: HOSTILE.to_owned(),
            store: StoreHealth::Down {
                since: UNIX_EPOCH,
                why: HOSTILE.to_owned(),
            },
            nodes: vec![NodeSeen {
                node: "gw-2".to_owned(),
                seen: UNIX_EPOCH,
                parked: 1,
                retired: 0,
                gateway: None,
            }],
            shared: vec![SharedNow {
                connection: "github".to_owned(),
                shared: Shared::Held {
                    until: UNIX_EPOCH + Duration::from_secs(10),
                    failure: Failure::new(FailureKind::RateLimit, "429"),
                },
                node: "gw-2".to_owned(),
            }],
            refused: Vec::new(),
        };
        let page = fleet(Some(&view));
        assert_no_markup_from(&page);
        assert!(page.contains("down since 1970-01-01T00:00:00Z"), "{page}");
        assert!(
            page.contains(
                "<th scope=\"row\">gw-2</th><td>1970-01-01T00:00:00Z</td><td>1</td><td>0</td>"
            ),
            "{page}"
        );
        assert!(
            page.contains("<th scope=\"row\">github</th><td>held</td><td>1970-01-01T00:00:10Z</td><td>rate_limit</td><td>gw-2</td>"),
            "{page}"
        );
    }
}
