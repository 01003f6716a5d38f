//! The contract book: what is approved, judged against every listing
//! (docs/CONTRACTS.md, "When it is checked"). The registry owns the one
//! book; it judges each catalog it loads and withholds what the book holds.

use std::collections::BTreeMap;

use super::{
    Change, Contract, ItemKind, Lock,
    lock::{Approved, LockError},
};
use crate::config::{ContractSettings, OnChange, OnNew};

/// What the book said of one listed item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its contract is the approved one (or, observing, the first one seen).
    Approved,
    /// It differs only in ways `contracts.allow` lets pass.
    Allowed(Vec<crate::config::Allowance>),
    /// It differs; it is served anyway (observing, or `on_change = "warn"`).
    Changed(Change),
    /// It differs and is withheld until approved or reverted.
    Held(Change),
    /// Nothing approved it and `on_new = "hold"`: withheld until approved.
    New,
}

impl Verdict {
    /// Every verdict's word, in the order metrics list them.
    pub const WORDS: [&'static str; 5] = ["approved", "allowed", "changed", "held", "new"];

    /// The word in `/status` and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Approved => "approved",
            Verdict::Allowed(_) => "allowed",
            Verdict::Changed(_) => "changed",
            Verdict::Held(_) => "held",
            Verdict::New => "new",
        }
    }

    /// Whether the item is withheld from clients.
    pub fn holds(&self) -> bool {
        matches!(self, Verdict::Held(_) | Verdict::New)
    }

    /// How the item differs from the approved contract, if it does.
    pub fn change(&self) -> Option<&Change> {
        match self {
            Verdict::Changed(change) | Verdict::Held(change) => Some(change),
            _ => None,
        }
    }
}

/// One item of a listing, judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub contract: Contract,
    pub verdict: Verdict,
}

/// One connection's listing, judged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    pub items: Vec<Seen>,
    /// Changes detected on this connection since the process started.
    pub changes: u64,
    /// This listing made `contracts.park_after` changes within its window:
    /// the connection is to be parked (failure kind `contract_churn`).
    pub churned: bool,
}

impl Judged {
    /// The held items of `kind`, by name, with their verdicts.
    pub fn held(&self, kind: ItemKind) -> impl Iterator<Item = &Seen> {
        self.items
            .iter()
            .filter(move |seen| seen.contract.kind == kind && seen.verdict.holds())
    }

    pub fn count(&self, verdict: &str) -> usize {
        self.items
            .iter()
            .filter(|seen| seen.verdict.as_str() == verdict)
            .count()
    }
}

/// Why an approval did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApproveError {
    #[error("unknown MCP connection '{0}'")]
    UnknownConnection(String),
    #[error("connection '{0}' has not been listed yet: nothing to approve")]
    NotListed(String),
    #[error("connection '{connection}' lists no {kind} '{name}'", kind = kind.as_str())]
    NoSuchItem {
        connection: String,
        kind: ItemKind,
        name: String,
    },
    #[error(
        "the definition changed again: it is listed now with sha256 {listed}, not the \
         {expected} you approved; review it again (`mcp-supervisor contracts diff`)"
    )]
    ChangedSince { expected: String, listed: String },
    #[error("{0}")]
    Lock(String),
}

/// Approved items one connection may have at most: what an upstream lists
/// anew beyond it is held, so listing ever new names grows neither the lock
/// nor memory without bound.
pub(crate) const MAX_APPROVED: usize = 10_000;

/// The approved contracts and the last judgement of each connection.
#[derive(Debug, Default)]
pub struct ContractBook {
    /// `None`: observing (nothing is held, nothing written).
    settings: Option<ContractSettings>,
    approved: BTreeMap<String, Approved>,
    /// The lock file was missing when the book opened: a connection's first
    /// listing is trusted and written (trust on first use).
    trust_first: bool,
    /// The lock could not be read: it is not overwritten either.
    read_only: bool,
    judged: BTreeMap<String, Judged>,
    /// When each connection's recent changes were seen (`park_after`).
    recent: BTreeMap<String, std::collections::VecDeque<std::time::Instant>>,
}

impl ContractBook {
    /// The book for `settings` (`None`: observing), its approvals read from
    /// the lock file.
    pub fn open(settings: Option<ContractSettings>) -> Result<ContractBook, LockError> {
        let (approved, trust_first) = match &settings {
            Some(settings) => match Lock::read(&settings.lock)? {
                Some(lock) => (lock.connections, false),
                None => {
                    tracing::warn!(
                        lock = %settings.lock.display(),
                        "no contracts lock yet: each connection's first listing is trusted and \
                         written there (trust on first use)"
                    );
                    (BTreeMap::new(), true)
                }
            },
            None => (BTreeMap::new(), false),
        };
        Ok(ContractBook {
            settings,
            approved,
            trust_first,
            read_only: false,
            judged: BTreeMap::new(),
            recent: BTreeMap::new(),
        })
    }

