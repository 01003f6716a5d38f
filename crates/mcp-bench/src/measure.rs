//! What the harness measures and how: process CPU (getrusage), peak RSS
//! (VmHWM), another process's CPU (/proc), latency percentiles, machine facts.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// User + system CPU of this whole process (every thread) so far.
pub(crate) fn process_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(usage) => timeval(usage.user_time()) + timeval(usage.system_time()),
        Err(_) => Duration::ZERO,
    }
}

fn timeval(tv: nix::sys::time::TimeVal) -> Duration {
    let micros = tv.tv_sec() as i128 * 1_000_000 + tv.tv_usec() as i128;
    Duration::from_micros(micros.max(0) as u64)
}

/// Peak resident set size of this process, in KiB (`VmHWM`).
pub(crate) fn peak_rss_kib() -> u64 {
    status_field("/proc/self/status", "VmHWM:").unwrap_or(0)
}

/// A `kB` field of a `/proc/*/status` file.
pub(crate) fn status_field(path: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// CPU time another process (all its threads) has used so far.
///
/// Sums `/proc/PID/task/*/schedstat` (nanoseconds on CPU) when available, which is
/// far finer than the 10 ms ticks of `/proc/PID/stat`; falls back to those.
pub(crate) fn other_process_cpu(pid: u32) -> Option<Duration> {
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        let mut total = 0u64;
        let mut any = false;
        for task in tasks.flatten() {
            let path = task.path().join("schedstat");
            if let Some(ns) = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            {
                total += ns;
                any = true;
            }
        }
        if any {
            return Some(Duration::from_nanos(total));
        }
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // After the comm: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// State letter and parent pid of a process, from `/proc/PID/stat`.
pub(crate) fn proc_state(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = stat.rsplit_once(')')?.1;
    let mut fields = after_comm.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Whether `pid` is the supervisor's stdio guardian (a `/bin/sh` loop that
/// outlives the supervisor only to kill its children's groups).
pub(crate) fn is_guardian(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        cmdline
            .split(|byte| *byte == 0)
            .any(|arg| arg == b"mcp-supervisor-guardian")
    })
}

/// Pids of the live (non-zombie) processes whose parent is `parent`.
pub(crate) fn live_children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(
            |pid| matches!(proc_state(*pid), Some((state, ppid)) if ppid == parent && state != 'Z'),
        )
        .collect()
}

/// What one measured client loop produced (one worker process, one round).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct LoopResult {
    /// Calls answered with a successful result.
    pub(crate) calls: u64,
    /// Calls answered with anything else.
    pub(crate) errors: u64,
    /// Wall time of the measured loop.
    pub(crate) elapsed_s: f64,
    /// CPU this client process used during the loop.
    pub(crate) cpu_s: f64,
    /// Per-call latency, nanoseconds.
    pub(crate) samples_ns: Vec<u64>,
    /// Peak RSS of the client process.
    pub(crate) peak_rss_kib: u64,
    /// CPU an observed process (the gateway) used during the loop.
    pub(crate) observed_cpu_s: Option<f64>,
    /// Scenario-specific numbers.
    #[serde(default)]
    pub(crate) extra: std::collections::BTreeMap<String, f64>,
}

impl LoopResult {
    /// A scenario that is not a call loop (P4, P6, P7): `ok` of `total`
    /// succeeded in `elapsed` using `cpu`, with its own numbers in `extra`;
    /// the peak RSS is read now.
    pub(crate) fn scenario<K: Into<String>>(
        ok: usize,
        total: usize,
        elapsed: Duration,
        cpu: Duration,
        samples_ns: Vec<u64>,
        extra: impl IntoIterator<Item = (K, f64)>,
    ) -> Self {
        LoopResult {
            calls: ok as u64,
            errors: total.saturating_sub(ok) as u64,
            elapsed_s: elapsed.as_secs_f64(),
            cpu_s: cpu.as_secs_f64(),
            samples_ns,
            peak_rss_kib: peak_rss_kib(),
            observed_cpu_s: None,
            extra: extra
                .into_iter()
                .map(|(key, value)| (key.into(), value))
                .collect(),
        }
    }
}

/// Several rounds of one variant, merged.
#[derive(Debug, Clone, Default)]
pub(crate) struct Aggregate {
    pub(crate) rounds: u32,
    pub(crate) calls: u64,
    pub(crate) errors: u64,
    pub(crate) elapsed_s: f64,
    pub(crate) cpu_s: f64,
    pub(crate) samples_ns: Vec<u64>,
    pub(crate) peak_rss_kib: u64,
    pub(crate) observed_cpu_s: f64,
    pub(crate) observed: bool,
    /// Calls/s of each round, to show the spread.
    pub(crate) round_rates: Vec<f64>,
}

impl Aggregate {
    pub(crate) fn add(&mut self, result: LoopResult) {
        self.rounds += 1;
        self.calls += result.calls;
        self.errors += result.errors;
        self.elapsed_s += result.elapsed_s;
        self.cpu_s += result.cpu_s;
        if result.elapsed_s > 0.0 {
            self.round_rates
                .push(result.calls as f64 / result.elapsed_s);
        }
        self.samples_ns.extend(result.samples_ns);
        self.peak_rss_kib = self.peak_rss_kib.max(result.peak_rss_kib);
        if let Some(observed) = result.observed_cpu_s {
            self.observed = true;
            self.observed_cpu_s += observed;
        }
    }

