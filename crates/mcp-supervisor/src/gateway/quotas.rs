//! The `[[limits]]` at work: each caller's calls a minute and calls at
//! once (docs/SECURITY.md, "Limits").
//!
//! A caller is its principal (`user:…`, `client:…`); callers whose
//! credentials name nobody (the shared bearer, no credentials) share one
//! budget per limit. Calls a minute are a bucket that holds a minute's
//! calls and refills evenly; calls at once, a count. In a fleet each node
//! keeps its share, the limit divided by the nodes alive (as the fleet's
//! heartbeats tell, asked every [`SHARE_EVERY`]): a call costs no Redis
//! command, and a caller whose calls spread over the nodes evenly gets the
//! whole limit, one whose calls all reach one node that node's share.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use foldhash::HashMap;
use tokio::time::Instant;

use crate::access::{Caller, Limit, Limits};

/// How often a fleet node asks how many nodes are alive.
pub(super) const SHARE_EVERY: Duration = Duration::from_secs(5);

/// Budgets kept at most; past that, the full and idle ones are forgotten.
const KEPT: usize = 65_536;

/// The limits, and each caller's budget under them.
#[derive(Debug, Default)]
pub(super) struct Quotas {
    limits: Limits,
    /// The nodes sharing each limit (this one included; 1 alone).
    nodes: AtomicU32,
    budgets: Mutex<HashMap<(usize, Arc<str>), Budget>>,
}

#[derive(Debug)]
struct Budget {
    /// Calls that may start now (a minute's worth at most).
    tokens: f64,
    refilled: Instant,
    in_progress: u32,
}

/// Why a call may not start now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Over {
    /// `limit` calls a minute: the next may start in `retry_in`.
    PerMinute { limit: u32, retry_in: Duration },
    /// `limit` calls at once are in progress.
    AtOnce { limit: u32 },
}

impl Over {
    /// What the caller is told: the limit, and when to try again.
    pub(super) fn message(self, who: &str) -> String {
        match self {
            Over::PerMinute { limit, retry_in } => format!(
                "Too many calls: {who} may make {limit} calls a minute through this gateway. \
                 Retry in {:.1} s.",
                retry_in.as_secs_f64()
            ),
            Over::AtOnce { limit } => format!(
                "Too many calls at once: {who} may have {limit} calls in progress through this \
                 gateway. Retry when one has ended."
            ),
        }
    }

    /// When to try again (`None`: when a call in progress ends).
    pub(super) fn retry_in(self) -> Option<Duration> {
        match self {
            Over::PerMinute { retry_in, .. } => Some(retry_in),
            Over::AtOnce { .. } => None,
        }
    }
}

/// A call started under a caller's limit: it counts as in progress until
/// dropped.
#[derive(Debug)]
pub(super) struct Started {
    quotas: Arc<Quotas>,
    key: (usize, Arc<str>),
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(budget) = self.quotas.budgets().get_mut(&self.key) {
            budget.in_progress = budget.in_progress.saturating_sub(1);
        }
    }
}