    /// [`ContractBook::open`], or, when the lock cannot be read (it was
    /// checked with the config a moment ago), a book that holds every item
    /// and writes nothing: a broken lock never serves unapproved tools.
    pub fn open_or_hold(settings: Option<ContractSettings>) -> ContractBook {
        match ContractBook::open(settings.clone()) {
            Ok(book) => book,
            Err(error) => {
                tracing::error!(%error, "cannot read the contracts lock: every tool is held");
                ContractBook {
                    settings: settings.map(|settings| ContractSettings {
                        on_change: OnChange::Hold,
                        on_new: OnNew::Hold,
                        ..settings
                    }),
                    read_only: true,
                    ..ContractBook::default()
                }
            }
        }
    }

    /// Whether changes hold items (`[contracts]` is configured).
    pub fn enforcing(&self) -> bool {
        self.settings.is_some()
    }

    /// Judges `connection`'s listing, made at `now`: each item against its
    /// approved contract. What was approved on first use is written to the
    /// lock.
    pub fn judge(
        &mut self,
        connection: &str,
        listed: Vec<Contract>,
        now: std::time::Instant,
    ) -> Judged {
        let before = self.judged.remove(connection).unwrap_or_default();
        let first_listing = !self.approved.contains_key(connection);
        let trusting = self.trust_first && first_listing;
        let approved = self.approved.entry(connection.to_owned()).or_default();
        let mut wrote = false;
        let mut changes = before.changes;
        // Items that appeared after the first listing and were approved on
        // first use (`on_new = "allow"`).
        let mut adopted_late = 0u64;
        let mut over_the_most = 0u64;
        let mut items = Vec::with_capacity(listed.len());
        for mut contract in listed {
            let key = (contract.kind, contract.name.clone());
            // The approved definition, when it is the one listed: one copy
            // of it is kept, not two.
            if let Some(known) = approved
                .get(&key)
                .filter(|known| known.sha256 == contract.sha256)
            {
                contract = known.clone();
            }
            let verdict = match (approved.get(&key), &self.settings) {
                (Some(known), _) if known.sha256 == contract.sha256 => Verdict::Approved,
                (Some(known), settings) => {
                    let change = Change::between(known, &contract);
                    let allow = settings.as_ref().map_or(&[][..], |s| &s.allow[..]);
                    match change.allowed(known, &contract, allow) {
                        Some(allowances) => Verdict::Allowed(allowances),
                        None => match settings {
                            Some(s) if s.on_change == OnChange::Hold => Verdict::Held(change),
                            _ => Verdict::Changed(change),
                        },
                    }
                }
                (None, Some(s)) if s.on_new == OnNew::Hold && !trusting => Verdict::New,
                // An upstream cannot grow the lock (and memory) without
                // bound by listing ever new names.
                (None, _) if approved.len() >= MAX_APPROVED => {
                    over_the_most += 1;
                    Verdict::New
                }
                (None, settings) => {
                    approved.insert(key, contract.clone());
                    wrote |= settings.is_some();
                    if !first_listing {
                        adopted_late += 1;
                    }
                    Verdict::Approved
                }
            };
            let was = before.items.iter().find(|seen| {
                seen.contract.kind == contract.kind && seen.contract.name == contract.name
            });
            let news = was.is_none_or(|was| was.contract.sha256 != contract.sha256);
            if news
                && matches!(
                    verdict,
                    Verdict::Changed(_) | Verdict::Held(_) | Verdict::New
                )
            {
                changes += 1;
                said(connection, &contract, &verdict);
            }
            items.push(Seen { contract, verdict });
        }
        if wrote {
            self.save();
        }
        if over_the_most > 0 {
            tracing::warn!(
                connection,
                held = over_the_most,
                most = MAX_APPROVED,
                "contracts: more items than one connection may have approved; the new ones are held"
            );
        }
        // Names new since the first listing change what clients see: each
        // is counted, and a listing that brings any counts once toward
        // `park_after` (an upstream that adds a few tools in an update is
        // not parked for it; one that keeps adding them is).
        changes += adopted_late;
        let fresh = changes - before.changes - adopted_late + u64::from(adopted_late > 0);
        let churned = self.churned(connection, fresh, now);
        let judged = Judged {
            items,
            changes,
            churned,
        };
        self.judged.insert(connection.to_owned(), judged.clone());
        judged
    }

