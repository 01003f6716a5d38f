//! `[connections.NAME.on_behalf]`: whose credentials an http connection's
//! calls carry (token exchange, or chosen per caller).

use super::*;
use crate::access::Who;
use crate::config::{CallerCredentials, OnBehalf};

const GATEWAY: &str = r#"
[gateway]
public_url = "https://mcp.example.com/mcp"
auth = { kind = "oauth", issuer = "https://idp.example.com", client_id = "gw", client_secret_env = "GW_SECRET" }
"#;

fn on_behalf_of(config: &Config, name: &str) -> OnBehalf {
    let connection = config.connections.iter().find(|c| c.name == name).unwrap();
    match &connection.transport {
        Transport::Http(http) => http.on_behalf.clone().unwrap(),
        Transport::Stdio(_) => panic!("stdio"),
    }
}

#[test]
fn token_exchange_asks_for_the_upstream_unless_told_and_per_caller_reads_whom() {
    let text = format!(
        r#"{GATEWAY}
[connections.github]
transport = "http"
url = "https://github-mcp.example.com/mcp"
on_behalf = {{ kind = "token_exchange" }}

[connections.jira]
transport = "http"
url = "https://jira.example.com/mcp"
auth = {{ kind = "bearer", token_env = "JIRA_SERVICE" }}

[connections.jira.on_behalf]
kind = "per_caller"
max_sessions = 8
idle_timeout = "90s"
credentials = [
  {{ who = ["group:platform", "user:ana"], token_env = "JIRA_PLATFORM" }},
  {{ who = ["anyone"], token_env = "JIRA_READONLY" }},
]

[connections.wiki]
transport = "http"
url = "https://wiki.example.com/mcp"
on_behalf = {{ kind = "token_exchange", audience = "https://wiki.example.com", scopes = ["wiki:read"] }}
"#
    );
    let config = load_with_env(
        &text,
        &[
            ("GW_SECRET", "s"),
            ("JIRA_SERVICE", "svc"),
            ("JIRA_PLATFORM", "plat"),
            ("JIRA_READONLY", "ro"),
        ],
    )
    .unwrap();
    let github = on_behalf_of(&config, "github");
    assert_eq!(
        github.credentials,
        CallerCredentials::TokenExchange {
            audience: "https://github-mcp.example.com/mcp".into(),
            scopes: Vec::new(),
        }
    );
    assert_eq!(
        github.max_sessions,
        crate::config::DEFAULT_ON_BEHALF_SESSIONS
    );
    assert_eq!(github.idle_timeout, crate::config::DEFAULT_ON_BEHALF_IDLE);
    let wiki = on_behalf_of(&config, "wiki");
    assert_eq!(
        wiki.credentials,
        CallerCredentials::TokenExchange {
            audience: "https://wiki.example.com".into(),
            scopes: vec!["wiki:read".into()],
        }
    );
    let jira = on_behalf_of(&config, "jira");
    assert_eq!(jira.max_sessions, 8);
    assert_eq!(jira.idle_timeout, std::time::Duration::from_secs(90));
    let CallerCredentials::PerCaller(credentials) = &jira.credentials else {
        panic!("{jira:?}")
    };
    assert_eq!(
        credentials[0].who,
        [Who::Group("platform".into()), Who::User("ana".into())]
    );
    assert_eq!(credentials[0].token.expose(), "plat");
    assert_eq!(credentials[1].who, [Who::Anyone]);
    let summary = crate::config::summary(&config);
    assert!(summary.contains("on_behalf=per_caller"), "{summary}");
    assert!(summary.contains("on_behalf=token_exchange"), "{summary}");
    assert!(
        !summary.contains("\"plat\"") && !summary.contains("plat,"),
        "{summary}"
    );
    // The tokens are secrets: Debug shows none of them.
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("\"plat\"") && !debug.contains("\"ro\""),
        "{debug}"
    );
}

#[test]
fn on_behalf_mistakes_are_named_with_their_key() {
    let http = |on_behalf: &str| {
        format!(
            "{GATEWAY}\n[connections.up]\ntransport = \"http\"\nurl = \"https://up.example.com/mcp\"\n{on_behalf}\n"
        )
    };
    let cases = [
        (
            http("on_behalf = { kind = \"everyone\" }"),
            "connections.up.on_behalf.kind: unknown kind; expected \"token_exchange\" or \"per_caller\"",
        ),
        (
            http("on_behalf = { audience = \"x\" }"),
            "connections.up.on_behalf.kind: missing required key 'kind'",
        ),
        (
            http("on_behalf = { kind = \"per_caller\" }"),
            "connections.up.on_behalf.credentials: missing or empty 'credentials'",
        ),
        (
            http(
                "on_behalf = { kind = \"per_caller\", credentials = [{ who = [\"team:x\"], token = \"t\" }] }",
            ),
            "connections.up.on_behalf.credentials[0].who[0]: expected \"anyone\"",
        ),
        (
            http(
                "on_behalf = { kind = \"per_caller\", credentials = [{ who = [\"anyone\"] }] }",
            ),
            "connections.up.on_behalf.credentials[0]: set exactly one of 'token', 'token_env' or 'token_file'",
        ),
        (
            http(
                "on_behalf = { kind = \"per_caller\", scopes = [\"a\"], credentials = [{ who = [\"anyone\"], token = \"t\" }] }",
            ),
            "only valid for kind = \"token_exchange\"",
        ),
        (
            http("on_behalf = { kind = \"token_exchange\", scopes = [\"two words\"] }"),
            "connections.up.on_behalf.scopes[0]: a scope is one non-empty word",
        ),
        (
            http("on_behalf = { kind = \"token_exchange\", max_sessions = 0 }"),
            "connections.up.on_behalf.max_sessions",
        ),
        (
            "[connections.up]\ntransport = \"stdio\"\ncommand = \"x\"\non_behalf = { kind = \"token_exchange\" }\n"
                .to_owned(),
            "'on_behalf' is only valid for transport = \"http\"",
        ),
        (
            "[gateway]\nauth = { kind = \"bearer\", token = \"t\" }\n[connections.up]\ntransport = \"http\"\nurl = \"https://up.example.com/mcp\"\non_behalf = { kind = \"token_exchange\" }\n"
                .to_owned(),
            "connections.up.on_behalf.kind: token exchange needs the gateway's callers to bring access tokens",
        ),
    ];
    for (text, expected) in cases {
        let error = load_with_env(&text, &[("GW_SECRET", "s")])
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{expected}\n got: {error}");
    }
}
