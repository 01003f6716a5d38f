//! `mcp-demo-server`: a tiny, dependable MCP server over stdio.
//!
//! The supervisor's embedded default config points at it, so `mcp-supervisor
//! serve` works on a fresh machine with no Node or Python. Tools:
//! `echo`, `add`, `word_count` and `current_time`. It writes nothing but MCP
//! to stdout and exits when stdin closes.

use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::{
    ServerHandler, ServiceExt as _,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{Implementation, ServerCapabilities, ServerConfig},
    schemars, tool, tool_handler, tool_router,
};
use serde::Deserialize;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let running = DemoServer::new()
        .serve(rmcp::transport::stdio_pipes())
        .await?;
    running.waiting().await?;
    Ok(())
}

/// Arguments of `echo`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// Text to send back unchanged.
    text: String,
}

/// Arguments of `add`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// First number.
    a: f64,
    /// Second number.
    b: f64,
}

/// Arguments of `word_count`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct WordCountArgs {
    /// Text whose whitespace-separated words are counted.
    text: String,
}

#[derive(Debug, Clone)]
struct DemoServer {
    tool_router: ToolRouter<Self>,
}

impl DemoServer {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }
}

#[tool_router]
impl DemoServer {
    #[tool(
        description = "Return the given text unchanged.",
        annotations(read_only_hint = true)
    )]
    async fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(
        description = "Add two numbers and return the sum.",
        annotations(read_only_hint = true)
    )]
    async fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(
        description = "Count the whitespace-separated words in a text.",
        annotations(read_only_hint = true)
    )]
    async fn word_count(
        &self,
        Parameters(WordCountArgs { text }): Parameters<WordCountArgs>,
    ) -> String {
        text.split_whitespace().count().to_string()
    }

    #[tool(
        description = "The current date and time in UTC, as RFC 3339 (e.g. 2026-01-01T00:00:00Z).",
        annotations(read_only_hint = true)
    )]
    async fn current_time(&self) -> String {
        rfc3339_utc(SystemTime::now())
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "mcp-demo-server",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Demo tools: echo text, add numbers, count words, tell the current UTC time.",
            )
    }
}

/// Formats a time as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds). Times
/// before 1970 are clamped to the epoch.
fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are in range by construction.
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs: u64) -> String {
        rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(784_111_777), "1994-11-06T08:49:37Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_767_225_599), "2025-12-31T23:59:59Z");
        assert_eq!(at(1_767_225_600), "2026-01-01T00:00:00Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
    }

    #[test]
    fn clamps_times_before_the_epoch() {
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00Z"
        );
    }

    #[tokio::test]
    async fn tools_answer() {
        let server = DemoServer::new();
        let echo = EchoArgs { text: "hi".into() };
        assert_eq!(server.echo(Parameters(echo)).await, "hi");
        assert_eq!(
            server.add(Parameters(AddArgs { a: 2.0, b: 3.0 })).await,
            "5"
        );
        let text = "  the quick\tbrown\nfox ".to_owned();
        assert_eq!(
            server.word_count(Parameters(WordCountArgs { text })).await,
            "4"
        );
        let now = server.current_time().await;
        assert_eq!(now.len(), "2026-01-01T00:00:00Z".len());
        assert!(now.ends_with('Z'));
        let names: Vec<_> = server
            .tool_router
            .list_all()
            .into_iter()
            .map(|tool| tool.name.to_string())
            .collect();
        assert_eq!(names, ["add", "current_time", "echo", "word_count"]);
    }
}
