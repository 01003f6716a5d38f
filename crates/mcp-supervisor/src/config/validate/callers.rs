//! `[gateway]`'s callers (`auth`, `keys`, `public_url`, `audit_log`) and
//! the `[[access]]` rules (docs/SECURITY.md).

use std::collections::BTreeMap;

use toml::Spanned;

use super::Validator;
use crate::access::{Kind, Limit, Limits, Pattern, Rule, Rules, Who};
use crate::config::error::{ConfigError, Location};
use crate::config::keypath::KeyPath;
use crate::config::model::{
    ApiKey, AuditLog, CallerAuth, ConnectionConfig, DEFAULT_GROUPS_CLAIM, DEFAULT_LEEWAY,
    IntrospectionClient, Prefix, ResourceServer,
};
use crate::config::raw::{RawAccess, RawAuth, RawKey, RawLimit};

/// The largest limit: a million calls a minute, or at once, is none.
const MAX_LIMIT: u32 = 1_000_000;
use crate::config::values;

impl Validator<'_> {
    /// The gateway's `auth`: `kind = "bearer"` or `kind = "oauth"`.
    pub(super) fn caller_auth(
        &self,
        key: &KeyPath,
        raw: RawAuth,
    ) -> Result<CallerAuth, ConfigError> {
        match raw.kind.as_deref() {
            Some("oauth") => self.resource_server(key, raw).map(CallerAuth::OAuth),
            Some("bearer") => self.bearer(key, raw).map(CallerAuth::Bearer),
            // The kind is not echoed: a token pasted into the wrong key would be.
            Some(_) => Err(self.invalid(
                &key.key("kind"),
                "unknown auth kind; expected \"bearer\" (one shared token) or \"oauth\" \
                 (access tokens of an authorization server)",
            )),
            None => Err(self.invalid(
                &key.key("kind"),
                "missing required key 'kind' (\"bearer\" or \"oauth\")",
            )),
        }
    }

    fn resource_server(&self, key: &KeyPath, raw: RawAuth) -> Result<ResourceServer, ConfigError> {
        self.none_of(
            key,
            &[
                ("token", raw.token.is_some()),
                ("token_env", raw.token_env.is_some()),
                ("token_file", raw.token_file.is_some()),
                ("client_metadata_url", raw.client_metadata_url.is_some()),
                ("grant", raw.grant.is_some()),
                ("authorization_server", raw.authorization_server.is_some()),
            ],
            "not a key of the gateway's kind = \"oauth\" (its keys: issuer, \
                     groups_claim, scopes, leeway, client_id, client_secret_env)",
        )?;
        let Some(issuer) = raw.issuer else {
            return Err(self.invalid(
                &key.key("issuer"),
                "missing required key 'issuer' (the authorization server's issuer URL)",
            ));
        };
        self.check(&key.key("issuer"), values::http_url(&issuer))?;
        let groups_claim = raw
            .groups_claim
            .unwrap_or_else(|| DEFAULT_GROUPS_CLAIM.to_owned());
        if groups_claim.is_empty() {
            return Err(self.invalid(&key.key("groups_claim"), "must not be empty"));
        }
        let scopes = self.scopes(&key.key("scopes"), raw.scopes)?;
        let introspection = match (raw.client_id, raw.client_secret_env) {
            (Some(client_id), Some(var)) => Some(IntrospectionClient {
                client_secret: self.token_from_env(&key.key("client_secret_env"), &var)?,
                client_id,
            }),
            (None, None) => None,
            (Some(_), None) | (None, Some(_)) => {
                return Err(self.invalid(
                    key,
                    "'client_id' and 'client_secret_env' go together: the gateway's own \
                     client, with which it introspects opaque tokens",
                ));
            }
        };
        Ok(ResourceServer {
            issuer,
            groups_claim,
            scopes,
            leeway: self.duration(&key.key("leeway"), raw.leeway, DEFAULT_LEEWAY)?,
            introspection,
        })
    }

    /// `[gateway.keys.NAME]`, sorted by name.
    pub(super) fn keys(
        &self,
        key: &KeyPath,
        raw: BTreeMap<String, RawKey>,
    ) -> Result<Vec<ApiKey>, ConfigError> {
        let mut keys: Vec<ApiKey> = Vec::with_capacity(raw.len());
        for (name, raw) in raw {
            let here = key.key(&name);
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(
                    self.invalid(&here, "a key's name is letters, digits, '-', '_' and '.'")
                );
            }
            let Some(hex) = raw.sha256 else {
                return Err(self.invalid(
                    &here.key("sha256"),
                    "missing required key 'sha256' (the key's SHA-256 in hex, e.g. from \
                     `printf %s KEY | sha256sum`)",
                ));
            };
            let sha256 = self.check(&here.key("sha256"), sha256_hex(&hex))?;
            if let Some(other) = keys.iter().find(|key| key.sha256 == sha256) {
                return Err(self.invalid(
                    &here.key("sha256"),
                    format!("the same key as '{}': a key names one client", other.name),
                ));
            }
            let groups = raw.groups.unwrap_or_default();
            if let Some(i) = groups.iter().position(String::is_empty) {
                return Err(self.invalid(&here.key("groups").index(i), "must not be empty"));
            }
            keys.push(ApiKey {
                name,
                sha256,
                groups,
            });
        }
        Ok(keys)
    }

    /// `[gateway] audit_log`: `"-"` for standard output, else a file.
    pub(super) fn audit_log(&self, key: &KeyPath, raw: String) -> Result<AuditLog, ConfigError> {
        match raw.as_str() {
            "" => Err(self.invalid(key, "must not be empty (\"-\" is standard output)")),
            "-" => Ok(AuditLog::Stdout),
            path => Ok(AuditLog::File(self.resolve(path))),
        }
    }

    /// `[[limits]]`, each for someone and limiting something.
    pub(super) fn limits(
        &self,
        key: &KeyPath,
        raw: Vec<Spanned<RawLimit>>,
    ) -> Result<Limits, ConfigError> {
        let mut limits = Vec::with_capacity(raw.len());
        for (i, spanned) in raw.into_iter().enumerate() {
            let here = key.index(i);
            let location = Location::from_offset(self.text, spanned.span().start);
            let invalid = |key: &KeyPath, problem| self.invalid_at(key, location, problem);
            let raw = spanned.into_inner();
            let who = self.whom(&here, raw.who, &invalid)?;
            let count = |name: &str, value: Option<i64>| {
                value
                    .map(|n| {
                        values::positive_usize(n, MAX_LIMIT as usize)
                            .map(|n| n as u32)
                            .map_err(|why| invalid(&here.key(name), why))
                    })
                    .transpose()
            };
            let per_minute = count("calls_per_minute", raw.calls_per_minute)?;
            let at_once = count("concurrent_calls", raw.concurrent_calls)?;
            if per_minute.is_none() && at_once.is_none() {
                return Err(invalid(
                    &here,
                    "a limit limits something: give 'calls_per_minute', 'concurrent_calls' or both"
                        .to_owned(),
                ));
            }
            limits.push(Limit {
                who,
                per_minute,
                at_once,
            });
        }
        Ok(Limits::new(limits))
    }

    /// A rule's or limit's `who`, read.
    pub(super) fn whom(
        &self,
        here: &KeyPath,
        who: Option<Vec<String>>,
        invalid: &dyn Fn(&KeyPath, String) -> ConfigError,
    ) -> Result<Vec<Who>, ConfigError> {
        let who = who.unwrap_or_default();
        if who.is_empty() {
            return Err(invalid(
                &here.key("who"),
                "missing or empty 'who': name whom it is for (\"anyone\", \"group:NAME\", …)"
                    .to_owned(),
            ));
        }
        who.iter()
            .enumerate()
            .map(|(j, text)| {
                Who::parse(text).map_err(|why| invalid(&here.key("who").index(j), why))
            })
            .collect()
    }

    /// `[[access]]`, checked against the connections that exist; with the
    /// warnings of rules no caller reaches.
    pub(super) fn access(
        &self,
        key: &KeyPath,
        raw: Vec<Spanned<RawAccess>>,
        connections: &[ConnectionConfig],
        prefix: Prefix,
    ) -> Result<(Rules, Vec<String>), ConfigError> {
        let mut rules = Vec::with_capacity(raw.len());
        let mut at = Vec::with_capacity(raw.len());
        for (i, spanned) in raw.into_iter().enumerate() {
            let here = key.index(i);
            let location = Location::from_offset(self.text, spanned.span().start);
            at.push(location);
            let invalid = |key: &KeyPath, problem| self.invalid_at(key, location, problem);
            let raw = spanned.into_inner();
            let who = self.whom(&here, raw.who, &invalid)?;
            let patterns = |name: &str, texts: Option<Vec<String>>| {
                texts
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                    .map(|(j, text)| {
                        let pattern_key = here.key(name).index(j);
                        let pattern =
                            Pattern::parse(text).map_err(|why| invalid(&pattern_key, why))?;
                        match names_missing_connection(&pattern, connections, prefix) {
                            Some(missing) => Err(invalid(
                                &pattern_key,
                                format!("names connection '{missing}', which is not configured"),
                            )),
                            None => Ok(pattern),
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
            let allow = patterns("allow", raw.allow)?;
            let deny = patterns("deny", raw.deny)?;
            if allow.is_empty() && deny.is_empty() {
                return Err(invalid(
                    &here,
                    "a rule allows or denies something: give 'allow', 'deny' or both".to_owned(),
                ));
            }
            rules.push(Rule::new(who, allow, deny));
        }
        let rules = Rules::new(rules);
        let warnings = rules
            .unreachable()
            .into_iter()
            .map(|(later, earlier)| {
                format!(
                    "{}: {} ({}): unreachable: rule {} ({}) already decides all it names for \
                     the same callers",
                    self.file.display(),
                    key.index(later).clone().into_string(),
                    at[later],
                    key.index(earlier).clone().into_string(),
                    at[earlier],
                )
            })
            .collect();
        Ok((rules, warnings))
    }
}

/// The connection a pattern names literally that is not configured: a
/// `connection:` pattern without wildcards, or (when every exposed name is
/// prefixed) the `NAME__` a tool or prompt pattern starts with.
fn names_missing_connection(
    pattern: &Pattern,
    connections: &[ConnectionConfig],
    prefix: Prefix,
) -> Option<String> {
    let literal = |text: &str| !text.contains(['*', '?', '[', '{', '\\']);
    let named = match pattern.kind {
        Kind::Connection => Some(pattern.glob()).filter(|glob| literal(glob)),
        Kind::Tool | Kind::Prompt if prefix == Prefix::Always => pattern
            .glob()
            .split_once("__")
            .map(|(connection, _)| connection)
            .filter(|connection| literal(connection)),
        _ => None,
    }?;
    (!connections.iter().any(|c| c.name == named)).then(|| named.to_owned())
}

/// 32 bytes from 64 hex digits.
fn sha256_hex(text: &str) -> Result<[u8; 32], String> {
    let wrong = || "expected the key's SHA-256 as 64 hex digits".to_owned();
    if text.len() != 64 {
        return Err(wrong());
    }
    let mut bytes = [0; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(wrong)?, 16)
            .map_err(|_| wrong())?;
    }
    Ok(bytes)
}
