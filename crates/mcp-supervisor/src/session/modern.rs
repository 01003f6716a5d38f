//! What a 2025-era upstream keeps in its session and a 2026-07-28 upstream
//! does not (it has no sessions), kept here instead so the rest of the
//! supervisor works the same with both:
//!
//! - list changes and resource updates arrive only on a `subscriptions/listen`
//!   request: a modern session holds one open while the upstream can announce
//!   anything, with the resource URIs subscribed through it, and reopens it
//!   when that set changes (`resources/subscribe` and `unsubscribe` become
//!   changes to it) or when the upstream ends it (docs/DECISIONS.md #85);
//! - the log level is sent with every request (`_meta`) instead of
//!   `logging/setLevel`.

// Logging is deprecated by SEP-2577; the level still travels in `_meta`.
#![allow(deprecated)]

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
};

use rmcp::{
    RoleClient,
    model::{
        LoggingLevel, RequestMetaObject, ServerCapabilities, ServerNotification, SubscriptionFilter,
    },
    service::Peer,
};
use tokio_util::sync::CancellationToken;

use crate::{events::ListKind, generation::Generation};

use super::{
    direct::{DirectClient, Listening},
    handler::{SessionEvent, SessionHandler},
};

/// How long telling the upstream the listen stream ends may take.
pub(crate) const CANCEL_PATIENCE: std::time::Duration = std::time::Duration::from_millis(250);

/// The per-session state of a 2026-07-28 upstream.
#[derive(Debug, Default)]
pub(crate) struct Modern {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Resource URIs subscribed to through the listen stream.
    resources: BTreeSet<String>,
    log_level: Option<LoggingLevel>,
    /// Stops the current listen stream's reader (which cancels the stream),
    /// and the reader, to wait for it.
    listening: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Modern {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds (`true`) or removes a resource subscription; whether it changed.
    pub(crate) fn subscribe(&self, uri: &str, on: bool) -> bool {
        let mut inner = self.lock();
        if on {
            inner.resources.insert(uri.to_owned())
        } else {
            inner.resources.remove(uri)
        }
    }

    pub(crate) fn set_log_level(&self, level: LoggingLevel) {
        self.lock().log_level = Some(level);
    }

    /// `_meta` every request carries: the log level asked for, if any.
    pub(crate) fn request_meta(&self) -> Option<RequestMetaObject> {
        let level = self.lock().log_level?;
        let mut meta = RequestMetaObject::new();
        meta.set_log_level(level);
        Some(meta)
    }

    /// (Re)opens the listen stream for what `capabilities` can announce and
    /// the resources subscribed to, replacing the previous stream; nothing to
    /// listen for closes it. What arrives goes to `handler` as session events.
    pub(crate) async fn listen(
        &self,
        through: Through,
        capabilities: &ServerCapabilities,
        handler: &SessionHandler,
    ) -> Result<(), rmcp::ServiceError> {
        let (filter, previous) = {
            let mut inner = self.lock();
            (
                filter(capabilities, &inner.resources),
                inner.listening.take(),
            )
        };
        if let Some((previous, _)) = previous {
            previous.cancel();
        }
        let Some(filter) = filter else {
            return Ok(());
        };
        let mut subscription = through.open(filter.clone()).await?;
        let stop = CancellationToken::new();
        let handler = handler.clone();
        let stopped = stop.clone();
        let reader = tokio::spawn(async move {
            let mut pause = REOPEN_FIRST;
            loop {
                let opened = tokio::time::Instant::now();
                if !relay(subscription, &stopped, &handler).await {
                    return;
                }
                // The upstream ended it (a proxy's idle timeout, a restart):
                // open it again, after a pause that grows while it keeps
                // ending soon. Changes in between may have been missed, so
                // everything listened for is reported changed once it is
                // open again.
                if opened.elapsed() >= REOPEN_CALM {
                    pause = REOPEN_FIRST;
                }
                let Some(again) = reopen(&through, &filter, &mut pause, &stopped).await else {
                    return;
                };
                missed(&filter)
                    .into_iter()
                    .for_each(|event| handler.emit(event));
                subscription = again;
            }
        });
        self.lock().listening = Some((stop, reader));
        Ok(())
    }

    /// Stops listening (the session is being closed); the reader, to wait
    /// until the upstream was told.
    pub(crate) fn stop(&self) -> Option<tokio::task::JoinHandle<()>> {
        let (listening, reader) = self.lock().listening.take()?;
        listening.cancel();
        Some(reader)
    }
}

/// The first pause before a listen stream the upstream ended is opened
/// again; it doubles while reopened streams keep ending within
/// [`REOPEN_CALM`], up to [`REOPEN_MOST`].
const REOPEN_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
const REOPEN_MOST: std::time::Duration = std::time::Duration::from_secs(60);
const REOPEN_CALM: std::time::Duration = std::time::Duration::from_secs(60);
/// How long reopening a listen stream may wait for its acknowledgement.
const REOPEN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// What a listen stream is opened through: rmcp's client, or a 2026-07-28
/// HTTP session's own requests (see `direct`).
pub(crate) enum Through {
    Rmcp(Peer<RoleClient>),
    Lane(Arc<DirectClient>),
}

impl Through {
    async fn open(&self, filter: SubscriptionFilter) -> Result<Subscription, rmcp::ServiceError> {
        Ok(match self {
            Through::Rmcp(peer) => Subscription::Rmcp(Box::new(peer.listen(filter).await?)),
            Through::Lane(lane) => Subscription::Lane(Box::new(lane.listen(filter).await?)),
        })
    }
}

/// An open listen stream.
enum Subscription {
    Rmcp(Box<rmcp::service::Subscription>),
    Lane(Box<Listening>),
}

impl Subscription {
    /// The next notification; `None` once the stream ended.
    async fn next(&mut self) -> Option<ServerNotification> {
        match self {
            Subscription::Rmcp(subscription) => subscription.next().await.ok().flatten(),
            Subscription::Lane(listening) => listening.next().await,
        }
    }

