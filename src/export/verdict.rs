//! `verdict.json` and `verdict.md` of `memrel check`: formats a
//! [`VerdictReport`], computes nothing. verdict.json holds every row;
//! verdict.md, what a pull request shows, leads with a headline (counts per
//! verdict), the errors that make the check exit 2 and only the rows that
//! are not `no-change`, then folds the full tables (comparisons with the
//! baseline, the scenario's absolute budgets) and how to read them into a
//! `<details>` block. Metric names and units come from the metric catalogue.

use crate::metrics::ResourceFacts;
use std::fmt::Write;

use anyhow::Result;

use super::markdown::{Align, Table};
use crate::gate::{
    rate_cycles_needed, MetricVerdict, Per, Verdict, VerdictReport, RATE_ALPHA, RATE_BAND,
};
use crate::machine::describe;
use crate::metrics::catalogue::MemoryMetric;

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

fn value(metric: MemoryMetric, v: Option<f64>) -> String {
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

/// How verdict.md labels a row: a passing budget is `within budget`; a
/// retention rate with no retaining cycle on either side is `no retaining
/// cycle`, one with every cycle retaining on both sides `every cycle
/// retaining` (verdict.json keeps `inconclusive`: too few cycles to prove
/// the rate within the band, but nothing the cycles could show changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Verdict(Verdict),
    WithinBudget,
    NoRetainingCycle,
    EveryCycleRetaining,
}

/// The order of the summary: what fails first, what is quiet last.
const ORDER: [Label; 10] = [
    Label::Verdict(Verdict::Regressed),
    Label::Verdict(Verdict::OverBudget),
    Label::Verdict(Verdict::Error),
    Label::Verdict(Verdict::Improved),
    Label::Verdict(Verdict::Inconclusive),
    Label::Verdict(Verdict::Skipped),
    Label::Verdict(Verdict::NoChange),
    Label::WithinBudget,
    Label::NoRetainingCycle,
    Label::EveryCycleRetaining,
];

fn label(v: &MetricVerdict) -> Label {
    let rate = v
        .rate
        .as_ref()
        .filter(|_| v.metric == MemoryMetric::RetentionRate);
    let none = rate.is_some_and(|r| r.baseline_retaining == 0 && r.new_retaining == 0);
    let all = rate.is_some_and(|r| {
        r.baseline_retaining as usize == v.baseline_n && r.new_retaining as usize == v.new_n
    });
    match v.verdict {
        Verdict::NoChange if v.budget.is_some() => Label::WithinBudget,
        Verdict::Inconclusive if none => Label::NoRetainingCycle,
        Verdict::Inconclusive if all => Label::EveryCycleRetaining,
        verdict => Label::Verdict(verdict),
    }
}

impl Label {
    fn icon(self) -> &'static str {
        match self {
            Label::Verdict(Verdict::Regressed | Verdict::OverBudget) => "❌",
            Label::Verdict(Verdict::Error) => "⛔",
            Label::Verdict(Verdict::Improved) | Label::WithinBudget => "✅",
            Label::Verdict(Verdict::NoChange)
            | Label::NoRetainingCycle
            | Label::EveryCycleRetaining => "➖",
            Label::Verdict(Verdict::Inconclusive | Verdict::Skipped) => "❔",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Label::Verdict(v) => v.as_str(),
            Label::WithinBudget => "within budget",
            Label::NoRetainingCycle => "no retaining cycle",
            Label::EveryCycleRetaining => "every cycle retaining",
        }
    }

    /// Quiet rows are left out of the summary (they are in the details).
    fn quiet(self) -> bool {
        matches!(
            self,
            Label::Verdict(Verdict::NoChange)
                | Label::WithinBudget
                | Label::NoRetainingCycle
                | Label::EveryCycleRetaining
        )
    }
}

