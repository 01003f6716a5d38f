//! `[contracts]`: where the lock file is and what a change does. The lock
//! itself is read by whoever starts a registry on the config (the commands
//! refuse a broken one before starting; the registry holds every tool if it
//! still cannot read it).

use super::Validator;
use crate::config::error::ConfigError;
use crate::config::keypath::KeyPath;
use crate::config::model::{
    Allowance, Choice, ChurnLimit, ContractSettings, DEFAULT_LOCK_FILE, OnChange, OnNew,
};
use crate::config::raw::RawContracts;

impl Validator<'_> {
    pub(super) fn contracts(
        &self,
        key: &KeyPath,
        raw: RawContracts,
    ) -> Result<ContractSettings, ConfigError> {
        let lock = self.resolve(raw.lock.as_deref().unwrap_or(DEFAULT_LOCK_FILE));
        let on_change = self.choice(
            &key.key("on_change"),
            raw.on_change.as_deref(),
            OnChange::Hold,
        )?;
        let on_new = self.choice(&key.key("on_new"), raw.on_new.as_deref(), OnNew::Allow)?;
        let mut allow = Vec::new();
        for (index, text) in raw.allow.unwrap_or_default().iter().enumerate() {
            let here = key.key("allow").index(index);
            let allowance = Allowance::parse(text).ok_or_else(|| {
                self.invalid(
                    &here,
                    format!(
                        "unknown change {text:?}; expected {}",
                        Allowance::expected()
                    ),
                )
            })?;
            if !allow.contains(&allowance) {
                allow.push(allowance);
            }
        }
        let default = ChurnLimit::default();
        let raw_limit = raw.park_after.unwrap_or_default();
        let here = key.key("park_after");
        let park_after = ChurnLimit {
            changes: self.count_u32(
                &here.key("changes"),
                raw_limit.changes,
                default.changes,
                1_000,
            )?,
            within: self.duration(&here.key("within"), raw_limit.within, default.within)?,
        };
        Ok(ContractSettings {
            lock,
            on_change,
            on_new,
            allow,
            park_after,
        })
    }
}
