//! The client scenarios of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, pinned in `scripts/node/package.json`,
//! run on the Node 22 the install script puts in `.tools/`) against **our
//! client**: the supervisor's upstream connection, driven through the CLI by
//! `scripts/conformance-client.sh` (one `[connections.server]` per scenario,
//! `mcp-supervisor tools` and `mcp-supervisor call`).
//!
//! Every client scenario the installed suite lists runs once per
//! protocol generation it applies to (the authorization scenarios, `auth/*`,
//! in tests of their own: the connection uses OAuth, and the script logs in
//! with `mcp-supervisor login`, docs/OAUTH.md): `client --scenario X` alone picks one
//! generation (2025-11-25 unless X was introduced in 2026-07-28), so each run
//! passes `--spec-version`: the newest 2025-era version X lists (the legacy
//! generation, `initialize` handshake), and `2026-07-28` when X lists it (the
//! modern generation, `server/discover` and per-request `_meta`). Extension
//! scenarios (`[extension]`, not on the spec timeline) run once, at the
//! suite's default.
//!
//! A run passes when the suite exits 0 and its `checks.json` has at least one
//! `SUCCESS`, no `FAILURE` and no `WARNING` (a run whose checks are all
//! `SKIPPED` tested nothing). Every run must pass unless
//! `tests/conformance/client-expected-failures.txt` lists it with a reason
//! (`scenario` for all of its runs, `scenario@VERSION` for one); a listed run
//! that passes fails the test too, so the list stays honest.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use e2e::{
    bin,
    conformance::{Verdict, expected_failures, verdict_of},
    installed_tool, repo_root, wait_bounded,
};

const EXPECTED_FAILURES: &str = "tests/conformance/client-expected-failures.txt";

/// The client under test.
const CLIENT_SCRIPT: &str = "scripts/conformance-client.sh";

/// The modern protocol generation; every other dated version is legacy.
const MODERN: &str = "2026-07-28";

/// A run takes a few seconds (the suite gives the client 30 s); this only
/// stops a hung one.
const RUN_BOUND: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generation {
    /// 2025-11-25 and earlier: the `initialize` handshake.
    Legacy,
    /// 2026-07-28: `server/discover`, no session.
    Modern,
    /// Extension scenarios, not tied to a protocol version.
    Extension,
}

/// A client scenario of `list`: its name and the versions (or `extension`)
/// it is listed with.
#[derive(Debug, Clone, PartialEq)]
struct Scenario {
    name: String,
    tags: Vec<String>,
}

/// One run of a scenario: at `spec_version`, or at the suite's default.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    scenario: String,
    spec_version: Option<String>,
}

impl Run {
    /// `scenario@VERSION`, or `scenario` for a run at the suite's default.
    fn id(&self) -> String {
        match &self.spec_version {
            Some(version) => format!("{}@{version}", self.scenario),
            None => self.scenario.clone(),
        }
    }
}

#[test]
fn legacy_generation() {
    check_generation(Generation::Legacy, Family::Protocol);
}

#[test]
fn modern_generation() {
    check_generation(Generation::Modern, Family::Protocol);
}

#[test]
fn extension_scenarios() {
    check_generation(Generation::Extension, Family::Protocol);
}

#[test]
fn authorization_legacy_generation() {
    check_generation(Generation::Legacy, Family::Authorization);
}

#[test]
fn authorization_modern_generation() {
    check_generation(Generation::Modern, Family::Authorization);
}

#[test]
fn authorization_extension_scenarios() {
    check_generation(Generation::Extension, Family::Authorization);
}

/// Which scenarios a test runs: the authorization ones (`auth/*`) or the
/// others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Protocol,
    Authorization,
}

impl Family {
    fn of(scenario: &str) -> Family {
        if scenario.starts_with("auth/") {
            Family::Authorization
        } else {
            Family::Protocol
        }
    }
}

