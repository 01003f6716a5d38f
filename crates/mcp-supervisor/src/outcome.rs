//! What a call comes back as: always a value ([`CallOutcome`]), never a panic,
//! a hang or a cancellation. The agent-facing texts live here, in one place,
//! because they are part of the product (docs/SUPERVISION.md, "What agents
//! read").

use std::time::Duration;

use rmcp::model::{CallToolResult, ErrorData, ServerResult};

use crate::{failure::Failure, tool_answer::ToolAnswer};

/// The result of one `CallTool`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The upstream answered and the tool succeeded.
    Success(CallToolResult),
    /// The upstream answered `isError: true`: the tool ran and reported an error.
    ToolError(CallToolResult),
    /// The upstream refused this request (permission or protocol); the
    /// connection is fine and still available.
    Rejected { failure: Failure, message: String },
    /// The connection cannot serve calls now (parked, retired, or failing).
    Unavailable {
        failure: Failure,
        /// When a retry may succeed (the rest of a park); `None` when retired
        /// or unknown.
        retry_in: Option<Duration>,
        message: String,
    },
    /// Too many calls are waiting for this connection.
    Busy { message: String },
    /// No answer within the call's deadline.
    TimedOut { message: String, may_have_run: bool },
}

/// How a request forwarded upstream as it is (the gateway's proxying) ended.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Forwarded {
    /// The upstream's answer. Boxed: rmcp's `ServerResult` is several times
    /// the size of the others, and a call's answer, a `Tool` on the usual
    /// path, is moved through many layers (docs/DECISIONS.md #186).
    Answered(Box<ServerResult>),
    /// The upstream's answer to a tool call, its structured content kept as
    /// the upstream wrote it ([`ToolAnswer::into_result`] reads it as rmcp's
    /// type; `Answered` holds the answers it does not keep so).
    Tool(ToolAnswer),
    /// The upstream refused the request with this JSON-RPC error, passed on
    /// as it is (a resource that does not exist, bad arguments, …).
    Error(ErrorData),
    /// The supervisor answers instead: unavailable, busy, timed out, or a
    /// rejection in the supervisor's words. Never `Success`/`ToolError`.
    Refused(CallOutcome),
}

impl CallOutcome {
    /// What a forwarded `tools/call` comes back as, for a caller with no
    /// client behind it (the library's `CallTool`, the `call_mcp` meta-tool).
    pub(crate) fn of_call(connection: &str, tool: &str, forwarded: Forwarded) -> CallOutcome {
        let failure = |reason: &str| Failure::new(crate::FailureKind::Protocol, reason);
        // Calls are not forwarded with errors passed on, and any other
        // answer to a `tools/call` is malformed.
        let malformed = || {
            let failure = failure("unexpected result for tools/call");
            CallOutcome::Rejected {
                message: messages::rejected(connection, &failure),
                failure,
            }
        };
        match forwarded {
            Forwarded::Answered(result) => match *result {
                ServerResult::CallToolResult(result) => CallOutcome::from_result(result),
                // The upstream needs what only a client could give (sampling).
                ServerResult::InputRequiredResult(_) => CallOutcome::Rejected {
                    message: messages::needs_a_client(connection, tool),
                    failure: failure("input required"),
                },
                _ => malformed(),
            },
            Forwarded::Tool(answer) => CallOutcome::from_result(answer.into_result()),
            Forwarded::Refused(outcome) => outcome,
            Forwarded::Error(_) => malformed(),
        }
    }
}

impl Forwarded {
    /// Whether the upstream answered (with a result, not an error).
    pub fn answered(&self) -> bool {
        matches!(self, Forwarded::Answered(_) | Forwarded::Tool(_))
    }

    /// The upstream's answer when `pick` takes it (an answer of one kind),
    /// else this as it was (an answer `pick` gives back).
    pub(crate) fn answered_as<T>(
        self,
        pick: impl FnOnce(ServerResult) -> Result<T, Box<ServerResult>>,
    ) -> Result<T, Self> {
        match self {
            Forwarded::Answered(result) => pick(*result).map_err(Forwarded::Answered),
            other => Err(other),
        }
    }

