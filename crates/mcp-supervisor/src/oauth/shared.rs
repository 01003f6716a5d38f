//! OAuth tokens shared by supervisors in several processes (a fleet,
//! docs/OAUTH.md "In a fleet"): one renewal for every process, behind a lock.
//!
//! A connection whose token is due (ahead of its expiry, or after a 401)
//! first reads the tokens the fleet shares: newer and still good, it takes
//! them and asks nobody. Otherwise it takes the fleet's lock for the
//! connection, reads again (someone may have renewed meanwhile), renews
//! once, shares what it got and releases the lock. A connection that finds
//! the lock taken reads again every [`POLL`] until the holder's tokens are
//! there. A share that cannot be reached leaves the connection renewing
//! alone, as a supervisor on its own does: a call never fails because the
//! store did.
//!
//! This module knows nothing of Redis or of sealing: the share is a
//! [`TokenShare`] (the fleet's is `crate::fleet::FleetTokens`).

use std::{fmt, future::Future, sync::Arc, time::Duration};

use rmcp::transport::auth::{AuthError, StoredCredentials};
use tokio::time::Instant;

/// How long the lock is held at most: a token request longer than this
/// could be doubled by another node (and, with rotating refresh tokens,
/// make it need a login), so it is generous; a holder that dies keeps the
/// others waiting this long at most.
pub const LOCK_TTL: Duration = Duration::from_secs(10);
/// How often a node waiting for another's renewal reads the share again.
const POLL: Duration = Duration::from_millis(50);
/// The longest a node waits for others before renewing alone: past the
/// lock's life, the lock is free or the store is misbehaving.
const WAIT_AT_MOST: Duration = Duration::from_secs(2 * LOCK_TTL.as_secs());

/// The share could not be used (unreachable, refused); our own text,
/// naming no token or password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShareError(pub String);

/// Where connections' OAuth tokens are shared with other processes. Each
/// operation is bounded by the share; none is on a call's path (only a
/// renewal uses it).
#[async_trait::async_trait]
pub trait TokenShare: Send + Sync + fmt::Debug + 'static {
    /// The tokens shared for `connection`. `None` when there are none, or
    /// what is there is not a token set for it (the share counts and logs
    /// that; it is never trusted).
    async fn read(&self, connection: &str) -> Result<Option<StoredCredentials>, ShareError>;
    /// Shares `tokens` as `connection`'s.
    async fn write(&self, connection: &str, tokens: &StoredCredentials) -> Result<(), ShareError>;
    /// Takes `connection`'s renewal lock for `holder`, for `ttl`, unless
    /// someone holds it: `true` when taken.
    async fn lock(&self, connection: &str, holder: &str, ttl: Duration)
    -> Result<bool, ShareError>;
    /// Releases the lock if `holder` still holds it.
    async fn unlock(&self, connection: &str, holder: &str) -> Result<(), ShareError>;
    /// The token exchanged for the caller `whose` (a digest naming it) on
    /// `connection`, if one is shared and not expired.
    async fn exchanged(
        &self,
        connection: &str,
        whose: &str,
    ) -> Result<Option<ExchangedToken>, ShareError>;
    /// Shares `token`, exchanged for `whose` on `connection`, until it
    /// expires.
    async fn share_exchanged(
        &self,
        connection: &str,
        whose: &str,
        token: &ExchangedToken,
    ) -> Result<(), ShareError>;
}

/// A token exchanged for a caller (docs/SECURITY.md, "Whose credentials
/// reach the upstream"), as a fleet shares it. `Debug` shows no token.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExchangedToken {
    pub token: String,
    /// When it expires, in seconds since the Unix epoch.
    pub expires_at: u64,
}

