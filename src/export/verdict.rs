//! `verdict.json` and `verdict.md` of `memrel check`: formats a
//! [`VerdictReport`], computes nothing. Every row names its resource (host
//! RSS or VRAM of one CUDA device); comparisons with the baseline and the
//! scenario's absolute budgets get a table each.

use std::fmt::Write;

use anyhow::Result;

use crate::gate::{MetricVerdict, Per, VerdictReport};
use crate::textutil::MIB;

pub fn verdict_json(report: &VerdictReport) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(report)?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn value(metric: &str, v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if metric.starts_with("release_latency") => format!("{:.1} ms", v * 1e3),
        Some(v) if metric.starts_with("retained_slope") => format!("{:.1} MiB/cycle", v / MIB),
        Some(v) => format!("{:.1} MiB", v / MIB),
    }
}

fn icon(v: &MetricVerdict) -> &'static str {
    match v.verdict.as_str() {
        "regressed" | "over-budget" => "❌",
        "improved" => "✅",
        "no-change" => "➖",
        _ => "❔",
    }
}

/// `❌ regressed (note)`.
fn verdict_cell(v: &MetricVerdict) -> String {
    let note = if v.note.is_empty() {
        String::new()
    } else {
        format!(" ({})", v.note.replace('|', "\\|"))
    };
    format!("{} {}{note}", icon(v), v.verdict.as_str())
}

/// `2 runs` or `6 cycles, 2 runs`.
fn observations(n: usize, runs: usize, per: Per) -> String {
    match per {
        Per::Run => format!("{runs} runs"),
        Per::Cycle => format!("{n} cycles, {runs} runs"),
    }
}

/// GitHub-flavoured Markdown, ready for `$GITHUB_STEP_SUMMARY`.
pub fn verdict_markdown(report: &VerdictReport) -> String {
    let mut out = String::new();
    let headline = if report.regressed {
        "❌ memory regression"
    } else {
        "✅ no memory regression"
    };
    let _ = writeln!(
        out,
        "### memrel check: {headline} (baseline `{}`)\n",
        report.baseline
    );
    let (budgets, comparisons): (Vec<&MetricVerdict>, Vec<&MetricVerdict>) =
        report.verdicts.iter().partition(|v| v.budget.is_some());
    if !comparisons.is_empty() {
        let _ = writeln!(out, "| scenario | strategy | resource | metric | baseline | new | change | 95% interval | noise band | observations (baseline → new) | verdict |");
        let _ = writeln!(out, "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|");
    }
    for v in &comparisons {
        let interval = v
            .interval
            .map(|(lo, hi)| {
                format!(
                    "{} … {}",
                    value(&v.metric, Some(lo)),
                    value(&v.metric, Some(hi))
                )
            })
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} → {} | {} |",
            v.scenario,
            v.strategy,
            v.resource.label(),
            v.metric,
            value(&v.metric, v.baseline_median),
            value(&v.metric, v.new_median),
            value(&v.metric, v.change),
            interval,
            v.noise_band
                .map(|b| format!("±{}", value(&v.metric, Some(b))))
                .unwrap_or_else(|| "-".into()),
            observations(v.baseline_n, v.baseline_runs, v.per),
            observations(v.new_n, v.new_runs, v.per),
            verdict_cell(v),
        );
    }
    if !budgets.is_empty() {
        let _ = writeln!(
            out,
            "\n**budgets** (the scenario's `[thresholds]`, checked on the worst run)\n"
        );
        let _ = writeln!(
            out,
            "| scenario | strategy | resource | metric | key | budget | worst run | verdict |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---:|---:|---|");
    }
    for v in &budgets {
        let Some(budget) = &v.budget else { continue };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | `{}` | {} | {} | {} |",
            v.scenario,
            v.strategy,
            v.resource.label(),
            v.metric,
            budget.key,
            value(&v.metric, Some(budget.limit)),
            value(&v.metric, budget.worst),
            verdict_cell(v),
        );
    }
    if !report.warnings.is_empty() {
        let _ = writeln!(out, "\n**warnings**\n");
        for w in &report.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    let _ = writeln!(
        out,
        "\nRetained (after the last cycle), peak and retained slope: one value per run, medians over runs. Release latency: one value per timed cycle of every run. A verdict needs the whole 95% interval of the change beyond the noise band (max of the relative and absolute parts) and two runs or more on each side; otherwise it is no-change (inside the band) or inconclusive. A resource that was not measured is never judged as zero."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{budgets, compare, VERDICT_SCHEMA_VERSION};
    use crate::metrics::summarize;
    use crate::record::fixture::cuda_record;
    use crate::scenario::Thresholds;

    fn report() -> VerdictReport {
        let summary = summarize(&cuda_record());
        let mut t = Thresholds {
            retention_threshold_bytes: 16 << 20,
            noise_relative: 0.05,
            noise_absolute_bytes: 16 << 20,
            host: Default::default(),
            device: Default::default(),
        };
        t.device.max_retained_bytes = Some(300 << 20);
        let mut verdicts = budgets(&summary, &t);
        verdicts.extend(compare(&summary, &summary, &t));
        VerdictReport {
            schema_version: VERDICT_SCHEMA_VERSION,
            baseline: "gpu".into(),
            regressed: verdicts.iter().any(|v| v.verdict.fails()),
            verdicts,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn markdown_rows_name_the_resource_and_budgets_their_key() {
        let md = verdict_markdown(&report());
        assert!(md.contains("❌ memory regression"), "{md}");
        assert!(
            md.contains("| cuda-fixture | drop | VRAM cuda:0 | retained_bytes | 416.0 MiB | 416.0 MiB | 0.0 MiB |"),
            "{md}"
        );
        assert!(
            md.contains("| cuda-fixture | drop | host RSS | retained_bytes | 1.0 MiB |"),
            "{md}"
        );
        assert!(
            md.contains("| cuda-fixture | sync | VRAM cuda:0 | release_latency_s |"),
            "{md}"
        );
        assert!(
            md.contains("| 6 cycles, 2 runs → 6 cycles, 2 runs |"),
            "{md}"
        );
        assert!(
            md.contains("| cuda-fixture | drop | VRAM cuda:0 | retained_bytes (budget) | `max_retained_vram_mib` | 300.0 MiB | 416.0 MiB | ❌ over-budget"),
            "{md}"
        );
        // Budget rows are not mixed into the comparison table.
        let comparisons = md.split("**budgets**").next().unwrap();
        assert!(!comparisons.contains("(budget)"), "{md}");
    }
}
