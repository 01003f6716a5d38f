//! `status` and `reset` when no admin API answers, and their usage errors.
//! (Against a running `serve`: see the serve-based suites.)

use std::net::TcpListener;

use e2e::supervisor;

/// An address on loopback where nothing listens (bound, then released).
fn closed_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    address
}

#[test]
fn status_and_reset_with_no_admin_api_exit_1_saying_where_they_tried() {
    let address = closed_address();
    for args in [
        &["status", "--admin", address.as_str()][..],
        &["reset", "demo", "--admin", address.as_str()],
    ] {
        let run = supervisor(args, &[]);
        assert_eq!(run.code, Some(1), "{args:?}: {run:?}");
        assert!(
            run.stderr.contains("cannot reach the admin API")
                && run.stderr.contains(&format!("http://{address}")),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
}

#[test]
fn status_and_reset_usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad_config = dir.path().join("bad.toml");
    std::fs::write(&bad_config, "[admin]\nlisten = 7\n").unwrap();
    let bad_config = bad_config.to_str().unwrap();
    for (args, expect) in [
        (&["status", "--admin", "no-port"][..], "HOST:PORT"),
        (
            &["status", "--admin", "127.0.0.1:1", "--config", bad_config],
            "cannot be used with",
        ),
        (&["status", "--config", bad_config], "admin.listen"),
        (&["reset"], "<CONNECTION>"),
    ] {
        let run = supervisor(args, &[]);
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert!(run.stderr.contains(expect), "{args:?}: {}", run.stderr);
    }
}
