//! Which runs count as evidence: runs that failed, timed out, were killed
//! or measured too few cycles are broken ([`broken_runs`], the rule is
//! `Summary::broken`, which a baseline's save reads too); the policy for
//! them ([`BrokenRuns`]: an error, or left out with every affected row
//! saying so); and the errors that make `memrel check` exit 2 (broken runs,
//! unchecked budgets, strategies with nothing to judge). It decides no
//! verdict.

use std::path::PathBuf;

use super::report::{BrokenRun, MetricVerdict, Side, Verdict};
use crate::metrics::Summary;
use crate::record::Record;
use crate::textutil::last_stderr_lines;

/// What the gate does with runs that failed, timed out, were killed or are incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokenRuns {
    /// The check is an error (exit 2) naming them: the default.
    Fail,
    /// Leave them out, judge the complete runs, and say so in every affected verdict.
    LeaveOut,
}

impl BrokenRuns {
    /// `--complete-runs-only` as a policy.
    pub fn from_flag(complete_runs_only: bool) -> BrokenRuns {
        if complete_runs_only {
            BrokenRuns::LeaveOut
        } else {
            BrokenRuns::Fail
        }
    }
}

/// Every run of `summary` that failed, timed out, was killed or measured
/// fewer cycles than asked for.
pub fn broken_runs(summary: &Summary, side: Side) -> Vec<BrokenRun> {
    summary
        .broken_runs()
        .into_iter()
        .map(|(run, broken)| BrokenRun {
            scenario: summary.scenario.clone(),
            side,
            run: run.run,
            strategy: run.strategy.clone(),
            repetition: run.repetition,
            status: broken.status,
            why: broken.why,
            stderr_tail: String::new(),
        })
        .collect()
}

/// Gives each of `broken` (runs of `record`) the last [`crate::textutil::STDERR_LINES`]
/// lines its program wrote to stderr, from runs.json.
pub fn attach_stderr(broken: &mut [BrokenRun], record: &Record) {
    for b in broken {
        let Some(run) = record.runs.iter().find(|r| r.meta.run == b.run) else {
            continue;
        };
        b.stderr_tail = last_stderr_lines(&run.meta.stderr_tail).join("\n");
    }
}

/// `summary` with its broken runs left out (the strategies stay listed, so a
/// strategy without a complete run is reported, not dropped).
pub fn complete_only(summary: &Summary) -> Summary {
    let mut out = summary.clone();
    out.runs.retain(|r| summary.broken(r).is_none());
    out
}

/// Says in every row of a strategy that lost runs to `--complete-runs-only`
/// which runs were left out.
pub fn note_left_out(verdicts: &mut [MetricVerdict], left_out: &[BrokenRun]) {
    for v in verdicts {
        let runs: Vec<String> = left_out
            .iter()
            .filter(|b| b.scenario == v.scenario && b.strategy == v.strategy)
            .map(|b| format!("{} run {} ({})", b.side.as_str(), b.run, b.status))
            .collect();
        if runs.is_empty() {
            continue;
        }
        let head = format!("complete runs only, left out {}", runs.join(", "));
        v.note = if v.note.is_empty() {
            head
        } else {
            format!("{head}; {}", v.note)
        };
    }
}

/// Why the gate cannot judge `verdicts` (exit 2): the broken runs (unless
/// they were left out), then every unchecked budget, then every strategy
/// with nothing to judge.
pub fn errors(
    verdicts: &[MetricVerdict],
    broken_in: &[(BrokenRun, PathBuf)],
    policy: BrokenRuns,
) -> Vec<String> {
    let mut out = Vec::new();
    if policy == BrokenRuns::Fail && !broken_in.is_empty() {
        out.push(broken_message(broken_in));
    }
    out.extend(unchecked_budgets(verdicts));
    out.extend(unjudged(verdicts));
    out
}

/// The error that names every broken run, where it is and why.
fn broken_message(broken: &[(BrokenRun, PathBuf)]) -> String {
    let mut out = format!(
        "{} run(s) failed, timed out, were killed or are incomplete, so their evidence is broken:",
        broken.len()
    );
    for (run, dir) in broken {
        out.push_str(&format!(
            "\n  - {run} (in {}){}",
            dir.display(),
            run.stderr_lines("    ")
        ));
    }
    let baseline_broken = broken.iter().any(|(b, _)| b.side == Side::Baseline);
    out.push_str(if baseline_broken {
        "\nre-make the baseline from complete runs (memrel run --save-baseline), fix the runs, or pass --complete-runs-only to judge only the complete runs"
    } else {
        "\nfix the runs (their errors above; timeout_s in the scenario), or pass --complete-runs-only to judge only the complete runs"
    });
    out
}

/// One error per strategy the gate could not judge at all (no complete run
/// on a side), naming the scenario and why.
fn unjudged(verdicts: &[MetricVerdict]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in verdicts
        .iter()
        .filter(|v| v.verdict == Verdict::Error && v.budget.is_none())
    {
        let line = format!(
            "scenario {}, strategy {}: {}",
            v.scenario, v.strategy, v.note
        );
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}

/// One error per scenario budget that nothing could be checked against,
/// naming the strategies it concerns and why.
pub(super) fn unchecked_budgets(verdicts: &[MetricVerdict]) -> Vec<String> {
    let mut out: Vec<(String, Vec<&str>, &str)> = Vec::new();
    for v in verdicts {
        let Some(budget) = &v.budget else { continue };
        let Some(why) = budget.unchecked.as_deref() else {
            continue;
        };
        let head = format!(
            "scenario {}: budget {} ({})",
            v.scenario, budget.key, v.resource
        );
        match out.iter_mut().find(|(h, _, _)| *h == head) {
            Some((_, strategies, _)) => strategies.push(&v.strategy),
            None => out.push((head, vec![&v.strategy], why)),
        }
    }
    out.into_iter()
        .map(|(head, strategies, why)| {
            format!(
                "{head} was not checked for {}: {why}",
                strategies.join(", ")
            )
        })
        .collect()
}
