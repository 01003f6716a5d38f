//! Tests that need a process of their own, under any runner.
//!
//! Some state is installed once per process and cannot be taken back: the
//! supervisor's OpenTelemetry export (`telemetry::install`, the SDK's global
//! providers), a global `tracing` subscriber. nextest runs every test in a
//! process of its own; plain `cargo test` (the documented fallback) runs a
//! binary's tests on threads of one process, where the second test to
//! install finds the first one's. [`in_own_process`] runs a test's body in
//! a fresh run of its own test binary, filtered to that one test, whichever
//! runner started it, and fails the test when that run fails or did not run
//! exactly that test.

use std::process::Command;

/// Set, in the run [`in_own_process`] starts, to the name of the test it is
/// for: that run executes the body.
const ALONE: &str = "MCP_TEST_IN_OWN_PROCESS";

/// Runs `body`, the whole body of the test named `test` (its path as the
/// test harness lists it, e.g. `a_call_is_traced`), in a process of its
/// own: this test binary again, with `test --exact`. Its output is printed
/// (the harness shows it when the test fails); the test fails when that run
/// fails, or when it ran anything but this one test (a wrong name).
pub fn in_own_process(test: &str, body: impl FnOnce()) {
    if std::env::var(ALONE).is_ok_and(|named| named == test) {
        body();
        return;
    }
    let binary = std::env::current_exe().expect("the test binary's path");
    let run = Command::new(&binary)
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(ALONE, test)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {} again: {error}", binary.display()));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(
        run.status.success(),
        "{test}, in a process of its own, failed ({}); its output is above",
        run.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed;"),
        "{test}: its own process did not run exactly this test (is `{test}` its name?)"
    );
}
