//! Every view against hostile text and inline script, and what each page
//! shows.

use std::time::{Duration, UNIX_EPOCH};

use rmcp::model::Tool;

use super::*;
use crate::{
    ConnectionState, OutcomeKind,
    admin::dashboard::search::{Hit, ToolSearch},
    connection::stats::{CallRecord, FailureRecord},
    failure::{Failure, FailureKind, Phase},
    fleet::{FleetView, Shared, StoreHealth},
    policy::Decision,
    registry::{ConnectionStatus, RecentActivity},
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

/// A held tool whose name and new description are hostile, and an
/// allowed one.
fn hostile_judged() -> crate::contracts::Judged {
    use crate::contracts::{Change, Contract, Seen, Verdict};
    let tool = |description: &str| {
        let mut tool = hostile_tool();
        tool.description = Some(description.to_owned().into());
        Contract::of_tool(&tool)
    };
    let (approved, changed) = (tool("Echo."), tool(HOSTILE));
    crate::contracts::Judged {
        items: vec![
            Seen {
                contract: tool("Echo. "),
                verdict: Verdict::Allowed(vec![crate::config::Allowance::Whitespace]),
            },
            Seen {
                verdict: Verdict::Held(Change::between(&approved, &changed)),
                contract: changed,
            },
        ],
        changes: 1,
        churned: false,
    }
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
    let judged = hostile_judged();
    let held: Vec<(&str, &crate::contracts::Seen)> =
        judged.items.iter().map(|seen| (HOSTILE, seen)).collect();
    assert_no_markup_from(&overview(
        std::slice::from_ref(&row),
        &held,
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
            caller: Some(HOSTILE.into()),
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
    let judged = hostile_judged();
    let view = ConnectionView {
        row: &row,
        parks: 0,
        restarts: 0,
        recent: &recent,
        tools: Some(&tools),
        config: Some(HOSTILE),
        contracts: Some(&judged),
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
        contracts: None,
    };
    let pages = [
        overview(
            std::slice::from_ref(&row),
            &[],
            &Filter::default(),
            UNIX_EPOCH,
        ),
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
    let first = overview(&rows, &[], &Filter::default(), UNIX_EPOCH);
    assert_eq!(first.matches("<tr data-conn=").count(), PAGE_ROWS);
    assert!(first.find("c200").unwrap() < first.find("c000").unwrap());
    assert!(first.contains("250 connections: "));
    assert!(first.contains(">1 parked</a>") && first.contains(">249 idle</a>"));
    assert!(first.contains("data-count=\"retired\">0 retired</a>"));
    assert!(first.contains("Page 1 of 3"));
    let last = overview(
        &rows,
        &[],
        &Filter {
            page: 3,
            ..Filter::default()
        },
        UNIX_EPOCH,
    );
    assert_eq!(last.matches("<tr data-conn=").count(), 50);
    let parked = overview(
        &rows,
        &[],
        &Filter {
            state: "parked".into(),
            ..Filter::default()
        },
        UNIX_EPOCH,
    );
    assert_eq!(parked.matches("<tr data-conn=").count(), 1);
    let named = overview(
        &rows,
        &[],
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
            caller: Some("client:ci-bot".into()),
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
        contracts: None,
    };
    let page = connection(&view, &Filter::default(), UNIX_EPOCH);
    assert!(page.contains(
        "<td>search</td><td>client:ci-bot</td><td><span class=\"outcome\" data-kind=\"unavailable\">"
    ));
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

#[test]
fn held_contracts_come_first_with_their_difference_and_an_approve_button() {
    let row = Row::from_status(&ConnectionStatus::idle("files", "stdio"));
    let recent = RecentActivity::default();
    let judged = hostile_judged();
    let view = ConnectionView {
        row: &row,
        parks: 0,
        restarts: 0,
        recent: &recent,
        tools: None,
        config: Some("/etc/mcp.toml"),
        contracts: Some(&judged),
    };
    let page = connection(&view, &Filter::default(), UNIX_EPOCH);
    let held = page.find("contract held").expect("the held item");
    let allowed = page.find("contract allowed").expect("the allowed item");
    assert!(held < allowed, "held first: {page}");
    assert!(
        page.contains("<dt>description</dt><dd><del>Echo.</del><ins>&lt;script&gt;"),
        "{page}"
    );
    assert!(
        page.contains("data-approve=\"/connections/files/tools/%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%27%26%3C%2Fpre%3E/approve\""),
        "{page}"
    );
    assert!(
        page.contains("mcp-supervisor contracts approve files__&lt;script&gt;"),
        "{page}"
    );
    assert!(
        page.contains("Changes seen since the process started: 1."),
        "{page}"
    );
    let (contracts, standing) = (
        page.find("id=\"contracts\"").unwrap(),
        page.find("id=\"standing\"").unwrap(),
    );
    assert!(
        contracts < standing,
        "a held item comes before the standing"
    );

    let none = crate::contracts::Judged::default();
    let view = ConnectionView {
        contracts: Some(&none),
        ..view
    };
    let page = connection(&view, &Filter::default(), UNIX_EPOCH);
    assert!(page.contains("Every item is the approved one."), "{page}");
    let (contracts, actions) = (
        page.find("id=\"contracts\"").unwrap(),
        page.find("id=\"actions\"").unwrap(),
    );
    assert!(actions < contracts, "nothing held: after the actions");
}
