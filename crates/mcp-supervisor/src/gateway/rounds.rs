//! The gateway's multi-round bookkeeping (`mrtr.rs`): the sealed
//! `requestState`s it hands out and the requests still running upstream
//! while their client answers. Owned by [`GatewayState`](super::state::GatewayState);
//! knows nothing of it.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData,
    model::{RequestStateCodec, SealOptions},
};
use serde::{Deserialize, Serialize};
use tokio::{
    sync::{mpsc, oneshot},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::downstream::Question;
use crate::Forwarded;

/// How long a `requestState` (and a request waiting for a client's answers)
/// stays valid.
const STATE_TTL: Duration = Duration::from_secs(600);

/// Requests waiting for a client's answers, at most; the oldest is given up.
const MAX_WAITING: usize = 4096;

/// What a `requestState` of ours holds.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "k")]
pub(super) enum Sealed {
    /// The upstream's own state (2026 upstream), to hand back on the retry.
    #[serde(rename = "u")]
    Upstream {
        #[serde(rename = "s")]
        state: Option<String>,
    },
    /// A request still running upstream, waiting for the client's answers.
    #[serde(rename = "w")]
    Waiting { id: u64 },
}

/// The gateway's multi-round bookkeeping.
pub(super) struct Rounds {
    codec: RequestStateCodec,
    waiting: Mutex<HashMap<u64, Waiting>>,
    next: AtomicU64,
}

impl std::fmt::Debug for Rounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rounds").finish_non_exhaustive()
    }
}

impl Default for Rounds {
    fn default() -> Self {
        Rounds {
            codec: RequestStateCodec::new_unchecked(rand::random::<[u8; 32]>().to_vec()),
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }
}

/// A request still running upstream after its client got `input_required`.
pub(super) struct Waiting {
    pub(super) binding: String,
    pub(super) result: oneshot::Receiver<Forwarded>,
    pub(super) questions: mpsc::UnboundedReceiver<Question>,
    /// Questions the client was asked and has not answered, by key.
    pub(super) asked: BTreeMap<String, Question>,
    pub(super) asked_so_far: u64,
    /// Cancels the upstream request.
    pub(super) cancel: CancellationToken,
    pub(super) since: Instant,
}

impl Rounds {
    pub(super) fn seal(&self, sealed: &Sealed, binding: &str) -> Result<String, ErrorData> {
        let options = SealOptions::new()
            .associated_data(binding.as_bytes())
            .ttl(STATE_TTL);
        self.codec
            .seal_json_with(sealed, &options)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    pub(super) fn open(&self, state: &str, binding: &str) -> Result<Sealed, ErrorData> {
        self.codec
            .open_with(state, binding.as_bytes())
            .ok()
            .and_then(|payload| serde_json::from_slice(&payload).ok())
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    "requestState is not valid for this request (tampered with, expired, or \
                     from another request)",
                    None,
                )
            })
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `waiting` for the client's retry; answers its id.
    pub(super) fn keep(&self, waiting: Waiting) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut all = self.lock();
        all.retain(|_, old| {
            let keep = old.since.elapsed() < STATE_TTL;
            if !keep {
                old.cancel.cancel();
            }
            keep
        });
        if all.len() >= MAX_WAITING
            && let Some(oldest) = all.iter().min_by_key(|(_, w)| w.since).map(|(id, _)| *id)
            && let Some(old) = all.remove(&oldest)
        {
            old.cancel.cancel();
        }
        all.insert(id, waiting);
        id
    }

    pub(super) fn take(&self, id: u64) -> Option<Waiting> {
        self.lock().remove(&id)
    }

    /// Puts `waiting` back under `id` (its retry was refused).
    pub(super) fn keep_as(&self, id: u64, waiting: Waiting) {
        self.lock().insert(id, waiting);
    }
}
