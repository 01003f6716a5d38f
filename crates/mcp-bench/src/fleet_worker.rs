//! `mcp-bench fleet-worker --config FILE` (hidden): an agent worker that
//! embeds the library, as a fleet's workers do: it starts a `Registry` from
//! the file (with its `[fleet]`) and answers one line per command read on
//! stdin, until stdin closes.
//!
//! - `call CONNECTION TOOL [JSON]` → `outcome LABEL TEXT` (the result's first
//!   text, or the supervisor's message);
//! - `state CONNECTION` → `state STATE`;
//! - `fleet` → `fleet STORE NODES` (the store's health, other nodes seen).
//!
//! Used by the test that two processes with the same `[fleet]` share a park
//! (crates/mcp-bench/tests/fleet_library.rs).

use std::{io::BufRead, path::PathBuf};

use actix::Actor;
use anyhow::Context;
use mcp_supervisor::{
    CallOutcome,
    config::Config,
    registry::{CallTool, FleetOverview, Registry, Status},
};

#[derive(Debug, clap::Args)]
pub(crate) struct FleetWorkerArgs {
    /// The config file (with a `[fleet]` table).
    #[arg(long)]
    config: PathBuf,
}

pub(crate) fn run(args: &FleetWorkerArgs) -> anyhow::Result<()> {
    let config = Config::from_file(&args.config)
        .with_context(|| format!("reading {}", args.config.display()))?;
    let (lines, mut commands) = tokio::sync::mpsc::unbounded_channel::<String>();
    // Blocking stdin on a thread of its own; the actors run on the system's.
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    actix_rt::System::new().block_on(async move {
        let registry = Registry::new(config).start();
        while let Some(line) = commands.recv().await {
            let answer = answer(&registry, &line).await;
            println!("{answer}");
        }
    });
    Ok(())
}

async fn answer(registry: &actix::Addr<Registry>, line: &str) -> String {
    let mut words = line.splitn(4, ' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("call"), Some(connection), Some(tool), arguments) => {
            let arguments = arguments.and_then(|json| serde_json::from_str(json).ok());
            let call = CallTool {
                connection: connection.to_owned(),
                tool: tool.to_owned(),
                arguments,
                timeout: None,
                trace: mcp_supervisor::telemetry::TraceParent::current(),
            };
            match registry.send(call).await {
                Ok(outcome) => format!("outcome {} {}", outcome.label(), text(&outcome)),
                Err(_) => "outcome gone the registry stopped".to_owned(),
            }
        }
        (Some("state"), Some(connection), None, None) => {
            let status = registry.send(Status).await.unwrap_or_default();
            match status.iter().find(|status| status.name == connection) {
                Some(status) => format!("state {}", status.state),
                None => "state unknown".to_owned(),
            }
        }
        (Some("fleet"), None, None, None) => match registry.send(FleetOverview).await {
            Ok(Some(view)) => format!("fleet {} {}", view.store.as_str(), view.nodes.len()),
            _ => "fleet none 0".to_owned(),
        },
        _ => format!("error unknown command {line:?}"),
    }
}

/// The first text of a result, or the supervisor's own message.
fn text(outcome: &CallOutcome) -> String {
    match outcome {
        CallOutcome::Success(result) | CallOutcome::ToolError(result) => result
            .content
            .iter()
            .find_map(|content| content.as_text().map(|text| text.text.clone()))
            .unwrap_or_default(),
        other => other.message().unwrap_or_default().to_owned(),
    }
}