    /// Approves `connection`'s items as last listed (all, or the one of
    /// `item`): the contracts newly approved. Written to the lock when
    /// enforcing.
    ///
    /// With `expected`, the one item must still be listed with that hash:
    /// an approval covers what the person reviewed, not a later change.
    pub fn approve(
        &mut self,
        connection: &str,
        item: Option<(ItemKind, &str)>,
        expected: Option<&str>,
    ) -> Result<Vec<Contract>, ApproveError> {
        let judged = self
            .judged
            .get(connection)
            .ok_or_else(|| ApproveError::NotListed(connection.to_owned()))?;
        let chosen: Vec<&Seen> = judged
            .items
            .iter()
            .filter(|seen| {
                item.is_none_or(|(kind, name)| {
                    seen.contract.kind == kind && seen.contract.name == name
                })
            })
            .collect();
        if let (Some((kind, name)), []) = (item, chosen.as_slice()) {
            return Err(ApproveError::NoSuchItem {
                connection: connection.to_owned(),
                kind,
                name: name.to_owned(),
            });
        }
        if let Some(expected) = expected
            && let Some(listed) = chosen.iter().find(|seen| seen.contract.sha256 != expected)
        {
            return Err(ApproveError::ChangedSince {
                expected: expected.to_owned(),
                listed: listed.contract.sha256.clone(),
            });
        }
        let chosen: Vec<Contract> = chosen
            .into_iter()
            .map(|seen| seen.contract.clone())
            .collect();
        let approved = self.adopt(connection, chosen)?;
        tracing::info!(connection, approved = approved.len(), "contracts approved");
        Ok(approved)
    }

    /// Approves `contracts` of `connection` as they are (an approval made
    /// on another node of the fleet, or here): those that were not
    /// approved already. Written to the lock when enforcing.
    pub fn adopt(
        &mut self,
        connection: &str,
        contracts: Vec<Contract>,
    ) -> Result<Vec<Contract>, ApproveError> {
        let approved = self.approved.entry(connection.to_owned()).or_default();
        let mut adopted = Vec::new();
        for contract in contracts {
            let key = (contract.kind, contract.name.clone());
            if approved.get(&key) != Some(&contract) {
                approved.insert(key, contract.clone());
                adopted.push(contract);
            }
        }
        if self.enforcing() && !adopted.is_empty() {
            self.write()
                .map_err(|error| ApproveError::Lock(error.to_string()))?;
        }
        Ok(adopted)
    }

    /// Whether `fresh` more changes at `now` make `park_after` changes within
    /// its window (then the count starts again). Only with `[contracts]`.
    fn churned(&mut self, connection: &str, fresh: u64, now: std::time::Instant) -> bool {
        let Some(limit) = self.settings.as_ref().map(|s| s.park_after) else {
            return false;
        };
        if fresh == 0 {
            return false;
        }
        let recent = self.recent.entry(connection.to_owned()).or_default();
        recent.extend(std::iter::repeat_n(now, fresh as usize));
        while recent
            .front()
            .is_some_and(|at| now.duration_since(*at) > limit.within)
        {
            recent.pop_front();
        }
        if recent.len() >= limit.changes as usize {
            recent.clear();
            return true;
        }
        false
    }

    /// The last judgement of `connection`.
    pub fn judged(&self, connection: &str) -> Option<&Judged> {
        self.judged.get(connection)
    }

    fn save(&self) {
        if let Err(error) = self.write() {
            tracing::error!(%error, "cannot write the contracts lock; approvals live only in this process");
        }
    }

    fn write(&self) -> Result<(), LockError> {
        let Some(settings) = self.settings.as_ref().filter(|_| !self.read_only) else {
            return Ok(());
        };
        let lock = Lock {
            connections: self
                .approved
                .iter()
                .filter(|(_, approved)| !approved.is_empty())
                .map(|(name, approved)| (name.clone(), approved.clone()))
                .collect(),
        };
        lock.write(&settings.lock)
    }
}

/// Says once that an item's contract changed (or is new and held).
fn said(connection: &str, contract: &Contract, verdict: &Verdict) {
    let kind = contract.kind.as_str();
    let name = &contract.name;
    match verdict {
        Verdict::Held(change) => tracing::warn!(
            connection, kind, name = %name, changed = %change.describe(), sha256 = %contract.sha256,
            "contract changed since approval: held until approved or reverted"
        ),
        Verdict::Changed(change) => tracing::warn!(
            connection, kind, name = %name, changed = %change.describe(), sha256 = %contract.sha256,
            "contract changed since approval"
        ),
        _ => tracing::warn!(
            connection, kind, name = %name, sha256 = %contract.sha256,
            "new item not approved yet: held until approved"
        ),
    }
}

#[cfg(test)]
mod tests;
