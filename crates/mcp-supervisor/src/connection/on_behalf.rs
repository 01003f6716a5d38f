//! The sessions of a connection that acts on its callers' behalf
//! (`on_behalf`; docs/SECURITY.md, "Whose credentials reach the upstream").
//!
//! The connection's own session (its own credentials, or none) lists what
//! the upstream offers and carries its supervision; each call goes over a
//! session opened with its caller's credentials instead: a token exchanged
//! for the caller's (RFC 8693), or the credential configured for callers
//! like it. One session per set of credentials: per caller token exchanged
//! (two tokens of one user, from two apps with different scopes, never
//! share one), per configured entry. At most `max_sessions` are open; one
//! unused for `idle_timeout` is closed, and at the cap the one unused for
//! longest makes room.
//!
//! What goes wrong with a caller's credentials is that caller's, not the
//! connection's: an exchange the authorization server refuses the caller's
//! token, a `401` for the credentials (a `403` too at `initialize`), or a
//! `429` for them answers that caller with [`text::not_for_you`]; refusals
//! are remembered until the lane is let go (`idle_timeout` after its last
//! use); none reaches the quarantine policy. What goes wrong with the
//! upstream itself (it cannot be reached, answers 5xx) is reported to the
//! policy as any failure, without disposing of the connection's own session.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::{
    Unavailable,
    access::Caller,
    config::{
        BearerToken, CallerCredentials, ConnectionConfig, HttpTransport, IntrospectionClient,
        OnBehalf, Transport, UpstreamAuth,
    },
    failure::{Failure, FailureKind},
    http::{HttpClients, HttpRecorder},
    oauth::{ExchangeError, ExchangedToken, Issuer, TokenShare},
    outcome::messages as text,
    session::{Session, SessionHandler, open_http},
};

/// An exchanged token this close to its expiry is exchanged again first.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);
/// How long an exchanged token is used when the issuer did not say.
const UNSAID_LIFETIME: Duration = Duration::from_secs(300);
/// The longest an exchanged token is used, whatever the issuer says.
const LONGEST_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How long to wait before asking an authorization server that could not
/// be reached again, as told to the caller.
const ISSUER_RETRY: Duration = Duration::from_secs(5);
/// How long a session being closed (idle, or making room) may take.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// What a caller is told of credentials the upstream refused.
const UPSTREAM_REFUSED: &str = "the upstream refused the credentials used for you";
/// What a caller is told when the upstream limits its credentials.
const UPSTREAM_LIMITS_YOU: &str = "the upstream limits the credentials used for you; retry later";

/// Where token exchange happens: the gateway's authorization server, and
/// the gateway's own client there.
#[derive(Clone)]
pub struct Exchange {
    pub(crate) issuer: Arc<Issuer>,
    pub(crate) client: IntrospectionClient,
}

impl Exchange {
    /// The exchange of `config`'s `[gateway] auth`, when it has a client.
    pub fn of(config: &crate::config::Config) -> Option<Arc<Exchange>> {
        let Some(crate::config::CallerAuth::OAuth(server)) = &config.gateway.auth else {
            return None;
        };
        let client = server.introspection.clone()?;
        Some(Arc::new(Exchange {
            issuer: Arc::new(Issuer::new(server.issuer.clone())),
            client,
        }))
    }
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("issuer", &self.issuer.name())
            .field("client", &self.client)
            .finish()
    }
}

/// Whose credentials a session carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Whose {
    /// A caller's exchanged token: the SHA-256 of the caller's principal
    /// and of the token it came with.
    Caller([u8; 32]),
    /// The configured credential with this index.
    Credential(usize),
}

/// A connection's sessions with its callers' credentials.
pub(crate) struct OnBehalfSessions {
    connection: String,
    transport: HttpTransport,
    on_behalf: OnBehalf,
    exchange: Option<Arc<Exchange>>,
    /// The fleet's share, where exchanged tokens are kept sealed.
    share: Option<Arc<dyn TokenShare>>,
    /// What an exchanged token is for (url, audience, scopes), hashed: in
    /// the fleet's name for it, so a token for other settings is not taken.
    settings: [u8; 32],
    clients: HttpClients,
    connect_timeout: Duration,
    lanes: Mutex<HashMap<Whose, Arc<Lane>>>,
}

