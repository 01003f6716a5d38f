//! The Redis store: one key per connection's standing
//! (`{namespace}:standing:{connection}`, expiring with its park), one
//! pub/sub channel (`{namespace}:events`) that carries every message, and
//! plain values and locks under `{namespace}:` (`get`, `put`, `try_lock`,
//! `unlock`).
//!
//! Commands go through the `redis` crate's reconnecting connection manager,
//! each bounded by [`RESPONSE_TIMEOUT`]; the subscription is a connection of
//! its own, opened again every [`RECONNECT_EVERY`] while Redis is away.

use std::{
    fmt,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use futures::StreamExt;
use redis::{AsyncCommands, IntoConnectionInfo, aio::ConnectionManager};
use tokio::sync::mpsc;

use super::store::{Heard, Store, StoreError};
use crate::config::FleetSettings;

/// Bound on one command (and on connecting for it): a store that does not
/// answer within it counts as down.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);
/// How often the subscription is tried again while Redis is away.
const RECONNECT_EVERY: Duration = Duration::from_millis(250);

/// The fleet's store in Redis.
#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    commands: ConnectionManager,
    /// `{namespace}:standing:`.
    standing: String,
    /// `{namespace}:events`.
    channel: String,
    /// `{namespace}:`, before the key of a plain value or lock.
    prefix: String,
    /// Where it is, for messages: `host:port`, never a password.
    place: String,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisStore({})", self.place)
    }
}

impl RedisStore {
    /// A store for `settings`; connects lazily (a Redis that is down now is
    /// not an error: the node works alone until it comes).
    pub fn new(settings: &FleetSettings) -> Result<Self, StoreError> {
        let place = format!(
            "{}:{}",
            settings.redis.host_str().unwrap_or_default(),
            settings.redis.port().unwrap_or(6379)
        );
        let refused = |error: redis::RedisError| {
            StoreError(format!(
                "the Redis URL for {place} is not usable: {}",
                error.kind_text()
            ))
        };
        let mut info = settings
            .redis
            .clone()
            .into_connection_info()
            .map_err(refused)?;
        if let Some(password) = &settings.password {
            let redis = info
                .redis_settings()
                .clone()
                .set_password(password.expose());
            info = info.set_redis_settings(redis);
        }
        let client = redis::Client::open(info).map_err(refused)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(RESPONSE_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(RECONNECT_EVERY);
        let commands =
            ConnectionManager::new_lazy_with_config(client.clone(), config).map_err(refused)?;
        Ok(RedisStore {
            client,
            commands,
            standing: format!("{}:standing:", settings.namespace),
            channel: format!("{}:events", settings.namespace),
            prefix: format!("{}:", settings.namespace),
            place,
        })
    }

    fn failed(&self, what: &str, error: &redis::RedisError) -> StoreError {
        StoreError(format!(
            "Redis at {} could not {what}: {}",
            self.place,
            error.kind_text()
        ))
    }
}

/// `ttl` in whole milliseconds, at least one (Redis refuses `PX 0`).
fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// An error's kind and category, never its detail (which may quote a value).
trait KindText {
    fn kind_text(&self) -> String;
}

impl KindText for redis::RedisError {
    fn kind_text(&self) -> String {
        if self.is_timeout() {
            "no answer in time".to_owned()
        } else if self.is_connection_refusal() {
            "connection refused".to_owned()
        } else if self.is_connection_dropped() || self.is_io_error() {
            "connection lost".to_owned()
        } else {
            format!("{:?}", self.kind())
        }
    }
}

#[async_trait::async_trait]
impl Store for RedisStore {
    async fn keep(
        &self,
        connection: &str,
        message: &str,
        expires: Option<SystemTime>,
    ) -> Result<(), StoreError> {
        let key = format!("{}{connection}", self.standing);
        let mut pipe = redis::pipe();
        pipe.atomic();
        match expires.map(|at| at.duration_since(UNIX_EPOCH)) {
            // Already over: nothing to keep, but say it.
            Some(Ok(at)) if SystemTime::now() >= UNIX_EPOCH + at => {
                pipe.del(&key).ignore();
            }
            Some(Ok(at)) => {
                pipe.cmd("SET")
                    .arg(&key)
                    .arg(message)
                    .arg("PXAT")
                    .arg(u64::try_from(at.as_millis()).unwrap_or(u64::MAX))
                    .ignore();
            }
            Some(Err(_)) => {
                pipe.del(&key).ignore();
            }
            None => {
                pipe.set(&key, message).ignore();
            }
        }
        pipe.publish(&self.channel, message).ignore();
        let mut commands = self.commands.clone();
        pipe.query_async::<()>(&mut commands)
            .await
            .map_err(|error| self.failed("keep a standing", &error))
    }

