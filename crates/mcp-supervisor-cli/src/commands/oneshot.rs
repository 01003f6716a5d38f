//! `tools` and `call`: start the supervisor, do one thing, shut down cleanly.

use std::{future::Future, path::Path, sync::Arc};

use actix::{Actor, Addr};
use futures::StreamExt;
use mcp_supervisor::{
    CallOutcome,
    config::Config,
    registry::{CallTool, Catalog, ListConnections, ListTools, Registry, Shutdown},
};
use serde_json::{Map, Value};

use crate::exit::Exit;

/// Loads and validates a config file (a bad one is a usage error, exit 2).
pub(crate) fn load(config_path: &Path) -> Result<Config, Exit> {
    let config = Config::from_file(config_path).map_err(|error| Exit::Usage(error.to_string()))?;
    lock_readable(config_path, &config)?;
    Ok(config)
}

/// A `[contracts]` lock file that exists must be one this build reads (a
/// usage error, like the config's own).
pub(crate) fn lock_readable(config_path: &Path, config: &Config) -> Result<(), Exit> {
    match &config.contracts {
        Some(settings) => mcp_supervisor::contracts::Lock::read(&settings.lock)
            .map(drop)
            .map_err(|error| {
                Exit::Usage(format!(
                    "{}: contracts.lock: {error}",
                    config_path.display()
                ))
            }),
        None => Ok(()),
    }
}

/// Runs `body` against a registry started on `config`, always shutting the
/// registry down (children stopped) before returning.
pub(crate) fn with_registry<F, Fut>(config: Config, body: F) -> Result<(), Exit>
where
    F: FnOnce(Addr<Registry>) -> Fut + 'static,
    Fut: Future<Output = Result<(), Exit>> + 'static,
{
    actix_rt::System::new().block_on(async move {
        let registry = Registry::new(config).start();
        let result = body(registry.clone()).await;
        let _ = registry.send(Shutdown).await;
        result
    })
}

/// `mcp-supervisor tools --config F [NAME]`.
pub(crate) fn tools(config_path: &Path, connection: Option<String>) -> Result<(), Exit> {
    with_registry(load(config_path)?, move |registry| async move {
        let Some(connection) = connection else {
            return connect_all(&registry).await.map(drop);
        };
        let catalog = registry
            .send(ListTools {
                connection: connection.clone(),
            })
            .await
            .map_err(|_| Exit::Failed("the supervisor stopped unexpectedly".into()))?
            .map_err(|unavailable| Exit::Failed(unavailable.message))?;
        for tool in &catalog.tools {
            let description = tool.description.as_deref().unwrap_or("");
            println!("{}\t{}", tool.name, first_line(description));
        }
        Ok(())
    })
}

/// Connects to every connection and lists its tools, at most 6 at a time
/// (the registry's warmup bound), printing one line per connection as each
/// finishes; answers every catalog, in name order.
pub(crate) async fn connect_all(registry: &Addr<Registry>) -> Result<Vec<Arc<Catalog>>, Exit> {
    let (catalogs, failed) = list_all(registry).await?;
    if failed > 0 {
        return Err(Exit::Failed(format!("{failed} connection(s) unavailable")));
    }
    Ok(catalogs)
}

/// [`connect_all`]'s catalogs, in name order, and how many connections
/// could not be listed.
pub(crate) async fn list_all(
    registry: &Addr<Registry>,
) -> Result<(Vec<Arc<Catalog>>, usize), Exit> {
    let stopped = |_| Exit::Failed("the supervisor stopped unexpectedly".into());
    let connections = registry.send(ListConnections).await.map_err(stopped)?;
    let mut results = futures::stream::iter(connections)
        .map(|connection| async move {
            let listed = registry
                .send(ListTools {
                    connection: connection.name.clone(),
                })
                .await;
            (connection.name, listed)
        })
        .buffer_unordered(WARMUP_CONCURRENCY);
    let mut failed = 0;
    let mut catalogs = Vec::new();
    while let Some((name, listed)) = results.next().await {
        match listed.map_err(stopped)? {
            Ok(catalog) => {
                println!("{name}\t{} tools", catalog.len());
                catalogs.push(catalog);
            }
            Err(unavailable) => {
                failed += 1;
                println!("{name}\tunavailable: {}", unavailable.message);
            }
        }
    }
    catalogs.sort_by(|a, b| a.connection.cmp(&b.connection));
    Ok((catalogs, failed))
}

/// Connect at most this many connections at a time (as the registry's warmup).
const WARMUP_CONCURRENCY: usize = 6;

/// `mcp-supervisor call --config F NAME TOOL [JSON]`.
pub(crate) fn call(
    config_path: &Path,
    connection: String,
    tool: String,
    arguments: Option<String>,
) -> Result<(), Exit> {
    let arguments = parse_arguments(arguments.as_deref())?;
    with_registry(load(config_path)?, move |registry| async move {
        let outcome = registry
            .send(CallTool {
                connection,
                tool,
                arguments,
                timeout: None,
                trace: mcp_supervisor::telemetry::TraceParent::current(),
            })
            .await
            .map_err(|_| Exit::Failed("the supervisor stopped unexpectedly".into()))?;
        print_outcome(outcome)
    })
}

/// The optional JSON argument: an object, or nothing.
fn parse_arguments(text: Option<&str>) -> Result<Option<Map<String, Value>>, Exit> {
    let Some(text) = text else { return Ok(None) };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => Ok(Some(object)),
        Ok(Value::Null) => Ok(None),
        Ok(_) => Err(Exit::Usage(
            "the tool arguments must be a JSON object, e.g. '{\"text\": \"hi\"}'".into(),
        )),
        Err(error) => Err(Exit::Usage(format!(
            "the tool arguments are not valid JSON: {error}"
        ))),
    }
}

fn print_outcome(outcome: CallOutcome) -> Result<(), Exit> {
    match outcome {
        CallOutcome::Success(result) => {
            print_result(&result);
            Ok(())
        }
        CallOutcome::ToolError(result) => {
            print_result(&result);
            Err(Exit::Failed("the tool reported an error".into()))
        }
        other => Err(Exit::Failed(
            other.message().unwrap_or("the call failed").to_owned(),
        )),
    }
}

fn print_result(result: &rmcp::model::CallToolResult) {
    for content in &result.content {
        match content.as_text() {
            Some(text) => println!("{}", text.text),
            None => println!("{}", serde_json::to_string(content).unwrap_or_default()),
        }
    }
    if let Some(structured) = &result.structured_content {
        println!("{structured}");
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
