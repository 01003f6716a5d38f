//! `auth = { kind = "bearer", token | token_env | token_file }`: reading the token;
//! `auth = { kind = "oauth", … }` of an http connection: its settings.
//!
//! The token becomes a [`SecretString`] as soon as it is read, and no message in
//! this file mentions its text: errors name the key, the variable or the path.

use std::fs;
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};

use super::error::ConfigError;
use super::keypath::KeyPath;
use super::model::{BearerToken, OAuthGrant, OAuthSettings, SupervisorSettings, UpstreamAuth};
use super::raw::RawAuth;
use super::validate::Validator;

impl Validator<'_> {
    /// Resolves an `auth` table of the gateway or the admin API at `key` to
    /// its token.
    pub(crate) fn bearer(&self, key: &KeyPath, raw: RawAuth) -> Result<BearerToken, ConfigError> {
        match raw.kind.as_deref() {
            Some("bearer") => self.bearer_token(key, raw),
            Some("oauth") => Err(self.invalid(
                &key.key("kind"),
                "\"oauth\" is for connections to upstream servers; here the only kind is \"bearer\"",
            )),
            // The kind is not echoed: a token pasted into the wrong key would be.
            Some(_) => Err(self.invalid(
                &key.key("kind"),
                "unknown auth kind; the only supported kind is \"bearer\"",
            )),
            None => Err(self.invalid(
                &key.key("kind"),
                "missing required key 'kind' (the only supported kind is \"bearer\")",
            )),
        }
    }

    /// Resolves an http connection's `auth` table at `key`.
    pub(crate) fn upstream_auth(
        &self,
        key: &KeyPath,
        raw: RawAuth,
        connection: &str,
        supervisor: &SupervisorSettings,
    ) -> Result<UpstreamAuth, ConfigError> {
        match raw.kind.as_deref() {
            Some("bearer") => self.bearer_token(key, raw).map(UpstreamAuth::Bearer),
            Some("oauth") => {
                let Some(state_dir) = &supervisor.state_dir else {
                    return Err(self.invalid(
                        &key.key("kind"),
                        "an OAuth connection keeps its tokens in the state directory, and none \
                         is known (HOME is not set): set supervisor.state_dir",
                    ));
                };
                let token_file = token_file(state_dir, connection);
                self.oauth(key, raw, token_file).map(UpstreamAuth::OAuth)
            }
            Some(_) => Err(self.invalid(
                &key.key("kind"),
                "unknown auth kind; the supported kinds are \"bearer\" and \"oauth\"",
            )),
            None => Err(self.invalid(
                &key.key("kind"),
                "missing required key 'kind' (\"bearer\" or \"oauth\")",
            )),
        }
    }

    fn oauth(
        &self,
        key: &KeyPath,
        raw: RawAuth,
        token_file: PathBuf,
    ) -> Result<OAuthSettings, ConfigError> {
        self.none_of(
            key,
            &[
                ("token", raw.token.is_some()),
                ("token_env", raw.token_env.is_some()),
                ("token_file", raw.token_file.is_some()),
            ],
            "only valid for kind = \"bearer\"; an OAuth connection gets its tokens \
                     from `mcp-supervisor login`",
        )?;
        self.none_of(
            key,
            &[
                ("issuer", raw.issuer.is_some()),
                ("groups_claim", raw.groups_claim.is_some()),
                ("leeway", raw.leeway.is_some()),
            ],
            "only valid for the gateway's own auth (its callers' tokens), not a \
                     connection's",
        )?;
        let grant = match raw.grant.as_deref() {
            None => OAuthGrant::default(),
            Some(name) => OAuthGrant::parse(name).ok_or_else(|| {
                self.invalid(
                    &key.key("grant"),
                    format!(
                        "unknown grant; expected one of \"{}\"",
                        OAuthGrant::NAMES.join("\", \"")
                    ),
                )
            })?,
        };
        if grant == OAuthGrant::ClientCredentials
            && (raw.client_id.is_none() || raw.client_secret_env.is_none())
        {
            return Err(self.invalid(
                &key.key("grant"),
                "\"client_credentials\" needs the client's 'client_id' and \
                 'client_secret_env'",
            ));
        }
        if let Some(id) = &raw.client_id
            && (id.is_empty() || id.chars().any(char::is_control))
        {
            return Err(self.invalid(&key.key("client_id"), "not a valid client id"));
        }
        let client_secret = match raw.client_secret_env {
            Some(var) => {
                let here = key.key("client_secret_env");
                if raw.client_id.is_none() {
                    return Err(self.invalid(
                        &here,
                        "a client secret needs its 'client_id' (without one the client \
                         registers itself)",
                    ));
                }
                Some(self.token_from_env(&here, &var)?)
            }
            None => None,
        };
        if let Some(url) = &raw.client_metadata_url
            && !url.starts_with("https://")
        {
            return Err(self.invalid(
                &key.key("client_metadata_url"),
                "a client metadata document is published at an https:// URL",
            ));
        }
        if let Some(url) = &raw.client_metadata_url {
            self.check(
                &key.key("client_metadata_url"),
                super::values::http_url(url),
            )?;
        }
        let scopes = self.scopes(&key.key("scopes"), raw.scopes)?;
        let authorization_server = match raw.authorization_server {
            Some(url) => {
                self.check(
                    &key.key("authorization_server"),
                    super::values::http_url(&url),
                )?;
                Some(url)
            }
            None => None,
        };
        Ok(OAuthSettings {
            client_id: raw.client_id,
            client_metadata_url: raw.client_metadata_url,
            client_secret,
            scopes,
            grant,
            authorization_server,
            token_file,
        })
    }

    /// `scopes`: words without spaces.
    pub(crate) fn scopes(
        &self,
        key: &KeyPath,
        raw: Option<Vec<String>>,
    ) -> Result<Vec<String>, ConfigError> {
        let scopes = raw.unwrap_or_default();
        if let Some(i) = scopes.iter().position(|scope| {
            scope.is_empty() || scope.chars().any(|c| c.is_whitespace() || c.is_control())
        }) {
            return Err(self.invalid(
                &key.index(i),
                "a scope is one non-empty word without spaces",
            ));
        }
        Ok(scopes)
    }

    pub(crate) fn bearer_token(
        &self,
        key: &KeyPath,
        raw: RawAuth,
    ) -> Result<BearerToken, ConfigError> {
        self.none_of(
            key,
            &[
                ("client_id", raw.client_id.is_some()),
                ("client_metadata_url", raw.client_metadata_url.is_some()),
                ("client_secret_env", raw.client_secret_env.is_some()),
                ("scopes", raw.scopes.is_some()),
                ("grant", raw.grant.is_some()),
                ("authorization_server", raw.authorization_server.is_some()),
                ("issuer", raw.issuer.is_some()),
                ("groups_claim", raw.groups_claim.is_some()),
                ("leeway", raw.leeway.is_some()),
            ],
            "only valid for kind = \"oauth\"",
        )?;
        let given: Vec<&str> = [
            ("token", raw.token.is_some()),
            ("token_env", raw.token_env.is_some()),
            ("token_file", raw.token_file.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect();
        if given.len() != 1 {
            let found = if given.is_empty() {
                "none is set".to_owned()
            } else {
                format!("found '{}'", given.join("' and '"))
            };
            return Err(self.invalid(
                key,
                format!("set exactly one of 'token', 'token_env' or 'token_file' ({found})"),
            ));
        }

        let (source_key, token) = if let Some(token) = raw.token {
            (key.key("token"), token)
        } else if let Some(var) = raw.token_env {
            let here = key.key("token_env");
            (here.clone(), self.token_from_env(&here, &var)?)
        } else if let Some(path) = raw.token_file {
            let here = key.key("token_file");
            (here.clone(), self.token_from_file(&here, &path)?)
        } else {
            // `given.len() == 1` above makes this unreachable; answer it anyway.
            return Err(self.invalid(
                key,
                "set exactly one of 'token', 'token_env' or 'token_file'",
            ));
        };
        self.check_token(&source_key, &token)?;
        Ok(BearerToken::new(token))
    }

    pub(super) fn token_from_env(
        &self,
        key: &KeyPath,
        var: &str,
    ) -> Result<SecretString, ConfigError> {
        if var.is_empty() || var.contains(['=', '\0']) {
            return Err(self.invalid(key, "not a valid environment variable name"));
        }
        match (self.env)(var) {
            Some(value) => Ok(SecretString::from(value)),
            None => Err(ConfigError::MissingEnv {
                file: self.file.to_path_buf(),
                key: key.clone().into_string(),
                var: var.to_owned(),
            }),
        }
    }

    pub(super) fn token_from_file(
        &self,
        key: &KeyPath,
        path: &str,
    ) -> Result<SecretString, ConfigError> {
        if path.is_empty() {
            return Err(self.invalid(key, "must not be empty"));
        }
        let resolved = self.resolve(path);
        // An io::Error's text names the failure, never the file's content (invalid
        // UTF-8 reads as "stream did not contain valid UTF-8").
        let mut text = fs::read_to_string(&resolved).map_err(|error| ConfigError::TokenFile {
            file: self.file.to_path_buf(),
            key: key.clone().into_string(),
            path: resolved,
            error,
        })?;
        // Editors and `echo` add one trailing newline; strip exactly that one.
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        Ok(SecretString::from(text))
    }

    /// A bearer token must fit in an `Authorization` header as one token.
    fn check_token(&self, key: &KeyPath, token: &SecretString) -> Result<(), ConfigError> {
        let text = token.expose_secret();
        if text.is_empty() {
            return Err(self.invalid(key, "the token is empty"));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(self.invalid(key, "the token contains whitespace or a control character"));
        }
        Ok(())
    }
}

/// Where connection `name` keeps its OAuth tokens under `state_dir`.
pub(crate) fn token_file(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join("oauth").join(format!("{name}.json"))
}
