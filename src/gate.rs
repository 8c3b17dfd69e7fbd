//! The regression gate: compares a new run's summaries with a saved baseline
//! and gives a verdict per scenario × strategy × resource × metric, plus the
//! absolute budgets the scenario declares.
//!
//! It reads summaries and the baseline, nothing else: no sampling, no files
//! beyond what it is handed. Every resource a record measured (host RSS,
//! VRAM of `cuda:N`) is judged by the same code, on the same metrics:
//! retained after the last cycle, peak, retained slope and release latency.
//!
//! What one observation is, per metric:
//! - retained, peak and retained slope: one value per run (process). The
//!   cycles of one process are not independent: a heap that did not shrink in
//!   cycle 2 is still there in cycle 3, so counting its cycles apart would
//!   claim evidence the gate does not have.
//! - release latency: every timed cycle of every run. Each release is its own
//!   event, so each cycle adds evidence.
//!
//! Either way a change must hold across processes: with fewer than two runs
//! contributing on a side, a change is `inconclusive`, never a verdict.
//!
//! A verdict needs both a change beyond the noise band (max of a relative and
//! an absolute part) and a confidence interval of the change that lies
//! entirely beyond that band; otherwise it is `no-change` (interval inside the
//! band) or `inconclusive`.
//!
//! A resource that was not measured (`ResourceRun::not_measured`) gives no
//! observations, never a zero: when one side lacks it the verdict is
//! `inconclusive` with the reason. A budget that nothing could be checked
//! against is `inconclusive` too (the gate cannot tell a regression from a
//! broken probe), and `memrel check` adds a warning for it.

use serde::{Deserialize, Serialize};

use crate::metrics::{Resource, ResourceRun, RunSummary, Summary};
use crate::scenario::{Budgets, Thresholds};
use crate::stats::median;

const MIB_F64: f64 = 1024.0 * 1024.0;

/// Bumped when verdict.json changes shape (2: rows name their resource, say
/// what one observation is, and budget rows carry their scenario key).
pub const VERDICT_SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Regressed,
    Improved,
    NoChange,
    Inconclusive,
    /// An absolute budget from the scenario was exceeded.
    OverBudget,
    /// The baseline has no entry for this scenario × strategy (lenient mode).
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NoChange => "no-change",
            Verdict::Inconclusive => "inconclusive",
            Verdict::OverBudget => "over-budget",
            Verdict::Skipped => "skipped",
        }
    }

    pub fn fails(self) -> bool {
        matches!(self, Verdict::Regressed | Verdict::OverBudget)
    }
}

/// What one observation of a metric is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Per {
    /// One value per run (process).
    Run,
    /// One value per timed cycle of every run.
    Cycle,
}

/// The metrics the gate watches, for every resource; for all of them higher is worse.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GateMetric {
    RetainedBytes,
    PeakBytes,
    RetainedSlopeBytesPerCycle,
    ReleaseLatencyS,
}

