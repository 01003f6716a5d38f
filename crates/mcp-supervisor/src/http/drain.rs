//! An answer's body its reader left before the end is read to its end
//! anyway, within bounds, so that its keep-alive connection can be reused
//! (docs/DECISIONS.md #190).
//!
//! rmcp's reader and ours drop a POST's event stream once its answer has
//! arrived, usually before the chunked terminator was read, and an HTTP/1
//! connection whose answer was not read to its end cannot take another
//! request: about one call in four then paid for a new TCP connection. So
//! a body left early is read on, at most [`DRAIN_BYTES`] more bytes in at
//! most [`DRAIN_CHUNKS`] more frames, and for at most [`DRAIN_WITHIN`] once
//! it waits, then cut off (its connection closed): what is usually left is
//! a terminator, and a long-lived stream (the standalone GET, a stalled or
//! hostile upstream's), or a body left for its size (one over a limit),
//! holds nothing for longer and is not read for nothing.
//!
//! Who reads it depends on the lane that sent the request: on the plain
//! lane the connection's own task does, as part of driving the connection
//! (`super::plain`), with no task or timer of its own unless the rest is
//! slow to come; on reqwest's, a task of its own ([`DrainOnDrop`]).

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// How long a left body may wait for the rest of it: an answer's terminator
/// is already on its way; a long-lived stream is cut off.
const DRAIN_WITHIN: Duration = Duration::from_millis(100);
/// How many more frames a left body may yield before it is cut off.
const DRAIN_CHUNKS: usize = 64;
/// How many more bytes a left body may hold: one that says it holds more
/// is cut off at once.
const DRAIN_BYTES: u64 = 64 * 1024;

/// A left body being read to its end.
pub(crate) struct Draining<B> {
    body: B,
    frames: usize,
    bytes: u64,
    /// Started when the body first waits: most ends have come by then.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B: Body + Unpin> Draining<B> {
    pub(crate) fn new(body: B) -> Self {
        Draining {
            body,
            frames: 0,
            bytes: 0,
            deadline: None,
        }
    }

    /// `true` once the body was read to its end; `false` once it failed or
    /// was cut off (too many frames or bytes, too long a wait).
    pub(crate) fn poll_end(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        loop {
            if self.frames == DRAIN_CHUNKS
                || self.bytes.saturating_add(self.body.size_hint().lower()) > DRAIN_BYTES
            {
                return Poll::Ready(false);
            }
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    self.frames += 1;
                    let read = frame.data_ref().map_or(0, bytes::Buf::remaining);
                    self.bytes += u64::try_from(read).unwrap_or(u64::MAX);
                }
                Poll::Ready(Some(Err(_))) => return Poll::Ready(false),
                Poll::Ready(None) => return Poll::Ready(true),
                Poll::Pending => break,
            }
        }
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(DRAIN_WITHIN)));
        deadline.as_mut().poll(cx).map(|()| false)
    }
}

/// A body from reqwest's lane that, dropped before its end, is read to its
/// end by a task of its own (reqwest's pool takes its connection back only
/// then).
pub(crate) struct DrainOnDrop<B: Body + Send + Unpin + 'static> {
    /// `None` once read to its end or failed: nothing left to read.
    body: Option<B>,
}

impl<B: Body + Send + Unpin + 'static> DrainOnDrop<B> {
    pub(crate) fn new(body: B) -> Self {
        DrainOnDrop { body: Some(body) }
    }
}

impl<B> Body for DrainOnDrop<B>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.body = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl<B: Body + Send + Unpin + 'static> Drop for DrainOnDrop<B> {
    fn drop(&mut self) {
        let Some(body) = self.body.take().filter(|body| !body.is_end_stream()) else {
            return;
        };
        // Outside a runtime there is nowhere to read it (and nothing will
        // reuse the connection).
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut draining = Draining::new(body);
        // Read to its end or not, the body is dropped here; only a complete
        // one gives its connection back to the pool.
        runtime.spawn(std::future::poll_fn(move |cx| {
            draining.poll_end(cx).map(drop)
        }));
    }
}

#[cfg(test)]
mod tests {
    use std::{
        convert::Infallible,
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
    };

    use futures::StreamExt;
    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    type Frames = futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>;

    /// A body of frames that counts how many were read, and says it holds
    /// `declared` bytes.
    struct Counted {
        frames: StreamBody<Frames>,
        declared: SizeHint,
    }

    impl Body for Counted {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Pin::new(&mut self.frames).poll_frame(cx)
        }

        fn size_hint(&self) -> SizeHint {
            self.declared
        }
    }

    /// `total` frames of `size` bytes each, counted in `read`.
    fn frames(total: usize, size: usize, read: &Arc<AtomicUsize>) -> Counted {
        let read = read.clone();
        let frames = futures::stream::iter(0..total)
            .map(move |_| {
                read.fetch_add(1, Ordering::SeqCst);
                Ok(Frame::data(Bytes::from(vec![b'x'; size])))
            })
            .boxed();
        Counted {
            frames: StreamBody::new(frames),
            declared: SizeHint::default(),
        }
    }

    fn counted(total: usize, read: &Arc<AtomicUsize>) -> DrainOnDrop<Counted> {
        DrainOnDrop::new(frames(total, 9, read))
    }

    /// Polls `draining` to what it comes to.
    async fn drained(mut draining: Draining<Counted>) -> bool {
        std::future::poll_fn(|cx| draining.poll_end(cx)).await
    }

    #[tokio::test]
    async fn a_left_body_is_read_for_so_many_bytes_at_most() {
        let read = Arc::new(AtomicUsize::new(0));
        let frame = 40 * 1024;
        assert!(!drained(Draining::new(frames(10, frame, &read))).await);
        assert_eq!(read.load(Ordering::SeqCst), 2, "cut off past 64 KiB");
        // One that says it holds more is not read at all.
        let read = Arc::new(AtomicUsize::new(0));
        let mut declared = frames(1, 10, &read);
        declared.declared = SizeHint::with_exact(DRAIN_BYTES + 1);
        assert!(!drained(Draining::new(declared)).await);
        assert_eq!(read.load(Ordering::SeqCst), 0);
        // A small rest is read to its end.
        let read = Arc::new(AtomicUsize::new(0));
        assert!(drained(Draining::new(frames(3, 1024, &read))).await);
        assert_eq!(read.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_body_dropped_early_is_read_to_its_end_in_the_background() {
        let read = Arc::new(AtomicUsize::new(0));
        let mut body = counted(5, &read);
        assert!(body.frame().await.is_some_and(|frame| frame.is_ok()));
        drop(body);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(read.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn an_endless_left_body_is_cut_off() {
        let read = Arc::new(AtomicUsize::new(0));
        let mut body = counted(usize::MAX, &read);
        assert!(body.frame().await.is_some());
        drop(body);
        tokio::time::sleep(DRAIN_WITHIN * 2).await;
        assert_eq!(read.load(Ordering::SeqCst), 1 + DRAIN_CHUNKS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_left_body_that_waits_is_cut_off_after_its_wait() {
        let pending = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>().boxed();
        let waiting = Counted {
            frames: StreamBody::new(pending),
            declared: SizeHint::default(),
        };
        let waited = tokio::time::Instant::now();
        let read = drained(Draining::new(waiting)).await;
        assert!(!read, "a body that never ends is cut off");
        assert_eq!(waited.elapsed(), DRAIN_WITHIN);
    }
}
