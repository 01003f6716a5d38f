#[test]
fn the_scope_an_insufficient_scope_challenge_names_is_kept_clean() {
    use super::required_scope;
    assert_eq!(
        required_scope(r#"Bearer error="insufficient_scope", scope="files:read  files:write""#)
            .as_deref(),
        Some("files:read files:write")
    );
    assert_eq!(
        required_scope(r#"Bearer error="invalid_token", scope="a""#),
        None
    );
    assert_eq!(required_scope(r#"Bearer error="insufficient_scope""#), None);
}

use super::*;

#[test]
fn media_types_ignore_parameters_and_case() {
    assert!(media_type_is(
        "application/json; charset=utf-8",
        JSON_MIME_TYPE
    ));
    assert!(media_type_is("Text/Event-Stream", EVENT_STREAM_MIME_TYPE));
    assert!(!media_type_is("application/jsonl", JSON_MIME_TYPE));
}

#[test]
fn the_header_names_are_rmcps() {
    use rmcp::transport::common::http_header::{HEADER_LAST_EVENT_ID, HEADER_SESSION_ID};
    let name = |text: &str| HeaderName::from_bytes(text.as_bytes()).unwrap();
    assert_eq!(LAST_EVENT_ID, name(HEADER_LAST_EVENT_ID));
    assert_eq!(SESSION_ID, name(HEADER_SESSION_ID));
}

/// A header that is no header (a token with a line break) fails its
/// request as reqwest's builder fails it, before anything is sent, on
/// the plain-HTTP lane too; the credential is marked sensitive.
#[tokio::test]
async fn a_header_that_is_no_header_fails_as_reqwest_fails_it() {
    let lane = crate::http::PlainLane::new(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(1),
    );
    assert!(lane.is_some(), "no proxy is configured for the tests");
    let client = RecordingClient::new(
        HttpClients::new(reqwest::Client::new(), reqwest::Client::new()).with_plain_lane(lane),
        HttpRecorder::default(),
    );
    // Nothing listens there: reaching it would fail otherwise.
    let uri: Arc<str> = Arc::from("http://127.0.0.1:9/mcp");
    let request = client.request(
        reqwest::Method::POST,
        Some("canary\ntoken".into()),
        HeaderMap::new(),
    );
    assert!(request.headers.get(AUTHORIZATION).is_none());
    match client.send(&uri, request).await {
        Err(StreamableHttpError::Client(error)) => assert!(error.is_builder(), "{error:?}"),
        other => panic!("not reqwest's builder error: {other:?}"),
    }
    let request = client.request(reqwest::Method::POST, Some("t".into()), HeaderMap::new());
    let bearer = &request.headers[AUTHORIZATION];
    assert_eq!(bearer, "Bearer t");
    assert!(bearer.is_sensitive());
}

#[test]
fn the_bearer_comes_before_a_configured_authorization() {
    let client = RecordingClient::new(
        HttpClients::new(reqwest::Client::new(), reqwest::Client::new()),
        HttpRecorder::default(),
    );
    let mut configured = HeaderMap::new();
    configured.insert(AUTHORIZATION, HeaderValue::from_static("Basic static"));
    configured.insert("x-team", HeaderValue::from_static("agents"));
    let request = client.request(reqwest::Method::POST, Some("caller".into()), configured);
    let values: Vec<_> = request.headers.get_all(AUTHORIZATION).iter().collect();
    assert_eq!(values, ["Bearer caller", "Basic static"]);
    assert!(values.iter().all(|value| value.is_sensitive()));
    assert!(request.headers["x-team"].is_sensitive());
}

#[test]
fn paths_drop_the_query() {
    let client = RecordingClient::new(
        HttpClients::new(reqwest::Client::new(), reqwest::Client::new()),
        HttpRecorder::default(),
    );
    assert_eq!(
        &*client.path(&Arc::from("https://h.example/mcp/v1?api_key=SECRET")),
        "/mcp/v1"
    );
    assert_eq!(&*client.path(&Arc::from("not a url")), "/");
}