impl GateMetric {
    pub const ALL: [GateMetric; 4] = [
        GateMetric::RetainedBytes,
        GateMetric::PeakBytes,
        GateMetric::RetainedSlopeBytesPerCycle,
        GateMetric::ReleaseLatencyS,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GateMetric::RetainedBytes => "retained_bytes",
            GateMetric::PeakBytes => "peak_bytes",
            GateMetric::RetainedSlopeBytesPerCycle => "retained_slope_bytes_per_cycle",
            GateMetric::ReleaseLatencyS => "release_latency_s",
        }
    }

    /// What one observation is (see the module docs for why).
    pub fn per(self) -> Per {
        match self {
            GateMetric::ReleaseLatencyS => Per::Cycle,
            _ => Per::Run,
        }
    }

    /// This metric's observations in one run of one resource.
    fn of_run(self, run: &ResourceRun) -> Vec<f64> {
        match self {
            GateMetric::RetainedBytes => run.retained_bytes.map(|v| v as f64).into_iter().collect(),
            GateMetric::PeakBytes => run.peak_bytes.map(|v| v as f64).into_iter().collect(),
            GateMetric::RetainedSlopeBytesPerCycle => {
                run.retained_slope_bytes_per_cycle.into_iter().collect()
            }
            GateMetric::ReleaseLatencyS => run
                .cycles
                .iter()
                .filter_map(|c| c.release_latency_s)
                .collect(),
        }
    }

    /// Why a measured resource can have no observation of this metric.
    fn why_absent(self) -> &'static str {
        match self {
            GateMetric::ReleaseLatencyS => {
                "no release to time (each cycle gave back less than the retention threshold): see retained_bytes"
            }
            _ => "the runs did not measure it (see their errors and checks)",
        }
    }

    /// The absolute part of the noise band in this metric's unit.
    fn absolute_noise(self, t: &Thresholds) -> f64 {
        match self {
            GateMetric::RetainedBytes
            | GateMetric::PeakBytes
            | GateMetric::RetainedSlopeBytesPerCycle => t.noise_absolute_bytes as f64,
            // Latency is measured at the sampling interval: 10 ms of noise is nothing.
            GateMetric::ReleaseLatencyS => 0.010,
        }
    }

    /// The scenario's budget for this metric of a resource, in bytes (per cycle).
    fn budget(self, budgets: &Budgets) -> Option<u64> {
        match self {
            GateMetric::RetainedBytes => budgets.max_retained_bytes,
            GateMetric::PeakBytes => budgets.max_peak_bytes,
            GateMetric::RetainedSlopeBytesPerCycle => budgets.max_retained_slope_bytes_per_cycle,
            GateMetric::ReleaseLatencyS => None,
        }
    }

    /// The `[thresholds]` key of the scenario file that sets [`Self::budget`].
    pub fn budget_key(self, resource: Resource) -> Option<&'static str> {
        let device = resource.is_device();
        match self {
            GateMetric::RetainedBytes if device => Some("max_retained_vram_mib"),
            GateMetric::RetainedBytes => Some("max_retained_mib"),
            GateMetric::PeakBytes if device => Some("max_peak_vram_mib"),
            GateMetric::PeakBytes => Some("max_peak_mib"),
            GateMetric::RetainedSlopeBytesPerCycle if device => {
                Some("max_retained_vram_slope_mib_per_cycle")
            }
            GateMetric::RetainedSlopeBytesPerCycle => Some("max_retained_slope_mib_per_cycle"),
            GateMetric::ReleaseLatencyS => None,
        }
    }

    /// A value of this metric for the notes the gate writes.
    fn text(self, v: f64) -> String {
        match self {
            GateMetric::ReleaseLatencyS => format!("{:.1} ms", v * 1e3),
            GateMetric::RetainedSlopeBytesPerCycle => format!("{:.1} MiB/cycle", v / MIB_F64),
            _ => format!("{:.1} MiB", v / MIB_F64),
        }
    }
}

/// What one side (the baseline's runs or the new runs) says about one metric
/// of one resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observations {
    pub values: Vec<f64>,
    /// Runs that gave at least one value.
    pub runs: usize,
    /// Why no run of this side has readings of the resource (`None`: some run has).
    pub not_measured: Option<String>,
}

impl Observations {
    /// One value per run.
    pub fn per_run(values: &[f64]) -> Observations {
        Observations {
            values: values.to_vec(),
            runs: values.len(),
            not_measured: None,
        }
    }

    /// `metric` of `resource` over `runs`; runs that did not measure the
    /// resource give nothing (never a zero).
    pub fn of(metric: GateMetric, resource: Resource, runs: &[&RunSummary]) -> Observations {
        let measured: Vec<&ResourceRun> = runs
            .iter()
            .filter_map(|r| r.resource(resource))
            .filter(|m| m.not_measured.is_none())
            .collect();
        if measured.is_empty() && !runs.is_empty() {
            let why = runs
                .iter()
                .find_map(|r| r.resource(resource).and_then(|m| m.not_measured.clone()))
                .unwrap_or_else(|| {
                    format!(
                        "{} not measured: the record has no {resource} readings",
                        resource.quantity()
                    )
                });
            return Observations {
                not_measured: Some(why),
                ..Observations::default()
            };
        }
        let mut out = Observations::default();
        for run in measured {
            let values = metric.of_run(run);
            out.runs += usize::from(!values.is_empty());
            out.values.extend(values);
        }
        out
    }
}

