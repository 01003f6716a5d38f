//! The one place that turns an error into a [`Failure`].
//!
//! Errors arrive wrapped several layers deep (rmcp `ServiceError` →
//! `DynamicTransportError` → `StreamableHttpError` → `reqwest::Error` →
//! `io::Error`). We walk the whole chain, turn every layer we recognise into a
//! candidate, and keep the most specific one (the priority order of
//! docs/ARCHITECTURE.md, "Failure classification"), so a 503 under a
//! "transport send failed" wrapper is a `server` failure, not `transport`.

use std::{error::Error, io, time::SystemTime};

use rmcp::{
    ServiceError,
    service::ClientInitializeError,
    transport::{DynamicTransportError, streamable_http_client::StreamableHttpError},
};

use crate::{
    failure::{Failure, FailureKind, parse_retry_after},
    http::{HttpObservation, LaneError},
};

/// The error type our HTTP transport produces (see [`crate::http::RecordingClient`]).
type HttpError = StreamableHttpError<reqwest::Error>;

/// Classifies an error with no HTTP history to fall back on.
pub fn classify(error: &(dyn Error + 'static)) -> Failure {
    classify_with_fallback(error, None)
}

/// Classifies an error; when nothing in it is recognised (`unknown`), falls
/// back to the last HTTP response recorded on the connection, if it was an error.
pub fn classify_with_fallback(
    error: &(dyn Error + 'static),
    last_response: Option<&HttpObservation>,
) -> Failure {
    let mut best: Option<Failure> = None;
    let mut pending: Vec<&(dyn Error + 'static)> = vec![error];
    // Bounded walk: a pathological cyclic `source()` chain must not hang us.
    let mut budget = 64;
    while let Some(node) = pending.pop() {
        budget -= 1;
        if budget == 0 {
            break;
        }
        if let Some(candidate) = recognise(node, &mut pending) {
            best = Some(match best {
                None => candidate,
                Some(current) => more_specific(current, candidate),
            });
        }
        if let Some(source) = node.source() {
            pending.push(source);
        }
    }
    let failure = best.unwrap_or_else(|| Failure::new(FailureKind::Unknown, "unrecognised error"));
    if failure.kind != FailureKind::Unknown {
        return failure;
    }
    match last_response.and_then(HttpObservation::as_failure) {
        Some(recorded) => recorded,
        None => failure,
    }
}

/// Keeps the more specific of two candidates; equal kinds pool what they know.
fn more_specific(a: Failure, b: Failure) -> Failure {
    let (mut keep, other) = if b.kind.priority() < a.kind.priority() {
        (b, a)
    } else {
        (a, b)
    };
    if keep.kind == other.kind {
        keep.status = keep.status.or(other.status);
        keep.retry_after = keep.retry_after.or(other.retry_after);
        keep.not_run |= other.not_run;
    }
    keep
}

/// One layer of an error chain → a candidate failure. Layers whose inner error
/// is not exposed through `source()` push it onto `pending` themselves.
fn recognise<'a>(
    node: &'a (dyn Error + 'static),
    pending: &mut Vec<&'a (dyn Error + 'static)>,
) -> Option<Failure> {
    if let Some(error) = node.downcast_ref::<ServiceError>() {
        return Some(service_error(error));
    }
    if let Some(error) = node.downcast_ref::<ClientInitializeError>() {
        return initialize_error(error, pending);
    }
    if let Some(error) = node.downcast_ref::<DynamicTransportError>() {
        pending.push(error.error.as_ref());
        return None;
    }
    if let Some(error) = node.downcast_ref::<HttpError>() {
        return Some(http_error(error));
    }
    if let Some(error) = node.downcast_ref::<reqwest::Error>() {
        return Some(reqwest_error(error));
    }
    if let Some(error) = node.downcast_ref::<io::Error>() {
        return Some(io_error(error));
    }
    if node.is::<tokio::time::error::Elapsed>() {
        return Some(Failure::timeout("deadline passed"));
    }
    None
}

fn service_error(error: &ServiceError) -> Failure {
    match error {
        // The server refused the request as it is: it did not run.
        ServiceError::McpError(data) => Failure::new(
            FailureKind::Protocol,
            format!("JSON-RPC error {}", data.code.0),
        )
        .with_not_run(),
        ServiceError::Timeout { .. } => Failure::timeout("request timed out"),
        ServiceError::UnexpectedResponse => {
            Failure::new(FailureKind::Protocol, "unexpected response type")
        }
        // The inner transport error is the `source()` and is walked next.
        ServiceError::TransportSend(_) => Failure::transport("could not send request"),
        ServiceError::TransportClosed => Failure::transport("session closed"),
        ServiceError::Cancelled { .. } => Failure::transport("request cancelled"),
        _ => Failure::new(FailureKind::Unknown, "unrecognised service error"),
    }
}

