//! `[supervisor]`: the timeouts and attempts every connection inherits,
//! where OAuth tokens are kept, and the restart and quarantine policy.

use std::path::{Path, PathBuf};

use super::Validator;
use crate::config::error::ConfigError;
use crate::config::keypath::KeyPath;
use crate::config::model::{ProbeSettings, QuarantineSettings, RestartBudget, SupervisorSettings};
use crate::config::raw::{RawProbe, RawQuarantine, RawRestartBudget, RawSupervisor};

impl Validator<'_> {
    pub(super) fn supervisor(
        &self,
        key: &KeyPath,
        mut raw: RawSupervisor,
    ) -> Result<SupervisorSettings, ConfigError> {
        let d = SupervisorSettings::default();
        let probe = self.probe(key, raw.take_probe(), d.probe)?;
        Ok(SupervisorSettings {
            probe,
            connect_timeout: self.duration(
                &key.key("connect_timeout"),
                raw.connect_timeout,
                d.connect_timeout,
            )?,
            call_timeout: self.duration(
                &key.key("call_timeout"),
                raw.call_timeout,
                d.call_timeout,
            )?,
            list_timeout: self.duration(
                &key.key("list_timeout"),
                raw.list_timeout,
                d.list_timeout,
            )?,
            max_attempts: self.attempts(
                &key.key("max_attempts"),
                raw.max_attempts,
                d.max_attempts,
            )?,
            shutdown_timeout: self.duration(
                &key.key("shutdown_timeout"),
                raw.shutdown_timeout,
                d.shutdown_timeout,
            )?,
            restart_budget: self.restart_budget(
                &key.key("restart_budget"),
                raw.restart_budget.unwrap_or_default(),
            )?,
            quarantine: self
                .quarantine(&key.key("quarantine"), raw.quarantine.unwrap_or_default())?,
            state_dir: self.state_dir(&key.key("state_dir"), raw.state_dir)?,
            relist: self.duration(&key.key("relist"), raw.relist, d.relist)?,
        })
    }

    /// `state_dir` as configured (relative to the config file), else the XDG
    /// state directory.
    fn state_dir(
        &self,
        key: &KeyPath,
        raw: Option<String>,
    ) -> Result<Option<PathBuf>, ConfigError> {
        match raw {
            Some(path) if path.is_empty() => Err(self.invalid(key, "must not be empty")),
            Some(path) => Ok(Some(self.resolve(&path))),
            None => Ok((self.env)("XDG_STATE_HOME")
                .filter(|dir| Path::new(dir).is_absolute())
                .map(PathBuf::from)
                .or_else(|| (self.env)("HOME").map(|home| Path::new(&home).join(".local/state")))
                .map(|dir| dir.join("mcp-supervisor"))),
        }
    }

    /// The probe keys of `key` (`[supervisor]` or a connection), each
    /// defaulting to `inherited`'s.
    pub(super) fn probe(
        &self,
        key: &KeyPath,
        raw: RawProbe,
        inherited: ProbeSettings,
    ) -> Result<ProbeSettings, ConfigError> {
        let probe = ProbeSettings {
            mode: self.choice(&key.key("probe"), raw.probe.as_deref(), inherited.mode)?,
            after: self.duration(&key.key("probe_after"), raw.probe_after, inherited.after)?,
            every: self.duration(&key.key("probe_every"), raw.probe_every, inherited.every)?,
            max: self.count_u32(
                &key.key("max_probes"),
                raw.max_probes,
                inherited.max,
                u32::MAX,
            )?,
        };
        if probe.every < probe.after {
            return Err(self.invalid(
                &key.key("probe_every"),
                format!(
                    "must be at least probe_after ({} < {})",
                    humantime::format_duration(probe.every),
                    humantime::format_duration(probe.after)
                ),
            ));
        }
        Ok(probe)
    }

    fn restart_budget(
        &self,
        key: &KeyPath,
        raw: RawRestartBudget,
    ) -> Result<RestartBudget, ConfigError> {
        let d = RestartBudget::default();
        Ok(RestartBudget {
            restarts: self.count_u32(&key.key("restarts"), raw.restarts, d.restarts, u32::MAX)?,
            within: self.duration(&key.key("within"), raw.within, d.within)?,
        })
    }

    fn quarantine(
        &self,
        key: &KeyPath,
        raw: RawQuarantine,
    ) -> Result<QuarantineSettings, ConfigError> {
        let d = QuarantineSettings::default();
        let q = QuarantineSettings {
            base_cooldown: self.duration(
                &key.key("base_cooldown"),
                raw.base_cooldown,
                d.base_cooldown,
            )?,
            max_cooldown: self.duration(
                &key.key("max_cooldown"),
                raw.max_cooldown,
                d.max_cooldown,
            )?,
            retire_after: self.count_u32(
                &key.key("retire_after"),
                raw.retire_after,
                d.retire_after,
                u32::MAX,
            )?,
        };
        if q.max_cooldown < q.base_cooldown {
            return Err(self.invalid(
                &key.key("max_cooldown"),
                format!(
                    "must be at least base_cooldown ({} < {})",
                    humantime::format_duration(q.max_cooldown),
                    humantime::format_duration(q.base_cooldown)
                ),
            ));
        }
        Ok(q)
    }
}
