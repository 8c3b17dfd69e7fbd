//! The metrics the gate judges ([`GateMetric`], named through the metric
//! catalogue) and what one side says about one of them ([`Observations`]).
//!
//! What one observation is, per metric, is decided here (see the gate's
//! module docs for why); this file judges nothing.

use serde::{Deserialize, Serialize};

use super::report::{Per, Statistic};
use crate::metrics::catalogue::{MemoryMetric, Unit};
use crate::metrics::{Resource, ResourceRun, RunSummary, Summary};
use crate::scenario::{Budgets, Thresholds};

/// The noise band of the retention rate: 10 percentage points.
pub const RATE_BAND: f64 = 0.10;

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
    /// The release gap: settle time after each release edge.
    SettleS,
    /// The release gap: what came back after each release edge.
    LateBytes,
    /// A sleep's memory while asleep, against the sleep's begin (per sleep).
    AsleepBytes,
    /// What a sleep and its wake left behind (per sleep).
    WakeHeldBytes,
}

impl GateMetric {
    pub const ALL: [GateMetric; 9] = [
        GateMetric::RetainedBytes,
        GateMetric::PeakBytes,
        GateMetric::RetainedSlopeBytesPerCycle,
        GateMetric::ReleaseLatencyS,
        GateMetric::RetentionRate,
        GateMetric::SettleS,
        GateMetric::LateBytes,
        GateMetric::AsleepBytes,
        GateMetric::WakeHeldBytes,
    ];

    /// The metric in the catalogue.
    pub fn memory(self) -> MemoryMetric {
        match self {
            GateMetric::RetainedBytes => MemoryMetric::Retained,
            GateMetric::PeakBytes => MemoryMetric::Peak,
            GateMetric::RetainedSlopeBytesPerCycle => MemoryMetric::Growth,
            GateMetric::ReleaseLatencyS => MemoryMetric::ReleaseLatency,
            GateMetric::RetentionRate => MemoryMetric::RetentionRate,
            GateMetric::SettleS => MemoryMetric::Settle,
            GateMetric::LateBytes => MemoryMetric::LateBytes,
            GateMetric::AsleepBytes => MemoryMetric::Asleep,
            GateMetric::WakeHeldBytes => MemoryMetric::WakeHeld,
        }
    }

    /// The snake_case name verdict.json writes (the catalogue's, which serde's equals: tested).
    pub fn as_str(self) -> &'static str {
        self.memory().name()
    }

    /// What people call it: `retained`, `growth per cycle`, ….
    pub fn human(self) -> &'static str {
        self.memory().human()
    }

    pub fn unit(self) -> Unit {
        self.memory().unit()
    }

    /// What one observation is (see the module docs for why).
    pub fn per(self) -> Per {
        match self {
            GateMetric::ReleaseLatencyS
            | GateMetric::RetentionRate
            | GateMetric::SettleS
            | GateMetric::LateBytes
            | GateMetric::AsleepBytes
            | GateMetric::WakeHeldBytes => Per::Cycle,
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
    pub(super) fn of_run(self, run: &ResourceRun) -> Vec<f64> {
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
            GateMetric::SettleS => run.cycles.iter().filter_map(|c| c.settle_s).collect(),
            GateMetric::LateBytes => run
                .cycles
                .iter()
                .filter_map(|c| c.late_bytes.map(|v| v as f64))
                .collect(),
            GateMetric::AsleepBytes => run
                .sleeps
                .iter()
                .filter_map(|p| p.asleep_bytes.map(|v| v as f64))
                .collect(),
            GateMetric::WakeHeldBytes => run
                .sleeps
                .iter()
                .filter_map(|p| p.wake_held_bytes.map(|v| v as f64))
                .collect(),
        }
    }

    /// Why a measured resource can have no observation of this metric.
    pub(super) fn why_absent(self) -> &'static str {
        match self {
            GateMetric::ReleaseLatencyS => {
                "no release to time (each cycle gave back less than the retention threshold): see retained_bytes"
            }
            GateMetric::SettleS | GateMetric::LateBytes => {
                "no release edge with time after it (a release or unload followed by a load or \
                 another phase)"
            }
            GateMetric::AsleepBytes | GateMetric::WakeHeldBytes => {
                "no model was put to sleep (sleep and wake steps, or phases)"
            }
            _ => "the runs did not measure it (see their errors and checks)",
        }
    }

    /// The absolute part of the noise band in this metric's unit.
    pub(super) fn absolute_noise(self, t: &Thresholds) -> f64 {
        match self {
            GateMetric::RetainedBytes
            | GateMetric::PeakBytes
            | GateMetric::RetainedSlopeBytesPerCycle
            | GateMetric::LateBytes
            | GateMetric::AsleepBytes
            | GateMetric::WakeHeldBytes => t.noise_absolute_bytes as f64,
            // Latency is measured at the sampling interval: 10 ms of noise is nothing.
            GateMetric::ReleaseLatencyS | GateMetric::SettleS => 0.010,
            GateMetric::RetentionRate => RATE_BAND,
        }
    }

    /// The scenario's budget for this metric of a resource, in its unit
    /// (bytes, bytes per cycle, seconds).
    pub(super) fn budget(self, budgets: &Budgets) -> Option<f64> {
        budgets.get(self.memory())
    }

    /// The `[thresholds]` key of the scenario file that sets [`Self::budget`].
    pub fn budget_key(self, resource: Resource) -> Option<String> {
        self.memory().budget_key(resource)
    }

    /// Judged only where a side put a model to sleep (the sleep metrics):
    /// elsewhere they would be a row of "no observations" for every strategy.
    pub fn only_with_sleeps(self) -> bool {
        matches!(self, GateMetric::AsleepBytes | GateMetric::WakeHeldBytes)
    }

    /// A value of this metric for the notes the gate writes.
    pub(super) fn text(self, v: f64) -> String {
        self.unit().format(v)
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
