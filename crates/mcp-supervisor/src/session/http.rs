//! Opening a session over streamable HTTP.

use std::{collections::HashMap, sync::Arc, time::Duration};

use futures::future::BoxFuture;

use http::{HeaderName, HeaderValue};
use rmcp::{
    RoleClient,
    model::{ClientRequest, DiscoverRequest, DiscoverRequestParams, PingRequest},
    service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{
    ListKind, Session, SessionEvent, SessionHandler, classify_recorded, direct::DirectClientParts,
    watch::Watched,
};
use crate::{
    config::{HttpTransport, OAuthGrant, UpstreamAuth},
    failure::Phase,
    failure::{Failure, FailureKind},
    generation::Generation,
    http::{
        HttpClients, HttpRecorder, OriginReuse, PROBE_PINGS, Ping, PlainLane, PostOutgoing,
        RecordingClient, Reuse, SessionIds, probe_verdict,
    },
    oauth,
};

/// The HTTP clients all HTTP connections share: one pooled (keep-alive reuse
/// is ~1.6× faster than a connection per call and far lighter for many
/// upstreams), and one without idle connections for origins where reuse
/// stalls (see [`HttpClients`]).
pub fn shared_http_client() -> HttpClients {
    HttpClients::new(
        client_builder()
            .pool_idle_timeout(IDLE_TIMEOUT)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new()),
        client_builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new()),
    )
    .with_plain_lane(PlainLane::new(CONNECT_TIMEOUT, IDLE_TIMEOUT))
}

/// How long a connection to an upstream may take to open. Deadlines are per
/// operation (call_timeout etc.), enforced above the clients.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a pooled connection to an upstream stays open unused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .connect_timeout(CONNECT_TIMEOUT)
        // Never follow redirects: a redirect could carry the bearer token to
        // another origin, and an MCP endpoint has no business redirecting.
        .redirect(reqwest::redirect::Policy::none())
}

/// Connects and initializes a session to `transport`, within `deadline`.
///
/// The bearer token goes into rmcp's transport config only here, and that
/// config (which derives `Debug`) is moved into rmcp and never logged.
pub async fn open_http(
    transport: &HttpTransport,
    clients: HttpClients,
    recorder: HttpRecorder,
    handler: SessionHandler,
    deadline: Instant,
) -> Result<Session, Failure> {
    open_http_sharing(transport, clients, recorder, handler, deadline, None).await
}

