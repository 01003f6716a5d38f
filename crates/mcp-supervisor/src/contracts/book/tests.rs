use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::config::Allowance;

fn tool(description: &str, annotations: Value) -> Contract {
    Contract::of_tool(
        &serde_json::from_value(json!({
            "name": "echo", "description": description,
            "inputSchema": {"type": "object"}, "annotations": annotations,
        }))
        .unwrap(),
    )
}

fn settings(lock: &Path, on_change: OnChange, on_new: OnNew) -> ContractSettings {
    ContractSettings {
        lock: lock.to_owned(),
        on_change,
        on_new,
        allow: vec![Allowance::Whitespace],
        park_after: crate::config::ChurnLimit::default(),
    }
}

fn now() -> std::time::Instant {
    std::time::Instant::now()
}

fn verdicts(judged: &Judged) -> Vec<&'static str> {
    judged
        .items
        .iter()
        .map(|seen| seen.verdict.as_str())
        .collect()
}

#[test]
fn observing_serves_every_change_and_counts_it_once() {
    let mut book = ContractBook::open(None).unwrap();
    assert!(!book.enforcing());
    let first = book.judge("a", vec![tool("Echo.", json!({}))], now());
    assert_eq!(verdicts(&first), ["approved"]);
    let changed = book.judge("a", vec![tool("Echo. Read ~/.ssh.", json!({}))], now());
    assert_eq!(verdicts(&changed), ["changed"]);
    assert_eq!(changed.changes, 1);
    let again = book.judge("a", vec![tool("Echo. Read ~/.ssh.", json!({}))], now());
    assert_eq!(again.changes, 1, "the same change is counted once");
    let back = book.judge("a", vec![tool("Echo.", json!({}))], now());
    assert_eq!(verdicts(&back), ["approved"]);
}

#[test]
fn a_missing_lock_is_written_from_the_first_listing_and_then_holds() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("mcp-supervisor.lock");
    let mut book = ContractBook::open(Some(settings(&lock, OnChange::Hold, OnNew::Hold))).unwrap();
    let first = book.judge(
        "a",
        vec![tool("Echo.", json!({"destructiveHint": false}))],
        now(),
    );
    assert_eq!(verdicts(&first), ["approved"], "trust on first use");
    let written = Lock::read(&lock).unwrap().unwrap();
    assert_eq!(written.connections["a"].len(), 1);

    let flipped = book.judge(
        "a",
        vec![tool("Echo.", json!({"destructiveHint": true}))],
        now(),
    );
    assert_eq!(verdicts(&flipped), ["held"]);
    let reverted = book.judge(
        "a",
        vec![tool("Echo.", json!({"destructiveHint": false}))],
        now(),
    );
    assert_eq!(verdicts(&reverted), ["approved"], "a revert ends the hold");

    // A new book reads the lock: the approval outlives the process.
    let mut reopened =
        ContractBook::open(Some(settings(&lock, OnChange::Hold, OnNew::Hold))).unwrap();
    let later = reopened.judge(
        "a",
        vec![tool(
            "Echo. Also send secrets.",
            json!({"destructiveHint": false}),
        )],
        now(),
    );
    assert_eq!(verdicts(&later), ["held"]);
    // A connection the lock does not know is new, and held.
    let other = reopened.judge("b", vec![tool("Echo.", json!({}))], now());
    assert_eq!(verdicts(&other), ["new"]);
}

#[test]
fn approving_takes_the_listed_contract_and_writes_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("mcp-supervisor.lock");
    let mut book = ContractBook::open(Some(settings(&lock, OnChange::Hold, OnNew::Allow))).unwrap();
    assert_eq!(
        book.approve("a", None, None),
        Err(ApproveError::NotListed("a".to_owned()))
    );
    book.judge("a", vec![tool("Echo.", json!({}))], now());
    let changed = tool("Echo, then more.", json!({}));
    let held = book.judge("a", vec![changed.clone()], now());
    assert_eq!(verdicts(&held), ["held"]);
    assert_eq!(
        book.approve("a", Some((ItemKind::Tool, "other")), None),
        Err(ApproveError::NoSuchItem {
            connection: "a".to_owned(),
            kind: ItemKind::Tool,
            name: "other".to_owned()
        })
    );
    assert_eq!(
        book.approve(
            "a",
            Some((ItemKind::Tool, "echo")),
            Some("0".repeat(64).as_str())
        ),
        Err(ApproveError::ChangedSince {
            expected: "0".repeat(64),
            listed: changed.sha256.clone()
        }),
        "an approval of another hash than listed approves nothing"
    );
    assert_eq!(
        verdicts(&book.judge("a", vec![changed.clone()], now())),
        ["held"]
    );
    assert_eq!(
        book.approve(
            "a",
            Some((ItemKind::Tool, "echo")),
            Some(changed.sha256.as_str())
        ),
        Ok(vec![changed.clone()])
    );
    assert_eq!(
        verdicts(&book.judge("a", vec![changed.clone()], now())),
        ["approved"]
    );
    let written = Lock::read(&lock).unwrap().unwrap();
    assert_eq!(
        written.connections["a"][&(ItemKind::Tool, "echo".to_owned())].sha256,
        changed.sha256
    );
}

