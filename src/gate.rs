//! The regression gate: compares a new run's summaries with a saved baseline
//! and gives a verdict per scenario × strategy × resource × metric, plus the
//! absolute budgets the scenario declares.
//!
//! It reads summaries and the baseline, nothing else: no sampling, no files
//! beyond what it is handed. Every resource a record measured (host RSS,
//! VRAM of `cuda:N`) is judged by the same code, on the same metrics:
//! retained after the last cycle, peak, retained slope, release latency and
//! the retention rate.
//!
//! Broken evidence never passes: [`broken_runs`] names every run of either
//! side that failed, timed out, was killed or measured fewer cycles than
//! asked for, and `memrel check` exits 2 on any of them unless told to judge
//! the complete runs only ([`complete_only`], which every affected row then
//! says). A budget nothing could be checked against is an `error` row (exit
//! 2), never a pass.
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
//! observations, never a zero: when one side lacks it the verdict is
//! `inconclusive` with the reason.

use serde::{Deserialize, Serialize};

use crate::metrics::{Resource, ResourceRun, RunSummary, Summary};
use crate::record::RunStatus;
use crate::scenario::{Budgets, Thresholds};
use crate::stats::{fisher_exact, mean, proportion_difference, welch_interval};

const MIB_F64: f64 = 1024.0 * 1024.0;

/// Confidence of every interval the gate builds.
pub const CONFIDENCE: f64 = 0.95;
/// Significance a rate change needs (Fisher's exact test, two-sided).
pub const RATE_ALPHA: f64 = 0.05;
/// The noise band of the retention rate: 10 percentage points.
pub const RATE_BAND: f64 = 0.10;

/// Bumped when verdict.json changes shape (2: rows name their resource, say
/// what one observation is, and budget rows carry their scenario key;
/// 3: rows report means (`baseline_value`, `new_value`, `statistic`) instead
/// of medians, the `retention_rate` rows carry their counts and p-value, the
/// `error` verdict, and the report lists `errors` and `broken_runs`).
pub const VERDICT_SCHEMA_VERSION: u32 = 3;

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
    /// The evidence cannot be judged (a budget with no observation, a
    /// strategy with no complete run): `memrel check` exits 2.
    Error,
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
            Verdict::Error => "error",
        }
    }

    /// A regression: exit 1.
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

/// The statistic a row's `baseline_value` and `new_value` are.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Statistic {
    /// The mean of the observations (interval: Welch's, of the difference of means).
    Mean,
    /// The share of cycles retaining (interval: Newcombe's, of the difference).
    Rate,
    /// The worst run (budget rows).
    Worst,
}

/// The metrics the gate watches, for every resource; for all of them higher is worse.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GateMetric {
    RetainedBytes,
    PeakBytes,
    RetainedSlopeBytesPerCycle,
    ReleaseLatencyS,
    /// Retaining cycles out of all cycles.
    RetentionRate,
}

