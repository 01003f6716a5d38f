//! `[gateway]`'s callers (`auth` kind "oauth", `keys`, `public_url`,
//! `audit_log`) and the `[[access]]` rules.

use super::*;
use crate::access::{Caller, Item, Via};

const CONNECTIONS: &str = r#"
[connections.github]
transport = "stdio"
command = "gh-mcp"

[connections.docs]
transport = "stdio"
command = "docs-mcp"
"#;

const KEY_HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

#[test]
fn a_team_config_loads_keys_oauth_and_rules() {
    let text = format!(
        r#"
[gateway]
public_url = "https://mcp.example.com/mcp"
auth = {{ kind = "oauth", issuer = "https://idp.example.com", groups_claim = "roles", scopes = ["mcp"], leeway = "30s" }}
audit_log = "audit.jsonl"

[gateway.keys.ci-bot]
sha256 = "{KEY_HASH}"
groups = ["ci"]

[[access]]
who = ["group:readers", "client:ci-bot"]
allow = ["github__get_*", "github__list_*", "docs__*"]

[[access]]
who = ["group:admins"]
allow = ["connection:*"]
deny = ["github__delete_*"]
{CONNECTIONS}"#
    );
    let config = load_with_env(&text, &[]).unwrap();
    let gateway = &config.gateway;
    let Some(CallerAuth::OAuth(server)) = &gateway.auth else {
        panic!("oauth: {:?}", gateway.auth)
    };
    assert_eq!(server.issuer, "https://idp.example.com");
    assert_eq!(server.groups_claim, "roles");
    assert_eq!(server.scopes, ["mcp"]);
    assert_eq!(server.leeway, std::time::Duration::from_secs(30));
    assert_eq!(
        gateway.public_url.as_deref(),
        Some("https://mcp.example.com/mcp")
    );
    assert_eq!(
        gateway.audit_log,
        Some(AuditLog::File("/etc/mcp/audit.jsonl".into()))
    );
    assert_eq!(gateway.keys.len(), 1);
    assert_eq!(gateway.keys[0].name, "ci-bot");
    assert_eq!(gateway.keys[0].groups, ["ci"]);
    assert_eq!(gateway.keys[0].sha256[..2], [0x9f, 0x86]);
    // The digest is not printed.
    assert!(!format!("{config:?}").contains("9f86d0"));
    let bot = Caller {
        client: Some("ci-bot".into()),
        groups: vec!["ci".into()],
        ..Caller::anonymous(Via::Key)
    };
    assert!(
        config
            .access
            .allows(&bot, Item::tool("github", "github__get_issue"))
    );
    assert!(
        !config
            .access
            .allows(&bot, Item::tool("github", "github__delete_repo"))
    );
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    assert!(summary(&config).contains("auth=oauth"));
    assert!(summary(&config).contains("access   keys=ci-bot rules=2"));
}

#[test]
fn callers_settings_that_cannot_work_are_refused_with_the_key() {
    let cases = [
        (
            "[gateway]\nauth = { kind = \"oauth\", issuer = \"https://idp\" }",
            "gateway.public_url: kind = \"oauth\" needs the gateway's public_url",
        ),
        (
            "[gateway]\npublic_url = \"https://g/mcp\"\nauth = { kind = \"oauth\" }",
            "gateway.auth.issuer: missing required key 'issuer'",
        ),
        (
            "[gateway]\npublic_url = \"https://g/mcp\"\nauth = { kind = \"oauth\", issuer = \"idp\" }",
            "gateway.auth.issuer: must be an absolute URL",
        ),
        (
            "[gateway]\npublic_url = \"https://g/mcp\"\nauth = { kind = \"oauth\", issuer = \"https://i\", token = \"t\" }",
            "gateway.auth.token: not a key of the gateway's kind = \"oauth\"",
        ),
        (
            "[gateway]\npublic_url = \"https://g/mcp\"\nauth = { kind = \"oauth\", issuer = \"https://i\", client_id = \"g\" }",
            "'client_id' and 'client_secret_env' go together",
        ),
        (
            "[gateway]\nauth = { kind = \"bearer\", token = \"t\", issuer = \"https://i\" }",
            "gateway.auth.issuer: only valid for kind = \"oauth\"",
        ),
        (
            "[gateway.keys.ci]\nsha256 = \"abc\"",
            "gateway.keys.ci.sha256: expected the key's SHA-256 as 64 hex digits",
        ),
        (
            "[gateway.keys.ci]\ngroups = [\"x\"]",
            "gateway.keys.ci.sha256: missing required key 'sha256'",
        ),
        (
            &format!(
                "[gateway.keys.a]\nsha256 = \"{KEY_HASH}\"\n[gateway.keys.b]\nsha256 = \"{KEY_HASH}\""
            ),
            "gateway.keys.b.sha256: the same key as 'a'",
        ),
        (
            &format!("[gateway.keys.\"a b\"]\nsha256 = \"{KEY_HASH}\""),
            "a key's name is letters, digits",
        ),
        (
            "[gateway]\naudit_log = \"\"",
            "gateway.audit_log: must not be empty",
        ),
    ];
    for (text, expected) in cases {
        let error = load(text).expect_err(text).to_string();
        assert!(
            error.contains(expected),
            "{text}\n got: {error}\nwant: {expected}"
        );
    }
}