    async fn forget(&self, connection: &str, message: &str) -> Result<(), StoreError> {
        let key = format!("{}{connection}", self.standing);
        let mut commands = self.commands.clone();
        redis::pipe()
            .atomic()
            .del(&key)
            .ignore()
            .publish(&self.channel, message)
            .ignore()
            .query_async::<()>(&mut commands)
            .await
            .map_err(|error| self.failed("forget a standing", &error))
    }

    async fn send(&self, message: &str) -> Result<(), StoreError> {
        let mut commands = self.commands.clone();
        commands
            .publish::<_, _, ()>(&self.channel, message)
            .await
            .map_err(|error| self.failed("publish", &error))
    }

    async fn kept(&self) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut commands = self.commands.clone();
        let pattern = format!("{}*", self.standing);
        let mut keys: Vec<String> = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut commands)
                .await
                .map_err(|error| self.failed("list the standings", &error))?;
            keys.extend(batch);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let values: Vec<Option<Vec<u8>>> = commands
            .mget(&keys)
            .await
            .map_err(|error| self.failed("read the standings", &error))?;
        Ok(values.into_iter().flatten().collect())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut commands = self.commands.clone();
        commands
            .get(format!("{}{key}", self.prefix))
            .await
            .map_err(|error| self.failed("read a value", &error))
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let mut commands = self.commands.clone();
        redis::cmd("SET")
            .arg(format!("{}{key}", self.prefix))
            .arg(value)
            .arg("PX")
            .arg(millis(ttl))
            .query_async::<()>(&mut commands)
            .await
            .map_err(|error| self.failed("keep a value", &error))
    }

    async fn try_lock(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut commands = self.commands.clone();
        // `OK` when set, nil when someone holds it.
        let set: Option<String> = redis::cmd("SET")
            .arg(format!("{}{key}", self.prefix))
            .arg(holder)
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl))
            .query_async(&mut commands)
            .await
            .map_err(|error| self.failed("take a lock", &error))?;
        Ok(set.is_some())
    }

    async fn unlock(&self, key: &str, holder: &str) -> Result<(), StoreError> {
        // Compare and delete in one step: the lock may have expired and been
        // taken by another holder since.
        const UNLOCK: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                              return redis.call('DEL', KEYS[1]) else return 0 end";
        let mut commands = self.commands.clone();
        redis::cmd("EVAL")
            .arg(UNLOCK)
            .arg(1)
            .arg(format!("{}{key}", self.prefix))
            .arg(holder)
            .query_async::<i64>(&mut commands)
            .await
            .map(drop)
            .map_err(|error| self.failed("release a lock", &error))
    }

    fn listen(&self) -> mpsc::UnboundedReceiver<Heard> {
        let (tx, rx) = mpsc::unbounded_channel();
        let store = self.clone();
        tokio::spawn(async move {
            while !tx.is_closed() {
                let why = match store.subscribe(&tx).await {
                    Ok(()) => format!("Redis at {} closed the subscription", store.place),
                    Err(error) => error.0,
                };
                if tx.send(Heard::Down { why }).is_err() {
                    return;
                }
                tokio::time::sleep(RECONNECT_EVERY).await;
            }
        });
        rx
    }
}

impl RedisStore {
    /// One subscription, from connecting until it ends.
    async fn subscribe(&self, tx: &mpsc::UnboundedSender<Heard>) -> Result<(), StoreError> {
        let mut pubsub = tokio::time::timeout(RESPONSE_TIMEOUT, self.client.get_async_pubsub())
            .await
            .map_err(|_| StoreError(format!("Redis at {} did not answer in time", self.place)))?
            .map_err(|error| self.failed("be reached", &error))?;
        tokio::time::timeout(RESPONSE_TIMEOUT, pubsub.subscribe(&self.channel))
            .await
            .map_err(|_| StoreError(format!("Redis at {} did not answer in time", self.place)))?
            .map_err(|error| self.failed("subscribe", &error))?;
        if tx.send(Heard::Up).is_err() {
            return Ok(());
        }
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            if tx
                .send(Heard::Message(message.get_payload_bytes().to_vec()))
                .is_err()
            {
                return Ok(());
            }
        }
        Ok(())
    }
}