impl Quotas {
    pub(super) fn new(limits: Limits) -> Self {
        Quotas {
            limits,
            nodes: AtomicU32::new(1),
            budgets: Mutex::default(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// Sets how many nodes share each limit (at least this one).
    pub(super) fn set_nodes(&self, nodes: u32) {
        self.nodes.store(nodes.max(1), Ordering::Relaxed);
    }

    /// Starts a call of `caller` if its limit allows one now; `None` when
    /// no limit is for it.
    pub(super) fn start(self: &Arc<Self>, caller: &Caller) -> Result<Option<Started>, Over> {
        let Some((index, limit)) = self.limits.of(caller) else {
            return Ok(None);
        };
        let who: Arc<str> = match caller.principal() {
            Some(principal) => principal.into(),
            None => Arc::from(""),
        };
        let nodes = self.nodes.load(Ordering::Relaxed);
        let now = Instant::now();
        let key = (index, who);
        let mut budgets = self.budgets();
        if budgets.len() >= KEPT {
            budgets.retain(|(index, _), budget| {
                budget.in_progress > 0 || !self.is_full(*index, budget, now, nodes)
            });
        }
        let budget = budgets.entry(key.clone()).or_insert_with(|| Budget {
            tokens: f64::from(share(limit.per_minute.unwrap_or(0), nodes)),
            refilled: now,
            in_progress: 0,
        });
        if let Some(at_once) = limit.at_once {
            let at_once = share(at_once, nodes);
            if budget.in_progress >= at_once {
                return Err(Over::AtOnce { limit: at_once });
            }
        }
        if let Some(per_minute) = limit.per_minute {
            let per_minute = share(per_minute, nodes);
            refill(budget, per_minute, now);
            if budget.tokens < 1.0 {
                let per_second = f64::from(per_minute) / 60.0;
                let retry_in = Duration::from_secs_f64((1.0 - budget.tokens) / per_second);
                return Err(Over::PerMinute {
                    limit: per_minute,
                    retry_in,
                });
            }
            budget.tokens -= 1.0;
        }
        budget.in_progress += 1;
        drop(budgets);
        Ok(Some(Started {
            quotas: self.clone(),
            key,
        }))
    }

    fn is_full(&self, index: usize, budget: &Budget, now: Instant, nodes: u32) -> bool {
        let Some(Limit {
            per_minute: Some(per_minute),
            ..
        }) = self.limits.get(index)
        else {
            return true;
        };
        let per_minute = share(*per_minute, nodes);
        let elapsed = now.saturating_duration_since(budget.refilled).as_secs_f64();
        budget.tokens + elapsed * f64::from(per_minute) / 60.0 >= f64::from(per_minute)
    }

    fn budgets(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, Arc<str>), Budget>> {
        self.budgets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// This node's share of `limit` among `nodes` (at least 1).
fn share(limit: u32, nodes: u32) -> u32 {
    (limit / nodes.max(1)).max(1)
}

/// Refills `budget` for the time since it was last, up to a minute's calls.
fn refill(budget: &mut Budget, per_minute: u32, now: Instant) {
    let elapsed = now.saturating_duration_since(budget.refilled).as_secs_f64();
    budget.tokens =
        (budget.tokens + elapsed * f64::from(per_minute) / 60.0).min(f64::from(per_minute));
    budget.refilled = now;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{Via, Who};

    fn caller(client: &str) -> Caller {
        Caller {
            client: Some(client.to_owned()),
            ..Caller::anonymous(Via::Key)
        }
    }

    fn quotas(per_minute: Option<u32>, at_once: Option<u32>) -> Arc<Quotas> {
        Arc::new(Quotas::new(Limits::new(vec![Limit {
            who: vec![Who::Client("ci".into())],
            per_minute,
            at_once,
        }])))
    }

    #[tokio::test(start_paused = true)]
    async fn a_minutes_calls_then_one_per_refill_with_the_wait_said() {
        let quotas = quotas(Some(60), None);
        let ci = caller("ci");
        for _ in 0..60 {
            assert!(quotas.start(&ci).unwrap().is_some());
        }
        let Err(Over::PerMinute { limit, retry_in }) = quotas.start(&ci) else {
            panic!("over the limit")
        };
        assert_eq!(limit, 60);
        assert!((retry_in.as_secs_f64() - 1.0).abs() < 0.01, "{retry_in:?}");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(quotas.start(&ci).is_ok());
        assert!(quotas.start(&ci).is_err());
        // Another caller, and one no limit is for, are not held back.
        assert!(quotas.start(&caller("other")).unwrap().is_none());
        let message = Over::PerMinute { limit, retry_in }.message("client:ci");
        assert!(message.contains("60 calls a minute") && message.contains("Retry in 1.0 s"));
    }

    #[tokio::test(start_paused = true)]
    async fn calls_at_once_count_until_they_end() {
        let quotas = quotas(None, Some(2));
        let ci = caller("ci");
        let first = quotas.start(&ci).unwrap();
        let _second = quotas.start(&ci).unwrap();
        assert_eq!(quotas.start(&ci).unwrap_err(), Over::AtOnce { limit: 2 });
        drop(first);
        assert!(quotas.start(&ci).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn in_a_fleet_each_node_keeps_its_share() {
        let quotas = quotas(Some(60), Some(4));
        quotas.set_nodes(3);
        let ci = caller("ci");
        let first = quotas.start(&ci).unwrap();
        assert_eq!(quotas.start(&ci).unwrap_err(), Over::AtOnce { limit: 1 });
        drop(first);
        for _ in 0..19 {
            quotas.start(&ci).unwrap();
        }
        assert!(matches!(
            quotas.start(&ci),
            Err(Over::PerMinute { limit: 20, .. })
        ));
    }
}