    /// Ends the stream, telling the upstream (bounded: dropping a
    /// subscription cancels it too, without waiting). Closing the lane's
    /// stream is how 2026-07-28 cancels it.
    async fn cancel(self) {
        if let Subscription::Rmcp(mut subscription) = self {
            let _ = tokio::time::timeout(CANCEL_PATIENCE, subscription.cancel()).await;
        }
    }
}

/// What to listen for: the list changes the upstream declares, and the
/// resource updates subscribed to (if it declares subscriptions).
fn filter(
    capabilities: &ServerCapabilities,
    resources: &BTreeSet<String>,
) -> Option<SubscriptionFilter> {
    let declared = |flag: Option<bool>| flag.unwrap_or(false).then_some(true);
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = capabilities
        .tools
        .as_ref()
        .and_then(|t| declared(t.list_changed));
    filter.prompts_list_changed = capabilities
        .prompts
        .as_ref()
        .and_then(|p| declared(p.list_changed));
    filter.resources_list_changed = capabilities
        .resources
        .as_ref()
        .and_then(|r| declared(r.list_changed));
    let subscribes = capabilities
        .resources
        .as_ref()
        .is_some_and(|r| r.subscribe == Some(true));
    if subscribes && !resources.is_empty() {
        filter.resource_subscriptions = Some(resources.iter().cloned().collect());
    }
    let anything = filter.tools_list_changed.is_some()
        || filter.prompts_list_changed.is_some()
        || filter.resources_list_changed.is_some()
        || filter.resource_subscriptions.is_some();
    anything.then_some(filter)
}

/// Passes what `subscription` carries to `handler` as session events until
/// the upstream ends it (`true`) or `stopped` (`false`).
async fn relay(
    mut subscription: Subscription,
    stopped: &CancellationToken,
    handler: &SessionHandler,
) -> bool {
    loop {
        tokio::select! {
            // Tell the upstream before the session closes: a stdio server
            // holding the stream open would otherwise wait for it before it
            // exits. Bounded: dropping the subscription cancels it too,
            // without waiting.
            () = stopped.cancelled() => {
                subscription.cancel().await;
                return false;
            }
            next = subscription.next() => match next {
                Some(notification) => {
                    if let Some(event) = event_of(notification) {
                        handler.emit(event);
                    }
                }
                None => return true,
            },
        }
    }
}

/// Opens the stream for `filter` again, after `pause` (doubled for the next
/// time, up to [`REOPEN_MOST`]) and as many times as it takes; `None` once
/// `stopped`, or when the session it belongs to has ended.
async fn reopen(
    through: &Through,
    filter: &SubscriptionFilter,
    pause: &mut std::time::Duration,
    stopped: &CancellationToken,
) -> Option<Subscription> {
    loop {
        tokio::select! {
            () = stopped.cancelled() => return None,
            () = tokio::time::sleep(*pause) => {}
        }
        *pause = (*pause * 2).min(REOPEN_MOST);
        let opening = tokio::time::timeout(REOPEN_PATIENCE, through.open(filter.clone()));
        let reopened = tokio::select! {
            () = stopped.cancelled() => return None,
            reopened = opening => reopened,
        };
        match reopened {
            Ok(Ok(again)) => return Some(again),
            Ok(Err(rmcp::ServiceError::TransportClosed)) => return None,
            Ok(Err(error)) => tracing::debug!(%error, "reopening subscriptions/listen failed"),
            Err(_) => tracing::debug!("subscriptions/listen was not acknowledged in time"),
        }
    }
}

/// What a listen stream for `filter` may have announced while it was down.
fn missed(filter: &SubscriptionFilter) -> Vec<SessionEvent> {
    let lists = [
        (filter.tools_list_changed, ListKind::Tools),
        (filter.prompts_list_changed, ListKind::Prompts),
        (filter.resources_list_changed, ListKind::Resources),
    ];
    let changed = lists
        .into_iter()
        .filter(|(on, _)| *on == Some(true))
        .map(|(_, kind)| SessionEvent::ListChanged(kind));
    let updated = filter
        .resource_subscriptions
        .iter()
        .flatten()
        .map(|uri| SessionEvent::ResourceUpdated { uri: uri.clone() });
    changed.chain(updated).collect()
}

fn event_of(notification: ServerNotification) -> Option<SessionEvent> {
    Some(match notification {
        ServerNotification::ToolListChangedNotification(_) => {
            SessionEvent::ListChanged(ListKind::Tools)
        }
        ServerNotification::PromptListChangedNotification(_) => {
            SessionEvent::ListChanged(ListKind::Prompts)
        }
        ServerNotification::ResourceListChangedNotification(_) => {
            SessionEvent::ListChanged(ListKind::Resources)
        }
        ServerNotification::ResourceUpdatedNotification(updated) => SessionEvent::ResourceUpdated {
            uri: updated.params.uri,
        },
        _ => return None,
    })
}

/// The `Modern` state of a session that speaks 2026-07-28, if it does.
pub(crate) fn for_version(version: Option<&rmcp::model::ProtocolVersion>) -> Option<Arc<Modern>> {
    (Generation::of_agreed(version) == Generation::Stateless).then(Arc::default)
}
