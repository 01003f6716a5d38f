//! `auth = { kind = "bearer", token | token_env | token_file }`: reading the token.
//!
//! The token becomes a [`SecretString`] as soon as it is read, and no message in
//! this file mentions its text: errors name the key, the variable or the path.

use std::fs;

use secrecy::{ExposeSecret, SecretString};

use super::error::ConfigError;
use super::keypath::KeyPath;
use super::model::BearerToken;
use super::raw::RawAuth;
use super::validate::Validator;

impl Validator<'_> {
    /// Resolves an `auth` table at `key` to its token.
    pub(crate) fn bearer(&self, key: &KeyPath, raw: RawAuth) -> Result<BearerToken, ConfigError> {
        match raw.kind.as_deref() {
            Some("bearer") => {}
            Some(_) => {
                // The kind is not echoed: a token pasted into the wrong key would be.
                return Err(self.invalid(
                    &key.key("kind"),
                    "unknown auth kind; the only supported kind is \"bearer\"",
                ));
            }
            None => {
                return Err(self.invalid(
                    &key.key("kind"),
                    "missing required key 'kind' (the only supported kind is \"bearer\")",
                ));
            }
        }

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

    fn token_from_env(&self, key: &KeyPath, var: &str) -> Result<SecretString, ConfigError> {
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

    fn token_from_file(&self, key: &KeyPath, path: &str) -> Result<SecretString, ConfigError> {
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
