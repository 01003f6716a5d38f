//! The codec floor: every JSON step of a call we write by hand, each beside
//! its serde twin and the test that holds the two to one answer.
//!
//! rmcp reads and writes every message through serde's derived code; on the
//! gateway hop that costs more than the rest of a call's work, so the
//! messages every call carries are read and written here instead
//! (docs/DECISIONS.md, "The fast path"). A hand step answers only when it is
//! sure and leaves anything else to its twin, which decides as rmcp would:
//!
//! | step | hand-written | its twin |
//! |---|---|---|
//! | scanning JSON | [`json_scan::Scan`] | serde_json |
//! | admitting a call's arguments | [`json_check::check`] | [`json_check::by_serde`] |
//! | reading an upstream's answer | [`answers::plain_tool_answer`] | [`answers::tool_answer`], and that one rmcp's reading |
//! | reading a posted call (2025 and 2026-07-28) | [`posted`]'s `quick` | `Posted::read_fully`, `StatelessCall::read_fully` |
//! | writing a call to the upstream | [`request::Outgoing`] | rmcp's serialization |
//! | writing a client's answer | [`reply::encoded`] | serde |
//! | passing a tool's structured content on | `crate::tool_answer`, kept as text if [`json_check::value`] admits it | serde's tree, written again |
//! | the MCP headers | [`mcp_headers`] | rmcp's client and server |
//! | reading an upstream's event stream | `http::events` | `sse_stream` |
//!
//! The unit tests of each step, and the fuzz target `codec` (through
//! `crate::twins`), hold every hand step to its twin.

pub(crate) mod answers;
pub(crate) mod json_check;
pub(crate) mod json_scan;
pub(crate) mod mcp_headers;
pub(crate) mod posted;
pub(crate) mod reply;
pub(crate) mod request;
