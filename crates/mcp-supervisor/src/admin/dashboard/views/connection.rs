//! `/connections/{name}`: one connection's standing, the reset button, its
//! recent calls and failures, and its tool catalog.

use std::{fmt::Write, time::SystemTime};

use rmcp::model::Tool;

use super::{CATALOG_ROWS, Filter, badge, countdown, field, pager, spark};
use crate::{
    admin::{
        dashboard::{
            html::{Esc, Segment},
            model::{Row, duration_text},
            search::ToolSearch,
        },
        status::rfc3339,
    },
    connection::stats::{CallRecord, FailureRecord},
    policy::Decision,
    registry::RecentActivity,
};

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
    /// The catalog's judged contracts (`None`: not loaded yet).
    pub(crate) contracts: Option<&'a crate::contracts::Judged>,
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
        "<p class=\"crumbs\"><a href=\"/\">Connections</a> ›</p><h1>{name}</h1>"
    );
    // Held items come before anything else; otherwise contracts follow the actions.
    let holds = view
        .contracts
        .is_some_and(|judged| judged.items.iter().any(|seen| seen.verdict.holds()));
    if holds {
        super::contracts::section(&mut out, &row.name, view.contracts, &config);
    }
    let _ = write!(
        out,
        "<section aria-labelledby=\"standing\"><h2 id=\"standing\">Standing</h2>\
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
    if !holds {
        super::contracts::section(&mut out, &row.name, view.contracts, &config);
    }
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
         <th scope=\"col\">At</th><th scope=\"col\">Tool</th><th scope=\"col\">Caller</th>\
         <th scope=\"col\">Outcome</th>\
         <th scope=\"col\">Attempts</th><th scope=\"col\">Latency</th>\
         <th scope=\"col\">Queue wait</th></tr></thead><tbody>",
    );
    for call in calls {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td>\
             <td><span class=\"outcome\" data-kind=\"{kind}\">{kind}</span></td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            rfc3339(call.at),
            Esc(&call.tool),
            Esc(call.caller.as_deref().unwrap_or("—")),
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
