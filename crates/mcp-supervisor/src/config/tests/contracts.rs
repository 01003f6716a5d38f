//! `[contracts]` and `supervisor.relist`.

use super::*;
use crate::config::{Allowance, OnChange, OnNew};

#[test]
fn contracts_default_to_holding_changes_with_the_lock_beside_the_config() {
    let config = load_with_env("[contracts]\n", &[]).unwrap();
    let contracts = config.contracts.unwrap();
    assert_eq!(contracts.lock, Path::new("/etc/mcp/mcp-supervisor.lock"));
    assert_eq!(contracts.on_change, OnChange::Hold);
    assert_eq!(contracts.on_new, OnNew::Allow);
    assert!(contracts.allow.is_empty());
    assert_eq!(
        config.supervisor.relist,
        std::time::Duration::from_secs(300)
    );
    assert!(
        load("").unwrap().contracts.is_none(),
        "observing without the table"
    );
}

#[test]
fn contracts_read_every_key() {
    let config = load_with_env(
        "[supervisor]\nrelist = \"30s\"\n[contracts]\nlock = \"/var/lib/approved.lock\"\n\
         on_change = \"warn\"\non_new = \"hold\"\nallow = [\"whitespace\", \"optional_input\", \"whitespace\"]\n\
         park_after = { changes = 5, within = \"1h\" }\n",
        &[],
    )
    .unwrap();
    let contracts = config.contracts.unwrap();
    assert_eq!(contracts.lock, Path::new("/var/lib/approved.lock"));
    assert_eq!(contracts.on_change, OnChange::Warn);
    assert_eq!(contracts.on_new, OnNew::Hold);
    assert_eq!(
        contracts.allow,
        vec![Allowance::Whitespace, Allowance::OptionalInput]
    );
    assert_eq!(config.supervisor.relist, std::time::Duration::from_secs(30));
    assert_eq!(
        contracts.park_after,
        crate::config::ChurnLimit {
            changes: 5,
            within: std::time::Duration::from_secs(3600)
        }
    );
}

#[test]
fn bad_contracts_name_their_key() {
    for (text, expected) in [
        (
            "[contracts]\non_change = \"ignore\"",
            "contracts.on_change: unknown value \"ignore\"; expected \"hold\" or \"warn\"",
        ),
        (
            "[contracts]\non_new = \"deny\"",
            "contracts.on_new: unknown value \"deny\"; expected \"allow\" or \"hold\"",
        ),
        (
            "[contracts]\nallow = [\"whitespace\", \"annotations\"]",
            "contracts.allow[1]: unknown change \"annotations\"; expected \"whitespace\" or \"optional_input\"",
        ),
        ("[contracts]\nlocks = \"x\"", "locks"),
        (
            "[supervisor]\nrelist = \"0s\"",
            "supervisor.relist: must be greater than zero",
        ),
    ] {
        let error = load(text).unwrap_err().to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
}