    /// Calls per second (all rounds).
    pub(crate) fn throughput(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.calls as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    /// Latency percentile in microseconds.
    pub(crate) fn percentile_us(&mut self, p: f64) -> f64 {
        percentile_ns(&mut self.samples_ns, p) as f64 / 1_000.0
    }

    /// Client CPU per successful call, microseconds.
    pub(crate) fn cpu_per_call_us(&self) -> f64 {
        per_call_us(self.cpu_s, self.calls)
    }

    /// Observed-process CPU per call, microseconds.
    pub(crate) fn observed_per_call_us(&self) -> Option<f64> {
        self.observed
            .then(|| per_call_us(self.observed_cpu_s, self.calls))
    }

    pub(crate) fn peak_rss_mib(&self) -> f64 {
        self.peak_rss_kib as f64 / 1024.0
    }

    /// Smallest and largest per-round rate.
    pub(crate) fn rate_spread(&self) -> (f64, f64) {
        spread(&self.round_rates).unwrap_or((0.0, 0.0))
    }
}

/// The smallest and largest of `values`; `None` when there are none.
fn spread(values: &[f64]) -> Option<(f64, f64)> {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    min.is_finite().then_some((min, max))
}

/// Two variants compared round by round: each round runs every variant
/// back to back, so a drift in the machine's speed between rounds, which
/// moves both alike, drops out of the per-round ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Paired {
    /// Rounds in which the first variant did more calls/s.
    pub(crate) ahead: usize,
    /// Rounds that both completed.
    pub(crate) rounds: usize,
    /// Smallest and largest per-round ratio, first ÷ second.
    pub(crate) lowest: f64,
    pub(crate) highest: f64,
}

impl Paired {
    /// `first` against `second` by their per-round rates; `None` without a
    /// round both completed.
    pub(crate) fn of(first: &Aggregate, second: &Aggregate) -> Option<Paired> {
        let ratios: Vec<f64> = first
            .round_rates
            .iter()
            .zip(&second.round_rates)
            .filter(|(_, second)| **second > 0.0)
            .map(|(first, second)| first / second)
            .collect();
        let (lowest, highest) = spread(&ratios)?;
        Some(Paired {
            ahead: ratios.iter().filter(|ratio| **ratio > 1.0).count(),
            rounds: ratios.len(),
            lowest,
            highest,
        })
    }
}

fn per_call_us(seconds: f64, calls: u64) -> f64 {
    if calls == 0 {
        f64::NAN
    } else {
        seconds * 1e6 / calls as f64
    }
}

/// The `p`-th percentile (0..=100, nearest rank) of `samples`, sorting them.
pub(crate) fn percentile_ns(samples: &mut [u64], p: f64) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// The median of `values` (the upper one of an even count), sorting them;
/// NaN when there are none.
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Facts about the machine and when the run happened.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    pub(crate) cores: usize,
    pub(crate) mem_total_gib: f64,
    pub(crate) kernel: String,
    pub(crate) cpu_model: String,
    pub(crate) loadavg_start: String,
    pub(crate) rustc: String,
}

impl Machine {
    pub(crate) fn detect() -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mem_total_gib = status_field("/proc/meminfo", "MemTotal:")
            .map(|kib| kib as f64 / (1024.0 * 1024.0))
            .unwrap_or(0.0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "?".into());
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|line| line.starts_with("model name"))
                    .and_then(|line| line.split_once(':'))
                    .map(|(_, model)| model.trim().to_owned())
            })
            .unwrap_or_else(|| "?".into());
        let rustc = std::process::Command::new("rustc")
            .arg("--version")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|| "?".into());
        Machine {
            cores,
            mem_total_gib,
            kernel,
            cpu_model,
            loadavg_start: loadavg(),
            rustc,
        }
    }
}

/// The highest 1-minute load average seen by [`note_load`], times 100.
static MAX_LOAD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Samples the 1-minute load average (called before every measured round),
/// so the report can say whether other work competed for the CPU.
pub(crate) fn note_load() {
    let one = loadavg()
        .split_whitespace()
        .next()
        .and_then(|one| one.parse::<f64>().ok())
        .unwrap_or(0.0);
    MAX_LOAD.fetch_max((one * 100.0) as u64, std::sync::atomic::Ordering::Relaxed);
}

/// The highest 1-minute load average sampled during the run.
pub(crate) fn max_load() -> f64 {
    MAX_LOAD.load(std::sync::atomic::Ordering::Relaxed) as f64 / 100.0
}

/// The 1/5/15-minute load averages.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// `YYYY-MM-DD HH:MM UTC` for now.
pub(crate) fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut samples: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(percentile_ns(&mut samples, 50.0), 50);
        assert_eq!(percentile_ns(&mut samples, 99.0), 99);
        assert_eq!(percentile_ns(&mut samples, 100.0), 100);
        assert_eq!(percentile_ns(&mut [], 50.0), 0);
    }

    #[test]
    fn medians_take_the_upper_middle() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn paired_rounds_compare_round_by_round() {
        let rates = |rates: &[f64]| Aggregate {
            round_rates: rates.to_vec(),
            ..Aggregate::default()
        };
        let ours = rates(&[110.0, 90.0, 300.0]);
        let theirs = rates(&[100.0, 100.0, 200.0, 50.0]);
        assert_eq!(
            Paired::of(&ours, &theirs),
            Some(Paired {
                ahead: 2,
                rounds: 3,
                lowest: 0.9,
                highest: 1.5,
            })
        );
        assert_eq!(Paired::of(&ours, &rates(&[])), None);
        assert_eq!(Paired::of(&ours, &rates(&[0.0])), None);
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
