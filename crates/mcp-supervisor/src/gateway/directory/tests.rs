//! The merged view, built from catalogs made up for each test.

use rmcp::model::{ResourcesCapability, ToolsCapability};
use serde_json::json;

use super::*;
use crate::{config::Prefix, session::Surface};

fn catalog(connection: &str, tools: &[&str], uris: &[&str], templates: &[&str]) -> Arc<Catalog> {
    let config: crate::config::Config = crate::config::Config::from_toml_str(
        &format!("[connections.{connection}]\ntransport = \"stdio\"\ncommand = \"x\"\n"),
        std::path::Path::new("t.toml"),
        &|_| None,
    )
    .unwrap();
    let mut capabilities = ServerCapabilities::default();
    capabilities.tools = Some(ToolsCapability::default());
    if !uris.is_empty() || !templates.is_empty() {
        let mut resources = ResourcesCapability::default();
        resources.subscribe = Some(true);
        capabilities.resources = Some(resources);
    }
    let surface = Surface {
        tools: tools
            .iter()
            .map(|name| {
                serde_json::from_value(json!({"name": name, "inputSchema": {"type": "object"}}))
                    .unwrap()
            })
            .collect(),
        prompts: tools
            .iter()
            .map(|name| Prompt::new(format!("p_{name}"), None::<String>, None))
            .collect(),
        resources: uris
            .iter()
            .map(|uri| serde_json::from_value(json!({"uri": uri, "name": uri})).unwrap())
            .collect(),
        templates: templates
            .iter()
            .map(|t| serde_json::from_value(json!({"uriTemplate": t, "name": t})).unwrap())
            .collect(),
        capabilities,
        instructions: None,
    };
    Arc::new(Catalog::new(
        &config.connections[0],
        surface,
        &mut Default::default(),
    ))
}

fn names(directory: &Directory) -> Vec<String> {
    directory.tools().map(|t| t.name.to_string()).collect()
}

#[test]
fn prefixed_names_route_back() {
    let catalogs = [
        catalog("a", &["echo"], &[], &[]),
        catalog("b", &["echo"], &[], &[]),
    ];
    let directory = Directory::build(Naming::new(Prefix::Always, 2), &catalogs);
    assert_eq!(names(&directory), ["a__echo", "b__echo"]);
    assert_eq!(directory.tool("b__echo"), Some(&Target::new("b", "echo")));
    assert_eq!(
        directory.prompt("a__p_echo"),
        Some(&Target::new("a", "p_echo"))
    );
    assert!(directory.clashes.is_empty());
}

#[test]
fn unprefixed_clashes_keep_the_first_connection() {
    let catalogs = [
        catalog("a", &["echo", "x"], &[], &[]),
        catalog("b", &["echo"], &[], &[]),
    ];
    let directory = Directory::build(Naming::new(Prefix::Never, 2), &catalogs);
    assert_eq!(names(&directory), ["echo", "x"]);
    assert_eq!(directory.tool("echo"), Some(&Target::new("a", "echo")));
    let clashes: Vec<String> = directory.clashes.iter().map(ToString::to_string).collect();
    assert_eq!(
        clashes,
        [
            "connections 'a' and 'b' both offer tool 'echo'",
            "connections 'a' and 'b' both offer prompt 'p_echo'"
        ]
    );
}

/// The share of connection `connection` in `directory`, listed or not.
fn share<'a>(directory: &'a Directory, connection: &str) -> &'a Arc<Share> {
    directory.part(connection).unwrap()
}

#[test]
fn a_rebuild_keeps_the_shares_of_unchanged_catalogs() {
    let naming = Naming::new(Prefix::Always, 3);
    let (a, c) = (
        catalog("a", &["x"], &[], &[]),
        catalog("c", &["z"], &[], &[]),
    );
    let before = Directory::build(
        naming,
        &[a.clone(), catalog("b", &["y"], &[], &[]), c.clone()],
    );
    let changed = catalog("b", &["y2"], &[], &[]);
    let after = Directory::assemble(naming, &[a, changed, c], &[], Some(&before));
    for kept in ["a", "c"] {
        assert!(
            Arc::ptr_eq(share(&before, kept), share(&after, kept)),
            "{kept}"
        );
    }
    assert!(!Arc::ptr_eq(share(&before, "b"), share(&after, "b")));
    assert_eq!(names(&after), ["a__x", "b__y2", "c__z"]);
    assert_eq!(after.tool("b__y2"), Some(&Target::new("b", "y2")));
    assert_eq!(after.tool("b__y"), None);
    assert_eq!(
        after.tool_definition("c__z").map(|tool| tool.name.as_ref()),
        Some("c__z")
    );

    // Unprefixed, a share depends on the ones before it: all are built.
    let plain = Naming::new(Prefix::Never, 2);
    let catalogs = [
        catalog("a", &["echo"], &[], &[]),
        catalog("b", &["echo", "y"], &[], &[]),
    ];
    let before = Directory::build(plain, &catalogs);
    let after = Directory::assemble(plain, &catalogs, &[], Some(&before));
    assert!(!Arc::ptr_eq(share(&before, "a"), share(&after, "a")));
    assert_eq!(names(&after), ["echo", "y"]);
    assert_eq!(after.tool("echo"), Some(&Target::new("a", "echo")));
    assert_eq!(after.clashes.len(), 2, "{:?}", after.clashes);
}

