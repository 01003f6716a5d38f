//! Access tokens of the configured issuer (the gateway as an OAuth 2.1
//! resource server, MCP authorization 2025-11-25).
//!
//! A JWT is checked against the issuer's keys: its algorithm one of the
//! asymmetric ones ([`ALGORITHMS`]: never `none`, never an HMAC, so a
//! public key cannot be used as a shared secret), its `kid` one of the
//! issuer's keys, `iss` exactly the issuer, `aud` containing the gateway's
//! own resource URL (RFC 8707: a token minted for another server is
//! refused), `exp` and `nbf` within the leeway, and the required scopes.
//! The keys come from the issuer's metadata (RFC 8414, else OpenID
//! discovery) and are fetched again for an unknown `kid` at most once per
//! [`REFETCH_INTERVAL`] (a flood of made-up `kid`s costs the issuer one
//! request), and when older than [`KEYS_MAX_AGE`].
//!
//! A token that is not a JWT is introspected (RFC 7662) when the gateway
//! has its own client at the issuer. Either way a token found good is
//! remembered (by its SHA-256) until it expires, at most [`REMEMBERED`] at
//! once: the next request with it costs a hash, not a signature check.
//!
//! Nobody makes the gateway work for the issuer at will: a token longer
//! than [`MAX_TOKEN_BYTES`] is refused unread, a token refused is refused
//! again without asking for [`REFUSED_FOR`], and the issuer is asked to
//! introspect at most [`INTROSPECTIONS_PER_SECOND`] tokens a second (more
//! are answered 503 with `Retry-After`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use jsonwebtoken::{
    Algorithm, DecodingKey, Validation, decode, decode_header,
    jwk::{Jwk, JwkSet},
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::Refused;
use crate::{
    access::{Caller, Subject, Via},
    config::ResourceServer,
    oauth::{Issuer, IssuerMetadata},
};

/// The signature algorithms taken: asymmetric only.
pub(super) const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// An unknown `kid` fetches the keys again at most this often.
pub(super) const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Keys older than this are fetched again on their next use.
const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);
/// Tokens found good, remembered at most.
const REMEMBERED: usize = 16_384;
/// The longest token read: access tokens are a few KiB at most.
pub(super) const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// How long a refused token is refused without checking it again.
pub(super) const REFUSED_FOR: Duration = Duration::from_secs(60);
/// Why a JWT whose key is not (yet) known is refused: not remembered as
/// refused, as its key may be published soon (keys are fetched again at
/// most every [`REFETCH_INTERVAL`] for that).
const UNKNOWN_KEY: &str = "the token's key (kid) is not one of the issuer's";
/// Introspections asked of the issuer per second, at most.
pub(super) const INTROSPECTIONS_PER_SECOND: u32 = 20;

/// The issuer's access tokens, as the gateway checks them.
pub(in crate::gateway) struct Tokens {
    server: ResourceServer,
    /// The gateway's resource URL: what a token's `aud` must contain.
    resource: String,
    issuer: Issuer,
    keys: tokio::sync::Mutex<Keys>,
    good: Mutex<Good>,
    /// Tokens refused: SHA-256 → until when (Unix seconds) and why.
    refused: Mutex<HashMap<[u8; 32], (u64, &'static str)>>,
    /// The introspections of the last second.
    introspections: Mutex<PerSecond>,
}

/// When the last admissions were: at most `limit` in any second (a sliding
/// second; a fixed one lets twice as many through across its edge).
#[derive(Debug, Default)]
struct PerSecond(std::collections::VecDeque<Instant>);

impl PerSecond {
    fn admit(&mut self, now: Instant, limit: usize) -> bool {
        while self
            .0
            .front()
            .is_some_and(|began| now.duration_since(*began) >= Duration::from_secs(1))
        {
            self.0.pop_front();
        }
        if self.0.len() >= limit {
            return false;
        }
        self.0.push_back(now);
        true
    }
}

/// Tokens found good: SHA-256 → the caller and when it expires (Unix
/// seconds).
type Good = HashMap<[u8; 32], (Arc<Caller>, u64)>;

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, Arc<(Jwk, DecodingKey)>>,
    fetched: Option<Instant>,
    /// When an unknown `kid` last made the keys be fetched.
    refetched: Option<Instant>,
}

impl Tokens {
    pub(in crate::gateway) fn new(server: ResourceServer, resource: String) -> Self {
        Tokens {
            issuer: Issuer::new(server.issuer.clone()),
            server,
            resource,
            keys: tokio::sync::Mutex::default(),
            good: Mutex::default(),
            refused: Mutex::default(),
            introspections: Mutex::default(),
        }
    }

    pub(super) fn resource(&self) -> &str {
        &self.resource
    }

    pub(super) fn issuer(&self) -> &str {
        &self.server.issuer
    }

    pub(super) fn scopes(&self) -> &[String] {
        &self.server.scopes
    }

