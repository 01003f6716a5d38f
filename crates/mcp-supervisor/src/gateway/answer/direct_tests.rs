//! The direct path's framing ([`direct`](super::direct)): JSON when the
//! answer comes first, else an event stream.

use std::future::Future;

use futures::FutureExt;
use rmcp::model::{ProgressToken, RequestId, ServerResult};

use super::{tests::text as body_of, *};
use crate::generation::Generation;

const SESSIONS: Generation = Generation::Sessions;

pub(in crate::gateway) fn echo(id: i64) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::response(
        ServerResult::CallToolResult(rmcp::model::CallToolResult::success(vec![])),
        RequestId::Number(id),
    )
}

fn progress(step: f64) -> ServerJsonRpcMessage {
    let params =
        rmcp::model::ProgressNotificationParam::new(ProgressToken(RequestId::Number(1)), step);
    let notification = rmcp::model::ProgressNotification::new(params);
    ServerJsonRpcMessage::notification(notification.into())
}

fn line(message: &ServerJsonRpcMessage) -> String {
    format!("data: {}\n\n", serde_json::to_string(message).unwrap())
}

/// The call's own senders going (in its connection's actor, or as its
/// answer ends) wake nobody: a wake would poll the client's connection
/// once more for nothing.
#[test]
fn the_calls_senders_going_wake_nobody() {
    let (waker, wakes) = crate::woken::counting_waker();
    let (sender, before) = Before::channel();
    let in_the_actor = sender.clone();
    let mut pending = Pending {
        answer: crate::woken::WhenWoken::boxed(std::future::pending().boxed()),
        before,
        answered: None,
    };
    let mut next = std::pin::pin!(pending.next(None));
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(next.as_mut().poll(&mut cx).is_pending());
    drop(in_the_actor);
    drop(sender);
    assert_eq!(wakes.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// The call is polled only when something it waits for woke it: hyper
/// polls the request's service again whenever the client's connection
/// wakes (reading the request's body wakes it once more), and each such
/// poll went down the whole call.
#[test]
fn the_call_is_polled_only_when_it_was_woken() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (waker, _) = crate::woken::counting_waker();
    let polls = std::sync::Arc::new(AtomicUsize::new(0));
    let call = {
        let polls = polls.clone();
        std::future::poll_fn(move |_| {
            polls.fetch_add(1, Ordering::SeqCst);
            std::task::Poll::<Option<Message>>::Pending
        })
    };
    let mut pending = Pending {
        answer: crate::woken::WhenWoken::boxed(call.boxed()),
        before: Before::channel().1,
        answered: None,
    };
    let mut cx = std::task::Context::from_waker(&waker);
    for _ in 0..3 {
        let next = std::pin::pin!(pending.next(None));
        assert!(next.poll(&mut cx).is_pending());
    }
    assert_eq!(polls.load(Ordering::SeqCst), 1);
}

/// A call answered first, within the keep-alive interval, is plain JSON;
/// one with progress before its answer, or a longer one, is an event
/// stream: the progress, keep-alives while nothing comes, then the
/// answer; one without an answer (cancelled) is an empty stream.
#[tokio::test(start_paused = true)]
async fn answers_are_json_unless_something_comes_first() {
    let every = Some(Duration::from_secs(15));
    let nothing_before = || Before::channel().1;
    let quick = direct(
        async { Some(echo(1).into()) }.boxed(),
        nothing_before(),
        every,
        SESSIONS,
    )
    .await;
    let (kind, body) = body_of(quick).await;
    assert_eq!(kind, "application/json");
    assert_eq!(body, serde_json::to_string(&echo(1)).unwrap());

    let long = async {
        tokio::time::sleep(Duration::from_secs(40)).await;
        Some(echo(2).into())
    };
    let (kind, body) = body_of(direct(long.boxed(), nothing_before(), every, SESSIONS).await).await;
    assert_eq!(kind, "text/event-stream");
    // At 15 and 30 seconds, then the answer at 40.
    assert_eq!(body, format!(":\n\n:\n\n{}", line(&echo(2))));

    let (before, messages) = Before::channel();
    let with_progress = async move {
        assert!(before.send(progress(0.0)));
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(before.send(progress(50.0)));
        Some(echo(3).into())
    };
    let (kind, body) =
        body_of(direct(with_progress.boxed(), messages, every, SESSIONS).await).await;
    assert_eq!(kind, "text/event-stream");
    let expected = [
        line(&progress(0.0)),
        ":\n\n".to_owned(),
        line(&progress(50.0)),
        line(&echo(3)),
    ];
    assert_eq!(body, expected.concat());

    let cancelled = direct(async { None }.boxed(), nothing_before(), every, SESSIONS).await;
    assert_eq!(
        body_of(cancelled).await,
        ("text/event-stream".to_owned(), String::new())
    );
}
