//! `[gateway]` and `[admin]`: the two HTTP servers' addresses, limits and
//! timeouts.

use super::Validator;
use crate::config::error::ConfigError;
use crate::config::keypath::KeyPath;
use crate::config::model::{
    AdminSettings, CallerAuth, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_SESSIONS_PER_CLIENT,
    GatewaySettings,
};
use crate::config::raw::{RawAdmin, RawGateway};
use crate::config::values;

/// Upper bound of `gateway.max_body_bytes`: 1 GiB.
const MAX_BODY_BYTES: usize = 1 << 30;
/// Upper bound of `max_connections` (gateway and admin): more than any file
/// descriptor limit in practice.
const MAX_CONNECTIONS: usize = 1_000_000;
/// Upper bound of `gateway.max_sessions`.
const MAX_SESSIONS: usize = 1_000_000;

impl Validator<'_> {
    pub(super) fn gateway(
        &self,
        key: &KeyPath,
        raw: RawGateway,
    ) -> Result<GatewaySettings, ConfigError> {
        let d = GatewaySettings::default();
        let listen = match raw.listen {
            Some(text) => self.check(&key.key("listen"), values::socket_addr(&text))?,
            None => d.listen,
        };
        let path = match raw.path {
            Some(path) => {
                self.check(&key.key("path"), gateway_path(&path))?;
                path
            }
            None => d.path,
        };
        let expose = self.choice(&key.key("expose"), raw.expose.as_deref(), d.expose)?;
        let prefix = self.choice(&key.key("prefix"), raw.prefix.as_deref(), d.prefix)?;
        let auth = raw
            .auth
            .map(|auth| self.caller_auth(&key.key("auth"), auth))
            .transpose()?;
        let keys = self.keys(&key.key("keys"), raw.keys.unwrap_or_default())?;
        let public_url = match raw.public_url {
            Some(url) => {
                self.check(&key.key("public_url"), values::http_url(&url))?;
                Some(url)
            }
            None => None,
        };
        if matches!(auth, Some(CallerAuth::OAuth(_))) && public_url.is_none() {
            return Err(self.invalid(
                &key.key("public_url"),
                "kind = \"oauth\" needs the gateway's public_url: the resource its clients' \
                 tokens are minted for (RFC 8707), as they reach it",
            ));
        }
        let audit_log = raw
            .audit_log
            .map(|log| self.audit_log(&key.key("audit_log"), log))
            .transpose()?;
        let allowed_hosts = match raw.allowed_hosts {
            Some(hosts) => self.allowed_hosts(&key.key("allowed_hosts"), hosts)?,
            None => d.allowed_hosts,
        };
        let max_body_bytes = match raw.max_body_bytes {
            Some(n) => self.check(
                &key.key("max_body_bytes"),
                values::positive_usize(n, MAX_BODY_BYTES),
            )?,
            None => DEFAULT_MAX_BODY_BYTES,
        };
        let max_sessions = self.count_usize(
            &key.key("max_sessions"),
            raw.max_sessions,
            d.max_sessions,
            MAX_SESSIONS,
        )?;
        let max_sessions_per_client = match raw.max_sessions_per_client {
            Some(n) => self.check(
                &key.key("max_sessions_per_client"),
                values::positive_usize(n, max_sessions).map_err(|error| {
                    if n > 0 {
                        format!("must be at most max_sessions ({max_sessions})")
                    } else {
                        error
                    }
                }),
            )?,
            None => DEFAULT_MAX_SESSIONS_PER_CLIENT.min(max_sessions),
        };
        Ok(GatewaySettings {
            listen,
            path,
            expose,
            prefix,
            auth,
            keys,
            public_url,
            audit_log,
            allowed_hosts,
            max_body_bytes,
            header_timeout: self.duration(
                &key.key("header_timeout"),
                raw.header_timeout,
                d.header_timeout,
            )?,
            body_timeout: self.duration(
                &key.key("body_timeout"),
                raw.body_timeout,
                d.body_timeout,
            )?,
            idle_timeout: self.duration(
                &key.key("idle_timeout"),
                raw.idle_timeout,
                d.idle_timeout,
            )?,
            max_connections: self.count_usize(
                &key.key("max_connections"),
                raw.max_connections,
                d.max_connections,
                MAX_CONNECTIONS,
            )?,
            max_sessions,
            max_sessions_per_client,
            session_idle_timeout: self.duration(
                &key.key("session_idle_timeout"),
                raw.session_idle_timeout,
                d.session_idle_timeout,
            )?,
            session_rest_after: self.duration(
                &key.key("session_rest_after"),
                raw.session_rest_after,
                d.session_rest_after,
            )?,
            trusted_proxies: raw
                .trusted_proxies
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    self.check(&key.key("trusted_proxies").index(i), values::ip_net(text))
                })
                .collect::<Result<_, _>>()?,
            forwarded_header: self.choice(
                &key.key("forwarded_header"),
                raw.forwarded_header.as_deref(),
                d.forwarded_header,
            )?,
        })
    }

    fn allowed_hosts(&self, key: &KeyPath, hosts: Vec<String>) -> Result<Vec<String>, ConfigError> {
        if hosts.is_empty() {
            return Err(self.invalid(
                key,
                "must list at least one host (an empty list would refuse every request)",
            ));
        }
        hosts
            .into_iter()
            .enumerate()
            .map(|(i, host)| {
                let host = host.trim().to_ascii_lowercase();
                if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
                    Err(self.invalid(
                        &key.index(i),
                        "must be a non-empty host name or address without spaces or '/'",
                    ))
                } else {
                    Ok(host)
                }
            })
            .collect()
    }

    pub(super) fn admin(&self, key: &KeyPath, raw: RawAdmin) -> Result<AdminSettings, ConfigError> {
        let d = AdminSettings::default();
        Ok(AdminSettings {
            listen: match raw.listen {
                Some(text) => self.check(&key.key("listen"), values::socket_addr(&text))?,
                None => d.listen,
            },
            auth: raw
                .auth
                .map(|auth| self.bearer(&key.key("auth"), auth))
                .transpose()?,
            allowed_hosts: match raw.allowed_hosts {
                Some(hosts) => self.allowed_hosts(&key.key("allowed_hosts"), hosts)?,
                None => d.allowed_hosts,
            },
            header_timeout: self.duration(
                &key.key("header_timeout"),
                raw.header_timeout,
                d.header_timeout,
            )?,
            idle_timeout: self.duration(
                &key.key("idle_timeout"),
                raw.idle_timeout,
                d.idle_timeout,
            )?,
            max_connections: self.count_usize(
                &key.key("max_connections"),
                raw.max_connections,
                d.max_connections,
                MAX_CONNECTIONS,
            )?,
        })
    }
}

/// `gateway.path`: an absolute URL path, nothing else.
fn gateway_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err("must start with '/', like \"/mcp\"".to_owned());
    }
    if path
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '?' || c == '#')
    {
        return Err("must be a plain path without spaces, '?' or '#'".to_owned());
    }
    Ok(())
}
