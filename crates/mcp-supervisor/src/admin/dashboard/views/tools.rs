//! `/tools`: every loaded tool across every connection, searched by words.

use std::fmt::Write;

use super::{PAGE_ROWS, badge, pager};
use crate::admin::dashboard::{
    html::{Esc, Segment},
    search::{Hit, ToolSearch},
};

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