/// [`open_http`], an OAuth connection's tokens renewed once for its fleet
/// (`sharing`).
pub(crate) async fn open_http_sharing(
    transport: &HttpTransport,
    clients: HttpClients,
    recorder: HttpRecorder,
    handler: SessionHandler,
    deadline: Instant,
    sharing: Option<oauth::Sharing>,
) -> Result<Session, Failure> {
    let again = (clients.clone(), recorder.clone(), sharing.clone());
    let mut config = StreamableHttpClientTransportConfig::with_uri(transport.url.as_str())
        .custom_headers(header_map(transport)?);
    // OAuth: the stored tokens (nothing is sent without them) or the
    // client's own credentials, and the authorization server found, within
    // the connect's deadline.
    let authorizer = match &transport.auth {
        Some(UpstreamAuth::Bearer(token)) => {
            config = config.auth_header(token.expose());
            Authorizer::None
        }
        Some(UpstreamAuth::OAuth(settings)) => {
            let found = async {
                match settings.grant {
                    OAuthGrant::AuthorizationCode => {
                        oauth::login_tokens(&transport.url, settings, sharing)
                            .await
                            .map(|(tokens, file)| Authorizer::Login(tokens, file))
                    }
                    OAuthGrant::ClientCredentials => {
                        oauth::client_tokens(&transport.url, settings, sharing)
                            .await
                            .map(Authorizer::Client)
                    }
                }
            };
            match tokio::time::timeout_at(deadline, found).await {
                Ok(found) => found?,
                Err(_) => return Err(Failure::timeout("OAuth discovery did not complete in time")),
            }
        }
        None => Authorizer::None,
    };
    let token_file = match &authorizer {
        Authorizer::Login(_, file) => Some(file.clone()),
        _ => None,
    };
    let origin = reqwest::Url::parse(&transport.url)
        .ok()
        .map(|url| clients.origin(&url));
    let probe = origin.as_ref().and_then(OriginReuse::claim_probe);
    let mut client = RecordingClient::new(clients, recorder.clone());
    let server_stream = client.defer_server_stream();
    let session_ids = client.session_ids();
    // A session the upstream forgot is opened again by rmcp's client,
    // unseen by the connection: what it offers may have changed meanwhile
    // (a redeployed server), so its lists are loaded again.
    session_ids.on_renewed({
        let handler = handler.clone();
        move || {
            for list in ListKind::ALL {
                handler.emit(SessionEvent::ListChanged(list));
            }
        }
    });
    let ended = CancellationToken::new();
    let lifecycle = handler.lifecycle();
    let (serving, direct) = match authorizer {
        Authorizer::Login(tokens, _) => serve(
            handler.clone(),
            oauth::TokenClient::new(client, tokens),
            (config, session_ids),
            lifecycle,
            ended.clone(),
        ),
        Authorizer::Client(tokens) => serve(
            handler.clone(),
            oauth::TokenClient::new(client, tokens),
            (config, session_ids),
            lifecycle,
            ended.clone(),
        ),
        Authorizer::None => serve(
            handler.clone(),
            client,
            (config, session_ids),
            lifecycle,
            ended.clone(),
        ),
    };
    let service = match tokio::time::timeout_at(deadline, serving).await {
        Ok(Ok(service)) => service,
        Ok(Err(error)) => {
            if let Some(legacy) = handler.after_failed_discover(&error) {
                let (clients, recorder, sharing) = again;
                return Box::pin(open_http_sharing(
                    transport, clients, recorder, legacy, deadline, sharing,
                ))
                .await;
            }
            let failure = classify_recorded(&error, Some(&recorder));
            return Err(oauth::on_session(
                failure,
                &error,
                token_file.as_ref(),
                Phase::Connect,
            ));
        }
        Err(_) => return Err(Failure::timeout("initialize did not complete in time")),
    };
    // The standalone GET stream carries what the upstream sends outside any
    // request: list changes, resource updates, log messages. A server that
    // declares none of those will not send anything on it.
    server_stream.decide(announces_anything(&service));
    if let Some(probe) = probe {
        let verdict = probe_reuse(&service, deadline).await;
        if verdict == Reuse::Stalls {
            tracing::warn!(
                origin = origin.as_ref().map_or("", |origin| origin.name()),
                "upstream stalls on reused connections (Nagle with delayed ACK); \
                 using a new connection per request to it"
            );
        }
        probe.settle(verdict);
    }
    let session = Session::new(service, Some(recorder), ended)
        .sending_directly(direct)
        .await;
    Ok(match token_file {
        Some(file) => session.logging_in(file),
        None => session,
    })
}

/// What authorizes an HTTP session's requests beyond static headers.
enum Authorizer {
    None,
    /// Tokens from `mcp-supervisor login`, refreshed with the refresh token.
    Login(Arc<oauth::LoginTokens>, oauth::TokenFile),
    /// `client_credentials`: tokens the connection gets by itself.
    Client(Arc<oauth::ClientTokens>),
}

/// A session being started.
type Serving =
    BoxFuture<'static, Result<RunningService<RoleClient, SessionHandler>, ClientInitializeError>>;

/// Starts the MCP session over `client` (ours, or it wrapped in rmcp's OAuth
/// client), whose requests carry `session_ids`; and what sends its plain
/// calls beside rmcp's client.
fn serve<C>(
    handler: SessionHandler,
    client: C,
    (config, session_ids): (StreamableHttpClientTransportConfig, SessionIds),
    lifecycle: ClientLifecycleMode,
    ended: CancellationToken,
) -> (Serving, DirectClientParts)
where
    C: PostOutgoing,
{
    let direct = DirectClientParts::new(&client, session_ids, &config);
    let transport = Watched::new(
        StreamableHttpClientTransport::with_client(client, config),
        ended,
    );
    (
        Box::pin(handler.serve_with_lifecycle(transport, lifecycle)),
        direct,
    )
}

