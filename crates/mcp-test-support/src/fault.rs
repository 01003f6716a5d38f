//! The fault script: which HTTP requests get which injected failure.
//!
//! A script is an ordered list of [`FaultRule`]s. For every JSON-RPC POST the
//! first rule that matches and still has uses left decides the fault; a
//! request no rule matches is forwarded to the MCP server untouched. Rules
//! are changed at runtime through a [`FaultHandle`] (in-process) or
//! `POST /_control/faults` (standalone process), whose JSON form is the serde
//! form of [`FaultRule`]:
//!
//! ```json
//! [{"when": {"tool": "echo"}, "fault": {"kind": "status", "status": 503,
//!   "retry_after": {"seconds": 2}}, "times": 1},
//!  {"when": "any", "fault": {"kind": "delay", "ms": 200}}]
//! ```

use std::{
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use serde::{Deserialize, Serialize};

/// Which requests a rule applies to. Only JSON-RPC POSTs are matched; the
/// SSE `GET` and session `DELETE` requests are always forwarded, so a
/// one-shot rule is never used up by the client's background stream.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// Every JSON-RPC POST, including notifications and unparsable bodies.
    #[default]
    Any,
    /// POSTs whose JSON-RPC `method` equals this (`"tools/call"`,
    /// `"initialize"`, `"notifications/initialized"`, …).
    Method(String),
    /// `tools/call` POSTs for this tool name.
    Tool(String),
}

impl Match {
    /// Shorthand for [`Match::Method`].
    pub fn method(method: impl Into<String>) -> Self {
        Self::Method(method.into())
    }

    /// Shorthand for [`Match::Tool`].
    pub fn tool(tool: impl Into<String>) -> Self {
        Self::Tool(tool.into())
    }

    pub(crate) fn matches(&self, request: &RequestInfo) -> bool {
        match self {
            Self::Any => true,
            Self::Method(method) => request.method.as_deref() == Some(method.as_str()),
            Self::Tool(tool) => {
                request.method.as_deref() == Some("tools/call")
                    && request.tool.as_deref() == Some(tool.as_str())
            }
        }
    }
}

/// A `Retry-After` value, in either RFC 9110 form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// `Retry-After: 2` (delay-seconds).
    Seconds(u64),
    /// `Retry-After: Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate).
    Date(SystemTime),
}

impl RetryAfter {
    /// The header value as sent on the wire.
    pub fn header_value(&self) -> String {
        match self {
            Self::Seconds(seconds) => seconds.to_string(),
            Self::Date(date) => httpdate::fmt_http_date(*date),
        }
    }
}

/// What the fault layer does instead of (or before) forwarding a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "wire::Fault", into = "wire::Fault")]
pub enum Fault {
    /// Answer with this HTTP status.
    Status {
        /// The HTTP status code.
        status: u16,
        /// Sent as a `Retry-After` header when set.
        retry_after: Option<RetryAfter>,
        /// `Some(code)`: `application/json` body holding a JSON-RPC error
        /// (`code`, `message: "injected"`) for the request's id, the way
        /// some servers wrap HTTP errors (and 2026-07-28 servers answer a
        /// few errors). `None`: a plain-text body.
        jsonrpc_body: Option<i32>,
        /// Sent as a `WWW-Authenticate` header when set.
        www_authenticate: Option<String>,
    },
    /// Wait this long, then forward normally.
    Delay(Duration),
    /// Never answer; the connection stays open until the client gives up.
    Hang,
    /// Let the request run (a tool call really executes and is counted),
    /// then send `200` headers and part of a body and drop the connection:
    /// the client sees an incomplete body.
    DropConnection,
    /// Answer `404` as for an unknown `Mcp-Session-Id` and close that
    /// session on the server, so later requests with it also get `404`
    /// until the client initializes a new one.
    ExpireSession,
    /// Answer `200 application/json` with a body that is not JSON-RPC.
    Garbage,
    /// Let the request run (a tool call really executes), then answer this
    /// status instead of its result: a proxy or server failing after the
    /// work was done.
    StatusAfterRun(u16),
}

impl Fault {
    /// A plain-text answer with this status and no extra headers.
    pub fn status(status: u16) -> Self {
        Self::Status {
            status,
            retry_after: None,
            jsonrpc_body: None,
            www_authenticate: None,
        }
    }

    /// Shorthand for [`Fault::Delay`].
    pub fn delay(delay: Duration) -> Self {
        Self::Delay(delay)
    }