/// One set of credentials' session, opened on first use.
struct Lane {
    state: Arc<tokio::sync::Mutex<LaneState>>,
    /// When a call last took its session (std: read while sweeping).
    used: Mutex<Instant>,
}

#[derive(Default)]
struct LaneState {
    session: Option<Arc<Session>>,
    /// When the credentials it was opened with stop being good.
    good_until: Option<Instant>,
    /// Why its credentials were refused, if they were.
    refused: Option<String>,
    /// The SHA-256 of the exchanged token the session was opened with, and
    /// of the last one the upstream refused (not taken from the fleet again).
    token: Option<[u8; 32]>,
    refused_token: Option<[u8; 32]>,
}

/// Why a call gets no session of its caller's.
pub(crate) enum NoSession {
    /// The caller's own standing: answered to it, nothing else changes.
    Refused(Unavailable),
    /// The upstream failed to open one: the connection's, as any failure.
    Failed(Failure),
}

/// Whose a failure on a caller's session is.
pub(crate) enum CallerFailure<Answer = Unavailable> {
    /// The caller's credentials': answered to it, nothing else changes.
    Refused(Answer),
    /// This one request's (a `403`): its answer.
    Rejected,
    /// The upstream's: the connection's policy decides.
    Connection,
}

impl OnBehalfSessions {
    /// The pool of `config`, if its calls are made on its callers' behalf.
    pub(crate) fn of(
        config: &ConnectionConfig,
        clients: &HttpClients,
        (exchange, share): (Option<&Arc<Exchange>>, Option<&Arc<dyn TokenShare>>),
    ) -> Option<Arc<Self>> {
        let Transport::Http(http) = &config.transport else {
            return None;
        };
        let on_behalf = http.on_behalf.clone()?;
        let mut settings = Sha256::new();
        settings.update(http.url.as_bytes());
        if let CallerCredentials::TokenExchange { audience, scopes } = &on_behalf.credentials {
            settings.update([0]);
            settings.update(audience.as_bytes());
            for scope in scopes {
                settings.update([0]);
                settings.update(scope.as_bytes());
            }
        }
        Some(Arc::new(OnBehalfSessions {
            connection: config.name.clone(),
            transport: http.clone(),
            on_behalf,
            exchange: exchange.cloned(),
            share: share.cloned(),
            settings: settings.finalize().into(),
            clients: clients.clone(),
            connect_timeout: config.connect_timeout,
            lanes: Mutex::default(),
        }))
    }

