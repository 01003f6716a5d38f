//! The WebDriver wire: one HTTP request per command, JSON in and out, and
//! the W3C answer envelope (`{"value": …}`) taken apart in one place.

use std::{fmt, time::Duration};

use anyhow::Context as _;
use reqwest::Method;
use serde_json::Value;

/// Longest any one command may take. Generous: a page load or an async
/// script is bounded by the session's own timeouts (30 s), and a slow,
/// busy CI machine starts a browser in seconds.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A WebDriver error answer (`{"value":{"error":…,"message":…}}`), naming
/// the command it answered. Reaches callers inside an [`anyhow::Error`];
/// `downcast_ref::<WebDriverError>()` tells e.g. `no such element` apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebDriverError {
    /// The command, as `METHOD /path` relative to the session.
    pub command: String,
    /// The W3C error code, e.g. `no such element`, `javascript error`.
    pub error: String,
    /// The driver's human message.
    pub message: String,
}

impl fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "WebDriver {} failed: {}: {}",
            self.command, self.error, self.message
        )
    }
}

impl std::error::Error for WebDriverError {}

/// Talks to one chromedriver; cheap to clone (elements keep a copy).
#[derive(Debug, Clone)]
pub(super) struct Wire {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT`.
    base: String,
    /// `/session/ID` once a session is open; empty before.
    session: String,
}

impl Wire {
    pub(super) fn new(port: u16) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            // The driver is on loopback: a proxy from the environment must
            // not be asked for it.
            .no_proxy()
            .timeout(COMMAND_TIMEOUT)
            .build()
            .context("building the WebDriver HTTP client")?;
        Ok(Self {
            http,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
        })
    }

    /// Commands from now on go to the session `id`.
    pub(super) fn bind(&mut self, id: &str) {
        self.session = format!("/session/{id}");
    }

    /// `GET /status`'s `ready`; `false` while the driver cannot be reached.
    pub(super) async fn ready(&self) -> bool {
        let answer = async {
            let response = self
                .http
                .get(format!("{}/status", self.base))
                .timeout(Duration::from_secs(2))
                .send()
                .await?;
            response.json::<Value>().await
        };
        answer
            .await
            .is_ok_and(|body| body["value"]["ready"] == Value::Bool(true))
    }

    /// Opens a session with `capabilities`; returns its id.
    pub(super) async fn new_session(&self, capabilities: Value) -> anyhow::Result<String> {
        let body = serde_json::json!({ "capabilities": capabilities });
        let value = self.send(Method::POST, "/session", Some(body)).await?;
        value["sessionId"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("WebDriver POST /session answered no sessionId: {value}"))
    }

    /// `GET` a session command, e.g. `/title`.
    pub(super) async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(Method::GET, &format!("{}{path}", self.session), None)
            .await
    }

    /// `POST` a session command with a JSON body.
    pub(super) async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(Method::POST, &format!("{}{path}", self.session), Some(body))
            .await
    }

    /// `DELETE` a session command; `""` deletes the session itself.
    pub(super) async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.send(Method::DELETE, &format!("{}{path}", self.session), None)
            .await
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        // Named relative to the session (`POST /element`), the session
        // itself by its full path.
        let relative = path
            .strip_prefix(self.session.as_str())
            .filter(|rest| !rest.is_empty())
            .unwrap_or(path);
        let command = format!("{method} {relative}");
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("WebDriver {command}: chromedriver did not answer"))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .with_context(|| format!("WebDriver {command}: reading the answer"))?;
        let body: Value = serde_json::from_str(&text).with_context(|| {
            format!("WebDriver {command} answered HTTP {status} with no JSON: {text}")
        })?;
        unwrap_envelope(command, body)
    }
}

/// The `value` of a W3C answer, or the error it carries.
fn unwrap_envelope(command: String, mut body: Value) -> anyhow::Result<Value> {
    let value = body["value"].take();
    match value["error"].as_str() {
        Some(error) => Err(WebDriverError {
            command,
            error: error.to_owned(),
            message: value["message"].as_str().unwrap_or_default().to_owned(),
        }
        .into()),
        None => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_value_is_unwrapped() {
        let value = unwrap_envelope("GET /title".into(), json!({"value": "Home"})).unwrap();
        assert_eq!(value, json!("Home"));
        let value = unwrap_envelope("POST /url".into(), json!({"value": null})).unwrap();
        assert_eq!(value, Value::Null);
    }

    #[test]
    fn an_error_names_the_command() {
        let body = json!({"value": {
            "error": "no such element",
            "message": "no such element: Unable to locate element",
            "stacktrace": "#0 0x55…",
        }});
        let error = unwrap_envelope("POST /element".into(), body).unwrap_err();
        let typed = error.downcast_ref::<WebDriverError>().unwrap();
        assert_eq!(typed.error, "no such element");
        assert_eq!(
            error.to_string(),
            "WebDriver POST /element failed: no such element: \
             no such element: Unable to locate element"
        );
    }

    /// A value that happens to be an object with other keys is no error.
    #[test]
    fn an_object_value_without_error_is_a_value() {
        let body = json!({"value": {"sessionId": "abc", "capabilities": {}}});
        let value = unwrap_envelope("POST /session".into(), body).unwrap();
        assert_eq!(value["sessionId"], "abc");
    }
}