fn announces_anything(service: &RunningService<RoleClient, SessionHandler>) -> bool {
    let Some(info) = service.peer_info() else {
        return false;
    };
    let capabilities = &info.capabilities;
    let tools = capabilities
        .tools
        .as_ref()
        .and_then(|tools| tools.list_changed);
    let prompts = capabilities
        .prompts
        .as_ref()
        .and_then(|prompts| prompts.list_changed);
    let resources = capabilities.resources.as_ref().map(|resources| {
        resources.list_changed.unwrap_or(false) || resources.subscribe.unwrap_or(false)
    });
    [tools, prompts, resources].contains(&Some(true)) || capabilities.logging.is_some()
}

/// How long one probe `ping` may take before the probe gives up (keeping reuse).
const PING_PATIENCE: Duration = Duration::from_millis(500);

/// Times up to [`PROBE_PINGS`] `ping`s on the new session's reused
/// connection, until [`probe_verdict`] settles: a false "stalls" only costs
/// speed, but so would probing every connect. Each ping's time is measured
/// with how late this runtime ran meanwhile, so a ping slow for the whole
/// process (a busy process or machine: many sessions starting at once) is
/// told from a slow connection.
async fn probe_reuse(
    service: &RunningService<RoleClient, SessionHandler>,
    deadline: Instant,
) -> Reuse {
    let mut pings = Vec::with_capacity(PROBE_PINGS);
    loop {
        if let Some(verdict) = probe_verdict(&pings) {
            return verdict;
        }
        let started = Instant::now();
        let ping = service.send_request(probe_request(service));
        // A server that does not answer pings must not hold the connect up.
        let patience = deadline.min(started + PING_PATIENCE);
        let (answered, lag) = timing_lag(tokio::time::timeout_at(patience, ping)).await;
        pings.push(match answered {
            Ok(Ok(_)) => Ping::Answered {
                round_trip: started.elapsed(),
                lag,
            },
            Ok(Err(_)) | Err(_) => Ping::Unanswered,
        });
    }
}

/// Runs `work`, measuring how late this runtime ran 1 ms timers meanwhile:
/// the worst delay seen.
async fn timing_lag<F: Future>(work: F) -> (F::Output, Duration) {
    const TICK: Duration = Duration::from_millis(1);
    let mut worst = Duration::ZERO;
    let mut work = std::pin::pin!(work);
    loop {
        let before = Instant::now();
        tokio::select! {
            output = &mut work => return (output, worst),
            () = tokio::time::sleep(TICK) => {
                worst = worst.max(before.elapsed().saturating_sub(TICK));
            }
        }
    }
}

/// The cheapest request an upstream answers: `ping`, which protocol
/// 2026-07-28 removed; `server/discover` there.
fn probe_request(service: &RunningService<RoleClient, SessionHandler>) -> ClientRequest {
    let stateless = service
        .peer_info()
        .is_some_and(|info| Generation::of(&info.protocol_version) == Generation::Stateless);
    if stateless {
        ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams::default()))
    } else {
        ClientRequest::PingRequest(PingRequest::default())
    }
}

fn header_map(transport: &HttpTransport) -> Result<HashMap<HeaderName, HeaderValue>, Failure> {
    use secrecy::ExposeSecret;
    transport
        .headers
        .iter()
        .map(|(name, value)| {
            let name = HeaderName::try_from(name.as_str());
            let value = HeaderValue::try_from(value.expose_secret());
            match (name, value) {
                (Ok(name), Ok(mut value)) => {
                    value.set_sensitive(true);
                    Ok((name, value))
                }
                // Config validation rejects these; this only guards the invariant.
                _ => Err(Failure::new(
                    FailureKind::Protocol,
                    "invalid configured header",
                )),
            }
        })
        .collect()
}