    /// Adds `Retry-After: {seconds}` to a [`Fault::Status`] (no-op otherwise).
    pub fn with_retry_after_secs(self, seconds: u64) -> Self {
        self.with_retry_after(RetryAfter::Seconds(seconds))
    }

    /// Adds `Retry-After: {IMF-fixdate}` to a [`Fault::Status`] (no-op otherwise).
    pub fn with_retry_after_date(self, date: SystemTime) -> Self {
        self.with_retry_after(RetryAfter::Date(date))
    }

    /// Sets the `Retry-After` of a [`Fault::Status`] (no-op otherwise).
    pub fn with_retry_after(mut self, value: RetryAfter) -> Self {
        if let Self::Status { retry_after, .. } = &mut self {
            *retry_after = Some(value);
        }
        self
    }

    /// Makes a [`Fault::Status`] answer with a JSON-RPC error body (no-op otherwise).
    pub fn with_jsonrpc_body(self) -> Self {
        self.with_jsonrpc_error(-32603)
    }

    /// Gives a [`Fault::Status`] a JSON-RPC error body with `code` (no-op
    /// otherwise).
    pub fn with_jsonrpc_error(mut self, code: i32) -> Self {
        if let Self::Status { jsonrpc_body, .. } = &mut self {
            *jsonrpc_body = Some(code);
        }
        self
    }

    /// Adds a `WWW-Authenticate` header to a [`Fault::Status`] (no-op otherwise).
    pub fn with_www_authenticate(mut self, value: impl Into<String>) -> Self {
        if let Self::Status {
            www_authenticate, ..
        } = &mut self
        {
            *www_authenticate = Some(value.into());
        }
        self
    }
}

/// One line of the fault script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Which requests this rule applies to (default: any).
    #[serde(default)]
    pub when: Match,
    /// What to do with them.
    pub fault: Fault,
    /// How many requests it applies to before it is used up; `None` = forever.
    #[serde(default)]
    pub times: Option<u32>,
}

impl FaultRule {
    /// A rule that applies to the next matching request only.
    pub fn once(when: Match, fault: Fault) -> Self {
        Self::times(when, fault, 1)
    }

    /// A rule that applies to the next `times` matching requests.
    pub fn times(when: Match, fault: Fault, times: u32) -> Self {
        Self {
            when,
            fault,
            times: Some(times),
        }
    }

    /// A rule that applies to every matching request until removed.
    pub fn always(when: Match, fault: Fault) -> Self {
        Self {
            when,
            fault,
            times: None,
        }
    }
}

/// What the fault layer learned from a request body.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RequestInfo {
    /// The JSON-RPC `method`; `None` for responses and unparsable bodies.
    pub(crate) method: Option<String>,
    /// The JSON-RPC `id`; `None` for notifications.
    pub(crate) id: Option<serde_json::Value>,
    /// `params.name` of a `tools/call`.
    pub(crate) tool: Option<String>,
    /// `params._meta.traceparent` of a `tools/call` (SEP-414), for the
    /// count file.
    pub(crate) traceparent: Option<String>,
}

impl RequestInfo {
    /// Reads method, id and tool name from a JSON-RPC message (the first one
    /// of a batch). Anything unparsable gives an empty info.
    pub(crate) fn parse(body: &[u8]) -> Self {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
            return Self::default();
        };
        let message = match &value {
            serde_json::Value::Array(batch) => match batch.first() {
                Some(first) => first,
                None => return Self::default(),
            },
            other => other,
        };
        let method = message
            .get("method")
            .and_then(|m| m.as_str())
            .map(str::to_owned);
        let (tool, traceparent) = match method.as_deref() {
            Some("tools/call") => {
                let text = |pointer| {
                    message
                        .pointer(pointer)
                        .and_then(|value| value.as_str())
                        .map(str::to_owned)
                };
                (text("/params/name"), text("/params/_meta/traceparent"))
            }
            _ => (None, None),
        };
        Self {
            method,
            id: message.get("id").cloned(),
            tool,
            traceparent,
        }
    }
}

/// The live fault script; cheap to clone, shared by every clone.
#[derive(Debug, Clone, Default)]
pub struct FaultHandle {
    rules: Arc<Mutex<Vec<FaultRule>>>,
}

impl FaultHandle {
    /// Appends a rule at the end of the script.
    pub fn push(&self, rule: FaultRule) {
        self.lock().push(rule);
    }

    /// Replaces the whole script.
    pub fn set(&self, rules: Vec<FaultRule>) {
        *self.lock() = rules;
    }

