//! The OAuth tokens the fleet shares (docs/FLEET.md, "OAuth tokens across
//! nodes"): [`FleetTokens`], the [`TokenShare`] the OAuth code renews
//! through, over the fleet's [`Store`].
//!
//! A connection's token set is kept under `oauth:{connection}` (in the
//! store's namespace), sealed with XChaCha20-Poly1305 under the fleet key:
//! the store, and whoever reads it, sees no token. The associated data
//! names the namespace, the connection and the seal's version, so a value
//! copied to another connection or fleet does not open. The renewal lock is
//! `lock:oauth:{connection}`. What does not open or parse is never used:
//! it counts as [`super::Refusal::Unsealed`] (once per value, however often
//! it is read) and is logged once per process.

use std::{
    fmt,
    hash::{Hash, Hasher},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use base64::Engine;
use chacha20poly1305::{
    Key, KeyInit, XChaCha20Poly1305, XNonce,
    aead::{Aead, Payload},
};
use rmcp::transport::auth::StoredCredentials;

use super::store::{Store, StoreError};
use crate::{
    config::FleetKey,
    oauth::{ExchangedToken, ShareError, TokenShare},
};

/// The seal's version, first byte of every sealed value and part of its
/// associated data.
const SEAL: u8 = 1;
/// Nonce length of XChaCha20-Poly1305: random nonces this long never repeat
/// in practice.
const NONCE: usize = 24;
/// How long a token set is kept after its last renewal: a connection
/// renews far more often (its access token's life), so this only clears
/// connections no node uses any more.
const KEPT_FOR: Duration = Duration::from_secs(90 * 24 * 3600);

/// The fleet's OAuth token share: sealed token sets and renewal locks in
/// the fleet's store.
pub struct FleetTokens {
    store: Arc<dyn Store>,
    cipher: XChaCha20Poly1305,
    namespace: String,
    /// Values that did not open, shared with the `Fleet` actor's refusal
    /// counts.
    unsealed: Arc<AtomicU64>,
    /// A digest of the last value refused, so that one bad value read again
    /// and again counts once.
    last_refused: Mutex<Option<u64>>,
}

impl fmt::Debug for FleetTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetTokens")
            .field("store", &self.store)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl FleetTokens {
    /// Tokens sealed with `key` in `store`, for the fleet `namespace`;
    /// refusals are counted in `unsealed`.
    pub fn new(
        store: Arc<dyn Store>,
        key: &FleetKey,
        namespace: &str,
        unsealed: Arc<AtomicU64>,
    ) -> Self {
        Self {
            store,
            cipher: XChaCha20Poly1305::new(&Key::from(
                key.derive(b"mcp-supervisor/oauth-tokens/v1"),
            )),
            namespace: namespace.to_owned(),
            unsealed,
            last_refused: Mutex::new(None),
        }
    }

    /// Binds a sealed value to this fleet, this connection and this seal;
    /// an exchanged token to its caller (`whose`) too.
    fn associated(&self, connection: &str, whose: Option<&str>) -> Vec<u8> {
        let mut data = match whose {
            None => b"mcp-supervisor oauth tokens\0".to_vec(),
            Some(_) => b"mcp-supervisor exchanged token\0".to_vec(),
        };
        data.push(SEAL);
        data.extend_from_slice(self.namespace.as_bytes());
        data.push(0);
        data.extend_from_slice(connection.as_bytes());
        if let Some(whose) = whose {
            data.push(0);
            data.extend_from_slice(whose.as_bytes());
        }
        data
    }

    /// `tokens` sealed for `connection` (and `whose`): base64 of the
    /// version, a random nonce and the ciphertext (text, so the value reads
    /// as text anywhere).
    fn seal<T: serde::Serialize>(
        &self,
        (connection, whose): (&str, Option<&str>),
        tokens: &T,
    ) -> Result<String, ShareError> {
        let plain = serde_json::to_vec(tokens)
            .map_err(|_| ShareError("the OAuth tokens could not be serialized".into()))?;
        let nonce: [u8; NONCE] = rand::random();
        let sealed = self
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &plain,
                    aad: &self.associated(connection, whose),
                },
            )
            .map_err(|_| ShareError("the OAuth tokens could not be sealed".into()))?;
        let mut value = Vec::with_capacity(1 + NONCE + sealed.len());
        value.push(SEAL);
        value.extend_from_slice(&nonce);
        value.extend_from_slice(&sealed);
        Ok(base64::engine::general_purpose::STANDARD.encode(value))
    }

    /// The token set in `value`, if it was sealed by this fleet for
    /// `connection` (and `whose`) and is one.
    fn open<T: serde::de::DeserializeOwned>(
        &self,
        (connection, whose): (&str, Option<&str>),
        value: &[u8],
    ) -> Option<T> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value)
            .ok()?;
        let (&version, rest) = bytes.split_first()?;
        if version != SEAL || rest.len() < NONCE {
            return None;
        }
        let (nonce, sealed) = rest.split_at(NONCE);
        let nonce: [u8; NONCE] = nonce.try_into().ok()?;
        let plain = self
            .cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: sealed,
                    aad: &self.associated(connection, whose),
                },
            )
            .ok()?;
        serde_json::from_slice(&plain).ok()
    }

    /// A value that did not open: counted once, logged the first time.
    fn refused(&self, connection: &str, value: &[u8]) {
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        (connection, value).hash(&mut digest);
        let digest = digest.finish();
        let mut last = self
            .last_refused
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.replace(digest) == Some(digest) {
            return;
        }
        if self.unsealed.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(%connection, refusal = super::Refusal::Unsealed.as_str(), "ignored OAuth tokens in the fleet store that do not open with the fleet key (counted; logged once)");
        }
    }
}

