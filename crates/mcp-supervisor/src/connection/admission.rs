//! Admission of calls: at most `max_concurrent` in flight, then a bounded FIFO
//! queue, beyond which a call is answered `Busy` at once. The actor admits
//! (in its mailbox); a request frees its slot itself when it ends (its
//! `SlotGuard`), with no message to the actor (docs/DECISIONS.md #187). The
//! lock is held for a few integer writes, never across a wait.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::oneshot;

/// What happened to a call asking to start.
#[derive(Debug)]
pub(crate) enum Admit {
    /// Start now; a slot is held until `release`.
    Now,
    /// Wait for the receiver to fire (a slot was handed over), then start.
    Queued(oneshot::Receiver<()>),
    /// The queue is full.
    Busy { queued: usize },
}

/// The connection's slots, shared by its actor and its requests' guards.
#[derive(Debug, Clone)]
pub(crate) struct Admission(Arc<Mutex<Slots>>);

#[derive(Debug)]
struct Slots {
    max_in_flight: usize,
    max_queued: usize,
    in_flight: usize,
    queue: VecDeque<oneshot::Sender<()>>,
    /// Highest `in_flight` ever seen (a sanity figure for tests and metrics).
    peak: usize,
}

impl Slots {
    fn take_free(&mut self) -> bool {
        if self.in_flight >= self.max_in_flight {
            return false;
        }
        self.in_flight += 1;
        self.peak = self.peak.max(self.in_flight);
        true
    }
}

impl Admission {
    pub(crate) fn new(max_in_flight: usize, max_queued: usize) -> Self {
        Admission(Arc::new(Mutex::new(Slots {
            max_in_flight: max_in_flight.max(1),
            max_queued,
            in_flight: 0,
            queue: VecDeque::new(),
            peak: 0,
        })))
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn admit(&self) -> Admit {
        let mut slots = self.slots();
        slots.queue.retain(|waiter| !waiter.is_closed());
        if slots.take_free() {
            return Admit::Now;
        }
        if slots.queue.len() >= slots.max_queued {
            return Admit::Busy {
                queued: slots.queue.len(),
            };
        }
        let (tx, rx) = oneshot::channel();
        slots.queue.push_back(tx);
        Admit::Queued(rx)
    }

    /// A slot taken when one is free (`Admit::Now`); `false` leaves the
    /// request to [`Admission::admit`] (queued or busy).
    pub(crate) fn admit_free(&self) -> bool {
        self.slots().take_free()
    }

    /// A call finished: hand its slot to the next caller still waiting.
    pub(crate) fn release(&self) {
        let mut slots = self.slots();
        while let Some(next) = slots.queue.pop_front() {
            if next.send(()).is_ok() {
                return; // the slot moves to that caller; in_flight is unchanged
            }
        }
        slots.in_flight = slots.in_flight.saturating_sub(1);
    }

    /// Drops every queued caller (they see their receiver close).
    pub(crate) fn clear_queue(&self) {
        self.slots().queue.clear();
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.slots().in_flight
    }

    pub(crate) fn queued(&self) -> usize {
        self.slots()
            .queue
            .iter()
            .filter(|waiter| !waiter.is_closed())
            .count()
    }

    pub(crate) fn peak(&self) -> usize {
        self.slots().peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_limit_then_queues_then_is_busy() {
        let admission = Admission::new(2, 1);
        assert!(matches!(admission.admit(), Admit::Now));
        assert!(matches!(admission.admit(), Admit::Now));
        let Admit::Queued(mut rx) = admission.admit() else {
            panic!("queued")
        };
        assert!(matches!(admission.admit(), Admit::Busy { queued: 1 }));
        admission.release();
        assert!(rx.try_recv().is_ok(), "the slot was handed over");
        assert_eq!(admission.in_flight(), 2);
        admission.release();
        admission.release();
        assert_eq!(admission.in_flight(), 0);
        assert_eq!(admission.peak(), 2);
    }

    #[test]
    fn a_caller_that_gave_up_does_not_hold_a_queue_place_or_a_slot() {
        let admission = Admission::new(1, 1);
        assert!(matches!(admission.admit(), Admit::Now));
        let Admit::Queued(rx) = admission.admit() else {
            panic!("queued")
        };
        drop(rx);
        let Admit::Queued(_rx2) = admission.admit() else {
            panic!("place freed")
        };
        admission.clear_queue();
        admission.release();
        assert_eq!(admission.in_flight(), 0);
    }
}