fn initialize_error<'a>(
    error: &'a ClientInitializeError,
    pending: &mut Vec<&'a (dyn Error + 'static)>,
) -> Option<Failure> {
    Some(match error {
        ClientInitializeError::TransportError { error, .. } => {
            pending.push(error);
            Failure::transport("the session handshake could not be sent")
        }
        ClientInitializeError::ConnectionClosed(_) => {
            Failure::transport("connection closed during the session handshake")
        }
        ClientInitializeError::Cancelled => Failure::transport("session handshake cancelled"),
        ClientInitializeError::JsonRpcError(data) => Failure::new(
            FailureKind::Protocol,
            format!(
                "the session handshake (initialize or server/discover) answered JSON-RPC error {}",
                data.code.0
            ),
        ),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            pending.push(fallback.as_ref());
            return None;
        }
        _ => Failure::new(
            FailureKind::Protocol,
            "unexpected answer to the session handshake",
        ),
    })
}

fn http_error(error: &HttpError) -> Failure {
    match error {
        StreamableHttpError::HttpStatus(status) => {
            let retry_after = status
                .retry_after
                .as_deref()
                .and_then(|value| parse_retry_after(value, SystemTime::now()));
            Failure::from_status(status.status, retry_after)
        }
        StreamableHttpError::AuthRequired(_) => Failure {
            reason: "authorization required".into(),
            ..Failure::from_status(401, None)
        },
        StreamableHttpError::InsufficientScope(_) => Failure::insufficient_scope(),
        // rmcp re-initializes once by itself; reaching us means that failed
        // too. The session is what broke; a call is re-sent only if safe.
        StreamableHttpError::SessionExpired => Failure {
            status: Some(404),
            ..Failure::transport("session expired")
        },
        StreamableHttpError::SessionRecoveryTimeout
        | StreamableHttpError::ControlRequestTimeout => {
            Failure::timeout("session recovery timed out")
        }
        // The plain-HTTP lane's send failures arrive as I/O errors carrying
        // the lane's error.
        StreamableHttpError::Io(error) => match error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<LaneError>())
        {
            Some(error) => lane_error(error),
            None => Failure::transport("stream ended"),
        },
        StreamableHttpError::Sse(_)
        | StreamableHttpError::UnexpectedEndOfStream
        | StreamableHttpError::TransportChannelClosed
        | StreamableHttpError::TokioJoinError(_) => Failure::transport("stream ended"),
        // The reqwest error is the variant's payload, not its source: classify it here.
        StreamableHttpError::Client(inner) => reqwest_error(inner),
        StreamableHttpError::ServerDoesNotSupportSse
        | StreamableHttpError::ServerDoesNotSupportDeleteSession => Failure::new(
            FailureKind::Protocol,
            "server does not support this request",
        ),
        StreamableHttpError::ResponseBodyTooLarge { .. } => {
            Failure::new(FailureKind::Protocol, "response body too large")
        }
        StreamableHttpError::ReservedHeaderConflict(_) => {
            Failure::new(FailureKind::Protocol, "configured header is reserved")
        }
        // Getting or refreshing an OAuth token failed.
        StreamableHttpError::Auth(error) => crate::oauth::auth_failure(error),
        _ => Failure::new(FailureKind::Protocol, "unexpected server response"),
    }
}

fn reqwest_error(error: &reqwest::Error) -> Failure {
    if error.is_timeout() && error.is_connect() {
        // The connection was never made, so nothing was sent.
        return Failure::timeout("connect timed out").with_not_run();
    }
    if error.is_timeout() {
        return Failure::timeout("HTTP request timed out");
    }
    if error.is_connect() {
        // Nothing was sent: even a non-idempotent call is safe to retry.
        return Failure::transport("could not connect").with_not_run();
    }
    if let Some(status) = error.status() {
        return Failure::from_status(status.as_u16(), None);
    }
    if error.is_body() || error.is_decode() {
        return Failure::transport("response body broken off");
    }
    if error.is_request() {
        return Failure::transport("HTTP request failed");
    }
    Failure::new(FailureKind::Unknown, "HTTP client error")
}

/// A send on the plain-HTTP lane that failed (the same words as
/// [`reqwest_error`]'s for the same failures).
fn lane_error(error: &LaneError) -> Failure {
    let timed_out = error
        .socket_error()
        .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut);
    match (error.is_connect(), timed_out) {
        // The connection was never made, so nothing was sent.
        (true, true) => Failure::timeout("connect timed out").with_not_run(),
        (true, false) => Failure::transport("could not connect").with_not_run(),
        (false, _) => Failure::transport("HTTP request failed"),
    }
}

fn io_error(error: &io::Error) -> Failure {
    use io::ErrorKind as K;
    match error.kind() {
        K::TimedOut | K::WouldBlock => Failure::timeout("I/O timed out"),
        K::ConnectionRefused | K::NotFound | K::PermissionDenied | K::AddrNotAvailable => {
            Failure::transport(format!("could not connect ({})", error.kind())).with_not_run()
        }
        K::ConnectionReset
        | K::ConnectionAborted
        | K::BrokenPipe
        | K::UnexpectedEof
        | K::NotConnected => Failure::transport(format!("connection lost ({})", error.kind())),
        K::InvalidData => Failure::new(FailureKind::Protocol, "malformed data"),
        _ => Failure::transport(format!("I/O error ({})", error.kind())),
    }
}

#[cfg(test)]
mod tests;
