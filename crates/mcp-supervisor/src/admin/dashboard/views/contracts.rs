//! Tool contracts on the dashboard (docs/CONTRACTS.md): held items first,
//! each with its field-by-field difference from the approved contract and
//! an Approve button (a tool; the connection's whole listing otherwise),
//! and on the overview the held items of every connection.

use std::fmt::Write;

use serde_json::Value;

use crate::{
    admin::dashboard::html::{Esc, Segment},
    contracts::{Judged, Seen, Verdict},
};

/// Held items first, then the others that differ from their approved
/// contract.
fn differing(judged: &Judged) -> Vec<&Seen> {
    let mut items: Vec<&Seen> = judged
        .items
        .iter()
        .filter(|seen| seen.verdict != Verdict::Approved)
        .collect();
    items.sort_by_key(|seen| !seen.verdict.holds());
    items
}

/// The connection page's "Contracts" section.
pub(crate) fn section(out: &mut String, connection: &str, judged: Option<&Judged>, config: &str) {
    out.push_str("<section aria-labelledby=\"contracts\"><h2 id=\"contracts\">Contracts</h2>");
    let Some(judged) = judged else {
        out.push_str("<p>Not listed yet.</p></section>");
        return;
    };
    let items = differing(judged);
    let _ = write!(
        out,
        "<p class=\"note\">Listed items: {}. Changes seen since the process started: {}.</p>",
        judged.items.len(),
        judged.changes
    );
    if items.is_empty() {
        out.push_str("<p>Every item is the approved one.</p></section>");
        return;
    }
    for seen in items {
        let contract = &seen.contract;
        let _ = write!(
            out,
            "<article class=\"contract {verdict}\"><h3>{kind} <code>{item}</code> \
             <span class=\"verdict\">{verdict}</span></h3>",
            kind = contract.kind.as_str(),
            item = Esc(&contract.name),
            verdict = seen.verdict.as_str(),
        );
        match seen.verdict.change() {
            Some(change) => {
                out.push_str("<dl class=\"diff\">");
                for field in &change.fields {
                    let dangers: Vec<String> = match field {
                        crate::contracts::Field::Annotations => {
                            change.dangers.iter().map(ToString::to_string).collect()
                        }
                        _ => Vec::new(),
                    };
                    let _ = write!(out, "<dt>{field}");
                    if !dangers.is_empty() {
                        let _ = write!(out, " <strong>({})</strong>", Esc(&dangers.join(", ")));
                    }
                    let _ = write!(
                        out,
                        "</dt><dd><del>{}</del><ins>{}</ins></dd>",
                        Esc(&shown(change.approved.field(*field))),
                        Esc(&shown(contract.field(*field))),
                    );
                }
                out.push_str("</dl>");
            }
            None if seen.verdict == Verdict::New => {
                out.push_str("<p>New: nothing approved it yet.</p>");
            }
            None => out.push_str("<p>Differs only in ways the config lets pass.</p>"),
        }
        if seen.verdict.holds() {
            // The approval covers this item as shown, not a later
            // definition and nothing else.
            let path = format!(
                "/connections/{}/{}/{}/approve",
                Segment(connection),
                contract.kind.segment(),
                Segment(&contract.name)
            );
            let reviewed = contract.sha256.as_str();
            let target =
                crate::contracts::approve_target(connection, contract.kind, &contract.name);
            let sha_attribute = format!(" data-sha256=\"{reviewed}\"");
            let sha_flag = format!(" --sha256 {reviewed}");
            let _ = write!(
                out,
                "<p><button type=\"button\" class=\"approve\" data-approve=\"{path}\" \
                 data-label=\"{target}\"{sha_attribute} hidden>Approve</button> \
                 Approve serves the definition above and writes it to the lock.</p>\
                 <p class=\"result\" data-approve-result role=\"status\" aria-live=\"polite\"></p>\
                 <noscript><p>Approve needs JavaScript here; or run \
                 <code>mcp-supervisor contracts approve {target}{sha_flag}{config}</code></p></noscript>",
                path = Esc(&path),
                target = Esc(&target),
            );
        }
        out.push_str("</article>");
    }
    out.push_str("</section>");
}

/// The overview's list of held items, every connection's, before the table.
pub(crate) fn held(out: &mut String, held: &[(&str, &Seen)]) {
    if held.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<section aria-labelledby=\"held\" class=\"held\"><h2 id=\"held\">Held ({})</h2>\
         <p class=\"note\">Their definitions changed since approval (or are new): not listed, \
         not called. Review and approve on the connection's page.</p><ul>",
        held.len()
    );
    for (connection, seen) in held {
        let fields = seen
            .verdict
            .change()
            .map_or_else(|| "new".to_owned(), crate::contracts::Change::describe);
        let _ = write!(
            out,
            "<li><a href=\"/connections/{link}#contracts\">{connection}</a>: {kind} \
             <code>{item}</code> ({fields})</li>",
            link = Segment(connection),
            connection = Esc(connection),
            kind = seen.contract.kind.as_str(),
            item = Esc(&seen.contract.name),
            fields = Esc(&fields),
        );
    }
    out.push_str("</ul></section>");
}

/// A field's value as shown: text as it is, anything else as JSON.
fn shown(value: Option<&Value>) -> String {
    match value {
        None => "(absent)".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}
