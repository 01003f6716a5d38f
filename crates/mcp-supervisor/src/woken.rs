//! A future polled only when it was woken.
//!
//! A future that waits for something rare beside a busy one is polled
//! whenever the busy one is: actix polls every future an actor spawned
//! (`ctx.spawn`) for every message in its mailbox, and a `select!` polls
//! every branch whenever any is woken. A connection's watchers (a
//! session's end, its notifications) and an HTTP connection's ends
//! (shutdown, drain, eviction, its watchdog) were polled with every call,
//! for nothing (docs/DECISIONS.md #138). [`WhenWoken`] polls the future it
//! wraps only after one of that future's own wakers was woken, and answers
//! `Pending` at once otherwise.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, Wake, Waker},
};

use futures::task::AtomicWaker;

/// `future`, polled only when woken (and on its first poll).
pub(crate) struct WhenWoken<F: ?Sized> {
    future: Pin<Box<F>>,
    gate: Arc<Gate>,
    /// Handed to `future`: wakes the gate, which wakes the actor.
    waker: Waker,
}

/// Whether the wrapped future was woken since it was last polled, and the
/// waker of whoever polls the wrapper.
struct Gate {
    woken: AtomicBool,
    outer: AtomicWaker,
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.outer.wake();
    }
}

impl<F: Future> WhenWoken<F> {
    pub(crate) fn new(future: F) -> Self {
        WhenWoken::boxed(Box::pin(future))
    }
}

impl<F: Future + ?Sized> WhenWoken<F> {
    /// An already boxed `future` (one allocation fewer).
    pub(crate) fn boxed(future: Pin<Box<F>>) -> Self {
        let gate = Arc::new(Gate {
            woken: AtomicBool::new(true),
            outer: AtomicWaker::new(),
        });
        WhenWoken {
            future,
            waker: Waker::from(gate.clone()),
            gate,
        }
    }
}

impl<F: Future + ?Sized> Future for WhenWoken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        // Registered before the flag is read: a wake in between is seen
        // now or wakes the new waker.
        this.gate.outer.register(cx.waker());
        if !this.gate.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.future
            .as_mut()
            .poll(&mut Context::from_waker(&this.waker))
    }
}

/// A waker that counts its wakes, for tests of who is woken.
#[cfg(test)]
pub(crate) fn counting_waker() -> (Waker, Arc<std::sync::atomic::AtomicUsize>) {
    struct Count(Arc<std::sync::atomic::AtomicUsize>);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let wakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    (Waker::from(Arc::new(Count(wakes.clone()))), wakes)
}

#[cfg(test)]
mod tests {
    use std::sync::{Mutex, atomic::AtomicUsize};

    use super::*;

    #[test]
    fn the_future_is_polled_only_when_woken() {
        let polls = Arc::new(AtomicUsize::new(0));
        let its_waker = Arc::new(Mutex::new(None::<Waker>));
        let done = Arc::new(AtomicBool::new(false));
        let inner = {
            let (polls, its_waker, done) = (polls.clone(), its_waker.clone(), done.clone());
            std::future::poll_fn(move |cx| {
                polls.fetch_add(1, Ordering::SeqCst);
                *its_waker.lock().unwrap() = Some(cx.waker().clone());
                if done.load(Ordering::SeqCst) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
        };
        let (outer_waker, outer) = counting_waker();
        let mut cx = Context::from_waker(&outer_waker);
        let mut gated = WhenWoken::new(inner);
        let mut gated = Pin::new(&mut gated);

        // Polled the first time, then not again until woken.
        for _ in 0..5 {
            assert!(gated.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1);

        // Its own waker wakes whoever polls the wrapper, and it is polled
        // once more.
        done.store(true, Ordering::SeqCst);
        its_waker.lock().unwrap().take().unwrap().wake();
        assert_eq!(outer.load(Ordering::SeqCst), 1);
        assert!(gated.as_mut().poll(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }
}
