//! `verdict.json` and `verdict.md` of `memrel check`: formats a
//! [`VerdictReport`], computes nothing. verdict.json holds every row;
//! verdict.md, what a pull request shows, leads with a headline (counts per
//! verdict), the errors that make the check exit 2 and only the rows that
//! are not `no-change`, then folds the full tables (comparisons with the
//! baseline, the scenario's absolute budgets) and how to read them into a
//! `<details>` block. Metric names and units come from the metric catalogue.

use std::fmt::Write;

use anyhow::Result;

use crate::gate::{
    rate_cycles_needed, GateMetric, MetricVerdict, Per, Verdict, VerdictReport, RATE_ALPHA,
    RATE_BAND,
};

/// The most lines verdict.md shows before its `<details>` block.
const SUMMARY_LINES: usize = 25;

pub fn verdict_json(report: &VerdictReport) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(report)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// GitHub-flavoured Markdown, ready for `$GITHUB_STEP_SUMMARY`.
pub fn verdict_markdown(report: &VerdictReport) -> String {
    let mut out = summary(report);
    let _ = writeln!(
        out,
        "\n<details><summary>All {} rows, and how to read them</summary>\n",
        report.verdicts.len()
    );
    out.push_str(&full_tables(report));
    let _ = writeln!(out, "\n{}\n\n</details>", footer());
    out
}

fn value(metric: GateMetric, v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| metric.unit().format(v))
}

/// A row's value on one side: the rate with its counts, else the value.
fn side_value(
    v: &MetricVerdict,
    value_of: Option<f64>,
    retaining: Option<u64>,
    n: usize,
) -> String {
    match retaining {
        Some(hits) => format!("{} ({hits}/{n})", value(v.metric, value_of)),
        None => value(v.metric, value_of),
    }
}

/// How verdict.md labels a row: a passing budget is `within budget`, a
/// retention rate with no retaining cycle on either side is `no retaining
/// cycle` (verdict.json keeps `inconclusive`: too few cycles to prove it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Verdict(Verdict),
    WithinBudget,
    NoRetainingCycle,
}

/// The order of the summary: what fails first, what is quiet last.
const ORDER: [Label; 9] = [
    Label::Verdict(Verdict::Regressed),
    Label::Verdict(Verdict::OverBudget),
    Label::Verdict(Verdict::Error),
    Label::Verdict(Verdict::Improved),
    Label::Verdict(Verdict::Inconclusive),
    Label::Verdict(Verdict::Skipped),
    Label::Verdict(Verdict::NoChange),
    Label::WithinBudget,
    Label::NoRetainingCycle,
];

fn label(v: &MetricVerdict) -> Label {
    let quiet_rate = v.rate.as_ref().is_some_and(|r| {
        v.metric == GateMetric::RetentionRate && r.baseline_retaining == 0 && r.new_retaining == 0
    });
    match v.verdict {
        Verdict::NoChange if v.budget.is_some() => Label::WithinBudget,
        Verdict::Inconclusive if quiet_rate => Label::NoRetainingCycle,
        verdict => Label::Verdict(verdict),
    }
}

impl Label {
    fn icon(self) -> &'static str {
        match self {
            Label::Verdict(Verdict::Regressed | Verdict::OverBudget) => "❌",
            Label::Verdict(Verdict::Error) => "⛔",
            Label::Verdict(Verdict::Improved) | Label::WithinBudget => "✅",
            Label::Verdict(Verdict::NoChange) | Label::NoRetainingCycle => "➖",
            Label::Verdict(Verdict::Inconclusive | Verdict::Skipped) => "❔",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Label::Verdict(v) => v.as_str(),
            Label::WithinBudget => "within budget",
            Label::NoRetainingCycle => "no retaining cycle",
        }
    }

    /// Quiet rows are left out of the summary (they are in the details).
    fn quiet(self) -> bool {
        matches!(
            self,
            Label::Verdict(Verdict::NoChange) | Label::WithinBudget | Label::NoRetainingCycle
        )
    }
}

/// A note fit for a table cell.
fn cell(note: &str) -> String {
    note.replace('|', "\\|")
}

/// `❌ regressed (note)`: the full table's verdict cell (verdict.json's verdict).
fn verdict_cell(v: &MetricVerdict) -> String {
    let note = if v.note.is_empty() {
        String::new()
    } else {
        format!(" ({})", cell(&v.note))
    };
    let shown = match label(v) {
        Label::NoRetainingCycle => Label::Verdict(v.verdict),
        l => l,
    };
    format!("{} {}{note}", shown.icon(), shown.text())
}

/// `2 runs` or `6 cycles, 2 runs`.
fn observations(n: usize, runs: usize, per: Per) -> String {
    match per {
        Per::Run => format!("{runs} runs"),
        Per::Cycle => format!("{n} cycles, {runs} runs"),
    }
}

