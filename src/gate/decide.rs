//! The decision rules: one metric of one resource, baseline against new,
//! becomes a verdict (Welch's interval of the difference of means against
//! the noise band for values; Fisher's exact test and Newcombe's interval
//! for the retention rate). Pure arithmetic on observations; no I/O.

use super::metric::{Judged, Observations, RATE_BAND};
use super::report::{MetricVerdict, RateTest, Verdict};
use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::Resource;
use crate::scenario::Thresholds;
use crate::stats::{fisher_exact, mean, proportion_difference, welch_interval};

/// Confidence of every interval the gate builds.
pub const CONFIDENCE: f64 = 0.95;
/// Significance a rate change needs (Fisher's exact test, two-sided).
pub const RATE_ALPHA: f64 = 0.05;

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
    metric: MemoryMetric,
    baseline: &Observations,
    new: &Observations,
    t: &Thresholds,
) -> MetricVerdict {
    let mut v = MetricVerdict::blank(scenario, strategy, resource, metric);
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
        let unchanged = matches!(
            metric,
            MemoryMetric::ReleaseLatency
                | MemoryMetric::Settle
                | MemoryMetric::LateBytes
                | MemoryMetric::Asleep
                | MemoryMetric::WakeHeld
        ) && baseline.values.is_empty()
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
    if metric == MemoryMetric::RetentionRate {
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
    // Nor can one run show that nothing changed: the other runs may differ.
    if v.verdict == Verdict::NoChange && (baseline.runs < 2 || new.runs < 2) {
        v.note = format!(
            "one run on a side cannot show nothing changed: use --repeat {}",
            super::evidence::BASELINE_MIN_RUNS
        );
        v.verdict = Verdict::Inconclusive;
    }
    v
}

/// Values: Welch's interval of the difference of means against the noise band.
fn judge_values(
    v: &mut MetricVerdict,
    metric: MemoryMetric,
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
