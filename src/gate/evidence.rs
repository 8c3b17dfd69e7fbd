//! Which runs count as evidence: runs that failed, timed out, were killed
//! or measured too few cycles are broken ([`broken_runs`], the rule is
//! `Summary::broken`, which a baseline's save reads too); the policy for
//! them ([`BrokenRuns`]: an error, or left out with every affected row
//! saying so); and the errors that make `memrel check` exit 2 (broken runs,
//! unchecked budgets, strategies with nothing to judge, a check that judged
//! nothing). Which baselines can show a regression at all
//! ([`thin_strategies`], [`unbudgeted`]: a baseline's save reads them) is
//! here too, and so is the same rule on either side of a check
//! ([`too_few_runs`]: fewer runs of a judged strategy than a baseline needs
//! is an error, exit 2, unless budgets judge every metric). It decides no
//! verdict.

use crate::metrics::ResourceFacts;
use std::path::PathBuf;

use super::metric::{Judged, Observations, GATED};
use super::report::{BrokenRun, MetricVerdict, Side, Verdict};
use crate::metrics::{RunSummary, Summary};
use crate::record::Record;
use crate::scenario::Thresholds;
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
        "\nre-make the baseline from complete runs (again with the command that made it, which `memrel baseline show NAME` prints), fix the runs, or pass --complete-runs-only to judge only the complete runs"
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

/// The fewest runs of a strategy a baseline needs for the gate to show a
/// change: with two a side Welch's interval has one or two degrees of
/// freedom (t = 12.7 to 4.3), too wide for all but huge changes, and with
/// one a change is never a verdict (`decide`).
pub const BASELINE_MIN_RUNS: usize = 3;

/// The strategies of `summary` with fewer than [`BASELINE_MIN_RUNS`] runs,
/// with how many they have, in the summary's order.
pub fn thin_strategies(summary: &Summary) -> Vec<(String, usize)> {
    summary
        .strategies
        .iter()
        .map(|s| {
            let runs = summary
                .runs
                .iter()
                .filter(|r| r.strategy == s.strategy)
                .count();
            (s.strategy.clone(), runs)
        })
        .filter(|(_, runs)| *runs < BASELINE_MIN_RUNS)
        .collect()
}

/// The error of a scenario whose judged strategies have fewer than
/// [`BASELINE_MIN_RUNS`] runs on a side (`sides`: the baseline's summary
/// and directory, then the new results'), unless the scenario budgets
/// every metric the gate judges ([`unbudgeted`]). One run cannot show a
/// change holds, nor that nothing changed, and two hardly can: a check on
/// them could not fail, so it never passes. `remake` makes the baseline's
/// entry again; `again` is the new results' own command with `--repeat`
/// set (`None` where it cannot run again: an attached process, a check's
/// re-run).
pub fn too_few_runs(
    scenario: &str,
    sides: [(&Summary, &std::path::Path); 2],
    thresholds: &Thresholds,
    (remake, again): (&str, Option<crate::hint::Hint<'_>>),
) -> Option<String> {
    let [(base, base_dir), (new, new_dir)] = sides;
    let judged: Vec<&str> = new
        .strategies
        .iter()
        .map(|s| s.strategy.as_str())
        .filter(|s| base.strategies.iter().any(|b| b.strategy == *s))
        .collect();
    let thin = |summary: &Summary| -> Vec<String> {
        judged
            .iter()
            .map(|s| (s, summary.runs.iter().filter(|r| r.strategy == *s).count()))
            // No run left at all is its own error (`unjudged`).
            .filter(|(_, n)| (1..BASELINE_MIN_RUNS).contains(n))
            .map(|(s, n)| format!("{s} has {n} run(s)"))
            .collect()
    };
    let (base_thin, new_thin) = (thin(base), thin(new));
    if base_thin.is_empty() && new_thin.is_empty() {
        return None;
    }
    let missing = unbudgeted(new, thresholds);
    if missing.is_empty() {
        return None;
    }
    let mut where_ = Vec::new();
    let mut fixes = Vec::new();
    if !new_thin.is_empty() {
        where_.push(format!(
            "in the new results ({}) {}",
            new_dir.display(),
            new_thin.join(", ")
        ));
        if let Some(again) = &again {
            fixes.push(format!("run `{}` and check its results", again.line()));
        }
    }
    if !base_thin.is_empty() {
        where_.push(format!(
            "in the baseline ({}) {}",
            base_dir.display(),
            base_thin.join(", ")
        ));
    }
    if !base_thin.is_empty() || again.is_none() {
        fixes.push(format!("re-make the baseline with `{remake}`"));
    }
    Some(format!(
        "scenario {scenario}: too few runs: use --repeat {BASELINE_MIN_RUNS}: {}; the gate needs \
         {BASELINE_MIN_RUNS} runs of every strategy on each side to show a change holds or that \
         nothing changed, so a check on fewer could not fail: {}, or budget every metric the gate \
         judges in the scenario's [thresholds] (missing: {})",
        where_.join("; "),
        fixes.join(", then "),
        missing.join(", ")
    ))
}

/// The `[thresholds]` budget keys a scenario lacks for the metrics the gate
/// judges in `summary` that a budget can cover: every gated resource the
/// runs measured, every metric with a budget key that the runs have a value
/// of. Empty: every such metric has a budget, which needs no statistics (it
/// is checked on the worst new run), so the gate can fail however few runs
/// the baseline has.
pub fn unbudgeted(summary: &Summary, thresholds: &Thresholds) -> Vec<String> {
    let runs: Vec<&RunSummary> = summary.runs.iter().collect();
    let mut out = Vec::new();
    for resource in summary.shown().into_iter().filter(|r| r.is_gated()) {
        for metric in GATED {
            let Some(key) = metric.budget_key(resource) else {
                continue;
            };
            let observed = !Observations::of(metric, resource, &runs).values.is_empty();
            let budgeted = metric.budget(thresholds.budgets(resource)).is_some();
            if observed && !budgeted && !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

/// The error of a check whose rows judged nothing (every row skipped, or
/// an error): such a gate cannot fail, so it never passes. `None` when some
/// row compared or checked something.
pub fn judged_nothing(verdicts: &[MetricVerdict], skipped: &[String]) -> Option<String> {
    let judged = verdicts
        .iter()
        .any(|v| !matches!(v.verdict, Verdict::Skipped | Verdict::Error));
    if judged {
        return None;
    }
    let why = if skipped.is_empty() {
        String::new()
    } else {
        format!(" ({})", skipped.join("; "))
    };
    Some(format!(
        "the check judged nothing{why}: no row compared a baseline or checked a budget, so it could not have failed; \
         save a baseline of the scenarios checked, or check results of the scenarios the baseline holds"
    ))
}
