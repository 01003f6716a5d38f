//! The gateway's own refusals and corrections, each a response a client
//! can read: an unknown session, a body over the limit, too many sessions,
//! new work while draining, a body that is no JSON-RPC message.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, RequestId};
use serde_json::Value;

/// The JSON-RPC "server error" code of the gateway's own refusals (too many
/// sessions or connections): the request was not looked at.
const BUSY_CODE: ErrorCode = ErrorCode(-32000);

/// What a connection over `gateway.max_connections` is answered (with 503).
pub(super) const BUSY_BODY: &str = r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"too many connections to the gateway (gateway.max_connections); retry later"}}"#;

/// `Retry-After` of an `initialize` refused for too many sessions: a slot
/// frees when a client ends its session or one idles out.
const SESSIONS_RETRY_AFTER_SECS: &str = "30";

/// `Retry-After` of a request refused while draining: a load balancer has
/// another replica, or this one is back by then.
const DRAINING_RETRY_AFTER_SECS: &str = "5";

/// MCP: a request for an unknown or ended session is 404 (rmcp's own words).
pub(super) fn session_not_found() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// A request whose handling panicked (never expected).
pub(super) fn internal_error() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal Server Error: the request could not be handled",
    )
        .into_response()
}

/// rmcp's own answer to a body over the limit.
pub(super) fn payload_too_large(limit: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        [(header::CONNECTION, "close")],
        format!("Payload Too Large: request body exceeds {limit} bytes"),
    )
        .into_response()
}

/// Whether `body` is an `initialize` request (only asked when sessions are
/// full, so the extra parse is rare).
pub(super) fn is_initialize(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .is_ok_and(|message| message.get("method").and_then(Value::as_str) == Some("initialize"))
}

/// The `id` of a JSON-RPC message, when it has a valid one.
fn request_id(message: &Value) -> Option<RequestId> {
    message
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .and_then(|id| serde_json::from_value(id.clone()).ok())
}

/// `initialize` beyond `gateway.{key}` (= `limit`), every session it could
/// replace busy: 503, `Retry-After`, and a JSON-RPC error a client can show.
pub(super) fn too_many_sessions(body: &[u8], key: &str, limit: usize) -> Response {
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|message| request_id(&message));
    let mut response = jsonrpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        ErrorData::new(
            BUSY_CODE,
            format!(
                "too many MCP sessions (gateway.{key} = {limit}), all of them busy; \
                 retry later, or end an unused session"
            ),
            None,
        ),
    );
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(SESSIONS_RETRY_AFTER_SECS),
    );
    response
}

/// Session-less requests the gateway answers from its own view, at once,
/// with no upstream work and no stream: served while draining (a client's
/// follow-up listing after an answer is one of them).
const ANSWERED_FROM_THE_VIEW: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "ping",
];

/// While draining, a session-less request that would start new work (reach
/// an upstream, open a stream, open a session): 503 with `Retry-After` and a
/// JSON-RPC error. `None` for what may go on: a notification (a
/// cancellation), what is answered from the gateway's view, and the retry of
/// an input round already under way.
pub(super) fn refused_while_draining(body: &[u8]) -> Option<Response> {
    let message = serde_json::from_slice::<Value>(body).ok()?;
    let id = request_id(&message)?;
    let method = message.get("method")?.as_str()?;
    let params = message.get("params");
    if ANSWERED_FROM_THE_VIEW.contains(&method)
        || params.is_some_and(|params| params.get("requestState").is_some())
    {
        return None;
    }
    let mut response = jsonrpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        Some(id),
        ErrorData::new(
            BUSY_CODE,
            "the gateway is shutting down and takes no new work; retry (another replica may \
             take it)",
            None,
        ),
    );
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(DRAINING_RETRY_AFTER_SECS),
    );
    Some(response)
}

/// 400 for a body rmcp could not parse: -32700 when it is not JSON at all
/// (invalid UTF-8 included), -32600 when it is JSON but no JSON-RPC message.
pub(super) fn not_json_rpc(body: &[u8]) -> Response {
    let (id, error) = match serde_json::from_slice::<Value>(body) {
        Err(error) => (
            None,
            // Position only: the body is the client's and is not echoed.
            ErrorData::parse_error(
                format!(
                    "Parse error: the body is not valid JSON (line {}, column {})",
                    error.line(),
                    error.column()
                ),
                None,
            ),
        ),
        Ok(message) => (
            request_id(&message),
            ErrorData::invalid_request(
                "Invalid Request: the body is not a JSON-RPC 2.0 message this server accepts",
                None,
            ),
        ),
    };
    jsonrpc_error(StatusCode::BAD_REQUEST, id, error)
}

fn jsonrpc_error(status: StatusCode, id: Option<RequestId>, error: ErrorData) -> Response {
    let body = serde_json::to_vec(&JsonRpcError::new(id, error)).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_json(response: Response) -> (StatusCode, Value) {
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn unparsable_bodies_get_parse_error_or_invalid_request() {
        let (status, error) = body_json(not_json_rpc(b"{not json")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(error["error"]["code"], -32700);
        assert!(error.get("id").is_none(), "{error}");

        let (_, error) = body_json(not_json_rpc(&[0x7b, 0xff, 0xfe, 0x7d])).await;
        assert_eq!(error["error"]["code"], -32700);

        let (status, error) = body_json(not_json_rpc(br#"{"id": 7, "hello": 1}"#)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(error["error"]["code"], -32600);
        assert_eq!(error["id"], 7);
        assert_eq!(error["jsonrpc"], "2.0");
    }

    #[tokio::test]
    async fn the_session_refusal_names_the_request() {
        let response = too_many_sessions(
            br#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}"#,
            "max_sessions",
            2,
        );
        assert_eq!(response.headers()[header::RETRY_AFTER], "30");
        let (status, error) = body_json(response).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(error["id"], "a");
        assert_eq!(error["error"]["code"], -32000);
    }

    #[test]
    fn the_busy_body_is_a_json_rpc_error() {
        let busy: Value = serde_json::from_str(BUSY_BODY).unwrap();
        assert_eq!(busy["error"]["code"], BUSY_CODE.0);
    }

    #[test]
    fn draining_refuses_new_work_and_lets_the_rest_go_on() {
        let refused = |body: &str| refused_while_draining(body.as_bytes()).map(|r| r.status());
        let unavailable = Some(StatusCode::SERVICE_UNAVAILABLE);
        for new_work in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__b"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"x:y"}}"#,
        ] {
            assert_eq!(refused(new_work), unavailable, "{new_work}");
        }
        for goes_on in [
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"server/discover"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__b","requestState":"s"}}"#,
            "not json",
        ] {
            assert_eq!(refused(goes_on), None, "{goes_on}");
        }
        let response = refused_while_draining(
            br#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{}}"#,
        )
        .unwrap();
        assert_eq!(
            response.headers()[header::RETRY_AFTER],
            DRAINING_RETRY_AFTER_SECS
        );
    }
}
