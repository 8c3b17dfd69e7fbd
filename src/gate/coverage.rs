//! Coverage both ways: what the baseline covers that the new results do not
//! judge, and what the new results hold that the baseline lacks. A side
//! with no runs, a strategy or a measured resource on one side only, and a
//! metric a side should have but has no observation of are each a
//! [`CoverageGap`]; `memrel check` exits 2 on any, so the gate never passes
//! on what it did not judge. A resource the new results measured that the
//! baseline's memrel did not know yet (a catalogued resource added since it
//! was made) is no gap: it is reported as new and not judged
//! ([`new_since`]), so upgrading memrel does not break every gate. It
//! decides no verdict.

use crate::metrics::ResourceFacts;
use std::path::Path;

use super::metric::{runs_of, Judged, Observations, GATED};
use super::report::{CoverageGap, MetricVerdict, Side};
use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::{Resource, RunSummary, Summary};
use crate::record::{Header, RUNS_FILE, SAMPLES_FILE};

/// One side of a comparison: its summary and the directory its record is in.
pub struct Covered<'a> {
    pub summary: &'a Summary,
    pub dir: &'a Path,
}

/// How to fill a gap on `side`; `remake` is the command that makes the
/// baseline's entry again (`hint::Hint`).
fn fix(side: Side, remake: &str) -> String {
    match side {
        Side::Baseline => format!("re-make the baseline with it ({remake})"),
        Side::New => "run it again so the new results hold it, or re-make the baseline without it"
            .to_string(),
    }
}

/// What a row of a resource the baseline's memrel did not know says.
pub const NEW_SINCE: &str =
    "new since the baseline was made; not judged; re-make the baseline to judge it";

/// The gated resources the new results measured that the memrel which
/// made the baseline did not know yet (a catalogued resource added since:
/// `Header::knew`). They are not judged and are no gap: the baseline could
/// not have measured them. A resource it knew but did not measure stays a
/// gap.
pub fn new_since(base: &Header, base_summary: &Summary, new: &Summary) -> Vec<Resource> {
    new.resources
        .iter()
        .copied()
        .filter(|r| r.is_gated() && !base.knew(*r) && !base_summary.resources.contains(r))
        .collect()
}

/// Makes the rows of `unknown`'s resources one `skipped` row per strategy
/// and resource, saying why ([`NEW_SINCE`]) and how to judge it.
pub fn not_judged_new(rows: &mut Vec<MetricVerdict>, unknown: &[Resource], remake: &str) {
    let mut seen: Vec<(String, Resource)> = Vec::new();
    rows.retain_mut(|v| {
        if !unknown.contains(&v.resource) {
            return true;
        }
        let key = (v.strategy.clone(), v.resource);
        if seen.contains(&key) {
            return false;
        }
        seen.push(key);
        *v = MetricVerdict::blank(&v.scenario, &v.strategy, v.resource, v.metric);
        v.note = format!("{NEW_SINCE} ({remake})");
        true
    });
}

/// Makes the gaps of one scenario, each saying how to fill it.
struct GapMaker<'a> {
    scenario: &'a str,
    /// The command that makes the baseline's entry again.
    remake: &'a str,
}

impl GapMaker<'_> {
    fn gap(
        &self,
        strategy: Option<&str>,
        resource: Option<Resource>,
        metric: Option<MemoryMetric>,
        missing_in: Side,
        why: String,
    ) -> CoverageGap {
        CoverageGap {
            scenario: self.scenario.to_string(),
            strategy: strategy.map(str::to_string),
            resource,
            metric,
            missing_in,
            why: format!("{why}; {}", fix(missing_in, self.remake)),
        }
    }
}

/// Whether `s` has runs of `strategy`.
fn has(s: &Summary, strategy: &str) -> bool {
    s.strategies.iter().any(|x| x.strategy == strategy)
}

/// The gaps between the baseline's record of a scenario and the new one's;
/// `remake` is the command that makes the baseline's entry again.
pub fn gaps(remake: &str, baseline: Covered<'_>, new: Covered<'_>) -> Vec<CoverageGap> {
    let maker = GapMaker {
        scenario: new.summary.scenario.as_str(),
        remake,
    };
    let empty = empty_sides(&maker, &baseline, &new);
    if !empty.is_empty() {
        return empty;
    }
    let mut out = strategy_gaps(&maker, &baseline, &new);
    let resources = gated_resources(&baseline, &new);
    for s in &new.summary.strategies {
        if has(baseline.summary, &s.strategy) {
            out.extend(resource_gaps(
                &maker,
                &s.strategy,
                &resources,
                &baseline,
                &new,
            ));
        }
    }
    out
}

/// A gap for each side that holds no runs at all.
fn empty_sides(maker: &GapMaker, baseline: &Covered, new: &Covered) -> Vec<CoverageGap> {
    [(Side::Baseline, baseline), (Side::New, new)]
        .into_iter()
        .filter(|(_, covered)| covered.summary.runs.is_empty())
        .map(|(side, covered)| {
            let file = covered.dir.join(RUNS_FILE);
            maker.gap(
                None,
                None,
                None,
                side,
                format!("{} holds no runs (\"runs\": [])", file.display()),
            )
        })
        .collect()
}

