//! Sleep and wake in people's units: the console/Markdown table of each
//! strategy's sleeps and wakes (median and range over runs and cycles), and
//! `sleep.csv`, one row per sleep/wake pair. Numbers come from
//! `metrics::sleep`; this only formats them.

use anyhow::Result;

use super::markdown::{Align, Table};
use crate::metrics::sleep::{by_strategy, StrategySleeps};
use crate::metrics::Summary;
use crate::stats::Spread;
use crate::textutil::mib;

pub const SLEEP_CSV_FILE: &str = "sleep.csv";

/// The table, or `None` when no run slept a model.
pub fn table(summary: &Summary) -> Option<Table> {
    let strategies = by_strategy(summary);
    if strategies.is_empty() {
        return None;
    }
    let mut t = Table::columns([
        ("strategy", Align::Left),
        ("pairs", Align::Right),
        ("sleep ms", Align::Right),
        ("wake ms", Align::Right),
        ("sleep GiB/s (of ceiling)", Align::Right),
        ("wake GiB/s (of ceiling)", Align::Right),
        ("VRAM asleep MiB (before flush)", Align::Right),
        ("host grown asleep MiB", Align::Right),
        ("host held after wake MiB", Align::Right),
        ("VRAM settle ms (late MiB)", Align::Right),
    ]);
    for s in &strategies {
        t.row(row(s));
    }
    Some(t)
}

fn row(s: &StrategySleeps) -> Vec<String> {
    let rate = |r: &Option<Spread>, f: &Option<Spread>| match (r, f) {
        (Some(r), Some(f)) => format!("{:.1} ({:.0} %)", r.median, f.median * 100.0),
        (Some(r), None) => format!("{:.1}", r.median),
        _ => "–".into(),
    };
    let vram = match (&s.vram_asleep_bytes, &s.vram_asleep_before_flush_bytes) {
        (Some(a), Some(b)) => format!("{} ({})", spread_mib(a), spread_mib(b)),
        (Some(a), None) => spread_mib(a),
        _ => "–".into(),
    };
    vec![
        s.strategy.clone(),
        s.pairs.to_string(),
        ms(&s.sleep_s),
        ms(&s.wake_s),
        rate(&s.sleep_gib_s, &s.sleep_ceiling_fraction),
        rate(&s.wake_gib_s, &s.wake_ceiling_fraction),
        vram,
        s.host_grown_asleep_bytes
            .as_ref()
            .map_or("–".into(), spread_mib),
        s.host_held_after_wake_bytes
            .as_ref()
            .map_or("–".into(), spread_mib),
    ]
}

/// `median (min–max)` in ms, or `median` alone over one value.
fn ms(s: &Option<Spread>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{:.1} ({:.1}–{:.1})",
            s.median * 1e3,
            s.min * 1e3,
            s.max * 1e3
        ),
        Some(s) => format!("{:.1}", s.median * 1e3),
        None => "–".into(),
    }
}

/// A spread of bytes in MiB: `416.0 (410.2–420.9)`, one value alone.
fn spread_mib(s: &Spread) -> String {
    if s.n > 1 {
        format!("{} ({}–{})", mib(s.median), mib(s.min), mib(s.max))
    } else {
        mib(s.median)
    }
}

/// What the console prints under the run's table; empty when no run slept.
pub fn console(summary: &Summary) -> String {
    match table(summary) {
        Some(t) => {
            let mut out = String::from(
                "\nsleep and wake per strategy (median (min–max) over runs and cycles; ceiling: pinned copies measured in the run):\n",
            );
            for line in t.aligned_lines() {
                out.push_str(&line);
                out.push('\n');
            }
            out
        }
        None => String::new(),
    }
}

/// The columns of sleep.csv.
const SLEEP_COLUMNS: [&str; 22] = [
    "run",
    "strategy",
    "cycle",
    "model",
    "mode",
    "sleep_s",
    "wake_s",
    "copied_bytes",
    "sleep_gib_s",
    "wake_gib_s",
    "ceiling_d2h_gib_s",
    "ceiling_h2d_gib_s",
    "sleep_ceiling_fraction",
    "wake_ceiling_fraction",
    "vram_asleep_before_flush_bytes",
    "vram_asleep_bytes",
    "host_grown_asleep_bytes",
    "host_held_after_wake_bytes",
    "vram_settle_s",
    "vram_late_bytes",
    "host_settle_s",
    "host_late_bytes",
];

/// `sleep.csv`: one row per sleep/wake pair of every run; `None` when no run slept.
pub fn csv(summary: &Summary) -> Result<Option<Vec<u8>>> {
    let any = !summary.runs.iter().all(|r| r.sleeps.is_empty());
    super::optional_csv(any, &SLEEP_COLUMNS, |w| {
        let opt = |v: Option<String>| v.unwrap_or_default();
        for run in &summary.runs {
            for p in &run.sleeps {
                w.write_record([
                    run.run.to_string(),
                    run.strategy.clone(),
                    p.cycle.to_string(),
                    opt(p.model.clone()),
                    opt(p.mode.clone()),
                    opt(p.sleep_s.map(|v| format!("{v:.6}"))),
                    opt(p.wake_s.map(|v| format!("{v:.6}"))),
                    opt(p.copied_bytes.map(|v| v.to_string())),
                    opt(p.sleep_gib_s.map(|v| format!("{v:.3}"))),
                    opt(p.wake_gib_s.map(|v| format!("{v:.3}"))),
                    opt(p.ceiling_d2h_gib_s.map(|v| format!("{v:.3}"))),
                    opt(p.ceiling_h2d_gib_s.map(|v| format!("{v:.3}"))),
                    opt(p.sleep_ceiling_fraction().map(|v| format!("{v:.4}"))),
                    opt(p.wake_ceiling_fraction().map(|v| format!("{v:.4}"))),
                    opt(p.vram_asleep_before_flush_bytes.map(|v| v.to_string())),
                    opt(p.vram_asleep_bytes.map(|v| v.to_string())),
                    opt(p.host_grown_asleep_bytes.map(|v| v.to_string())),
                    opt(p.host_held_after_wake_bytes.map(|v| v.to_string())),
                    opt(p.vram_settle_s.map(|v| format!("{v:.6}"))),
                    opt(p.vram_late_bytes.map(|v| v.to_string())),
                    opt(p.host_settle_s.map(|v| format!("{v:.6}"))),
                    opt(p.host_late_bytes.map(|v| v.to_string())),
                ])?;
            }
        }
        Ok(())
    })
}