    fn lanes(&self) -> std::sync::MutexGuard<'_, HashMap<Whose, Arc<Lane>>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refusal(&self, why: &str, retry_in: Option<Duration>, kind: FailureKind) -> Unavailable {
        Unavailable {
            message: text::not_for_you(&self.connection, why),
            failure: Failure::new(kind, why.to_owned()).with_not_run(),
            retry_in,
        }
    }

    fn refused(&self, why: &str, retry_in: Option<Duration>, kind: FailureKind) -> NoSession {
        NoSession::Refused(self.refusal(why, retry_in, kind))
    }

    /// The session `caller`'s call goes over, opened (with its credentials
    /// found) by `deadline` if there is none yet, speaking the protocol the
    /// connection's own session (`own`) agreed on.
    pub(crate) async fn session_for(
        &self,
        caller: Option<&Caller>,
        own: &Session,
        deadline: Instant,
    ) -> Result<Arc<Session>, NoSession> {
        let (whose, credential) = self.whose(caller)?;
        // The lane may be let go between finding it and locking it (idle,
        // or making room): then it is found again.
        let (lane, mut state) = loop {
            let lane = self.lane(whose)?;
            let state = lane.state.clone().lock_owned().await;
            if self
                .lanes()
                .get(&whose)
                .is_some_and(|current| Arc::ptr_eq(current, &lane))
            {
                break (lane, state);
            }
        };
        if let Some(why) = &state.refused {
            return Err(self.refused(why, None, FailureKind::Auth));
        }
        *lock(&lane.used) = Instant::now();
        if let Some(session) = &state.session {
            let fresh = state
                .good_until
                .is_none_or(|until| Instant::now() + EXPIRY_MARGIN < until);
            if fresh && !session.is_closed() {
                return Ok(session.clone());
            }
            if let Some(old) = state.session.take() {
                close(old);
            }
        }
        let (token, good_until) = match credential {
            Credential::Configured(token) => (token.clone(), None),
            Credential::Exchanged { subject } => {
                let exchanged = self.exchanged(whose, subject, state.refused_token);
                match tokio::time::timeout_at(deadline, exchanged).await {
                    Ok(Ok(exchanged)) => exchanged,
                    Ok(Err(ExchangeError::Refused(code))) => {
                        let why = code.explain().to_owned();
                        state.refused = Some(why.clone());
                        return Err(self.refused(&why, None, FailureKind::Auth));
                    }
                    Ok(Err(ExchangeError::Misconfigured(code))) => {
                        tracing::warn!(
                            connection = %self.connection,
                            why = code.explain(),
                            "token exchange is refused for the gateway's own settings"
                        );
                        return Err(self.refused(code.explain(), None, FailureKind::Permission));
                    }
                    Ok(Err(ExchangeError::Unavailable)) | Err(_) => {
                        return Err(self.refused(
                            "the authorization server could not exchange your token just now",
                            Some(ISSUER_RETRY),
                            FailureKind::Transport,
                        ));
                    }
                }
            }
        };
        // The connection's own `headers` are its own credentials' company:
        // a caller's session carries the caller's credentials alone.
        let transport = HttpTransport {
            url: self.transport.url.clone(),
            auth: Some(UpstreamAuth::Bearer(token)),
            headers: Vec::new(),
            on_behalf: None,
        };
        let deadline = deadline.min(Instant::now() + self.connect_timeout);
        let handler = SessionHandler::default().knowing(own.protocol_version());
        let opened = open_http(
            &transport,
            self.clients.clone(),
            HttpRecorder::default(),
            handler,
            deadline,
        )
        .await;
        let token = good_until.map(|_| digest(token_text(&transport)));
        match opened {
            Ok(session) => {
                session.disable_response_cache().await;
                let session = Arc::new(session);
                state.session = Some(session.clone());
                state.good_until = good_until;
                state.token = token;
                Ok(session)
            }
            Err(failure) => match Self::whose_failure(&failure, true) {
                CallerFailure::Refused(()) if failure.kind == FailureKind::RateLimit => Err(self
                    .refused(
                        UPSTREAM_LIMITS_YOU,
                        failure.retry_after,
                        FailureKind::RateLimit,
                    )),
                CallerFailure::Refused(()) => {
                    state.refused = Some(UPSTREAM_REFUSED.to_owned());
                    state.refused_token = token;
                    Err(self.refused(UPSTREAM_REFUSED, None, FailureKind::Auth))
                }
                CallerFailure::Rejected | CallerFailure::Connection => {
                    Err(NoSession::Failed(failure))
                }
            },
        }
    }

    /// `caller`'s call failed with `failure` on `session` (a caller's):
    /// whose failure it is. Refused credentials are remembered; a broken
    /// session is let go.
    pub(crate) async fn failed(
        &self,
        caller: Option<&Caller>,
        session: &Arc<Session>,
        failure: &Failure,
        broken: bool,
    ) -> CallerFailure {
        let whose = Self::whose_failure(failure, false);
        let lane = self
            .whose(caller)
            .ok()
            .and_then(|(whose, _)| self.lanes().get(&whose).cloned());
        if let Some(lane) = lane {
            let mut state = lane.state.lock().await;
            let ours = state
                .session
                .as_ref()
                .is_some_and(|current| Arc::ptr_eq(current, session));
            let refused = matches!(whose, CallerFailure::Refused(()))
                && failure.kind != FailureKind::RateLimit;
            if ours && (broken || refused) {
                state.session = None;
            }
            if ours && refused {
                state.refused = Some(UPSTREAM_REFUSED.to_owned());
                state.refused_token = state.token;
            }
        }
        match whose {
            CallerFailure::Refused(()) if failure.kind == FailureKind::RateLimit => {
                CallerFailure::Refused(self.refusal(
                    UPSTREAM_LIMITS_YOU,
                    failure.retry_after,
                    FailureKind::RateLimit,
                ))
            }
            CallerFailure::Refused(()) => {
                CallerFailure::Refused(self.refusal(UPSTREAM_REFUSED, None, FailureKind::Auth))
            }
            CallerFailure::Rejected => CallerFailure::Rejected,
            CallerFailure::Connection => CallerFailure::Connection,
        }
    }

    /// Whose `failure` on a caller's session is: its credentials' (`401`;
    /// at `initialize` also `403`; a `429`, which limits those credentials),
    /// its request's (a `403` on a call), else the upstream's.
    fn whose_failure(failure: &Failure, opening: bool) -> CallerFailure<()> {
        match failure.kind {
            FailureKind::Auth | FailureKind::NeedsLogin | FailureKind::RateLimit => {
                CallerFailure::Refused(())
            }
            FailureKind::Permission if opening => CallerFailure::Refused(()),
            FailureKind::Permission => CallerFailure::Rejected,
            _ => CallerFailure::Connection,
        }
    }

    /// How often idle sessions are looked for: a tenth of `idle_timeout`
    /// (a session is closed at most that late), at least every second.
    pub(crate) fn sweep_interval(&self) -> Duration {
        (self.on_behalf.idle_timeout / 10).max(Duration::from_secs(1))
    }

    /// Lets go of the lanes unused for `idle_timeout`, closing their
    /// sessions (and forgetting their refusals).
    pub(crate) fn sweep(&self) {
        let idle = self.on_behalf.idle_timeout;
        let now = Instant::now();
        self.lanes().retain(|_, lane| {
            let unused = now.saturating_duration_since(*lock(&lane.used)) >= idle;
            !(unused && lane.let_go())
        });
    }

    /// Closes every session (the connection stops).
    pub(crate) fn close_all(&self) {
        for (_, lane) in self.lanes().drain() {
            lane.let_go();
        }
    }

    /// Whose credentials `caller` uses, and what they are.
    fn whose<'c>(
        &'c self,
        caller: Option<&'c Caller>,
    ) -> Result<(Whose, Credential<'c>), NoSession> {
        match &self.on_behalf.credentials {
            CallerCredentials::TokenExchange { .. } => {
                let Some(caller) = caller else {
                    return Err(self.refused(
                        "it acts for the caller, and this call has none",
                        None,
                        FailureKind::Permission,
                    ));
                };
                let (Some(principal), Some(subject)) =
                    (caller.principal(), caller.subject.expose())
                else {
                    return Err(self.refused(
                        "it exchanges the caller's own access token for one of the upstream's, \
                         and you did not come with one (sign in with the gateway's \
                         authorization server)",
                        None,
                        FailureKind::Permission,
                    ));
                };
                let mut whose = Sha256::new();
                whose.update(principal.as_bytes());
                whose.update([0]);
                whose.update(subject.as_bytes());
                Ok((
                    Whose::Caller(whose.finalize().into()),
                    Credential::Exchanged { subject },
                ))
            }
            CallerCredentials::PerCaller(credentials) => credentials
                .iter()
                .position(|credential| {
                    caller
                        .is_some_and(|caller| credential.who.iter().any(|who| who.matches(caller)))
                })
                .map(|i| {
                    (
                        Whose::Credential(i),
                        Credential::Configured(&credentials[i].token),
                    )
                })
                .ok_or_else(|| {
                    self.refused(
                        "no credentials of this connection are for you",
                        None,
                        FailureKind::Permission,
                    )
                }),
        }
    }

    /// `whose` lane, made (room made at the cap) if there is none.
    fn lane(&self, whose: Whose) -> Result<Arc<Lane>, NoSession> {
        let mut lanes = self.lanes();
        if let Some(lane) = lanes.get(&whose) {
            return Ok(lane.clone());
        }
        if lanes.len() >= self.on_behalf.max_sessions {
            let oldest = lanes
                .iter()
                .filter(|(_, lane)| lane.idle())
                .min_by_key(|(_, lane)| *lock(&lane.used))
                .map(|(whose, _)| *whose);
            let Some(oldest) = oldest.and_then(|whose| lanes.remove(&whose)) else {
                return Err(self.refused(
                    "every session it keeps for its callers is in use; retry shortly",
                    Some(Duration::from_secs(1)),
                    FailureKind::RateLimit,
                ));
            };
            oldest.let_go();
        }
        let lane = Arc::new(Lane {
            state: Arc::default(),
            used: Mutex::new(Instant::now()),
        });
        lanes.insert(whose, lane.clone());
        Ok(lane)
    }

    /// How the fleet's store names the token exchanged for `whose`: a
    /// digest of it and of the settings it is for, so that no caller's name
    /// is in the store and a token for other settings is not taken.
    fn shared_name(&self, whose: Whose) -> String {
        use base64::Engine as _;
        let mut named = Sha256::new();
        match whose {
            Whose::Caller(digest) => named.update(digest),
            Whose::Credential(i) => named.update(i.to_le_bytes()),
        }
        named.update(self.settings);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&named.finalize()[..16])
    }

    /// A token for the caller `whose` (whose token is `subject`), and
    /// until when it is good: the fleet's, when it shares one living long
    /// enough (not the one last `refused`), else exchanged here (and
    /// shared).
    async fn exchanged(
        &self,
        whose: Whose,
        subject: &str,
        refused: Option<[u8; 32]>,
    ) -> Result<(BearerToken, Option<Instant>), ExchangeError> {
        let CallerCredentials::TokenExchange { audience, scopes } = &self.on_behalf.credentials
        else {
            return Err(ExchangeError::Unavailable);
        };
        let name = self.shared_name(whose);
        if let Some(share) = &self.share {
            match share.exchanged(&self.connection, &name).await {
                Ok(Some(shared)) if Some(digest(&shared.token)) != refused => {
                    let lives = Duration::from_secs(shared.expires_at.saturating_sub(unix_now()))
                        .min(LONGEST_LIFETIME);
                    if lives > EXPIRY_MARGIN * 2 {
                        return Ok((
                            BearerToken::new(shared.token.into()),
                            Some(Instant::now() + lives),
                        ));
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(connection = %self.connection, %error, "the fleet's exchanged tokens could not be read; exchanging here");
                }
            }
        }
        let exchange = self.exchange.as_ref().ok_or(ExchangeError::Unavailable)?;
        let exchanged = exchange
            .issuer
            .exchange(&exchange.client, subject, audience, scopes)
            .await?;
        let lifetime = exchanged
            .lifetime
            .unwrap_or(UNSAID_LIFETIME)
            .min(LONGEST_LIFETIME);
        if let Some(share) = &self.share {
            let shared = ExchangedToken {
                token: exchanged.token.expose_secret().to_owned(),
                expires_at: unix_now().saturating_add(lifetime.as_secs()),
            };
            if let Err(error) = share
                .share_exchanged(&self.connection, &name, &shared)
                .await
            {
                tracing::debug!(connection = %self.connection, %error, "an exchanged token could not be shared with the fleet");
            }
        }
        Ok((
            BearerToken::new(exchanged.token),
            Some(Instant::now() + lifetime),
        ))
    }
}

