//! How a session's requests reach the upstream: rmcp's client, the direct
//! client (`direct`), or both, by transport and [`Generation`]
//! (docs/ARCHITECTURE.md, "One call, end to end").

use std::sync::Arc;

use rmcp::{RoleClient, service::RunningService};

use super::{SessionHandler, direct::DirectClient};
use crate::{call::UpstreamRequest, generation::Generation};

/// rmcp's client, running the session it opened.
pub(super) type RmcpClient = RunningService<RoleClient, SessionHandler>;

/// The lanes a session sends on; each variant is one valid combination.
#[derive(Debug)]
pub(super) enum Clients {
    /// rmcp's client sends every request: a stdio session, or an HTTP one
    /// not (yet) given a direct client.
    Rmcp(RmcpClient),
    /// A 2025 HTTP session ([`Generation::Sessions`]): its plain tool calls
    /// go on the direct client, everything else on rmcp's, which keeps the
    /// session's stream and reopens a session the upstream forgot.
    Split {
        rmcp: RmcpClient,
        direct: Arc<DirectClient>,
    },
    /// A 2026-07-28 HTTP session ([`Generation::Stateless`]): the direct
    /// client sends everything; rmcp's client was let go once the session
    /// opened.
    Direct(Arc<DirectClient>),
}

impl Clients {
    /// `rmcp` joined by `direct`, as its generation has them. rmcp's client
    /// is handed back when it is let go.
    pub(super) fn with_direct(
        rmcp: RmcpClient,
        direct: Arc<DirectClient>,
    ) -> (Clients, Option<RmcpClient>) {
        match direct.generation() {
            Generation::Sessions => (Clients::Split { rmcp, direct }, None),
            Generation::Stateless => (Clients::Direct(direct), Some(rmcp)),
        }
    }

    /// rmcp's client, while the session has it.
    pub(super) fn rmcp(&self) -> Option<&RmcpClient> {
        match self {
            Clients::Rmcp(rmcp) | Clients::Split { rmcp, .. } => Some(rmcp),
            Clients::Direct(_) => None,
        }
    }

    pub(super) fn rmcp_mut(&mut self) -> Option<&mut RmcpClient> {
        match self {
            Clients::Rmcp(rmcp) | Clients::Split { rmcp, .. } => Some(rmcp),
            Clients::Direct(_) => None,
        }
    }

    /// The direct client, if the session has one.
    pub(super) fn direct(&self) -> Option<&Arc<DirectClient>> {
        match self {
            Clients::Rmcp(_) => None,
            Clients::Split { direct, .. } | Clients::Direct(direct) => Some(direct),
        }
    }

    /// The direct client, when `request` goes on it (else rmcp's client
    /// sends it).
    pub(super) fn direct_for(&self, request: &UpstreamRequest) -> Option<&Arc<DirectClient>> {
        self.direct().filter(|direct| direct.takes(request))
    }
}