/// The scenario's budget a row was checked against, in the metric's unit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BudgetCheck {
    /// The `[thresholds]` key of the scenario file, e.g. `max_retained_vram_mib`.
    pub key: String,
    pub limit: f64,
    /// The worst run's value (`None`: nothing to check).
    pub worst: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricVerdict {
    pub scenario: String,
    pub strategy: String,
    /// `host` or `cuda:N`.
    pub resource: Resource,
    pub metric: String,
    /// What one observation is: a run, or a timed cycle of a run.
    pub per: Per,
    pub verdict: Verdict,
    pub baseline_median: Option<f64>,
    pub new_median: Option<f64>,
    pub change: Option<f64>,
    /// 95 % interval of the change (new − baseline).
    pub interval: Option<(f64, f64)>,
    pub noise_band: Option<f64>,
    /// Observations on each side.
    pub baseline_n: usize,
    pub new_n: usize,
    /// Runs that gave those observations.
    pub baseline_runs: usize,
    pub new_runs: usize,
    /// Set on the rows of absolute budgets (metric `… (budget)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetCheck>,
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerdictReport {
    pub schema_version: u32,
    pub baseline: String,
    pub regressed: bool,
    pub verdicts: Vec<MetricVerdict>,
    pub warnings: Vec<String>,
}

/// The resources to judge: the new summary's (lead first), then any that
/// only the baseline has (so a resource that vanished is reported, not dropped).
fn resources(baseline: &Summary, new: &Summary) -> Vec<Resource> {
    let mut out = new.shown();
    for r in baseline.shown() {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

fn runs_of<'a>(summary: &'a Summary, strategy: &str) -> Vec<&'a RunSummary> {
    summary
        .runs
        .iter()
        .filter(|r| r.strategy == strategy)
        .collect()
}

/// Compares one scenario's new summary with its baseline summary: one row per
/// strategy × resource × metric.
pub fn compare(baseline: &Summary, new: &Summary, thresholds: &Thresholds) -> Vec<MetricVerdict> {
    let resources = resources(baseline, new);
    let mut out = Vec::new();
    for strategy in new.strategies.iter().map(|s| s.strategy.as_str()) {
        let new_runs = runs_of(new, strategy);
        let base_runs = runs_of(baseline, strategy);
        for &resource in &resources {
            for metric in GateMetric::ALL {
                if base_runs.is_empty() {
                    let mut v = blank(&new.scenario, strategy, resource, metric);
                    v.note = "the baseline has no runs of this strategy".into();
                    out.push(v);
                    continue;
                }
                let b = Observations::of(metric, resource, &base_runs);
                let n = Observations::of(metric, resource, &new_runs);
                out.push(judge(
                    &new.scenario,
                    strategy,
                    resource,
                    metric,
                    &b,
                    &n,
                    thresholds,
                ));
            }
        }
    }
    out
}

/// A `skipped` row with nothing measured, to be filled in.
fn blank(scenario: &str, strategy: &str, resource: Resource, metric: GateMetric) -> MetricVerdict {
    MetricVerdict {
        scenario: scenario.to_string(),
        strategy: strategy.to_string(),
        resource,
        metric: metric.as_str().to_string(),
        per: metric.per(),
        verdict: Verdict::Skipped,
        baseline_median: None,
        new_median: None,
        change: None,
        interval: None,
        noise_band: None,
        baseline_n: 0,
        new_n: 0,
        baseline_runs: 0,
        new_runs: 0,
        budget: None,
        note: String::new(),
    }
}

/// Why a side has nothing to judge because the resource was not measured.
fn unmeasured_note(baseline: &Option<String>, new: &Option<String>) -> Option<String> {
    match (baseline, new) {
        (None, None) => None,
        (Some(b), Some(n)) if b == n => Some(format!("not measured on either side: {b}")),
        (Some(b), Some(n)) => Some(format!(
            "not measured on either side: baseline: {b}; new runs: {n}"
        )),
        (Some(b), None) => Some(format!(
            "not measured in the baseline runs ({b}): re-make the baseline where it can be read"
        )),
        (None, Some(n)) => Some(format!("not measured in the new runs ({n})")),
    }
}

/// The verdict for one metric of one resource.
pub fn judge(
    scenario: &str,
    strategy: &str,
    resource: Resource,
    metric: GateMetric,
    baseline: &Observations,
    new: &Observations,
    t: &Thresholds,
) -> MetricVerdict {
    let mut v = blank(scenario, strategy, resource, metric);
    v.baseline_n = baseline.values.len();
    v.new_n = new.values.len();
    v.baseline_runs = baseline.runs;
    v.new_runs = new.runs;
    if let Some(note) = unmeasured_note(&baseline.not_measured, &new.not_measured) {
        // Never a zero: a resource without readings cannot be judged.
        v.verdict = Verdict::Inconclusive;
        v.note = note;
        return v;
    }
    let (Some(base_median), Some(new_median)) = (median(&baseline.values), median(&new.values))
    else {
        let side = match (baseline.values.is_empty(), new.values.is_empty()) {
            (true, true) => "on either side",
            (true, false) => "in the baseline runs",
            _ => "in the new runs",
        };
        // Latency is absent when nothing was released (see `metrics`): absent
        // on both sides is a fact that did not change, not missing data.
        let unchanged = metric == GateMetric::ReleaseLatencyS
            && baseline.values.is_empty()
            && new.values.is_empty();
        v.verdict = if unchanged {
            Verdict::NoChange
        } else {
            Verdict::Inconclusive
        };
        v.note = format!("no observations {side}: {}", metric.why_absent());
        return v;
    };
    let band = (t.noise_relative * base_median.abs()).max(metric.absolute_noise(t));
    let interval = difference_interval(&baseline.values, &new.values);
    v.baseline_median = Some(base_median);
    v.new_median = Some(new_median);
    v.change = Some(new_median - base_median);
    v.interval = Some(interval);
    v.noise_band = Some(band);
    let (lo, hi) = interval;
    v.verdict = if lo > band {
        Verdict::Regressed
    } else if hi < -band {
        Verdict::Improved
    } else if lo >= -band && hi <= band {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    };
    v.note = match v.verdict {
        Verdict::Inconclusive => {
            "the interval of the change crosses the noise band: repeat more (--repeat)".into()
        }
        _ => String::new(),
    };
    // A change must hold across repetitions: one run on a side cannot show
    // that, however many cycles it timed.
    if matches!(v.verdict, Verdict::Regressed | Verdict::Improved)
        && (baseline.runs < 2 || new.runs < 2)
    {
        v.note = format!(
            "would be {}, but one run on a side cannot show a change holds: use --repeat 2 or more",
            v.verdict.as_str()
        );
        v.verdict = Verdict::Inconclusive;
    }
    v
}

/// A 95 % interval for mean(new) − mean(baseline): Welch's t interval with
/// two or more runs on each side, else the full range of differences.
pub fn difference_interval(baseline: &[f64], new: &[f64]) -> (f64, f64) {
    if baseline.len() >= 2 && new.len() >= 2 {
        let (mb, vb) = mean_var(baseline);
        let (mn, vn) = mean_var(new);
        let (nb, nn) = (baseline.len() as f64, new.len() as f64);
        let se2 = vb / nb + vn / nn;
        let se = se2.sqrt();
        let df = if se2 > 0.0 {
            se2 * se2 / ((vb / nb).powi(2) / (nb - 1.0) + (vn / nn).powi(2) / (nn - 1.0))
        } else {
            f64::INFINITY
        };
        let t = t_quantile_975(df);
        let d = mn - mb;
        (d - t * se, d + t * se)
    } else {
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (min(new) - max(baseline), max(new) - min(baseline))
    }
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var)
}

