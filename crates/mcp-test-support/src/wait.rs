//! `eventually`-style waits for conditions that become true asynchronously.

use std::{future::Future, time::Duration};

/// How often the conditions are polled.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Polls `check` until it returns `true` (→ `true`) or `timeout` passes
/// (→ `false`). Uses tokio time, so it also works under paused time.
pub async fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    wait_until_async(timeout, || std::future::ready(check())).await
}

/// Like [`wait_until`] with an async condition.
pub async fn wait_until_async<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Asserts that a condition becomes true within a timeout (default 10 s,
/// generous for slow CI machines). Must be used in an async context.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use mcp_test_support::eventually;
///
/// let hits = AtomicU32::new(0);
/// hits.fetch_add(2, Ordering::SeqCst);
/// eventually!(hits.load(Ordering::SeqCst) == 2);
/// eventually!(hits.load(Ordering::SeqCst) >= 1, std::time::Duration::from_secs(2));
/// # }
/// ```
#[macro_export]
macro_rules! eventually {
    ($cond:expr $(,)?) => {
        $crate::eventually!($cond, ::std::time::Duration::from_secs(10))
    };
    ($cond:expr, $timeout:expr $(,)?) => {{
        let timeout: ::std::time::Duration = $timeout;
        assert!(
            $crate::wait_until(timeout, || $cond).await,
            "condition still false after {:?}: {}",
            timeout,
            stringify!($cond),
        );
    }};
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    };

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_until_true_or_timeout() {
        let polls = Arc::new(AtomicU32::new(0));
        let counted = polls.clone();
        assert!(
            wait_until(Duration::from_secs(1), move || {
                counted.fetch_add(1, Ordering::SeqCst) >= 3
            })
            .await
        );
        assert!(!wait_until(Duration::from_millis(50), || false).await);
        let n = AtomicU32::new(0);
        crate::eventually!(n.fetch_add(1, Ordering::SeqCst) == 2);
    }
}
