//! How the gateway frames an answer: as plain JSON when nothing comes
//! before it, else as an event stream (docs/DECISIONS.md #71). The one
//! framer for both of the gateway's paths:
//!
//! - the direct path's answers ([`direct`]): JSON when the answer comes
//!   first, else the messages before it, keep-alives, then the answer, each
//!   an event written by `crate::codec::reply::event`;
//! - rmcp's ([`as_json_when_answered`]): rmcp's server answers every
//!   request of a session with an SSE stream (a priming event, then the
//!   messages, then the end of the stream, each written to the socket on
//!   its own). When the first message on that stream is the request's
//!   answer (nothing came before it: no progress, no request to the
//!   client), that message goes alone as `application/json` with a
//!   `Content-Length`, the bytes rmcp wrote passed through unchanged. When
//!   something else comes first, or a keep-alive says the request is a long
//!   one, the response stays the stream it was, nothing lost: the events
//!   read so far, then the rest.

use std::{
    collections::VecDeque,
    future::Future,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::Poll,
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::BytesMut;
use futures::{Stream, StreamExt, future::BoxFuture, task::AtomicWaker};
use rmcp::model::ServerJsonRpcMessage;
use serde::de::IgnoredAny;

use crate::{codec::reply, heavy, tool_answer::Message, woken::WhenWoken};

/// `response` (rmcp's answer to one POSTed request) as JSON if its stream
/// starts with the request's answer; otherwise the same stream.
pub(super) async fn as_json_when_answered(response: Response) -> Response {
    if response.status() != StatusCode::OK || !is_event_stream(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut read = BytesMut::new();
    let mut scanned = 0;
    loop {
        // Every complete event read so far, in order.
        while let Some(end) = event_end(&read[scanned..]) {
            let event = &read[scanned..scanned + end];
            scanned += end;
            match Event::parse(event) {
                Event::Empty => continue,
                Event::Message(data) if is_answer(&data) => {
                    // The rest of the stream (its end) is not needed; rmcp
                    // is done with it once the answer is written.
                    parts.headers.insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    parts.headers.remove(header::CACHE_CONTROL);
                    parts.headers.remove("x-accel-buffering");
                    return Response::from_parts(parts, Body::from(data));
                }
                Event::Message(_) | Event::KeepAlive => {
                    return Response::from_parts(parts, resumed(read.freeze(), stream));
                }
            }
        }
        match stream.next().await {
            Some(Ok(chunk)) => read.extend_from_slice(&chunk),
            // Ended (or failed) before any message: what there was, as it was.
            Some(Err(_)) | None => {
                return Response::from_parts(parts, Body::from(read.freeze()));
            }
        }
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"))
}

/// The stream again: `read` first, then what is left of `rest`.
fn resumed<S, E>(read: Bytes, rest: S) -> Body
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<axum::BoxError> + 'static,
{
    let head = futures::stream::once(async move { Ok::<_, E>(read) });
    Body::from_stream(head.chain(rest))
}

/// The length of the first complete event in `bytes` (through the blank
/// line that ends it), if there is one.
fn event_end(bytes: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for (i, byte) in bytes.iter().enumerate() {
        if *byte == b'\n' {
            let line = &bytes[line_start..i];
            if line.is_empty() || line == b"\r" {
                return Some(i + 1);
            }
            line_start = i + 1;
        }
    }
    None
}

/// One SSE event, as far as this module cares.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    /// No data (rmcp's priming event: an id and a retry delay).
    Empty,
    /// A comment line (a keep-alive): the request is taking its time.
    KeepAlive,
    /// A message: its `data` lines, joined.
    Message(Bytes),
}

impl Event {
    fn parse(event: &[u8]) -> Event {
        let mut data = BytesMut::new();
        let mut lines = 0;
        for line in event.split(|byte| *byte == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.starts_with(b":") {
                return Event::KeepAlive;
            }
            let Some(value) = line.strip_prefix(b"data:") else {
                continue;
            };
            if lines > 0 {
                data.extend_from_slice(b"\n");
            }
            data.extend_from_slice(value.strip_prefix(b" ").unwrap_or(value));
            lines += 1;
        }
        if data.iter().all(u8::is_ascii_whitespace) {
            Event::Empty
        } else {
            Event::Message(data.freeze())
        }
    }
}

/// Whether `message` is a JSON-RPC response or error (an `id` and no
/// `method`), read without building it.
fn is_answer(message: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Shape {
        id: Option<IgnoredAny>,
        method: Option<IgnoredAny>,
    }
    serde_json::from_slice::<Shape>(message)
        .is_ok_and(|shape| shape.id.is_some() && shape.method.is_none())
}

/// SSE keep-alive: a comment, as rmcp sends.
const KEEP_ALIVE: &[u8] = b":\n\n";

/// What a direct call's response writes next.
enum Next {
    /// A message before the answer (progress).
    Before(ServerJsonRpcMessage),
    /// The answer (`None`: cancelled, no answer).
    Answer(Option<Message>),
    /// Nothing for `keep_alive`.
    Idle,
}

/// The messages a direct call writes before its answer (its progress, its
/// log messages), as they come: a queue its answer reads. Not a tokio
/// channel, which allocates a block of 32 messages per call (about 900
/// instructions with its polls, docs/DECISIONS.md #189). The call's senders
/// going wakes nobody: a wake would poll the client's HTTP connection once
/// more per call (#134).
pub(super) struct Before(Arc<Queue>);

/// Where a direct call sends its messages before the answer; refused once
/// the answer is gone.
#[derive(Debug, Clone)]
pub(super) struct BeforeSender(Arc<Queue>);

#[derive(Debug, Default)]
struct Queue {
    messages: Mutex<VecDeque<ServerJsonRpcMessage>>,
    /// The answer's reader, woken by each message.
    reader: AtomicWaker,
    /// The answer was dropped: nothing reads the messages any more.
    gone: AtomicBool,
}

impl Queue {
    fn messages(&self) -> std::sync::MutexGuard<'_, VecDeque<ServerJsonRpcMessage>> {
        self.messages
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Before {
    /// The sender the call's messages go to, and their receiving end.
    pub(super) fn channel() -> (BeforeSender, Before) {
        let queue = Arc::new(Queue::default());
        (BeforeSender(queue.clone()), Before(queue))
    }

    /// The next message, when one comes.
    pub(super) async fn recv(&self) -> ServerJsonRpcMessage {
        std::future::poll_fn(|cx| {
            // Registered before the queue is read: a message sent in
            // between is seen now or wakes the new waker.
            self.0.reader.register(cx.waker());
            match self.0.messages().pop_front() {
                Some(message) => Poll::Ready(message),
                None => Poll::Pending,
            }
        })
        .await
    }

    /// The next message, if one is there.
    pub(super) fn try_recv(&self) -> Option<ServerJsonRpcMessage> {
        self.0.messages().pop_front()
    }
}

impl Drop for Before {
    fn drop(&mut self) {
        self.0.gone.store(true, Ordering::Release);
    }
}

impl BeforeSender {
    /// Queues `message` for the answer; `false` (and dropped) once the
    /// answer is gone.
    pub(super) fn send(&self, message: ServerJsonRpcMessage) -> bool {
        if self.0.gone.load(Ordering::Acquire) {
            return false;
        }
        self.0.messages().push_back(message);
        self.0.reader.wake();
        true
    }
}

struct Pending {
    /// Polled only when woken: hyper polls a request's service whenever
    /// its connection's task wakes, and reading the request's body wakes it
    /// once more; without the gate that poll went down the whole call, to
    /// the connection's task it waits for (docs/DECISIONS.md #138, #189).
    answer: WhenWoken<dyn Future<Output = Option<Message>> + Send>,
    before: Before,
    answered: Option<Option<Message>>,
}

impl Pending {
    /// The next thing to write: messages sent before the answer come first.
    async fn next(&mut self, keep_alive: Option<Duration>) -> Next {
        if self.answered.is_none() {
            let idle = async {
                match keep_alive {
                    Some(every) => tokio::time::sleep(every).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                message = self.before.recv() => return Next::Before(message),
                answer = &mut self.answer => self.answered = Some(answer),
                () = idle => return Next::Idle,
            }
        }
        match self.before.try_recv() {
            Some(message) => Next::Before(message),
            None => Next::Answer(self.answered.take().flatten()),
        }
    }
}

/// The HTTP answer of a direct call: JSON when the answer comes first, within
/// `keep_alive`; else an event stream, as rmcp's: the messages before the
/// answer, keep-alive comments every `keep_alive` while there are none, then
/// the answer. A call with no answer (cancelled) ends its stream there; one
/// cancelled before anything was written gets an empty stream.
pub(super) async fn direct(
    answer: BoxFuture<'static, Option<Message>>,
    before: Before,
    keep_alive: Option<Duration>,
    generation: crate::generation::Generation,
) -> Response {
    let mut pending = Pending {
        answer: WhenWoken::boxed(answer),
        before,
        answered: None,
    };
    let first = match pending.next(keep_alive).await {
        Next::Answer(Some(message)) => {
            let status = generation.status(&message);
            return json_written(message, status).await;
        }
        Next::Answer(None) => return event_stream(Body::empty()),
        first => first,
    };
    let events = futures::stream::unfold(Some((first, pending)), move |state| async move {
        let (now, mut pending) = state?;
        let (bytes, more) = match now {
            Next::Before(message) => (reply::event(&message), true),
            Next::Idle => (Bytes::from_static(KEEP_ALIVE), true),
            Next::Answer(Some(message)) => {
                let json = heavy::encode(message).await.unwrap_or_default();
                (reply::event_of(&json), false)
            }
            Next::Answer(None) => return None,
        };
        let rest = if more {
            Some((pending.next(keep_alive).await, pending))
        } else {
            None
        };
        Some((Ok::<_, std::convert::Infallible>(bytes), rest))
    });
    event_stream(Body::from_stream(events))
}

fn event_stream(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// `message` as a JSON answer with `status`, written (and dropped) off the
/// thread when it is large (`heavy::encode`).
async fn json_written(message: Message, status: StatusCode) -> Response {
    let json = heavy::encode(message).await.unwrap_or_default();
    json_response(json, status)
}

pub(super) fn json(message: &impl crate::heavy::Encode, status: StatusCode) -> Response {
    json_response(reply::encoded(message), status)
}

fn json_response(json: Vec<u8>, status: StatusCode) -> Response {
    // Built in place: axum's conversion of a (status, headers, body) tuple
    // parses the header's name and value and merges a header map per answer.
    let mut response = Response::new(Body::from(json));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
pub(super) mod direct_tests;

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    const PRIMING: &str = "data: \nid: 0/0\nretry: 3000\n\n";
    const ANSWER: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":false}}"#;
    const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;

    fn sse(chunks: Vec<String>) -> Response {
        let stream = futures::stream::iter(
            chunks
                .into_iter()
                .map(|chunk| Ok::<_, std::convert::Infallible>(Bytes::from(chunk))),
        );
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(stream))
            .unwrap()
    }

    /// A response's content type and body.
    pub(in crate::gateway) async fn text(response: Response) -> (String, String) {
        let kind = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (kind, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn an_answer_first_is_sent_as_json_whatever_the_chunking() {
        let whole = format!("{PRIMING}data: {ANSWER}\nid: 1/0\n\n");
        for split in [0, 5, PRIMING.len(), PRIMING.len() + 9, whole.len() - 1] {
            let chunks = vec![whole[..split].to_owned(), whole[split..].to_owned()];
            let answered = as_json_when_answered(sse(chunks)).await;
            assert!(answered.headers().get(header::CACHE_CONTROL).is_none());
            assert_eq!(
                text(answered).await,
                ("application/json".into(), ANSWER.into()),
                "split at {split}"
            );
        }
    }

    #[tokio::test]
    async fn anything_before_the_answer_keeps_the_whole_stream() {
        let progress = format!("data: {PROGRESS}\nid: 1/0\n\n");
        let answer = format!("data: {ANSWER}\nid: 2/0\n\n");
        let keep_alive = ":\n\n".to_owned();
        for first in [progress, keep_alive] {
            let chunks = vec![PRIMING.to_owned(), first.clone(), answer.clone()];
            let kept = as_json_when_answered(sse(chunks)).await;
            assert_eq!(
                text(kept).await,
                (
                    "text/event-stream".into(),
                    format!("{PRIMING}{first}{answer}")
                )
            );
        }
    }

    #[tokio::test]
    async fn a_stream_that_ends_without_a_message_is_kept_as_it_was() {
        let kept = as_json_when_answered(sse(vec![PRIMING.to_owned()])).await;
        assert_eq!(
            text(kept).await,
            ("text/event-stream".into(), PRIMING.to_owned())
        );
    }

    #[test]
    fn events_are_split_at_blank_lines_and_read_by_their_fields() {
        assert_eq!(event_end(b"data: x\n\nrest"), Some(9));
        assert_eq!(event_end(b"data: x\r\n\r\n"), Some(11));
        assert_eq!(event_end(b"data: x\n"), None);
        assert_eq!(Event::parse(PRIMING.as_bytes()), Event::Empty);
        assert_eq!(Event::parse(b": keep-alive\n\n"), Event::KeepAlive);
        assert_eq!(
            Event::parse(b"data: {\"a\":\ndata: 1}\n\n"),
            Event::Message(Bytes::from_static(b"{\"a\":\n1}"))
        );
        assert!(is_answer(ANSWER.as_bytes()));
        assert!(is_answer(
            br#"{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}"#
        ));
        assert!(!is_answer(PROGRESS.as_bytes()));
        assert!(!is_answer(
            br#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}"#
        ));
    }
}