/// Two-sided 95 % quantile of Student's t (table, linear in 1/df between rows).
fn t_quantile_975(df: f64) -> f64 {
    const TABLE: &[(f64, f64)] = &[
        (1.0, 12.706),
        (2.0, 4.303),
        (3.0, 3.182),
        (4.0, 2.776),
        (5.0, 2.571),
        (6.0, 2.447),
        (8.0, 2.306),
        (10.0, 2.228),
        (15.0, 2.131),
        (20.0, 2.086),
        (30.0, 2.042),
        (60.0, 2.000),
        (120.0, 1.980),
    ];
    if !df.is_finite() || df > 120.0 {
        return 1.96;
    }
    let df = df.max(1.0);
    for w in TABLE.windows(2) {
        let ((d0, t0), (d1, t1)) = (w[0], w[1]);
        if df <= d1 {
            let f = (1.0 / df - 1.0 / d0) / (1.0 / d1 - 1.0 / d0);
            return t0 + f * (t1 - t0);
        }
    }
    1.96
}

/// The metrics a scenario can budget, in the order their rows appear.
const BUDGETED: [GateMetric; 3] = [
    GateMetric::RetainedBytes,
    GateMetric::PeakBytes,
    GateMetric::RetainedSlopeBytesPerCycle,
];

