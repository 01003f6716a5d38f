//! Where the fleet keeps what it shares and how its nodes hear of it: the
//! [`Store`] trait, with the Redis store ([`super::RedisStore`]) and an
//! in-process one ([`LocalStore`]) for supervisors that share one process.
//!
//! A store keeps one value per connection (its standing, with the expiry of a
//! park) and carries messages to every node. It never decides anything: the
//! [`super::Fleet`] actor does. It also keeps a few plain values and locks
//! (`get`, `put`, `try_lock`, `unlock`) under keys relative to its namespace,
//! for what the fleet shares outside the actor (sealed OAuth tokens,
//! `super::tokens`).

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use tokio::sync::{broadcast, mpsc};

/// What a node hears from its store, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// The store is reachable (again): what was kept meanwhile must be read.
    Up,
    /// The store cannot be reached; `why` is our own text, safe to log.
    Down { why: String },
    /// A message some node sent (maybe this one), unchecked.
    Message(Vec<u8>),
}

/// A store operation failed: the store is unreachable or refused it. The text
/// names what failed, never a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// What the fleet needs from a store. Every operation is bounded by the store
/// itself (Redis: a response timeout), and none is on a call's path.
#[async_trait::async_trait]
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// Keeps `message` as `connection`'s standing (until `expires`, or until
    /// forgotten) and sends it to every node.
    async fn keep(
        &self,
        connection: &str,
        message: &str,
        expires: Option<SystemTime>,
    ) -> Result<(), StoreError>;
    /// Forgets `connection`'s standing and sends `message` to every node.
    async fn forget(&self, connection: &str, message: &str) -> Result<(), StoreError>;
    /// Sends `message` to every node, keeping nothing.
    async fn send(&self, message: &str) -> Result<(), StoreError>;
    /// Every standing kept now.
    async fn kept(&self) -> Result<Vec<Vec<u8>>, StoreError>;
    /// What the store says from now on: first `Up` or `Down`, then messages
    /// and changes of health.
    fn listen(&self) -> mpsc::UnboundedReceiver<Heard>;
    /// The value kept under `key` (relative to the namespace), if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Keeps `value` under `key` for `ttl`, replacing what was there.
    async fn put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError>;
    /// Takes the lock `key` for `holder` for `ttl`, unless someone holds it:
    /// `true` when taken (Redis: `SET key holder NX PX ttl`).
    async fn try_lock(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError>;
    /// Releases the lock `key` if `holder` still holds it (it may have
    /// expired and been taken by another).
    async fn unlock(&self, key: &str, holder: &str) -> Result<(), StoreError>;
}

/// A store in this process's memory: supervisors started with the same one
/// (clones share it) act as one fleet. Always up.
#[derive(Clone)]
pub struct LocalStore {
    kept: Arc<Mutex<Kept>>,
    /// Plain values and locks, timed on tokio's clock (paused in tests).
    values: Arc<Mutex<Values>>,
    bus: broadcast::Sender<Vec<u8>>,
}

/// Connection → (message, when it expires).
type Kept = HashMap<String, (String, Option<SystemTime>)>;
/// Key → (value, when it expires).
type Values = HashMap<String, (Vec<u8>, tokio::time::Instant)>;

impl Default for LocalStore {
    fn default() -> Self {
        LocalStore {
            kept: Arc::default(),
            values: Arc::default(),
            bus: broadcast::channel(1024).0,
        }
    }
}

impl fmt::Debug for LocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LocalStore")
    }
}

impl LocalStore {
    fn map(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A panic while holding it cannot leave the map half-written.
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The values still live, as of now.
    fn values(&self) -> std::sync::MutexGuard<'_, Values> {
        let mut values = self
            .values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = tokio::time::Instant::now();
        values.retain(|_, (_, expires)| *expires > now);
        values
    }
}

#[async_trait::async_trait]
impl Store for LocalStore {
    async fn keep(
        &self,
        connection: &str,
        message: &str,
        expires: Option<SystemTime>,
    ) -> Result<(), StoreError> {
        self.map()
            .insert(connection.to_owned(), (message.to_owned(), expires));
        self.send(message).await
    }

    async fn forget(&self, connection: &str, message: &str) -> Result<(), StoreError> {
        self.map().remove(connection);
        self.send(message).await
    }

    async fn send(&self, message: &str) -> Result<(), StoreError> {
        // No listener yet is not an error: nobody is there to tell.
        let _ = self.bus.send(message.as_bytes().to_vec());
        Ok(())
    }

    async fn kept(&self) -> Result<Vec<Vec<u8>>, StoreError> {
        let now = SystemTime::now();
        Ok(self
            .map()
            .values()
            .filter(|(_, expires)| expires.is_none_or(|at| at > now))
            .map(|(message, _)| message.as_bytes().to_vec())
            .collect())
    }

    fn listen(&self) -> mpsc::UnboundedReceiver<Heard> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut bus = self.bus.subscribe();
        let _ = tx.send(Heard::Up);
        tokio::spawn(async move {
            loop {
                match bus.recv().await {
                    Ok(message) => {
                        if tx.send(Heard::Message(message)).is_err() {
                            return;
                        }
                    }
                    // Fell behind: read everything kept again, as after an outage.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if tx.send(Heard::Up).is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        rx
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.values().get(key).map(|(value, _)| value.clone()))
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let expires = tokio::time::Instant::now() + ttl;
        self.values()
            .insert(key.to_owned(), (value.to_vec(), expires));
        Ok(())
    }

    async fn try_lock(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut values = self.values();
        if values.contains_key(key) {
            return Ok(false);
        }
        let expires = tokio::time::Instant::now() + ttl;
        values.insert(key.to_owned(), (holder.as_bytes().to_vec(), expires));
        Ok(true)
    }

    async fn unlock(&self, key: &str, holder: &str) -> Result<(), StoreError> {
        let mut values = self.values();
        if values
            .get(key)
            .is_some_and(|(held, _)| held == holder.as_bytes())
        {
            values.remove(key);
        }
        Ok(())
    }
}
