//! `[fleet]`: the store the fleet shares, this process's name in it, and
//! the two secrets that come with it (the fleet's key, the store's password).

use std::fmt;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

/// `[fleet]`: the store the fleet shares and this process's name in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetSettings {
    /// A `redis://` or `rediss://` URL without a password (a user name is
    /// allowed: an ACL user).
    pub redis: url::Url,
    /// The password, from `password_env` or `password_file`.
    pub password: Option<Password>,
    /// The fleet's own secret, from `key_env` or `key_file` (32 bytes,
    /// base64): seals what is secret in the store (OAuth tokens) and signs
    /// the session ids the gateway hands out, so a node can tell which node
    /// holds a session.
    pub key: FleetKey,
    /// This process's name in the fleet: unique among the nodes.
    pub node: String,
    /// The prefix of every key and channel, so several fleets can share one Redis.
    pub namespace: String,
    /// How far apart the nodes' wall clocks may be: a shared deadline further
    /// out than the longest window plus this is refused.
    pub max_clock_skew: Duration,
    /// The base URL other nodes reach this node's gateway at
    /// (`http://10.0.0.5:7300`), told to them in every heartbeat; `None`
    /// when `[gateway] listen` names no address others can use (0.0.0.0)
    /// and none is set.
    pub advertise: Option<url::Url>,
}

/// Default `fleet.namespace`.
pub const DEFAULT_FLEET_NAMESPACE: &str = "mcp-supervisor";
/// Default `fleet.max_clock_skew`.
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(2);

/// The fleet's 32-byte key. `Debug` prints `FleetKey([REDACTED])`; the only
/// way to the bytes is [`FleetKey::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct FleetKey([u8; 32]);

impl FleetKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key's bytes, for a cipher or a MAC.
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }

    /// A key of its own for `purpose` (HMAC-SHA256 of the purpose under
    /// this key), so the fleet key's uses (messages, session ids, sealed
    /// tokens) never share a key.
    pub fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        use hmac::{Hmac, KeyInit, Mac};
        let mut derive = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length");
        derive.update(purpose);
        derive.finalize().into_bytes().into()
    }

    /// A random key, for supervisors of one process that share an
    /// in-process store without a `[fleet]` table.
    pub fn random() -> Self {
        Self(rand::random())
    }
}

impl fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FleetKey([REDACTED])")
    }
}

/// A password. `Debug` prints `Password([REDACTED])`; the only way to the
/// text is [`Password::expose`].
#[derive(Clone)]
pub struct Password(SecretString);

impl Password {
    pub fn new(password: SecretString) -> Self {
        Self(password)
    }

    /// The text, for the store's client.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl PartialEq for Password {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

impl Eq for Password {}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password([REDACTED])")
    }
}
