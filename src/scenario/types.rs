//! The validated scenario types shared by the parent and the worker. The
//! words for a model and how it loads are `model::spec`'s: a scenario holds
//! them, and whoever names them imports them from there.

use crate::metrics::ResourceFacts;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::why::Mechanism;
use crate::metrics::Resource;
use crate::model::spec::{Dtype, LoadMethod, LoadThread, ModelSource};

/// Where a run's tensors live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "ordinal", rename_all = "snake_case")]
pub enum DeviceSpec {
    Cpu,
    Cuda(usize),
}

impl DeviceSpec {
    /// Parses `cpu`, `cuda` or `cuda:N`.
    pub fn parse(text: &str) -> Option<DeviceSpec> {
        match text.trim() {
            "cpu" => Some(DeviceSpec::Cpu),
            "cuda" => Some(DeviceSpec::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceSpec::Cuda),
        }
    }

    pub fn is_cuda(self) -> bool {
        matches!(self, DeviceSpec::Cuda(_))
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// One step of a cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Load(String),
    Forward(String),
    Unload(String),
    /// The strategy's release action (nothing for `drop`).
    Release,
    /// Wait `settle_ms` so memory reaches its released value.
    Settle,
    /// Wait this many milliseconds.
    Idle(u64),
    /// Allocate a little for this many milliseconds: every 1 ms, 64 blocks of
    /// 1–16 KiB written and freed (at most 1 MiB live), through malloc.
    Busy(u64),
    /// Put a loaded model to sleep as the strategy's [`SleepMode`] says.
    ///
    /// [`SleepMode`]: crate::strategy::SleepMode
    Sleep(String),
    /// Stay asleep this many milliseconds (a model sleeps in between).
    Asleep(u64),
    /// Wake a sleeping model: its weights back on the device.
    Wake(String),
}

impl Step {
    /// Parses `load M`, `forward M`, `unload M`, `release`, `settle`, `idle MS`,
    /// `busy MS`, `sleep M`, `asleep MS`, `wake M`.
    pub fn parse(text: &str) -> Result<Step, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let hint = "expected one of: \"load <model>\", \"forward <model>\", \"unload <model>\", \"release\", \"settle\", \"idle <ms>\", \"busy <ms>\", \"sleep <model>\", \"asleep <ms>\", \"wake <model>\"";
        match words.as_slice() {
            ["load", m] => Ok(Step::Load(m.to_string())),
            ["forward", m] => Ok(Step::Forward(m.to_string())),
            ["unload", m] => Ok(Step::Unload(m.to_string())),
            ["release"] => Ok(Step::Release),
            ["settle"] => Ok(Step::Settle),
            ["idle", ms] => ms
                .trim_end_matches("ms")
                .parse()
                .map(Step::Idle)
                .map_err(|_| format!("step {text:?}: idle needs milliseconds, e.g. \"idle 200\"")),
            ["busy", ms] => ms
                .trim_end_matches("ms")
                .parse()
                .map(Step::Busy)
                .map_err(|_| {
                    format!("step {text:?}: busy needs milliseconds, e.g. \"busy 12000\"")
                }),
            ["sleep", m] => Ok(Step::Sleep(m.to_string())),
            ["wake", m] => Ok(Step::Wake(m.to_string())),
            ["asleep", ms] => ms
                .trim_end_matches("ms")
                .parse()
                .map(Step::Asleep)
                .map_err(|_| {
                    format!("step {text:?}: asleep needs milliseconds, e.g. \"asleep 2000\"")
                }),
            _ => Err(format!("unknown step {text:?}; {hint}")),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Load(m) => write!(f, "load {m}"),
            Step::Forward(m) => write!(f, "forward {m}"),
            Step::Unload(m) => write!(f, "unload {m}"),
            Step::Release => write!(f, "release"),
            Step::Settle => write!(f, "settle"),
            Step::Idle(ms) => write!(f, "idle {ms}"),
            Step::Busy(ms) => write!(f, "busy {ms}"),
            Step::Sleep(m) => write!(f, "sleep {m}"),
            Step::Asleep(ms) => write!(f, "asleep {ms}"),
            Step::Wake(m) => write!(f, "wake {m}"),
        }
    }
}