impl GateMetric {
    pub const ALL: [GateMetric; 5] = [
        GateMetric::RetainedBytes,
        GateMetric::PeakBytes,
        GateMetric::RetainedSlopeBytesPerCycle,
        GateMetric::ReleaseLatencyS,
        GateMetric::RetentionRate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GateMetric::RetainedBytes => "retained_bytes",
            GateMetric::PeakBytes => "peak_bytes",
            GateMetric::RetainedSlopeBytesPerCycle => "retained_slope_bytes_per_cycle",
            GateMetric::ReleaseLatencyS => "release_latency_s",
            GateMetric::RetentionRate => "retention_rate",
        }
    }

    /// What one observation is (see the module docs for why).
    pub fn per(self) -> Per {
        match self {
            GateMetric::ReleaseLatencyS | GateMetric::RetentionRate => Per::Cycle,
            _ => Per::Run,
        }
    }

    pub fn statistic(self) -> Statistic {
        match self {
            GateMetric::RetentionRate => Statistic::Rate,
            _ => Statistic::Mean,
        }
    }

    /// This metric's observations in one run of one resource (for the
    /// retention rate: 1 for a retaining cycle, 0 for another).
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
            GateMetric::RetentionRate => run
                .cycles
                .iter()
                .map(|c| f64::from(u8::from(c.retained_over_threshold)))
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
            GateMetric::RetentionRate => RATE_BAND,
        }
    }

    /// The scenario's budget for this metric of a resource, in bytes (per cycle).
    fn budget(self, budgets: &Budgets) -> Option<u64> {
        match self {
            GateMetric::RetainedBytes => budgets.max_retained_bytes,
            GateMetric::PeakBytes => budgets.max_peak_bytes,
            GateMetric::RetainedSlopeBytesPerCycle => budgets.max_retained_slope_bytes_per_cycle,
            GateMetric::ReleaseLatencyS | GateMetric::RetentionRate => None,
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
            GateMetric::ReleaseLatencyS | GateMetric::RetentionRate => None,
        }
    }

    /// A value of this metric for the notes the gate writes.
    fn text(self, v: f64) -> String {
        match self {
            GateMetric::ReleaseLatencyS => format!("{:.1} ms", v * 1e3),
            GateMetric::RetainedSlopeBytesPerCycle => format!("{:.1} MiB/cycle", v / MIB_F64),
            GateMetric::RetentionRate => format!("{:.0} %", v * 100.0),
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
    /// Runs with at least one non-zero value (for the retention rate: runs
    /// with a retaining cycle).
    pub runs_nonzero: usize,
    /// Why no run of this side has readings of the resource (`None`: some run has).
    pub not_measured: Option<String>,
}

impl Observations {
    /// One value per run.
    pub fn per_run(values: &[f64]) -> Observations {
        Observations {
            values: values.to_vec(),
            runs: values.len(),
            runs_nonzero: values.iter().filter(|v| **v != 0.0).count(),
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
            out.runs_nonzero += usize::from(values.iter().any(|v| *v != 0.0));
            out.values.extend(values);
        }
        out
    }

    /// The count of non-zero observations (retaining cycles).
    fn hits(&self) -> u64 {
        self.values.iter().filter(|v| **v != 0.0).count() as u64
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

/// The counts behind a `retention_rate` row.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RateTest {
    /// Retaining cycles on each side (out of `baseline_n` and `new_n`).
    pub baseline_retaining: u64,
    pub new_retaining: u64,
    /// Runs with a retaining cycle on each side.
    pub baseline_runs_retaining: usize,
    pub new_runs_retaining: usize,
    /// Fisher's exact test, two-sided.
    pub p_value: f64,
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
    /// What `baseline_value` and `new_value` are.
    pub statistic: Statistic,
    pub verdict: Verdict,
    pub baseline_value: Option<f64>,
    pub new_value: Option<f64>,
    /// new_value − baseline_value.
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
    /// Set on the `retention_rate` rows that were tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateTest>,
    pub note: String,
}

/// Which side of the comparison a run belongs to.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    Baseline,
    New,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::New => "new",
        }
    }
}

/// A run whose evidence is broken: it failed, timed out, was killed, or
/// measured fewer cycles than asked for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BrokenRun {
    pub scenario: String,
    pub side: Side,
    pub run: u32,
    pub strategy: String,
    pub repetition: u32,
    /// The run's status as runs.json writes it (`failed`, `timed_out`, …),
    /// or `incomplete` for a completed run that measured too few cycles.
    pub status: String,
    /// Its error, or what is missing.
    pub why: String,
}

impl std::fmt::Display for BrokenRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "scenario {}, {} run {} ({} repetition {}): {}: {}",
            self.scenario,
            self.side.as_str(),
            self.run,
            self.strategy,
            self.repetition,
            self.status,
            self.why
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerdictReport {
    pub schema_version: u32,
    pub baseline: String,
    /// A regression or a blown budget: exit 1.
    pub regressed: bool,
    /// Why the evidence cannot be judged: exit 2 when any (takes precedence).
    #[serde(default)]
    pub errors: Vec<String>,
    /// Runs of either side that failed, timed out, were killed or are incomplete.
    #[serde(default)]
    pub broken_runs: Vec<BrokenRun>,
    /// `--complete-runs-only`: the broken runs were left out and the rest judged.
    #[serde(default)]
    pub complete_runs_only: bool,
    pub verdicts: Vec<MetricVerdict>,
    pub warnings: Vec<String>,
}

/// The run's status as runs.json spells it.
fn status_name(status: RunStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{status:?}"))
}

/// Cycles each run of `strategy` was asked for.
fn cycles_per_run(summary: &Summary, strategy: &str) -> Option<u32> {
    summary
        .strategies
        .iter()
        .find(|s| s.strategy == strategy && s.runs > 0)
        .map(|s| s.cycles_expected / s.runs)
}

