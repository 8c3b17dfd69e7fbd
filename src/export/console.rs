//! The summary table printed at the end of `memrel run`: one row per strategy,
//! medians over repetitions, plus retained MiB per cycle.

use std::fmt::Write;

use crate::metrics::{Spread, Summary};
use crate::textutil::MIB;

fn mib(s: &Option<Spread>) -> String {
    s.as_ref()
        .map(|s| format!("{:.1}", s.median / MIB))
        .unwrap_or_else(|| "-".into())
}

fn ms(s: &Option<Spread>) -> String {
    s.as_ref()
        .map(|s| format!("{:.1}", s.median * 1e3))
        .unwrap_or_else(|| "-".into())
}

fn pct(s: &Option<Spread>) -> String {
    s.as_ref()
        .map(|s| format!("{:.0}%", s.median * 100.0))
        .unwrap_or_else(|| "-".into())
}

/// A plain-text table (medians over repetitions).
pub fn summary_table(summary: &Summary) -> String {
    let header = [
        "strategy",
        "runs",
        "baseline MiB",
        "peak MiB",
        "loaded MiB",
        "after release MiB",
        "retained MiB",
        "released %",
        "latency ms",
        "load ms",
        "forward ms",
        "release ms",
        "retaining cycles",
        "processes",
        "checks",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for s in &summary.strategies {
        rows.push(vec![
            s.strategy.clone(),
            format!("{}/{}", s.runs_completed, s.runs),
            mib(&s.baseline_bytes),
            mib(&s.peak_bytes),
            mib(&s.loaded_bytes),
            mib(&s.after_release_bytes),
            mib(&s.retained_bytes),
            pct(&s.released_fraction),
            ms(&s.release_latency_s),
            ms(&s.load_time_s),
            ms(&s.forward_time_s),
            ms(&s.release_action_s),
            format!("{}/{}", s.cycles_retaining, s.cycles_total),
            format!("{}/{}", s.processes_retaining, s.runs),
            if s.checks_passed {
                "ok".into()
            } else {
                "FAILED".into()
            },
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (n, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        if n == 0 {
            let _ = writeln!(
                out,
                "{}",
                "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1))
            );
        }
    }
    let _ = writeln!(
        out,
        "\nretained MiB after each cycle (median over repetitions; retention = above {:.0} MiB):",
        summary.retention_threshold_bytes as f64 / MIB
    );
    let name_width = summary
        .strategies
        .iter()
        .map(|s| s.strategy.len())
        .max()
        .unwrap_or(0);
    for s in &summary.strategies {
        let cycles: Vec<String> = s
            .retained_by_cycle_bytes
            .iter()
            .map(|b| format!("{:>7.1}", b / MIB))
            .collect();
        let _ = writeln!(out, "  {:<name_width$}  {}", s.strategy, cycles.join(" "));
    }
    for r in &summary.runs {
        if let Some(e) = &r.error {
            let _ = writeln!(
                out,
                "run {} ({} repetition {}): {e}",
                r.run, r.strategy, r.repetition
            );
        }
    }
    out
}