/// Absolute budgets declared by the scenario, per resource, checked on the
/// worst run. A budget with nothing to check it against is `inconclusive`
/// with the reason, never a pass.
pub fn budgets(new: &Summary, t: &Thresholds) -> Vec<MetricVerdict> {
    let mut resources = new.shown();
    let device_budgeted = BUDGETED.iter().any(|m| m.budget(&t.device).is_some());
    if device_budgeted && !resources.iter().any(|r| r.is_device()) {
        // VRAM budgets on a record without a device: say so rather than skip them.
        resources.push(Resource::device_of(&new.device).unwrap_or(Resource::Device(0)));
    }
    let mut out = Vec::new();
    for strategy in new.strategies.iter().map(|s| s.strategy.as_str()) {
        let runs = runs_of(new, strategy);
        for &resource in &resources {
            for metric in BUDGETED {
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
                    (key, limit as f64),
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
    let mut v = blank(scenario, strategy, resource, metric);
    v.metric = format!("{} (budget)", metric.as_str());
    v.new_n = observed.values.len();
    v.new_runs = observed.runs;
    v.new_median = median(&observed.values);
    v.budget = Some(BudgetCheck {
        key: key.to_string(),
        limit,
        worst,
    });
    let budget = format!("{key} = {}", metric.text(limit));
    (v.verdict, v.note) = match (&observed.not_measured, worst) {
        (Some(why), _) => (
            Verdict::Inconclusive,
            format!("{budget} not checked: {why}"),
        ),
        (None, None) => (
            Verdict::Inconclusive,
            format!(
                "{budget} not checked: no run has a value of it (see the runs' errors and checks)"
            ),
        ),
        (None, Some(worst)) => (
            if worst > limit {
                Verdict::OverBudget
            } else {
                Verdict::NoChange
            },
            format!(
                "{budget}, worst of {} runs {}",
                observed.runs,
                metric.text(worst)
            ),
        ),
    };
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::summarize;
    use crate::protocol::Check;
    use crate::record::fixture::{cuda_record, record, run, with_vram};
    use crate::record::Record;

    const MIB: f64 = 1024.0 * 1024.0;
    const VRAM: Resource = Resource::Device(0);

    fn thresholds() -> Thresholds {
        Thresholds {
            retention_threshold_bytes: 16 << 20,
            noise_relative: 0.05,
            noise_absolute_bytes: 16 << 20,
            host: Default::default(),
            device: Default::default(),
        }
    }

    fn judged(metric: GateMetric, baseline: &[f64], new: &[f64]) -> MetricVerdict {
        judge(
            "s",
            "x",
            Resource::Host,
            metric,
            &Observations::per_run(baseline),
            &Observations::per_run(new),
            &thresholds(),
        )
    }

    fn row<'a>(
        rows: &'a [MetricVerdict],
        strategy: &str,
        resource: Resource,
        metric: &str,
    ) -> &'a MetricVerdict {
        rows.iter()
            .find(|v| v.strategy == strategy && v.resource == resource && v.metric == metric)
            .unwrap_or_else(|| panic!("no row {strategy} {resource} {metric}: {rows:#?}"))
    }

    /// `cuda_record()` where `strategy`'s VRAM stays `kept_mib` above the
    /// baseline after every release.
    fn cuda_keeping(strategy: &str, kept_mib: i64) -> Record {
        let mut record = cuda_record();
        for r in &mut record.runs {
            if r.meta.strategy == strategy {
                *r = with_vram(
                    run(r.meta.run, strategy, r.meta.repetition, &[1, 1, 1]),
                    678,
                    1094,
                    &[kept_mib; 3],
                    586,
                );
            }
        }
        record
    }

    /// `cuda_record()` whose VRAM could not be read in any run.
    fn cuda_unmeasured() -> Record {
        let mut record = cuda_record();
        for r in &mut record.runs {
            r.events
                .iter_mut()
                .for_each(|e| e.edge.memory.vram_bytes = None);
            r.samples.iter_mut().for_each(|s| s.vram_bytes = None);
            r.meta.checks.push(Check {
                name: "vram sampler (nvml)".into(),
                ok: false,
                detail: "nvml: driver not loaded".into(),
            });
        }
        record
    }

    fn failing(rows: &[MetricVerdict]) -> Vec<(String, Resource, String, Verdict)> {
        rows.iter()
            .filter(|v| v.verdict.fails())
            .map(|v| (v.strategy.clone(), v.resource, v.metric.clone(), v.verdict))
            .collect()
    }

    #[test]
    fn a_clear_rise_beyond_the_band_regresses() {
        let v = judged(
            GateMetric::RetainedBytes,
            &[2.0 * MIB, 3.0 * MIB],
            &[400.0 * MIB, 410.0 * MIB],
        );
        assert_eq!(v.verdict, Verdict::Regressed);
    }

    fn latency_verdict(base_kept_mib: &[u64], new_kept_mib: &[u64]) -> MetricVerdict {
        let summary = |kept: &[u64]| {
            let mut record = record();
            record.runs = (1..=2).map(|i| run(i, "drop", i, kept)).collect();
            summarize(&record)
        };
        compare(
            &summary(base_kept_mib),
            &summary(new_kept_mib),
            &thresholds(),
        )
        .into_iter()
        .find(|v| v.metric == "release_latency_s")
        .unwrap()
    }

    #[test]
    fn latency_is_not_judged_where_nothing_was_released() {
        // Loaded at 110 MiB, kept 95: 5 MiB came back, too little to time.
        let neither = latency_verdict(&[95, 95], &[95, 95]);
        assert_eq!((neither.verdict, neither.new_n), (Verdict::NoChange, 0));
        let one_side = latency_verdict(&[2, 2], &[95, 95]);
        assert_eq!(one_side.verdict, Verdict::Inconclusive);
        assert!(
            one_side.note.contains("retained_bytes"),
            "{}",
            one_side.note
        );
        // Every timed cycle is an observation: 2 runs × 2 cycles a side.
        let both = latency_verdict(&[2, 2], &[2, 2]);
        assert_eq!(both.per, Per::Cycle);
        assert_eq!((both.baseline_n, both.new_n), (4, 4));
        assert_eq!((both.baseline_runs, both.new_runs), (2, 2));
    }

    #[test]
    fn many_timed_cycles_of_one_run_are_still_one_run() {
        let one_run = Observations {
            values: vec![0.5, 0.52, 0.51],
            runs: 1,
            not_measured: None,
        };
        let v = judge(
            "s",
            "x",
            Resource::Host,
            GateMetric::ReleaseLatencyS,
            &Observations::per_run(&[0.01, 0.011]),
            &one_run,
            &thresholds(),
        );
        assert_eq!(v.verdict, Verdict::Inconclusive);
        assert!(v.note.contains("would be regressed"), "{}", v.note);
    }

    #[test]
    fn changes_inside_the_band_are_no_change() {
        let v = judged(
            GateMetric::RetainedBytes,
            &[2.0 * MIB, 3.0 * MIB],
            &[4.0 * MIB, 2.5 * MIB],
        );
        assert_eq!(v.verdict, Verdict::NoChange);
    }

    #[test]
    fn a_wide_spread_is_inconclusive_not_regressed() {
        // Retention that happens in some processes only: median moved, interval too wide.
        let v = judged(
            GateMetric::RetainedBytes,
            &[2.0 * MIB, 3.0 * MIB],
            &[2.0 * MIB, 400.0 * MIB],
        );
        assert_eq!(v.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_clear_drop_improves() {
        let v = judged(
            GateMetric::PeakBytes,
            &[800.0 * MIB, 810.0 * MIB],
            &[400.0 * MIB, 405.0 * MIB],
        );
        assert_eq!(v.verdict, Verdict::Improved);
    }

    #[test]
    fn one_run_per_side_is_never_a_regression() {
        let v = judged(GateMetric::RetainedBytes, &[2.0 * MIB], &[400.0 * MIB]);
        assert_eq!(v.verdict, Verdict::Inconclusive);
        assert!(v.note.contains("--repeat"));
    }

    #[test]
    fn welch_interval_contains_the_true_difference() {
        let (lo, hi) = difference_interval(&[1.0, 2.0, 3.0], &[11.0, 12.0, 13.0]);
        assert!(lo < 10.0 && hi > 10.0 && lo > 5.0, "({lo}, {hi})");
    }

    #[test]
    fn an_unchanged_cuda_record_passes_with_every_metric_on_every_resource() {
        let summary = summarize(&cuda_record());
        let rows = compare(&summary, &summary, &thresholds());
        assert_eq!(failing(&rows), []);
        // 3 strategies × 2 resources × 4 metrics, VRAM (the lead) first.
        assert_eq!(rows.len(), 3 * 2 * 4);
        assert_eq!(rows[0].resource, VRAM);
        for strategy in ["drop", "sync", "context-release"] {
            for metric in GateMetric::ALL {
                row(&rows, strategy, VRAM, metric.as_str());
                row(&rows, strategy, Resource::Host, metric.as_str());
            }
        }
        let drop = row(&rows, "drop", VRAM, "retained_bytes");
        assert_eq!(drop.verdict, Verdict::NoChange);
        assert_eq!(drop.new_median, Some(416.0 * MIB));
    }

    #[test]
    fn vram_kept_after_sync_regresses_vram_retained_and_not_host() {
        let baseline = summarize(&cuda_record());
        let new = summarize(&cuda_keeping("sync", 416));
        let rows = compare(&baseline, &new, &thresholds());
        assert_eq!(
            failing(&rows),
            [(
                "sync".to_string(),
                VRAM,
                "retained_bytes".to_string(),
                Verdict::Regressed
            )]
        );
        let retained = row(&rows, "sync", VRAM, "retained_bytes");
        assert_eq!(retained.change, Some(416.0 * MIB));
        assert_eq!((retained.baseline_runs, retained.new_runs), (2, 2));
        for metric in GateMetric::ALL {
            let host = row(&rows, "sync", Resource::Host, metric.as_str());
            assert_eq!(host.verdict, Verdict::NoChange, "{host:?}");
        }
        // Nothing comes back any more: no release left to time.
        let latency = row(&rows, "sync", VRAM, "release_latency_s");
        assert_eq!(latency.verdict, Verdict::Inconclusive);
        assert!(latency.note.contains("in the new runs"), "{}", latency.note);
        assert_eq!(
            row(&rows, "drop", VRAM, "retained_bytes").verdict,
            Verdict::NoChange
        );
    }

    #[test]
    fn a_vram_budget_below_what_drop_keeps_is_over_budget_for_drop_only() {
        let mut t = thresholds();
        t.device.max_retained_bytes = Some(300 << 20);
        t.host.max_retained_bytes = Some(64 << 20);
        let rows = budgets(&summarize(&cuda_record()), &t);
        assert_eq!(
            failing(&rows),
            [(
                "drop".to_string(),
                VRAM,
                "retained_bytes (budget)".to_string(),
                Verdict::OverBudget
            )]
        );
        let drop = row(&rows, "drop", VRAM, "retained_bytes (budget)");
        let budget = drop.budget.as_ref().unwrap();
        assert_eq!(budget.key, "max_retained_vram_mib");
        assert_eq!(
            (budget.limit, budget.worst),
            (300.0 * MIB, Some(416.0 * MIB))
        );
        assert!(
            drop.note.contains("max_retained_vram_mib = 300.0 MiB"),
            "{}",
            drop.note
        );
        // Going below the baseline is within any budget.
        let released = row(&rows, "context-release", VRAM, "retained_bytes (budget)");
        assert_eq!(released.verdict, Verdict::NoChange);
        assert_eq!(released.budget.as_ref().unwrap().worst, Some(-678.0 * MIB));
        // Host memory keeps its own key and budget.
        let host = row(&rows, "drop", Resource::Host, "retained_bytes (budget)");
        assert_eq!(host.budget.as_ref().unwrap().key, "max_retained_mib");
        assert_eq!(host.verdict, Verdict::NoChange);
        assert_eq!(rows.len(), 3 * 2);
    }

    #[test]
    fn a_vram_peak_budget_is_checked_on_the_worst_run() {
        let mut t = thresholds();
        t.device.max_peak_bytes = Some(1000 << 20);
        let rows = budgets(&summarize(&cuda_record()), &t);
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|v| v.verdict == Verdict::OverBudget
            && v.budget.as_ref().unwrap().key == "max_peak_vram_mib"));
        t.device.max_peak_bytes = Some(1100 << 20);
        let rows = budgets(&summarize(&cuda_record()), &t);
        assert!(
            rows.iter().all(|v| v.verdict == Verdict::NoChange),
            "{rows:#?}"
        );
    }

    #[test]
    fn unmeasured_vram_is_inconclusive_never_a_zero() {
        let measured = summarize(&cuda_record());
        let unmeasured = summarize(&cuda_unmeasured());
        let why = "VRAM not measured: nvml: driver not loaded";

        let rows = compare(&measured, &unmeasured, &thresholds());
        for v in rows.iter().filter(|v| v.resource == VRAM) {
            assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
            assert_eq!(v.new_n, 0);
            assert!(
                v.note.contains("not measured in the new runs"),
                "{}",
                v.note
            );
            assert!(v.note.contains(why), "{}", v.note);
        }
        assert_eq!(rows.iter().filter(|v| v.resource == VRAM).count(), 12);
        // Host memory is still judged.
        let host = row(&rows, "drop", Resource::Host, "retained_bytes");
        assert_eq!(host.verdict, Verdict::NoChange);

        let rows = compare(&unmeasured, &measured, &thresholds());
        let v = row(&rows, "sync", VRAM, "retained_bytes");
        assert_eq!(v.verdict, Verdict::Inconclusive);
        assert!(
            v.note.contains("not measured in the baseline runs"),
            "{}",
            v.note
        );

        let rows = compare(&unmeasured, &unmeasured, &thresholds());
        let v = row(&rows, "sync", VRAM, "release_latency_s");
        assert_eq!(v.verdict, Verdict::Inconclusive, "not a no-change: {v:?}");
        assert!(v.note.contains("on either side"), "{}", v.note);
    }

    #[test]
    fn a_budget_with_nothing_to_check_is_inconclusive_not_a_pass() {
        let mut t = thresholds();
        t.device.max_retained_bytes = Some(300 << 20);
        let rows = budgets(&summarize(&cuda_unmeasured()), &t);
        assert_eq!(rows.len(), 3);
        for v in &rows {
            assert_eq!(v.verdict, Verdict::Inconclusive);
            assert_eq!(v.budget.as_ref().unwrap().worst, None);
            assert!(v.note.contains("max_retained_vram_mib"), "{}", v.note);
            assert!(v.note.contains("nvml: driver not loaded"), "{}", v.note);
        }
        // A record with no device at all: the VRAM budget is still reported.
        let rows = budgets(&summarize(&record()), &t);
        assert_eq!(rows.len(), 2);
        assert!(rows
            .iter()
            .all(|v| v.resource == VRAM && v.verdict == Verdict::Inconclusive));
        assert!(
            rows[0].note.contains("no cuda:0 readings"),
            "{}",
            rows[0].note
        );
    }

    #[test]
    fn a_cpu_record_is_judged_on_host_memory_only() {
        let summary = summarize(&record());
        let rows = compare(&summary, &summary, &thresholds());
        assert_eq!(rows.len(), 2 * 4);
        assert!(rows.iter().all(|v| v.resource == Resource::Host));
        assert_eq!(failing(&rows), []);
    }

    #[test]
    fn verdict_json_names_the_resource_and_what_one_observation_is() {
        let summary = summarize(&cuda_record());
        let rows = compare(&summary, &summary, &thresholds());
        let json = serde_json::to_value(&rows).unwrap();
        let latency = json
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["metric"] == "release_latency_s" && v["strategy"] == "sync")
            .unwrap();
        assert_eq!(latency["resource"], "cuda:0");
        assert_eq!(latency["per"], "cycle");
        assert_eq!(latency["new_n"], 6);
        assert_eq!(latency["new_runs"], 2);
        assert!(latency.get("budget").is_none());
        let back: Vec<MetricVerdict> = serde_json::from_value(json).unwrap();
        assert_eq!(back, rows);
    }
}