/// The knobs that decide whether the allocator retains memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub steps: Vec<Step>,
    pub batch_size: usize,
    pub seq_len: usize,
    pub load_method: LoadMethod,
    pub load_thread: LoadThread,
    pub dtype: Dtype,
    /// Small heap allocations made after every load and kept until the end:
    /// long-lived bookkeeping that pins the top of the heap.
    pub small_allocs_between_loads: usize,
    pub settle_ms: u64,
    pub baseline_ms: u64,
    /// Run one untimed load + forward before the baseline (CUDA JIT, page cache).
    pub warmup: bool,
    /// The parent drops the model files from the page cache
    /// (`POSIX_FADV_DONTNEED`) before each run, so every run starts cold.
    #[serde(default)]
    pub evict_page_cache: bool,
}

/// Thresholds for reports and the regression gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// A cycle "retained" memory when `after_release − baseline` exceeds this.
    pub retention_threshold_bytes: u64,
    pub noise_relative: f64,
    pub noise_absolute_bytes: u64,
    /// Absolute budgets per resource (`Resource::budget_class`: every
    /// device shares `Device(0)`'s); a resource without an entry has none.
    pub budgets: BTreeMap<Resource, Budgets>,
}

/// Absolute budgets for one resource, checked on the worst run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    pub max_retained_bytes: Option<u64>,
    pub max_retained_slope_bytes_per_cycle: Option<u64>,
    pub max_peak_bytes: Option<u64>,
    /// The release gap's settle time (`max_settle_ms`), in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_settle_s: Option<f64>,
    /// The release gap's late bytes (`max_late_mib`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_late_bytes: Option<u64>,
    /// A sleep's memory while asleep, against the sleep's begin (`max_asleep_mib`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_asleep_bytes: Option<i64>,
    /// What a sleep and wake left behind (`max_wake_held_mib`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wake_held_bytes: Option<i64>,
    /// What one mechanism may retain (`max_retained_<mechanism>_mib`,
    /// `metrics::why::Mechanism::budget_key`), checked on the worst run's
    /// last cycle.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_retained_by_mechanism: BTreeMap<Mechanism, u64>,
}

/// No budget at all (a resource the gate does not judge).
static NO_BUDGETS: Budgets = Budgets {
    max_retained_bytes: None,
    max_retained_slope_bytes_per_cycle: None,
    max_peak_bytes: None,
    max_settle_s: None,
    max_late_bytes: None,
    max_asleep_bytes: None,
    max_wake_held_bytes: None,
    max_retained_by_mechanism: BTreeMap::new(),
};

impl Budgets {
    /// The budget of `metric` in its own unit (bytes, bytes per cycle,
    /// seconds); `None` for a metric no budget covers.
    pub fn get(&self, metric: MemoryMetric) -> Option<f64> {
        let bytes = |b: Option<u64>| b.map(|v| v as f64);
        match metric {
            MemoryMetric::Retained => bytes(self.max_retained_bytes),
            MemoryMetric::Growth => bytes(self.max_retained_slope_bytes_per_cycle),
            MemoryMetric::Peak => bytes(self.max_peak_bytes),
            MemoryMetric::Settle => self.max_settle_s,
            MemoryMetric::LateBytes => bytes(self.max_late_bytes),
            MemoryMetric::Asleep => self.max_asleep_bytes.map(|v| v as f64),
            MemoryMetric::WakeHeld => self.max_wake_held_bytes.map(|v| v as f64),
            _ => None,
        }
    }

    /// Sets the budget of `metric` from its `[thresholds]` amount (MiB,
    /// MiB/cycle, ms); a metric no budget covers is ignored (the catalogue
    /// names a budget key only for those that have a slot: tested).
    pub fn set(&mut self, metric: MemoryMetric, amount: f64) {
        let bytes = Some(crate::metrics::catalogue::Unit::bytes_of_mib(amount));
        match metric {
            MemoryMetric::Retained => self.max_retained_bytes = bytes,
            MemoryMetric::Growth => self.max_retained_slope_bytes_per_cycle = bytes,
            MemoryMetric::Peak => self.max_peak_bytes = bytes,
            MemoryMetric::Settle => self.max_settle_s = Some(metric.unit().of_people(amount)),
            MemoryMetric::LateBytes => self.max_late_bytes = bytes,
            // Signed: a VRAM budget of a sleep may be below zero (it must free at least that much).
            MemoryMetric::Asleep => self.max_asleep_bytes = Some((amount * 1024.0 * 1024.0) as i64),
            MemoryMetric::WakeHeld => {
                self.max_wake_held_bytes = Some((amount * 1024.0 * 1024.0) as i64)
            }
            _ => {}
        }
    }
}

