//! A ready connection's bypass: a request that finds it open and a free slot
//! runs without a message to the connection's actor (docs/DECISIONS.md
//! #188). The actor is its one writer: it opens it with its session's lease
//! while it is `Ready` and holds no `Retry-After` window, and closes it in
//! the same step as anything that changes either (`transition`, a hold). A
//! request that finds it closed, or every slot taken, goes through the
//! mailbox as before (queued, refused, or the session built there), so a
//! parked, retired, stopped or held connection never sees a request's I/O
//! through the bypass. The lock is held for a few writes, never across a wait;
//! admission takes the slot under it, so a request is either in before the
//! bypass closed or refused after.

use std::{
    sync::{Arc, Mutex, PoisonError},
    thread::ThreadId,
};

use actix::Addr;

use super::{
    ConnectionActor, Lease,
    admission::Admission,
    lifecycle::LeaseAttempt,
    messages::{Forward, Run},
    operation::Parts,
    stats::SharedHistory,
};

/// The bypass of one connection's actor; clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bypass(Arc<Mutex<Option<Open>>>);

/// What a request needs to run that the actor would have given it.
#[derive(Debug)]
pub(super) struct Open {
    /// The actor's thread, where its operations run (in the order the
    /// upstream's messages arrive), each a task of the actors' set: a
    /// request from another thread (the gateway's `network` thread on a
    /// machine of more than two cores), or from a task outside that set
    /// (`beside::in_actors_set`), goes through the mailbox.
    pub(super) thread: ThreadId,
    pub(super) lease: Lease,
    pub(super) parts: Parts,
    pub(super) admission: Admission,
    pub(super) history: SharedHistory,
}

impl Bypass {
    pub(super) fn open(&self, open: Open) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(open);
    }

    pub(super) fn close(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// `forward`'s run, its slot taken, when the bypass is open and a slot is
    /// free; else `forward` back, for the actor's mailbox.
    // Moved back once, when the bypass is closed: boxing it would cost every
    // request an allocation.
    #[allow(clippy::result_large_err)]
    pub(crate) fn enter(
        &self,
        forward: Forward,
        actor: &Arc<Addr<ConnectionActor>>,
    ) -> Result<(Run, bool), Forward> {
        let open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(open) = open.as_ref().filter(|open| {
            open.thread == std::thread::current().id() && crate::beside::in_actors_set()
        }) else {
            return Err(forward);
        };
        if !open.admission.admit_free() {
            return Err(forward);
        }
        // In flight: it shows, as when the actor admits it.
        open.history.moved();
        let Forward {
            request,
            context,
            pass_errors,
        } = forward;
        let run = Run::new(
            (open.parts.clone(), actor.clone()),
            (request, context),
            (Some(LeaseAttempt::Ready(open.lease.clone())), None),
            (open.admission.clone(), open.history.clone()),
        );
        Ok((run, pass_errors))
    }
}
