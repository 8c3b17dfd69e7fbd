//! The scenario's absolute budgets (`[thresholds]` `max_*` keys), checked
//! on the worst run of each strategy and resource. A budget with nothing to
//! check it against is an `error` row with the reason, never a pass.

use super::metric::{runs_of, GateMetric, Observations};
use super::report::{BudgetCheck, MetricVerdict, Statistic, Verdict};
use crate::metrics::{Resource, Summary};
use crate::scenario::Thresholds;

/// Absolute budgets declared by the scenario, per resource, checked on the
/// worst run. A budget with nothing to check it against is an `error` row
/// with the reason, never a pass.
pub fn budgets(new: &Summary, t: &Thresholds) -> Vec<MetricVerdict> {
    let mut resources = new.shown();
    // Which metrics a scenario can budget is the catalogue's to say (a budget key).
    let device_budgeted = GateMetric::ALL
        .iter()
        .any(|m| m.budget(&t.device).is_some());
    if device_budgeted && !resources.iter().any(|r| r.is_device()) {
        // VRAM budgets on a record without a device: say so rather than skip them.
        resources.push(Resource::device_of(&new.device).unwrap_or(Resource::Device(0)));
    }
    let page_cache_budgeted = GateMetric::ALL
        .iter()
        .any(|m| m.budget(&t.page_cache).is_some());
    if page_cache_budgeted && !resources.contains(&Resource::PageCache) {
        // Page-cache budgets on a record without weights files (a program, fakes,
        // an older record): an error row that says so, not a silent pass.
        resources.push(Resource::PageCache);
    }
    let mut out = Vec::new();
    for strategy in new.strategies.iter().map(|s| s.strategy.as_str()) {
        let runs = runs_of(new, strategy);
        for &resource in &resources {
            for metric in GateMetric::ALL {
                let (Some(limit), Some(key)) = (
                    metric.budget(t.budgets(resource)),
                    metric.budget_key(resource),
                ) else {
                    continue;
                };
                out.push(budget_verdict(
                    &new.scenario,
                    strategy,
                    resource,
                    metric,
                    (key, limit),
                    &Observations::of(metric, resource, &runs),
                ));
            }
        }
    }
    out
}

fn budget_verdict(
    scenario: &str,
    strategy: &str,
    resource: Resource,
    metric: GateMetric,
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
