//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `scripts/node/package.json`, run on the Node 22 the install
//! script puts in `.tools/`) against our conformance upstream
//! (`mcp-conformance-server`) directly, and through the gateway of a real
//! `mcp-supervisor serve` with `prefix = "auto"`, over an HTTP and a stdio
//! upstream, for `--suite all` and `--requirements 2026-07-28`.
//!
//! The promise: **every scenario that passes directly passes through the
//! gateway.** A scenario that fails through the gateway only is a test
//! failure unless `tests/conformance/expected-failures.txt` lists it with a
//! reason; a listed scenario that passes through the gateway fails the test
//! too, so the list stays honest.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use e2e::{HttpUpstream, Served, bin, installed_tool, repo_root, stdio_connection, wait_bounded};
use serde_json::Value;

/// A run of the suite takes about 15 s; this only stops a hung run.
const SUITE_BOUND: Duration = Duration::from_secs(600);

const EXPECTED_FAILURES: &str = "tests/conformance/expected-failures.txt";

/// The conformance upstream's binary.
const UPSTREAM: &str = "mcp-conformance-server";

#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    Passed,
    /// The failing (or warning) checks, one line each.
    Failed(Vec<String>),
}

/// Which scenarios a run covers.
#[derive(Debug, Clone, Copy)]
enum Selection {
    /// `--suite all`: every scenario, both protocol generations.
    All,
    /// `--requirements 2026-07-28`: what that revision requires.
    Requirements2026,
}

impl Selection {
    fn args(self) -> &'static [&'static str] {
        match self {
            Selection::All => &["--suite", "all"],
            Selection::Requirements2026 => &["--requirements", "2026-07-28"],
        }
    }
}

/// How the gateway reaches the conformance upstream.
#[derive(Debug, Clone, Copy)]
enum Upstream {
    Http,
    Stdio,
}

#[test]
fn suite_all_through_the_gateway_over_http() {
    through_the_gateway(Selection::All, Upstream::Http);
}

#[test]
fn suite_all_through_the_gateway_over_stdio() {
    through_the_gateway(Selection::All, Upstream::Stdio);
}

#[test]
fn requirements_2026_through_the_gateway_over_http() {
    through_the_gateway(Selection::Requirements2026, Upstream::Http);
}

#[test]
fn requirements_2026_through_the_gateway_over_stdio() {
    through_the_gateway(Selection::Requirements2026, Upstream::Stdio);
}

fn through_the_gateway(selection: Selection, upstream: Upstream) {
    let expected = expected_failures(&repo_root().join(EXPECTED_FAILURES));

    let direct_server = HttpUpstream::start_binary(UPSTREAM, &[]);
    let (direct, output) = run_suite(selection, &direct_server.url);
    assert!(
        direct.len() >= 40,
        "too few scenarios ran directly ({:?}); the suite's output format may have \
         changed:\n{output}",
        direct.keys().collect::<Vec<_>>()
    );

    // The gateway's upstream: its own instance, so the two runs share no state.
    let http_upstream =
        matches!(upstream, Upstream::Http).then(|| HttpUpstream::start_binary(UPSTREAM, &[]));
    let connection = match &http_upstream {
        Some(server) => format!(
            "[connections.conformance]\ntransport = \"http\"\nurl = \"{}\"\n",
            server.url
        ),
        None => stdio_connection("conformance", &bin(UPSTREAM), &[], ""),
    };
    let config = format!("[gateway]\nlisten = \"127.0.0.1:0\"\nprefix = \"auto\"\n{connection}");
    let mut served = Served::start(&config);
    let (gateway, _) = run_suite(selection, &served.gateway_url);
    assert!(
        matches!(served.child.try_wait(), Ok(None)),
        "the supervisor exited during the suite:\n{}",
        served.stderr()
    );

    let mut problems = Vec::new();
    for (name, verdict) in &gateway {
        let listed = expected.contains_key(name);
        match (verdict, direct.get(name), listed) {
            (Verdict::Failed(checks), Some(Verdict::Passed), false) => problems.push(format!(
                "{name}: passes directly but fails through the gateway:\n    {}",
                checks.join("\n    ")
            )),
            (Verdict::Passed, _, true) => problems.push(format!(
                "{name}: passes through the gateway now; remove it from {EXPECTED_FAILURES}"
            )),
            _ => {}
        }
    }
    for name in direct.keys() {
        if !gateway.contains_key(name) {
            problems.push(format!("{name}: ran directly but not through the gateway"));
        }
    }
    assert!(
        problems.is_empty(),
        "conformance ({selection:?}, {upstream:?} upstream): {} problem(s):\n{}\n\nsupervisor:\n{}",
        problems.len(),
        problems.join("\n"),
        served.stderr()
    );
    // Still serving after the whole suite.
    assert_eq!(served.terminate(Duration::from_secs(30)), Some(0));
}

#[test]
fn the_expected_failures_name_real_scenarios() {
    let expected = expected_failures(&repo_root().join(EXPECTED_FAILURES));
    let listed = Command::new(node())
        .arg(suite())
        .arg("list")
        .output()
        .expect("node runs the conformance suite");
    let listing = String::from_utf8_lossy(&listed.stdout);
    for name in expected.keys() {
        assert!(
            listing.contains(&format!("- {name} ")),
            "{name} is listed in {EXPECTED_FAILURES} but the suite has no such scenario"
        );
    }
}

fn node() -> std::path::PathBuf {
    installed_tool("node/node_modules/.bin/node")
}