    /// The upstream's answer as rmcp's type: a tool's structured content
    /// kept as text is read into a tree.
    pub fn into_rmcp(self) -> Self {
        match self {
            Forwarded::Tool(answer) => Forwarded::Answered(Box::new(answer.into())),
            other => other,
        }
    }
}

/// Why a connection cannot serve an operation now (also the error of `ListTools`).
#[derive(Debug, Clone, PartialEq)]
pub struct Unavailable {
    pub failure: Failure,
    /// When a retry may succeed (the rest of a park); `None` when retired or unknown.
    pub retry_in: Option<Duration>,
    pub message: String,
}

impl From<Unavailable> for CallOutcome {
    fn from(unavailable: Unavailable) -> Self {
        CallOutcome::Unavailable {
            failure: unavailable.failure,
            retry_in: unavailable.retry_in,
            message: unavailable.message,
        }
    }
}

/// What a call came back as, as it is counted: the `/status` `calls` keys
/// and the `outcome` label of `mcp_supervisor_calls_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    Ok,
    ToolError,
    Rejected,
    Unavailable,
    Busy,
    TimedOut,
}

impl OutcomeKind {
    /// Every kind, in the order `/status` and the metrics list them.
    pub const ALL: [OutcomeKind; 6] = [
        Self::Ok,
        Self::ToolError,
        Self::Rejected,
        Self::Unavailable,
        Self::Busy,
        Self::TimedOut,
    ];

    /// The name `/status` and the metrics show.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Rejected => "rejected",
            Self::Unavailable => "unavailable",
            Self::Busy => "busy",
            Self::TimedOut => "timed_out",
        }
    }
}

impl CallOutcome {
    /// What it is counted as.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            CallOutcome::Success(_) => OutcomeKind::Ok,
            CallOutcome::ToolError(_) => OutcomeKind::ToolError,
            CallOutcome::Rejected { .. } => OutcomeKind::Rejected,
            CallOutcome::Unavailable { .. } => OutcomeKind::Unavailable,
            CallOutcome::Busy { .. } => OutcomeKind::Busy,
            CallOutcome::TimedOut { .. } => OutcomeKind::TimedOut,
        }
    }

    /// The label used in metrics and status counters.
    pub fn label(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The supervisor's own message, for outcomes that are not upstream results.
    pub fn message(&self) -> Option<&str> {
        match self {
            CallOutcome::Success(_) | CallOutcome::ToolError(_) => None,
            CallOutcome::Rejected { message, .. }
            | CallOutcome::Unavailable { message, .. }
            | CallOutcome::Busy { message }
            | CallOutcome::TimedOut { message, .. } => Some(message),
        }
    }

    /// Wraps an upstream result, telling tool errors from successes.
    pub fn from_result(result: CallToolResult) -> Self {
        if is_tool_error(&result) {
            CallOutcome::ToolError(result)
        } else {
            CallOutcome::Success(result)
        }
    }

    /// What `from_result(result)` is counted as, without taking (or
    /// copying) the result.
    pub fn result_kind(result: &CallToolResult) -> OutcomeKind {
        if is_tool_error(result) {
            OutcomeKind::ToolError
        } else {
            OutcomeKind::Ok
        }
    }
}

/// Whether an upstream result is a tool error (`isError: true`).
fn is_tool_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// The agent-facing message texts (docs/SUPERVISION.md, "What agents read").
pub mod messages {
    use std::time::Duration;

    use crate::failure::{Failure, FailureKind};

    /// `MCP connection '{name}' is temporarily unavailable (…); retrying in about {secs} seconds.`
    pub fn parked(name: &str, failure: &Failure, remaining: Duration) -> String {
        format!(
            "MCP connection '{name}' is temporarily unavailable (kind={}, status={}); \
             retrying in about {} seconds.",
            failure.kind,
            failure.status_label(),
            rounded_secs(remaining)
        )
    }

    /// The upstream asked for input only a client can give (sampling), and
    /// there is no client behind this call.
    pub fn needs_a_client(name: &str, tool: &str) -> String {
        format!(
            "MCP connection '{name}' needs a client to answer '{tool}' (it asked for sampling), \
             and this call has none behind it; call the tool through the gateway from an MCP \
             client that supports sampling."
        )
    }

    /// The downstream client cancelled the request before it was answered.
    pub fn cancelled(name: &str, what: &str) -> String {
        format!("MCP connection '{name}': the client cancelled '{what}' before it was answered.")
    }

