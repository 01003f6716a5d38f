//! The diagnostic tools of `server-stateless` (SEP-2575) and the
//! `subscriptions/listen` streams they notify.
//!
//! A 2026-07-28 client has no session and no standalone GET stream; it
//! learns about list changes by holding a `subscriptions/listen` request
//! open. rmcp sends the acknowledgment and stamps the subscription id; what
//! is ours is keeping every open stream in [`Shared`](super::state::Shared)
//! so a `test_trigger_*` call made on another request can reach it.
//! Legacy sessions get the same changes as plain `list_changed`
//! notifications.

#![allow(deprecated)] // Sampling and logging: SEP-2577 deprecates them, the suite still tests them.

use std::sync::atomic::AtomicBool;

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolRequestParams, CallToolResponse, LoggingLevel},
    service::{RequestContext, SubscriptionContext, SubscriptionSendError, SubscriptionSink},
};

use super::{
    ask::{Ask, Gathered, accepted_content, gather, sampled_text},
    fixtures::one_field_form,
    handler::ConformanceServer,
    logging::log,
    state::Shared,
    tools::text,
};

/// `test_missing_capability`: needs sampling. Without the capability the
/// ask fails with `-32021` naming `{"sampling": {}}`, which is the point.
pub(crate) async fn missing_capability(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let asks = [("greeting", Ask::sample("Say hello", 20))];
    Ok(
        match gather(context, request.input_responses.as_ref(), &asks, None).await? {
            Gathered::Pending(pending) => pending.into(),
            Gathered::Ready(answers) => text(format!(
                "Sampled with the declared capability: {}",
                answers
                    .get("greeting")
                    .map(sampled_text)
                    .unwrap_or_default()
            )),
        },
    )
}

/// `test_streaming_elicitation`: a 2026-07-28 response stream may carry
/// notifications and the final result, never a request; the elicitation
/// goes out inside an `InputRequiredResult` instead.
pub(crate) async fn streaming_elicitation(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let asks = [(
        "topic",
        Ask::elicit(
            "What should the stream be about?",
            one_field_form("topic", "string"),
        ),
    )];
    Ok(
        match gather(context, request.input_responses.as_ref(), &asks, None).await? {
            Gathered::Pending(pending) => pending.into(),
            Gathered::Ready(answers) => {
                let topic = answers
                    .get("topic")
                    .and_then(accepted_content)
                    .and_then(|content| content.get("topic"))
                    .and_then(|topic| topic.as_str())
                    .unwrap_or("(declined)")
                    .to_owned();
                text(format!("Streaming about: {topic}"))
            }
        },
    )
}

/// `test_logging_tool`: logs once, so a request without a log level shows
/// it gets no log.
pub(crate) async fn logging_tool(
    server: &ConformanceServer,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    log(
        context,
        &server.session,
        LoggingLevel::Info,
        "test_logging_tool ran",
    )
    .await;
    text("Logged one info message (if the request's log level allowed it)")
}

/// Which list a trigger changes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ListKind {
    Tools,
    Prompts,
}

/// `test_trigger_tool_change` / `test_trigger_prompt_change`: adds or
/// removes the dynamic entry, then tells every listener.
pub(crate) async fn trigger_change(server: &ConformanceServer, kind: ListKind) -> CallToolResponse {
    let shared = &server.shared;
    let (flag, entry): (&AtomicBool, &str) = match kind {
        ListKind::Tools => (&shared.dynamic_tool, super::catalog::DYNAMIC),
        ListKind::Prompts => (&shared.dynamic_prompt, super::prompts::DYNAMIC),
    };
    let listed = Shared::toggle(flag);
    announce(shared, kind).await;
    text(format!(
        "{entry} is now {}",
        if listed { "listed" } else { "hidden" }
    ))
}

async fn announce(shared: &Shared, kind: ListKind) {
    for sink in shared.subscriptions() {
        let sent = match kind {
            ListKind::Tools => sink.notify_tool_list_changed().await,
            ListKind::Prompts => sink.notify_prompt_list_changed().await,
        };
        match sent {
            // The stream did not ask for this kind of change: the filter
            // at work, not a failure.
            Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_)) => {}
            Err(error) => tracing::debug!(%error, "listen stream gone"),
        }
    }
    for peer in shared.legacy_peers() {
        let sent = match kind {
            ListKind::Tools => peer.notify_tool_list_changed().await,
            ListKind::Prompts => peer.notify_prompt_list_changed().await,
        };
        if let Err(error) = sent {
            tracing::debug!(%error, "legacy session gone");
        }
    }
}

/// Holds one `subscriptions/listen` request open until the client goes
/// away, reachable from other requests meanwhile.
pub(crate) async fn listen(shared: &Shared, subscription: SubscriptionContext) {
    let sink: SubscriptionSink = subscription.sink().clone();
    shared.add_subscription(sink.clone());
    subscription.cancelled().await;
    shared.remove_subscription(&sink);
}
