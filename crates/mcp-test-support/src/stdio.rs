//! The test server over stdio, optionally behind a line pump that sees
//! every message: it counts requests, answers garbage instead of a tool
//! result, or exits after a number of answers.
//!
//! Without any of those options the server talks to rmcp's own
//! `stdio_pipes()` directly, exactly like a production rmcp server.

use anyhow::Context as _;
use rmcp::{
    ServiceExt as _,
    transport::{StdioReader, StdioWriter},
};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream},
    sync::mpsc,
};

use crate::{
    fault::RequestInfo,
    server::{EXIT_CODE, ServerControl, TestMcpServer},
};

/// Buffer of the in-memory pipes between the pump and rmcp.
const PIPE_BYTES: usize = 256 * 1024;

/// The line written instead of a result by `garbage_on_tool`.
pub const GARBAGE_LINE: &str = "this is not JSON-RPC {";

/// Stdio-only options that act on the raw message stream.
#[derive(Debug, Clone, Default)]
pub struct StdioOptions {
    /// Exit the process with [`EXIT_CODE`] right after writing the N-th
    /// JSON-RPC answer (the `initialize` answer counts).
    pub exit_after: Option<u64>,
    /// A `tools/call` of this tool gets a non-JSON line on stdout instead
    /// of an answer (the call never reaches the tool).
    pub garbage_on_tool: Option<String>,
    /// Count every received message through the pump. Set this when the
    /// [`ServerControl`] has a count file.
    pub count_requests: bool,
}

impl StdioOptions {
    fn needs_pump(&self) -> bool {
        self.exit_after.is_some() || self.garbage_on_tool.is_some() || self.count_requests
    }
}

/// Serves MCP on this process's stdin/stdout until stdin closes or the
/// client goes away. Logs must go to stderr: stdout is the MCP channel.
pub async fn serve_stdio(control: ServerControl, options: StdioOptions) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let server = TestMcpServer::new(control.clone());
    let running = if options.needs_pump() {
        let (server_in, server_out) = start_pump(stdin, stdout, control, options);
        server.serve((server_in, server_out)).await
    } else {
        server.serve((stdin, stdout)).await
    };
    match running {
        Ok(running) => {
            let reason = running
                .waiting()
                .await
                .context("stdio server task failed")?;
            tracing::info!(?reason, "stdio session ended");
        }
        // Typically stdin closed before `initialize`.
        Err(error) => tracing::info!(%error, "stdio session never started"),
    }
    Ok(())
}

/// One line for stdout, and whether it answers a request.
#[derive(Debug)]
struct Outgoing {
    line: String,
    is_answer: bool,
}

/// Wires `stdin → input pump → rmcp → output pump → stdout writer` and
/// returns rmcp's ends.
fn start_pump(
    stdin: StdioReader,
    stdout: StdioWriter,
    control: ServerControl,
    options: StdioOptions,
) -> (DuplexStream, DuplexStream) {
    let (server_in, pump_in) = tokio::io::duplex(PIPE_BYTES);
    let (server_out, pump_out) = tokio::io::duplex(PIPE_BYTES);
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(write_stdout(stdout, rx, options.exit_after));
    tokio::spawn(pump_output(pump_out, tx.clone()));
    tokio::spawn(pump_input(
        stdin,
        pump_in,
        tx,
        control,
        options.garbage_on_tool,
    ));
    (server_in, server_out)
}

async fn pump_input(
    stdin: StdioReader,
    mut to_server: DuplexStream,
    to_stdout: mpsc::Sender<Outgoing>,
    control: ServerControl,
    garbage_on_tool: Option<String>,
) {
    let mut lines = BufReader::new(stdin).lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                tracing::warn!(%error, "reading stdin failed");
                break;
            }
        };
        let info = RequestInfo::parse(line.as_bytes());
        if let Some(method) = &info.method {
            control.counters().record_request(
                method,
                info.tool.as_deref(),
                info.traceparent.as_deref(),
            );
        }
        if info.tool.is_some() && info.tool == garbage_on_tool {
            let garbage = Outgoing {
                line: GARBAGE_LINE.to_owned(),
                is_answer: false,
            };
            if to_stdout.send(garbage).await.is_err() {
                break;
            }
            continue;
        }
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if to_server.write_all(&bytes).await.is_err() {
            break;
        }
    }
    // Dropping `to_server` is the EOF rmcp sees.
}

async fn pump_output(from_server: DuplexStream, to_stdout: mpsc::Sender<Outgoing>) {
    let mut lines = BufReader::new(from_server).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let is_answer = is_answer(&line);
        if to_stdout.send(Outgoing { line, is_answer }).await.is_err() {
            break;
        }
    }
}

/// A JSON-RPC response or error (has an `id` and no `method`).
fn is_answer(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line)
        .is_ok_and(|message| message.get("id").is_some() && message.get("method").is_none())
}

async fn write_stdout(
    mut stdout: StdioWriter,
    mut lines: mpsc::Receiver<Outgoing>,
    exit_after: Option<u64>,
) {
    let mut answers = 0_u64;
    while let Some(Outgoing { line, is_answer }) = lines.recv().await {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if stdout.write_all(&bytes).await.is_err() || stdout.flush().await.is_err() {
            break;
        }
        if is_answer {
            answers += 1;
            if exit_after.is_some_and(|limit| answers >= limit) {
                tracing::warn!(answers, "exiting after the configured number of answers");
                std::process::exit(EXIT_CODE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_responses_and_errors_only() {
        assert!(is_answer(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(is_answer(
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"x"}}"#
        ));
        assert!(!is_answer(
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
        ));
        assert!(!is_answer(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#));
        assert!(!is_answer("garbage"));
    }
}