/// A gap for each strategy one side has runs of and the other none.
fn strategy_gaps(maker: &GapMaker, baseline: &Covered, new: &Covered) -> Vec<CoverageGap> {
    let mut out = Vec::new();
    for (have, lack, missing_in) in [(baseline, new, Side::New), (new, baseline, Side::Baseline)] {
        for s in &have.summary.strategies {
            if !has(lack.summary, &s.strategy) {
                out.push(maker.gap(
                    Some(&s.strategy),
                    None,
                    None,
                    missing_in,
                    format!(
                        "{} has {} run(s) of it, {} none",
                        have.dir.join(RUNS_FILE).display(),
                        s.runs,
                        lack.dir.join(RUNS_FILE).display()
                    ),
                ));
            }
        }
    }
    out
}

/// The gated resources of either side (the baseline's first) that the two
/// sides can be compared on.
fn gated_resources(baseline: &Covered, new: &Covered) -> Vec<Resource> {
    let mut resources: Vec<Resource> = baseline
        .summary
        .resources
        .iter()
        .copied()
        .filter(|r| r.is_gated())
        .collect();
    for r in &new.summary.resources {
        if r.is_gated() && !resources.contains(r) {
            resources.push(*r);
        }
    }
    resources.retain(|&r| super::comparable(r, baseline.summary, new.summary));
    resources
}

/// The gaps of `strategy`, which both sides ran: a resource one side
/// measured and the other not, else a metric a side should have a value of.
fn resource_gaps(
    maker: &GapMaker,
    strategy: &str,
    resources: &[Resource],
    baseline: &Covered,
    new: &Covered,
) -> Vec<CoverageGap> {
    let base_runs = runs_of(baseline.summary, strategy);
    let new_runs = runs_of(new.summary, strategy);
    let mut out = Vec::new();
    for &resource in resources {
        let lacking = match (
            measures(&base_runs, resource),
            measures(&new_runs, resource),
        ) {
            (true, true) => None,
            (false, false) => continue,
            (false, true) => Some((Side::Baseline, baseline)),
            (true, false) => Some((Side::New, new)),
        };
        if let Some((side, covered)) = lacking {
            out.push(maker.gap(
                Some(strategy),
                Some(resource),
                None,
                side,
                format!(
                    "the other side measured it, the runs in {} did not",
                    covered.dir.display()
                ),
            ));
            continue;
        }
        let sides = [
            (Side::Baseline, baseline, &base_runs[..]),
            (Side::New, new, &new_runs[..]),
        ];
        out.extend(metric_gaps(maker, strategy, resource, sides));
    }
    out
}

/// The gaps of the gated metrics of `resource` under `strategy`: a side
/// (with its runs) that should have a value of one and has none.
fn metric_gaps(
    maker: &GapMaker,
    strategy: &str,
    resource: Resource,
    sides: [(Side, &Covered, &[&RunSummary]); 2],
) -> Vec<CoverageGap> {
    let mut out = Vec::new();
    for metric in GATED {
        let observed = sides.map(|(side, covered, runs)| {
            let empty = Observations::of(metric, resource, runs).values.is_empty();
            (side, covered, empty)
        });
        let both_empty = observed.iter().all(|o| o.2);
        for (side, covered, empty) in observed {
            if empty && should_have(metric, both_empty) {
                out.push(maker.gap(
                    Some(strategy),
                    Some(resource),
                    Some(metric),
                    side,
                    if metric.only_with_sleeps() {
                        format!(
                            "no run in {} put a model to sleep; the other side's did",
                            covered.dir.display()
                        )
                    } else {
                        format!(
                            "no run in {} has a value of it (is its {SAMPLES_FILE} empty?)",
                            covered.dir.display()
                        )
                    },
                ));
            }
        }
    }
    out
}

/// Whether some run of `runs` has readings of `resource`.
fn measures(runs: &[&RunSummary], resource: Resource) -> bool {
    runs.iter().any(|r| {
        r.resource(resource)
            .is_some_and(|m| m.not_measured.is_none())
    })
}

/// Whether a side that measured the resource must have an observation of
/// `metric`: retained, peak and the retention rate always; the growth per
/// cycle when the other side has one (one cycle has no slope on either);
/// the release latency and the release gap never (no release to time is a
/// fact, see `retained`).
fn should_have(metric: MemoryMetric, both_empty: bool) -> bool {
    match metric {
        MemoryMetric::Retained | MemoryMetric::Peak | MemoryMetric::RetentionRate => true,
        MemoryMetric::Growth => !both_empty,
        // No release edge with a window after it is a fact of the program,
        // like nothing to time (and records from before the release gap).
        MemoryMetric::ReleaseLatency | MemoryMetric::Settle | MemoryMetric::LateBytes => false,
        // A sleep is a step of the workload: where neither side slept there
        // is nothing to have.
        MemoryMetric::Asleep | MemoryMetric::WakeHeld => !both_empty,
        // Not one the gate judges (not in GATED).
        _ => false,
    }
}
