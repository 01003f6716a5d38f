//! Every name the supervisor's spans and metrics use, in one place.
//!
//! The MCP names follow the OpenTelemetry semantic conventions for MCP as
//! pinned in docs/DECISIONS.md (`semantic-conventions-genai` v0.1.0,
//! `docs/gen-ai/mcp.md`, status Development); the general ones (`error.type`,
//! `server.*`, `network.*`, `rpc.*`, `jsonrpc.*`) are the ones that document
//! links. What only a supervisor knows is under one prefix of our own,
//! `mcp_supervisor.`, never under `mcp.` (the convention's namespace).

/// `mcp.method.name`: the JSON-RPC method (`tools/call`).
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
/// `mcp.session.id`: a hash of the session id (never the id itself: a
/// session id lets its holder talk in the session).
pub const MCP_SESSION_ID: &str = "mcp.session.id";
/// `mcp.protocol.version`: the negotiated protocol version.
pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
/// `gen_ai.tool.name`: the tool a `tools/call` calls.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.prompt.name`: the prompt a `prompts/get` gets.
pub const GEN_AI_PROMPT_NAME: &str = "gen_ai.prompt.name";
/// `gen_ai.operation.name`: `execute_tool` for `tools/call`.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The value of `gen_ai.operation.name` for a tool call.
pub const EXECUTE_TOOL: &str = "execute_tool";
/// `gen_ai.tool.call.arguments` (opt-in: `capture_content`).
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// `gen_ai.tool.call.result` (opt-in: `capture_content`).
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// `jsonrpc.request.id`.
pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
/// `rpc.response.status_code`: the JSON-RPC error code, as a string.
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// `error.type`: the JSON-RPC code, `tool_error`, or our failure kind.
pub const ERROR_TYPE: &str = "error.type";
/// `error.type` of a tool's own error (`isError: true`).
pub const TOOL_ERROR: &str = "tool_error";
/// `network.transport`: `tcp`, or `pipe` for stdio.
pub const NETWORK_TRANSPORT: &str = "network.transport";
/// `network.protocol.name`: `http` for HTTP transports.
pub const NETWORK_PROTOCOL_NAME: &str = "network.protocol.name";
/// `server.address`: the upstream's host (never its path or query).
pub const SERVER_ADDRESS: &str = "server.address";
/// `server.port`.
pub const SERVER_PORT: &str = "server.port";
/// `client.address`: the downstream client's IP address.
pub const CLIENT_ADDRESS: &str = "client.address";
/// The user the caller's credentials name (a token's subject).
pub const USER_ID: &str = "user.id";
/// The caller's groups.
pub const USER_ROLES: &str = "user.roles";
/// The client the caller's credentials name (a key's name, a token's
/// `client_id`); no convention names it yet, so ours.
pub const MCP_CLIENT_ID: &str = "mcp_supervisor.client.id";

/// Our own: the connection's name in the config.
pub const CONNECTION: &str = "mcp_supervisor.connection";
/// Our own: this attempt's number, from 1.
pub const ATTEMPT: &str = "mcp_supervisor.attempt";
/// Our own: the failure kind of this attempt (`rate_limit`, `server`, …).
pub const FAILURE_KIND: &str = "mcp_supervisor.failure.kind";
/// Our own: the failed attempt surely did not reach the tool.
pub const FAILURE_NOT_RUN: &str = "mcp_supervisor.failure.not_run";
/// Our own: what the quarantine policy decided after this attempt
/// (`retry`, `reject`, `give_up`, `park`, `retire`), or, on a refused
/// request, the standing decision (`park`, `retire`).
pub const POLICY_DECISION: &str = "mcp_supervisor.policy.decision";
/// Our own: the wait before the next attempt the policy chose, in seconds.
pub const RETRY_BACKOFF: &str = "mcp_supervisor.retry.backoff_s";
/// Our own: the upstream's `Retry-After`, in seconds.
pub const RETRY_AFTER: &str = "mcp_supervisor.retry_after_s";
/// Our own: a park's cooldown, in seconds.
pub const COOLDOWN: &str = "mcp_supervisor.cooldown_s";
/// Our own: the time a request waited for a slot on its connection, in seconds.
pub const QUEUE_WAIT: &str = "mcp_supervisor.queue.wait_s";
/// Our own: the time a request waited out an upstream's `Retry-After`, in seconds.
pub const HELD: &str = "mcp_supervisor.held_s";
/// Our own: the SHA-256 of the called tool's contract as listed
/// (docs/CONTRACTS.md).
pub const TOOL_CONTRACT: &str = "mcp_supervisor.tool.contract_sha256";
/// Our own: the connection's state when it refused a request
/// (`parked`, `retired`, `stopped`, …).
pub const CONNECTION_STATE: &str = "mcp_supervisor.connection.state";
/// Our own: parks since the last success, this one included.
pub const STRIKES: &str = "mcp_supervisor.strikes";
/// Our own: why a connection was retired (`auth`, `parks`, `crash_loop`, …).
pub const RETIRE_REASON: &str = "mcp_supervisor.retire.reason";
/// Our own: a session built again ended a park.
pub const REVIVED: &str = "mcp_supervisor.revived";
/// Our own: the connection actor's crash restarts so far.
pub const RESTARTS: &str = "mcp_supervisor.restarts";
/// Our own: the HTTP status of an upstream's answer, when there was one.
pub const HTTP_STATUS: &str = "mcp_supervisor.upstream.http_status";

/// Span event: a request waits out an upstream's `Retry-After` window.
pub const EVENT_HELD: &str = "mcp_supervisor.held";
/// Span event: the policy parked the connection.
pub const EVENT_PARK: &str = "mcp_supervisor.park";
/// Span event: the policy retired the connection.
pub const EVENT_RETIRE: &str = "mcp_supervisor.retire";
/// Span event: the connection refused the request (parked, retired, …).
pub const EVENT_REFUSED: &str = "mcp_supervisor.refused";

/// The histograms' bucket boundaries, in seconds: the convention's
/// recommendation for every MCP duration.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// `mcp.server.operation.duration`: a request the gateway served.
pub const SERVER_OPERATION_DURATION: &str = "mcp.server.operation.duration";
/// `mcp.client.operation.duration`: one attempt sent upstream.
pub const CLIENT_OPERATION_DURATION: &str = "mcp.client.operation.duration";
/// `mcp.client.session.duration`: an upstream session, from ready to gone.
pub const CLIENT_SESSION_DURATION: &str = "mcp.client.session.duration";
