//! The table on stdout and the generated part of `docs/BENCHMARKS.md`.

use std::{fmt::Write as _, path::Path};

use crate::measure::{Aggregate, Machine};

/// One line of the summary table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) scenario: String,
    pub(crate) ours: String,
    pub(crate) baseline: String,
    pub(crate) ratio: String,
    pub(crate) target: String,
    /// `None`: informational, no target.
    pub(crate) met: Option<bool>,
}

impl Row {
    pub(crate) fn ratio(
        id: &str,
        scenario: &str,
        ours: String,
        baseline: String,
        ratio: f64,
        target: &str,
        met: bool,
    ) -> Self {
        Row {
            id: id.into(),
            scenario: scenario.into(),
            ours,
            baseline,
            ratio: format!("{ratio:.2}×"),
            target: target.into(),
            met: Some(met),
        }
    }

    pub(crate) fn info(
        id: &str,
        scenario: &str,
        ours: String,
        baseline: String,
        ratio: String,
    ) -> Self {
        Row {
            id: id.into(),
            scenario: scenario.into(),
            ours,
            baseline,
            ratio,
            target: "—".into(),
            met: None,
        }
    }

    fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "NOT MET",
            None => "info",
        }
    }
}

/// Absolute numbers of one variant.
#[derive(Debug, Clone)]
pub(crate) struct Detail {
    pub(crate) id: String,
    pub(crate) variant: String,
    pub(crate) rounds: u32,
    pub(crate) calls: u64,
    pub(crate) errors: u64,
    pub(crate) throughput: f64,
    pub(crate) spread: (f64, f64),
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) cpu_us: f64,
    pub(crate) rss_mib: f64,
}

impl Detail {
    pub(crate) fn from_aggregate(id: &str, variant: &str, agg: &mut Aggregate) -> Self {
        Detail {
            id: id.into(),
            variant: variant.into(),
            rounds: agg.rounds,
            calls: agg.calls,
            errors: agg.errors,
            throughput: agg.throughput(),
            spread: agg.rate_spread(),
            p50_us: agg.percentile_us(50.0),
            p99_us: agg.percentile_us(99.0),
            cpu_us: agg.cpu_per_call_us(),
            rss_mib: agg.peak_rss_mib(),
        }
    }
}

/// Everything a run found.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) rows: Vec<Row>,
    pub(crate) details: Vec<Detail>,
    pub(crate) notes: Vec<(String, Vec<String>)>,
    pub(crate) failures: Vec<(String, String)>,
}

/// How the run was made.
#[derive(Debug)]
pub(crate) struct RunInfo {
    pub(crate) date: String,
    pub(crate) command: String,
    pub(crate) mode: &'static str,
    pub(crate) only: Vec<String>,
    pub(crate) machine: Machine,
    pub(crate) loadavg_end: String,
    /// Highest 1-minute load average sampled before each measured round.
    pub(crate) max_load: f64,
    pub(crate) duration_s: f64,
    pub(crate) rounds: u32,
    pub(crate) seconds: f64,
}

fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}|",
        header.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    );
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

