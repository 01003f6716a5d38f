//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `scripts/node/package.json`) against the gateway of a real
//! `mcp-supervisor serve` with stdio upstreams and `expose = "both"`.
//!
//! The core scenarios must pass. Every other scenario passes or is listed, with
//! its reason, in `tests/conformance/expected-failures.txt`; a listed scenario
//! that passes fails the test as well, so the list stays honest.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use e2e::{Served, bin, installed_tool, repo_root, stdio_connection, wait_bounded};
use serde_json::Value;

/// Must pass, and may never be listed as expected failures.
const REQUIRED: [&str; 4] = [
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
];

/// The whole suite takes a few seconds; this only stops a hung run.
const SUITE_BOUND: Duration = Duration::from_secs(600);

const EXPECTED_FAILURES: &str = "tests/conformance/expected-failures.txt";

#[derive(Debug)]
enum Verdict {
    Passed,
    /// The failing (or warning) checks, one line each.
    Failed(Vec<String>),
}

#[test]
fn gateway_passes_the_mcp_conformance_suite_except_the_listed_scenarios() {
    let entry = installed_tool("node/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let expected = expected_failures(&repo_root().join(EXPECTED_FAILURES));

    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nexpose = \"both\"\n{}{}",
        stdio_connection("test", &bin("mcp-test-server"), &[], ""),
        stdio_connection("demo", &bin("mcp-demo-server"), &[], ""),
    );
    let mut served = Served::start(&config);

    let results = tempfile::tempdir().unwrap();
    let log = results.path().join("conformance.log");
    let mut suite = Command::new("node")
        .arg(&entry)
        .args(["server", "--suite", "all", "--url", &served.gateway_url])
        .arg("--output-dir")
        .arg(results.path().join("runs"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node runs the conformance suite (Node.js >= 20 on PATH)");
    let status = wait_bounded(&mut suite, SUITE_BOUND);
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.is_some(),
        "the conformance suite did not finish within {SUITE_BOUND:?}:\n{output}"
    );

    let verdicts = verdicts(&output, &results.path().join("runs"));
    assert!(
        verdicts.len() >= 20 && REQUIRED.iter().all(|name| verdicts.contains_key(*name)),
        "could not read the suite's results (scenarios found: {:?}):\n{output}",
        verdicts.keys().collect::<Vec<_>>()
    );
    assert!(
        matches!(served.child.try_wait(), Ok(None)),
        "the supervisor exited during the suite:\n{}",
        served.stderr()
    );

    let mut problems = Vec::new();
    for name in REQUIRED {
        if expected.contains_key(name) {
            problems.push(format!(
                "{name}: a required scenario is listed in {EXPECTED_FAILURES}"
            ));
        }
        if let Some(Verdict::Failed(checks)) = verdicts.get(name) {
            problems.push(format!(
                "{name}: required scenario failed:\n    {}",
                checks.join("\n    ")
            ));
        }
    }
    for (name, verdict) in &verdicts {
        match (verdict, expected.contains_key(name)) {
            (Verdict::Failed(checks), false) if !REQUIRED.contains(&name.as_str()) => {
                problems.push(format!(
                    "{name}: failed, and is not in {EXPECTED_FAILURES}:\n    {}",
                    checks.join("\n    ")
                ));
            }
            (Verdict::Passed, true) => problems.push(format!(
                "{name}: passes now; remove it from {EXPECTED_FAILURES}"
            )),
            _ => {}
        }
    }
    for name in expected.keys() {
        if !verdicts.contains_key(name) {
            problems.push(format!(
                "{name}: listed in {EXPECTED_FAILURES} but the suite has no such scenario"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "conformance: {} problem(s):\n{}\n\nsuite output:\n{output}",
        problems.len(),
        problems.join("\n")
    );

    // Still serving after the whole suite.
    assert_eq!(served.terminate(Duration::from_secs(30)), Some(0));
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
