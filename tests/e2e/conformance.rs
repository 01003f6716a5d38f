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
//!
//! The direct run is held to the same standard: every scenario the suite
//! lists for the selection runs, and passes, unless
//! `tests/conformance/direct-expected-failures.txt` lists it with a reason
//! (a scenario the upstream cannot pass fails through the gateway too, and
//! needs no second entry). A run passes only with at least one `SUCCESS`
//! check: one whose checks were all skipped tested nothing.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use e2e::{
    HttpUpstream, Served, bin,
    conformance::{Verdict, expected_failures, verdict_of},
    installed_tool, repo_root, stdio_connection, wait_bounded,
};

/// A run of the suite takes about 15 s; this only stops a hung run.
const SUITE_BOUND: Duration = Duration::from_secs(600);

const EXPECTED_FAILURES: &str = "tests/conformance/expected-failures.txt";
const DIRECT_EXPECTED_FAILURES: &str = "tests/conformance/direct-expected-failures.txt";

/// The conformance upstream's binary.
const UPSTREAM: &str = "mcp-conformance-server";

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

    /// `list` arguments naming the server scenarios this selection must run.
    fn list_args(self) -> &'static [&'static str] {
        match self {
            Selection::All => &["list", "--server"],
            Selection::Requirements2026 => &["list", "--server", "--requirements", "2026-07-28"],
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
    let expected = expected_failures(&repo_root().join(EXPECTED_FAILURES), "scenario-name");
    let direct_expected =
        expected_failures(&repo_root().join(DIRECT_EXPECTED_FAILURES), "scenario-name");

    let direct_server = HttpUpstream::start_binary(UPSTREAM, &[]);
    let (direct, output) = run_suite(selection, &direct_server.url);
    let mut problems = Vec::new();
    let listed = listed_server_scenarios(selection);
    for name in &listed {
        if !direct.contains_key(name) {
            problems.push(format!(
                "{name}: listed by the suite for {selection:?} but did not run directly"
            ));
        }
    }
    if matches!(selection, Selection::All) {
        for name in direct.keys().filter(|name| !listed.contains(*name)) {
            problems.push(format!(
                "{name}: ran directly but the suite does not list it"
            ));
        }
    }
    for (name, verdict) in &direct {
        match (verdict, direct_expected.contains_key(name)) {
            (Verdict::Failed(checks), false) => problems.push(format!(
                "{name}: fails directly, against {UPSTREAM} alone (list it in \
                 {DIRECT_EXPECTED_FAILURES} with the reason if that is expected):\n    {}",
                checks.join("\n    ")
            )),
            (Verdict::Passed, true) => problems.push(format!(
                "{name}: passes directly now; remove it from {DIRECT_EXPECTED_FAILURES}"
            )),
            _ => {}
        }
    }

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

    for (name, verdict) in &gateway {
        // A scenario the upstream itself fails is excused by its direct entry.
        let excused = expected.contains_key(name) || direct_expected.contains_key(name);
        match (verdict, excused) {
            (Verdict::Failed(checks), false) => problems.push(format!(
                "{name}: fails through the gateway ({}):\n    {}",
                match direct.get(name) {
                    Some(Verdict::Passed) => "passes directly",
                    Some(Verdict::Failed(_)) => "fails directly too",
                    None => "did not run directly",
                },
                checks.join("\n    ")
            )),
            (Verdict::Passed, _) if expected.contains_key(name) => problems.push(format!(
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
    for name in gateway.keys() {
        if !direct.contains_key(name) {
            problems.push(format!("{name}: ran through the gateway but not directly"));
        }
    }
    assert!(
        problems.is_empty(),
        "conformance ({selection:?}, {upstream:?} upstream): {} problem(s):\n{}\n\n\
         suite output, direct run:\n{output}\n\nsupervisor:\n{}",
        problems.len(),
        problems.join("\n"),
        served.stderr()
    );
    // Still serving after the whole suite.
    assert_eq!(served.terminate(Duration::from_secs(30)), Some(0));
}

/// The server scenarios the suite lists for `selection` (`list`'s "Server
/// scenarios" section, one `  - NAME [versions]` line each), read from the
/// suite itself rather than written here. Panics if there are none: the
/// listing's format changed.
fn listed_server_scenarios(selection: Selection) -> BTreeSet<String> {
    let listed = Command::new(node())
        .arg(suite())
        .args(selection.list_args())
        .output()
        .expect("node runs the conformance suite");
    let listing = String::from_utf8_lossy(&listed.stdout);
    let names: BTreeSet<String> = listing
        .lines()
        .skip_while(|line| !line.starts_with("Server scenarios"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.strip_prefix("  - "))
        .map(|entry| entry.split(" [").next().unwrap_or(entry).trim().to_owned())
        .collect();
    assert!(
        !names.is_empty(),
        "no server scenarios in the suite's listing; its format may have changed:\n{listing}"
    );
    names
}

#[test]
fn the_expected_failures_name_real_scenarios() {
    let scenarios = listed_server_scenarios(Selection::All);
    for list in [EXPECTED_FAILURES, DIRECT_EXPECTED_FAILURES] {
        for name in expected_failures(&repo_root().join(list), "scenario-name").keys() {
            assert!(
                scenarios.contains(name),
                "{name} is listed in {list} but the suite has no such server scenario"
            );
        }
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

/// Every scenario the suite ran, with its verdict. The suite prints one
/// summary line per scenario (`✓ NAME: N passed, M failed`) and writes each
/// scenario's checks to `runs/server-NAME-TIMESTAMP/checks.json`. A scenario
/// passes when it has a checks file that [`verdict_of`] passes.
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
