//! Bounded shutdown with stdio upstreams: a hung call is cut off after
//! `shutdown_timeout`, every caller gets a value, and no child process of any
//! connection is left (checked in /proc), even children that ignore stdin
//! close and SIGTERM and have children of their own.

mod support;

use std::{path::Path, time::Duration};

use actix::Actor;
use mcp_supervisor::{
    CallOutcome,
    registry::{Registry, Shutdown, Status},
};
use mcp_test_support::{eventually, test_server_binary};
use serde_json::json;
use support::*;

/// Alive: /proc/PID exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn shutdown_with_a_hung_stdio_call_is_bounded_and_leaves_no_child() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let binary = test_server_binary();
        let binary = binary.to_str().unwrap();
        let mut toml = "[supervisor]\nshutdown_timeout = \"1s\"\n".to_owned();
        for name in ["stubborn", "plain"] {
            let pid_file = dir.path().join(format!("{name}.pid"));
            let pid_file = pid_file.to_str().unwrap();
            let mut flags = vec![
                "--hang-tool",
                "sleep",
                "--pid-file",
                pid_file,
                "--spawn-grandchild",
            ];
            if name == "stubborn" {
                flags.extend(["--ignore-stdin-close", "--ignore-sigterm"]);
            }
            toml += &stdio_connection(name, binary, &flags, "");
        }
        let registry = Registry::new(config(&toml)).start();
        for name in ["stubborn", "plain"] {
            assert_eq!(
                text_of(&call(&registry, name, "echo", args(&[("text", json!("hi"))])).await),
                "hi"
            );
        }
        let mut pids = Vec::new();
        for name in ["stubborn", "plain"] {
            let pid_file = dir.path().join(format!("{name}.pid"));
            let child_file = dir.path().join(format!("{name}.pid.child"));
            eventually!(read_pid(&pid_file).is_some() && read_pid(&child_file).is_some());
            pids.push(read_pid(&pid_file).unwrap());
            pids.push(read_pid(&child_file).unwrap());
        }
        assert!(pids.iter().all(|pid| alive(*pid)), "{pids:?}");

        let hung = actix_rt::spawn({
            let registry = registry.clone();
            async move { call(&registry, "stubborn", "sleep", args(&[("ms", json!(1))])).await }
        });
        // The call is admitted and in flight (its child never answers).
        let in_flight = || async {
            let status = registry.send(Status).await.unwrap();
            status
                .iter()
                .any(|c| c.name == "stubborn" && c.in_flight == 1)
        };
        assert!(
            mcp_test_support::wait_until_async(Duration::from_secs(10), in_flight).await,
            "the hung call never showed as in flight"
        );
        // The bound is the behaviour here: the stubborn child ignores every
        // polite stop, and shutdown gives up on it within `shutdown_timeout`
        // (1 s), then kills. Real children on a loaded machine: 4 s of
        // margin for the rest.
        answered_within(
            Duration::from_secs(1) + Duration::from_secs(4),
            "shutdown with a hung stdio call",
            registry.send(Shutdown),
        )
        .await
        .unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(5), hung)
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(outcome, CallOutcome::Unavailable { .. }),
            "{outcome:?}"
        );
        // Every child and grandchild is gone.
        eventually!(pids.iter().all(|pid| !alive(*pid)), Duration::from_secs(10));
    });
}