/// The headline: the outcome and the count of rows per label.
fn headline(report: &VerdictReport) -> String {
    let labels: Vec<Label> = report.verdicts.iter().map(label).collect();
    let (icon, outcome) = if !report.errors.is_empty() {
        ("⛔", "broken evidence, the gate cannot pass")
    } else if report.regressed {
        ("❌", "memory regression")
    } else if labels.contains(&Label::Verdict(Verdict::Inconclusive)) {
        ("⚠", "no memory regression found, some rows inconclusive")
    } else {
        ("✅", "no memory regression")
    };
    let counts: Vec<String> = ORDER
        .iter()
        .filter_map(|l| {
            let n = labels.iter().filter(|x| *x == l).count();
            (n > 0).then(|| format!("{} {n} {}", l.icon(), l.text()))
        })
        .collect();
    format!(
        "### memrel check: {icon} {outcome} (baseline `{}`)\n\n**{} rows**: {}",
        report.baseline,
        labels.len(),
        counts.join(" · ")
    )
}

/// Everything before the `<details>` block: at most [`SUMMARY_LINES`] lines
/// unless the errors alone take more.
fn summary(report: &VerdictReport) -> String {
    let mut head = headline(report);
    head.push('\n');
    if !report.errors.is_empty() {
        head.push_str("\n**errors** (exit 2)\n\n");
        for e in &report.errors {
            let _ = writeln!(head, "- {}", e.replace('\n', "\n  "));
        }
    }
    if report.complete_runs_only && !report.broken_runs.is_empty() {
        head.push_str("\n**complete runs only**: these runs were left out and the rest judged\n\n");
        for b in &report.broken_runs {
            let _ = writeln!(head, "- {b}");
        }
    }
    let tail = tail(report);
    let mut rows: Vec<&MetricVerdict> = report
        .verdicts
        .iter()
        .filter(|v| !label(v).quiet())
        .collect();
    rows.sort_by_key(|v| ORDER.iter().position(|l| *l == label(v)));
    let used = head.lines().count() + tail.lines().count() + 4;
    let room = SUMMARY_LINES.saturating_sub(used).max(3);
    let mut out = head;
    if rows.is_empty() {
        out.push_str("\nEvery row is within the noise band or its budget.\n");
    } else {
        let shown = rows.len().min(room);
        let table = markdown_table(
            &[
                "verdict",
                "scenario",
                "strategy",
                "resource",
                "metric",
                "baseline → new",
                "why",
            ],
            &[false; 7],
            rows[..shown].iter().map(|v| summary_row(v)).collect(),
        );
        let _ = write!(out, "\n{table}");
        if shown < rows.len() {
            let _ = writeln!(
                out,
                "\n… and {} more rows in the details.",
                rows.len() - shown
            );
        }
    }
    out.push_str(&tail);
    out
}

/// One row of the summary table.
fn summary_row(v: &MetricVerdict) -> Vec<String> {
    let l = label(v);
    let (metric, values) = match &v.budget {
        Some(b) => (
            format!("{} (budget `{}`)", v.metric.human(), b.key),
            format!(
                "worst {}, budget {}",
                value(v.metric, b.worst),
                value(v.metric, Some(b.limit))
            ),
        ),
        None => (
            v.metric.human().to_string(),
            format!(
                "{} → {}",
                value(v.metric, v.baseline_value),
                value(v.metric, v.new_value)
            ),
        ),
    };
    vec![
        format!("{} {}", l.icon(), l.text()),
        v.scenario.clone(),
        v.strategy.clone(),
        v.resource.label(),
        metric,
        values,
        cell(&v.note),
    ]
}

