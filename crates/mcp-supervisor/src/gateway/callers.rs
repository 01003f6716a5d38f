//! Who is calling: a request's credentials to its [`Caller`]
//! (docs/SECURITY.md, "Who is calling").
//!
//! A request carries at most one credential, `Authorization: Bearer X`,
//! and X is tried as, in order: the gateway's shared bearer token
//! (constant-time), a per-client API key (by its SHA-256), an access token
//! of the configured issuer (`tokens.rs`: a JWT checked against the
//! issuer's keys, or an opaque token introspected). A gateway with none of
//! these configured lets anyone in as [`Caller::open`].
//!
//! A refusal is `401` with `WWW-Authenticate: Bearer` naming the
//! gateway's protected-resource metadata (RFC 9728) when it takes access
//! tokens, so a client can find where to log in; `403`
//! `insufficient_scope` for a good token without a required scope (the
//! client may step up); `503` when the issuer's keys cannot be had.

mod tokens;

use std::{collections::HashMap, sync::Arc};

use axum::{
    Json,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{
    access::{Caller, Via},
    config::{BearerToken, CallerAuth, GatewaySettings},
    listener::guard::presented_bearer,
};

pub(super) use tokens::Tokens;

/// The path of the protected-resource metadata (RFC 9728), served at it
/// and with the MCP endpoint's path appended.
pub(super) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// How the gateway recognises its callers.
pub(super) struct Callers {
    bearer: Option<BearerToken>,
    /// Keys by their SHA-256 (a lookup by digest leaks nothing of a key).
    keys: HashMap<[u8; 32], Arc<Caller>>,
    tokens: Option<Tokens>,
}

/// Why a request's credentials were not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refused {
    /// No `Authorization: Bearer` credential.
    Missing,
    /// A credential that is none of the accepted ones, or a token that
    /// failed a check (said why, never what it held).
    Invalid(&'static str),
    /// A good token without the scopes every token must carry.
    InsufficientScope,
    /// The issuer's keys or introspection could not be reached.
    IssuerUnavailable,
    /// More unknown opaque tokens than the issuer is asked about per
    /// second (`tokens.rs`).
    Busy,
}

impl Callers {
    pub(super) fn new(settings: &GatewaySettings) -> Self {
        let keys = settings
            .keys
            .iter()
            .map(|key| {
                let caller = Caller {
                    client: Some(key.name.clone()),
                    groups: key.groups.clone(),
                    ..Caller::anonymous(Via::Key)
                };
                (key.sha256, Arc::new(caller))
            })
            .collect();
        let (bearer, tokens) = match &settings.auth {
            None => (None, None),
            Some(CallerAuth::Bearer(token)) => (Some(token.clone()), None),
            Some(CallerAuth::OAuth(server)) => {
                let resource = settings
                    .public_url
                    .clone()
                    .expect("validation requires public_url with kind = \"oauth\"");
                (None, Some(Tokens::new(server.clone(), resource)))
            }
        };
        Callers {
            bearer,
            keys,
            tokens,
        }
    }

    /// Whether the gateway asks for no credentials.
    fn is_open(&self) -> bool {
        self.bearer.is_none() && self.keys.is_empty() && self.tokens.is_none()
    }

    /// The caller of a request with `headers`.
    pub(super) async fn identify(&self, headers: &HeaderMap) -> Result<Arc<Caller>, Refused> {
        if self.is_open() {
            return Ok(Caller::open());
        }
        let presented = presented_bearer(headers).ok_or(Refused::Missing)?;
        if let Some(token) = &self.bearer
            && bool::from(presented.as_bytes().ct_eq(token.expose().as_bytes()))
        {
            return Ok(Caller::bearer());
        }
        if !self.keys.is_empty() {
            let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
            if let Some(caller) = self.keys.get(&digest) {
                return Ok(caller.clone());
            }
        }
        match &self.tokens {
            Some(tokens) => tokens.caller(presented).await,
            None => Err(Refused::Invalid("not a credential this gateway accepts")),
        }
    }

    /// The answer to a request refused for `why`.
    pub(super) fn refusal(&self, why: &Refused) -> Response {
        let (status, error, description) = match why {
            Refused::Missing => (StatusCode::UNAUTHORIZED, None, "missing bearer credential"),
            Refused::Invalid(why) => (StatusCode::UNAUTHORIZED, Some("invalid_token"), *why),
            Refused::InsufficientScope => (
                StatusCode::FORBIDDEN,
                Some("insufficient_scope"),
                "the token lacks a scope this gateway requires",
            ),
            Refused::IssuerUnavailable => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(header::RETRY_AFTER, HeaderValue::from_static("5"))],
                    "the authorization server could not be reached to check the token",
                )
                    .into_response();
            }
            Refused::Busy => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
                    "too many new tokens to check at once; try again in a second",
                )
                    .into_response();
            }
        };
        let mut challenge = String::from("Bearer realm=\"mcp-supervisor\"");
        if let Some(tokens) = &self.tokens {
            challenge.push_str(&format!(
                ", resource_metadata=\"{}\"",
                tokens.metadata_url()
            ));
            if !tokens.scopes().is_empty() {
                challenge.push_str(&format!(", scope=\"{}\"", tokens.scopes().join(" ")));
            }
        }
        if let Some(error) = error {
            challenge.push_str(&format!(
                ", error=\"{error}\", error_description=\"{description}\""
            ));
        }
        let mut response = (status, description).into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// The protected-resource metadata (RFC 9728), when the gateway takes
    /// access tokens.
    pub(super) fn metadata(&self) -> Option<Response> {
        let tokens = self.tokens.as_ref()?;
        let mut metadata = json!({
            "resource": tokens.resource(),
            "authorization_servers": [tokens.issuer()],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-supervisor",
        });
        if !tokens.scopes().is_empty() {
            metadata["scopes_supported"] = json!(tokens.scopes());
        }
        Some(Json(metadata).into_response())
    }
}
