//! The dashboard's pages, as pure functions of what the registry reported
//! (tested without actors). Complete without JavaScript: tables, filter
//! forms, paging links, and countdowns as text at render time.
//!
//! # Layout
//!
//! One submodule per page: `overview` (`/`), `connection`
//! (`/connections/{name}`), `tools` (`/tools`) and `fleet` (`/fleet`). The
//! pieces they share (the filter, a row's badge, countdown and sparkline,
//! the pager) and the two login pages are here.

mod connection;
mod contracts;
mod fleet;
mod overview;
mod tools;

#[cfg(test)]
mod tests;

use std::{fmt::Write, time::SystemTime};

use super::{
    html::{Esc, Segment},
    model::{Row, SPARK_SIZE, remaining_text},
};
use crate::admin::status::rfc3339;

pub(crate) use self::{
    connection::{ConnectionView, connection},
    fleet::fleet,
    overview::overview,
    tools::tools,
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

/// A row's latency sparkline, updated live.
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

/// `value` in a span the live feed updates by `name`.
fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "<span data-field=\"{name}\">{value}</span>");
}

/// Previous and next links around "Page n of m", when there is more than
/// one page.
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