    /// `MCP connection '{name}' is unavailable (…); it will not be retried.`
    pub fn retired(name: &str, failure: &Failure) -> String {
        if failure.kind == FailureKind::NeedsLogin {
            return needs_login(name, failure.wants_login_for_scope());
        }
        format!(
            "MCP connection '{name}' is unavailable (kind={}, status={}); it will not be retried.",
            failure.kind,
            failure.status_label()
        )
    }

    /// An OAuth connection without usable tokens, or (`for_scope`) whose
    /// tokens lack a scope it needs to work at all.
    pub fn needs_login(name: &str, for_scope: bool) -> String {
        let why = if for_scope {
            "its OAuth login lacks a scope the server requires (`mcp-supervisor status` names it)"
        } else {
            "its OAuth tokens are missing, expired or revoked"
        };
        format!(
            "MCP connection '{name}' needs a login (kind=needs_login): {why}, and nothing is \
             sent to it until someone runs `mcp-supervisor login {name}` on the supervisor's \
             host, then `mcp-supervisor reset {name}`. Tell the user; do not retry until then."
        )
    }

    /// The permission or protocol rejection of one call.
    pub fn rejected(name: &str, failure: &Failure) -> String {
        let status = failure.status_label();
        match failure.kind {
            FailureKind::Permission if failure.wants_login_for_scope() => format!(
                "MCP connection '{name}' rejected this call (status={status}): it needs an \
                 OAuth scope the login did not grant (`mcp-supervisor status` names it). The \
                 connection is still available for other calls. Tell the user to run \
                 `mcp-supervisor login {name}` (the new login asks for that scope too), then \
                 retry."
            ),
            FailureKind::Permission => format!(
                "MCP connection '{name}' rejected this call (status={status}): the provider \
                 denied this specific request, not the connection. The connection is still \
                 available. Check the arguments and whether the configured credential may \
                 access that resource, then retry."
            ),
            _ if failure.unreadable_answer() => format!(
                "MCP connection '{name}' answered this call with something that is not an MCP \
                 answer ({reason}): a fault of the server, not of the request, and the call may \
                 have run. The connection is still available; tell the user if it keeps \
                 happening.",
                reason = failure.reason
            ),
            _ if failure.refused_as_too_large() => format!(
                "MCP connection '{name}' refused this call as too large (status={status}): the \
                 request, not the connection. The connection is still available. Send smaller \
                 arguments, then retry."
            ),
            _ => format!(
                "MCP connection '{name}' rejected this call as invalid (status={status}): the \
                 request itself was malformed, not the connection. The connection is still \
                 available. Check the tool's required arguments and value formats with \
                 get_mcp_tool_schema, then retry."
            ),
        }
    }

    /// A connection that acts on its callers' behalf could not for this
    /// caller (`why`): the caller's own standing, not the connection's.
    pub fn not_for_you(name: &str, why: &str) -> String {
        format!(
            "MCP connection '{name}' cannot act for you: {why}. The connection itself is \
             available to callers it can act for; this call did not run."
        )
    }

    /// `MCP connection '{name}' is busy ({queued} calls waiting); retry shortly.`
    pub fn busy(name: &str, queued: usize) -> String {
        format!("MCP connection '{name}' is busy ({queued} calls waiting); retry shortly.")
    }

    /// `MCP connection '{name}' did not answer '{tool}' within {secs} seconds; the call may have run.`
    pub fn timed_out(name: &str, tool: &str, budget: Duration) -> String {
        format!(
            "MCP connection '{name}' did not answer '{tool}' within {} seconds; the call may \
             have run.",
            rounded_secs(budget)
        )
    }

    /// The connection was stopped (supervisor shutdown, or removed by a reload).
    pub fn stopped(name: &str) -> String {
        format!(
            "MCP connection '{name}' is unavailable: it was stopped (the supervisor is shutting \
             down or the connection was removed from the config)."
        )
    }

    /// An operation that failed and ended without parking the connection.
    pub fn failed(name: &str, failure: &Failure) -> String {
        format!(
            "MCP connection '{name}' could not complete this request (kind={}, status={}); \
             retry shortly.",
            failure.kind,
            failure.status_label()
        )
    }

