//! A byte-stream adaptor that bounds the size of one SSE event, so a hostile
//! upstream cannot make us buffer an endless event, and that finishes reading
//! a body its reader abandoned, so the connection can be reused.

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures::{Stream, StreamExt};

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
///
/// rmcp drops a POST's SSE body as soon as the response event arrived, usually
/// before the chunked terminator was read, and hyper cannot pool a connection
/// whose body was not read to the end: about one call in four then paid for a
/// new TCP connection. Dropped early, this stream reads the rest of its body in
/// the background instead, within [`DRAIN_WITHIN`] and [`DRAIN_CHUNKS`].
pub(crate) struct LimitedEvents<S>
where
    S: Stream + Send + Unpin + 'static,
{
    /// `None` only after `drop` handed it to the drain.
    inner: Option<S>,
    limit: usize,
    /// Bytes seen since the last event boundary (a blank line).
    current: usize,
    /// The previous byte was a `\n` (ignoring `\r`), so another `\n` ends an event.
    after_newline: bool,
    failed: bool,
    /// The body was read to its end.
    finished: bool,
}

/// How long an abandoned body may take to finish: a response's terminator is
/// already on its way; a long-lived stream (the standalone GET) is cut off.
const DRAIN_WITHIN: Duration = Duration::from_millis(100);
/// How many more chunks an abandoned body may yield before it is cut off.
const DRAIN_CHUNKS: usize = 64;

impl<S> LimitedEvents<S>
where
    S: Stream + Send + Unpin + 'static,
{
    pub(crate) fn new(inner: S, limit: usize) -> Self {
        LimitedEvents {
            inner: Some(inner),
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
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(inner).poll_next(cx) {
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

impl<S> Drop for LimitedEvents<S>
where
    S: Stream + Send + Unpin + 'static,
{
    fn drop(&mut self) {
        // A failed stream's connection is not worth saving; outside a runtime
        // there is nowhere to drain (and nothing will reuse the connection).
        if self.finished || self.failed {
            return;
        }
        let (Some(mut inner), Ok(runtime)) =
            (self.inner.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        runtime.spawn(async move {
            let drain = async {
                let mut chunks = 0;
                while chunks < DRAIN_CHUNKS && inner.next().await.is_some() {
                    chunks += 1;
                }
            };
            // Cut off or not, the body is dropped here; only a complete one
            // returns its connection to the pool.
            let _ = tokio::time::timeout(DRAIN_WITHIN, drain).await;
        });
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

    /// A stream of `total` one-event chunks that counts how many were read.
    fn counted(
        total: usize,
        read: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + Unpin + 'static {
        let read = read.clone();
        stream::iter(0..total).map(move |_| {
            read.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Bytes::from_static(b"data: 1\n\n"))
        })
    }

    #[tokio::test]
    async fn a_body_dropped_early_is_read_to_its_end_in_the_background() {
        let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut events = LimitedEvents::new(counted(5, &read), 64);
        assert!(events.next().await.is_some_and(|item| item.is_ok()));
        drop(events);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(read.load(std::sync::atomic::Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn an_endless_abandoned_body_is_cut_off() {
        let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut events = LimitedEvents::new(counted(usize::MAX, &read), 64);
        assert!(events.next().await.is_some());
        drop(events);
        tokio::time::sleep(DRAIN_WITHIN * 2).await;
        assert_eq!(
            read.load(std::sync::atomic::Ordering::SeqCst),
            1 + DRAIN_CHUNKS
        );
    }
}
