//! Another actix actor driving the supervisor: the way an agent platform uses
//! the library. It lists the connections, discovers tools, calls one, and
//! watches state transitions.
//!
//! ```sh
//! cargo build --bins   # the default config's demo server is a workspace binary
//! cargo run -p mcp-supervisor --example agent_actor -- config/default.toml
//! ```

use std::path::PathBuf;

use actix::{Actor, ActorFutureExt, Addr, AsyncContext, Context, Handler, WrapFuture};
use mcp_supervisor::{
    CallOutcome,
    config::Config,
    events::ConnectionEvent,
    registry::{CallTool, ListConnections, ListTools, Registry, Shutdown, Subscribe},
};

/// A stand-in for an agent: it owns no MCP session, only the registry's address.
struct Agent {
    registry: Addr<Registry>,
}

impl Actor for Agent {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.registry.do_send(Subscribe(ctx.address().recipient()));
        let registry = self.registry.clone();
        let work = async move {
            let connections = registry.send(ListConnections).await?;
            for connection in &connections {
                println!("connection {} ({})", connection.name, connection.state);
                match registry
                    .send(ListTools {
                        connection: connection.name.clone(),
                    })
                    .await?
                {
                    Ok(catalog) => {
                        for tool in &catalog.tools {
                            println!("  tool {}", tool.name);
                        }
                    }
                    Err(unavailable) => println!("  unavailable: {}", unavailable.message),
                }
            }
            if let Some(first) = connections.first() {
                let mut arguments = serde_json::Map::new();
                arguments.insert("text".into(), "hello from an actor".into());
                let outcome = registry
                    .send(CallTool {
                        connection: first.name.clone(),
                        tool: "echo".into(),
                        arguments: Some(arguments),
                        timeout: None,
                        trace: mcp_supervisor::telemetry::TraceParent::current(),
                    })
                    .await?;
                // Every call comes back as a value: match on it, never unwrap a panic.
                match outcome {
                    CallOutcome::Success(result) => println!("echo -> {:?}", result.content),
                    other => println!("echo did not succeed: {}", other.message().unwrap_or("?")),
                }
            }
            registry.send(Shutdown).await?;
            Ok::<_, actix::MailboxError>(())
        };
        ctx.wait(work.into_actor(self).map(|result, _, _| {
            if let Err(error) = result {
                eprintln!("the supervisor stopped: {error}");
            }
            actix::System::current().stop();
        }));
    }
}

impl Handler<ConnectionEvent> for Agent {
    type Result = ();

    fn handle(&mut self, event: ConnectionEvent, _: &mut Context<Self>) {
        println!("event: {event:?}");
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("config/default.toml"));
    let config = Config::from_file(&path)?;
    let system = actix::System::new();
    system.block_on(async move {
        let registry = Registry::new(config).start();
        Agent { registry }.start();
    });
    system.run()?;
    Ok(())
}
