//! `verdict.json` and `verdict.md` of `memrel check`: formats a
//! [`VerdictReport`], computes nothing. Every row names its resource (host
//! RSS or VRAM of one CUDA device); comparisons with the baseline and the
//! scenario's absolute budgets get a table each; broken evidence (the errors
//! that make the check exit 2) and the runs left out lead the page.

use std::fmt::Write;

use anyhow::Result;

use crate::gate::{rate_cycles_needed, MetricVerdict, Per, VerdictReport, RATE_ALPHA, RATE_BAND};
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
        Some(v) if metric.starts_with("retention_rate") => format!("{:.0} %", v * 100.0),
        Some(v) => format!("{:.1} MiB", v / MIB),
    }
}

/// A row's value on one side: the rate with its counts, else the value.
fn side_value(
    v: &MetricVerdict,
    value_of: Option<f64>,
    retaining: Option<u64>,
    n: usize,
) -> String {
    match retaining {
        Some(hits) => format!("{} ({hits}/{n})", value(&v.metric, value_of)),
        None => value(&v.metric, value_of),
    }
}

fn icon(v: &MetricVerdict) -> &'static str {
    match v.verdict.as_str() {
        "regressed" | "over-budget" => "❌",
        "error" => "⛔",
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

/// What each verdict means and how much evidence a decision needs.
fn footer() -> String {
    let (rate_regressed, rate_no_change) = rate_cycles_needed();
    format!(
        "**How to read this.** Retained (after the last cycle), peak and retained slope: one value per run; release latency: one per timed cycle; retention rate: one per cycle (retaining or not). \
Values compare the means of the two sides with Welch's 95% interval of the difference (exact Student-t quantiles); the retention rate compares the shares of retaining cycles with Fisher's exact test and Newcombe's 95% interval.\n\n\
- `regressed` / `improved`: the whole interval lies beyond the noise band (max of the relative and absolute parts); for the retention rate, the change exceeds ±{band:.0} points with Fisher p < {alpha}, and the retaining cycles come from two runs or more. Two runs or more on each side are needed; with two runs a side the interval is wide (t = 12.7 at 1 degree of freedom, 4.3 at 2), so only a change far beyond the spread of the runs reaches it.\n\
- `no-change`: the whole interval lies inside the noise band. For the retention rate with no cycle retaining on either side that takes {rate_no_change} cycles a side.\n\
- `inconclusive`: neither: more runs (`--repeat`) or cycles (`--cycles`) would decide; it does not fail the check. A retention rate needs at least {rate_regressed} cycles a side (every one retaining against none) to reach `regressed`.\n\
- `over-budget`: the worst run exceeds a budget of the scenario's `[thresholds]` (exit 1).\n\
- `error`: the gate cannot judge (a budget with no observation, a strategy with no complete run): exit 2. A run of either side that failed, timed out, was killed or is incomplete is an error too, unless `--complete-runs-only` leaves it out (and the rows say so).\n\n\
A resource that was not measured is never judged as zero.",
        band = RATE_BAND * 100.0,
        alpha = RATE_ALPHA,
    )
}

/// GitHub-flavoured Markdown, ready for `$GITHUB_STEP_SUMMARY`.
pub fn verdict_markdown(report: &VerdictReport) -> String {
    let mut out = String::new();
    let headline = if !report.errors.is_empty() {
        "⛔ broken evidence, the gate cannot pass"
    } else if report.regressed {
        "❌ memory regression"
    } else {
        "✅ no memory regression"
    };
    let _ = writeln!(
        out,
        "### memrel check: {headline} (baseline `{}`)\n",
        report.baseline
    );
    if !report.errors.is_empty() {
        let _ = writeln!(out, "**errors** (exit 2)\n");
        for e in &report.errors {
            let _ = writeln!(out, "- {}", e.replace('\n', "\n  "));
        }
        let _ = writeln!(out);
    }
    if report.complete_runs_only && !report.broken_runs.is_empty() {
        let _ = writeln!(
            out,
            "**complete runs only**: these runs were left out and the rest judged\n"
        );
        for b in &report.broken_runs {
            let _ = writeln!(out, "- {b}");
        }
        let _ = writeln!(out);
    }
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
        let rate = v.rate.as_ref();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} → {} | {} |",
            v.scenario,
            v.strategy,
            v.resource.label(),
            v.metric,
            side_value(
                v,
                v.baseline_value,
                rate.map(|r| r.baseline_retaining),
                v.baseline_n
            ),
            side_value(v, v.new_value, rate.map(|r| r.new_retaining), v.new_n),
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
    let _ = writeln!(out, "\n{}", footer());
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
            errors: Vec::new(),
            broken_runs: Vec::new(),
            complete_runs_only: false,
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

    #[test]
    fn broken_evidence_leads_the_page_and_rates_show_their_counts() {
        let mut report = report();
        report.errors = vec!["1 run(s) failed\n  - scenario s, new run 2: failed: boom".into()];
        let md = verdict_markdown(&report);
        assert!(
            md.starts_with("### memrel check: ⛔ broken evidence, the gate cannot pass"),
            "{md}"
        );
        assert!(
            md.contains("**errors** (exit 2)\n\n- 1 run(s) failed\n    - scenario s, new run 2: failed: boom"),
            "{md}"
        );
        assert!(
            md.contains("| cuda-fixture | drop | VRAM cuda:0 | retention_rate | 100 % (6/6) | 100 % (6/6) | 0 % |"),
            "{md}"
        );
        // The footer says what each verdict means and what a decision needs.
        for needed in [
            "`error`",
            "`inconclusive`",
            "at least 4 cycles a side",
            "35 cycles a side",
        ] {
            assert!(md.contains(needed), "{needed}: {md}");
        }
    }
}