#[test]
fn rules_are_checked_and_their_problems_name_the_line() {
    let cases = [
        (
            "[[access]]\nallow = [\"docs__*\"]",
            "access[0].who: missing or empty 'who'",
        ),
        (
            "[[access]]\nwho = [\"team:x\"]\nallow = [\"docs__*\"]",
            "access[0].who[0]: expected \"anyone\"",
        ),
        (
            "[[access]]\nwho = [\"anyone\"]",
            "access[0]: a rule allows or denies something",
        ),
        (
            "[[access]]\nwho = [\"anyone\"]\nallow = [\"verb:x\"]",
            "access[0].allow[0]: unknown kind 'verb:'",
        ),
        (
            "[[access]]\nwho = [\"anyone\"]\ndeny = [\"a[\"]",
            "access[0].deny[0]: not a glob",
        ),
        (
            "[[access]]\nwho = [\"anyone\"]\nallow = [\"gitlab__get_*\"]",
            "access[0].allow[0]: names connection 'gitlab', which is not configured",
        ),
        (
            "[[access]]\nwho = [\"anyone\"]\nallow = [\"connection:jira\"]",
            "names connection 'jira'",
        ),
        (
            "[[access]]\nwho = [\"anyone\"]\nallow = [\"docs__*\"]\ncolour = 1",
            "access[0].colour: unknown key 'colour'",
        ),
    ];
    for (rules, expected) in cases {
        let text = format!("{CONNECTIONS}\n{rules}\n");
        let error = load(&text).expect_err(rules).to_string();
        assert!(
            error.contains(expected),
            "{rules}\n got: {error}\nwant: {expected}"
        );
    }
    // Where the rule is: its [[access]] header's line.
    let text = format!("{CONNECTIONS}\n[[access]]\nwho = [\"anyone\"]\nallow = [\"gitlab__x\"]\n");
    let line = text.lines().position(|l| l == "[[access]]").unwrap() + 1;
    let error = load(&text).unwrap_err().to_string();
    assert!(error.contains(&format!("line {line}")), "{error}");
    // Globs over names that cannot be known (plain names, URIs) pass.
    let text = format!(
        "{CONNECTIONS}\n[[access]]\nwho = [\"anyone\"]\nallow = [\"*__get_*\", \"resource:file:///*\", \"prompt:docs__*\"]\n"
    );
    load(&text).unwrap();
}

#[test]
fn a_rule_no_caller_reaches_is_a_warning_with_both_lines() {
    let text = format!(
        "{CONNECTIONS}\n[[access]]\nwho = [\"anyone\"]\nallow = [\"connection:*\"]\n\n[[access]]\nwho = [\"group:ops\"]\ndeny = [\"github__delete_*\"]\n"
    );
    let config = load(&text).unwrap();
    assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);
    let warning = &config.warnings[0];
    let first = text.lines().position(|l| l == "[[access]]").unwrap() + 1;
    assert!(
        warning.contains("access[1]")
            && warning.contains("unreachable")
            && warning.contains("access[0]")
            && warning.contains(&format!("line {first}")),
        "{warning}"
    );
}

#[test]
fn limits_load_and_what_cannot_work_is_refused() {
    let text = "[[limits]]\nwho = [\"group:ci\"]\ncalls_per_minute = 600\nconcurrent_calls = 8\n";
    let config = load(text).unwrap();
    let ci = Caller {
        groups: vec!["ci".into()],
        ..Caller::anonymous(Via::Key)
    };
    let (index, limit) = config.limits.of(&ci).unwrap();
    assert_eq!(
        (index, limit.per_minute, limit.at_once),
        (0, Some(600), Some(8))
    );
    assert!(config.limits.of(&Caller::anonymous(Via::Open)).is_none());
    for (text, expected) in [
        (
            "[[limits]]\ncalls_per_minute = 5",
            "limits[0].who: missing or empty 'who'",
        ),
        (
            "[[limits]]\nwho = [\"anyone\"]",
            "limits[0]: a limit limits something",
        ),
        (
            "[[limits]]\nwho = [\"anyone\"]\ncalls_per_minute = 0",
            "limits[0].calls_per_minute: must be greater than zero",
        ),
        (
            "[[limits]]\nwho = [\"anyone\"]\nconcurrent_calls = -1",
            "limits[0].concurrent_calls",
        ),
    ] {
        let error = load(text).expect_err(text).to_string();
        assert!(
            error.contains(expected),
            "{text}\n got: {error}\nwant: {expected}"
        );
    }
}
