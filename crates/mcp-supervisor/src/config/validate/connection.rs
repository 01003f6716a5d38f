//! `[connections.NAME]`: the transport and its keys (http or stdio), the
//! tool allowlist, and the per-connection limits and overrides.

use std::collections::BTreeSet;

use secrecy::{ExposeSecret, SecretString};

use super::Validator;
use crate::config::error::ConfigError;
use crate::config::keypath::KeyPath;
use crate::config::model::{
    ConnectionConfig, DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_QUEUED_CALLS, HttpTransport,
    RetryCalls, StdioTransport, SupervisorSettings, Transport, UpstreamProtocol,
};
use crate::config::raw::RawConnection;
use crate::config::values::{self, short_quote};

/// Upper bound of `max_concurrent_calls` (well inside tokio's semaphore limit).
const MAX_CONCURRENT_CALLS: usize = 65_536;
/// Upper bound of `max_queued_calls`.
const MAX_QUEUED_CALLS: usize = 1_000_000;

/// Request headers the HTTP transport sets itself; overriding them breaks the
/// protocol, so they are refused with a clear message instead.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "mcp-protocol-version",
    "mcp-session-id",
    "transfer-encoding",
];

impl Validator<'_> {
    pub(super) fn connection(
        &self,
        key: &KeyPath,
        name: String,
        mut raw: RawConnection,
        sup: &SupervisorSettings,
    ) -> Result<ConnectionConfig, ConfigError> {
        self.check(key, values::connection_name(&name))?;
        let transport = match raw.transport.as_deref() {
            Some("http") => Transport::Http(self.http(key, &name, &mut raw, sup)?),
            Some("stdio") => Transport::Stdio(self.stdio(key, &mut raw)?),
            Some(other) => {
                return Err(self.invalid(
                    &key.key("transport"),
                    format!(
                        "unknown transport {}; expected \"http\" or \"stdio\"",
                        short_quote(other)
                    ),
                ));
            }
            None => {
                return Err(self.invalid(
                    &key.key("transport"),
                    "missing required key 'transport' (\"http\" or \"stdio\")",
                ));
            }
        };
        let allowed_tools = raw
            .allowed_tools
            .map(|tools| self.allowed_tools(&key.key("allowed_tools"), tools))
            .transpose()?;
        let retry_calls = self.choice(
            &key.key("retry_calls"),
            raw.retry_calls.as_deref(),
            RetryCalls::default(),
        )?;
        let protocol = self.choice(
            &key.key("protocol"),
            raw.protocol.as_deref(),
            UpstreamProtocol::default(),
        )?;
        Ok(ConnectionConfig {
            transport,
            allowed_tools,
            notes: raw.notes,
            max_concurrent_calls: self.count_usize(
                &key.key("max_concurrent_calls"),
                raw.max_concurrent_calls,
                DEFAULT_MAX_CONCURRENT_CALLS,
                MAX_CONCURRENT_CALLS,
            )?,
            max_queued_calls: self.count_usize(
                &key.key("max_queued_calls"),
                raw.max_queued_calls,
                DEFAULT_MAX_QUEUED_CALLS,
                MAX_QUEUED_CALLS,
            )?,
            connect_timeout: self.duration(
                &key.key("connect_timeout"),
                raw.connect_timeout,
                sup.connect_timeout,
            )?,
            call_timeout: self.duration(
                &key.key("call_timeout"),
                raw.call_timeout,
                sup.call_timeout,
            )?,
            list_timeout: self.duration(
                &key.key("list_timeout"),
                raw.list_timeout,
                sup.list_timeout,
            )?,
            max_attempts: self.attempts(
                &key.key("max_attempts"),
                raw.max_attempts,
                sup.max_attempts,
            )?,
            retry_calls,
            protocol,
            name,
        })
    }

    fn http(
        &self,
        key: &KeyPath,
        name: &str,
        raw: &mut RawConnection,
        supervisor: &SupervisorSettings,
    ) -> Result<HttpTransport, ConfigError> {
        self.forbid(key, "stdio", "command", raw.command.is_some())?;
        self.forbid(key, "stdio", "args", raw.args.is_some())?;
        self.forbid(key, "stdio", "env", raw.env.is_some())?;
        self.forbid(key, "stdio", "cwd", raw.cwd.is_some())?;
        let Some(url) = raw.url.take() else {
            return Err(self.invalid(&key.key("url"), "an http connection requires 'url'"));
        };
        self.check(&key.key("url"), values::http_url(&url))?;
        let auth = raw
            .auth
            .take()
            .map(|auth| self.upstream_auth(&key.key("auth"), auth, name, supervisor))
            .transpose()?;
        let headers = match raw.headers.take() {
            Some(headers) => self.headers(
                &key.key("headers"),
                headers.into_iter().collect(),
                auth.is_some(),
            )?,
            None => Vec::new(),
        };
        Ok(HttpTransport { url, auth, headers })
    }

    fn headers(
        &self,
        key: &KeyPath,
        headers: Vec<(String, SecretString)>,
        has_auth: bool,
    ) -> Result<Vec<(String, SecretString)>, ConfigError> {
        let mut seen = BTreeSet::new();
        for (name, value) in &headers {
            let here = key.key(name);
            let lower = name.to_ascii_lowercase();
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(self.invalid(&here, "not a valid HTTP header name"));
            }
            // Checked on bytes so non-ASCII text is allowed; what is refused is a
            // line break or control character, which would split the request.
            if http::HeaderValue::from_bytes(value.expose_secret().as_bytes()).is_err() {
                return Err(self.invalid(
                    &here,
                    "the header value contains a line break or another control character",
                ));
            }
            if RESERVED_HEADERS.contains(&lower.as_str()) {
                return Err(self.invalid(
                    &here,
                    "this header is set by the MCP transport itself and cannot be configured",
                ));
            }
            if lower == "authorization" && has_auth {
                return Err(self.invalid(
                    &here,
                    "conflicts with 'auth', which already sets Authorization; keep one of them",
                ));
            }
            if !seen.insert(lower) {
                return Err(self.invalid(
                    &here,
                    "duplicate header (header names are case-insensitive)",
                ));
            }
        }
        Ok(headers)
    }

    fn stdio(&self, key: &KeyPath, raw: &mut RawConnection) -> Result<StdioTransport, ConfigError> {
        self.forbid(key, "http", "url", raw.url.is_some())?;
        self.forbid(key, "http", "auth", raw.auth.is_some())?;
        self.forbid(key, "http", "headers", raw.headers.is_some())?;
        let command_key = key.key("command");
        let Some(command) = raw.command.take() else {
            return Err(self.invalid(&command_key, "a stdio connection requires 'command'"));
        };
        if command.trim().is_empty() {
            return Err(self.invalid(&command_key, "must not be empty"));
        }
        if command.contains('\0') {
            return Err(self.invalid(&command_key, "must not contain a NUL character"));
        }
        let args = raw.args.take().unwrap_or_default();
        if let Some(i) = args.iter().position(|a| a.contains('\0')) {
            return Err(self.invalid(
                &key.key("args").index(i),
                "must not contain a NUL character",
            ));
        }
        let mut env = Vec::new();
        for (name, value) in raw.env.take().into_iter().flatten() {
            let here = key.key("env").key(&name);
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(self.invalid(
                    &here,
                    "not a valid environment variable name (empty, or contains '=' or NUL)",
                ));
            }
            if value.expose_secret().contains('\0') {
                return Err(self.invalid(&here, "the value contains a NUL character"));
            }
            env.push((name, value));
        }
        let cwd = match raw.cwd.take() {
            Some(cwd) if cwd.is_empty() => {
                return Err(self.invalid(&key.key("cwd"), "must not be empty"));
            }
            Some(cwd) => Some(self.resolve(&cwd)),
            None => None,
        };
        Ok(StdioTransport {
            command,
            args,
            env,
            cwd,
        })
    }

    fn allowed_tools(&self, key: &KeyPath, tools: Vec<String>) -> Result<Vec<String>, ConfigError> {
        let mut seen = BTreeSet::new();
        for (i, tool) in tools.iter().enumerate() {
            if tool.trim().is_empty() {
                return Err(self.invalid(&key.index(i), "tool names must not be empty"));
            }
            if !seen.insert(tool.as_str()) {
                return Err(
                    self.invalid(&key.index(i), format!("lists {} twice", short_quote(tool)))
                );
            }
        }
        Ok(tools)
    }

    /// Refuses `field` on a connection whose transport is not `owner`.
    fn forbid(
        &self,
        key: &KeyPath,
        owner: &str,
        field: &str,
        present: bool,
    ) -> Result<(), ConfigError> {
        if present {
            Err(self.invalid(
                &key.key(field),
                format!("'{field}' is only valid for transport = \"{owner}\""),
            ))
        } else {
            Ok(())
        }
    }
}