#[test]
fn a_uri_another_connection_comes_to_serve_rebuilds_the_shares_that_list_it() {
    let naming = Naming::new(Prefix::Always, 3);
    let a = catalog("a", &["x"], &["file:///same", "file:///a"], &[]);
    let c = catalog("c", &["z"], &[], &[]);
    let before = Directory::build(
        naming,
        &[a.clone(), catalog("b", &["y"], &[], &[]), c.clone()],
    );
    let uris = |directory: &Directory| -> Vec<String> {
        directory.resources().map(|r| r.uri.clone()).collect()
    };
    assert_eq!(uris(&before), ["file:///same", "file:///a"]);

    // b's tools change, no URI is shared anew: a's share is kept.
    let b2 = catalog("b", &["y2"], &[], &[]);
    let kept = Directory::assemble(naming, &[a.clone(), b2, c.clone()], &[], Some(&before));
    assert!(Arc::ptr_eq(share(&before, "a"), share(&kept, "a")));

    // b now serves a's URI too: both expose it prefixed.
    let b3 = catalog("b", &["y"], &["file:///same"], &[]);
    let after = Directory::assemble(naming, &[a, b3, c.clone()], &[], Some(&kept));
    assert!(!Arc::ptr_eq(share(&kept, "a"), share(&after, "a")));
    assert!(Arc::ptr_eq(share(&kept, "c"), share(&after, "c")));
    assert_eq!(
        uris(&after),
        [
            "mcp-supervisor://a/file:///same",
            "file:///a",
            "mcp-supervisor://b/file:///same"
        ]
    );
    assert_eq!(
        after.resource("mcp-supervisor://b/file:///same"),
        Some(Target::new("b", "file:///same"))
    );
    assert_eq!(
        after.resource("file:///a"),
        Some(Target::new("a", "file:///a"))
    );
}

#[test]
fn retired_connections_are_routed_not_listed() {
    let naming = Naming::new(Prefix::Never, 2);
    let listed = [catalog("a", &["echo"], &[], &[])];
    let hidden = [catalog("r", &["echo", "gone"], &["x://1"], &[])];
    let directory = Directory::assemble(naming, &listed, &hidden, None);
    assert_eq!(names(&directory), ["echo"]);
    assert_eq!(
        directory.tool("echo"),
        Some(&Target::new("a", "echo")),
        "listed first"
    );
    assert_eq!(directory.tool("gone"), Some(&Target::new("r", "gone")));
    assert_eq!(directory.resource("x://1"), Some(Target::new("r", "x://1")));
    assert!(directory.resources().next().is_none());
    assert!(directory.clashes.is_empty(), "{:?}", directory.clashes);
}

#[test]
fn shared_uris_are_prefixed_and_others_pass_through() {
    let catalogs = [
        catalog("a", &[], &["file:///same", "file:///a"], &["a://{id}"]),
        catalog("b", &[], &["file:///same"], &["b://items/{id}{?q}"]),
    ];
    let directory = Directory::build(Naming::new(Prefix::Always, 2), &catalogs);
    let uris: Vec<&str> = directory.resources().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "mcp-supervisor://a/file:///same",
            "file:///a",
            "mcp-supervisor://b/file:///same"
        ]
    );
    let route = |uri: &str| directory.resource(uri);
    assert_eq!(route("file:///a"), Some(Target::new("a", "file:///a")));
    assert_eq!(
        route("mcp-supervisor://b/file:///same"),
        Some(Target::new("b", "file:///same"))
    );
    assert_eq!(route("a://42"), Some(Target::new("a", "a://42")));
    assert_eq!(
        route("b://items/7?q=x"),
        Some(Target::new("b", "b://items/7?q=x"))
    );
    assert_eq!(
        route("a://42/more"),
        None,
        "a simple expansion stops at '/'"
    );
    assert_eq!(
        route("c://nothing"),
        None,
        "two resource servers: no fallback"
    );
    assert_eq!(
        directory.template("b://items/{id}{?q}"),
        Some(&Target::new("b", "b://items/{id}{?q}"))
    );
}

#[test]
fn the_only_resource_server_gets_unknown_uris() {
    let catalogs = [
        catalog("a", &["t"], &[], &[]),
        catalog("r", &[], &["x://1"], &[]),
    ];
    let directory = Directory::build(Naming::new(Prefix::Auto, 2), &catalogs);
    assert_eq!(directory.resource("x://2"), Some(Target::new("r", "x://2")));
}

#[test]
fn capabilities_are_the_union() {
    let tools_only = Directory::build(
        Naming::new(Prefix::Auto, 1),
        &[catalog("a", &["t"], &[], &[])],
    );
    assert!(tools_only.capabilities.resources.is_none());
    assert!(tools_only.capabilities.prompts.is_none());
    let catalogs = [
        catalog("a", &["t"], &[], &[]),
        catalog("r", &[], &["x://1"], &[]),
    ];
    let both = Directory::build(Naming::new(Prefix::Auto, 2), &catalogs);
    let resources = both.capabilities.resources.unwrap();
    assert_eq!(
        (resources.subscribe, resources.list_changed),
        (Some(true), Some(true))
    );
}

#[test]
fn template_matching() {
    assert!(template_matches("file:///{path}", "file:///x"));
    assert!(!template_matches("file:///{path}", "file:///"));
    assert!(template_matches("file:///{+path}", "file:///a/b/c"));
    assert!(template_matches(
        "test://template/{id}/data",
        "test://template/42/data"
    ));
    assert!(!template_matches(
        "test://template/{id}/data",
        "test://template/42/other"
    ));
    assert!(template_matches("x://{a}{?b,c}", "x://1"));
    assert!(template_matches("x://{a}{?b,c}", "x://1?b=2"));
    assert!(template_matches("plain://uri", "plain://uri"));
    assert!(!template_matches("broken://{x", "broken://y"));
}
