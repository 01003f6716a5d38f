//! Approving contracts in a running process (docs/CONTRACTS.md): the
//! connection's items as last listed become the approved contracts, and its
//! catalog is listed again so a hold ends at once.

use actix::{Context, Handler, Message};

use super::Registry;
use crate::contracts::{ApproveError, ItemKind};

/// Approves `connection`'s current contracts: every item, or the tool
/// `tool`. Answers how many approvals changed.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<usize, ApproveError>")]
pub struct ApproveContracts {
    pub connection: String,
    pub tool: Option<String>,
}

impl Handler<ApproveContracts> for Registry {
    type Result = Result<usize, ApproveError>;

    fn handle(&mut self, msg: ApproveContracts, ctx: &mut Context<Self>) -> Self::Result {
        if !self.entries.contains_key(&msg.connection) {
            return Err(ApproveError::UnknownConnection(msg.connection));
        }
        let item = msg.tool.as_deref().map(|tool| (ItemKind::Tool, tool));
        let approved = self.contracts.approve(&msg.connection, item)?;
        if approved > 0 {
            self.list_changed(&msg.connection, None, ctx);
        }
        Ok(approved)
    }
}
