//! `[connections.NAME]`: the transport and its keys (http or stdio), the
//! tool allowlist, and the per-connection limits and overrides.

use std::collections::BTreeSet;

use secrecy::{ExposeSecret, SecretString};

use super::Validator;
use crate::config::error::ConfigError;
use crate::config::keypath::KeyPath;
use crate::config::model::{
    CallerCredential, CallerCredentials, ConnectionConfig, DEFAULT_MAX_CONCURRENT_CALLS,
    DEFAULT_MAX_QUEUED_CALLS, DEFAULT_ON_BEHALF_IDLE, DEFAULT_ON_BEHALF_SESSIONS, HttpTransport,
    OnBehalf, RetryCalls, StdioTransport, SupervisorSettings, Transport, UpstreamProtocol,
};
use crate::config::raw::{RawAuth, RawConnection, RawOnBehalf};
use crate::config::values::{self, short_quote};

/// Upper bound of `max_concurrent_calls` (well inside tokio's semaphore limit).
const MAX_CONCURRENT_CALLS: usize = 65_536;
/// Upper bound of `max_queued_calls`.
const MAX_QUEUED_CALLS: usize = 1_000_000;
/// Upper bound of `on_behalf.max_sessions`.
const MAX_ON_BEHALF_SESSIONS: usize = 100_000;

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
        let probe = self.probe(key, raw.take_probe(), sup.probe)?;
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
            probe,
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
        let on_behalf = raw
            .on_behalf
            .take()
            .map(|raw| self.on_behalf(&key.key("on_behalf"), raw, &url))
            .transpose()?;
        Ok(HttpTransport {
            url,
            auth,
            headers,
            on_behalf,
        })
    }

    /// `on_behalf`: whose credentials the connection's calls carry.
    fn on_behalf(
        &self,
        key: &KeyPath,
        raw: RawOnBehalf,
        url: &str,
    ) -> Result<OnBehalf, ConfigError> {
        let credentials = match raw.kind.as_deref() {
            Some("token_exchange") => {
                self.none_of(
                    key,
                    &[("credentials", raw.credentials.is_some())],
                    "only valid for kind = \"per_caller\"",
                )?;
                let audience = match raw.audience {
                    Some(audience) => {
                        if audience.is_empty() || audience.chars().any(char::is_whitespace) {
                            return Err(self.invalid(
                                &key.key("audience"),
                                "an audience is a non-empty URI without spaces",
                            ));
                        }
                        audience
                    }
                    None => url.to_owned(),
                };
                CallerCredentials::TokenExchange {
                    audience,
                    scopes: self.scopes(&key.key("scopes"), raw.scopes)?,
                }
            }
            Some("per_caller") => {
                self.none_of(
                    key,
                    &[
                        ("audience", raw.audience.is_some()),
                        ("scopes", raw.scopes.is_some()),
                    ],
                    "only valid for kind = \"token_exchange\"",
                )?;
                let here = key.key("credentials");
                let raw = raw.credentials.unwrap_or_default();
                if raw.is_empty() {
                    return Err(self.invalid(
                        &here,
                        "missing or empty 'credentials': give at least one \
                         { who = [...], token_env = \"NAME\" }",
                    ));
                }
                let invalid = |key: &KeyPath, problem: String| self.invalid(key, problem);
                let credentials = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, credential)| {
                        let at = here.index(i);
                        let who = self.whom(&at, credential.who, &invalid)?;
                        let token = self.bearer_token(
                            &at,
                            RawAuth {
                                token: credential.token,
                                token_env: credential.token_env,
                                token_file: credential.token_file,
                                ..RawAuth::default()
                            },
                        )?;
                        Ok(CallerCredential { who, token })
                    })
                    .collect::<Result<Vec<_>, ConfigError>>()?;
                CallerCredentials::PerCaller(credentials)
            }
            Some(_) => {
                return Err(self.invalid(
                    &key.key("kind"),
                    "unknown kind; expected \"token_exchange\" or \"per_caller\"",
                ));
            }
            None => {
                return Err(self.invalid(
                    &key.key("kind"),
                    "missing required key 'kind' (\"token_exchange\" or \"per_caller\")",
                ));
            }
        };
        Ok(OnBehalf {
            credentials,
            max_sessions: self.count_usize(
                &key.key("max_sessions"),
                raw.max_sessions,
                DEFAULT_ON_BEHALF_SESSIONS,
                MAX_ON_BEHALF_SESSIONS,
            )?,
            idle_timeout: self.duration(
                &key.key("idle_timeout"),
                raw.idle_timeout,
                DEFAULT_ON_BEHALF_IDLE,
            )?,
        })
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
        self.forbid(key, "http", "on_behalf", raw.on_behalf.is_some())?;
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
