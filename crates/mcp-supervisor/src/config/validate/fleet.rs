//! `[fleet]`: the store's URL and password, the fleet's key, this node's
//! name and how far the nodes' clocks may drift apart.

use std::time::Duration;

use secrecy::ExposeSecret;

use super::Validator;
use crate::config::error::ConfigError;
use crate::config::keypath::KeyPath;
use crate::config::model::{
    DEFAULT_FLEET_NAMESPACE, DEFAULT_MAX_CLOCK_SKEW, FleetSettings, GatewaySettings, Password,
};
use crate::config::raw::RawFleet;
use crate::config::values;

/// The largest `fleet.max_clock_skew`.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

impl Validator<'_> {
    pub(super) fn fleet(
        &self,
        key: &KeyPath,
        raw: RawFleet,
        gateway: &GatewaySettings,
    ) -> Result<FleetSettings, ConfigError> {
        let Some(redis) = raw.redis else {
            return Err(self.invalid(
                &key.key("redis"),
                "is required: the store's URL, like \"redis://127.0.0.1:6379\"",
            ));
        };
        let redis = self.check(&key.key("redis"), values::redis_url(&redis))?;
        let password = match (raw.password_env, raw.password_file) {
            (Some(_), Some(_)) => {
                return Err(
                    self.invalid(key, "set at most one of 'password_env' or 'password_file'")
                );
            }
            (Some(var), None) => Some(self.token_from_env(&key.key("password_env"), &var)?),
            (None, Some(path)) => Some(self.token_from_file(&key.key("password_file"), &path)?),
            (None, None) => None,
        };
        let secret = match (raw.key_env, raw.key_file) {
            (Some(var), None) => {
                let here = key.key("key_env");
                (self.token_from_env(&here, &var)?, here)
            }
            (None, Some(path)) => {
                let here = key.key("key_file");
                (self.token_from_file(&here, &path)?, here)
            }
            _ => {
                return Err(self.invalid(
                    key,
                    "set exactly one of 'key_env' or 'key_file': the fleet's key, 32 random \
                     bytes in base64 (`openssl rand -base64 32`), the same on every node",
                ));
            }
        };
        let fleet_key = self.check(&secret.1, values::fleet_key(secret.0.expose_secret()))?;
        let node = match raw.node {
            Some(node) => self.check(&key.key("node"), values::fleet_name(node))?,
            None => default_node(),
        };
        let namespace = match raw.namespace {
            Some(namespace) => self.check(&key.key("namespace"), values::fleet_name(namespace))?,
            None => DEFAULT_FLEET_NAMESPACE.to_owned(),
        };
        let max_clock_skew = self.duration(
            &key.key("max_clock_skew"),
            raw.max_clock_skew,
            DEFAULT_MAX_CLOCK_SKEW,
        )?;
        if max_clock_skew > MAX_CLOCK_SKEW {
            return Err(self.invalid(
                &key.key("max_clock_skew"),
                "must be at most 60s: synchronise the clocks (NTP) instead",
            ));
        }
        let advertise = match raw.advertise {
            Some(text) => {
                let here = key.key("advertise");
                self.check(&here, values::http_url(&text))?;
                Some(self.check(&here, url::Url::parse(&text).map_err(|e| e.to_string()))?)
            }
            // Where the gateway listens, when that is an address others can use.
            None => (!gateway.listen.ip().is_unspecified() && gateway.listen.port() != 0)
                .then(|| url::Url::parse(&format!("http://{}", gateway.listen)).ok())
                .flatten(),
        };
        Ok(FleetSettings {
            redis,
            password: password.map(Password::new),
            key: fleet_key,
            node,
            namespace,
            max_clock_skew,
            advertise,
        })
    }
}

/// `fleet.node` when unset: the host name and the process id, unique on a
/// machine and readable across machines.
pub(crate) fn default_node() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .and_then(|name| values::fleet_name(name).ok())
        .unwrap_or_else(|| "node".to_owned());
    format!("{host}-{}", std::process::id())
}