    /// Removes every rule: all requests are forwarded again.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The rules still in force, with their remaining counts.
    pub fn rules(&self) -> Vec<FaultRule> {
        self.lock().clone()
    }

    /// Picks the fault for a request and uses up one count of its rule.
    pub(crate) fn take(&self, request: &RequestInfo) -> Option<Fault> {
        let mut rules = self.lock();
        let index = rules
            .iter()
            .position(|rule| rule.times != Some(0) && rule.when.matches(request))?;
        let rule = &mut rules[index];
        let fault = rule.fault.clone();
        if let Some(times) = &mut rule.times {
            *times -= 1;
            if *times == 0 {
                rules.remove(index);
            }
        }
        Some(fault)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<FaultRule>> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The JSON form of a [`Fault`]: tagged by `kind`, durations in ms, dates
/// as IMF-fixdate strings.
mod wire {
    use std::time::Duration;

    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
    pub(super) enum Fault {
        Status {
            status: u16,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            retry_after: Option<RetryAfter>,
            /// A JSON-RPC error body with code -32603 …
            #[serde(default)]
            jsonrpc_body: bool,
            /// … or with this code.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            jsonrpc_code: Option<i32>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            www_authenticate: Option<String>,
        },
        Delay {
            ms: u64,
        },
        Hang,
        DropConnection,
        ExpireSession,
        Garbage,
        StatusAfterRun {
            status: u16,
        },
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case", deny_unknown_fields)]
    pub(super) enum RetryAfter {
        Seconds(u64),
        Date(String),
    }

    impl TryFrom<Fault> for super::Fault {
        type Error = String;

        fn try_from(fault: Fault) -> Result<Self, String> {
            Ok(match fault {
                Fault::Status {
                    status,
                    retry_after,
                    jsonrpc_body,
                    jsonrpc_code,
                    www_authenticate,
                } => {
                    let jsonrpc_body = jsonrpc_code.or(jsonrpc_body.then_some(-32603));
                    if http::StatusCode::from_u16(status).is_err() {
                        return Err(format!("invalid HTTP status {status}"));
                    }
                    let retry_after = match retry_after {
                        None => None,
                        Some(RetryAfter::Seconds(s)) => Some(super::RetryAfter::Seconds(s)),
                        Some(RetryAfter::Date(date)) => Some(super::RetryAfter::Date(
                            httpdate::parse_http_date(&date)
                                .map_err(|e| format!("retry_after.date {date:?}: {e}"))?,
                        )),
                    };
                    Self::Status {
                        status,
                        retry_after,
                        jsonrpc_body,
                        www_authenticate,
                    }
                }
                Fault::Delay { ms } => Self::Delay(Duration::from_millis(ms)),
                Fault::Hang => Self::Hang,
                Fault::DropConnection => Self::DropConnection,
                Fault::ExpireSession => Self::ExpireSession,
                Fault::Garbage => Self::Garbage,
                Fault::StatusAfterRun { status } => Self::StatusAfterRun(status),
            })
        }
    }

    impl From<super::Fault> for Fault {
        fn from(fault: super::Fault) -> Self {
            match fault {
                super::Fault::Status {
                    status,
                    retry_after,
                    jsonrpc_body,
                    www_authenticate,
                } => Self::Status {
                    status,
                    retry_after: retry_after.map(|r| match r {
                        super::RetryAfter::Seconds(s) => RetryAfter::Seconds(s),
                        super::RetryAfter::Date(d) => RetryAfter::Date(httpdate::fmt_http_date(d)),
                    }),
                    jsonrpc_body: jsonrpc_body == Some(-32603),
                    jsonrpc_code: jsonrpc_body.filter(|code| *code != -32603),
                    www_authenticate,
                },
                super::Fault::Delay(delay) => Self::Delay {
                    ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                },
                super::Fault::Hang => Self::Hang,
                super::Fault::DropConnection => Self::DropConnection,
                super::Fault::ExpireSession => Self::ExpireSession,
                super::Fault::Garbage => Self::Garbage,
                super::Fault::StatusAfterRun(status) => Self::StatusAfterRun { status },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str) -> RequestInfo {
        RequestInfo {
            method: Some("tools/call".into()),
            id: Some(1.into()),
            tool: Some(tool.into()),
            traceparent: None,
        }
    }

    #[test]
    fn first_matching_rule_with_uses_left_wins() {
        let faults = FaultHandle::default();
        faults.push(FaultRule::once(Match::tool("echo"), Fault::status(503)));
        faults.push(FaultRule::always(Match::method("tools/call"), Fault::Hang));

        assert_eq!(faults.take(&call("echo")), Some(Fault::status(503)));
        // The one-shot rule is used up and removed.
        assert_eq!(faults.take(&call("echo")), Some(Fault::Hang));
        assert_eq!(faults.rules().len(), 1);
        let list = RequestInfo {
            method: Some("tools/list".into()),
            ..RequestInfo::default()
        };
        assert_eq!(faults.take(&list), None);
        faults.clear();
        assert_eq!(faults.take(&call("add")), None);
    }

    #[test]
    fn methods_other_than_tools_call_are_matched_by_method() {
        let faults = FaultHandle::default();
        faults.push(FaultRule::always(
            Match::method("resources/read"),
            Fault::Hang,
        ));
        faults.push(FaultRule::once(
            Match::method("prompts/get"),
            Fault::status(503),
        ));
        let read = RequestInfo::parse(
            br#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"test://doc/readme"}}"#,
        );
        let get = RequestInfo::parse(
            br#"{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"greet"}}"#,
        );
        assert_eq!(read.tool, None);
        assert_eq!(faults.take(&read), Some(Fault::Hang));
        assert_eq!(faults.take(&get), Some(Fault::status(503)));
        assert_eq!(faults.take(&get), None, "used up");
        assert_eq!(faults.take(&read), Some(Fault::Hang));
    }

    #[test]
    fn parses_method_id_and_tool() {
        let info = RequestInfo::parse(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add","arguments":{}}}"#,
        );
        assert_eq!(info.method.as_deref(), Some("tools/call"));
        assert_eq!(info.tool.as_deref(), Some("add"));
        assert_eq!(info.id, Some(7.into()));
        assert_eq!(info.traceparent, None);
        let traced = RequestInfo::parse(
            br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"add","_meta":{"traceparent":"00-ab-cd-01"}}}"#,
        );
        assert_eq!(traced.traceparent.as_deref(), Some("00-ab-cd-01"));
        assert_eq!(RequestInfo::parse(b"not json"), RequestInfo::default());
        let note = RequestInfo::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(note.method.as_deref(), Some("notifications/initialized"));
        assert_eq!(note.id, None);
    }

    #[test]
    fn json_form_round_trips() {
        let date = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let rules = vec![
            FaultRule::once(
                Match::tool("echo"),
                Fault::status(503).with_retry_after_secs(2),
            ),
            FaultRule::always(
                Match::Any,
                Fault::status(429)
                    .with_retry_after_date(date)
                    .with_jsonrpc_body(),
            ),
            FaultRule::times(
                Match::method("initialize"),
                Fault::delay(Duration::from_millis(250)),
                3,
            ),
            FaultRule::once(Match::Any, Fault::DropConnection),
            FaultRule::once(Match::Any, Fault::ExpireSession),
        ];
        let json = serde_json::to_string(&rules).unwrap();
        let back: Vec<FaultRule> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, rules);

        let parsed: Vec<FaultRule> = serde_json::from_str(
            r#"[{"fault":{"kind":"status","status":401,"www_authenticate":"Bearer"}},
                {"when":{"method":"tools/list"},"fault":{"kind":"garbage"},"times":2},
                {"when":"any","fault":{"kind":"status","status":503,
                 "retry_after":{"date":"Sun, 06 Nov 1994 08:49:37 GMT"}}}]"#,
        )
        .unwrap();
        assert_eq!(parsed[0].when, Match::Any);
        assert_eq!(
            parsed[0].fault,
            Fault::status(401).with_www_authenticate("Bearer")
        );
        assert_eq!(parsed[1].times, Some(2));
        assert_eq!(
            parsed[2].fault,
            Fault::status(503).with_retry_after_date(date)
        );
    }

    #[test]
    fn json_form_rejects_mistakes() {
        for bad in [
            r#"{"fault":{"kind":"status","status":42}}"#,
            r#"{"fault":{"kind":"status","status":503,"retry_after":{"date":"tomorrow"}}}"#,
            r#"{"fault":{"kind":"delay","millis":5}}"#,
            r#"{"fault":{"kind":"explode"}}"#,
            r#"{"fault":{"kind":"hang"},"time":1}"#,
        ] {
            assert!(
                serde_json::from_str::<FaultRule>(bad).is_err(),
                "accepted {bad}"
            );
        }
    }

    #[test]
    fn retry_after_header_values() {
        assert_eq!(RetryAfter::Seconds(2).header_value(), "2");
        let date = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            RetryAfter::Date(date).header_value(),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
    }
}