fn unreachable(error: StoreError) -> ShareError {
    ShareError(error.0)
}

fn value_key(connection: &str) -> String {
    format!("oauth:{connection}")
}

fn lock_key(connection: &str) -> String {
    format!("lock:oauth:{connection}")
}

#[async_trait::async_trait]
impl TokenShare for FleetTokens {
    async fn read(&self, connection: &str) -> Result<Option<StoredCredentials>, ShareError> {
        let Some(value) = self
            .store
            .get(&value_key(connection))
            .await
            .map_err(unreachable)?
        else {
            return Ok(None);
        };
        let opened = self.open((connection, None), &value);
        if opened.is_none() {
            self.refused(connection, &value);
        }
        Ok(opened)
    }

    async fn write(&self, connection: &str, tokens: &StoredCredentials) -> Result<(), ShareError> {
        let value = self.seal((connection, None), tokens)?;
        self.store
            .put(&value_key(connection), value.as_bytes(), KEPT_FOR)
            .await
            .map_err(unreachable)
    }

    async fn lock(
        &self,
        connection: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, ShareError> {
        self.store
            .try_lock(&lock_key(connection), holder, ttl)
            .await
            .map_err(unreachable)
    }

    async fn unlock(&self, connection: &str, holder: &str) -> Result<(), ShareError> {
        self.store
            .unlock(&lock_key(connection), holder)
            .await
            .map_err(unreachable)
    }

    async fn exchanged(
        &self,
        connection: &str,
        whose: &str,
    ) -> Result<Option<ExchangedToken>, ShareError> {
        let key = exchanged_key(connection, whose);
        let Some(value) = self.store.get(&key).await.map_err(unreachable)? else {
            return Ok(None);
        };
        let opened: Option<ExchangedToken> = self.open((connection, Some(whose)), &value);
        if opened.is_none() {
            self.refused(connection, &value);
        }
        Ok(opened.filter(|token| token.expires_at > unix_now()))
    }

    async fn share_exchanged(
        &self,
        connection: &str,
        whose: &str,
        token: &ExchangedToken,
    ) -> Result<(), ShareError> {
        let lives = token.expires_at.saturating_sub(unix_now());
        if lives == 0 {
            return Ok(());
        }
        let value = self.seal((connection, Some(whose)), token)?;
        self.store
            .put(
                &exchanged_key(connection, whose),
                value.as_bytes(),
                Duration::from_secs(lives),
            )
            .await
            .map_err(unreachable)
    }
}

/// Where the token exchanged for `whose` on `connection` is kept.
fn exchanged_key(connection: &str, whose: &str) -> String {
    format!("exchanged:{connection}:{whose}")
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::LocalStore;

    const CANARY: &str = "CANARY-oauth-5f1c-SECRET";

    fn tokens() -> StoredCredentials {
        let token = serde_json::json!({
            "access_token": CANARY, "token_type": "bearer", "expires_in": 60,
            "refresh_token": format!("{CANARY}-refresh"),
        });
        StoredCredentials::new(
            "client".into(),
            Some(serde_json::from_value(token).unwrap()),
            vec!["read".into()],
            Some(1_000),
        )
    }

    fn share(store: &LocalStore, key: u8, namespace: &str) -> (FleetTokens, Arc<AtomicU64>) {
        let unsealed = Arc::new(AtomicU64::new(0));
        let share = FleetTokens::new(
            Arc::new(store.clone()),
            &FleetKey::new([key; 32]),
            namespace,
            unsealed.clone(),
        );
        (share, unsealed)
    }

    fn access(stored: &StoredCredentials) -> String {
        use oauth2::TokenResponse;
        let token = stored.token_response.as_ref().unwrap();
        token.access_token().secret().clone()
    }

    #[tokio::test]
    async fn tokens_read_back_as_written_and_are_stored_sealed() {
        let store = LocalStore::default();
        let (share, unsealed) = share(&store, 7, "ns");
        assert!(share.read("a").await.unwrap().is_none());
        share.write("a", &tokens()).await.unwrap();
        let read = share.read("a").await.unwrap().unwrap();
        assert_eq!(access(&read), CANARY);
        assert_eq!(read.token_received_at, Some(1_000));
        let kept = store.get("oauth:a").await.unwrap().unwrap();
        let kept = String::from_utf8(kept).unwrap();
        assert!(!kept.contains("CANARY"), "{kept}");
        assert_eq!(unsealed.load(Ordering::Relaxed), 0);
        // Two seals of one token set differ (a fresh nonce each).
        share.write("a", &tokens()).await.unwrap();
        let again = store.get("oauth:a").await.unwrap().unwrap();
        assert_ne!(again, kept.into_bytes());
    }

    /// Garbage, a value moved to another connection, one sealed under
    /// another key or for another namespace, a flipped bit: none is used,
    /// each counts once however often it is read.
    #[tokio::test]
    async fn what_does_not_open_is_ignored_and_counted_once() {
        let store = LocalStore::default();
        let (share, unsealed) = share(&store, 7, "ns");
        share.write("a", &tokens()).await.unwrap();
        let good = store.get("oauth:a").await.unwrap().unwrap();
        let (other_key, _) = self::share(&store, 8, "ns");
        let (other_fleet, _) = self::share(&store, 7, "other");
        let mut flipped = base64::engine::general_purpose::STANDARD
            .decode(&good)
            .unwrap();
        *flipped.last_mut().unwrap() ^= 1;
        let bad: Vec<Vec<u8>> = vec![
            b"not base64 at all".to_vec(),
            base64::engine::general_purpose::STANDARD
                .encode([SEAL])
                .into_bytes(),
            other_key.seal(("b", None), &tokens()).unwrap().into_bytes(),
            other_fleet
                .seal(("b", None), &tokens())
                .unwrap()
                .into_bytes(),
            good.clone(),
            base64::engine::general_purpose::STANDARD
                .encode(flipped)
                .into_bytes(),
        ];
        for (n, value) in bad.into_iter().enumerate() {
            store.put("oauth:b", &value, KEPT_FOR).await.unwrap();
            for _ in 0..3 {
                assert!(share.read("b").await.unwrap().is_none(), "value {n}");
            }
            assert_eq!(unsealed.load(Ordering::Relaxed), n as u64 + 1);
        }
        // The good one still opens where it belongs.
        assert!(share.read("a").await.unwrap().is_some());
    }

    /// Known answers, computed once outside this code (Python's `hmac` and
    /// `cryptography`: HChaCha20, then ChaCha20-Poly1305, as
    /// XChaCha20-Poly1305 is defined) from the format docs/FLEET.md states,
    /// for the fleet key of 32 bytes 0x07, namespace `ns`, connection `a`,
    /// the nonce 0, 1, …, 23 and the token set [`KNOWN_JSON`]: the derived
    /// key and the sealed value (in standard base64, with a `+` and a `/`).
    /// A change of the derivation's label, the associated data, the version
    /// byte, the layout or the encoding fails here, and the values a fleet
    /// keeps would stop opening on the nodes that took it.
    const KNOWN_DERIVED: &str = "9b612771e92a7f9e97e72852b16e7ef2ab4e4c432073b4bcd5d233f11d7bd16b";
    const KNOWN_JSON: &str = r#"{"client_id":"client","token_response":{"access_token":"KAT-access","token_type":"bearer","expires_in":60,"refresh_token":"KAT-refresh"},"granted_scopes":["read"],"token_received_at":1000}"#;
    const KNOWN_SEALED: &str = "AQABAgMEBQYHCAkKCwwNDg8QERITFBUWF1e4TIjeybwmHVj+T6Qi132TzIraOUILZ0a5Xfj2ObjAOdMAOaMe3ptnJcsGMrlLLjsP4I7VRcPrhupREo9GJS6kIn9sgzMGvbZpNi38GqPQPF5Si+KR4ApxcvICaiUnKrJ34UfKP5mp0+V5aa4wlHdbZ630zkVTyXa+O7nr6Hnu6HOIZj/U3pFiDbIxxk2Y4Cb+L0TjkG4M36ZGxL9BWDA7lAVdhATfVb8kNEHWh/yMe/fZ5+2hv4PXtHffpz3tL5uC3QjCv3YIKXaeng==";

    #[test]
    fn a_known_sealed_value_opens_and_seals_have_its_format() {
        use oauth2::TokenResponse;
        let store = LocalStore::default();
        let (share, _) = share(&store, 7, "ns");
        let opened = share
            .open::<StoredCredentials>(("a", None), KNOWN_SEALED.as_bytes())
            .expect("the known value opens");
        assert_eq!(opened.client_id, "client");
        assert_eq!(access(&opened), "KAT-access");
        let token = opened.token_response.as_ref().unwrap();
        assert_eq!(token.refresh_token().unwrap().secret(), "KAT-refresh");
        assert_eq!(token.expires_in(), Some(Duration::from_secs(60)));
        assert_eq!(opened.granted_scopes, ["read"]);
        assert_eq!(opened.token_received_at, Some(1_000));
        let known: StoredCredentials = serde_json::from_str(KNOWN_JSON).unwrap();
        assert_eq!(
            serde_json::to_value(&opened).unwrap(),
            serde_json::to_value(&known).unwrap()
        );
        assert!(
            share
                .open::<StoredCredentials>(("b", None), KNOWN_SEALED.as_bytes())
                .is_none()
        );

        // A seal made now opens under the known derived key and associated
        // data: version 1, a 24-byte nonce, the ciphertext and its 16-byte tag.
        let sealed = share.seal(("a", None), &tokens()).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&sealed)
            .unwrap();
        assert_eq!(bytes[0], 1);
        let (nonce, ciphertext) = bytes[1..].split_at(24);
        let derived: [u8; 32] = std::array::from_fn(|at| {
            u8::from_str_radix(&KNOWN_DERIVED[2 * at..2 * at + 2], 16).unwrap()
        });
        let nonce: [u8; 24] = nonce.try_into().unwrap();
        let plain = XChaCha20Poly1305::new(&Key::from(derived))
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad: b"mcp-supervisor oauth tokens\0\x01ns\0a",
                },
            )
            .expect("a seal opens with the known key and associated data");
        assert_eq!(ciphertext.len(), plain.len() + 16);
        let plain: serde_json::Value = serde_json::from_slice(&plain).unwrap();
        assert_eq!(plain, serde_json::to_value(tokens()).unwrap());
    }

    #[tokio::test]
    async fn a_lock_is_held_by_one_holder_until_released_or_expired() {
        tokio::time::pause();
        let store = LocalStore::default();
        let (share, _) = share(&store, 7, "ns");
        let ttl = Duration::from_secs(10);
        assert!(share.lock("a", "one", ttl).await.unwrap());
        assert!(!share.lock("a", "two", ttl).await.unwrap());
        assert!(share.lock("b", "two", ttl).await.unwrap(), "per connection");
        share.unlock("a", "two").await.unwrap();
        assert!(!share.lock("a", "two", ttl).await.unwrap(), "not two's");
        share.unlock("a", "one").await.unwrap();
        assert!(share.lock("a", "two", ttl).await.unwrap());
        tokio::time::advance(ttl).await;
        assert!(share.lock("a", "three", ttl).await.unwrap(), "expired");
    }
}