    /// Where the gateway's protected-resource metadata is: the well-known
    /// path inserted before the resource URL's path (RFC 9728 §3.1).
    pub(super) fn metadata_url(&self) -> String {
        match url::Url::parse(&self.resource) {
            Ok(url) => format!(
                "{}{}{}",
                url.origin().ascii_serialization(),
                super::METADATA_PATH,
                url.path().trim_end_matches('/')
            ),
            Err(_) => super::METADATA_PATH.to_owned(),
        }
    }

    /// The caller `token` stands for.
    pub(super) async fn caller(&self, token: &str) -> Result<Arc<Caller>, Refused> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refused::Invalid("the token is too long"));
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = unix_now();
        if let Some((caller, expires)) = self.good().get(&digest)
            && *expires > now
        {
            return Ok(caller.clone());
        }
        if let Some((until, why)) = self.refused().get(&digest)
            && *until > now
        {
            return Err(Refused::Invalid(why));
        }
        let checked = self.check(token).await;
        if let Err(Refused::Invalid(why)) = checked
            && why != UNKNOWN_KEY
        {
            let mut refused = self.refused();
            if refused.len() >= REMEMBERED {
                refused.retain(|_, (until, _)| *until > now);
                if refused.len() >= REMEMBERED {
                    refused.clear();
                }
            }
            refused.insert(digest, (now + REFUSED_FOR.as_secs(), why));
        }
        let (caller, expires) = checked?;
        let caller = Arc::new(caller);
        let mut good = self.good();
        if good.len() >= REMEMBERED {
            good.retain(|_, (_, expires)| *expires > now);
            if good.len() >= REMEMBERED {
                good.clear();
            }
        }
        good.insert(digest, (caller.clone(), expires));
        Ok(caller)
    }

    /// The caller and expiry of a token not seen lately: its claims
    /// checked (a JWT) or asked for (an opaque token).
    async fn check(&self, token: &str) -> Result<(Caller, u64), Refused> {
        let claims = if token.split('.').count() == 3 {
            self.verified(token).await?
        } else {
            self.introspected(token).await?
        };
        let (mut caller, expires) = self.read(&claims)?;
        caller.subject = Subject::new(token);
        Ok((caller, expires))
    }

    fn good(&self) -> std::sync::MutexGuard<'_, Good> {
        self.good.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refused(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (u64, &'static str)>> {
        self.refused.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether one more introspection fits in this second's share.
    fn may_introspect(&self) -> bool {
        let mut introspections = self
            .introspections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        introspections.admit(Instant::now(), INTROSPECTIONS_PER_SECOND as usize)
    }

    /// A JWT's claims, once its signature and claims are checked.
    async fn verified(&self, token: &str) -> Result<Map<String, Value>, Refused> {
        let header = decode_header(token).map_err(|_| Refused::Invalid("not a readable JWT"))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refused::Invalid("the token's algorithm is not accepted"));
        }
        let kid = header
            .kid
            .ok_or(Refused::Invalid("the token names no key (kid)"))?;
        let key = self.key(&kid).await?;
        if let Some(alg) = key.0.common.key_algorithm
            && alg.to_string() != format!("{:?}", header.alg)
        {
            return Err(Refused::Invalid("the token's algorithm is not its key's"));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.server.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.server.leeway.as_secs();
        validation.validate_nbf = true;
        decode::<Map<String, Value>>(token, &key.1, &validation)
            .map(|data| data.claims)
            .map_err(|error| Refused::Invalid(why(error.kind())))
    }

    /// The key `kid` of the issuer, fetching the keys when they are old,
    /// or when `kid` is unknown and they were not fetched for that lately.
    async fn key(&self, kid: &str) -> Result<Arc<(Jwk, DecodingKey)>, Refused> {
        let mut keys = self.keys.lock().await;
        let stale = keys
            .fetched
            .is_none_or(|fetched| fetched.elapsed() >= KEYS_MAX_AGE);
        if stale {
            self.fetch_keys(&mut keys).await?;
        }
        if let Some(key) = keys.by_kid.get(kid) {
            return Ok(key.clone());
        }
        let may_refetch = !stale
            && keys
                .refetched
                .is_none_or(|refetched| refetched.elapsed() >= REFETCH_INTERVAL);
        if may_refetch {
            keys.refetched = Some(Instant::now());
            self.fetch_keys(&mut keys).await?;
            if let Some(key) = keys.by_kid.get(kid) {
                return Ok(key.clone());
            }
        }
        Err(Refused::Invalid(UNKNOWN_KEY))
    }

    async fn fetch_keys(&self, keys: &mut Keys) -> Result<(), Refused> {
        let endpoints = self.endpoints().await?;
        let uri = endpoints
            .jwks_uri
            .as_deref()
            .ok_or(Refused::Invalid("the issuer publishes no keys (jwks_uri)"))?;
        let set: JwkSet = self
            .issuer
            .get_json(uri)
            .await
            .map_err(|_| Refused::IssuerUnavailable)?;
        keys.by_kid = set
            .keys
            .into_iter()
            .filter_map(|jwk| {
                let kid = jwk.common.key_id.clone()?;
                let key = DecodingKey::from_jwk(&jwk).ok()?;
                Some((kid, Arc::new((jwk, key))))
            })
            .collect();
        keys.fetched = Some(Instant::now());
        Ok(())
    }

    /// The issuer's metadata (see [`Issuer::metadata`]).
    async fn endpoints(&self) -> Result<&IssuerMetadata, Refused> {
        self.issuer
            .metadata()
            .await
            .map_err(|_| Refused::IssuerUnavailable)
    }

    /// An opaque token's claims, from the issuer's introspection endpoint.
    async fn introspected(&self, token: &str) -> Result<Map<String, Value>, Refused> {
        let Some(client) = &self.server.introspection else {
            return Err(Refused::Invalid(
                "not a JWT, and this gateway introspects no tokens",
            ));
        };
        let endpoint = self
            .endpoints()
            .await?
            .introspection_endpoint
            .as_deref()
            .ok_or(Refused::IssuerUnavailable)?;
        if !self.may_introspect() {
            return Err(Refused::Busy);
        }
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let response = self
            .issuer
            .post_form(endpoint, client, form)
            .await
            .map_err(|_| Refused::IssuerUnavailable)?;
        if response.status().is_client_error() {
            return Err(Refused::Invalid(
                "the authorization server would not read the token",
            ));
        }
        if !response.status().is_success() {
            return Err(Refused::IssuerUnavailable);
        }
        let claims: Map<String, Value> = response
            .json()
            .await
            .map_err(|_| Refused::IssuerUnavailable)?;
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(Refused::Invalid("the token is not active"));
        }
        if claims.get("iss").and_then(Value::as_str) != Some(self.server.issuer.as_str()) {
            return Err(Refused::Invalid("the token is another issuer's"));
        }
        if !audience_contains(claims.get("aud"), &self.resource) {
            return Err(Refused::Invalid("the token is for another resource"));
        }
        Ok(claims)
    }

    /// The caller a good token's claims name, and when the token expires.
    fn read(&self, claims: &Map<String, Value>) -> Result<(Caller, u64), Refused> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_owned);
        let words = |value: Option<&Value>| -> Vec<String> {
            match value {
                Some(Value::String(text)) => text.split_whitespace().map(str::to_owned).collect(),
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            }
        };
        let scopes = match claims.get("scope") {
            Some(scope) => words(Some(scope)),
            None => words(claims.get("scp")),
        };
        if !self
            .server
            .scopes
            .iter()
            .all(|needed| scopes.contains(needed))
        {
            return Err(Refused::InsufficientScope);
        }
        let client = text("client_id").or_else(|| text("azp"));
        // A client's own token (client credentials) names the client as its
        // subject: that is a client, not a user.
        let user = text("sub").filter(|sub| Some(sub) != client.as_ref());
        let expires = claims
            .get("exp")
            .and_then(Value::as_u64)
            .ok_or(Refused::Invalid("the token has no expiry"))?;
        Ok((
            Caller {
                via: Via::Token,
                user,
                client,
                groups: words(claims.get(&self.server.groups_claim)),
                scopes,
                subject: Subject::default(),
            },
            expires,
        ))
    }
}

