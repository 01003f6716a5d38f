//! A byte-stream adaptor that bounds the size of one SSE event, so a hostile
//! upstream cannot make us buffer an endless event. A body left before its
//! end is read on by its lane (`super::drain`), so its connection can be
//! reused.

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
    /// The body was read to its end.
    finished: bool,
}

impl<S> LimitedEvents<S> {
    pub(crate) fn new(inner: S, limit: usize) -> Self {
        LimitedEvents {
            inner,
            limit,
            current: 0,
            after_newline: false,
            failed: false,
            finished: false,
        }
    }

    /// Counts `chunk` into the current event; `false` once the event is
    /// over the limit. A blank line (two `\n`, `\r`s between them ignored)
    /// ends an event; its second `\n` is not counted. Goes from line break
    /// to line break (`memchr`), not byte by byte.
    fn account(&mut self, chunk: &[u8]) -> bool {
        let mut rest = chunk;
        loop {
            let (line, after) = match memchr::memchr(b'\n', rest) {
                Some(at) => (&rest[..at], Some(&rest[at + 1..])),
                None => (rest, None),
            };
            if !line.iter().all(|&byte| byte == b'\r') {
                self.after_newline = false;
            }
            self.current += line.len();
            if self.current > self.limit {
                return false;
            }
            let Some(after) = after else {
                return true;
            };
            if std::mem::take(&mut self.after_newline) {
                self.current = 0;
            } else {
                self.after_newline = true;
                self.current += 1;
                if self.current > self.limit {
                    return false;
                }
            }
            rest = after;
        }
    }
}

impl<S, E> Stream for LimitedEvents<S>
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Bytes, BodyError<E>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed || self.finished {
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
            Poll::Ready(None) => {
                self.finished = true;
                Poll::Ready(None)
            }
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

    /// The rule, byte by byte: `\r` counts and changes nothing, a `\n`
    /// right after a `\n` ends the event (and is not counted), anything
    /// else counts. The counter after each chunk, or `None` once over.
    fn bytewise(chunks: &[&[u8]], limit: usize) -> Vec<Option<usize>> {
        let (mut current, mut after_newline) = (0, false);
        let mut counted = Vec::new();
        for chunk in chunks {
            for &byte in *chunk {
                match byte {
                    b'\r' => {}
                    b'\n' if after_newline => {
                        (current, after_newline) = (0, false);
                        continue;
                    }
                    b'\n' => after_newline = true,
                    _ => after_newline = false,
                }
                current += 1;
                if current > limit {
                    counted.push(None);
                    return counted;
                }
            }
            counted.push(Some(current));
        }
        counted
    }

    /// Line break to line break, the count is the byte-by-byte rule's, for
    /// every way of cutting events into two chunks and every limit.
    #[test]
    fn counting_by_line_breaks_is_counting_by_bytes() {
        let stream = b"data: 12\r\n\r\n\r\r\ndata: x\n\r\n\n: c\n\nid: 1\rdata: 3\n\n\n";
        for limit in 0..=stream.len() {
            for cut in 0..=stream.len() {
                let chunks: [&[u8]; 2] = [&stream[..cut], &stream[cut..]];
                let mut events =
                    LimitedEvents::new(stream::empty::<Result<Bytes, std::io::Error>>(), limit);
                let mut counted = Vec::new();
                for chunk in chunks {
                    if !events.account(chunk) {
                        counted.push(None);
                        break;
                    }
                    counted.push(Some(events.current));
                }
                assert_eq!(
                    counted,
                    bytewise(&chunks, limit),
                    "cut {cut}, limit {limit}"
                );
            }
        }
    }
}
