//! A byte-stream adaptor that bounds the size of one SSE event, so a hostile
//! upstream cannot make us buffer an endless event.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use futures::Stream;

/// Why the bounded body stream stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError<E> {
    /// The event grew past the limit without a blank line ending it.
    #[error("SSE event larger than {limit} bytes")]
    EventTooLarge { limit: usize },
    /// The underlying body failed (connection lost mid-stream).
    #[error(transparent)]
    Body(E),
}

/// Wraps a body stream; yields an error once an event exceeds `limit` bytes.
pub(crate) struct LimitedEvents<S> {
    inner: S,
    limit: usize,
    /// Bytes seen since the last event boundary (a blank line).
    current: usize,
    /// The previous byte was a `\n` (ignoring `\r`), so another `\n` ends an event.
    after_newline: bool,
    failed: bool,
}

impl<S> LimitedEvents<S> {
    pub(crate) fn new(inner: S, limit: usize) -> Self {
        LimitedEvents {
            inner,
            limit,
            current: 0,
            after_newline: false,
            failed: false,
        }
    }

    fn account(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            match byte {
                b'\r' => {}
                b'\n' if self.after_newline => {
                    self.current = 0;
                    self.after_newline = false;
                    continue;
                }
                b'\n' => self.after_newline = true,
                _ => self.after_newline = false,
            }
            self.current += 1;
            if self.current > self.limit {
                return false;
            }
        }
        true
    }
}

impl<S, E> Stream for LimitedEvents<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Bytes, BodyError<E>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if self.account(&chunk) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    self.failed = true;
                    let limit = self.limit;
                    Poll::Ready(Some(Err(BodyError::EventTooLarge { limit })))
                }
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(BodyError::Body(error)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::{StreamExt, executor::block_on, stream};

    use super::*;

    fn run(chunks: &[&'static str], limit: usize) -> Vec<bool> {
        let inner = stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::from_static(c.as_bytes())))
                .collect::<Vec<_>>(),
        );
        block_on(
            LimitedEvents::new(inner, limit)
                .map(|item| item.is_ok())
                .collect(),
        )
    }

    #[test]
    fn events_under_the_limit_pass_even_when_the_stream_is_long() {
        let ok = run(
            &["data: 12345\n\n", "data: 12345\r\n\r\n", "data: 1\n\n"],
            16,
        );
        assert_eq!(ok, vec![true, true, true]);
    }

    #[test]
    fn an_event_over_the_limit_fails_and_ends_the_stream() {
        let ok = run(
            &["data: 1234", "567890123456789", "\n\n", "data: 1\n\n"],
            16,
        );
        assert_eq!(ok, vec![true, false]);
    }
}
