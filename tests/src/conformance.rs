//! What the conformance tests (`e2e/conformance.rs` for the suite's server
//! scenarios, `e2e/conformance_client.rs` for its client scenarios) read
//! back from the official suite: a run's verdict from its `checks.json`, and
//! the lists of runs expected to fail.

use std::{collections::BTreeMap, path::Path};

use serde_json::Value;

/// How one run of a scenario went.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Passed,
    /// What went wrong, one line each.
    Failed(Vec<String>),
}

/// The verdict of the checks in `path` (a run's `checks.json`): passed when
/// at least one check is a `SUCCESS` and none is a `FAILURE` or a `WARNING`
/// (the suite's own baseline mode counts warnings as failures). A run whose
/// checks were all `SKIPPED`, or that made none, tested nothing and fails.
pub fn verdict_of(path: &Path) -> Verdict {
    let checks: Vec<Value> = match std::fs::read_to_string(path)
        .map_err(|error| error.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|error| error.to_string()))
    {
        Ok(checks) => checks,
        Err(error) => return Verdict::Failed(vec![format!("{}: {error}", path.display())]),
    };
    let status = |check: &Value| check["status"].as_str().unwrap_or("?").to_owned();
    let bad: Vec<String> = checks
        .iter()
        .filter(|check| matches!(status(check).as_str(), "FAILURE" | "WARNING"))
        .map(|check| {
            format!(
                "{} {}: {}",
                status(check),
                check["name"].as_str().unwrap_or("?"),
                check["errorMessage"]
                    .as_str()
                    .or(check["description"].as_str())
                    .unwrap_or("")
            )
        })
        .collect();
    if !bad.is_empty() {
        Verdict::Failed(bad)
    } else if !checks.iter().any(|check| status(check) == "SUCCESS") {
        Verdict::Failed(vec![format!(
            "no check succeeded (statuses: {:?}): the scenario exercised nothing",
            checks.iter().map(status).collect::<Vec<_>>()
        )])
    } else {
        Verdict::Passed
    }
}

/// A list of runs expected to fail: one `NAME  # reason` per line, `NAME`
/// written as `shape` says (for the message of a malformed line); `#` lines
/// and blank lines are skipped. Every entry must give a reason, and no name
/// may be listed twice.
pub fn expected_failures(path: &Path, shape: &str) -> BTreeMap<String, String> {
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
            !name.is_empty() && !name.contains(char::is_whitespace) && !reason.is_empty(),
            "{}:{}: expected `{shape}  # reason`, got {line:?}",
            path.display(),
            number + 1
        );
        let duplicate = entries.insert(name.to_owned(), reason.to_owned());
        assert!(duplicate.is_none(), "{name} is listed twice");
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(checks: &str) -> Verdict {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checks.json");
        std::fs::write(&path, checks).unwrap();
        verdict_of(&path)
    }

    #[test]
    fn a_run_passes_with_a_success_and_nothing_failing_or_warning() {
        assert_eq!(
            verdict(r#"[{"status":"SUCCESS"},{"status":"SKIPPED"},{"status":"INFO"}]"#),
            Verdict::Passed
        );
        let failed = r#"[{"status":"SUCCESS"},{"status":"FAILURE","name":"n","errorMessage":"e"}]"#;
        assert_eq!(
            verdict(failed),
            Verdict::Failed(vec!["FAILURE n: e".to_owned()])
        );
        let warned = r#"[{"status":"SUCCESS"},{"status":"WARNING","name":"w","description":"d"}]"#;
        assert_eq!(
            verdict(warned),
            Verdict::Failed(vec!["WARNING w: d".to_owned()])
        );
    }

    #[test]
    fn a_run_whose_checks_all_skipped_or_that_made_none_fails() {
        assert!(matches!(
            verdict(r#"[{"status":"SKIPPED"},{"status":"SKIPPED"}]"#),
            Verdict::Failed(_)
        ));
        assert!(matches!(verdict("[]"), Verdict::Failed(_)));
        assert!(matches!(verdict("not json"), Verdict::Failed(_)));
    }

    #[test]
    fn expected_failures_need_a_reason_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("list.txt");
        std::fs::write(
            &path,
            "# comment\n\ntools-list  # why\nping@2025-11-25 # because\n",
        )
        .unwrap();
        let entries = expected_failures(&path, "scenario");
        assert_eq!(
            entries,
            BTreeMap::from([
                ("tools-list".to_owned(), "why".to_owned()),
                ("ping@2025-11-25".to_owned(), "because".to_owned()),
            ])
        );
        std::fs::write(&path, "tools-list\n").unwrap();
        let missing = std::panic::catch_unwind(|| expected_failures(&path, "scenario"));
        assert!(missing.is_err(), "an entry without a reason is refused");
    }
}