fn audience_contains(aud: Option<&Value>, resource: &str) -> bool {
    match aud {
        Some(Value::String(aud)) => aud == resource,
        Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(resource)),
        _ => false,
    }
}

/// A JWT check's failure, said without the token.
fn why(kind: &jsonwebtoken::errors::ErrorKind) -> &'static str {
    use jsonwebtoken::errors::ErrorKind;
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet",
        ErrorKind::InvalidIssuer => "the token is another issuer's",
        ErrorKind::InvalidAudience => "the token is for another resource",
        ErrorKind::InvalidSignature => "the token's signature does not verify",
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            "the token's algorithm is not its key's"
        }
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim (exp, iss, aud)",
        _ => "not a valid access token",
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Twenty late in one second and twenty early in the next were forty
    /// within half a second under a fixed window.
    #[test]
    fn no_second_admits_more_than_the_limit_across_a_windows_edge() {
        let start = Instant::now();
        let mut limit = PerSecond::default();
        assert!(limit.admit(start, 20));
        let late = start + Duration::from_millis(600);
        assert!((0..19).all(|_| limit.admit(late, 20)));
        let next = start + Duration::from_millis(1_100);
        let admitted = (0..20).filter(|_| limit.admit(next, 20)).count();
        assert_eq!(admitted, 1, "only the first one's place came free");
        assert_eq!(
            (0..20)
                .filter(|_| limit.admit(late + Duration::from_secs(1), 20))
                .count(),
            19
        );
    }
}