fn suite() -> std::path::PathBuf {
    installed_tool("node/node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// Runs the suite's server scenarios of `selection` against `url`: every
/// scenario's verdict, and the suite's output.
fn run_suite(selection: Selection, url: &str) -> (BTreeMap<String, Verdict>, String) {
    let results = tempfile::tempdir().unwrap();
    let log = results.path().join("conformance.log");
    let mut run = Command::new(node())
        .arg(suite())
        .arg("server")
        .args(selection.args())
        .args(["--url", url])
        .arg("--output-dir")
        .arg(results.path().join("runs"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the suite's Node runs");
    let status = wait_bounded(&mut run, SUITE_BOUND);
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.is_some(),
        "the conformance suite did not finish within {SUITE_BOUND:?}:\n{output}"
    );
    let verdicts = verdicts(&output, &results.path().join("runs"));
    (verdicts, output)
}

/// `scenario-name  # reason` per line; `#` lines and blank lines are skipped.
/// Every entry must give a reason.
fn expected_failures(path: &Path) -> BTreeMap<String, String> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let mut entries = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, reason) = line.split_once('#').unwrap_or((line, ""));
        let (name, reason) = (name.trim(), reason.trim());
        assert!(
            !name.contains(char::is_whitespace) && !reason.is_empty(),
            "{}:{}: expected `scenario-name  # reason`, got {line:?}",
            path.display(),
            number + 1
        );
        let duplicate = entries.insert(name.to_owned(), reason.to_owned());
        assert!(duplicate.is_none(), "{name} is listed twice");
    }
    entries
}

/// Every scenario the suite ran, with its verdict. The suite prints one
/// summary line per scenario (`✓ NAME: N passed, M failed`) and writes each
/// scenario's checks to `runs/server-NAME-TIMESTAMP/checks.json`. A scenario
/// passes when it has a checks file and none of its checks is a `FAILURE` or a
/// `WARNING` (the suite's own baseline mode counts warnings as failures too).
fn verdicts(output: &str, runs: &Path) -> BTreeMap<String, Verdict> {
    let mut summary = BTreeSet::new();
    let mut in_summary = false;
    for line in output.lines() {
        in_summary |= line.trim() == "=== SUMMARY ===";
        if !in_summary {
            continue;
        }
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("✓ ").or(line.strip_prefix("✗ "))
            && let Some((name, _counts)) = rest.split_once(": ")
        {
            summary.insert(name.to_owned());
        }
    }
    let mut checks_files = BTreeMap::new();
    for dir in std::fs::read_dir(runs).into_iter().flatten().flatten() {
        let dir_name = dir.file_name().to_string_lossy().into_owned();
        if let Some(name) = scenario_of_run_dir(&dir_name) {
            checks_files.insert(name.to_owned(), dir.path().join("checks.json"));
        }
    }
    summary
        .iter()
        .chain(checks_files.keys())
        .map(|name| {
            let verdict = match checks_files.get(name) {
                Some(path) => verdict_of(path),
                None => Verdict::Failed(vec![
                    "the scenario did not run to completion (no checks.json; see the suite output)"
                        .to_owned(),
                ]),
            };
            (name.clone(), verdict)
        })
        .collect()
}

/// `server-tools-list-2026-01-02T03-04-05-678Z` → `tools-list`.
fn scenario_of_run_dir(dir_name: &str) -> Option<&str> {
    const TIMESTAMP: usize = "2026-01-02T03-04-05-678Z".len();
    let rest = dir_name.strip_prefix("server-")?;
    let cut = rest.len().checked_sub(TIMESTAMP + 1)?;
    let (name, stamp) = rest.split_at(cut);
    let stamp = stamp.strip_prefix('-')?;
    let looks_like_a_stamp = stamp.ends_with('Z')
        && stamp.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && stamp.as_bytes()[10] == b'T';
    (looks_like_a_stamp && !name.is_empty()).then_some(name)
}

fn verdict_of(path: &Path) -> Verdict {
    let checks: Vec<Value> = match std::fs::read_to_string(path)
        .map_err(|error| error.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|error| error.to_string()))
    {
        Ok(checks) => checks,
        Err(error) => return Verdict::Failed(vec![format!("{}: {error}", path.display())]),
    };
    let bad: Vec<String> = checks
        .iter()
        .filter(|check| matches!(check["status"].as_str(), Some("FAILURE" | "WARNING")))
        .map(|check| {
            format!(
                "{} {}: {}",
                check["status"].as_str().unwrap_or("?"),
                check["name"].as_str().unwrap_or("?"),
                check["errorMessage"]
                    .as_str()
                    .or(check["description"].as_str())
                    .unwrap_or("")
            )
        })
        .collect();
    if checks.is_empty() {
        Verdict::Failed(vec!["the scenario made no checks".to_owned()])
    } else if bad.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Failed(bad)
    }
}

#[test]
fn run_directories_name_their_scenario() {
    assert_eq!(
        scenario_of_run_dir("server-tools-list-2026-11-29T20-50-41-734Z"),
        Some("tools-list")
    );
    assert_eq!(
        scenario_of_run_dir("server-server-sse-polling-2026-11-29T20-50-41-734Z"),
        Some("server-sse-polling")
    );
    assert_eq!(scenario_of_run_dir("server-ping"), None);
    assert_eq!(
        scenario_of_run_dir("tools-list-2026-11-29T20-50-41-734Z"),
        None
    );
}