impl std::fmt::Debug for OnBehalfSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnBehalfSessions")
            .field("connection", &self.connection)
            .field("lanes", &self.lanes().len())
            .finish_non_exhaustive()
    }
}

/// The credentials a call uses.
enum Credential<'a> {
    Configured(&'a BearerToken),
    Exchanged { subject: &'a str },
}

impl Lane {
    /// Whether no call holds it or its session.
    fn idle(&self) -> bool {
        self.state.try_lock().is_ok_and(|state| {
            state
                .session
                .as_ref()
                .is_none_or(|session| Arc::strong_count(session) == 1)
        })
    }

    /// Closes its session when it is idle; `false` (nothing done) when not.
    fn let_go(&self) -> bool {
        let Ok(mut state) = self.state.try_lock() else {
            return false;
        };
        if state
            .session
            .as_ref()
            .is_some_and(|session| Arc::strong_count(session) > 1)
        {
            return false;
        }
        if let Some(session) = state.session.take() {
            close(session);
        }
        true
    }
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The bearer token a session's transport carries.
fn token_text(transport: &HttpTransport) -> &str {
    transport
        .auth
        .as_ref()
        .and_then(UpstreamAuth::bearer)
        .map_or("", BearerToken::expose)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Closes `session` in the background, once nobody holds it.
fn close(session: Arc<Session>) {
    if let Ok(session) = Arc::try_unwrap(session)
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        runtime.spawn(session.close(CLOSE_GRACE));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
