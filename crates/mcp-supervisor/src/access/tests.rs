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

mod properties {
    use proptest::prelude::*;

    use super::super::*;

    const NAMES: [&str; 4] = ["a__x", "a__y", "b__x", "b__yy"];
    const GLOBS: [&str; 7] = [
        "a__*",
        "*__x",
        "b__y?",
        "a__x",
        "connection:b",
        "prompt:a__*",
        "*",
    ];
    const WHO: [&str; 5] = ["anyone", "group:g", "group:h", "client:c", "user:u"];

    fn rules() -> impl Strategy<Value = Vec<(Vec<usize>, Vec<usize>, Vec<usize>)>> {
        let rule = (
            proptest::collection::vec(0..WHO.len(), 1..3),
            proptest::collection::vec(0..GLOBS.len(), 0..3),
            proptest::collection::vec(0..GLOBS.len(), 0..3),
        );
        proptest::collection::vec(rule, 0..6)
    }

    fn caller() -> impl Strategy<Value = Caller> {
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(g, h, c, u)| {
            Caller {
                user: u.then(|| "u".to_owned()),
                client: c.then(|| "c".to_owned()),
                groups: [("g", g), ("h", h)]
                    .into_iter()
                    .filter(|(_, is)| *is)
                    .map(|(name, _)| name.to_owned())
                    .collect(),
                ..Caller::anonymous(Via::Token)
            }
        })
    }

    /// What one glob says of a tool or prompt named `name` of connection
    /// `connection`, read as the docs describe it.
    fn reads(glob: &str, kind: Kind, connection: &str, name: &str) -> bool {
        let (glob_kind, text) = match glob.split_once(':') {
            Some(("connection", text)) => return text == connection,
            Some(("prompt", text)) => (Kind::Prompt, text),
            _ => (Kind::Tool, glob),
        };
        glob_kind == kind
            && globset::Glob::new(text)
                .unwrap()
                .compile_matcher()
                .is_match(name)
    }

    proptest! {
        /// `decide` is the documented reading: no rule allows all; else
        /// the first rule for the caller that names the item decides
        /// (deny before allow), and no such rule denies.
        #[test]
        fn decide_is_the_first_match_the_docs_describe(spec in rules(), caller in caller(), name in 0..NAMES.len(), prompt: bool) {
            let built = Rules::new(
                spec.iter()
                    .map(|(who, allow, deny)| {
                        Rule::new(
                            who.iter().map(|w| Who::parse(WHO[*w]).unwrap()).collect(),
                            allow.iter().map(|g| Pattern::parse(GLOBS[*g]).unwrap()).collect(),
                            deny.iter().map(|g| Pattern::parse(GLOBS[*g]).unwrap()).collect(),
                        )
                    })
                    .collect(),
            );
            let name = NAMES[name];
            let connection = &name[..1];
            let kind = if prompt { Kind::Prompt } else { Kind::Tool };
            let item = Item { kind, name, connection };
            let expected = if spec.is_empty() {
                Decision { allowed: true, rule: None }
            } else {
                spec.iter()
                    .enumerate()
                    .find_map(|(index, (who, allow, deny))| {
                        let for_caller = who.iter().any(|w| Who::parse(WHO[*w]).unwrap().matches(&caller));
                        let denies = deny.iter().any(|g| reads(GLOBS[*g], kind, connection, name));
                        let allows = allow.iter().any(|g| reads(GLOBS[*g], kind, connection, name));
                        (for_caller && (denies || allows)).then_some(Decision { allowed: !denies, rule: Some(index) })
                    })
                    .unwrap_or(Decision { allowed: false, rule: None })
            };
            prop_assert_eq!(built.decide(&caller, item), expected);
        }
    }
}

/// A caller's access token (kept for token exchange) is never shown,
/// serialized (a forwarded caller travels without it) or compared.
#[test]
fn a_callers_subject_token_is_never_shown_or_serialized() {
    const CANARY: &str = "canary-subject-token-6a1f";
    let caller = Caller {
        user: Some("ana".into()),
        subject: crate::access::Subject::new(CANARY),
        ..Caller::anonymous(Via::Token)
    };
    assert_eq!(caller.subject.expose(), Some(CANARY));
    assert!(!format!("{caller:?}").contains(CANARY));
    let json = serde_json::to_string(&caller).unwrap();
    assert!(!json.contains(CANARY), "{json}");
    let back: Caller = serde_json::from_str(&json).unwrap();
    assert_eq!(back.subject.expose(), None);
    assert_eq!(back, caller, "the token is not part of who the caller is");
}
