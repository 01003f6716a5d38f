//! Approving contracts in a running process (docs/CONTRACTS.md): the
//! connection's items as last listed become the approved contracts, and its
//! catalog is listed again so a hold ends at once.

use actix::{Context, Handler, Message};

use super::Registry;
use crate::{
    contracts::{ApproveError, ItemKind},
    fleet::{ContractsEverywhere, News},
};

/// Approves `connection`'s current contracts: every item, or one `item`
/// (with `sha256`, only if it is still listed with that hash). Answers how
/// many approvals changed.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<usize, ApproveError>")]
pub struct ApproveContracts {
    pub connection: String,
    pub item: Option<(ItemKind, String)>,
    pub sha256: Option<String>,
}

impl Handler<ApproveContracts> for Registry {
    type Result = Result<usize, ApproveError>;

    fn handle(&mut self, msg: ApproveContracts, ctx: &mut Context<Self>) -> Self::Result {
        if !self.entries.contains_key(&msg.connection) {
            return Err(ApproveError::UnknownConnection(msg.connection));
        }
        let item = msg.item.as_ref().map(|(kind, name)| (*kind, name.as_str()));
        let approved = self
            .contracts
            .approve(&msg.connection, item, msg.sha256.as_deref())?;
        let count = approved.len();
        if count > 0 {
            self.list_changed(&msg.connection, None, ctx);
            if let Some(fleet) = &self.fleet {
                fleet.do_send(ContractsEverywhere::Approved {
                    connection: msg.connection,
                    approved,
                });
            }
        }
        Ok(count)
    }
}

impl Registry {
    /// What another node of the fleet learned of `connection`'s contracts.
    pub(super) fn contracts_learned(
        &mut self,
        connection: &str,
        news: News,
        ctx: &mut Context<Self>,
    ) {
        if !self.entries.contains_key(connection) {
            return;
        }
        match news {
            News::ContractsApproved(approved) => match self.contracts.adopt(connection, approved) {
                Ok(adopted) if adopted.is_empty() => return,
                Ok(adopted) => tracing::info!(
                    connection,
                    approved = adopted.len(),
                    "contracts approved: by another node of the fleet"
                ),
                Err(error) => {
                    tracing::error!(connection, %error, "cannot take on the fleet's approval")
                }
            },
            News::ContractsChanged => {}
            News::Standing(_) | News::Reset | News::Revived => return,
        }
        // A catalog nobody listed here is judged when it is.
        if self
            .entries
            .get(connection)
            .is_some_and(|entry| entry.last_catalog.is_some())
        {
            self.list_changed(connection, None, ctx);
        }
    }

    /// `connection`'s contracts changed `park_after` times within its
    /// window: its actor has the policy park it.
    pub(super) fn contracts_churned(&self, connection: &str) {
        let Some(actor) = self
            .entries
            .get(connection)
            .and_then(|entry| entry.actor.clone())
        else {
            return;
        };
        tracing::warn!(
            connection,
            "contracts keep changing: the connection is parked"
        );
        actor.do_send(crate::connection::ContractsChurned(crate::Failure::new(
            crate::FailureKind::ContractChurn,
            "its tool contracts keep changing",
        )));
    }

    /// Tells the fleet that a listing here found `connection`'s contracts
    /// changed, so every node lists it again now.
    pub(super) fn contracts_changed_here(&self, connection: &str) {
        if let Some(fleet) = self.fleet.as_ref().filter(|_| self.contracts.enforcing()) {
            fleet.do_send(ContractsEverywhere::Changed {
                connection: connection.to_owned(),
            });
        }
    }
}
