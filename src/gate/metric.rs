//! The metrics the gate judges ([`GATED`], the catalogue's [`MemoryMetric`]
//! with what the gate needs of each: [`Judged`]), what one observation of
//! each is ([`Per`]) and which statistic a row reports ([`Statistic`]), and
//! what one side says about one of them ([`Observations`]). It is the gate's
//! leaf: it imports no other file of the gate.
//!
//! What one observation is, per metric, is decided here (see the gate's
//! module docs for why); this file judges nothing.

use crate::metrics::ResourceFacts;
use serde::{Deserialize, Serialize};

use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::{Resource, ResourceRun, RunSummary, Summary};
use crate::scenario::{Budgets, Thresholds};

/// The noise band of the retention rate: 10 percentage points.
pub const RATE_BAND: f64 = 0.10;

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

/// The metrics the gate judges, for every resource, in the catalogue's
/// words ([`MemoryMetric`], the one metric enum); for all of them higher is
/// worse. verdict.json names each by the catalogue's name.
pub const GATED: [MemoryMetric; 9] = [
    MemoryMetric::Retained,
    MemoryMetric::Peak,
    MemoryMetric::Growth,
    MemoryMetric::ReleaseLatency,
    MemoryMetric::RetentionRate,
    MemoryMetric::Settle,
    MemoryMetric::LateBytes,
    MemoryMetric::Asleep,
    MemoryMetric::WakeHeld,
];

/// What the gate needs of a metric it judges (decided here, see the
/// module docs): what one observation is, its statistic, its noise band,
/// its budget.
pub trait Judged: Copy {
    fn per(self) -> Per;
    fn statistic(self) -> Statistic;
    fn of_run(self, run: &ResourceRun) -> Vec<f64>;
    fn why_absent(self) -> &'static str;
    fn absolute_noise(self, t: &Thresholds) -> f64;
    fn budget(self, budgets: &Budgets) -> Option<f64>;
    fn only_with_sleeps(self) -> bool;
    fn text(self, v: f64) -> String;
    /// The snake_case name verdict.json writes (the catalogue's).
    fn as_str(self) -> &'static str;
}

impl Judged for MemoryMetric {
    /// What one observation is (see the module docs for why).
    fn per(self) -> Per {
        match self {
            MemoryMetric::ReleaseLatency
            | MemoryMetric::RetentionRate
            | MemoryMetric::Settle
            | MemoryMetric::LateBytes
            | MemoryMetric::Asleep
            | MemoryMetric::WakeHeld => Per::Cycle,
            _ => Per::Run,
        }
    }

    fn statistic(self) -> Statistic {
        match self {
            MemoryMetric::RetentionRate => Statistic::Rate,
            _ => Statistic::Mean,
        }
    }

    /// This metric's observations in one run of one resource (for the
    /// retention rate: 1 for a retaining cycle, 0 for another).
    fn of_run(self, run: &ResourceRun) -> Vec<f64> {
        match self {
            MemoryMetric::Retained => run.retained_bytes.map(|v| v as f64).into_iter().collect(),
            MemoryMetric::Peak => run.peak_bytes.map(|v| v as f64).into_iter().collect(),
            MemoryMetric::Growth => run.retained_slope_bytes_per_cycle.into_iter().collect(),
            MemoryMetric::ReleaseLatency => run
                .cycles
                .iter()
                .filter_map(|c| c.release_latency_s)
                .collect(),
            MemoryMetric::RetentionRate => run
                .cycles
                .iter()
                .map(|c| f64::from(u8::from(c.retained_over_threshold)))
                .collect(),
            MemoryMetric::Settle => run.cycles.iter().filter_map(|c| c.settle_s).collect(),
            MemoryMetric::LateBytes => run
                .cycles
                .iter()
                .filter_map(|c| c.late_bytes.map(|v| v as f64))
                .collect(),
            MemoryMetric::Asleep => run
                .sleeps
                .iter()
                .filter_map(|p| p.asleep_bytes.map(|v| v as f64))
                .collect(),
            MemoryMetric::WakeHeld => run
                .sleeps
                .iter()
                .filter_map(|p| p.wake_held_bytes.map(|v| v as f64))
                .collect(),
            // Not one the gate judges (not in GATED): no observation.
            _ => Vec::new(),
        }
    }

    /// Why a measured resource can have no observation of this metric.
    fn why_absent(self) -> &'static str {
        match self {
            MemoryMetric::ReleaseLatency => {
                "no release to time (each cycle gave back less than the retention threshold): see retained_bytes"
            }
            MemoryMetric::Settle | MemoryMetric::LateBytes => {
                "no release edge with time after it (a release or unload followed by a load or \
                 another phase)"
            }
            MemoryMetric::Asleep | MemoryMetric::WakeHeld => {
                "no model was put to sleep (sleep and wake steps, or phases)"
            }
            _ => "the runs did not measure it (see their errors and checks)",
        }
    }

    /// The absolute part of the noise band in this metric's unit.
    fn absolute_noise(self, t: &Thresholds) -> f64 {
        match self {
            MemoryMetric::Retained
            | MemoryMetric::Peak
            | MemoryMetric::Growth
            | MemoryMetric::LateBytes
            | MemoryMetric::Asleep
            | MemoryMetric::WakeHeld => t.noise_absolute_bytes as f64,
            // Latency is measured at the sampling interval: 10 ms of noise is nothing.
            MemoryMetric::ReleaseLatency | MemoryMetric::Settle => 0.010,
            MemoryMetric::RetentionRate => RATE_BAND,
            // Not one the gate judges (not in GATED): its unit's band.
            _ => match self.unit() {
                crate::metrics::catalogue::Unit::Seconds => 0.010,
                crate::metrics::catalogue::Unit::Fraction => RATE_BAND,
                _ => t.noise_absolute_bytes as f64,
            },
        }
    }

    /// The scenario's budget for this metric of a resource, in its unit
    /// (bytes, bytes per cycle, seconds).
    fn budget(self, budgets: &Budgets) -> Option<f64> {
        budgets.get(self)
    }

    /// Judged only where a side put a model to sleep (the sleep metrics):
    /// elsewhere they would be a row of "no observations" for every strategy.
    fn only_with_sleeps(self) -> bool {
        matches!(self, MemoryMetric::Asleep | MemoryMetric::WakeHeld)
    }

    /// A value of this metric for the notes the gate writes.
    fn text(self, v: f64) -> String {
        self.unit().format(v)
    }

    fn as_str(self) -> &'static str {
        self.name()
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
    pub fn of(metric: MemoryMetric, resource: Resource, runs: &[&RunSummary]) -> Observations {
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
    pub(super) fn hits(&self) -> u64 {
        self.values.iter().filter(|v| **v != 0.0).count() as u64
    }
}

/// The runs of `strategy` in `summary`.
pub(super) fn runs_of<'a>(summary: &'a Summary, strategy: &str) -> Vec<&'a RunSummary> {
    summary
        .runs
        .iter()
        .filter(|r| r.strategy == strategy)
        .collect()
}
