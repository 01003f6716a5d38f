//! Our rmcp `ClientHandler`: identifies us to the upstream and forwards the
//! notifications the supervisor acts on.

use rmcp::{
    ClientHandler,
    model::{ClientConfig, Implementation},
    service::{NotificationContext, RoleClient},
};
use tokio::sync::mpsc;

/// What an upstream told us outside any request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// `notifications/tools/list_changed`: the catalog must be reloaded.
    ToolListChanged,
}

/// Handler for one session; cheap, holds only where to send events.
#[derive(Debug, Clone, Default)]
pub struct SessionHandler {
    events: Option<mpsc::UnboundedSender<SessionEvent>>,
}

impl SessionHandler {
    /// A handler that forwards events to `events`.
    pub fn new(events: mpsc::UnboundedSender<SessionEvent>) -> Self {
        SessionHandler {
            events: Some(events),
        }
    }

    fn emit(&self, event: SessionEvent) {
        if let Some(events) = &self.events {
            // The owner may be gone (session closing); nothing to tell then.
            let _ = events.send(event);
        }
    }
}

impl ClientHandler for SessionHandler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            Default::default(),
            Implementation::new("mcp-supervisor", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(SessionEvent::ToolListChanged);
    }
}