impl Thresholds {
    /// The scenario defaults of the gate's thresholds, for tests: 16 MiB
    /// retention threshold, 5 % / 16 MiB noise, no budgets.
    #[cfg(test)]
    pub(crate) fn fixture() -> Thresholds {
        Thresholds {
            retention_threshold_bytes: 16 << 20,
            noise_relative: 0.05,
            noise_absolute_bytes: 16 << 20,
            budgets: BTreeMap::new(),
        }
    }

    /// The budgets of `resource` (none for the container, which has no keys).
    pub fn budgets(&self, resource: Resource) -> &Budgets {
        self.budgets
            .get(&resource.budget_class())
            .unwrap_or(&NO_BUDGETS)
    }

    /// The budgets of `resource`, to set one.
    pub fn budgets_mut(&mut self, resource: Resource) -> &mut Budgets {
        self.budgets.entry(resource.budget_class()).or_default()
    }

    /// The resources some budget names, by class (`Device(0)` for any device).
    pub fn budgeted(&self) -> impl Iterator<Item = Resource> + '_ {
        self.budgets
            .iter()
            .filter(|(_, b)| **b != NO_BUDGETS)
            .map(|(r, _)| *r)
    }
}

/// What a scenario's runs execute: the worker plug. Everything after the
/// worker (sampler, record, metrics, exporters, gate) is the same for all.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerKind {
    /// memrel's worker: the `[workload]` steps on models loaded through candle.
    Candle,
    /// memrel's fake worker: the `[workload]` steps on fake models (exact bytes).
    Fake,
    /// Any program, started as `command` in the scenario's directory; it
    /// marks its phases itself (the `memrel` Python module, or the protocol).
    Command(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    /// `builtin` or the file's path.
    pub origin: String,
    pub toml_text: String,
    pub description: String,
    pub device: DeviceSpec,
    /// GPUs the runs are spread over, one worker on each at a time (empty:
    /// every run on `device`).
    pub devices: Vec<u32>,
    pub cycles: u32,
    pub repeat: u32,
    pub strategies: Vec<String>,
    pub interval_ms: f64,
    pub timeout_s: f64,
    pub models: BTreeMap<String, ModelSource>,
    /// The steps of a cycle (empty for a command: the program has its own).
    pub workload: Workload,
    pub thresholds: Thresholds,
    pub worker: WorkerKind,
    /// A program's model files (`model_files`: files, or directories of
    /// weight files, as written; relative to where the program runs), whose
    /// page cache is read at every edge and in the samples.
    pub model_files: Vec<String>,
}

impl Workload {
    /// A program's workload: no steps (the program decides), defaults elsewhere.
    pub fn of_program() -> Workload {
        Workload {
            steps: Vec::new(),
            batch_size: 1,
            seq_len: 1,
            load_method: LoadMethod::Mmap,
            load_thread: LoadThread::Main,
            dtype: Dtype::F32,
            small_allocs_between_loads: 0,
            settle_ms: 0,
            baseline_ms: 0,
            warmup: false,
            evict_page_cache: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_budget_key_of_the_catalogue_has_a_slot() {
        for (metric, _, key) in crate::metrics::catalogue::budget_keys() {
            let mut b = Budgets::default();
            b.set(metric, 7.0);
            let people = b.get(metric).map(|v| v * metric.unit().scale());
            assert!(
                people.is_some_and(|v| (v - 7.0).abs() < 1e-9),
                "{key}: {people:?}"
            );
        }
    }

    #[test]
    fn busy_takes_milliseconds_like_idle() {
        assert_eq!(Step::parse("busy 12000"), Ok(Step::Busy(12000)));
        assert_eq!(Step::parse("busy 250ms"), Ok(Step::Busy(250)));
        assert_eq!(Step::Busy(12000).to_string(), "busy 12000");
        let e = Step::parse("busy soon").unwrap_err();
        assert_eq!(
            e,
            "step \"busy soon\": busy needs milliseconds, e.g. \"busy 12000\""
        );
        let e = Step::parse("busy").unwrap_err();
        assert!(e.contains("\"busy <ms>\""), "{e}");
    }
}
