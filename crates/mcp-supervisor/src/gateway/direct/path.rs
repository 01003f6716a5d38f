//! Which POSTs the direct path takes, and its answers to them: the rules of
//! the module doc (`super`) checked in one place. The body's shape is
//! `codec::posted`'s to read, and what a session or a 2026-07-28 request's
//! headers allow is theirs (`DirectSession::takes`, `StatelessCall::takes`),
//! but whether a POST goes direct is decided here alone.

use std::{net::IpAddr, sync::Arc, time::Duration};

use axum::{body::Bytes, http::request::Parts, response::Response};
use rmcp::model::ProtocolVersion;
use tokio_util::sync::CancellationToken;

use super::{PlainCall, StatelessCall};
use crate::{
    codec::{mcp_headers, posted},
    gateway::{
        answer, http::read_body_as, rights::caller_in, sessions::CappedSessions,
        state::GatewayState,
    },
    generation::Generation,
    listener::guard::AllowedHosts,
};

/// The direct path, as the gateway's POST handler runs it.
pub(in crate::gateway) struct DirectPath {
    pub(in crate::gateway) state: Arc<GatewayState>,
    /// The `Host`/`Origin` allowlist, as rmcp's server checks it.
    hosts: AllowedHosts,
    /// rmcp's SSE keep-alive interval, kept on a long call's stream.
    keep_alive: Option<Duration>,
}

/// A POST, as the direct path looks at it.
pub(in crate::gateway) struct Post<'a> {
    pub(in crate::gateway) parts: &'a Parts,
    pub(in crate::gateway) body: &'a Bytes,
    /// It holds a large-request permit: read on a blocking thread.
    pub(in crate::gateway) large: bool,
    pub(in crate::gateway) client: Option<IpAddr>,
    /// The gateway's sessions (a 2025 call's must be live, and is touched).
    pub(in crate::gateway) sessions: &'a CappedSessions,
    /// Cancelled when the gateway ends its sessions.
    pub(in crate::gateway) ending: &'a CancellationToken,
}

impl DirectPath {
    pub(in crate::gateway) fn new(
        state: Arc<GatewayState>,
        hosts: AllowedHosts,
        keep_alive: Option<Duration>,
    ) -> Self {
        DirectPath {
            state,
            hosts,
            keep_alive,
        }
    }

    /// The answer to `post` if the direct path takes it; `None` for every
    /// other POST, which rmcp then handles. A cancellation of a direct call
    /// cancels it (and goes on to rmcp, which ignores it).
    pub(in crate::gateway) async fn answer(&self, post: Post<'_>) -> Option<Response> {
        let Some(id) = post.parts.headers.get(&mcp_headers::SESSION_ID) else {
            return self.stateless(post).await;
        };
        let id = id.to_str().ok()?;
        let session = self.state.direct.session(id)?;
        match read_body_as(post.body, post.large, posted::Posted::read).await? {
            posted::Posted::Call(call)
                if self.allows(post.parts, &call.name)
                    && session.takes(&post.parts.headers)
                    && post.sessions.has(id).await =>
            {
                let call = PlainCall::from(call);
                post.sessions.touch(id, &session).await;
                self.state.direct.taken();
                let protocol = session.info().map(|info| info.protocol_version.clone());
                let caller = caller_in(&post.parts.extensions);
                let span = call.span(
                    &post.parts.headers,
                    (Some(id), protocol.as_ref().map(ProtocolVersion::as_str)),
                    (post.client, &caller),
                );
                let cancelled = post.ending.child_token();
                let (answer, before) =
                    session.answer(self.state.clone(), (call, span, caller), cancelled);
                Some(answer::direct(answer, before, self.keep_alive, Generation::Sessions).await)
            }
            posted::Posted::Cancelled(request) => {
                session.cancel(&request);
                None
            }
            posted::Posted::Call(_) | posted::Posted::Other => None,
        }
    }

    /// A 2026-07-28 client's call (no session id).
    async fn stateless(&self, post: Post<'_>) -> Option<Response> {
        let call = read_body_as(post.body, post.large, StatelessCall::read).await??;
        let takes = self.allows(post.parts, call.name())
            && call.takes(&post.parts.headers)
            && !self.state.current().promotes_headers(call.name());
        if !takes {
            return None;
        }
        self.state.direct.taken();
        let caller = caller_in(&post.parts.extensions);
        let span = call.span(&post.parts.headers, (post.client, &caller));
        // Nothing cancels one such call but the client leaving (its future
        // dropped) or the sessions' end: the end's own token, not a child
        // of it (each a node added to it, and taken out, under its lock).
        let gone = post.ending.clone();
        let (answer, before) = call.answer(self.state.clone(), (span, caller), gone);
        Some(answer::direct(answer, before, self.keep_alive, Generation::Stateless).await)
    }

    /// What the gateway asks of any call it answers itself: not one of its
    /// meta-tools (those are the handler's), and from an allowed `Host` and
    /// `Origin`.
    fn allows(&self, parts: &Parts, tool: &str) -> bool {
        !self.state.serves_meta_tool(tool) && self.hosts.check(&parts.uri, &parts.headers).is_ok()
    }
}
