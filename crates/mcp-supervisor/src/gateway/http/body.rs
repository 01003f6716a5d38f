//! A POST's body, read within the gateway's limits (`body_timeout`,
//! `max_body_bytes`), a large one only with one of the
//! [`LARGE_AT_ONCE`](super::LARGE_AT_ONCE)
//! permits; a body read off the thread when large; and a response body that holds what its request held (the
//! permit, the count of requests in progress) until it is sent.

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::BytesMut;
use futures::StreamExt;
use std::{sync::Arc, time::Duration};

use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

use super::{LARGE_BODY_BYTES, refusals::payload_too_large};
use crate::heavy;

/// `response`, keeping a large request's `permit` until its body is sent.
pub(super) fn holding_permit(response: Response, permit: Option<OwnedSemaphorePermit>) -> Response {
    match permit {
        Some(permit) => response.map(|answer| Body::new(Holding::new(answer, permit))),
        None => response,
    }
}

/// `read(body)`, on a blocking thread for a large body (parsing one takes
/// long enough to hold up every other request on this thread); `None` if
/// the runtime is shutting down.
pub(in crate::gateway) async fn read_body_as<T: Send + 'static>(
    body: &Bytes,
    large: bool,
    read: fn(&[u8]) -> T,
) -> Option<T> {
    if !large {
        return Some(read(body));
    }
    let body = body.clone();
    heavy::off_thread(move || read(&body)).await
}

pin_project_lite::pin_project! {
    /// A response body that holds `guard` until it is sent (or dropped, the
    /// client gone): the request counts as in progress
    /// ([`TaskTrackerToken`]), or keeps its large-request permit, until then.
    pub(super) struct Holding<B, G> {
        #[pin]
        body: B,
        guard: G,
    }
}

impl<B, G> Holding<B, G> {
    pub(super) fn new(body: B, guard: G) -> Self {
        Holding { body, guard }
    }
}

impl<B: http_body::Body, G> http_body::Body for Holding<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A POST's body, read within its limits (see [`Bodies::read`]).
pub(super) struct Bodies {
    /// Permits for large requests in progress ([`LARGE_AT_ONCE`](super::LARGE_AT_ONCE)).
    pub(super) large: Arc<Semaphore>,
    /// `body_timeout`.
    pub(super) timeout: Duration,
    /// `max_body_bytes`.
    pub(super) max_bytes: usize,
}

impl Bodies {
    /// The whole body, within `body_timeout` and `max_body_bytes`, and the
    /// permit a large one holds. A body declared large waits for its permit
    /// before it is read; one without a length, once it has reached
    /// [`LARGE_BODY_BYTES`]. Time spent waiting for a permit is ours, not
    /// the client's: it does not count toward `body_timeout`.
    pub(super) async fn read(
        &self,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Response> {
        let limit = self.max_bytes;
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        if declared.is_some_and(|length| length > limit as u64) {
            return Err(payload_too_large(limit));
        }
        let mut permit = None;
        if declared.is_some_and(|length| length >= LARGE_BODY_BYTES as u64) {
            permit = Some(self.large_permit().await?);
        }
        let mut deadline = Instant::now() + self.timeout;
        let mut chunks = body.into_data_stream();
        let mut collected = BytesMut::new();
        loop {
            let Ok(chunk) = tokio::time::timeout_at(deadline, chunks.next()).await else {
                return Err((
                    StatusCode::REQUEST_TIMEOUT,
                    [(header::CONNECTION, "close")],
                    "Request Timeout: the request body did not arrive within gateway.body_timeout",
                )
                    .into_response());
            };
            let Some(chunk) = chunk else {
                return Ok((collected.freeze(), permit));
            };
            let Ok(chunk) = chunk else {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the request body could not be read",
                )
                    .into_response());
            };
            if chunk.len() > limit - collected.len() {
                return Err(payload_too_large(limit));
            }
            collected.extend_from_slice(&chunk);
            if permit.is_none() && collected.len() >= LARGE_BODY_BYTES {
                let waiting = Instant::now();
                permit = Some(self.large_permit().await?);
                deadline += waiting.elapsed();
            }
        }
    }

    /// One of the [`LARGE_AT_ONCE`] permits, when one is free within
    /// `body_timeout` (permits held by clients slow to send their bodies, or
    /// by long calls, must not make others wait without end); else 503 with
    /// `Retry-After`.
    async fn large_permit(&self) -> Result<OwnedSemaphorePermit, Response> {
        let permit = self.large.clone().acquire_owned();
        match tokio::time::timeout(self.timeout, permit).await {
            Ok(permit) => Ok(permit.expect("the large-request semaphore is never closed")),
            Err(_) => {
                let mut busy = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable: large requests are being processed; retry shortly",
                )
                    .into_response();
                busy.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                Err(busy)
            }
        }
    }
}
