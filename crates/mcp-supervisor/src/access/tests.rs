use super::*;

fn rule(who: &[&str], allow: &[&str], deny: &[&str]) -> Rule {
    Rule::new(
        who.iter().map(|w| Who::parse(w).unwrap()).collect(),
        allow.iter().map(|p| Pattern::parse(p).unwrap()).collect(),
        deny.iter().map(|p| Pattern::parse(p).unwrap()).collect(),
    )
}

fn caller(client: &str, groups: &[&str]) -> Caller {
    Caller {
        client: Some(client.to_owned()),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        ..Caller::anonymous(Via::Key)
    }
}

#[test]
fn no_rules_allow_everything() {
    let rules = Rules::default();
    assert!(rules.is_open());
    let decision = rules.decide(
        &Caller::anonymous(Via::Open),
        Item::tool("gh", "gh__delete"),
    );
    assert_eq!(
        decision,
        Decision {
            allowed: true,
            rule: None
        }
    );
}

#[test]
fn the_first_rule_for_the_caller_that_matches_decides_and_no_match_denies() {
    let rules = Rules::new(vec![
        rule(
            &["group:readers", "client:ci-bot"],
            &["github__get_*", "github__list_*", "docs__*"],
            &[],
        ),
        rule(&["group:admins"], &["connection:*"], &["github__delete_*"]),
        rule(&["anyone"], &["docs__search"], &[]),
    ]);
    let reader = caller("agent", &["readers"]);
    let admin = caller("platform", &["admins"]);
    let stranger = caller("x", &[]);
    let tool = |name| Item::tool("github", name);
    assert_eq!(
        rules.decide(&reader, tool("github__get_issue")),
        Decision {
            allowed: true,
            rule: Some(0)
        }
    );
    assert_eq!(
        rules.decide(&reader, tool("github__create_issue")),
        Decision {
            allowed: false,
            rule: None
        }
    );
    assert!(rules.allows(&caller("ci-bot", &[]), tool("github__list_prs")));
    // Deny before allow within a rule; a connection pattern covers all of it.
    assert_eq!(
        rules.decide(&admin, tool("github__delete_repo")),
        Decision {
            allowed: false,
            rule: Some(1)
        }
    );
    assert!(rules.allows(&admin, Item::prompt("github", "github__triage")));
    assert!(rules.allows(&admin, Item::resource("github", "github://repo/x")));
    // A tool pattern is not a prompt pattern.
    assert!(!rules.allows(&reader, Item::prompt("docs", "docs__summary")));
    assert!(rules.allows(&reader, Item::tool("docs", "docs__summary")));
    assert_eq!(
        rules.decide(&stranger, Item::tool("docs", "docs__search")),
        Decision {
            allowed: true,
            rule: Some(2)
        }
    );
    assert!(!rules.allows(&stranger, Item::tool("docs", "docs__fetch")));
    assert!(!rules.allows(&Caller::anonymous(Via::Open), tool("github__get_issue")));
}

#[test]
fn who_matches_users_scopes_and_groups_exactly() {
    let rules = Rules::new(vec![
        rule(&["user:alice"], &["a"], &[]),
        rule(&["scope:tools:call"], &["b"], &[]),
    ]);
    let alice = Caller {
        user: Some("alice".into()),
        ..Caller::anonymous(Via::Token)
    };
    let alicia = Caller {
        user: Some("alicia".into()),
        ..Caller::anonymous(Via::Token)
    };
    let scoped = Caller {
        scopes: vec!["tools:call".into()],
        ..Caller::anonymous(Via::Token)
    };
    assert!(rules.allows(&alice, Item::tool("c", "a")));
    assert!(!rules.allows(&alicia, Item::tool("c", "a")));
    assert!(!rules.allows(&alice, Item::tool("c", "b")));
    assert!(rules.allows(&scoped, Item::tool("c", "b")));
    // A key's name is a client, never a user.
    assert!(!rules.allows(&caller("alice", &[]), Item::tool("c", "a")));
}

#[test]
fn patterns_and_whos_that_do_not_read_are_refused_with_why() {
    assert!(Who::parse("group:").unwrap_err().contains("names nobody"));
    assert!(Who::parse("team:x").unwrap_err().contains("expected"));
    assert!(Who::parse("everyone").unwrap_err().contains("expected"));
    assert!(
        Pattern::parse("verb:x")
            .unwrap_err()
            .contains("unknown kind 'verb:'")
    );
    assert!(Pattern::parse("prompt:").unwrap_err().contains("empty"));
    assert!(Pattern::parse("a[").unwrap_err().contains("not a glob"));
    let uri = Pattern::parse("resource:file:///docs/*").unwrap();
    assert_eq!(uri.kind, Kind::Resource);
    assert!(uri.matches(Item::resource("fs", "file:///docs/a/b.md")));
    assert!(!uri.matches(Item::resource("fs", "file:///etc/passwd")));
}

#[test]
fn a_rule_an_earlier_one_decides_for_the_same_callers_is_unreachable() {
    let rules = Rules::new(vec![
        rule(&["group:readers"], &["docs__*"], &[]),
        rule(&["group:readers"], &[], &["docs__*"]),
        rule(&["anyone"], &["connection:*"], &[]),
        rule(&["client:ci"], &["github__x"], &[]),
        rule(&["group:writers"], &["other"], &[]),
    ]);
    assert_eq!(rules.unreachable(), vec![(1, 0), (3, 2), (4, 2)]);
}

#[test]
fn a_caller_names_its_principal_for_quotas() {
    assert_eq!(Caller::open().principal(), None);
    assert_eq!(caller("ci", &[]).principal().as_deref(), Some("client:ci"));
    let user = Caller {
        user: Some("u1".into()),
        client: Some("app".into()),
        ..Caller::anonymous(Via::Token)
    };
    assert_eq!(user.principal().as_deref(), Some("user:u1"));
}

#[test]
fn a_pattern_that_matches_nothing_offered_is_found() {
    let rules = Rules::new(vec![rule(
        &["anyone"],
        &["gh__get_*", "gh__gte_*", "connection:docs"],
        &["prompt:gh__*"],
    )]);
    let offered = [
        Item::tool("gh", "gh__get_issue"),
        Item::prompt("docs", "docs__summary"),
    ];
    let unmatched: Vec<String> = rules
        .unmatched(&offered)
        .into_iter()
        .map(|(index, pattern)| format!("{index}:{}:{}", pattern.kind.as_str(), pattern.glob()))
        .collect();
    assert_eq!(unmatched, ["0:tool:gh__gte_*", "0:prompt:gh__*"]);
}