/// Why a run's evidence is broken, `None` when it is complete.
fn broken(summary: &Summary, run: &RunSummary) -> Option<(String, String)> {
    if run.status != RunStatus::Completed {
        let why = run
            .error
            .clone()
            .unwrap_or_else(|| "no error recorded (see runs.json)".to_string());
        return Some((status_name(run.status), why));
    }
    let expected = cycles_per_run(summary, &run.strategy)?;
    let measured = run.cycles.len() as u32;
    (measured < expected).then(|| {
        (
            "incomplete".to_string(),
            format!("measured {measured} of {expected} cycles"),
        )
    })
}

/// Every run of `summary` that failed, timed out, was killed or measured
/// fewer cycles than asked for.
pub fn broken_runs(summary: &Summary, side: Side) -> Vec<BrokenRun> {
    summary
        .runs
        .iter()
        .filter_map(|run| {
            let (status, why) = broken(summary, run)?;
            Some(BrokenRun {
                scenario: summary.scenario.clone(),
                side,
                run: run.run,
                strategy: run.strategy.clone(),
                repetition: run.repetition,
                status,
                why,
            })
        })
        .collect()
}

/// `summary` with its broken runs left out (the strategies stay listed, so a
/// strategy without a complete run is reported, not dropped).
pub fn complete_only(summary: &Summary) -> Summary {
    let mut out = summary.clone();
    out.runs.retain(|r| broken(summary, r).is_none());
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
    let in_baseline = |s: &str| baseline.strategies.iter().any(|b| b.strategy == s);
    let mut out = Vec::new();
    for strategy in new.strategies.iter().map(|s| s.strategy.as_str()) {
        let new_runs = runs_of(new, strategy);
        let base_runs = runs_of(baseline, strategy);
        for &resource in &resources {
            for metric in GateMetric::ALL {
                let mut v = blank(&new.scenario, strategy, resource, metric);
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
                    }
                }
                out.push(v);
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
        statistic: metric.statistic(),
        verdict: Verdict::Skipped,
        baseline_value: None,
        new_value: None,
        change: None,
        interval: None,
        noise_band: None,
        baseline_n: 0,
        new_n: 0,
        baseline_runs: 0,
        new_runs: 0,
        budget: None,
        rate: None,
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
    let (Some(base_mean), Some(new_mean)) = (mean(&baseline.values), mean(&new.values)) else {
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
    v.baseline_value = Some(base_mean);
    v.new_value = Some(new_mean);
    v.change = Some(new_mean - base_mean);
    if metric == GateMetric::RetentionRate {
        judge_rate(&mut v, baseline, new);
    } else {
        judge_values(&mut v, metric, baseline, new, t);
    }
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

/// Values: Welch's interval of the difference of means against the noise band.
fn judge_values(
    v: &mut MetricVerdict,
    metric: GateMetric,
    baseline: &Observations,
    new: &Observations,
    t: &Thresholds,
) {
    let base_mean = v.baseline_value.unwrap_or(0.0);
    let band = (t.noise_relative * base_mean.abs()).max(metric.absolute_noise(t));
    let (lo, hi) = difference_interval(&baseline.values, &new.values);
    v.interval = Some((lo, hi));
    v.noise_band = Some(band);
    v.verdict = if lo > band {
        Verdict::Regressed
    } else if hi < -band {
        Verdict::Improved
    } else if lo >= -band && hi <= band {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    };
    if v.verdict == Verdict::Inconclusive {
        v.note = "the interval of the change crosses the noise band: repeat more (--repeat)".into();
    }
}

/// The retention rate: Fisher's exact test and Newcombe's interval of the
/// difference of the two shares of retaining cycles.
fn judge_rate(v: &mut MetricVerdict, baseline: &Observations, new: &Observations) {
    let (nb, nn) = (baseline.values.len() as u64, new.values.len() as u64);
    let (hb, hn) = (baseline.hits(), new.hits());
    let (Some(p), Some(d)) = (
        fisher_exact(hn, nn, hb, nb),
        proportion_difference(hb, nb, hn, nn, CONFIDENCE),
    ) else {
        v.verdict = Verdict::Inconclusive;
        v.note = "no cycles to count".into();
        return;
    };
    v.interval = Some((d.lo, d.hi));
    v.noise_band = Some(RATE_BAND);
    v.rate = Some(RateTest {
        baseline_retaining: hb,
        new_retaining: hn,
        baseline_runs_retaining: baseline.runs_nonzero,
        new_runs_retaining: new.runs_nonzero,
        p_value: p,
    });
    let counts = format!("{hb} of {nb} cycles retaining → {hn} of {nn}, Fisher p = {p:.3}");
    let significant = p < RATE_ALPHA;
    // The side that retains more must do so in two processes or more: cycles
    // of one process that kept its heap are not independent.
    let (verdict, higher_runs) = if significant && d.estimate > RATE_BAND {
        (Verdict::Regressed, new.runs_nonzero)
    } else if significant && d.estimate < -RATE_BAND {
        (Verdict::Improved, baseline.runs_nonzero)
    } else if d.lo >= -RATE_BAND && d.hi <= RATE_BAND {
        (Verdict::NoChange, 0)
    } else {
        (Verdict::Inconclusive, 0)
    };
    (v.verdict, v.note) = match verdict {
        Verdict::Regressed | Verdict::Improved if higher_runs < 2 => (
            Verdict::Inconclusive,
            format!(
                "{counts}: would be {}, but the retaining cycles come from one run: use --repeat 2 or more",
                verdict.as_str()
            ),
        ),
        Verdict::Inconclusive if !significant => (
            verdict,
            format!(
                "{counts}: not significant, and the interval crosses the ±{:.0} point band: more cycles (--cycles, --repeat)",
                RATE_BAND * 100.0
            ),
        ),
        Verdict::Inconclusive => (
            verdict,
            format!(
                "{counts}: significant, but the change is inside the ±{:.0} point band",
                RATE_BAND * 100.0
            ),
        ),
        _ => (verdict, counts),
    };
}

/// A 95 % interval for mean(new) − mean(baseline): Welch's t interval with
/// two or more runs on each side, else the full range of differences.
pub fn difference_interval(baseline: &[f64], new: &[f64]) -> (f64, f64) {
    if let Some(d) = welch_interval(baseline, new, CONFIDENCE) {
        return (d.lo, d.hi);
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min(new) - max(baseline), max(new) - min(baseline))
}

/// The fewest cycles a side needs for a `retention_rate` verdict, with
/// every cycle of one side retaining and none of the other: (regressed,
/// no-change when neither side retains). For the footers and the README.
pub fn rate_cycles_needed() -> (u64, u64) {
    let regressed = (1..1000)
        .find(|&n| fisher_exact(n, n, 0, n).is_some_and(|p| p < RATE_ALPHA))
        .unwrap_or(0);
    let no_change = (1..10_000)
        .find(|&n| {
            proportion_difference(0, n, 0, n, CONFIDENCE)
                .is_some_and(|d| d.lo >= -RATE_BAND && d.hi <= RATE_BAND)
        })
        .unwrap_or(0);
    (regressed, no_change)
}

/// The metrics a scenario can budget, in the order their rows appear.
const BUDGETED: [GateMetric; 3] = [
    GateMetric::RetainedBytes,
    GateMetric::PeakBytes,
    GateMetric::RetainedSlopeBytesPerCycle,
];

/// Absolute budgets declared by the scenario, per resource, checked on the
/// worst run. A budget with nothing to check it against is an `error` row
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
    v.statistic = Statistic::Worst;
    v.new_n = observed.values.len();
    v.new_runs = observed.runs;
    v.new_value = worst;
    v.budget = Some(BudgetCheck {
        key: key.to_string(),
        limit,
        worst,
    });
    let budget = format!("{key} = {}", metric.text(limit));
    (v.verdict, v.note) = match (&observed.not_measured, worst) {
        (Some(why), _) => (Verdict::Error, format!("{budget} not checked: {why}")),
        (None, None) => (
            Verdict::Error,
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
    use crate::record::{Record, RunStatus};

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
            runs_nonzero: 1,
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

    /// A record of `drop` only: one run per entry, each keeping `kept_mib` per cycle.
    fn drop_runs(kept_mib: &[&[u64]]) -> Summary {
        let mut record = record();
        record.header.cycles = kept_mib[0].len() as u32;
        record.runs = kept_mib
            .iter()
            .enumerate()
            .map(|(i, kept)| run(i as u32 + 1, "drop", i as u32 + 1, kept))
            .collect();
        summarize(&record)
    }

    fn rate_row(baseline: &Summary, new: &Summary) -> MetricVerdict {
        compare(baseline, new, &thresholds())
            .into_iter()
            .find(|v| v.metric == "retention_rate")
            .unwrap()
    }

    #[test]
    fn retention_in_every_cycle_of_two_runs_regresses_the_rate() {
        let base = drop_runs(&[&[1, 1, 1], &[1, 2, 1]]);
        let new = drop_runs(&[&[60, 60, 60], &[60, 60, 60]]);
        let v = rate_row(&base, &new);
        assert_eq!(v.verdict, Verdict::Regressed, "{v:?}");
        assert_eq!((v.per, v.statistic), (Per::Cycle, Statistic::Rate));
        assert_eq!((v.baseline_value, v.new_value), (Some(0.0), Some(1.0)));
        assert_eq!((v.baseline_n, v.new_n), (6, 6));
        let rate = v.rate.as_ref().unwrap();
        assert_eq!((rate.baseline_retaining, rate.new_retaining), (0, 6));
        assert_eq!(rate.new_runs_retaining, 2);
        assert!((rate.p_value - 2.0 / 924.0).abs() < 1e-12, "{rate:?}");
        assert!(
            v.note.contains("0 of 6 cycles retaining → 6 of 6"),
            "{}",
            v.note
        );
        // And back again: improved.
        assert_eq!(rate_row(&new, &base).verdict, Verdict::Improved);
    }

    #[test]
    fn retention_in_half_the_cycles_of_3_a_side_is_not_significant() {
        // 3 of 6 against 0 of 6: Fisher p = 0.18, one process's cycles are not evidence.
        let base = drop_runs(&[&[1, 1, 1], &[1, 1, 1]]);
        let new = drop_runs(&[&[2, 60, 60], &[2, 2, 60]]);
        let v = rate_row(&base, &new);
        assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
        assert!(v.note.contains("not significant"), "{}", v.note);
    }

    #[test]
    fn retaining_cycles_from_one_run_only_never_regress_the_rate() {
        // 6 of 12 against 0 of 12 is significant (p = 0.014), but all six
        // come from one process that kept its heap.
        let base = drop_runs(&[&[1; 6], &[1; 6]]);
        let new = drop_runs(&[&[60; 6], &[1; 6]]);
        let v = rate_row(&base, &new);
        assert!(v.rate.as_ref().unwrap().p_value < RATE_ALPHA, "{v:?}");
        assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
        assert!(v.note.contains("come from one run"), "{}", v.note);
    }

    #[test]
    fn no_change_in_the_rate_needs_enough_cycles() {
        let (regressed, no_change) = rate_cycles_needed();
        // All of 4 against none of 4: p = 2/70 = 0.029; all of 3: p = 0.1.
        assert_eq!(regressed, 4);
        assert_eq!(no_change, 35);
        let zeros = |n: usize| Observations {
            values: vec![0.0; n],
            runs: 2,
            runs_nonzero: 0,
            not_measured: None,
        };
        let judged = |n: usize| {
            judge(
                "s",
                "x",
                Resource::Host,
                GateMetric::RetentionRate,
                &zeros(n),
                &zeros(n),
                &thresholds(),
            )
            .verdict
        };
        assert_eq!(judged(no_change as usize), Verdict::NoChange);
        assert_eq!(judged(no_change as usize - 1), Verdict::Inconclusive);
    }

    /// `record()` with run 2 failed, run 4 timed out and run 3 cut short after 2 cycles.
    fn broken_record() -> Record {
        let mut record = record();
        record.runs[1].meta.status = RunStatus::Failed;
        record.runs[1].meta.error = Some("worker exited with status 1".into());
        record.runs[3].meta.status = RunStatus::TimedOut;
        record.runs[3].meta.error = Some("worker ran past the scenario's timeout_s (1 s)".into());
        record.runs[2] = run(3, "drop", 2, &[2, 2]);
        record
    }

    #[test]
    fn failed_timed_out_and_short_runs_are_broken_evidence() {
        let summary = summarize(&broken_record());
        let broken = broken_runs(&summary, Side::New);
        let seen: Vec<(u32, &str, &str)> = broken
            .iter()
            .map(|b| (b.run, b.status.as_str(), b.why.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (2, "failed", "worker exited with status 1"),
                (3, "incomplete", "measured 2 of 3 cycles"),
                (
                    4,
                    "timed_out",
                    "worker ran past the scenario's timeout_s (1 s)"
                ),
            ]
        );
        assert_eq!(
            broken[0].to_string(),
            "scenario fixture, new run 2 (malloc-trim repetition 1): failed: worker exited with status 1"
        );
        assert_eq!(broken_runs(&summarize(&record()), Side::Baseline), []);
    }

    #[test]
    fn complete_runs_only_judges_what_is_left_and_says_so() {
        let base = summarize(&record());
        let new = summarize(&broken_record());
        let left_out = broken_runs(&new, Side::New);
        let mut rows = compare(&base, &complete_only(&new), &thresholds());
        note_left_out(&mut rows, &left_out);
        // malloc-trim lost both runs: nothing to judge is an error, not a pass.
        let trim = row(&rows, "malloc-trim", Resource::Host, "retained_bytes");
        assert_eq!(trim.verdict, Verdict::Error, "{trim:?}");
        assert!(
            trim.note.starts_with(
                "complete runs only, left out new run 2 (failed), new run 4 (timed_out); no complete run"
            ),
            "{}",
            trim.note
        );
        // drop keeps one complete run: judged on it, and says what was left out.
        let drop = row(&rows, "drop", Resource::Host, "retained_bytes");
        assert_eq!((drop.new_runs, drop.baseline_runs), (1, 2));
        assert!(
            drop.note
                .starts_with("complete runs only, left out new run 3 (incomplete)"),
            "{}",
            drop.note
        );
        // Budgets of a strategy without a complete run have no observation: an error.
        let mut t = thresholds();
        t.host.max_retained_bytes = Some(64 << 20);
        let budget = budgets(&complete_only(&new), &t);
        let trim = budget.iter().find(|v| v.strategy == "malloc-trim").unwrap();
        assert_eq!(trim.verdict, Verdict::Error, "{trim:?}");
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
        // 3 strategies × 2 resources × 5 metrics, VRAM (the lead) first.
        assert_eq!(rows.len(), 3 * 2 * 5);
        assert_eq!(rows[0].resource, VRAM);
        for strategy in ["drop", "sync", "context-release"] {
            for metric in GateMetric::ALL {
                row(&rows, strategy, VRAM, metric.as_str());
                row(&rows, strategy, Resource::Host, metric.as_str());
            }
        }
        let drop = row(&rows, "drop", VRAM, "retained_bytes");
        assert_eq!(drop.verdict, Verdict::NoChange);
        assert_eq!(drop.new_value, Some(416.0 * MIB));
        assert_eq!(drop.statistic, Statistic::Mean);
    }

    #[test]
    fn vram_kept_after_sync_regresses_vram_retained_and_not_host() {
        let baseline = summarize(&cuda_record());
        let new = summarize(&cuda_keeping("sync", 416));
        let rows = compare(&baseline, &new, &thresholds());
        // Every cycle of both runs now retains, where none did: the rate regresses too.
        let regressed = |metric: &str| {
            (
                "sync".to_string(),
                VRAM,
                metric.to_string(),
                Verdict::Regressed,
            )
        };
        assert_eq!(
            failing(&rows),
            [regressed("retained_bytes"), regressed("retention_rate")]
        );
        let rate = row(&rows, "sync", VRAM, "retention_rate");
        assert_eq!(
            (rate.baseline_value, rate.new_value),
            (Some(0.0), Some(1.0))
        );
        let retained = row(&rows, "sync", VRAM, "retained_bytes");
        assert_eq!(retained.change, Some(416.0 * MIB));
        assert_eq!((retained.baseline_runs, retained.new_runs), (2, 2));
        for metric in GateMetric::ALL {
            let host = row(&rows, "sync", Resource::Host, metric.as_str());
            // None of 6 cycles retaining on either side is too few to show no change.
            let expected = match metric {
                GateMetric::RetentionRate => Verdict::Inconclusive,
                _ => Verdict::NoChange,
            };
            assert_eq!(host.verdict, expected, "{host:?}");
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
        assert_eq!(rows.iter().filter(|v| v.resource == VRAM).count(), 15);
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
    fn a_budget_with_nothing_to_check_is_an_error_not_a_pass() {
        let mut t = thresholds();
        t.device.max_retained_bytes = Some(300 << 20);
        let rows = budgets(&summarize(&cuda_unmeasured()), &t);
        assert_eq!(rows.len(), 3);
        for v in &rows {
            assert_eq!(v.verdict, Verdict::Error);
            assert_eq!(v.budget.as_ref().unwrap().worst, None);
            assert!(v.note.contains("max_retained_vram_mib"), "{}", v.note);
            assert!(v.note.contains("nvml: driver not loaded"), "{}", v.note);
        }
        // A record with no device at all: the VRAM budget is still reported.
        let rows = budgets(&summarize(&record()), &t);
        assert_eq!(rows.len(), 2);
        assert!(rows
            .iter()
            .all(|v| v.resource == VRAM && v.verdict == Verdict::Error));
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
        assert_eq!(rows.len(), 2 * 5);
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