impl Report {
    fn summary_rows(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|row| {
                vec![
                    row.id.clone(),
                    row.scenario.clone(),
                    row.ours.clone(),
                    row.baseline.clone(),
                    row.ratio.clone(),
                    row.target.clone(),
                    if row.met == Some(false) {
                        "**NOT MET**".into()
                    } else {
                        row.verdict().into()
                    },
                ]
            })
            .collect()
    }

    fn detail_rows(&self) -> Vec<Vec<String>> {
        self.details
            .iter()
            .map(|d| {
                vec![
                    d.id.clone(),
                    d.variant.clone(),
                    d.rounds.to_string(),
                    format!(
                        "{}{}",
                        d.calls,
                        if d.errors > 0 {
                            format!(" (+{} failed)", d.errors)
                        } else {
                            String::new()
                        }
                    ),
                    format!("{:.0} ({:.0}–{:.0})", d.throughput, d.spread.0, d.spread.1),
                    format!("{:.1}", d.p50_us),
                    format!("{:.1}", d.p99_us),
                    format!("{:.1}", d.cpu_us),
                    format!("{:.1}", d.rss_mib),
                ]
            })
            .collect()
    }

    /// The plain-text table printed at the end of a run.
    pub(crate) fn print(&self) {
        let rows = self.summary_rows();
        let header = [
            "#", "scenario", "ours", "baseline", "ratio", "target", "result",
        ];
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: Vec<String>| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, width)| {
                    let pad = width.saturating_sub(cell.chars().count());
                    format!("{cell}{}", " ".repeat(pad))
                })
                .collect();
            println!("  {}", padded.join("  "));
        };
        println!();
        line(header.iter().map(|h| (*h).to_owned()).collect());
        line(widths.iter().map(|w| "-".repeat(*w)).collect());
        for row in rows {
            line(row.into_iter().map(|cell| cell.replace("**", "")).collect());
        }
        println!();
        println!("  Absolute numbers per variant (calls/s with the per-round range; µs; MiB):");
        for d in &self.details {
            println!(
                "  {:<3} {:<52} {:>8.0} calls/s ({:.0}–{:.0})  p50 {:>8.1}  p99 {:>8.1}  cpu/call {:>7.1}  rss {:>6.1}{}",
                d.id,
                d.variant,
                d.throughput,
                d.spread.0,
                d.spread.1,
                d.p50_us,
                d.p99_us,
                d.cpu_us,
                d.rss_mib,
                if d.errors > 0 {
                    format!("  ({} failed)", d.errors)
                } else {
                    String::new()
                }
            );
        }
        for (id, notes) in &self.notes {
            for note in notes {
                println!("  {id}: {note}");
            }
        }
        for (id, error) in &self.failures {
            println!("  {id}: FAILED TO RUN: {error}");
        }
        let missed: Vec<String> = self
            .rows
            .iter()
            .filter(|row| row.met == Some(false))
            .map(|row| format!("{} ({})", row.id, row.scenario))
            .collect();
        println!();
        if missed.is_empty() && self.failures.is_empty() {
            println!("  Every target measured here is met.");
        } else {
            println!("  Not met: {}", missed.join("; "));
        }
    }

    /// The generated section of BENCHMARKS.md.
    pub(crate) fn markdown(&self, run: &RunInfo) -> String {
        let m = &run.machine;
        let mut out = String::new();
        let _ = writeln!(out, "## Latest run\n");
        let _ = writeln!(out, "- **Date:** {}", run.date);
        let _ = writeln!(out, "- **Command:** `{}`", run.command);
        let _ = writeln!(
            out,
            "- **Mode:** {} ({} rounds × {:.1} s measured per variant, variants interleaved; \
             whole run {:.0} s){}",
            run.mode,
            run.rounds,
            run.seconds,
            run.duration_s,
            if run.only.is_empty() {
                String::new()
            } else {
                format!("; only {}", run.only.join(", "))
            }
        );
        let _ = writeln!(
            out,
            "- **Machine:** {} cores ({}), {:.1} GiB memory, Linux {}; {}",
            m.cores, m.cpu_model, m.mem_total_gib, m.kernel, m.rustc
        );
        let busy = run.max_load >= m.cores as f64;
        let _ = writeln!(
            out,
            "- **Load average** (1/5/15 min) at start: {}; at end: {}; highest 1-min value \
             sampled before each round: {:.2}{}",
            m.loadavg_start,
            run.loadavg_end,
            run.max_load,
            if busy {
                " — **other work competed for the CPU during this run** (load ≥ cores): \
                 absolute numbers are pessimistic and noisier; ratios less so, since the \
                 variants of each comparison alternate round by round"
            } else {
                ""
            }
        );
        let _ = writeln!(out);
        let _ = writeln!(out, "### Targets\n");
        out.push_str(&table(
            &[
                "#", "scenario", "ours", "baseline", "ratio", "target", "result",
            ],
            &self.summary_rows(),
        ));
        let _ = writeln!(out);
        let _ = writeln!(out, "### Absolute numbers per variant\n");
        let _ = writeln!(
            out,
            "Throughput is calls/s over all rounds (range of the per-round rates in \
             parentheses); latencies in µs over every call of every round; CPU is the \
             client process's user+system time per call (`getrusage`); RSS is the client \
             process's peak (`VmHWM`). One worker process per round.\n"
        );
        out.push_str(&table(
            &[
                "#",
                "variant",
                "rounds",
                "calls",
                "calls/s",
                "p50 µs",
                "p99 µs",
                "CPU µs/call",
                "peak RSS MiB",
            ],
            &self.detail_rows(),
        ));
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\n### Notes from the run\n");
            for (id, notes) in &self.notes {
                for note in notes {
                    let _ = writeln!(out, "- {id}: {note}");
                }
            }
        }
        if !self.failures.is_empty() {
            let _ = writeln!(out, "\n### Scenarios that failed to run\n");
            for (id, error) in &self.failures {
                let _ = writeln!(out, "- {id}: `{error}`");
            }
        }
        out
    }
}

pub(crate) const BEGIN: &str =
    "<!-- BEGIN GENERATED by `make bench` (crates/mcp-bench); edits here are overwritten -->";
pub(crate) const END: &str = "<!-- END GENERATED -->";

/// Replaces the generated section of `path` (creating the file with a short
/// preamble if needed), keeping everything written by hand around it.
pub(crate) fn write_markdown(path: &Path, generated: &str) -> std::io::Result<()> {
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let block = format!("{BEGIN}\n\n{generated}\n{END}");
    let text = match (existing.find(BEGIN), existing.find(END)) {
        (Some(begin), Some(end)) if end > begin => format!(
            "{}{block}{}",
            &existing[..begin],
            &existing[end + END.len()..]
        ),
        _ => format!("{}\n{block}\n", PREAMBLE),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

const PREAMBLE: &str = "# Benchmarks\n\n\
The performance targets (P1–P7), measured side by side in one run by `make bench` \
(`crates/mcp-bench`). The section between the markers below is regenerated by every \
run of all seven (`make bench`, quick or full); the rest of this file is written by hand.\n";