fn check_generation(generation: Generation, family: Family) {
    let expected = expected_failures(&repo_root().join(EXPECTED_FAILURES), "scenario[@VERSION]");
    let runs: Vec<Run> = runs_of(generation, &client_scenarios())
        .into_iter()
        .filter(|run| Family::of(&run.scenario) == family)
        .collect();
    assert!(
        !runs.is_empty(),
        "no {generation:?} {family:?} client scenario to run; the suite's `list` output may \
         have changed"
    );
    let mut problems = Vec::new();
    let mut summary = Vec::new();
    for run in &runs {
        let (verdict, output) = run_scenario(run);
        let listed = expected
            .get(&run.id())
            .or_else(|| expected.get(&run.scenario));
        summary.push(format!(
            "{}: {}",
            run.id(),
            match (&verdict, listed) {
                (Verdict::Passed, _) => "passed".to_owned(),
                (Verdict::Failed(_), Some(reason)) => format!("fails as expected ({reason})"),
                (Verdict::Failed(_), None) => "FAILED".to_owned(),
            }
        ));
        match (verdict, listed) {
            (Verdict::Failed(lines), None) => problems.push(format!(
                "{}: fails:\n    {}\n  suite output (last lines):\n    {}",
                run.id(),
                lines.join("\n    "),
                tail(&output, 30).join("\n    ")
            )),
            (Verdict::Passed, Some(_)) => problems.push(format!(
                "{}: passes now; remove it from {EXPECTED_FAILURES} (or, if another run of \
                 the scenario still fails, list that run as `scenario@VERSION`)",
                run.id()
            )),
            _ => {}
        }
    }
    assert!(
        problems.is_empty(),
        "conformance client scenarios ({generation:?}, {family:?}): {} problem(s):\n{}\n\nall \
         runs:\n  {}",
        problems.len(),
        problems.join("\n"),
        summary.join("\n  ")
    );
}

#[test]
fn the_expected_failures_name_real_runs() {
    let expected = expected_failures(&repo_root().join(EXPECTED_FAILURES), "scenario[@VERSION]");
    let scenarios = client_scenarios();
    let runs: Vec<Run> = [
        Generation::Legacy,
        Generation::Modern,
        Generation::Extension,
    ]
    .into_iter()
    .flat_map(|generation| runs_of(generation, &scenarios))
    .collect();
    for entry in expected.keys() {
        let (scenario, _) = entry.split_once('@').unwrap_or((entry, ""));
        assert!(
            runs.iter()
                .any(|run| run.id() == *entry || run.scenario == *entry),
            "{entry} is listed in {EXPECTED_FAILURES} but no run has that name: the suite \
             has no such client scenario, or does not run it at that version \
             (runs: {:?})",
            runs.iter().map(Run::id).collect::<Vec<_>>()
        );
        assert!(
            entry == scenario || !expected.contains_key(scenario),
            "{entry} and {scenario} are both listed in {EXPECTED_FAILURES}"
        );
    }
}

#[test]
fn the_listing_is_parsed() {
    let listing = "Server scenarios (test against a server):\n  - ping [2025-06-18,2025-11-25]\n\n\
                   Client scenarios (test against a client):\n  - initialize [2025-06-18,2025-11-25]\n  \
                   - tools_call [2025-06-18,2025-11-25,2026-07-28]\n  - auth/basic-cimd [2025-11-25,2026-07-28]\n  \
                   - request-metadata [2026-07-28]\n  - sep-2640-client-no-prefetch [extension]\n\n\
                   Authorization server scenarios (test against an authorization server):\n  \
                   - authorization-code-grant [2025-03-26]\n";
    let scenarios = parse_client_scenarios(listing);
    let names: Vec<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "initialize",
            "tools_call",
            "auth/basic-cimd",
            "request-metadata",
            "sep-2640-client-no-prefetch"
        ]
    );
    let ids = |generation| {
        runs_of(generation, &scenarios)
            .iter()
            .map(Run::id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(Generation::Legacy),
        [
            "initialize@2025-11-25",
            "tools_call@2025-11-25",
            "auth/basic-cimd@2025-11-25"
        ]
    );
    assert_eq!(
        ids(Generation::Modern),
        [
            "tools_call@2026-07-28",
            "auth/basic-cimd@2026-07-28",
            "request-metadata@2026-07-28"
        ]
    );
    assert_eq!(ids(Generation::Extension), ["sep-2640-client-no-prefetch"]);
}

fn node() -> PathBuf {
    installed_tool("node/node_modules/.bin/node")
}

