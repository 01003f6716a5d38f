//! `classify_with_fallback` on error chains built from the input: HTTP
//! statuses with arbitrary codes and `Retry-After` values, rmcp's transport,
//! service and initialize errors, I/O errors of every kind, JSON-RPC errors
//! with arbitrary codes, wrapped up to a few layers deep in any order, plus
//! an optional last recorded HTTP response to fall back on.
//!
//! Invariants (docs/ARCHITECTURE.md, "Failure classification"; docs/DECISIONS.md
//! #53 and #57; `session/classify.rs`):
//! - it never panics, nor does `Display` of the result;
//! - the result's kind is the most specific kind among the layers the walk
//!   reaches (the `FailureKind` declaration order); when that is `unknown`, a
//!   recorded error response decides, exactly as `HttpObservation::as_failure`;
//! - equal kinds pool what they know: `not_run` is set exactly when a layer of
//!   the winning kind never ran; `status` and `retry_after` are present exactly
//!   when a layer of the winning kind had one, and the status is one of theirs;
//! - the result quotes nothing from the error: no message, body, header value,
//!   reason or transport name of any layer appears in it.
//!
//! The expected kind of each layer is written out here from that table (the
//! same rows as `session/classify/tests.rs`), not taken from the library: 401
//! auth, 403 permission, 429 rate limit, 5xx server, other 4xx and 3xx protocol
//! (with the status); a request may have run unless it was refused (429,
//! 401/403, a JSON-RPC rejection of the request, could not connect).

use std::{
    any::TypeId,
    borrow::Cow,
    error::Error,
    fmt, io,
    time::{Duration, SystemTime},
};

use arbitrary::{Result, Unstructured};
use mcp_supervisor::{
    Failure, FailureKind as K, failure::parse_retry_after, http::HttpObservation,
    session::classify_with_fallback,
};
use rmcp::{
    ErrorData, ServiceError,
    model::ErrorCode,
    service::ClientInitializeError,
    transport::{
        DynamicTransportError,
        streamable_http_client::{
            AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
        },
    },
};

/// The error type the supervisor's HTTP transport produces (what `classify` downcasts to).
type HttpError = StreamableHttpError<reqwest::Error>;
type BoxError = Box<dyn Error + Send + Sync>;

/// Marks every piece of text the input puts into an error.
const CANARY: &str = "Qx4ClassifyCanary";

/// Wrapping layers at most; the walk's own bound (64 visits) is far above what
/// this many layers need.
const MAX_DEPTH: u32 = 6;

pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(built) = chain(&mut u, 0) else {
        return;
    };
    let observation = fallback(&mut u).unwrap_or(None);
    let failure = classify_with_fallback(built.error.as_ref(), observation.as_ref());
    let shown = format!("{failure}");
    check(&built.reached, observation.as_ref(), &failure);
    assert!(
        !shown.contains(CANARY) && !failure.reason.contains(CANARY),
        "the failure quotes text from the error: {shown:?}\nerror: {:?}",
        built.error
    );
}

/// What one reached layer says by itself.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    kind: K,
    status: Option<u16>,
    not_run: bool,
    retry_after: bool,
}

impl Candidate {
    fn of(kind: K) -> Self {
        Candidate {
            kind,
            status: None,
            not_run: false,
            retry_after: false,
        }
    }

    fn not_run(mut self) -> Self {
        self.not_run = true;
        self
    }

    fn status(status: u16, retry_after: bool) -> Self {
        Candidate {
            kind: kind_of_status(status),
            status: Some(status),
            not_run: refused(status),
            retry_after,
        }
    }
}

/// 401 auth, 403 permission, 429 rate limit, 5xx server, other 4xx
/// and 3xx (a redirect is never followed) protocol; 1xx, 2xx and anything
/// outside 100..=599 is no error kind at all.
fn kind_of_status(status: u16) -> K {
    match status {
        401 => K::Auth,
        403 => K::Permission,
        429 => K::RateLimit,
        500..=599 => K::Server,
        300..=499 => K::Protocol,
        _ => K::Unknown,
    }
}

/// Only a refusal proves the request did not run: 401, 403, 429. A 5xx may
/// come after the work was done.
fn refused(status: u16) -> bool {
    matches!(status, 401 | 403 | 429)
}

fn rank(kind: K) -> usize {
    K::ALL
        .iter()
        .position(|k| *k == kind)
        .expect("every kind is in ALL")
}

