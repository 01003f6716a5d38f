//! Large payloads are copied, encoded, parsed and dropped on a blocking
//! thread. Every connection's session runs on the caller's thread (in
//! `serve`, the actors' thread, docs/ARCHITECTURE.md "Threads"), so a
//! request with megabytes of arguments would otherwise hold up every other
//! connection and mailbox while it is cloned for a retry, encoded for the
//! upstream, or freed (docs/DECISIONS.md #75).

use std::future::Ready;

use futures::{
    FutureExt,
    future::{BoxFuture, Either},
};

/// A message that encodes to this many bytes or more is encoded (and a body
/// this long parsed) off the thread; a smaller one costs what it did.
pub(crate) const HEAVY_BYTES: usize = 256 * 1024;

/// Runs `work` on a blocking thread of the current runtime; `None` if the
/// runtime shut down before it ran. A panic in `work` goes on in the caller.
pub(crate) async fn off_thread<R: Send + 'static>(
    work: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => Some(done),
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => None,
    }
}

/// Drops `value` on a blocking thread (freeing a large one takes as long as
/// building it), or here when there is no runtime.
pub(crate) fn drop_off_thread<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || drop(value))),
        Err(_) => drop(value),
    }
}

/// A message that writes itself as JSON.
pub(crate) trait Encode {
    fn encode<W: std::io::Write>(&self, writer: &mut W) -> serde_json::Result<()>;

    /// About how long its JSON is, when it knows (a heavy one's buffer is
    /// made that large at once, not grown by doubling and copying).
    fn size_hint(&self) -> usize {
        0
    }
}

/// A message's JSON: ready, or being written on a blocking thread.
pub(crate) type Encoding = Either<Ready<Encoded>, BoxFuture<'static, Encoded>>;

/// What encoding a message gives.
pub(crate) type Encoded = serde_json::Result<Vec<u8>>;

/// `message` as JSON: here if it is under [`HEAVY_BYTES`], else on a
/// blocking thread (where it is also dropped).
///
/// Encoded when called; only a heavy message's encoding is a future of its
/// own (boxed). As an `async fn` the future held the message for the
/// heavy case, a thousand bytes carried and moved by every request's
/// future (docs/DECISIONS.md #147).
pub(crate) fn encode<T: Encode + Send + 'static>(message: T) -> Encoding {
    // Room for a usual request with its 2026-07-28 `_meta` (growing it
    // costs a copy and a second allocation).
    let mut capped = Capped(Vec::with_capacity(1024));
    match message.encode(&mut capped) {
        Ok(()) => Either::Left(std::future::ready(Ok(capped.0))),
        Err(error) if error.is_io() => Either::Right(
            async move {
                off_thread(move || {
                    let mut whole = Vec::with_capacity(message.size_hint());
                    message.encode(&mut whole).map(|()| whole)
                })
                .await
                .unwrap_or_else(|| Err(shutting_down()))
            }
            .boxed(),
        ),
        Err(error) => Either::Left(std::future::ready(Err(error))),
    }
}

/// `body` read by `read`: here if it is under [`HEAVY_BYTES`], else on a
/// blocking thread.
pub(crate) async fn decode<T: Send + 'static>(
    body: Vec<u8>,
    read: fn(&[u8]) -> serde_json::Result<T>,
) -> serde_json::Result<T> {
    if body.len() < HEAVY_BYTES {
        return read(&body);
    }
    off_thread(move || read(&body))
        .await
        .unwrap_or_else(|| Err(shutting_down()))
}

fn shutting_down() -> serde_json::Error {
    serde_json::Error::io(std::io::Error::other("the runtime is shutting down"))
}

/// A buffer that refuses to grow to [`HEAVY_BYTES`].
struct Capped(Vec<u8>);

// Inlined into the serializer, the many one- and two-byte writes of a
// message (quotes, colons, commas) become stores instead of `memcpy` calls.
impl std::io::Write for Capped {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes).map(|()| bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.0.len() + bytes.len() >= HEAVY_BYTES {
            return Err(std::io::Error::other("heavy"));
        }
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::thread::ThreadId;

    use serde::{Serialize, Serializer};
    use serde_json::{Value, json};

    use super::*;

    fn values(count: usize) -> Value {
        json!({ "pad": (0..count - 2).collect::<Vec<_>>() })
    }

    /// Serializes as a string and records the thread it was serialized on.
    struct Witness(std::sync::Arc<std::sync::Mutex<Option<ThreadId>>>, usize);

    impl Serialize for Witness {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            *self.0.lock().unwrap() = Some(std::thread::current().id());
            serializer.serialize_str(&"x".repeat(self.1))
        }
    }

    impl Encode for Witness {
        fn encode<W: std::io::Write>(&self, writer: &mut W) -> serde_json::Result<()> {
            serde_json::to_writer(writer, self)
        }
    }

    async fn encoded_on(len: usize) -> (Vec<u8>, ThreadId) {
        let thread = std::sync::Arc::default();
        let bytes = encode(Witness(std::sync::Arc::clone(&thread), len))
            .await
            .unwrap();
        let on = thread.lock().unwrap().unwrap();
        (bytes, on)
    }

    #[tokio::test]
    async fn a_small_message_is_encoded_here_a_heavy_one_elsewhere() {
        let here = std::thread::current().id();
        let (small, on) = encoded_on(100).await;
        assert_eq!(on, here);
        assert_eq!(small.len(), 102);
        let (heavy, on) = encoded_on(HEAVY_BYTES).await;
        assert_ne!(
            on, here,
            "a heavy message was encoded on the caller's thread"
        );
        assert_eq!(heavy.len(), HEAVY_BYTES + 2, "encoded whole");
    }

    #[tokio::test]
    async fn a_heavy_body_decodes_like_a_small_one() {
        let big = serde_json::to_vec(&values(HEAVY_BYTES)).unwrap();
        assert!(big.len() >= HEAVY_BYTES);
        let json = |body: &[u8]| serde_json::from_slice::<Value>(body);
        let parsed = decode(big, json).await.unwrap();
        assert_eq!(parsed["pad"].as_array().unwrap().len(), HEAVY_BYTES - 2);
        let small = decode(b"{\"a\":1}".to_vec(), json).await.unwrap();
        assert_eq!(small, json!({"a": 1}));
        assert!(decode(vec![b'{'; HEAVY_BYTES], json).await.is_err());
    }

    #[tokio::test]
    async fn work_off_the_thread_runs_elsewhere_and_drops_happen_there() {
        let here = std::thread::current().id();
        let there = off_thread(|| std::thread::current().id()).await.unwrap();
        assert_ne!(there, here);

        struct Dropped(tokio::sync::oneshot::Sender<ThreadId>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                let (sender, _) = tokio::sync::oneshot::channel();
                let sender = std::mem::replace(&mut self.0, sender);
                let _ = sender.send(std::thread::current().id());
            }
        }
        let (sender, dropped_on) = tokio::sync::oneshot::channel();
        drop_off_thread(Dropped(sender));
        assert_ne!(dropped_on.await.unwrap(), here);
    }
}