    /// The caller's budget ran out while the session was still being built.
    pub fn not_ready_in_time(name: &str, budget: Duration) -> String {
        format!(
            "MCP connection '{name}' was not ready within {} seconds; the call did not run.",
            rounded_secs(budget)
        )
    }

    /// A call that failed, may have run, and was not retried (DECISIONS.md #4).
    pub fn failed_not_retried(name: &str, failure: &Failure) -> String {
        format!(
            "MCP connection '{name}' failed this call (kind={}, status={}) and did not retry \
             it because it may already have run; check its effect before calling again.",
            failure.kind,
            failure.status_label()
        )
    }

    /// A call of a tool the contract book holds (docs/CONTRACTS.md):
    /// `changed` names the fields that differ from the approved contract,
    /// `None` for a tool nothing approved yet.
    pub fn contract_held(name: &str, tool: &str, changed: Option<&str>) -> String {
        let why = match changed {
            Some(fields) => format!("its definition changed since it was approved ({fields})"),
            None => "it is new and not approved yet".to_owned(),
        };
        format!(
            "Tool '{tool}' of MCP connection '{name}' is held: {why}. It was not called. An \
             operator can review the change with `mcp-supervisor contracts diff {name}` and \
             approve it with `mcp-supervisor contracts approve {name}__{tool}`."
        )
    }

    /// Whole seconds, rounded to nearest, as agents read "about N seconds".
    fn rounded_secs(duration: Duration) -> u64 {
        duration.as_secs_f64().round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::{messages::*, *};
    use crate::failure::FailureKind;

    #[test]
    fn the_exact_agent_texts() {
        let f = Failure::from_status(503, None);
        assert_eq!(
            parked("github", &f, Duration::from_millis(29_600)),
            "MCP connection 'github' is temporarily unavailable (kind=server, status=503); \
             retrying in about 30 seconds."
        );
        let auth = Failure::new(FailureKind::Auth, "x");
        assert_eq!(
            retired("github", &auth),
            "MCP connection 'github' is unavailable (kind=auth, status=none); it will not be retried."
        );
        assert_eq!(
            rejected("gh", &Failure::from_status(403, None)),
            "MCP connection 'gh' rejected this call (status=403): the provider denied this \
             specific request, not the connection. The connection is still available. Check the \
             arguments and whether the configured credential may access that resource, then retry."
        );
        assert_eq!(
            rejected(
                "gh",
                &Failure::new(FailureKind::Protocol, "x").with_not_run()
            ),
            "MCP connection 'gh' rejected this call as invalid (status=none): the request itself \
             was malformed, not the connection. The connection is still available. Check the \
             tool's required arguments and value formats with get_mcp_tool_schema, then retry."
        );
        assert_eq!(
            rejected(
                "gh",
                &Failure::new(FailureKind::Protocol, "unexpected server response")
            ),
            "MCP connection 'gh' answered this call with something that is not an MCP answer \
             (unexpected server response): a fault of the server, not of the request, and the \
             call may have run. The connection is still available; tell the user if it keeps \
             happening."
        );
        assert_eq!(
            busy("gh", 64),
            "MCP connection 'gh' is busy (64 calls waiting); retry shortly."
        );
        assert_eq!(
            timed_out("gh", "search", Duration::from_secs(60)),
            "MCP connection 'gh' did not answer 'search' within 60 seconds; the call may have run."
        );
    }

    #[test]
    fn a_result_is_counted_under_the_label_of_its_outcome() {
        use rmcp::model::{CallToolResult, ContentBlock};
        for is_error in [None, Some(false), Some(true)] {
            let mut result = CallToolResult::success(vec![ContentBlock::text("x")]);
            result.is_error = is_error;
            assert_eq!(
                super::CallOutcome::result_kind(&result),
                super::CallOutcome::from_result(result.clone()).kind(),
                "is_error = {is_error:?}"
            );
        }
    }

    /// The names are a contract (`/status`, metrics): written out here.
    #[test]
    fn each_outcome_kind_has_its_name() {
        assert_eq!(
            super::OutcomeKind::ALL.map(super::OutcomeKind::as_str),
            [
                "ok",
                "tool_error",
                "rejected",
                "unavailable",
                "busy",
                "timed_out"
            ]
        );
    }
}
