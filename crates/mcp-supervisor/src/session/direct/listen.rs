//! A 2026-07-28 session's `subscriptions/listen` stream, opened by the
//! direct client as rmcp's client opens it: only on its acknowledgement,
//! for no more than was asked, and ended by anything that does not belong
//! on it.

use futures::StreamExt;
use rmcp::{
    ServiceError,
    model::{
        ClientRequest, GetMeta, RequestId, ServerJsonRpcMessage, ServerNotification,
        SubscriptionFilter, SubscriptionsListenRequest, SubscriptionsListenRequestParams,
    },
    transport::streamable_http_client::StreamableHttpError,
};

use super::{DirectClient, Events, Reply, answer_of, transport};
use crate::{
    call::UpstreamRequest,
    codec::{answers, request::Outgoing},
    http::Posted,
};

impl DirectClient {
    /// Opens a `subscriptions/listen` stream for `filter` and waits for its
    /// acknowledgement, as rmcp's client does: the first message must
    /// acknowledge this request, for no more than was asked.
    pub(crate) async fn listen(
        &self,
        filter: SubscriptionFilter,
    ) -> Result<Listening, ServiceError> {
        let params = SubscriptionsListenRequestParams::new(filter.clone());
        let mut request = UpstreamRequest::from(ClientRequest::SubscriptionsListenRequest(
            SubscriptionsListenRequest::new(params),
        ));
        let (id, token) = self.next_id();
        let stamp = self.stamp(&mut request, None, token, None);
        let headers = self.headers(&request);
        let message = Outgoing::request(request, id.clone(), stamp);
        let mut events = match self.post(message, None, headers).await {
            Ok(Posted::Sse(events, _)) => events,
            Ok(Posted::Json(message, _)) => {
                return Err(match answer_of(message, &id) {
                    Some(Err(error)) => error,
                    _ => ServiceError::UnexpectedResponse,
                });
            }
            Ok(_) => return Err(ServiceError::UnexpectedResponse),
            Err(error) => return Err(transport(error)),
        };
        loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(error)) => return Err(transport(StreamableHttpError::Sse(error))),
                None => return Err(ServiceError::TransportClosed),
            };
            let Some(data) = answers::payload(event) else {
                continue;
            };
            let Some(message) = answers::read_event(data).await else {
                continue;
            };
            return match message {
                ServerJsonRpcMessage::Notification(notification) => {
                    let notification = notification.notification;
                    let ours = notification.get_meta().subscription_id().as_ref() == Some(&id);
                    match notification {
                        ServerNotification::SubscriptionsAcknowledgedNotification(acknowledged)
                            if ours && acknowledged.params.notifications.is_subset_of(&filter) =>
                        {
                            Ok(Listening {
                                events,
                                id,
                                accepted: acknowledged.params.notifications,
                                reply: self.reply(None),
                            })
                        }
                        _ => Err(ServiceError::UnexpectedResponse),
                    }
                }
                answer => Err(match answer_of(answer.into(), &id) {
                    Some(Err(error)) => error,
                    _ => ServiceError::UnexpectedResponse,
                }),
            };
        }
    }
}

/// An acknowledged `subscriptions/listen` stream opened by [`DirectClient`].
/// Dropping it closes the stream, which for 2026-07-28 ends the
/// subscription.
pub(crate) struct Listening {
    events: Events,
    id: RequestId,
    accepted: SubscriptionFilter,
    /// Where the answers to requests that come on the stream go.
    reply: Reply,
}

impl Listening {
    /// The next notification of the subscription; `None` once it ended (the
    /// stream closed, a final answer, or a message it may not carry). A
    /// request the upstream sends on it is answered as a client with no user
    /// would (no client waits on this stream) and the stream goes on.
    pub(crate) async fn next(&mut self) -> Option<ServerNotification> {
        loop {
            let event = self.events.next().await?.ok()?;
            let Some(data) = answers::payload(event) else {
                continue;
            };
            let Some(message) = answers::read_event(data).await else {
                continue;
            };
            let notification = match message {
                ServerJsonRpcMessage::Notification(notification) => notification,
                ServerJsonRpcMessage::Request(request) => {
                    let answer = crate::session::handler::unattended(&request.request);
                    tokio::spawn(self.reply.clone().send(request.id, answer));
                    continue;
                }
                _ => return None,
            };
            let notification = notification.notification;
            let ours = notification.get_meta().subscription_id().as_ref() == Some(&self.id);
            return (ours && accepts(&self.accepted, &notification)).then_some(notification);
        }
    }
}

/// Whether a subscription acknowledged for `accepted` may carry `notification`.
fn accepts(accepted: &SubscriptionFilter, notification: &ServerNotification) -> bool {
    match notification {
        ServerNotification::ToolListChangedNotification(_) => {
            accepted.tools_list_changed == Some(true)
        }
        ServerNotification::PromptListChangedNotification(_) => {
            accepted.prompts_list_changed == Some(true)
        }
        ServerNotification::ResourceListChangedNotification(_) => {
            accepted.resources_list_changed == Some(true)
        }
        ServerNotification::ResourceUpdatedNotification(updated) => accepted
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.contains(&updated.params.uri)),
        // Nothing else belongs on it (rmcp ends the subscription on them).
        _ => false,
    }
}
