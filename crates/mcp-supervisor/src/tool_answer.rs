//! A tool's answer as the upstream wrote it: its structured content kept as
//! the upstream's JSON text, not read into a tree (docs/DECISIONS.md #184).
//!
//! rmcp's `CallToolResult` holds structured content as a `serde_json::Value`,
//! a tree of about fifteen times the text's size; an SDK's typed tool sends
//! its whole answer twice, as text and as structured content, so a large
//! answer built that tree on its way through the gateway. The gateway does
//! nothing with structured content but pass it on, so the answers read by
//! hand (`codec::answers`) keep it as text, checked to read alike in every
//! reader (`codec::json_check::value`), and the client's answer is written
//! with it as it came (`codec::reply`). Whatever needs rmcp's type (rmcp's
//! server, the library's [`CallOutcome`](crate::CallOutcome), a 2025
//! client's answer with structured content that is not an object) reads the
//! tree then, with [`ToolAnswer::into_result`].

use rmcp::model::{CallToolResult, RequestId, ServerJsonRpcMessage, ServerResult};
use serde_json::value::RawValue;

/// A tool's answer: rmcp's `CallToolResult` but for its structured content,
/// which is kept as the upstream's JSON text when it reads alike everywhere
/// and breaks no line (`codec::answers`, its one maker).
#[derive(Debug, Clone)]
pub struct ToolAnswer {
    /// Its structured content is `None` when `structured` holds it.
    result: CallToolResult,
    structured: Option<Box<RawValue>>,
}

impl ToolAnswer {
    /// `result`, with its structured content `structured` (as text) if it
    /// has one not already in `result`.
    pub(crate) fn new(mut result: CallToolResult, structured: Option<Box<RawValue>>) -> Self {
        if structured.is_some() {
            result.structured_content = None;
        }
        ToolAnswer { result, structured }
    }

    /// The answer as rmcp's type: the structured content read into a tree.
    pub fn into_result(self) -> CallToolResult {
        let ToolAnswer {
            mut result,
            structured,
        } = self;
        if let Some(raw) = structured {
            // Checked to read as JSON when it was kept (`json_check::value`).
            result.structured_content = serde_json::from_str(raw.get()).ok();
        }
        result
    }

    /// Whether the tool reported an error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.result.is_error == Some(true)
    }

    /// Its fields but the structured content kept as text, and that text.
    pub(crate) fn parts(&self) -> (&CallToolResult, Option<&RawValue>) {
        (&self.result, self.structured.as_deref())
    }

    /// Its fields but the structured content kept as text, to change.
    pub(crate) fn result_mut(&mut self) -> &mut CallToolResult {
        &mut self.result
    }

    /// Whether its structured content, kept as text, is something other than
    /// an object (a 2025 client takes only objects).
    pub(crate) fn structured_not_an_object(&self) -> bool {
        self.structured
            .as_deref()
            .is_some_and(|raw| !raw.get().starts_with('{'))
    }
}

impl From<ToolAnswer> for ServerResult {
    /// The answer as rmcp's type (see [`ToolAnswer::into_result`]).
    fn from(answer: ToolAnswer) -> Self {
        ServerResult::CallToolResult(answer.into_result())
    }
}

/// An upstream's answer to a request: rmcp's type, or a tool's answer with
/// its structured content kept as text.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// Boxed, as in `Forwarded`: a tool's answer, the usual one, is moved
    /// through many layers and need not carry rmcp's largest type's size.
    Result(Box<ServerResult>),
    Tool(ToolAnswer),
}

impl Answer {
    /// The answer as rmcp's type.
    pub(crate) fn into_result(self) -> ServerResult {
        match self {
            Answer::Result(result) => *result,
            Answer::Tool(answer) => answer.into(),
        }
    }
}

impl From<ServerResult> for Answer {
    fn from(result: ServerResult) -> Self {
        Answer::Result(Box::new(result))
    }
}

/// A JSON-RPC message of an upstream's, or to a client: rmcp's type, or the
/// answer to request `id` that is a tool's answer with its structured
/// content kept as text.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Message {
    Rmcp(ServerJsonRpcMessage),
    Tool(RequestId, ToolAnswer),
}

impl Message {
    /// The message as rmcp's type.
    pub(crate) fn into_rmcp(self) -> ServerJsonRpcMessage {
        match self {
            Message::Rmcp(message) => message,
            Message::Tool(id, answer) => ServerJsonRpcMessage::response(answer.into(), id),
        }
    }

    /// The answer to request `id` (`Ok`) or its error, with `result`.
    pub(crate) fn answer(answered: Result<Answer, rmcp::ErrorData>, id: RequestId) -> Self {
        match answered {
            Ok(Answer::Tool(answer)) => Message::Tool(id, answer),
            Ok(Answer::Result(result)) => {
                Message::Rmcp(ServerJsonRpcMessage::response(*result, id))
            }
            Err(error) => Message::Rmcp(ServerJsonRpcMessage::error(error, Some(id))),
        }
    }
}

impl From<ServerJsonRpcMessage> for Message {
    fn from(message: ServerJsonRpcMessage) -> Self {
        Message::Rmcp(message)
    }
}
