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
        }
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
