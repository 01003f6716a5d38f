//! A connection actor that panics is restarted from config within the restart
//! budget, its callers get values, other connections are untouched; past the
//! budget the connection retires with `crash_loop`.

mod support;

use actix::Actor;
use mcp_supervisor::{
    CallOutcome,
    events::ConnectionEvent,
    registry::{CrashConnection, Registry, Status},
};
use mcp_test_support::{TestServer, TestServerOptions, eventually};
use serde_json::json;
use support::*;

fn echo() -> Option<serde_json::Map<String, serde_json::Value>> {
    args(&[("text", json!("hi"))])
}

async fn restarts_of(registry: &actix::Addr<Registry>, name: &str) -> u32 {
    let status = registry.send(Status).await.unwrap();
    status
        .iter()
        .find(|s| s.name == name)
        .map_or(0, |s| s.restarts)
}

#[test]
fn a_panicked_connection_actor_is_restarted_and_others_are_untouched() {
    run(|| async {
        let a = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let b = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let toml = http_connection("a", &a.url(), "") + &http_connection("b", &b.url(), "");
        let registry = Registry::new(config(&toml)).start();
        let log = EventLog::default();
        log.subscribe(&registry).await;
        assert_eq!(text_of(&call(&registry, "a", "echo", echo()).await), "hi");

        // A call in flight on `a` when its actor panics still gets a value.
        let in_flight = actix_rt::spawn({
            let registry = registry.clone();
            async move { call(&registry, "a", "sleep", args(&[("ms", json!(500))])).await }
        });
        eventually!(a.tool_calls("sleep") == 1);
        registry
            .send(CrashConnection {
                connection: "a".into(),
            })
            .await
            .unwrap();
        for i in 0..10 {
            let outcome = call(
                &registry,
                "b",
                "add",
                args(&[("a", json!(i)), ("b", json!(1))]),
            )
            .await;
            assert_eq!(text_of(&outcome), (i + 1).to_string());
        }
        let outcome = in_flight.await.unwrap();
        assert!(
            matches!(
                outcome,
                CallOutcome::Success(_) | CallOutcome::Unavailable { .. }
            ),
            "{outcome:?}"
        );

        // Restarted from config; calls work again.
        let mut restarted = false;
        for _ in 0..100 {
            if restarts_of(&registry, "a").await == 1 {
                restarted = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(restarted, "the registry restarted the actor");
        assert_eq!(text_of(&call(&registry, "a", "echo", echo()).await), "hi");
        let restarts: Vec<_> = log
            .events()
            .into_iter()
            .filter(|e| matches!(e, ConnectionEvent::Restarted { .. }))
            .collect();
        assert_eq!(
            restarts,
            vec![ConnectionEvent::Restarted {
                connection: "a".into(),
                restarts: 1
            }]
        );
    });
}

#[test]
fn a_crash_loop_past_the_budget_retires_the_connection() {
    run(|| async {
        let a = TestServer::start(TestServerOptions::default())
            .await
            .unwrap();
        let toml = "[supervisor]\nrestart_budget = { restarts = 2, within = \"60s\" }\n".to_owned()
            + &http_connection("a", &a.url(), "");
        let registry = Registry::new(config(&toml)).start();
        for expected in 1..=2 {
            registry
                .send(CrashConnection {
                    connection: "a".into(),
                })
                .await
                .unwrap();
            let mut seen = 0;
            for _ in 0..100 {
                seen = restarts_of(&registry, "a").await;
                if seen == expected {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            assert_eq!(seen, expected);
        }
        registry
            .send(CrashConnection {
                connection: "a".into(),
            })
            .await
            .unwrap();
        let mut state = "";
        for _ in 0..100 {
            let status = registry.send(Status).await.unwrap();
            state = status[0].state;
            if state == "retired" {
                assert_eq!(status[0].retired_reason.as_deref(), Some("crash_loop"));
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(state, "retired");
        let outcome = call(&registry, "a", "echo", echo()).await;
        let CallOutcome::Unavailable { message, .. } = outcome else {
            panic!("{outcome:?}")
        };
        assert!(message.contains("will not be retried"), "{message}");
        assert_eq!(
            a.requests("initialize"),
            0,
            "a retired connection does no I/O"
        );
    });
}
