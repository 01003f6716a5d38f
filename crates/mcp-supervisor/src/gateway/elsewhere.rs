//! A request for a session another node of the fleet holds: forwarded to
//! that node's gateway, its answer streamed back as it comes (docs/FLEET.md,
//! "Sessions across nodes"; docs/DECISIONS.md #96).
//!
//! The session id names its node (`session_ids.rs`); the node's address is
//! what it says in its heartbeats (`[fleet] advertise`), read from the
//! registry's [`FleetOverview`] and kept here, so a forwarded request asks
//! the registry only when it names a node not known yet. A request with
//! this node's own id, or with none, never comes here.
//!
//! The request goes as it came (method, path, query, every end-to-end
//! header, `Host` included, the body streamed) but for its credentials
//! (`Authorization`, `Proxy-Authorization`, `Cookie`): this node checked
//! them, and vouches for the request instead (`vouch.rs`, [`FORWARDED`]),
//! so a client's bearer never reaches another node. A marked request is
//! never forwarded again, so two nodes that disagree cannot bounce it
//! between them. The answer (status,
//! headers, body: JSON, an SSE stream, a `GET` stream that stays open) comes
//! back unchanged. A node that cannot be reached is answered as for an
//! unknown session (404), so the client starts a new session: a node that
//! went away took its sessions with it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use actix::Addr;
use axum::{
    body::Body,
    extract::Request,
    http::{HeaderMap, HeaderName, HeaderValue, Uri, header},
    response::Response,
};
use futures::{StreamExt, TryStreamExt};
use tokio_util::sync::CancellationToken;
use url::Url;

use super::{
    rights::caller_in,
    session_ids::{Holder, SessionIds},
    vouch::{CALLER, FORWARDED, Forward, SUBJECT, Vouchers, caller_header, caller_of_header},
};
use crate::{
    access::{Caller, Subject, Via},
    codec::mcp_headers,
    registry::{FleetOverview, Registry},
};

/// How long connecting to another node may take before the session is
/// taken as gone.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A client's credentials, checked here and never passed on.
const CREDENTIALS: [HeaderName; 3] = [
    header::AUTHORIZATION,
    header::PROXY_AUTHORIZATION,
    header::COOKIE,
];

/// Headers of one hop only (RFC 9110 §7.6.1), never passed on.
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// This node's way to the sessions the others hold.
#[derive(Debug)]
pub(super) struct Elsewhere {
    ids: Arc<SessionIds>,
    vouchers: Vouchers,
    registry: Addr<Registry>,
    client: reqwest::Client,
    /// Each other node's gateway, as last heard.
    gateways: Mutex<HashMap<String, Url>>,
    /// One look at the registry at a time; the others wait for its answer.
    refreshing: tokio::sync::Mutex<()>,
    /// Forwarded requests carry their caller's token
    /// ([`Elsewhere::carrying_subjects`]).
    subjects: bool,
}

