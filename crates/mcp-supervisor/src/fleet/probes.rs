//! One prober for the fleet (docs/FLEET.md, "Probes across nodes"): before
//! a node probes a parked connection, it takes the connection's probe
//! lease in the store (`lock:probe:{connection}`, `SET NX PX`), held until
//! its next probe is due; a node that finds the lease taken skips its
//! probe. The result travels as any standing change: a probe that finds
//! the upstream back revives the connection on its node, which tells the
//! fleet (`revived`), and every node revives it.

use std::{fmt, sync::Arc, time::Duration};

use super::store::Store;

/// The probe leases of this node, in the fleet's store.
pub struct ProbeLeases {
    store: Arc<dyn Store>,
    node: String,
}

impl fmt::Debug for ProbeLeases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbeLeases")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl ProbeLeases {
    pub fn new(store: Arc<dyn Store>, node: impl Into<String>) -> Self {
        Self {
            store,
            node: node.into(),
        }
    }

    /// Takes `connection`'s probe lease for `ttl`: `true` when this node
    /// may probe. A store that cannot be reached leaves each node working
    /// alone, so it probes.
    pub async fn take(&self, connection: &str, ttl: Duration) -> bool {
        let ttl = ttl.max(Duration::from_millis(1));
        match self
            .store
            .try_lock(&format!("lock:probe:{connection}"), &self.node, ttl)
            .await
        {
            Ok(taken) => taken,
            Err(error) => {
                tracing::debug!(connection, %error, "probe lease not reachable: probing alone");
                true
            }
        }
    }

    /// Gives `connection`'s probe lease back, if this node still holds it.
    pub async fn release(&self, connection: &str) {
        let key = format!("lock:probe:{connection}");
        if let Err(error) = self.store.unlock(&key, &self.node).await {
            tracing::debug!(connection, %error, "probe lease not released; it expires");
        }
    }
}
