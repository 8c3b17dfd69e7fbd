//! The regression gate: compares a new run's summaries with a saved baseline
//! and gives a verdict per scenario × strategy × metric, plus absolute budgets
//! declared by the scenario.
//!
//! It reads summaries and the baseline, nothing else: no sampling, no files
//! beyond what it is handed. A verdict needs both a change beyond the noise
//! band (max of a relative and an absolute part) and a confidence interval of
//! the change that lies entirely beyond that band; otherwise it is
//! `no-change` (interval inside the band) or `inconclusive`.

use serde::{Deserialize, Serialize};

use crate::metrics::{RunSummary, Summary};
use crate::scenario::Thresholds;

const MIB_F64: f64 = 1024.0 * 1024.0;

/// Bumped when verdict.json changes shape.
pub const VERDICT_SCHEMA_VERSION: u32 = 1;

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

/// The metrics the gate watches; for all of them higher is worse.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GateMetric {
    RetainedBytes,
    PeakBytes,
    RetainedSlopeBytesPerCycle,
    ReleaseLatencyS,
    /// The worker's device memory after the last cycle's release (CUDA only).
    VramAfterReleaseBytes,
}

impl GateMetric {
    pub const ALL: [GateMetric; 5] = [
        GateMetric::RetainedBytes,
        GateMetric::PeakBytes,
        GateMetric::RetainedSlopeBytesPerCycle,
        GateMetric::ReleaseLatencyS,
        GateMetric::VramAfterReleaseBytes,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GateMetric::RetainedBytes => "retained_bytes",
            GateMetric::PeakBytes => "peak_bytes",
            GateMetric::RetainedSlopeBytesPerCycle => "retained_slope_bytes_per_cycle",
            GateMetric::ReleaseLatencyS => "release_latency_s",
            GateMetric::VramAfterReleaseBytes => "vram_after_release_bytes",
        }
    }

    /// One observation per run (repetition) of a strategy.
    fn observations(self, runs: &[&RunSummary]) -> Vec<f64> {
        runs.iter()
            .filter_map(|r| match self {
                GateMetric::RetainedBytes => r.retained_bytes.map(|v| v as f64),
                GateMetric::PeakBytes => (r.peak_bytes > 0).then_some(r.peak_bytes as f64),
                GateMetric::RetainedSlopeBytesPerCycle => r.retained_slope_bytes_per_cycle,
                GateMetric::VramAfterReleaseBytes => r
                    .cycles
                    .last()
                    .and_then(|c| c.vram_after_release_bytes)
                    .map(|v| v as f64),
                GateMetric::ReleaseLatencyS => {
                    let mut v: Vec<f64> = r
                        .cycles
                        .iter()
                        .filter_map(|c| c.release_latency_s)
                        .collect();
                    v.sort_by(f64::total_cmp);
                    v.get(v.len() / 2).copied()
                }
            })
            .collect()
    }

    /// Why a run can have no observation of this metric.
    fn why_absent(self) -> &'static str {
        match self {
            GateMetric::ReleaseLatencyS => {
                "no release to time (each cycle gave back less than the retention threshold): see retained_bytes"
            }
            GateMetric::VramAfterReleaseBytes => "no VRAM readings (see the run's vram checks)",
            _ => "the runs did not measure it (see their errors and checks)",
        }
    }

    /// The absolute part of the noise band in this metric's unit.
    fn absolute_noise(self, t: &Thresholds) -> f64 {
        match self {
            GateMetric::RetainedBytes
            | GateMetric::PeakBytes
            | GateMetric::RetainedSlopeBytesPerCycle
            | GateMetric::VramAfterReleaseBytes => t.noise_absolute_bytes as f64,
            // Latency is measured at the sampling interval: 10 ms of noise is nothing.
            GateMetric::ReleaseLatencyS => 0.010,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricVerdict {
    pub scenario: String,
    pub strategy: String,
    pub metric: String,
    pub verdict: Verdict,
    pub baseline_median: Option<f64>,
    pub new_median: Option<f64>,
    pub change: Option<f64>,
    /// 95 % interval of the change (new − baseline).
    pub interval: Option<(f64, f64)>,
    pub noise_band: Option<f64>,
    pub baseline_n: usize,
    pub new_n: usize,
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

/// Compares one scenario's new summary with its baseline summary.
pub fn compare(baseline: &Summary, new: &Summary, thresholds: &Thresholds) -> Vec<MetricVerdict> {
    let mut out = Vec::new();
    for strategy in new.strategies.iter().map(|s| s.strategy.as_str()) {
        let new_runs: Vec<&RunSummary> =
            new.runs.iter().filter(|r| r.strategy == strategy).collect();
        let base_runs: Vec<&RunSummary> = baseline
            .runs
            .iter()
            .filter(|r| r.strategy == strategy)
            .collect();
        for metric in GateMetric::ALL {
            if base_runs.is_empty() {
                out.push(skipped(
                    &new.scenario,
                    strategy,
                    metric,
                    "the baseline has no runs of this strategy",
                ));
                continue;
            }
            let b = metric.observations(&base_runs);
            let n = metric.observations(&new_runs);
            if metric == GateMetric::VramAfterReleaseBytes && b.is_empty() && n.is_empty() {
                continue; // a CPU run has no VRAM: nothing to judge
            }
            out.push(judge(&new.scenario, strategy, metric, &b, &n, thresholds));
        }
    }
    out
}

fn skipped(scenario: &str, strategy: &str, metric: GateMetric, note: &str) -> MetricVerdict {
    MetricVerdict {
        scenario: scenario.to_string(),
        strategy: strategy.to_string(),
        metric: metric.as_str().to_string(),
        verdict: Verdict::Skipped,
        baseline_median: None,
        new_median: None,
        change: None,
        interval: None,
        noise_band: None,
        baseline_n: 0,
        new_n: 0,
        note: note.to_string(),
    }
}

/// The verdict for one metric from per-run observations.
pub fn judge(
    scenario: &str,
    strategy: &str,
    metric: GateMetric,
    baseline: &[f64],
    new: &[f64],
    t: &Thresholds,
) -> MetricVerdict {
    let mut v = skipped(scenario, strategy, metric, "");
    v.baseline_n = baseline.len();
    v.new_n = new.len();
    if baseline.is_empty() || new.is_empty() {
        let side = match (baseline.is_empty(), new.is_empty()) {
            (true, true) => "on either side",
            (true, false) => "in the baseline runs",
            _ => "in the new runs",
        };
        // Latency is absent when nothing was released (see `metrics`): absent
        // on both sides is a fact that did not change, not missing data.
        let unchanged =
            metric == GateMetric::ReleaseLatencyS && baseline.is_empty() && new.is_empty();
        v.verdict = if unchanged {
            Verdict::NoChange
        } else {
            Verdict::Inconclusive
        };
        v.note = format!("no observations {side}: {}", metric.why_absent());
        return v;
    }
    let base_median = median(baseline);
    let new_median = median(new);
    let band = (t.noise_relative * base_median.abs()).max(metric.absolute_noise(t));
    let interval = difference_interval(baseline, new);
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
    // A change must hold across repetitions: one run on a side cannot show that.
    if matches!(v.verdict, Verdict::Regressed | Verdict::Improved)
        && (baseline.len() < 2 || new.len() < 2)
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

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
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

/// Absolute budgets declared by the scenario, checked on the worst run.
pub fn budgets(new: &Summary, t: &Thresholds) -> Vec<MetricVerdict> {
    let mut out = Vec::new();
    for strategy in new.strategies.iter().map(|s| s.strategy.as_str()) {
        let runs: Vec<&RunSummary> = new.runs.iter().filter(|r| r.strategy == strategy).collect();
        let checks = [
            (
                GateMetric::RetainedBytes,
                t.max_retained_bytes.map(|b| b as f64),
            ),
            (GateMetric::PeakBytes, t.max_peak_bytes.map(|b| b as f64)),
            (
                GateMetric::RetainedSlopeBytesPerCycle,
                t.max_retained_slope_bytes_per_cycle.map(|b| b as f64),
            ),
        ];
        for (metric, budget) in checks {
            let Some(budget) = budget else { continue };
            let values = metric.observations(&runs);
            let worst = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut v = skipped(&new.scenario, strategy, metric, "");
            v.new_n = values.len();
            v.new_median = (!values.is_empty()).then(|| median(&values));
            v.verdict = if values.is_empty() {
                Verdict::Inconclusive
            } else if worst > budget {
                Verdict::OverBudget
            } else {
                Verdict::NoChange
            };
            v.note = format!(
                "budget {:.1} MiB, worst run {:.1} MiB",
                budget / MIB_F64,
                worst / MIB_F64
            );
            v.metric = format!("{} (budget)", metric.as_str());
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thresholds() -> Thresholds {
        Thresholds {
            retention_threshold_bytes: 16 << 20,
            noise_relative: 0.05,
            noise_absolute_bytes: 16 << 20,
            max_retained_bytes: None,
            max_retained_slope_bytes_per_cycle: None,
            max_peak_bytes: None,
        }
    }

    const MIB: f64 = 1024.0 * 1024.0;

    #[test]
    fn a_clear_rise_beyond_the_band_regresses() {
        let v = judge(
            "s",
            "x",
            GateMetric::RetainedBytes,
            &[2.0 * MIB, 3.0 * MIB],
            &[400.0 * MIB, 410.0 * MIB],
            &thresholds(),
        );
        assert_eq!(v.verdict, Verdict::Regressed);
    }

    fn latency_verdict(base_kept_mib: &[u64], new_kept_mib: &[u64]) -> MetricVerdict {
        let summary = |kept: &[u64]| {
            let mut record = crate::record::fixture::record();
            record.runs = (1..=2)
                .map(|i| crate::record::fixture::run(i, "drop", i, kept))
                .collect();
            crate::metrics::summarize(&record)
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
        let both = latency_verdict(&[2, 2], &[2, 2]);
        assert_eq!((both.baseline_n, both.new_n), (2, 2));
    }

    #[test]
    fn changes_inside_the_band_are_no_change() {
        let v = judge(
            "s",
            "x",
            GateMetric::RetainedBytes,
            &[2.0 * MIB, 3.0 * MIB],
            &[4.0 * MIB, 2.5 * MIB],
            &thresholds(),
        );
        assert_eq!(v.verdict, Verdict::NoChange);
    }

    #[test]
    fn a_wide_spread_is_inconclusive_not_regressed() {
        // Retention that happens in some processes only: median moved, interval too wide.
        let v = judge(
            "s",
            "x",
            GateMetric::RetainedBytes,
            &[2.0 * MIB, 3.0 * MIB],
            &[2.0 * MIB, 400.0 * MIB],
            &thresholds(),
        );
        assert_eq!(v.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_clear_drop_improves() {
        let v = judge(
            "s",
            "x",
            GateMetric::PeakBytes,
            &[800.0 * MIB, 810.0 * MIB],
            &[400.0 * MIB, 405.0 * MIB],
            &thresholds(),
        );
        assert_eq!(v.verdict, Verdict::Improved);
    }

    #[test]
    fn one_run_per_side_is_never_a_regression() {
        let v = judge(
            "s",
            "x",
            GateMetric::RetainedBytes,
            &[2.0 * MIB],
            &[400.0 * MIB],
            &thresholds(),
        );
        assert_eq!(v.verdict, Verdict::Inconclusive);
        assert!(v.note.contains("--repeat"));
    }

    #[test]
    fn welch_interval_contains_the_true_difference() {
        let (lo, hi) = difference_interval(&[1.0, 2.0, 3.0], &[11.0, 12.0, 13.0]);
        assert!(lo < 10.0 && hi > 10.0 && lo > 5.0, "({lo}, {hi})");
    }
}
