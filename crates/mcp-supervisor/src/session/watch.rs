//! A transport wrapper that tells when the upstream's stream ended for good,
//! so the connection can notice a session that died while idle (child exited,
//! stream closed) without polling.

use std::borrow::Cow;

use rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use tokio_util::sync::CancellationToken;

/// Delegates to `inner`; cancels `ended` once `receive` yields `None`
/// (rmcp's signal that no more messages will ever arrive).
#[derive(Debug)]
pub(crate) struct Watched<T> {
    inner: T,
    ended: CancellationToken,
}

impl<T> Watched<T> {
    pub(crate) fn new(inner: T, ended: CancellationToken) -> Self {
        Watched { inner, ended }
    }
}

impl<T> Transport<RoleClient> for Watched<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let ended = self.ended.clone();
        let next = self.inner.receive();
        async move {
            let message = next.await;
            if message.is_none() {
                ended.cancel();
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.ended.cancel();
        self.inner.close()
    }
}