/// An error, and what every layer the walk reaches says about it.
struct Built {
    error: BoxError,
    reached: Vec<Candidate>,
}

fn chain(u: &mut Unstructured<'_>, depth: u32) -> Result<Built> {
    if depth < MAX_DEPTH && u.ratio(2, 3)? {
        wrapper(u, depth)
    } else {
        leaf(u)
    }
}

fn text(u: &mut Unstructured<'_>) -> Result<String> {
    let len = u.int_in_range(0..=24)?;
    let bytes = u.bytes(len)?;
    Ok(format!("{CANARY}{}", String::from_utf8_lossy(bytes)))
}

fn dte(inner: BoxError) -> DynamicTransportError {
    DynamicTransportError::from_parts(format!("{CANARY}-transport"), TypeId::of::<()>(), inner)
}

/// An error nobody recognises, wrapping another.
#[derive(Debug)]
struct Layer {
    message: String,
    source: BoxError,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for Layer {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// An error nobody recognises, on its own.
#[derive(Debug)]
struct Strange(String);

impl fmt::Display for Strange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Strange {}

fn wrapper(u: &mut Unstructured<'_>, depth: u32) -> Result<Built> {
    Ok(match u.int_in_range(0..=4)? {
        // rmcp's request error: "could not send" (transport), then its source.
        0 => {
            let inner = chain(u, depth + 1)?;
            let mut reached = vec![Candidate::of(K::Transport)];
            reached.extend(inner.reached);
            Built {
                error: Box::new(ServiceError::TransportSend(dte(inner.error))),
                reached,
            }
        }
        // The initialize request could not be sent (transport), then the inner error.
        1 => {
            let inner = chain(u, depth + 1)?;
            let mut reached = vec![Candidate::of(K::Transport)];
            reached.extend(inner.reached);
            Built {
                error: Box::new(ClientInitializeError::TransportError {
                    error: dte(inner.error),
                    context: Cow::Owned(text(u)?),
                }),
                reached,
            }
        }
        // A bare transport wrapper says nothing itself.
        2 => {
            let inner = chain(u, depth + 1)?;
            Built {
                error: Box::new(dte(inner.error)),
                reached: inner.reached,
            }
        }
        // Someone else's wrapper with a message.
        3 => {
            let inner = chain(u, depth + 1)?;
            Built {
                error: Box::new(Layer {
                    message: text(u)?,
                    source: inner.error,
                }),
                reached: inner.reached,
            }
        }
        // Discovery and the legacy fallback both failed: only the fallback counts.
        _ => {
            let discover = initialize_error(u, depth + 1)?;
            let fallback = initialize_error(u, depth + 1)?;
            Built {
                error: Box::new(ClientInitializeError::LegacyFallbackFailed {
                    discover: Box::new(discover.0),
                    fallback: Box::new(fallback.0),
                }),
                reached: fallback.1,
            }
        }
    })
}

/// A `ClientInitializeError` (the only thing `LegacyFallbackFailed` holds).
fn initialize_error(
    u: &mut Unstructured<'_>,
    depth: u32,
) -> Result<(ClientInitializeError, Vec<Candidate>)> {
    Ok(match u.int_in_range(0..=4)? {
        0 if depth < MAX_DEPTH => {
            let inner = chain(u, depth + 1)?;
            let mut reached = vec![Candidate::of(K::Transport)];
            reached.extend(inner.reached);
            let error = ClientInitializeError::TransportError {
                error: dte(inner.error),
                context: Cow::Owned(text(u)?),
            };
            (error, reached)
        }
        1 => (
            ClientInitializeError::JsonRpcError(error_data(u)?),
            vec![Candidate::of(K::Protocol)],
        ),
        2 => (
            ClientInitializeError::Cancelled,
            vec![Candidate::of(K::Transport)],
        ),
        3 => (
            ClientInitializeError::ExpectedInitResponse(None),
            vec![Candidate::of(K::Protocol)],
        ),
        _ => (
            ClientInitializeError::ConnectionClosed(text(u)?),
            vec![Candidate::of(K::Transport)],
        ),
    })
}

fn error_data(u: &mut Unstructured<'_>) -> Result<ErrorData> {
    Ok(ErrorData::new(
        ErrorCode(u.arbitrary()?),
        text(u)?,
        Some(serde_json::Value::String(text(u)?)),
    ))
}

const IO_KINDS: [io::ErrorKind; 16] = [
    io::ErrorKind::TimedOut,
    io::ErrorKind::WouldBlock,
    io::ErrorKind::ConnectionRefused,
    io::ErrorKind::NotFound,
    io::ErrorKind::PermissionDenied,
    io::ErrorKind::AddrNotAvailable,
    io::ErrorKind::ConnectionReset,
    io::ErrorKind::ConnectionAborted,
    io::ErrorKind::BrokenPipe,
    io::ErrorKind::UnexpectedEof,
    io::ErrorKind::NotConnected,
    io::ErrorKind::InvalidData,
    io::ErrorKind::InvalidInput,
    io::ErrorKind::Interrupted,
    io::ErrorKind::OutOfMemory,
    io::ErrorKind::Other,
];

/// An I/O error: timeouts, "could not connect" (never ran),
/// "connection lost", malformed data (protocol), and anything else transport.
fn io_candidate(kind: io::ErrorKind) -> Candidate {
    use io::ErrorKind as E;
    match kind {
        E::TimedOut | E::WouldBlock => Candidate::of(K::Timeout),
        E::ConnectionRefused | E::NotFound | E::PermissionDenied | E::AddrNotAvailable => {
            Candidate::of(K::Transport).not_run()
        }
        E::InvalidData => Candidate::of(K::Protocol),
        _ => Candidate::of(K::Transport),
    }
}

fn io_error(u: &mut Unstructured<'_>) -> Result<(io::Error, Candidate)> {
    let kind = *u.choose(&IO_KINDS)?;
    Ok((io::Error::new(kind, text(u)?), io_candidate(kind)))
}

fn http_status(u: &mut Unstructured<'_>) -> Result<(HttpError, Candidate)> {
    // Mostly statuses that mean something, sometimes any u16 at all.
    let status = if u.ratio(3, 4)? {
        u.int_in_range(299..=600)?
    } else {
        u.arbitrary()?
    };
    let retry_after = if u.ratio(1, 2)? {
        let len = u.int_in_range(0..=40)?;
        Some(String::from_utf8_lossy(u.bytes(len)?).into_owned())
    } else {
        None
    };
    let error = HttpStatusError::new(status, retry_after);
    // Whether the value rmcp kept parses (digits always do; a date in the past is zero).
    let parses = error
        .retry_after
        .as_deref()
        .and_then(|value| parse_retry_after(value, SystemTime::now()))
        .is_some();
    Ok((
        StreamableHttpError::HttpStatus(error),
        Candidate::status(status, parses),
    ))
}

fn leaf(u: &mut Unstructured<'_>) -> Result<Built> {
    let (error, reached): (BoxError, Vec<Candidate>) = match u.int_in_range(0..=20)? {
        0..=3 => {
            let (error, candidate) = http_status(u)?;
            (Box::new(error), vec![candidate])
        }
        4 => (
            Box::new(HttpError::AuthRequired(AuthRequiredError::new(text(u)?))),
            vec![Candidate::status(401, false)],
        ),
        5 => (
            Box::new(HttpError::InsufficientScope(InsufficientScopeError::new(
                text(u)?,
                Some(text(u)?),
            ))),
            vec![Candidate::status(403, false)],
        ),
        // The session broke; the request may have run before it did.
        6 => (
            Box::new(HttpError::SessionExpired),
            vec![Candidate {
                status: Some(404),
                ..Candidate::of(K::Transport)
            }],
        ),
        7 => (
            Box::new(HttpError::SessionRecoveryTimeout),
            vec![Candidate::of(K::Timeout)],
        ),
        8 => {
            // The stream broke (transport), and the I/O error under it is walked too.
            let (io, candidate) = io_error(u)?;
            (
                Box::new(HttpError::Io(io)),
                vec![Candidate::of(K::Transport), candidate],
            )
        }
        9 => (
            Box::new(HttpError::UnexpectedEndOfStream),
            vec![Candidate::of(K::Transport)],
        ),
        10 => (
            Box::new(HttpError::UnexpectedServerResponse(Cow::Owned(text(u)?))),
            vec![Candidate::of(K::Protocol)],
        ),
        11 => (
            Box::new(HttpError::UnexpectedContentType(Some(text(u)?))),
            vec![Candidate::of(K::Protocol)],
        ),
        12 => (
            Box::new(HttpError::ReinitializationFailed(error_data(u)?)),
            vec![Candidate::of(K::Protocol)],
        ),
        13 => {
            let (io, candidate) = io_error(u)?;
            (Box::new(io), vec![candidate])
        }
        // The server refused the request as it was: it did not run.
        14 => (
            Box::new(ServiceError::McpError(error_data(u)?)),
            vec![Candidate::of(K::Protocol).not_run()],
        ),
        15 => (
            Box::new(ServiceError::Timeout {
                timeout: Duration::from_millis(u.arbitrary::<u32>()?.into()),
            }),
            vec![Candidate::of(K::Timeout)],
        ),
        16 => (
            Box::new(ServiceError::UnexpectedResponse),
            vec![Candidate::of(K::Protocol)],
        ),
        17 => (
            Box::new(ServiceError::TransportClosed),
            vec![Candidate::of(K::Transport)],
        ),
        18 => (
            Box::new(ServiceError::Cancelled {
                reason: Some(text(u)?),
            }),
            vec![Candidate::of(K::Transport)],
        ),
        19 => (Box::new(elapsed()), vec![Candidate::of(K::Timeout)]),
        _ => (Box::new(Strange(text(u)?)), vec![]),
    };
    Ok(Built { error, reached })
}

/// A tokio deadline error (it has no public constructor).
fn elapsed() -> tokio::time::error::Elapsed {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
    }
    RUNTIME.with(|runtime| {
        runtime
            .block_on(async {
                tokio::time::timeout(Duration::ZERO, std::future::pending::<()>()).await
            })
            .expect_err("a zero timeout on a pending future elapses")
    })
}

fn fallback(u: &mut Unstructured<'_>) -> Result<Option<HttpObservation>> {
    if !u.arbitrary::<bool>()? {
        return Ok(None);
    }
    let status = if u.ratio(3, 4)? {
        u.int_in_range(199..=600)?
    } else {
        u.arbitrary()?
    };
    let retry_after = if u.arbitrary()? {
        Some(Duration::from_secs(u.arbitrary()?))
    } else {
        None
    };
    Ok(Some(HttpObservation {
        method: "POST",
        path: "/mcp".into(),
        status,
        retry_after,
        at: SystemTime::now(),
    }))
}

fn check(reached: &[Candidate], observation: Option<&HttpObservation>, failure: &Failure) {
    let context =
        || format!("reached layers: {reached:?}\nfallback: {observation:?}\nresult: {failure:?}");
    let best = reached
        .iter()
        .map(|c| c.kind)
        .min_by_key(|kind| rank(*kind))
        .unwrap_or(K::Unknown);
    if best == K::Unknown
        && let Some(observation) = observation
        && kind_of_status(observation.status) != K::Unknown
    {
        assert_eq!(
            failure.kind,
            kind_of_status(observation.status),
            "{}",
            context()
        );
        assert_eq!(failure.status, Some(observation.status), "{}", context());
        assert_eq!(
            failure.retry_after,
            observation.retry_after,
            "{}",
            context()
        );
        assert_eq!(
            failure.not_run,
            refused(observation.status),
            "{}",
            context()
        );
        assert_eq!(failure.method.as_deref(), Some("POST"), "{}", context());
        assert_eq!(failure.path.as_deref(), Some("/mcp"), "{}", context());
        return;
    }
    assert_eq!(
        failure.kind,
        best,
        "not the most specific kind reached\n{}",
        context()
    );
    let same: Vec<&Candidate> = reached.iter().filter(|c| c.kind == best).collect();
    assert_eq!(
        failure.not_run,
        same.iter().any(|c| c.not_run),
        "not_run is not pooled from the {best} layers\n{}",
        context()
    );
    let statuses: Vec<u16> = same.iter().filter_map(|c| c.status).collect();
    match failure.status {
        Some(status) => assert!(
            statuses.contains(&status),
            "status {status} is not one the {best} layers had\n{}",
            context()
        ),
        None => assert!(
            statuses.is_empty(),
            "the {best} layers had a status and the result has none\n{}",
            context()
        ),
    }
    assert_eq!(
        failure.retry_after.is_some(),
        same.iter().any(|c| c.retry_after),
        "Retry-After is not pooled from the {best} layers\n{}",
        context()
    );
    assert!(
        failure.method.is_none() && failure.path.is_none(),
        "{}",
        context()
    );
}
