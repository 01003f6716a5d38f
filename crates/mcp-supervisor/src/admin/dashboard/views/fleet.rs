//! `/fleet`: the nodes this one hears from and the standings they share.

use std::fmt::Write;

use crate::{
    admin::{dashboard::html::Esc, status::rfc3339},
    fleet::{FleetView, Shared, StoreHealth},
};

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
