//! The scenario's absolute budgets (`[thresholds]` `max_*` keys), checked
//! on the worst run of each strategy and resource. A budget with nothing to
//! check it against is an `error` row with the reason, never a pass. A
//! catalogued resource that stayed still over the whole record
//! (`Summary::still`) is judged on its range: what it could have retained,
//! grown or given back late is less than that range, its peak is its
//! highest reading.

use super::metric::{runs_of, Judged, Observations, Statistic, GATED};
use super::report::{BudgetCheck, MetricVerdict, Verdict};
use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::why::Mechanism;
use crate::metrics::ResourceFacts;
use crate::metrics::{Resource, RunSummary, Still, Summary};
use crate::scenario::Thresholds;
use crate::textutil::MIB;

/// Absolute budgets declared by the scenario, per resource, checked on the
/// worst run. A budget with nothing to check it against is an `error` row
/// with the reason, never a pass.
pub fn budgets(new: &Summary, t: &Thresholds) -> Vec<MetricVerdict> {
    let mut resources = new.shown();
    let still = |r: Resource| new.still.iter().find(|s| s.resource == r);
    for budgeted in t.budgeted() {
        let had = |r: &Resource| r.budget_class() == budgeted;
        if !resources.iter().any(had) && still(budgeted).is_none() {
            // Budgets of a resource the record did not measure (VRAM on a
            // CPU record, the page cache without weights files, an older
            // record): an error row that says so, not a silent pass.
            resources.push(match budgeted {
                Resource::Device(_) => {
                    Resource::device_of(&new.device).unwrap_or(Resource::Device(0))
                }
                other => other,
            });
        }
    }
    resources.extend(new.still.iter().map(|s| s.resource));
    let mut out = Vec::new();
    for strategy in new.strategies.iter().map(|s| s.strategy.as_str()) {
        let runs = runs_of(new, strategy);
        for &resource in &resources {
            for metric in GATED {
                let (Some(limit), Some(key)) = (
                    metric.budget(t.budgets(resource)),
                    metric.budget_key(resource),
                ) else {
                    continue;
                };
                let observed = match still(resource) {
                    Some(s) => of_still(metric, s, runs.len()),
                    None => Observations::of(metric, resource, &runs),
                };
                let mut v = budget_verdict(
                    &new.scenario,
                    strategy,
                    resource,
                    metric,
                    (&key, limit),
                    &observed,
                );
                if let Some(s) = still(resource) {
                    v.note.push_str(&format!(
                        " ({resource} stayed within {:.1} to {:.1} MiB over the whole record)",
                        s.low_bytes as f64 / MIB,
                        s.high_bytes as f64 / MIB
                    ));
                }
                out.push(v);
            }
            for (&mechanism, &limit) in &t.budgets(resource).max_retained_by_mechanism {
                let Some(key) = mechanism.budget_key(resource) else {
                    continue;
                };
                let observed = of_mechanism(mechanism, resource, &runs);
                let mut v = budget_verdict(
                    &new.scenario,
                    strategy,
                    resource,
                    MemoryMetric::Retained,
                    (&key, limit as f64),
                    &observed,
                );
                v.note = format!("{}: {}", mechanism.label(), v.note);
                out.push(v);
            }
        }
    }
    out
}

/// What `mechanism` retained of `resource` in each run's last cycle
/// (`RunSummary::why`); why none, where no run's edges split it.
fn of_mechanism(mechanism: Mechanism, resource: Resource, runs: &[&RunSummary]) -> Observations {
    let held = |r: &RunSummary| {
        r.why
            .iter()
            .find(|h| h.resource == resource && h.mechanism == mechanism)
            .map(|h| h.bytes as f64)
    };
    let values: Vec<f64> = runs.iter().filter_map(|r| held(r)).collect();
    let mut observed = Observations::per_run(&values);
    if values.is_empty() {
        let split = runs
            .iter()
            .any(|r| r.why.iter().any(|h| h.resource == resource));
        observed.not_measured = Some(if split {
            format!(
                "no run's views separate {} from the rest of {resource} (an allocator \
                 or framework that reports no such number)",
                mechanism.label()
            )
        } else {
            format!(
                "no run split {resource} by mechanism (host memory is split at the edges \
                 of a completed cycle; VRAM only where PyTorch or JAX sent its view)"
            )
        });
    }
    observed
}

/// What a still resource's range bounds: its peak is its highest reading;
/// retained and late bytes are at most the range, growth at most twice it;
/// nothing moved to settle. Its sleep metrics have no budget keys (`budget_key`).
fn of_still(metric: MemoryMetric, still: &Still, runs: usize) -> Observations {
    let range = (still.high_bytes - still.low_bytes) as f64;
    let value = match metric {
        MemoryMetric::Peak => Some(still.high_bytes as f64),
        MemoryMetric::Retained | MemoryMetric::LateBytes => Some(range),
        // Retained values lie within ±range: no fit through them is steeper
        // than 2 × range per cycle (two cycles, one at each end).
        MemoryMetric::Growth => Some(2.0 * range),
        MemoryMetric::Settle => Some(0.0),
        _ => None,
    };
    Observations {
        values: value.into_iter().collect(),
        runs,
        runs_nonzero: 0,
        not_measured: value
            .is_none()
            .then(|| format!("{} stayed still", still.resource)),
    }
}

fn budget_verdict(
    scenario: &str,
    strategy: &str,
    resource: Resource,
    metric: MemoryMetric,
    (key, limit): (&str, f64),
    observed: &Observations,
) -> MetricVerdict {
    let worst = observed.values.iter().copied().reduce(f64::max);
    let mut v = MetricVerdict::blank(scenario, strategy, resource, metric);
    v.statistic = Statistic::Worst;
    v.new_n = observed.values.len();
    v.new_runs = observed.runs;
    v.new_value = worst;
    let budget = format!("{key} = {}", metric.text(limit));
    let checked = match (&observed.not_measured, worst) {
        (Some(why), _) => Err(why.clone()),
        (None, None) => {
            Err("no run has a value of it (see the runs' errors and checks)".to_string())
        }
        (None, Some(worst)) => Ok(worst),
    };
    (v.verdict, v.note) = match &checked {
        Err(why) => (Verdict::Error, format!("{budget} not checked: {why}")),
        Ok(worst) => (
            if *worst > limit {
                Verdict::OverBudget
            } else {
                Verdict::NoChange
            },
            format!(
                "{budget}, worst of {} runs {}",
                observed.runs,
                metric.text(*worst)
            ),
        ),
    };
    v.budget = Some(BudgetCheck {
        key: key.to_string(),
        limit,
        worst,
        unchecked: checked.err(),
    });
    v
}
