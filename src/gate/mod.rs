//! The regression gate: compares a new run's summaries with a saved baseline
//! and gives a verdict per scenario × strategy × resource × metric, plus the
//! absolute budgets the scenario declares.
//!
//! The judging reads summaries, nothing else: no sampling, no files (only
//! `assess` loads the records it is pointed at), and it runs nothing:
//! `memrel check` without directories re-runs the baseline's scenarios
//! first (`plan::rerun`) and hands the gate the directories that come back.
//! Every resource a record measured (host RSS, VRAM of `cuda:N`) is judged
//! by the same code, on the same metrics: retained after the last cycle,
//! peak, retained slope, release latency and the retention rate.
//!
//! Broken evidence never passes: [`broken_runs`] names every run of either
//! side that failed, timed out, was killed or measured fewer cycles than
//! asked for, and `memrel check` exits 2 on any of them unless told to judge
//! the complete runs only ([`complete_only`], which every affected row then
//! says). A budget nothing could be checked against is an `error` row (exit
//! 2), never a pass, and so is a check that judged nothing (every row
//! skipped, with `--lenient` too): a gate that could not have failed.
//!
//! What one observation is, per metric:
//! - retained, peak and retained slope: one value per run (process). The
//!   cycles of one process are not independent: a heap that did not shrink in
//!   cycle 2 is still there in cycle 3, so counting its cycles apart would
//!   claim evidence the gate does not have.
//! - release latency: every timed cycle of every run. Each release is its own
//!   event, so each cycle adds evidence.
//! - retention rate: every cycle of every run, retaining (retained above the
//!   scenario's threshold) or not. Retention on glibc is an event that
//!   happens in some cycles and not in others; how often it happens is a
//!   proportion, and the proportion test over cycles is where that shows.
//!   Cycles of one process can still be correlated (a heap that stayed large
//!   keeps counting), so a change must also come from two processes or more.
//!
//! The statistic reported and its interval agree: for values, the mean of
//! each side and Welch's 95 % interval of the difference of means (exact
//! Student-t quantiles from `stats`); with two runs a side the
//! nonparametric intervals of a median difference cannot reach 95 %
//! (the widest one has 67 %), so means it is. For the retention rate, the
//! share of retaining cycles on each side, Newcombe's 95 % interval of the
//! difference and Fisher's exact test.
//!
//! A verdict needs a change beyond the noise band (max of a relative and an
//! absolute part; 10 percentage points for rates) that is also significant:
//! for values, the whole interval beyond the band; for rates, the difference
//! beyond the band with Fisher's p < 0.05. An interval inside the band is
//! `no-change`, anything else `inconclusive`. With fewer than two runs
//! contributing on a side, a change is `inconclusive`, never a verdict.
//!
//! A resource that was not measured (`ResourceRun::not_measured`) gives no
//! observations, never a zero. Coverage is checked both ways ([`gaps`]): a
//! scenario, strategy or measured resource on one side only, a side with no
//! runs, and a metric a side should have but has no observation of are each
//! a coverage gap that makes `memrel check` exit 2, never a pass.
//!
//! The files, one job each, importing one way: `metric` (what is judged,
//! what one observation is) is the leaf, `report` (the verdict schema, types
//! only, a coverage gap's included) names its metric; `decide` (the decision rules), `budget` (the scenario's absolute
//! budgets), `evidence` (which runs count, and the errors that make the
//! check exit 2) and `coverage` (what one side covers that the other does
//! not judge) build on them; `machine` (which facts of the machine differ
//! from the baseline's) is a leaf the report names; `program` (what a
//! program run did differently, warnings) reads two headers; `assess`
//! gathers one `memrel check` over saved directories (the baseline's
//! entries read through [`SavedBaseline`], which the command opens: the gate
//! imports nothing of `baseline/`); this file holds the comparison loop.

mod assess;
mod budget;
mod coverage;
mod decide;
mod evidence;
pub mod machine;
mod metric;
mod program;
mod report;
#[cfg(test)]
mod tests;

