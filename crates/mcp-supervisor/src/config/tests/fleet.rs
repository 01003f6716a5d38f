//! `[fleet]`: the store, its password, the fleet's key and this node's name,
//! and what a bad table is told.

use std::time::Duration;

use super::*;

const FLEET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

#[test]
fn a_fleet_table_reads_its_store_key_and_name() {
    let config = load_with_env(
        "[gateway]\nlisten = \"10.0.0.5:7300\"\n\
         [fleet]\nredis = \"rediss://gw@redis.internal:6380/2\"\npassword_env = \"PW\"\n\
         key_env = \"KEY\"\nnode = \"gw-1\"\n",
        &[("PW", "hunter2"), ("KEY", FLEET_KEY)],
    )
    .unwrap();
    let fleet = config.fleet.unwrap();
    assert_eq!(fleet.redis.as_str(), "rediss://gw@redis.internal:6380/2");
    assert_eq!(
        fleet.password.as_ref().map(Password::expose),
        Some("hunter2")
    );
    assert_eq!(fleet.key.expose(), b"0123456789abcdef0123456789abcdef");
    assert_eq!(fleet.node, "gw-1");
    assert_eq!(fleet.namespace, "mcp-supervisor");
    assert_eq!(fleet.max_clock_skew, Duration::from_secs(2));
    assert_eq!(
        fleet.advertise.map(String::from),
        Some("http://10.0.0.5:7300/".to_owned())
    );
    let debug = format!(
        "{:?}",
        load_with_env(
            "[fleet]\nredis = \"redis://h\"\npassword_env = \"PW\"\nkey_env = \"KEY\"\n",
            &[("PW", "hunter2"), ("KEY", FLEET_KEY)],
        )
    );
    assert!(
        !debug.contains("hunter2") && !debug.contains(FLEET_KEY),
        "{debug}"
    );
    // Unset, the node is named after the host and the process.
    let node = load_with_env(
        "[fleet]\nredis = \"redis://h\"\nkey_env = \"KEY\"\n",
        &[("KEY", FLEET_KEY)],
    )
    .unwrap()
    .fleet
    .unwrap()
    .node;
    assert!(
        node.ends_with(&format!("-{}", std::process::id())),
        "{node}"
    );
}

#[test]
fn a_bad_fleet_table_says_what_is_wrong() {
    let cases = [
        ("[fleet]\nkey_env = \"KEY\"\n", "fleet.redis: is required"),
        (
            "[fleet]\nredis = \"redis://:hunter2@h\"\nkey_env = \"KEY\"\n",
            "fleet.redis: the URL must not contain a password; use 'password_env' or 'password_file'",
        ),
        (
            "[fleet]\nredis = \"http://h\"\nkey_env = \"KEY\"\n",
            "fleet.redis: must be a URL starting with redis:// or rediss://",
        ),
        (
            "[fleet]\nredis = \"redis://h\"\n",
            "fleet: set exactly one of 'key_env' or 'key_file'",
        ),
        (
            "[fleet]\nredis = \"redis://h\"\nkey_env = \"SHORT\"\n",
            "fleet.key_env: the fleet key must be 32 bytes, it is 5",
        ),
        (
            "[fleet]\nredis = \"redis://h\"\nkey_env = \"KEY\"\nnode = \"a b\"\n",
            "fleet.node: use 1 to 64 letters",
        ),
        (
            "[fleet]\nredis = \"redis://h\"\nkey_env = \"KEY\"\nmax_clock_skew = \"5m\"\n",
            "fleet.max_clock_skew: must be at most 60s",
        ),
    ];
    for (text, wanted) in cases {
        let error = load_with_env(text, &[("KEY", FLEET_KEY), ("SHORT", "aGVsbG8=")])
            .unwrap_err()
            .to_string();
        assert!(error.contains(wanted), "{text}\n{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }
}