impl Elsewhere {
    /// `idle_timeout` is the gateways' own: a pooled connection is dropped
    /// well before the other node would close it under a request.
    pub(super) fn new(
        ids: Arc<SessionIds>,
        vouchers: Vouchers,
        registry: Addr<Registry>,
        idle_timeout: Duration,
    ) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(idle_timeout / 2)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client with no TLS settings of its own builds");
        Elsewhere {
            ids,
            vouchers,
            registry,
            client,
            gateways: Mutex::default(),
            refreshing: tokio::sync::Mutex::default(),
            subjects: false,
        }
    }

    /// Whether forwarded requests carry their caller's token: only when a
    /// connection exchanges it (docs/FLEET.md, "Sessions across nodes").
    pub(super) fn carrying_subjects(mut self, subjects: bool) -> Self {
        self.subjects = subjects;
        self
    }

    /// The node holding the session of a request with `headers`, when that
    /// is another node (a request forwarded here is never forwarded again:
    /// [`Elsewhere::vouched`] takes it first).
    pub(super) fn holder(&self, headers: &HeaderMap) -> Option<String> {
        let id = headers.get(&mcp_headers::SESSION_ID)?.to_str().ok()?;
        match self.ids.holder(id) {
            Holder::Node(node) => Some(node.to_owned()),
            Holder::Here | Holder::Unknown => None,
        }
    }

    /// The caller of a request marked as forwarded, when it carries
    /// another node's valid voucher for it (and the caller that node
    /// identified: [`CALLER`]); `None` when it does not. The marks are
    /// taken off either way, so a request taken is handled here exactly as
    /// its client sent it (the direct path, for one, takes no request with
    /// an `mcp-` header it does not know).
    pub(super) fn vouched(&self, request: &mut Request) -> Option<Arc<Caller>> {
        let voucher = request.headers_mut().remove(&FORWARDED)?;
        let caller = request.headers_mut().remove(&CALLER);
        let caller = match &caller {
            Some(value) => value.to_str().ok()?,
            None => "",
        };
        let subject = request.headers_mut().remove(&SUBJECT);
        let subject = match &subject {
            Some(value) => value.to_str().ok()?,
            None => "",
        };
        // Only a request of a session this node holds is forwarded here.
        let Some(session) = request
            .headers()
            .get(&mcp_headers::SESSION_ID)
            .and_then(|id| id.to_str().ok())
            .filter(|id| matches!(self.ids.holder(id), Holder::Here))
        else {
            tracing::debug!("a request marked as forwarded names no session of this node");
            return None;
        };
        let forward = Forward {
            method: request.method(),
            session,
            caller,
            subject,
        };
        if let Err(forged) = self
            .vouchers
            .check(&voucher, forward, std::time::SystemTime::now())
        {
            tracing::debug!(?forged, "a request marked as forwarded was not vouched for");
            return None;
        }
        // A node that sends no caller (one from before callers travelled)
        // is vouched for, its caller nobody in particular.
        let mut caller = match caller {
            "" => Caller::anonymous(Via::Open),
            caller => caller_of_header(caller)?,
        };
        if !subject.is_empty() {
            caller.subject = Subject::new(subject);
        }
        Some(Arc::new(caller))
    }

    /// `request` sent to `node`'s gateway, and its answer, whose body ends
    /// when `ending` is cancelled (the gateway ends its streams); `None`
    /// when `node` is not known or cannot be reached.
    pub(super) async fn forward(
        &self,
        request: Request,
        node: &str,
        ending: CancellationToken,
    ) -> Option<Response> {
        let Some(base) = self.gateway_of(node).await else {
            tracing::info!(
                node,
                "a session id names a node not heard from; answered as an unknown session"
            );
            return None;
        };
        let (parts, body) = request.into_parts();
        let mut headers = end_to_end(&parts.headers);
        for name in CREDENTIALS {
            headers.remove(name);
        }
        let session = parts
            .headers
            .get(&mcp_headers::SESSION_ID)
            .and_then(|id| id.to_str().ok())
            .unwrap_or_default();
        let identified = caller_in(&parts.extensions);
        let caller = caller_header(&identified);
        let subject = identified
            .subject
            .expose()
            .filter(|_| self.subjects)
            .and_then(|token| HeaderValue::from_str(token).ok())
            .map(|mut value| {
                value.set_sensitive(true);
                value
            });
        let forward = Forward {
            method: &parts.method,
            session,
            caller: caller.to_str().expect("base64url is text"),
            subject: subject
                .as_ref()
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default(),
        };
        let voucher = self
            .vouchers
            .vouch(node, forward, std::time::SystemTime::now());
        headers.insert(FORWARDED, voucher);
        headers.insert(CALLER, caller);
        if let Some(subject) = subject {
            headers.insert(SUBJECT, subject);
        }
        let mut sending = self
            .client
            .request(parts.method, target(&base, &parts.uri))
            .headers(headers);
        if !http_body::Body::is_end_stream(&body) {
            sending = sending.body(reqwest::Body::wrap_stream(body.into_data_stream()));
        }
        let answer = match sending.send().await {
            Ok(answer) => answer,
            Err(error) => {
                self.forget(node);
                tracing::info!(node, error = %error.without_url(), "the node holding a session cannot be reached; answered as an unknown session");
                return None;
            }
        };
        let status = answer.status();
        let headers = end_to_end(answer.headers());
        let stream = answer
            .bytes_stream()
            .map_err(reqwest::Error::without_url)
            .take_until(ending.cancelled_owned());
        let mut response = Response::new(Body::from_stream(stream));
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Some(response)
    }

    /// Where `node`'s gateway is, asking the registry when it is not known.
    async fn gateway_of(&self, node: &str) -> Option<Url> {
        if let Some(url) = self.known(node) {
            return Some(url);
        }
        let _one = self.refreshing.lock().await;
        if let Some(url) = self.known(node) {
            return Some(url);
        }
        let view = self.registry.send(FleetOverview).await.ok().flatten()?;
        let heard: HashMap<String, Url> = view
            .nodes
            .into_iter()
            .filter_map(|seen| Some((seen.node, seen.gateway?)))
            .collect();
        *self.lock() = heard;
        self.known(node)
    }

    fn known(&self, node: &str) -> Option<Url> {
        self.lock().get(node).cloned()
    }

    /// A node that could not be reached is looked up again next time.
    fn forget(&self, node: &str) {
        self.lock().remove(node);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Url>> {
        self.gateways.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `uri`'s path and query on the gateway at `base` (its path, if any, first).
fn target(base: &Url, uri: &Uri) -> Url {
    let mut url = base.clone();
    let prefix = base.path().trim_end_matches('/');
    url.set_path(&format!("{prefix}{}", uri.path()));
    url.set_query(uri.query());
    url
}

/// `headers` without those of one hop: [`HOP_BY_HOP`] and any that
/// `Connection` names.
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut kept = headers.clone();
    for name in HOP_BY_HOP {
        kept.remove(name);
    }
    for name in named {
        kept.remove(name.as_str());
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_and_query_go_to_the_other_nodes_gateway() {
        let uri: Uri = "/mcp?x=1".parse().unwrap();
        for (base, expected) in [
            ("http://10.0.0.5:7300", "http://10.0.0.5:7300/mcp?x=1"),
            ("http://10.0.0.5:7300/", "http://10.0.0.5:7300/mcp?x=1"),
            ("https://b.example/gw/", "https://b.example/gw/mcp?x=1"),
        ] {
            let base = Url::parse(base).unwrap();
            assert_eq!(target(&base, &uri).as_str(), expected);
        }
        let bare: Uri = "/mcp".parse().unwrap();
        let base = Url::parse("http://10.0.0.5:7300").unwrap();
        assert_eq!(target(&base, &bare).as_str(), "http://10.0.0.5:7300/mcp");
    }

    #[test]
    fn headers_of_one_hop_stay_behind() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer t"),
            ("host", "lb.example"),
            ("mcp-session-id", "a.b.c"),
            ("connection", "keep-alive, x-hop"),
            ("keep-alive", "timeout=5"),
            ("x-hop", "1"),
            ("transfer-encoding", "chunked"),
            ("accept", "text/event-stream"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let kept = end_to_end(&headers);
        let mut names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["accept", "authorization", "host", "mcp-session-id"]);
    }
}