use crate::metrics::ResourceFacts;
pub use assess::{assess, CheckOptions, SavedBaseline};
pub use budget::budgets;
pub use coverage::{gaps, Covered};
pub use decide::{difference_interval, judge, rate_cycles_needed, CONFIDENCE, RATE_ALPHA};
pub use evidence::{
    attach_stderr, broken_runs, complete_only, errors, judged_nothing, note_left_out,
    thin_strategies, too_few_runs, unbudgeted, BrokenRuns, BASELINE_MIN_RUNS,
};
pub use metric::{Judged, Observations, Per, Statistic, GATED, RATE_BAND};
pub use report::{
    BrokenRun, BudgetCheck, CoverageGap, MetricVerdict, RateTest, Remake, Side, Verdict,
    VerdictReport, VERDICT_SCHEMA_VERSION,
};

use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::{Resource, Summary};
use crate::scenario::Thresholds;
use metric::runs_of;

/// The resources to judge: the new summary's (lead first), then any that
/// only the baseline has (so a resource that vanished is reported, not dropped).
fn resources(baseline: &Summary, new: &Summary) -> Vec<Resource> {
    let mut out: Vec<Resource> = new.shown().into_iter().filter(|r| r.is_gated()).collect();
    for r in baseline.shown() {
        if r.is_gated() && !out.contains(&r) {
            out.push(r);
        }
    }
    out.retain(|&r| comparable(r, baseline, new));
    out
}

/// Whether the gate judges `r` between the two sides: the page cache only
/// where both records measured it (a record made before memrel read it has
/// no page-cache resource at all: not a resource that vanished).
pub(crate) fn comparable(r: Resource, baseline: &Summary, new: &Summary) -> bool {
    r != Resource::PageCache || (baseline.resources.contains(&r) && new.resources.contains(&r))
}

/// Compares one scenario's new summary with its baseline summary: one row per
/// strategy × resource × metric.
pub fn compare(baseline: &Summary, new: &Summary, thresholds: &Thresholds) -> Vec<MetricVerdict> {
    let resources = resources(baseline, new);
    let in_baseline = |s: &str| baseline.strategies.iter().any(|b| b.strategy == s);
    let mut out = Vec::new();
    for strategy in new.strategies.iter().map(|s| s.strategy.as_str()) {
        let new_runs = runs_of(new, strategy);
        let base_runs = runs_of(baseline, strategy);
        let slept = new_runs
            .iter()
            .chain(&base_runs)
            .any(|r| !r.sleeps.is_empty());
        for &resource in &resources {
            for metric in GATED {
                if metric.only_with_sleeps() && !slept {
                    continue;
                }
                let mut v = MetricVerdict::blank(&new.scenario, strategy, resource, metric);
                // A strategy listed with no runs left lost them all to
                // --complete-runs-only: nothing to judge is an error.
                match (
                    in_baseline(strategy),
                    base_runs.is_empty(),
                    new_runs.is_empty(),
                ) {
                    (false, _, _) => {
                        v.note = "the baseline has no runs of this strategy".into();
                    }
                    (true, true, _) => {
                        v.verdict = Verdict::Error;
                        v.note = "no complete run of this strategy in the baseline".into();
                    }
                    (true, false, true) => {
                        v.verdict = Verdict::Error;
                        v.note = "no complete run of this strategy in the new runs".into();
                    }
                    (true, false, false) => {
                        v = judge(
                            &new.scenario,
                            strategy,
                            resource,
                            metric,
                            &Observations::of(metric, resource, &base_runs),
                            &Observations::of(metric, resource, &new_runs),
                            thresholds,
                        );
                        if metric == MemoryMetric::Retained {
                            if let Some(shift) =
                                budget::mechanism_shift(v.verdict, resource, &base_runs, &new_runs)
                            {
                                v.note.push_str(&shift);
                            }
                        }
                    }
                }
                out.push(v);
            }
        }
    }
    out
}