fn suite() -> PathBuf {
    installed_tool("node/node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// The installed suite's client scenarios (`list`).
fn client_scenarios() -> Vec<Scenario> {
    let listed = Command::new(node())
        .arg(suite())
        .arg("list")
        .env("NO_COLOR", "1")
        .output()
        .expect("node runs the conformance suite");
    let listing = String::from_utf8_lossy(&listed.stdout);
    let scenarios = parse_client_scenarios(&listing);
    assert!(
        scenarios.len() >= 10,
        "too few client scenarios in the suite's `list` output ({:?}); its format may have \
         changed:\n{listing}",
        scenarios.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    scenarios
}

/// The `  - NAME [TAG,TAG]` lines under `Client scenarios`.
fn parse_client_scenarios(listing: &str) -> Vec<Scenario> {
    let mut in_client = false;
    let mut scenarios = Vec::new();
    for line in listing.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            in_client = line.starts_with("Client scenarios");
            continue;
        }
        let Some(entry) = line.trim().strip_prefix("- ").filter(|_| in_client) else {
            continue;
        };
        let (name, tags) = entry.split_once(' ').unwrap_or((entry, ""));
        let tags = tags
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(str::to_owned)
            .collect();
        scenarios.push(Scenario {
            name: name.to_owned(),
            tags,
        });
    }
    scenarios
}

/// The runs of `generation`: each scenario listed for it, at the newest
/// version of that generation it lists.
fn runs_of(generation: Generation, scenarios: &[Scenario]) -> Vec<Run> {
    scenarios
        .iter()
        .filter_map(|scenario| {
            let is_date = |tag: &&String| tag.len() == 10 && tag.as_bytes()[4] == b'-';
            let spec_version = match generation {
                Generation::Legacy => Some(
                    scenario
                        .tags
                        .iter()
                        .filter(is_date)
                        .filter(|tag| tag.as_str() < MODERN)
                        .max()?
                        .clone(),
                ),
                Generation::Modern => Some(
                    scenario
                        .tags
                        .iter()
                        .find(|tag| tag.as_str() == MODERN)?
                        .clone(),
                ),
                Generation::Extension => {
                    if !scenario.tags.iter().any(|tag| tag == "extension") {
                        return None;
                    }
                    None
                }
            };
            Some(Run {
                scenario: scenario.name.clone(),
                spec_version,
            })
        })
        .collect()
}

/// Runs `client --command scripts/conformance-client.sh` for `run`: its
/// verdict and the suite's output.
fn run_scenario(run: &Run) -> (Verdict, String) {
    let results = tempfile::tempdir().unwrap();
    let log_path = results.path().join("suite.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut command = Command::new(node());
    command
        .arg(suite())
        .arg("client")
        .arg("--command")
        .arg(repo_root().join(CLIENT_SCRIPT))
        .args(["--scenario", &run.scenario])
        .arg("--output-dir")
        .arg(results.path().join("runs"));
    if let Some(version) = &run.spec_version {
        command.args(["--spec-version", version]);
    }
    let mut child = command
        .env("MCP_SUPERVISOR_BIN", bin("mcp-supervisor"))
        .env("NO_COLOR", "1")
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("the suite's Node runs");
    let status = wait_bounded(&mut child, RUN_BOUND);
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut verdict = match checks_file(&results.path().join("runs")) {
        Some(path) => verdict_of(&path),
        None => Verdict::Failed(vec![
            "the scenario did not run to completion (no checks.json; see the suite output)"
                .to_owned(),
        ]),
    };
    let exit = match status {
        None => Some(format!("the suite did not finish within {RUN_BOUND:?}")),
        Some(status) if !status.success() => Some(format!(
            "the suite exited with {status} (a failed check, or the client exited non-zero \
             or timed out)"
        )),
        Some(_) => None,
    };
    if let Some(exit) = exit {
        verdict = match verdict {
            Verdict::Passed => Verdict::Failed(vec![exit]),
            Verdict::Failed(mut lines) => {
                lines.push(exit);
                Verdict::Failed(lines)
            }
        };
    }
    (verdict, output)
}

/// `runs/SCENARIO-TIMESTAMP/checks.json`: the suite writes one directory per
/// run (none with checks for a scenario it skipped); `auth/NAME` runs are in
/// `runs/auth/NAME-TIMESTAMP/`.
fn checks_file(runs: &Path) -> Option<PathBuf> {
    let entries = |dir: &Path| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .collect::<Vec<_>>()
    };
    let mut found = entries(runs)
        .into_iter()
        .flat_map(|dir| {
            let mut candidates = vec![dir.join("checks.json")];
            candidates.extend(entries(&dir).into_iter().map(|sub| sub.join("checks.json")));
            candidates
        })
        .filter(|path| path.is_file());
    let first = found.next();
    assert!(found.next().is_none(), "more than one run in {runs:?}");
    first
}

fn tail(text: &str, lines: usize) -> Vec<&str> {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].to_vec()
}