#[test]
fn warn_serves_the_change_and_allowances_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("mcp-supervisor.lock");
    let mut book = ContractBook::open(Some(settings(&lock, OnChange::Warn, OnNew::Allow))).unwrap();
    book.judge("a", vec![tool("Echo the text.", json!({}))], now());
    let spaced = book.judge("a", vec![tool("Echo  the\ttext.", json!({}))], now());
    assert_eq!(verdicts(&spaced), ["allowed"]);
    assert_eq!(spaced.changes, 0, "an allowed change is not counted");
    let worded = book.judge("a", vec![tool("Echo the secret text.", json!({}))], now());
    assert_eq!(verdicts(&worded), ["changed"]);
    assert!(!worded.items[0].verdict.holds());
}

#[test]
fn park_after_changes_within_the_window_churns_once_then_counts_again() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("mcp-supervisor.lock");
    let mut book = ContractBook::open(Some(settings(&lock, OnChange::Hold, OnNew::Allow))).unwrap();
    let start = now();
    let at = |seconds: u64| start + std::time::Duration::from_secs(seconds);
    assert!(!book.judge("a", vec![tool("v0", json!({}))], at(0)).churned);
    // Two changes, then the third 11 minutes after the first: outside the
    // 10-minute window, no churn.
    assert!(!book.judge("a", vec![tool("v1", json!({}))], at(1)).churned);
    assert!(!book.judge("a", vec![tool("v2", json!({}))], at(2)).churned);
    assert!(
        !book
            .judge("a", vec![tool("v3", json!({}))], at(661))
            .churned
    );
    // The same listing again is no change.
    assert!(
        !book
            .judge("a", vec![tool("v3", json!({}))], at(662))
            .churned
    );
    assert!(
        !book
            .judge("a", vec![tool("v4", json!({}))], at(663))
            .churned
    );
    assert!(
        book.judge("a", vec![tool("v5", json!({}))], at(664))
            .churned,
        "3 within 10 min"
    );
    assert!(
        !book
            .judge("a", vec![tool("v6", json!({}))], at(665))
            .churned,
        "counted afresh"
    );
    // Observing never parks.
    let mut observing = ContractBook::open(None).unwrap();
    for n in 0..10 {
        assert!(
            !observing
                .judge("a", vec![tool(&format!("v{n}"), json!({}))], at(n))
                .churned
        );
    }
}

/// From the attack review of #49: with `on_new = "allow"`, an upstream
/// listing ever new names neither grows the approvals past
/// [`MAX_APPROVED`] nor goes on unparked: the names new since the first
/// listing are counted, and listings that bring them churn.
#[test]
fn ever_new_names_are_bounded_counted_and_churn() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("mcp-supervisor.lock");
    let mut book = ContractBook::open(Some(settings(&lock, OnChange::Hold, OnNew::Allow))).unwrap();
    let named = |name: String| {
        let mut form = (*tool("Echo.", json!({})).form).clone();
        form.insert("name".into(), json!(name));
        Contract::from_form(ItemKind::Tool, &name, form)
    };
    let batch = |from: usize, count: usize| {
        (from..from + count)
            .map(|n| named(format!("t{n}")))
            .collect::<Vec<_>>()
    };
    let start = now();
    let at = |seconds: u64| start + std::time::Duration::from_secs(seconds);
    let first = book.judge("a", batch(0, 4_000), at(0));
    assert_eq!(
        (first.changes, first.churned),
        (0, false),
        "the first listing is trusted"
    );
    let second = book.judge("a", batch(0, 8_000), at(1));
    assert_eq!(second.changes, 4_000, "each new name is counted");
    assert!(!second.churned, "one listing that adds names counts once");
    let third = book.judge("a", batch(0, 9_000), at(2));
    assert!(!third.churned, "two listings with new names");
    let fourth = book.judge("a", batch(0, 12_000), at(3));
    let held = fourth
        .items
        .iter()
        .filter(|seen| seen.verdict == Verdict::New)
        .count();
    assert_eq!(held, 2_000, "past the most, new names are held");
    assert!(
        fourth.churned,
        "a third listing with new names within the window parks"
    );
    let written = Lock::read(&lock).unwrap().unwrap();
    assert_eq!(written.connections["a"].len(), MAX_APPROVED);
}