/// `❌ regressed (note)`: the full table's verdict cell. A retention rate at
/// 0 % or 100 % on both sides reads as its label, and says what verdict.json
/// calls it and what it would take to decide (the note).
fn verdict_cell(v: &MetricVerdict) -> String {
    let shown = label(v);
    let note = match shown {
        Label::NoRetainingCycle | Label::EveryCycleRetaining => {
            format!(" (verdict.json: {}; {})", v.verdict.as_str(), v.note)
        }
        _ if v.note.is_empty() => String::new(),
        _ => format!(" ({})", v.note),
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
    let mut line = format!(
        "### memrel check: {icon} {outcome} (baseline `{}`)\n\n**{} rows**: {}",
        report.baseline,
        labels.len(),
        counts.join(" · ")
    );
    if report.any_machine {
        for o in &report.other_machines {
            let _ = write!(
                line,
                "\n\n⚠ judged across machines (--any-machine): {}",
                o.sentence()
            );
        }
    }
    if !report.machine_differences.is_empty() {
        let _ = write!(
            line,
            "\n\n⚠ machine differs from the baseline's: {}",
            describe(&report.machine_differences)
        );
    }
    line
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
            let _ = writeln!(head, "- {b}{}", b.stderr_lines("  "));
        }
    }
    let tail = tail(report);
    let mut rows: Vec<&MetricVerdict> = report
        .verdicts
        .iter()
        .filter(|v| !label(v).quiet())
        .collect();
    rows.sort_by_key(|v| ORDER.iter().position(|l| *l == label(v)));
    // A blank line and the header before the table, a blank line after it.
    let fixed = head.lines().count() + tail.lines().count() + 4;
    let room = SUMMARY_LINES.saturating_sub(fixed);
    // Two more lines say how many rows were left for the details.
    let shown = if rows.len() <= room {
        rows.len()
    } else {
        // At least three rows, never more than there are (a long list of
        // errors, stderr tails among them, can leave no room at all).
        room.saturating_sub(2).max(3).min(rows.len())
    };
    let mut out = head;
    if rows.is_empty() {
        out.push_str("\nNothing to show: every row is `no-change`, within its budget, or a retention rate at 0 % or 100 % on both sides.\n");
    } else {
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
        v.note.clone(),
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
        // The command the gate built for it (`hint::Hint`): the one that
        // made these results, with the runs a baseline needs.
        let Some(remake) = report.remake.iter().find(|r| r.scenario == *s) else {
            continue;
        };
        let _ = writeln!(
            out,
            "\nIf the change is intended, accept it by re-saving the baseline: `{}`.",
            remake.command
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

/// A GitHub-flavoured Markdown table through the one table writer;
/// `right[i]` right-aligns column `i`.
fn markdown_table(header: &[&str], right: &[bool], rows: Vec<Vec<String>>) -> String {
    let align: Vec<Align> = right
        .iter()
        .map(|&r| if r { Align::Right } else { Align::Left })
        .collect();
    let mut table = Table::new(header.iter().copied()).align(&align);
    for row in rows {
        table.row(row);
    }
    table.markdown()
}

/// What each verdict means and how much evidence a decision needs.
fn footer() -> String {
    let (rate_regressed, rate_no_change) = rate_cycles_needed();
    format!(
        "**How to read this.** Retained (after the last cycle), peak and growth per cycle: one value per run; release latency: one per timed cycle; settle time and late bytes: one per release edge; retention rate: one per cycle (retaining or not). \
Values compare the means of the two sides with Welch's 95% interval of the difference (exact Student-t quantiles); the retention rate compares the shares of retaining cycles with Fisher's exact test and Newcombe's 95% interval.\n\n\
- `regressed` / `improved`: the whole interval lies beyond the noise band (max of the relative and absolute parts); for the retention rate, the change exceeds ±{band:.0} points with Fisher p < {alpha}, and the retaining cycles come from two runs or more. Two runs or more on each side are needed; with two runs a side the interval is wide (t = 12.7 at 1 degree of freedom, 4.3 at 2), so only a change far beyond the spread of the runs reaches it.\n\
- `no-change`: the whole interval lies inside the noise band.\n\
- `no retaining cycle` / `every cycle retaining` (the summary's names; verdict.json says `inconclusive`): a retention rate with no cycle retaining on either side, or every cycle on both. Nothing changed that the cycles could show, but proving the rate within ±{band:.0} points takes {rate_no_change} cycles a side (`--cycles`, `--repeat`).\n\
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
    use std::path::PathBuf;

    use super::*;
    use crate::gate::{
        broken_runs, budgets, compare, complete_only, errors, BrokenRuns, Side,
        VERDICT_SCHEMA_VERSION,
    };
    use crate::metrics::{summarize, Summary};
    use crate::record::fixture::{cuda_record, record, run, with_vram};
    use crate::record::{Record, RunStatus};
    use crate::scenario::Thresholds;

    /// The report `memrel check` makes of `new` against `baseline`.
    fn report(baseline: &Record, new: &Record, t: &Thresholds) -> VerdictReport {
        let (base, new): (Summary, Summary) = (summarize(baseline), summarize(new));
        let broken: Vec<_> = broken_runs(&new, Side::New)
            .into_iter()
            .map(|b| (b, PathBuf::from("results/s/1")))
            .collect();
        let new = complete_only(&new);
        let mut verdicts = budgets(&new, t);
        verdicts.extend(compare(&base, &new, t));
        VerdictReport {
            schema_version: VERDICT_SCHEMA_VERSION,
            baseline: "gpu".into(),
            regressed: verdicts.iter().any(|v| v.verdict.fails()),
            errors: errors(&verdicts, &broken, BrokenRuns::Fail),
            gaps: Vec::new(),
            broken_runs: broken.into_iter().map(|(b, _)| b).collect(),
            complete_runs_only: false,
            verdicts,
            warnings: Vec::new(),
            machine_differences: Vec::new(),
            other_machines: Vec::new(),
            any_machine: false,
            remake: vec![crate::gate::Remake {
                scenario: "cuda-fixture".to_string(),
                command: "memrel run --scenario cuda-fixture --repeat 3 --save-baseline gpu"
                    .to_string(),
            }],
        }
    }

    /// verdict.md up to its `<details>` block: what a pull request shows.
    fn summary_of(report: &VerdictReport) -> String {
        let md = verdict_markdown(report);
        let cut = md.find("<details>").unwrap();
        assert!(md[..cut].lines().count() <= SUMMARY_LINES, "{md}");
        md[..cut].to_string()
    }

    /// `cuda_record()` where `sync`'s VRAM stays 416 MiB above the baseline.
    fn sync_keeping_vram() -> Record {
        let mut record = cuda_record();
        for r in &mut record.runs {
            if r.meta.strategy == "sync" {
                *r = with_vram(
                    run(r.meta.run, "sync", r.meta.repetition, &[1, 1, 1]),
                    678,
                    1094,
                    &[416; 3],
                    586,
                );
            }
        }
        record
    }

    #[test]
    fn a_healthy_change_shows_a_headline_and_folds_the_tables() {
        let mut t = Thresholds::fixture();
        t.budgets_mut(crate::metrics::Resource::Device(0))
            .max_retained_bytes = Some(500 << 20);
        let md = verdict_markdown(&report(&cuda_record(), &cuda_record(), &t));
        insta::assert_snapshot!(md, @r#"
### memrel check: ✅ no memory regression (baseline `gpu`)

**45 rows**: ➖ 36 no-change · ✅ 3 within budget · ➖ 5 no retaining cycle · ➖ 1 every cycle retaining

Nothing to show: every row is `no-change`, within its budget, or a retention rate at 0 % or 100 % on both sides.

<details><summary>All 45 rows, and how to read them</summary>

| scenario | strategy | resource | metric | baseline | new | change | 95% interval | noise band | observations (baseline → new) | verdict |
|---|---|---|---|---:|---:|---:|---:|---:|---:|---|
| cuda-fixture | drop | VRAM cuda:0 | retained | 416.0 MiB | 416.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±20.8 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | drop | VRAM cuda:0 | peak | 1094.0 MiB | 1094.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±54.7 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | drop | VRAM cuda:0 | growth per cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle … 0.0 MiB/cycle | ±16.0 MiB/cycle | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | drop | VRAM cuda:0 | release latency | - | - | - | - | - | 0 cycles, 0 runs → 0 cycles, 0 runs | ➖ no-change (no observations on either side: no release to time (each cycle gave back less than the retention threshold): see retained_bytes) |
| cuda-fixture | drop | VRAM cuda:0 | retention rate | 100 % (6/6) | 100 % (6/6) | 0 % | -39 % … 39 % | ±10 % | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ every cycle retaining (verdict.json: inconclusive; 6 of 6 cycles retaining → 6 of 6, Fisher p = 1.000: not significant, and the interval crosses the ±10 point band: more cycles (--cycles, --repeat)) |
| cuda-fixture | drop | VRAM cuda:0 | settle time | 0.0 ms | 0.0 ms | 0.0 ms | 0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | drop | VRAM cuda:0 | late bytes | 0.0 MiB | 0.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | drop | host RSS | retained | 1.0 MiB | 1.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | drop | host RSS | peak | 110.0 MiB | 110.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | drop | host RSS | growth per cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle … 0.0 MiB/cycle | ±16.0 MiB/cycle | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | drop | host RSS | release latency | 0.0 ms | 0.0 ms | 0.0 ms | -0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | drop | host RSS | retention rate | 0 % (0/6) | 0 % (0/6) | 0 % | -39 % … 39 % | ±10 % | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no retaining cycle (verdict.json: inconclusive; 0 of 6 cycles retaining → 0 of 6, Fisher p = 1.000: not significant, and the interval crosses the ±10 point band: more cycles (--cycles, --repeat)) |
| cuda-fixture | drop | host RSS | settle time | 0.0 ms | 0.0 ms | 0.0 ms | 0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | drop | host RSS | late bytes | 0.0 MiB | 0.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | sync | VRAM cuda:0 | retained | 0.0 MiB | 0.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | sync | VRAM cuda:0 | peak | 1094.0 MiB | 1094.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±54.7 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | sync | VRAM cuda:0 | growth per cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle … 0.0 MiB/cycle | ±16.0 MiB/cycle | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | sync | VRAM cuda:0 | release latency | 0.0 ms | 0.0 ms | 0.0 ms | -0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | sync | VRAM cuda:0 | retention rate | 0 % (0/6) | 0 % (0/6) | 0 % | -39 % … 39 % | ±10 % | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no retaining cycle (verdict.json: inconclusive; 0 of 6 cycles retaining → 0 of 6, Fisher p = 1.000: not significant, and the interval crosses the ±10 point band: more cycles (--cycles, --repeat)) |
| cuda-fixture | sync | VRAM cuda:0 | settle time | 0.0 ms | 0.0 ms | 0.0 ms | 0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | sync | VRAM cuda:0 | late bytes | 0.0 MiB | 0.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | sync | host RSS | retained | 1.0 MiB | 1.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | sync | host RSS | peak | 110.0 MiB | 110.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | sync | host RSS | growth per cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle … 0.0 MiB/cycle | ±16.0 MiB/cycle | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | sync | host RSS | release latency | 0.0 ms | 0.0 ms | 0.0 ms | -0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | sync | host RSS | retention rate | 0 % (0/6) | 0 % (0/6) | 0 % | -39 % … 39 % | ±10 % | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no retaining cycle (verdict.json: inconclusive; 0 of 6 cycles retaining → 0 of 6, Fisher p = 1.000: not significant, and the interval crosses the ±10 point band: more cycles (--cycles, --repeat)) |
| cuda-fixture | sync | host RSS | settle time | 0.0 ms | 0.0 ms | 0.0 ms | 0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | sync | host RSS | late bytes | 0.0 MiB | 0.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | context-release | VRAM cuda:0 | retained | -678.0 MiB | -678.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±33.9 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | context-release | VRAM cuda:0 | peak | 1094.0 MiB | 1094.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±54.7 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | context-release | VRAM cuda:0 | growth per cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle … 0.0 MiB/cycle | ±16.0 MiB/cycle | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | context-release | VRAM cuda:0 | release latency | 0.0 ms | 0.0 ms | 0.0 ms | -0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | context-release | VRAM cuda:0 | retention rate | 0 % (0/6) | 0 % (0/6) | 0 % | -39 % … 39 % | ±10 % | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no retaining cycle (verdict.json: inconclusive; 0 of 6 cycles retaining → 0 of 6, Fisher p = 1.000: not significant, and the interval crosses the ±10 point band: more cycles (--cycles, --repeat)) |
| cuda-fixture | context-release | VRAM cuda:0 | settle time | 0.0 ms | 0.0 ms | 0.0 ms | 0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | context-release | VRAM cuda:0 | late bytes | 0.0 MiB | 0.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | context-release | host RSS | retained | 1.0 MiB | 1.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | context-release | host RSS | peak | 110.0 MiB | 110.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | context-release | host RSS | growth per cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle | 0.0 MiB/cycle … 0.0 MiB/cycle | ±16.0 MiB/cycle | 2 runs → 2 runs | ➖ no-change |
| cuda-fixture | context-release | host RSS | release latency | 0.0 ms | 0.0 ms | 0.0 ms | -0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | context-release | host RSS | retention rate | 0 % (0/6) | 0 % (0/6) | 0 % | -39 % … 39 % | ±10 % | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no retaining cycle (verdict.json: inconclusive; 0 of 6 cycles retaining → 0 of 6, Fisher p = 1.000: not significant, and the interval crosses the ±10 point band: more cycles (--cycles, --repeat)) |
| cuda-fixture | context-release | host RSS | settle time | 0.0 ms | 0.0 ms | 0.0 ms | 0.0 ms … 0.0 ms | ±10.0 ms | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |
| cuda-fixture | context-release | host RSS | late bytes | 0.0 MiB | 0.0 MiB | 0.0 MiB | 0.0 MiB … 0.0 MiB | ±16.0 MiB | 6 cycles, 2 runs → 6 cycles, 2 runs | ➖ no-change |

**budgets** (the scenario's `[thresholds]`, checked on the worst run)

| scenario | strategy | resource | metric | key | budget | worst run | verdict |
|---|---|---|---|---|---:|---:|---|
| cuda-fixture | drop | VRAM cuda:0 | retained | `max_retained_vram_mib` | 500.0 MiB | 416.0 MiB | ✅ within budget (max_retained_vram_mib = 500.0 MiB, worst of 2 runs 416.0 MiB) |
| cuda-fixture | sync | VRAM cuda:0 | retained | `max_retained_vram_mib` | 500.0 MiB | 0.0 MiB | ✅ within budget (max_retained_vram_mib = 500.0 MiB, worst of 2 runs 0.0 MiB) |
| cuda-fixture | context-release | VRAM cuda:0 | retained | `max_retained_vram_mib` | 500.0 MiB | -678.0 MiB | ✅ within budget (max_retained_vram_mib = 500.0 MiB, worst of 2 runs -678.0 MiB) |

**How to read this.** Retained (after the last cycle), peak and growth per cycle: one value per run; release latency: one per timed cycle; settle time and late bytes: one per release edge; retention rate: one per cycle (retaining or not). Values compare the means of the two sides with Welch's 95% interval of the difference (exact Student-t quantiles); the retention rate compares the shares of retaining cycles with Fisher's exact test and Newcombe's 95% interval.

- `regressed` / `improved`: the whole interval lies beyond the noise band (max of the relative and absolute parts); for the retention rate, the change exceeds ±10 points with Fisher p < 0.05, and the retaining cycles come from two runs or more. Two runs or more on each side are needed; with two runs a side the interval is wide (t = 12.7 at 1 degree of freedom, 4.3 at 2), so only a change far beyond the spread of the runs reaches it.
- `no-change`: the whole interval lies inside the noise band.
- `no retaining cycle` / `every cycle retaining` (the summary's names; verdict.json says `inconclusive`): a retention rate with no cycle retaining on either side, or every cycle on both. Nothing changed that the cycles could show, but proving the rate within ±10 points takes 35 cycles a side (`--cycles`, `--repeat`).
- `inconclusive`: neither: more runs (`--repeat`) or cycles (`--cycles`) would decide; it does not fail the check. A retention rate needs at least 4 cycles a side (every one retaining against none) to reach `regressed`.
- `over-budget` / `within budget`: the worst run exceeds, or stays within, a budget of the scenario's `[thresholds]` (over: exit 1).
- `error`: the gate cannot judge (a budget with no observation, a strategy with no complete run): exit 2. A run of either side that failed, timed out, was killed or is incomplete is an error too, unless `--complete-runs-only` leaves it out (and the rows say so).

A resource that was not measured is never judged as zero.

</details>
"#);
    }

    #[test]
    fn a_regression_leads_with_its_rows_and_how_to_accept_it() {
        let md = summary_of(&report(
            &cuda_record(),
            &sync_keeping_vram(),
            &Thresholds::fixture(),
        ));
        insta::assert_snapshot!(md, @r#"
### memrel check: ❌ memory regression (baseline `gpu`)

**42 rows**: ❌ 2 regressed · ❔ 1 inconclusive · ➖ 34 no-change · ➖ 4 no retaining cycle · ➖ 1 every cycle retaining

| verdict | scenario | strategy | resource | metric | baseline → new | why |
|---|---|---|---|---|---|---|
| ❌ regressed | cuda-fixture | sync | VRAM cuda:0 | retained | 0.0 MiB → 416.0 MiB |  |
| ❌ regressed | cuda-fixture | sync | VRAM cuda:0 | retention rate | 0 % → 100 % | 0 of 6 cycles retaining → 6 of 6, Fisher p = 0.002 |
| ❔ inconclusive | cuda-fixture | sync | VRAM cuda:0 | release latency | - → - | no observations in the new runs: no release to time (each cycle gave back less than the retention threshold): see retained_bytes |

If the change is intended, accept it by re-saving the baseline: `memrel run --scenario cuda-fixture --repeat 3 --save-baseline gpu`.
"#);
    }

    #[test]
    fn a_budget_failure_names_its_key_and_what_to_raise() {
        let mut t = Thresholds::fixture();
        t.budgets_mut(crate::metrics::Resource::Device(0))
            .max_retained_bytes = Some(300 << 20);
        let md = summary_of(&report(&cuda_record(), &cuda_record(), &t));
        insta::assert_snapshot!(md, @r#"
### memrel check: ❌ memory regression (baseline `gpu`)

**45 rows**: ❌ 1 over-budget · ➖ 36 no-change · ✅ 2 within budget · ➖ 5 no retaining cycle · ➖ 1 every cycle retaining

| verdict | scenario | strategy | resource | metric | baseline → new | why |
|---|---|---|---|---|---|---|
| ❌ over-budget | cuda-fixture | drop | VRAM cuda:0 | retained (budget `max_retained_vram_mib`) | worst 416.0 MiB, budget 300.0 MiB | max_retained_vram_mib = 300.0 MiB, worst of 2 runs 416.0 MiB |

A budget is absolute: to accept more, raise its key in the scenario's `[thresholds]`.
"#);
    }

    #[test]
    fn broken_evidence_leads_the_page_with_its_errors() {
        let mut broken = record();
        for i in [1, 3] {
            broken.runs[i].meta.status = RunStatus::Failed;
            broken.runs[i].meta.error = Some("worker exited with status 1".into());
        }
        let mut t = Thresholds::fixture();
        t.budgets_mut(crate::metrics::Resource::Host).max_peak_bytes = Some(200 << 20);
        let md = summary_of(&report(&record(), &broken, &t));
        insta::assert_snapshot!(md, @r#"
### memrel check: ⛔ broken evidence, the gate cannot pass (baseline `gpu`)

**16 rows**: ⛔ 8 error · ❔ 1 inconclusive · ➖ 6 no-change · ✅ 1 within budget

**errors** (exit 2)

- 2 run(s) failed, timed out, were killed or are incomplete, so their evidence is broken:
    - scenario fixture, new run 2 (malloc-trim repetition 1): failed: worker exited with status 1 (in results/s/1)
    - scenario fixture, new run 4 (malloc-trim repetition 2): failed: worker exited with status 1 (in results/s/1)
  fix the runs (their errors above; timeout_s in the scenario), or pass --complete-runs-only to judge only the complete runs
- scenario fixture: budget max_peak_mib (host) was not checked for malloc-trim: no run has a value of it (see the runs' errors and checks)
- scenario fixture, strategy malloc-trim: no complete run of this strategy in the new runs

| verdict | scenario | strategy | resource | metric | baseline → new | why |
|---|---|---|---|---|---|---|
| ⛔ error | fixture | malloc-trim | host RSS | peak (budget `max_peak_mib`) | worst -, budget 200.0 MiB | max_peak_mib = 200.0 MiB not checked: no run has a value of it (see the runs' errors and checks) |
| ⛔ error | fixture | malloc-trim | host RSS | retained | - → - | no complete run of this strategy in the new runs |
| ⛔ error | fixture | malloc-trim | host RSS | peak | - → - | no complete run of this strategy in the new runs |
| ⛔ error | fixture | malloc-trim | host RSS | growth per cycle | - → - | no complete run of this strategy in the new runs |
| ⛔ error | fixture | malloc-trim | host RSS | release latency | - → - | no complete run of this strategy in the new runs |
| ⛔ error | fixture | malloc-trim | host RSS | retention rate | - → - | no complete run of this strategy in the new runs |
| ⛔ error | fixture | malloc-trim | host RSS | settle time | - → - | no complete run of this strategy in the new runs |
| ⛔ error | fixture | malloc-trim | host RSS | late bytes | - → - | no complete run of this strategy in the new runs |
| ❔ inconclusive | fixture | drop | host RSS | retention rate | 50 % → 50 % | 3 of 6 cycles retaining → 3 of 6, Fisher p = 1.000: not significant, and the interval crosses the ±10 point band: more cycles (--cycles, --repeat) |
"#);
    }

    #[test]
    fn a_broken_runs_last_20_stderr_lines_are_in_both_verdict_files() {
        let mut broken = record();
        broken.runs[1].meta.status = RunStatus::Failed;
        broken.runs[1].meta.error = Some("the program exited with code 1".into());
        broken.runs[1].meta.stderr_tail = (1..=25).map(|i| format!("line {i}\n")).collect();
        let t = Thresholds::fixture();
        let mut r = report(&record(), &broken, &t);
        let summary = summarize(&broken);
        let mut runs = broken_runs(&summary, Side::New);
        crate::gate::attach_stderr(&mut runs, &broken);
        let broken_in: Vec<_> = runs
            .iter()
            .map(|b| (b.clone(), PathBuf::from("results/s/1")))
            .collect();
        r.errors = errors(&r.verdicts, &broken_in, BrokenRuns::Fail);
        r.broken_runs = runs;
        let json: serde_json::Value = serde_json::from_slice(&verdict_json(&r).unwrap()).unwrap();
        let want: String = (6..=25)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(json["broken_runs"][0]["stderr_tail"], want.as_str());
        let md = verdict_markdown(&r);
        assert!(md.contains("its stderr ended:\n          line 6\n"), "{md}");
        assert!(md.contains("line 25") && !md.contains("line 5\n"), "{md}");
        // The list of runs left out shows it too.
        r.complete_runs_only = true;
        r.errors.clear();
        let md = verdict_markdown(&r);
        assert!(md.contains("its stderr ended:\n      line 6\n"), "{md}");
    }

    #[test]
    fn the_full_tables_keep_every_row_with_units_and_counts() {
        let mut t = Thresholds::fixture();
        t.budgets_mut(crate::metrics::Resource::Device(0))
            .max_retained_bytes = Some(300 << 20);
        let report = report(&cuda_record(), &cuda_record(), &t);
        let md = verdict_markdown(&report);
        let details = md.split("<details>").nth(1).unwrap();
        assert!(
            details.contains("| cuda-fixture | drop | VRAM cuda:0 | retained | 416.0 MiB | 416.0 MiB | 0.0 MiB |"),
            "{md}"
        );
        assert!(
            details.contains("| cuda-fixture | drop | VRAM cuda:0 | retention rate | 100 % (6/6) | 100 % (6/6) | 0 % |"),
            "{md}"
        );
        assert!(
            details.contains("| 6 cycles, 2 runs → 6 cycles, 2 runs |"),
            "{md}"
        );
        assert!(
            details.contains("| cuda-fixture | drop | VRAM cuda:0 | retained | `max_retained_vram_mib` | 300.0 MiB | 416.0 MiB | ❌ over-budget"),
            "{md}"
        );
        // Every row is in the details, budgets in their own table.
        assert_eq!(
            details.matches("| cuda-fixture |").count(),
            report.verdicts.len()
        );
        let comparisons = details.split("**budgets**").next().unwrap();
        assert!(!comparisons.contains("max_retained_vram_mib"), "{md}");
        // The footer says what each verdict means and what a decision needs.
        for needed in ["`error`", "at least 4 cycles a side", "35 cycles a side"] {
            assert!(details.contains(needed), "{needed}: {md}");
        }
    }
}
