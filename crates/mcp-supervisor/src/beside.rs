//! Where a long-lived I/O task runs: beside the actors.

/// Spawns `task` on this thread's actix arbiter when it has one (the
/// actors' thread): it runs on their task set, and a hand-off between it and
/// an actor or a session is a local wake. From a task outside that set (the
/// runtime's own, which a plain `tokio::spawn` makes) every hand-off goes
/// through a locked queue and costs the scheduler an extra look at the
/// driver: about 1,300 instructions a request for each such task on its
/// way (docs/DECISIONS.md #185). A thread without an arbiter (the `network`
/// thread, a plain tokio runtime) spawns it on its runtime.
pub(crate) fn spawn<F>(task: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match actix_rt::Arbiter::try_current() {
        // A stopped arbiter drops it: the supervisor is stopping.
        Some(arbiter) => {
            arbiter.spawn(BESIDE.scope((), task));
        }
        None => {
            tokio::spawn(task);
        }
    }
}

tokio::task_local! {
    /// Set for the tasks [`spawn`] runs on an arbiter.
    static BESIDE: ();
}

/// Whether the running task is one [`spawn`] runs on this thread's arbiter:
/// a task of the actors' set, which can start tasks of its own there
/// (`actix_rt::spawn`). A task the runtime runs (a plain `tokio::spawn`,
/// rmcp's) is not, even on the actors' thread.
pub(crate) fn in_actors_set() -> bool {
    BESIDE.try_with(|()| ()).is_ok()
}
