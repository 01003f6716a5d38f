//! `[supervisor]`: timeouts and attempts every connection inherits, and
//! the restart and quarantine policy.

use std::path::PathBuf;
use std::time::Duration;

/// `[supervisor]`: defaults for every connection plus process-wide limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorSettings {
    /// Budget for the MCP initialize handshake.
    pub connect_timeout: Duration,
    /// Whole budget of one call, retries included.
    pub call_timeout: Duration,
    /// Budget of one `tools/list`.
    pub list_timeout: Duration,
    /// Attempts per operation (connect, list, call), first try included.
    pub max_attempts: u32,
    /// How long a graceful shutdown may take before children are killed.
    pub shutdown_timeout: Duration,
    /// How often a crashed connection actor is restarted before it is retired.
    pub restart_budget: RestartBudget,
    /// Park/retire policy.
    pub quarantine: QuarantineSettings,
    /// Where OAuth tokens are kept: `state_dir`, else
    /// `$XDG_STATE_HOME/mcp-supervisor`, else `~/.local/state/mcp-supervisor`;
    /// `None` when none of those is known.
    pub state_dir: Option<PathBuf>,
    /// How often a loaded catalog is listed again, so a change the upstream
    /// never announces is still seen (docs/CONTRACTS.md).
    pub relist: Duration,
    /// How a parked connection is probed in the background; each connection
    /// may set its own.
    pub probe: ProbeSettings,
}

impl Default for SupervisorSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            list_timeout: Duration::from_secs(30),
            max_attempts: 3,
            shutdown_timeout: Duration::from_secs(10),
            restart_budget: RestartBudget::default(),
            quarantine: QuarantineSettings::default(),
            state_dir: None,
            relist: Duration::from_secs(300),
            probe: ProbeSettings::default(),
        }
    }
}

/// `probe`, `probe_after`, `probe_every`, `max_probes` (in `[supervisor]` and
/// each `[connections.NAME]`): while a connection is parked for a failure,
/// its actor asks the upstream, with a request that runs nothing, whether it
/// is back; a healthy answer revives it at once (docs/SUPERVISION.md,
/// "Probes"). The n-th probe comes `after · 2^(n−1)` after the one before
/// (the first that long after the park), never more than `every` apart,
/// never past the park's end, at most `max` per park.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSettings {
    pub mode: ProbeMode,
    /// Wait before the first probe of a park.
    pub after: Duration,
    /// The longest wait between two probes.
    pub every: Duration,
    /// Probes per park, at most.
    pub max: u32,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        Self {
            mode: ProbeMode::Auto,
            after: Duration::from_secs(2),
            every: Duration::from_secs(5),
            max: 60,
        }
    }
}

impl ProbeSettings {
    /// How long after the `done`-th probe (0: the park itself) the next
    /// one comes, or `None` when no more may be sent.
    pub fn delay(&self, done: u32) -> Option<Duration> {
        if self.mode == ProbeMode::Off || done >= self.max {
            return None;
        }
        let doubled = self
            .after
            .checked_mul(1u32.checked_shl(done).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX);
        Some(doubled.min(self.every))
    }
}

/// `probe = "auto" | "off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeMode {
    /// Probe parks for failures (not a `Retry-After` window, not a
    /// retirement, not contracts that keep changing).
    #[default]
    Auto,
    /// Never probe: a park ends on the first use after its cooldown.
    Off,
}

impl super::Choice for ProbeMode {
    const ALL: &'static [Self] = &[Self::Auto, Self::Off];

    fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Off => "off",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_back_off_to_their_cap_and_stop_at_the_most() {
        let settings = ProbeSettings {
            max: 5,
            ..ProbeSettings::default()
        };
        let delays: Vec<_> = (0..6).map(|done| settings.delay(done)).collect();
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(delays, [secs(2), secs(4), secs(5), secs(5), secs(5), None]);
        let off = ProbeSettings {
            mode: ProbeMode::Off,
            ..settings
        };
        assert_eq!(off.delay(0), None);
        // Far along, the doubling saturates rather than wrapping.
        let many = ProbeSettings {
            max: u32::MAX,
            every: Duration::MAX,
            ..settings
        };
        assert!(many.delay(40).unwrap() >= Duration::from_secs(u64::from(u32::MAX)));
        assert_eq!(many.delay(3), secs(16));
    }
}

/// At most `restarts` actor restarts within a sliding window of `within`; one more
/// retires the connection with reason `crash_loop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartBudget {
    /// Restarts allowed inside the window.
    pub restarts: u32,
    /// Length of the window.
    pub within: Duration,
}

impl Default for RestartBudget {
    fn default() -> Self {
        Self {
            restarts: 5,
            within: Duration::from_secs(60),
        }
    }
}

/// `[supervisor.quarantine]`: the n-th park lasts `base_cooldown * 2^(n-1)`, capped
/// at `max_cooldown`; the `retire_after`-th park retires instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuarantineSettings {
    /// Length of the first park.
    pub base_cooldown: Duration,
    /// Upper bound of any park; validation guarantees `>= base_cooldown`.
    pub max_cooldown: Duration,
    /// The park number that retires instead of parking.
    pub retire_after: u32,
}

impl Default for QuarantineSettings {
    fn default() -> Self {
        Self {
            base_cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(300),
            retire_after: 3,
        }
    }
}
