//! `/`: every connection, problems first, with the filter form and pages.

use std::{fmt::Write, time::SystemTime};

use super::{Filter, PAGE_ROWS, badge, countdown, field, pager, spark};
use crate::admin::dashboard::{
    html::{Esc, Segment},
    model::{Row, STATE_ORDER, counts},
};

/// `/`: every connection, problems first, [`PAGE_ROWS`] to a page.
pub(crate) fn overview(
    rows: &[Row],
    held: &[(&str, &crate::contracts::Seen)],
    filter: &Filter,
    now: SystemTime,
) -> String {
    let mut out = String::with_capacity(600 + rows.len().min(PAGE_ROWS) * 900);
    out.push_str("<h1>Connections</h1>");
    super::contracts::held(&mut out, held);
    out.push_str("<p class=\"counts\">");
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