impl fmt::Debug for ExchangedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExchangedToken")
            .field("token", &"[REDACTED]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// One connection's tokens as its fleet shares them.
#[derive(Clone, Debug)]
pub struct Sharing {
    share: Arc<dyn TokenShare>,
    connection: String,
}

/// Where a renewal's tokens came from.
pub(crate) enum Renewed {
    /// Another process renewed them; this one asked nobody.
    Adopted(StoredCredentials),
    /// This process asked the authorization server.
    Asked(StoredCredentials),
}

impl Sharing {
    pub fn new(share: Arc<dyn TokenShare>, connection: &str) -> Self {
        Self {
            share,
            connection: connection.to_owned(),
        }
    }

    /// New tokens, once for the fleet: another process's if `usable`, else
    /// from `ask` (the authorization server) under the fleet's lock.
    pub(crate) async fn renew<F, Fut>(
        &self,
        usable: impl Fn(&StoredCredentials) -> bool,
        ask: F,
    ) -> Result<Renewed, AuthError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<StoredCredentials, AuthError>>,
    {
        let connection = self.connection.as_str();
        let give_up = Instant::now() + WAIT_AT_MOST;
        loop {
            match self.share.read(connection).await {
                Ok(Some(shared)) if usable(&shared) => return Ok(Renewed::Adopted(shared)),
                Ok(_) => {}
                Err(error) => return self.alone(&error, ask).await,
            }
            if Instant::now() >= give_up {
                tracing::warn!(%connection, "the fleet's OAuth renewal lock stayed taken; renewing alone");
                return ask().await.map(Renewed::Asked);
            }
            let holder = format!("{:016x}", rand::random::<u64>());
            match self.share.lock(connection, &holder, LOCK_TTL).await {
                Ok(true) => return self.holding(&holder, &usable, ask).await,
                Ok(false) => tokio::time::sleep(POLL).await,
                Err(error) => return self.alone(&error, ask).await,
            }
        }
    }

    /// With the lock: reads once more, else asks and shares the answer;
    /// releases the lock either way.
    async fn holding<F, Fut>(
        &self,
        holder: &str,
        usable: &impl Fn(&StoredCredentials) -> bool,
        ask: F,
    ) -> Result<Renewed, AuthError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<StoredCredentials, AuthError>>,
    {
        let connection = self.connection.as_str();
        // Another node may have renewed between our read and our lock.
        let renewed = match self.share.read(connection).await {
            Ok(Some(shared)) if usable(&shared) => Ok(Renewed::Adopted(shared)),
            _ => ask().await.map(Renewed::Asked),
        };
        if let Ok(Renewed::Asked(tokens)) = &renewed
            && let Err(error) = self.share.write(connection, tokens).await
        {
            tracing::warn!(%connection, %error, "could not share the renewed OAuth tokens; other nodes renew their own");
        }
        if let Err(error) = self.share.unlock(connection, holder).await {
            // It expires by itself.
            tracing::debug!(%connection, %error, "could not release the fleet's OAuth renewal lock");
        }
        renewed
    }

    async fn alone<F, Fut>(&self, error: &ShareError, ask: F) -> Result<Renewed, AuthError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<StoredCredentials, AuthError>>,
    {
        tracing::warn!(connection = %self.connection, %error, "the fleet store cannot be used; renewing the OAuth tokens alone");
        ask().await.map(Renewed::Asked)
    }
}

/// Seconds since the epoch, the clock token receipt times are kept in.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The access token of `stored`, if it has one.
pub(crate) fn access(stored: &StoredCredentials) -> Option<&str> {
    use oauth2::TokenResponse;
    stored
        .token_response
        .as_ref()
        .map(|token| token.access_token().secret().as_str())
}

/// Whether `stored`'s access token is due for renewal at `now` (seconds
/// since the epoch): fewer than half its lifetime, at most 30 seconds and
/// at least one, left, counted as rmcp counts
/// (`AuthorizationManager::get_access_token`), so a connection renews when
/// rmcp would have. Without a stated lifetime or time of receipt, never.
pub(crate) fn due(stored: &StoredCredentials, now: u64) -> bool {
    use oauth2::TokenResponse;
    let lifetime = stored
        .token_response
        .as_ref()
        .and_then(TokenResponse::expires_in);
    let (Some(lifetime), Some(received)) = (lifetime, stored.token_received_at) else {
        return false;
    };
    let lifetime = lifetime.as_secs();
    let left = lifetime.saturating_sub(now.saturating_sub(received));
    left < (lifetime / 2).clamp(1, 30)
}

/// Whether the fleet's `shared` tokens can replace `held` (this node's,
/// due or `rejected`) at `now`: the same client, another access token that
/// is not the rejected one, received no earlier, and not due itself.
pub(crate) fn replaces(
    shared: &StoredCredentials,
    held: Option<&StoredCredentials>,
    client_id: &str,
    rejected: Option<&str>,
    now: u64,
) -> bool {
    let Some(token) = access(shared) else {
        return false;
    };
    shared.client_id == client_id
        && Some(token) != held.and_then(access)
        && Some(token) != rejected
        && shared.token_received_at.unwrap_or(0)
            >= held.and_then(|held| held.token_received_at).unwrap_or(0)
        && !due(shared, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(access: &str, lifetime: Option<u64>, received: u64) -> StoredCredentials {
        let mut token = serde_json::json!({"access_token": access, "token_type": "bearer"});
        if let Some(lifetime) = lifetime {
            token["expires_in"] = lifetime.into();
        }
        StoredCredentials::new(
            "client".into(),
            Some(serde_json::from_value(token).unwrap()),
            Vec::new(),
            Some(received),
        )
    }

    /// rmcp's rule, row by row: half the lifetime, at most 30 s, at least 1 s.
    #[test]
    fn a_token_is_due_when_rmcp_would_refresh_it() {
        let rows: [(u64, u64, bool); 9] = [
            // lifetime, seconds since receipt, due
            (4, 2, false),
            (4, 3, true),
            (3600, 3570, false),
            (3600, 3571, true),
            (1, 0, false),
            (1, 1, true),
            (2, 1, false),
            (2, 2, true),
            (60, 100, true),
        ];
        for (lifetime, elapsed, expected) in rows {
            let stored = tokens("a", Some(lifetime), 1_000);
            assert_eq!(
                due(&stored, 1_000 + elapsed),
                expected,
                "lifetime {lifetime}, {elapsed} s in"
            );
        }
        assert!(!due(&tokens("a", None, 0), u64::MAX), "no stated lifetime");
    }

    #[test]
    fn only_newer_good_tokens_of_the_same_client_replace_ours() {
        let held = tokens("old", Some(4), 1_000);
        let now = 1_003;
        let fresh = tokens("new", Some(4), 1_003);
        assert!(replaces(&fresh, Some(&held), "client", None, now));
        assert!(replaces(&fresh, None, "client", None, now), "none held");
        assert!(!replaces(&fresh, Some(&held), "other", None, now));
        assert!(!replaces(&fresh, Some(&held), "client", Some("new"), now));
        assert!(!replaces(&held, Some(&held), "client", None, now), "ours");
        let older = tokens("older", Some(3600), 999);
        assert!(!replaces(&older, Some(&held), "client", None, now));
        let stale = tokens("stale", Some(4), 1_000);
        assert!(!replaces(&stale, Some(&held), "client", None, now), "due");
    }
}