/// What to do about an intended change, and the warnings.
fn tail(report: &VerdictReport) -> String {
    let mut out = String::new();
    let changed = |v: &&MetricVerdict| matches!(v.verdict, Verdict::Regressed | Verdict::Improved);
    let mut scenarios: Vec<&str> = Vec::new();
    for v in report.verdicts.iter().filter(changed) {
        if !scenarios.contains(&v.scenario.as_str()) {
            scenarios.push(&v.scenario);
        }
    }
    for s in &scenarios {
        let _ = writeln!(
            out,
            "\nIf the change is intended, accept it by re-saving the baseline: `memrel run --scenario {s} --save-baseline {}`.",
            report.baseline
        );
    }
    if report
        .verdicts
        .iter()
        .any(|v| v.verdict == Verdict::OverBudget)
    {
        out.push_str("\nA budget is absolute: to accept more, raise its key in the scenario's `[thresholds]`.\n");
    }
    if !report.warnings.is_empty() {
        out.push_str("\n**warnings**\n\n");
        for w in &report.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    out
}

/// The full tables: every comparison row, then every budget row.
fn full_tables(report: &VerdictReport) -> String {
    let (budgets, comparisons): (Vec<&MetricVerdict>, Vec<&MetricVerdict>) =
        report.verdicts.iter().partition(|v| v.budget.is_some());
    let mut out = String::new();
    if !comparisons.is_empty() {
        out.push_str(&markdown_table(
            &[
                "scenario",
                "strategy",
                "resource",
                "metric",
                "baseline",
                "new",
                "change",
                "95% interval",
                "noise band",
                "observations (baseline → new)",
                "verdict",
            ],
            &[
                false, false, false, false, true, true, true, true, true, true, false,
            ],
            comparisons.iter().map(|v| comparison_row(v)).collect(),
        ));
    }
    if !budgets.is_empty() {
        out.push_str("\n**budgets** (the scenario's `[thresholds]`, checked on the worst run)\n\n");
        out.push_str(&markdown_table(
            &[
                "scenario",
                "strategy",
                "resource",
                "metric",
                "key",
                "budget",
                "worst run",
                "verdict",
            ],
            &[false, false, false, false, false, true, true, false],
            budgets.iter().filter_map(|v| budget_row(v)).collect(),
        ));
    }
    out
}

fn comparison_row(v: &MetricVerdict) -> Vec<String> {
    let interval = v.interval.map_or_else(
        || "-".into(),
        |(lo, hi)| {
            format!(
                "{} … {}",
                value(v.metric, Some(lo)),
                value(v.metric, Some(hi))
            )
        },
    );
    let rate = v.rate.as_ref();
    vec![
        v.scenario.clone(),
        v.strategy.clone(),
        v.resource.label(),
        v.metric.human().to_string(),
        side_value(
            v,
            v.baseline_value,
            rate.map(|r| r.baseline_retaining),
            v.baseline_n,
        ),
        side_value(v, v.new_value, rate.map(|r| r.new_retaining), v.new_n),
        value(v.metric, v.change),
        interval,
        v.noise_band
            .map_or_else(|| "-".into(), |b| format!("±{}", value(v.metric, Some(b)))),
        format!(
            "{} → {}",
            observations(v.baseline_n, v.baseline_runs, v.per),
            observations(v.new_n, v.new_runs, v.per)
        ),
        verdict_cell(v),
    ]
}

fn budget_row(v: &MetricVerdict) -> Option<Vec<String>> {
    let budget = v.budget.as_ref()?;
    Some(vec![
        v.scenario.clone(),
        v.strategy.clone(),
        v.resource.label(),
        v.metric.human().to_string(),
        format!("`{}`", budget.key),
        value(v.metric, Some(budget.limit)),
        value(v.metric, budget.worst),
        verdict_cell(v),
    ])
}

/// A GitHub-flavoured Markdown table; `right[i]` right-aligns column `i`.
/// The one place verdict.md builds a table.
fn markdown_table(header: &[&str], right: &[bool], rows: Vec<Vec<String>>) -> String {
    let mut out = format!("| {} |\n|", header.join(" | "));
    for r in right {
        out.push_str(if *r { "---:|" } else { "---|" });
    }
    out.push('\n');
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// What each verdict means and how much evidence a decision needs.
fn footer() -> String {
    let (rate_regressed, rate_no_change) = rate_cycles_needed();
    format!(
        "**How to read this.** Retained (after the last cycle), peak and growth per cycle: one value per run; release latency: one per timed cycle; retention rate: one per cycle (retaining or not). \
Values compare the means of the two sides with Welch's 95% interval of the difference (exact Student-t quantiles); the retention rate compares the shares of retaining cycles with Fisher's exact test and Newcombe's 95% interval.\n\n\
- `regressed` / `improved`: the whole interval lies beyond the noise band (max of the relative and absolute parts); for the retention rate, the change exceeds ±{band:.0} points with Fisher p < {alpha}, and the retaining cycles come from two runs or more. Two runs or more on each side are needed; with two runs a side the interval is wide (t = 12.7 at 1 degree of freedom, 4.3 at 2), so only a change far beyond the spread of the runs reaches it.\n\
- `no-change`: the whole interval lies inside the noise band.\n\
- `no retaining cycle` (the summary's name; verdict.json says `inconclusive`): a retention rate with no cycle retaining on either side. Nothing changed that the cycles could show, but proving the rate within ±{band:.0} points takes {rate_no_change} cycles a side (`--cycles`, `--repeat`).\n\
- `inconclusive`: neither: more runs (`--repeat`) or cycles (`--cycles`) would decide; it does not fail the check. A retention rate needs at least {rate_regressed} cycles a side (every one retaining against none) to reach `regressed`.\n\
- `over-budget` / `within budget`: the worst run exceeds, or stays within, a budget of the scenario's `[thresholds]` (over: exit 1).\n\
- `error`: the gate cannot judge (a budget with no observation, a strategy with no complete run): exit 2. A run of either side that failed, timed out, was killed or is incomplete is an error too, unless `--complete-runs-only` leaves it out (and the rows say so).\n\n\
A resource that was not measured is never judged as zero.",
        band = RATE_BAND * 100.0,
        alpha = RATE_ALPHA,
    )
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
