//! Pure functions from a saved [`Record`] to the numbers people read.
//!
//! Nothing here measures or formats; every report (console, JSON, charts,
//! the gate) reads a [`Summary`], so all of them agree and can be recomputed
//! from disk at any time. Memory metrics are computed per [`Resource`] (host
//! RSS, device VRAM) by one function each (`memory`); the definitions are in
//! docs/metrics.md ("Metrics").

pub mod advice;
pub mod catalogue;
pub mod comparison;
pub mod gpu_view;
pub mod knob;
pub mod measured;
pub mod memory;
pub mod peaks;
pub mod resource;
pub mod sleep;
mod soundness;
pub mod why;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::stats::{slope, spread, Spread};
pub use memory::{CycleMemory, CycleSpread, FirstLoad, LastCycle, ResourceRun, ResourceSummary};
pub use resource::{Resource, ResourceFacts};
pub use soundness::Broken;

use crate::protocol::{Edge, Phase};
use crate::record::{Record, RunRecord, RunStatus};

/// Version of summary.json (its shape; the record files have their own).
pub const SUMMARY_SCHEMA_VERSION: u32 = 2;

/// The check whose failure explains missing VRAM readings.
const VRAM_SOURCE_CHECKS: [&str; 2] = ["vram source (worker)", "vram sampler (nvml)"];

/// Stands in for host memory in a hand-made summary that lacks it.
static NO_HOST: ResourceSummary = ResourceSummary {
    resource: Resource::Host,
    not_measured: None,
    row: None,
    baseline_bytes: None,
    floor_bytes: None,
    peak_bytes: None,
    loaded_bytes: None,
    after_unload_bytes: None,
    after_release_bytes: None,
    retained_bytes: None,
    retained_anon_bytes: None,
    released_fraction: None,
    retained_slope_bytes_per_cycle: None,
    release_latency_s: None,
    release_t50_s: None,
    release_t90_s: None,
    settle_s: None,
    late_bytes: None,
    cycles_retaining: 0,
    cycles_total: 0,
    processes_retaining: 0,
    retained_by_cycle: Vec::new(),
    context: None,
};

/// What a cycle cost in time, whatever the resource.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CycleTimes {
    pub cycle: u32,
    pub load_time_s: f64,
    pub load_bytes: u64,
    pub forward_time_s: Option<f64>,
    pub release_action_s: Option<f64>,
    /// What getting memory back cost before serving again: this cycle's
    /// release steps plus the next cycle's first load and first forward
    /// (a respawn's new process start is in its release). `None` for the last
    /// cycle, and where the next cycle has no load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_s: Option<f64>,
    /// glibc's free bytes inside its arenas after the release (mallinfo2 fordblks).
    pub glibc_free_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunSummary {
    pub run: u32,
    pub strategy: String,
    pub repetition: u32,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub checks_passed: bool,
    /// The kernel's VmHWM, a cross-check of the host peak that no sampling can miss.
    pub vm_hwm_bytes: Option<u64>,
    /// Processes in the run's cgroup other than memrel and the measured
    /// tree (`cgroup::others`); `None` where not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_other_processes: Option<u32>,
    /// Samples the run took (rows of samples.csv).
    pub samples: usize,
    /// How metrics and charts stand for a run longer than memory keeps
    /// (`record::envelope`): absent when they saw every sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<String>,
    /// Why the phase metrics are empty though the run completed: a program
    /// that marked no phases, or too few for a cycle (the run is then one
    /// phase: baseline, peak, end of run and held are measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmarked: Option<String>,
    /// Where the baseline came from when the program did not mark one
    /// (`memrel.baseline()`): the begin of its first phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_note: Option<String>,
    pub cycles: Vec<CycleTimes>,
    /// Memory metrics, one entry per resource (host first).
    pub resources: Vec<ResourceRun>,
    pub load_throughput_bytes_per_s: Option<f64>,
    /// Each sleep of a model and its wake (`sleep`); empty when none slept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sleeps: Vec<sleep::SleepWake>,
    /// Host memory's peak in each phase, sampled and the kernel's exact one
    /// (`peaks`); empty when the kernel's was not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_peaks: Vec<peaks::PhasePeak>,
    /// "not available: <why>" where the kernel's peaks per phase could not
    /// be read (e.g. the VmHWM reset was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_peak: Option<String>,
    /// Why the last cycle's retained memory stays: each mechanism's bytes
    /// per resource (`why`); empty where the edges carry no split.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<why::Held>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StrategySummary {
    pub strategy: String,
    pub runs: u32,
    pub runs_completed: u32,
    pub checks_passed: bool,
    /// Median over every cycle of every run.
    pub load_time_s: Option<Spread>,
    pub load_throughput_bytes_per_s: Option<Spread>,
    pub forward_time_s: Option<Spread>,
    pub release_action_s: Option<Spread>,
    /// Release until the next model is ready (see `CycleTimes::ready_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_s: Option<Spread>,
    /// Cycles measured over all runs, and asked for (runs × cycles).
    pub cycles_total: u32,
    pub cycles_expected: u32,
    /// Some run failed or timed out, or fewer cycles were measured than asked for.
    pub incomplete: bool,
    /// The run charts draw and tables show for this strategy: the completed run
    /// whose retained value of the lead resource is closest to the median (the
    /// first such run on a tie).
    pub representative_run: Option<u32>,
    /// Memory metrics, one entry per resource (host first).
    pub resources: Vec<ResourceSummary>,
    /// Why the last cycle's retained memory stays, per resource and
    /// mechanism: the median over its completed runs (`why`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<why::Held>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub schema_version: u32,
    pub scenario: String,
    pub device: String,
    pub memrel_version: String,
    pub created_unix_s: u64,
    pub retention_threshold_bytes: u64,
    /// The resources measured, host first; `lead` is the one reports lead with.
    pub resources: Vec<Resource>,
    pub lead: Resource,
    /// Catalogued resources (`sampler::resources`) read but within
    /// `resource::MOVED_BYTES` over the whole record: not summarized nor
    /// shown; their range is what a budget judges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub still: Vec<Still>,
    pub runs: Vec<RunSummary>,
    pub strategies: Vec<StrategySummary>,
}

/// A catalogued resource that stayed within `resource::MOVED_BYTES` over a
/// whole record: its lowest and highest reading.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Still {
    pub resource: Resource,
    pub low_bytes: u64,
    pub high_bytes: u64,
}

impl RunSummary {
    pub fn resource(&self, resource: Resource) -> Option<&ResourceRun> {
        self.resources.iter().find(|r| r.resource == resource)
    }
}

impl StrategySummary {
    pub fn resource(&self, resource: Resource) -> Option<&ResourceSummary> {
        self.resources.iter().find(|r| r.resource == resource)
    }

    /// Host memory: every summary made by [`summarize`] has it.
    pub fn host(&self) -> &ResourceSummary {
        self.resource(Resource::Host).unwrap_or(&NO_HOST)
    }
}

impl Summary {
    /// The resources in the order reports show them: the lead first.
    pub fn shown(&self) -> Vec<Resource> {
        let mut out = vec![self.lead];
        out.extend(self.resources.iter().copied().filter(|r| *r != self.lead));
        out
    }
}

/// Computes every metric of a record, at the precision its files keep, so the
/// summary of a record and of the same record read back from disk are identical.
pub fn summarize(record: &Record) -> Summary {
    let record = record.at_file_precision();
    let record = record.as_ref();
    let threshold = record.header.retention_threshold_bytes;
    let resources = Resource::of_record(record);
    let model_bytes: BTreeMap<&str, u64> = record
        .header
        .models
        .iter()
        .map(|m| (m.id.as_str(), m.tensor_bytes))
        .collect();
    let runs: Vec<RunSummary> = record
        .runs
        .iter()
        .map(|r| summarize_run(r, &record.header, &resources, threshold, &model_bytes))
        .collect();
    // A device leads when any run read it: on CUDA the device is the story.
    let lead = resources
        .iter()
        .copied()
        .find(|r| {
            r.is_device()
                && runs
                    .iter()
                    .any(|s| s.resource(*r).is_some_and(|m| m.not_measured.is_none()))
        })
        .unwrap_or(Resource::Host);
    let mut order: Vec<String> = Vec::new();
    for r in &runs {
        if !order.contains(&r.strategy) {
            order.push(r.strategy.clone());
        }
    }
    // Phase edges taken from log lines (`attach --mark-on`), which have no
    // handshake: a cycle may read as loading nothing (see below).
    let log_marked = record
        .header
        .attached
        .as_ref()
        .is_some_and(|a| a.log.is_some());
    let strategies = order
        .iter()
        .map(|name| {
            let of: Vec<&RunSummary> = runs.iter().filter(|r| &r.strategy == name).collect();
            let mut s =
                summarize_strategy(name, &of, &resources, lead, record.header.cycles, threshold);
            if log_marked {
                for m in s.resources.iter_mut() {
                    if matches!(m.resource, Resource::Host | Resource::Device(_)) {
                        let measured: Vec<(&ResourceRun, RunStatus, u32)> = of
                            .iter()
                            .filter_map(|r| r.resource(m.resource).map(|x| (x, r.status, r.run)))
                            .collect();
                        loaded_not_above_baseline(m, &measured);
                    }
                }
            }
            s
        })
        .collect();
    Summary {
        schema_version: SUMMARY_SCHEMA_VERSION,
        scenario: record.header.scenario.clone(),
        device: record.header.device.clone(),
        memrel_version: record.header.memrel_version.clone(),
        created_unix_s: record.header.created_unix_s,
        retention_threshold_bytes: threshold,
        still: Resource::probed()
            .filter(|r| !resources.contains(r))
            .filter_map(|resource| {
                let (low_bytes, high_bytes) = resource.range_in(record)?;
                Some(Still {
                    resource,
                    low_bytes,
                    high_bytes,
                })
            })
            .collect(),
        resources,
        lead,
        runs,
        strategies,
    }
}

fn summarize_run(
    run: &RunRecord,
    header: &crate::record::Header,
    resources: &[Resource],
    threshold: u64,
    model_bytes: &BTreeMap<&str, u64>,
) -> RunSummary {
    let last_cycle = run.events.iter().map(|e| e.edge.cycle).max().unwrap_or(0);
    let cycles: Vec<u32> = if memory::effective_baseline_edge(run).is_some() {
        (1..=last_cycle)
            .filter(|&c| memory::cycle_edges(run, c).is_some())
            .collect()
    } else {
        Vec::new()
    };
    let mut times: Vec<CycleTimes> = cycles
        .iter()
        .map(|&c| cycle_times(run, c, model_bytes))
        .collect();
    for i in 0..times.len() {
        let next = times.get(i + 1).map(|t| t.cycle);
        times[i].ready_s = next.and_then(|next| ready_s(run, times[i].release_action_s, next));
    }
    let load_time: f64 = times.iter().map(|c| c.load_time_s).sum();
    let load_bytes: u64 = times.iter().map(|c| c.load_bytes).sum();
    RunSummary {
        run: run.meta.run,
        strategy: run.meta.strategy.clone(),
        repetition: run.meta.repetition,
        status: run.meta.status,
        error: run.meta.error.clone(),
        checks_passed: run.meta.checks.iter().all(|c| c.ok),
        vm_hwm_bytes: run.meta.vm_hwm_bytes,
        cgroup_other_processes: run.meta.cgroup.as_ref().and_then(|c| c.other_processes),
        samples: run
            .decimation
            .map_or(run.samples.len(), |d| d.samples_taken as usize),
        envelope: run.decimation.map(|d| envelope_note(d, &run.samples)),
        unmarked: (run.meta.status == RunStatus::Completed && cycles.is_empty())
            .then(|| unmarked_note(run)),
        baseline_note: baseline_note(run),
        resources: resources
            .iter()
            .map(|&r| match r {
                Resource::Device(gpu) => {
                    let view = gpu_view::of(header, run, r);
                    let elsewhere = run
                        .meta
                        .device
                        .as_deref()
                        .filter(|d| gpu_view::gpu_of(d) != Some(gpu));
                    let why = not_measured(&view, r).map(|why| match elsewhere {
                        Some(d) => format!("{} not measured: the run ran on {d}", r.quantity()),
                        None => why,
                    });
                    memory::resource_run(&view, r, &cycles, threshold, why)
                }
                _ => memory::resource_run(run, r, &cycles, threshold, not_measured(run, r)),
            })
            .collect(),
        cycles: times,
        load_throughput_bytes_per_s: (load_time > 0.0).then(|| load_bytes as f64 / load_time),
        sleeps: sleep::of_run(
            run,
            resources.iter().copied().find(|r| r.is_device()),
            threshold,
        ),
        phase_peaks: peaks::of_run(run),
        kernel_peak: run
            .meta
            .kernel_peak_unavailable
            .as_ref()
            .map(|why| format!("not available: {why}")),
        why: why::of_run(run, resources, &cycles),
    }
}

/// What an envelope of `d` means for the numbers read off it.
fn envelope_note(
    d: crate::record::envelope::Decimation,
    samples: &[crate::record::Sample],
) -> String {
    let span_s = match (samples.first(), samples.last()) {
        (Some(first), Some(last)) => last.t_s - first.t_s,
        _ => 0.0,
    };
    let bucket_ms = 1e3 * span_s * d.bucket_samples as f64 / d.samples_taken.max(1) as f64;
    format!(
        "{} samples on disk; metrics and charts use the first, lowest and highest of every {} \
         (peaks exact; release times up to {:.0} ms late)",
        d.samples_taken,
        d.bucket_samples,
        bucket_ms.ceil()
    )
}

/// What a run without phase markers lacks, and how to get it.
pub const UNMARKED: &str =
    "the program marked no phases, so the run is one phase: baseline (the first reading after \
    the program's exec, or after memrel attached), peak, \
    end of run and held (end − baseline) are measured; loaded, retained, released and the \
    release times need markers (import memrel; with memrel.phase(\"load\"): …; memrel.release(): \
    docs/guide.md, Phase markers)";

/// Why a completed run that marked phases has no cycle to measure.
fn unmarked_note(run: &RunRecord) -> String {
    if run.events.is_empty() {
        return UNMARKED.to_string();
    }
    let marked = |phase: Phase| run.events.iter().any(|e| e.edge.phase == phase);
    let why = if !run.events.iter().any(|e| e.edge.cycle >= 1) {
        "no phase of a cycle: a cycle begins at memrel.phase(\"load\")".to_string()
    } else if !marked(Phase::Unload) && !marked(Phase::Release) {
        "a load but no unload or release: loaded, retained and the release times are read at \
         with memrel.phase(\"unload\") and memrel.release()"
            .to_string()
    } else {
        "no cycle that both loaded and unloaded or released".to_string()
    };
    format!(
        "the program marked {why}; the run is measured as one phase (baseline, peak, end of run, held)"
    )
}

/// Says where the baseline of a run without `memrel.baseline()` came from.
fn baseline_note(run: &RunRecord) -> Option<String> {
    if memory::baseline_edge(run).is_some() {
        return None;
    }
    let implied = memory::implied_baseline_edge(run)?;
    Some(format!(
        "no memrel.baseline(): the baseline is memory at the begin of the first phase ({} at {:.2} s); \
         call memrel.baseline() after a warm-up to choose it",
        implied.edge.phase.as_str(),
        implied.t_s
    ))
}

/// Why `resource` has no readings in `run`, `None` when it has some. The
/// page cache is "not available" once a reading failed (a weights file
/// deleted during the run), even with readings before it: the metrics after
/// that point would be read off a file that is gone.
fn not_measured(run: &RunRecord, resource: Resource) -> Option<String> {
    if let (Resource::PageCache, Some(why)) = (resource, &run.meta.page_cache_note) {
        return Some(format!("page cache not available: {why}"));
    }
    let read_at_edges = run.events.iter().any(|e| resource.at_event(e).is_some());
    let sampled = run.samples.iter().any(|s| resource.in_sample(s).is_some());
    if read_at_edges || sampled {
        return None;
    }
    if resource == Resource::Container {
        let why = run
            .meta
            .cgroup
            .as_ref()
            .and_then(|c| c.error.clone())
            .or_else(|| run.meta.error.clone())
            .unwrap_or_else(|| "the run has no readings of it".to_string());
        return Some(format!("{} not available: {why}", resource.quantity()));
    }
    let why = run
        .meta
        .checks
        .iter()
        .find(|c| VRAM_SOURCE_CHECKS.contains(&c.name.as_str()) && !c.ok)
        .map(|c| c.detail.clone())
        .or_else(|| run.meta.error.clone())
        .unwrap_or_else(|| "the run has no readings of it".to_string());
    Some(format!("{} not measured: {why}", resource.quantity()))
}

fn cycle_times(run: &RunRecord, cycle: u32, model_bytes: &BTreeMap<&str, u64>) -> CycleTimes {
    let ends = |phase: Phase| {
        run.events.iter().filter(move |e| {
            e.edge.cycle == cycle && e.edge.phase == phase && e.edge.edge == Edge::End
        })
    };
    let sum = |phase: Phase| -> Option<f64> {
        let v: Vec<f64> = ends(phase).filter_map(|e| e.edge.elapsed_s).collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    let released = memory::cycle_edges(run, cycle).map(|(_, _, released)| released);
    CycleTimes {
        cycle,
        load_time_s: sum(Phase::Load).unwrap_or(0.0),
        load_bytes: ends(Phase::Load)
            .filter_map(|e| e.edge.model.as_deref())
            .filter_map(|m| model_bytes.get(m))
            .sum(),
        forward_time_s: sum(Phase::Forward),
        release_action_s: sum(Phase::Release),
        ready_s: None,
        glibc_free_bytes: released.and_then(|e| e.edge.allocator.map(|a| a.free_bytes)),
    }
}

/// `release_s` plus the first load and the first forward (if any) of `next_cycle`.
fn ready_s(run: &RunRecord, release_s: Option<f64>, next_cycle: u32) -> Option<f64> {
    let first = |phase: Phase| {
        run.events
            .iter()
            .find(|e| {
                e.edge.cycle == next_cycle && e.edge.phase == phase && e.edge.edge == Edge::End
            })
            .and_then(|e| e.edge.elapsed_s)
    };
    let load_s = first(Phase::Load)?;
    Some(release_s.unwrap_or(0.0) + load_s + first(Phase::Forward).unwrap_or(0.0))
}

fn summarize_strategy(
    name: &str,
    runs: &[&RunSummary],
    resources: &[Resource],
    lead: Resource,
    cycles_per_run: u32,
    threshold_bytes: u64,
) -> StrategySummary {
    let over =
        |f: &dyn Fn(&RunSummary) -> Option<f64>| spread(runs.iter().filter_map(|r| f(r)).collect());
    let per_cycle = |f: &dyn Fn(&CycleTimes) -> Option<f64>| {
        spread(
            runs.iter()
                .flat_map(|r| r.cycles.iter().filter_map(f))
                .collect(),
        )
    };
    let of = |resource: Resource| -> Vec<(&ResourceRun, RunStatus, u32)> {
        runs.iter()
            .filter_map(|r| r.resource(resource).map(|m| (m, r.status, r.run)))
            .collect()
    };
    let representative = memory::representative_run(&of(lead));
    let runs_completed = runs
        .iter()
        .filter(|r| r.status == RunStatus::Completed)
        .count() as u32;
    let cycles_total: u32 = runs.iter().map(|r| r.cycles.len() as u32).sum();
    let cycles_expected = runs.len() as u32 * cycles_per_run;
    StrategySummary {
        strategy: name.to_string(),
        runs: runs.len() as u32,
        runs_completed,
        checks_passed: runs.iter().all(|r| r.checks_passed),
        load_time_s: per_cycle(&|c| Some(c.load_time_s)),
        load_throughput_bytes_per_s: over(&|r| r.load_throughput_bytes_per_s),
        forward_time_s: per_cycle(&|c| c.forward_time_s),
        release_action_s: per_cycle(&|c| c.release_action_s),
        ready_s: per_cycle(&|c| c.ready_s),
        cycles_total,
        cycles_expected,
        incomplete: runs_completed < runs.len() as u32 || cycles_total < cycles_expected,
        representative_run: representative,
        resources: resources
            .iter()
            .map(|&r| {
                let mut m = memory::resource_summary(r, &of(r), representative);
                if r == Resource::Container {
                    shared_cgroup(&mut m, runs);
                    file_pages(&mut m, threshold_bytes);
                }
                m
            })
            .collect(),
        why: why::median_over_runs(
            runs.iter()
                .filter(|r| r.status == RunStatus::Completed)
                .map(|r| r.why.as_slice()),
        ),
    }
}

/// A cycle of a run marked from log lines whose loaded value is at or below
/// its run's baseline loaded nothing that the edges saw: its edge was read
/// after the program acted (a log line has no handshake: "Unloading model"
/// read after the free). (Elsewhere such a cycle is real: a CUDA run's host
/// memory, which a load to the device leaves as it was.)
/// Its retained value is no release: the resource is flagged (said as
/// context, never judged as giving back) with the cycles that were.
fn loaded_not_above_baseline(m: &mut ResourceSummary, runs: &[(&ResourceRun, RunStatus, u32)]) {
    let total: usize = runs.iter().map(|(r, _, _)| r.cycles.len()).sum();
    let flagged: Vec<String> = runs
        .iter()
        .flat_map(|(r, _, run)| {
            r.cycles
                .iter()
                .filter(|c| r.baseline_bytes.is_some_and(|b| c.loaded_bytes <= b))
                .map(move |c| format!("run {run} cycle {}", c.cycle))
        })
        .collect();
    if flagged.is_empty() || m.context.is_some() {
        return;
    }
    m.context = Some(format!(
        "loaded at or below the baseline in {} of {total} cycle{} ({}): the phase edge was read \
         after the program acted (a log line has no handshake), so what came back is not known",
        flagged.len(),
        if total == 1 { "" } else { "s" },
        flagged.join(", ")
    ));
}

/// A cgroup that held other processes during the runs (a shared machine's
/// session or container) rises and falls with their work: its lane is
/// context, said as such, and no run is counted as retaining in it.
fn shared_cgroup(m: &mut ResourceSummary, runs: &[&RunSummary]) {
    let others = runs.iter().filter_map(|r| r.cgroup_other_processes).max();
    if let Some(n) = others.filter(|n| *n > 0) {
        m.context = Some(format!(
            "shared cgroup: {n} other process{}",
            if n == 1 { "" } else { "es" }
        ));
        m.processes_retaining = 0;
        m.cycles_retaining = 0;
    }
}

/// A container that kept memory only as file pages (its anonymous part
/// came back in every run): the model files' page cache, whose pages turn
/// active as they are read again (and count in the working set), not memory
/// a strategy kept. Shown as context, as file pages; no run is counted as
/// retaining in it.
fn file_pages(m: &mut ResourceSummary, threshold_bytes: u64) {
    let (Some(retained), Some(anon)) = (&m.retained_bytes, &m.retained_anon_bytes) else {
        return;
    };
    let threshold = threshold_bytes as f64;
    if m.context.is_some() || retained.max <= threshold || anon.max > threshold {
        return;
    }
    use crate::textutil::mib;
    m.context = Some(format!(
        "file pages: {} of the {} MiB retained are page cache (its pages turning \
         active), its anonymous memory came back (at most {} MiB)",
        mib(retained.median - anon.median),
        mib(retained.median),
        mib(anon.max.max(0.0))
    ));
    m.processes_retaining = 0;
    m.cycles_retaining = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of<'a>(summary: &'a Summary, name: &str) -> &'a StrategySummary {
        summary
            .strategies
            .iter()
            .find(|s| s.strategy == name)
            .unwrap()
    }

    #[test]
    fn retained_after_each_cycle_has_its_range_over_repetitions() {
        let summary = summarize(&crate::record::fixture::record());
        let drop = of(&summary, "drop").host();
        let mib = |b: f64| (b / (1u64 << 20) as f64).round();
        let by_cycle: Vec<(u32, f64, f64, f64)> = drop
            .retained_by_cycle
            .iter()
            .map(|c| {
                (
                    c.cycle,
                    mib(c.spread.median),
                    mib(c.spread.min),
                    mib(c.spread.max),
                )
            })
            .collect();
        // Run 1 retains 2, 60, 60 MiB; run 3 retains 2, 2, 60 MiB.
        assert_eq!(
            by_cycle,
            vec![
                (1, 2.0, 2.0, 2.0),
                (2, 31.0, 2.0, 60.0),
                (3, 60.0, 60.0, 60.0)
            ]
        );
        assert_eq!(
            (
                drop.cycles_retaining,
                drop.cycles_total,
                drop.processes_retaining
            ),
            (3, 6, 2)
        );
        let strategy = of(&summary, "drop");
        assert_eq!(strategy.cycles_expected, 6);
        assert!(!strategy.incomplete);
        assert_eq!(mib(drop.retained_anon_bytes.as_ref().unwrap().median), 45.0);
    }

    /// A server's sleep → wake cycles (a drive of a vLLM-shaped server: no
    /// load or unload request), host and VRAM in MiB at each edge: a warm-up
    /// cycle 0, then cycles 1 and 2 whose wake leaves 1025 MiB more host
    /// memory than before the first judged sleep (the pinned backup kept),
    /// plus 25 MiB in cycle 2.
    fn sleep_wake_run() -> crate::record::RunRecord {
        use crate::record::fixture::{edge, memory, sample, MIB};
        let mut run = crate::record::fixture::run(1, "drop", 1, &[]);
        let at = |t: f64, phase: Phase, e: Edge, cycle: u32, host: u64, vram: u64| {
            edge(t, phase, e, cycle, memory(host * MIB, Some(vram * MIB)))
        };
        let mut events = vec![
            at(0.0, Phase::Warmup, Edge::Begin, 0, 1, 0),
            at(1.0, Phase::Warmup, Edge::End, 0, 500, 3000),
        ];
        let mut t = 1.0;
        for (cycle, before, after) in [(0, 500, 500), (1, 500, 1525), (2, 1525, 1550)] {
            for (phase, e, host, vram) in [
                (Phase::Sleep, Edge::Begin, before, 3000),
                (Phase::Sleep, Edge::End, before + 1024, 3000),
                (Phase::Asleep, Edge::Begin, before + 1024, 3000),
                (Phase::Asleep, Edge::End, before + 1024, 600),
                (Phase::Wake, Edge::Begin, before + 1024, 600),
                (Phase::Wake, Edge::End, after, 3000),
                (Phase::Settle, Edge::Begin, after, 3000),
                (Phase::Settle, Edge::End, after, 3000),
            ] {
                t += 0.25;
                events.push(at(t, phase, e, cycle, host, vram));
            }
        }
        run.samples = events
            .iter()
            .map(|e| sample(e.t_s, e.edge.memory.rss_bytes, e.edge.memory.vram_bytes))
            .collect();
        run.events = events;
        run
    }

    #[test]
    fn a_sleep_and_wake_cycle_is_measured_like_a_load_and_unload() {
        let mut record = crate::record::fixture::record();
        record.header.device = "cuda:0".into();
        record.header.cycles = 2;
        record.runs = vec![sleep_wake_run()];
        let summary = summarize(&record);
        let run = &summary.runs[0];
        assert_eq!(
            summary.broken_runs().len(),
            0,
            "{:?}",
            summary.broken_runs()
        );
        let host = run
            .resources
            .iter()
            .find(|r| r.resource == Resource::Host)
            .unwrap();
        let mib = |b: i64| b / (1 << 20);
        // Cycles 1 and 2, from the level before the first judged sleep (500 MiB).
        assert_eq!(host.baseline_bytes, Some(500 << 20));
        let retained: Vec<i64> = host.cycles.iter().map(|c| mib(c.retained_bytes)).collect();
        assert_eq!(retained, vec![1025, 1050]);
        assert_eq!(host.cycles[0].loaded_bytes, 500 << 20);
        assert_eq!(host.cycles[0].after_unload_bytes, 1524 << 20);
        let vram = run
            .resources
            .iter()
            .find(|r| r.resource.is_device())
            .unwrap();
        let kept: Vec<i64> = vram.cycles.iter().map(|c| mib(c.retained_bytes)).collect();
        assert_eq!(kept, vec![0, 0]);
        assert_eq!(vram.cycles[0].after_unload_bytes, 600 << 20);
        // The judged sleeps: VRAM freed asleep, the host's backup kept after the wake.
        let asleep: Vec<Option<i64>> = vram
            .sleeps
            .iter()
            .map(|s| s.asleep_bytes.map(mib))
            .collect();
        assert_eq!(asleep, vec![Some(-2400), Some(-2400)]);
        let held: Vec<Option<i64>> = host
            .sleeps
            .iter()
            .map(|s| s.wake_held_bytes.map(mib))
            .collect();
        assert_eq!(held, vec![Some(1025), Some(25)]);
        // The warm-up's sleep is reported, not judged.
        assert_eq!(run.sleeps.len(), 3);
        assert_eq!(run.sleeps[0].cycle, 0);
    }

    #[test]
    fn the_representative_run_is_the_one_nearest_the_median() {
        let mut record = crate::record::fixture::record();
        record
            .runs
            .push(crate::record::fixture::run(5, "drop", 3, &[2, 2, 2]));
        let summary = summarize(&record);
        // drop's last retained: 60, 60, 2 → median 60: run 1 (the first of the nearest).
        assert_eq!(of(&summary, "drop").representative_run, Some(1));
        record.runs[0].meta.status = RunStatus::Failed;
        let summary = summarize(&record);
        // Among completed runs 3 and 5 (60 and 2 MiB) the median is 31: a tie, the first wins.
        assert_eq!(of(&summary, "drop").representative_run, Some(3));
        assert!(of(&summary, "drop").incomplete);
    }

    #[test]
    fn a_release_under_the_retention_threshold_is_not_timed() {
        let mut record = crate::record::fixture::record();
        // Loaded at 110 MiB: cycle 1 gives back 98 MiB, cycle 2 only 5 MiB.
        record.runs = vec![crate::record::fixture::run(1, "drop", 1, &[2, 95])];
        let summary = summarize(&record);
        let cycles = &summary.runs[0].resources[0].cycles;
        assert!(cycles[0].release_latency_s.is_some_and(|s| s >= 0.0));
        assert_eq!(cycles[1].release_latency_s, None);
    }

    /// The edges of a cycle loaded to 110 MiB from 10 (baseline 0–0.1 s, load
    /// 0.1–0.4 s, the unload beginning at 0.4 s), then `rest`.
    fn loaded_at_110(rest: &[(f64, Phase, Edge, u64)]) -> Vec<(f64, Phase, Edge, u64)> {
        use Edge::{Begin, End};
        let mut edges = vec![
            (0.0, Phase::Baseline, Begin, 10),
            (0.1, Phase::Baseline, End, 10),
            (0.1, Phase::Load, Begin, 10),
            (0.4, Phase::Load, End, 110),
            (0.4, Phase::Unload, Begin, 110),
        ];
        edges.extend_from_slice(rest);
        edges
    }

    /// A one-cycle run from hand-written edges `(t_s, phase, edge, MiB)` and
    /// samples `(t_s, MiB)`: times exact at the files' microsecond precision.
    fn hand_run(edges: &[(f64, Phase, Edge, u64)], samples: &[(f64, u64)]) -> RunRecord {
        use crate::protocol::{MemoryAtEdge, PhaseEdge};
        use crate::record::fixture::MIB;
        let memory = |mib: u64| MemoryAtEdge {
            rss_bytes: mib * MIB,
            anon_bytes: mib * MIB,
            file_bytes: 0,
            vram_bytes: None,
            page_cache_bytes: None,
        };
        let mut run = crate::record::fixture::run(1, "drop", 1, &[0]);
        run.events = edges
            .iter()
            .map(|&(t_s, phase, edge, mib)| {
                crate::record::Event::of_line(
                    t_s,
                    PhaseEdge {
                        phase,
                        edge,
                        cycle: u32::from(phase != Phase::Baseline),
                        model: None,
                        elapsed_s: None,
                        memory: memory(mib),
                        allocator: None,
                        heap: None,
                        views: Default::default(),
                        note: None,
                        mono_s: None,
                    },
                )
            })
            .collect();
        run.samples = samples
            .iter()
            .map(|&(t_s, mib)| crate::record::Sample::of_host(t_s, mib * MIB, mib * MIB, 0, None))
            .collect();
        run
    }

    /// Loaded at 110 MiB when the unload begins (t = 0.4 s), nothing back at
    /// the drop nor the release; memory comes back while the busy step
    /// allocates, to 10 MiB at its end (t = 2.6 s).
    fn returned_when_busy() -> RunRecord {
        use Edge::{Begin, End};
        let edges = loaded_at_110(&[
            (0.5, Phase::Unload, End, 110),
            (0.5, Phase::Release, Begin, 110),
            (0.6, Phase::Release, End, 110),
            (0.6, Phase::Busy, Begin, 110),
            (2.6, Phase::Busy, End, 10),
        ]);
        let curve = [
            (0.35, 110),
            (0.45, 110),
            (1.0, 100),
            (1.05, 80),
            (1.1, 60),
            (1.15, 40),
            (1.2, 20),
            (1.25, 10),
            (2.0, 10),
        ];
        hand_run(&edges, &curve)
    }

    #[test]
    fn release_times_leave_out_the_programs_waits_for_memrels_readings() {
        let summarize_one = |run: RunRecord| {
            let mut record = crate::record::fixture::record();
            record.header.cycles = 1;
            record.runs = vec![run];
            summarize(&record).runs[0].resources[0].cycles[0].clone()
        };
        let plain = summarize_one(returned_when_busy());
        // The program waited 50 ms at the unload's end (0.5 s) and at the
        // release's end (0.6 s) while memrel read those edges.
        let mut held = returned_when_busy();
        for e in held.events.iter_mut() {
            if e.edge.edge == Edge::End && matches!(e.edge.phase, Phase::Unload | Phase::Release) {
                e.held_s = Some(0.05);
            }
        }
        let c = summarize_one(held);
        let less = |a: Option<f64>, b: Option<f64>| a.unwrap() - b.unwrap();
        // t50, t90 (from 0.4 s) and the latency (from 0.5 s) span both waits.
        assert!(
            (less(plain.release_t50_s, c.release_t50_s) - 0.1).abs() < 1e-9,
            "{c:?}"
        );
        assert!(
            (less(plain.release_t90_s, c.release_t90_s) - 0.1).abs() < 1e-9,
            "{c:?}"
        );
        assert!((less(plain.release_latency_s, c.release_latency_s) - 0.1).abs() < 1e-9);
        // The settle, from the release's end, spans the second.
        assert!(
            (less(plain.settle_s, c.settle_s) - 0.05).abs() < 1e-9,
            "{c:?}"
        );
        // Memory is not time: every byte is the same.
        assert_eq!(
            (plain.retained_bytes, plain.late_bytes),
            (c.retained_bytes, c.late_bytes)
        );
    }

    #[test]
    fn the_release_curve_is_timed_from_the_unload_through_a_busy_step() {
        let mut record = crate::record::fixture::record();
        record.header.cycles = 1;
        record.runs = vec![returned_when_busy()];
        let summary = summarize(&record);
        let c = &summary.runs[0].resources[0].cycles[0];
        // The busy step after the release is part of the settle: the released
        // value is read at its end (10 MiB), not at the release's (110 MiB).
        assert_eq!(c.after_release_bytes, 10 << 20);
        assert_eq!(c.retained_bytes, 0);
        // D = 110 − 10 = 100 MiB: 60 MiB first at 1.1 s, 20 MiB at 1.2 s,
        // from the unload's begin at 0.4 s.
        assert!((c.release_t50_s.unwrap() - 0.7).abs() < 1e-9, "{c:?}");
        assert!((c.release_t90_s.unwrap() - 0.8).abs() < 1e-9, "{c:?}");
        // Latency counts from the end of the unload to within 2 MiB of 10 MiB.
        assert!((c.release_latency_s.unwrap() - 0.75).abs() < 1e-9, "{c:?}");
        let host = summary.strategies[0].host();
        let row = host.row.as_ref().unwrap();
        assert_eq!(
            (row.release_t50_s, row.release_t90_s),
            (c.release_t50_s, c.release_t90_s)
        );
        let t90 = host.release_t90_s.as_ref().unwrap();
        assert_eq!((t90.n, t90.median), (1, c.release_t90_s.unwrap()));
    }

    /// The host cycle of a one-run record made of `run`.
    fn only_cycle(run: RunRecord) -> memory::CycleMemory {
        let mut record = crate::record::fixture::record();
        record.header.cycles = 1;
        record.runs = vec![run];
        summarize(&record).runs[0].resources[0].cycles[0].clone()
    }

    #[test]
    fn the_release_gap_runs_from_the_release_call_until_memory_stays_put() {
        let c = only_cycle(returned_when_busy());
        // The release returned at 0.6 s at 110 MiB; memory ends at 10 MiB (the
        // busy step's end, 2.6 s) and is within 16 MiB of it from the 20 MiB
        // sample at 1.2 s on.
        assert!((c.settle_s.unwrap() - 0.6).abs() < 1e-9, "{c:?}");
        assert_eq!(c.late_bytes, Some(100 << 20));
        let summary = {
            let mut record = crate::record::fixture::record();
            record.runs = vec![returned_when_busy()];
            summarize(&record)
        };
        let settle = summary.strategies[0].host().settle_s.as_ref().unwrap();
        assert_eq!((settle.n, settle.median), (1, c.settle_s.unwrap()));
        let late = summary.strategies[0].host().late_bytes.as_ref().unwrap();
        assert_eq!(late.median, (100u64 << 20) as f64);
    }

    #[test]
    fn memory_back_when_the_call_returned_settles_in_zero() {
        use Edge::{Begin, End};
        let edges = loaded_at_110(&[
            (0.5, Phase::Unload, End, 10),
            (0.5, Phase::Release, Begin, 10),
            (0.6, Phase::Release, End, 12),
            (0.6, Phase::Settle, Begin, 12),
            (1.0, Phase::Settle, End, 10),
        ]);
        // Wobbles of 2 MiB stay inside the 16 MiB threshold.
        let c = only_cycle(hand_run(&edges, &[(0.7, 11), (0.8, 12), (0.9, 10)]));
        assert_eq!(c.settle_s, Some(0.0));
        assert_eq!(c.late_bytes, Some(2 << 20));
        // Memory that grows after the call is no late release: 0, never negative.
        let mut grew = edges;
        grew[9].3 = 40;
        let c = only_cycle(hand_run(&grew, &[(0.7, 12), (0.8, 40), (0.9, 40)]));
        assert_eq!(c.late_bytes, Some(0));
        assert!((c.settle_s.unwrap() - 0.2).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn memory_that_comes_back_and_leaves_again_settles_after_the_last_excursion() {
        use Edge::{Begin, End};
        let edges = loaded_at_110(&[
            (0.5, Phase::Unload, End, 110),
            (0.5, Phase::Release, Begin, 110),
            (0.6, Phase::Release, End, 110),
            (0.6, Phase::Idle, Begin, 110),
            (2.0, Phase::Idle, End, 10),
        ]);
        // Down at 0.8 s, a 60 MiB excursion at 1.0 s, down for good at 1.3 s.
        let samples = [(0.7, 110), (0.8, 10), (1.0, 60), (1.1, 60), (1.3, 10)];
        let c = only_cycle(hand_run(&edges, &samples));
        assert!((c.settle_s.unwrap() - 0.7).abs() < 1e-9, "{c:?}");
        // No sample in the window: settled at its end, the idle step's.
        let c = only_cycle(hand_run(&edges, &[]));
        assert!((c.settle_s.unwrap() - 1.4).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn a_plain_drop_is_timed_from_its_unload_and_a_release_at_the_end_is_not() {
        use Edge::{Begin, End};
        // No release step: the unload's end is the edge.
        let edges = loaded_at_110(&[
            (0.5, Phase::Unload, End, 110),
            (0.5, Phase::Settle, Begin, 110),
            (1.5, Phase::Settle, End, 10),
        ]);
        let c = only_cycle(hand_run(&edges, &[(0.8, 110), (0.85, 10)]));
        assert!((c.settle_s.unwrap() - 0.35).abs() < 1e-9, "{c:?}");
        assert_eq!(c.late_bytes, Some(100 << 20));
        // A run whose last edge is the release's end has no window to watch.
        let ends_at_release = loaded_at_110(&[
            (0.5, Phase::Unload, End, 110),
            (0.5, Phase::Release, Begin, 110),
            (0.6, Phase::Release, End, 110),
        ]);
        let c = only_cycle(hand_run(&ends_at_release, &[(0.8, 10)]));
        assert_eq!((c.settle_s, c.late_bytes), (None, None));
    }

    #[test]
    fn the_fixture_gives_back_everything_by_its_release_edges() {
        // Every fixture cycle is down at the unload's end and stays there.
        let summary = summarize(&crate::record::fixture::record());
        for s in &summary.strategies {
            let settle = s.host().settle_s.as_ref().unwrap();
            assert_eq!((settle.n, settle.max), (6, 0.0), "{}", s.strategy);
            assert_eq!(s.host().late_bytes.as_ref().unwrap().max, 0.0);
        }
    }

    #[test]
    fn a_curve_with_no_sample_past_its_target_ends_at_the_released_edge() {
        // The only sample after the unload still reads 110 MiB: the worker's
        // own reading at the end of the busy step (2.6 s) is where it arrived.
        let mut run = returned_when_busy();
        run.samples.retain(|s| s.t_s < 1.0);
        let mut record = crate::record::fixture::record();
        record.runs = vec![run];
        let summary = summarize(&record);
        let c = &summary.runs[0].resources[0].cycles[0];
        assert!((c.release_t50_s.unwrap() - 2.2).abs() < 1e-9, "{c:?}");
        assert!((c.release_t90_s.unwrap() - 2.2).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn the_release_curve_over_runs_spreads_over_every_timed_cycle() {
        let summary = summarize(&crate::record::fixture::record());
        // Every fixture cycle drops at the unload's end, 0.1 s after its begin;
        // the first sample at or after it comes within one 10 ms interval.
        for s in &summary.strategies {
            let host = s.host();
            for t in [&host.release_t50_s, &host.release_t90_s] {
                let t = t.as_ref().unwrap();
                assert_eq!(t.n, 6, "{}: every cycle gave back ≥ 40 MiB", s.strategy);
                assert!(t.min >= 0.1 && t.max < 0.11, "{}: {t:?}", s.strategy);
            }
        }
        // A cycle that gives back 5 MiB (loaded 110, released 105) has no curve.
        let mut record = crate::record::fixture::record();
        record.runs = vec![crate::record::fixture::run(1, "drop", 1, &[2, 95])];
        let summary = summarize(&record);
        let cycles = &summary.runs[0].resources[0].cycles;
        assert!(cycles[0].release_t50_s.is_some() && cycles[0].release_t90_s.is_some());
        assert_eq!(
            (cycles[1].release_t50_s, cycles[1].release_t90_s),
            (None, None)
        );
        assert_eq!(
            summary.strategies[0]
                .host()
                .release_t50_s
                .as_ref()
                .unwrap()
                .n,
            1
        );
    }

    #[test]
    fn vram_has_a_release_curve_from_the_same_function() {
        let summary = summarize(&crate::record::fixture::cuda_record());
        let vram = |name: &str| {
            of(&summary, name)
                .resource(Resource::Device(0))
                .unwrap()
                .clone()
        };
        // drop keeps the model's 416 MiB: nothing came back, nothing to time.
        assert!(vram("drop").release_t50_s.is_none());
        let t90 = vram("sync").release_t90_s.unwrap();
        assert_eq!(t90.n, 6);
        // The VRAM series steps down at the unload's end, 0.1 s after its begin.
        assert!(t90.min >= 0.1 && t90.max < 0.11, "{t90:?}");
    }

    #[test]
    fn a_run_cut_short_makes_its_strategy_incomplete() {
        let mut record = crate::record::fixture::record();
        record.runs[1].events.truncate(10);
        let summary = summarize(&record);
        let trim = of(&summary, "malloc-trim");
        assert_eq!((trim.cycles_total, trim.cycles_expected), (4, 6));
        assert_eq!(trim.host().cycles_total, 4);
        assert!(trim.incomplete);
    }

    fn mib(bytes: f64) -> f64 {
        (bytes / (1u64 << 20) as f64 * 10.0).round() / 10.0
    }

    #[test]
    fn vram_gets_every_memory_metric_with_known_answers() {
        let summary = summarize(&crate::record::fixture::cuda_record());
        assert_eq!(summary.resources, [Resource::Host, Resource::Device(0)]);
        assert_eq!(summary.lead, Resource::Device(0));
        let vram = |name: &str| {
            of(&summary, name)
                .resource(Resource::Device(0))
                .unwrap()
                .clone()
        };

        let drop = vram("drop");
        let row = drop.row.as_ref().unwrap();
        assert_eq!(
            (
                mib(row.baseline_bytes as f64),
                mib(row.loaded_bytes as f64),
                mib(row.after_release_bytes as f64)
            ),
            (678.0, 1094.0, 1094.0)
        );
        assert_eq!(mib(row.retained_bytes as f64), 416.0);
        assert_eq!(row.released_fraction, Some(0.0));
        assert_eq!(
            (
                drop.cycles_retaining,
                drop.cycles_total,
                drop.processes_retaining
            ),
            (6, 6, 2)
        );
        assert_eq!(mib(drop.floor_bytes.as_ref().unwrap().median), 586.0);
        assert_eq!(mib(drop.peak_bytes.as_ref().unwrap().median), 1094.0);
        assert!(
            drop.release_latency_s.is_none(),
            "nothing came back: nothing to time"
        );
        assert_eq!(
            drop.retained_slope_bytes_per_cycle.as_ref().unwrap().median,
            0.0
        );

        let sync = vram("sync");
        assert_eq!(sync.row.as_ref().unwrap().retained_bytes, 0);
        assert_eq!(sync.row.as_ref().unwrap().released_fraction, Some(1.0));
        assert_eq!(sync.cycles_retaining, 0);
        let latency = sync.release_latency_s.as_ref().unwrap();
        assert_eq!(latency.n, 6, "one release per cycle per run");
        assert!(
            latency.median >= 0.0 && latency.median < 0.05,
            "{latency:?}"
        );

        // Below the floor, and below the baseline: a negative retained value.
        let released = vram("context-release");
        let row = released.row.as_ref().unwrap();
        assert_eq!(
            (row.after_release_bytes, mib(row.retained_bytes as f64)),
            (0, -678.0)
        );
        assert_eq!(released.cycles_retaining, 0);

        // Host memory is judged by the same function, from the same runs.
        let host = of(&summary, "drop").host();
        assert_eq!(host.row.as_ref().unwrap().retained_bytes, 1 << 20);
    }

    #[test]
    fn each_table_row_agrees_with_itself() {
        for record in [
            crate::record::fixture::record(),
            crate::record::fixture::cuda_record(),
        ] {
            let summary = summarize(&record);
            for s in &summary.strategies {
                for r in &s.resources {
                    let row = r.row.as_ref().unwrap();
                    assert_eq!(
                        row.after_release_bytes as i64 - row.baseline_bytes as i64,
                        row.retained_bytes,
                        "{} {}",
                        s.strategy,
                        r.resource
                    );
                    let fraction = (row.loaded_bytes as f64 - row.after_release_bytes as f64)
                        / (row.loaded_bytes as f64 - row.baseline_bytes as f64);
                    assert_eq!(row.released_fraction, Some(fraction));
                    assert_eq!(Some(row.run), s.representative_run);
                }
            }
        }
    }

    #[test]
    fn a_cuda_record_without_vram_readings_says_so_and_leads_with_host() {
        let mut record = crate::record::fixture::record();
        record.header.device = "cuda:0".into();
        record.runs[0].meta.checks.push(crate::protocol::Check {
            name: "vram sampler (nvml)".into(),
            ok: false,
            detail: "nvml: driver not loaded".into(),
        });
        let summary = summarize(&record);
        assert_eq!(summary.lead, Resource::Host);
        let vram = of(&summary, "drop").resource(Resource::Device(0)).unwrap();
        assert_eq!(
            vram.not_measured.as_deref(),
            Some("VRAM not measured: nvml: driver not loaded")
        );
        assert!(vram.row.is_none() && vram.retained_bytes.is_none() && vram.peak_bytes.is_none());
    }

    #[test]
    fn summary_json_names_resources() {
        let summary = summarize(&crate::record::fixture::cuda_record());
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["lead"], "cuda:0");
        assert_eq!(json["strategies"][0]["resources"][1]["resource"], "cuda:0");
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back, summary);
    }

    #[test]
    fn runs_spread_over_gpus_are_measured_on_their_own_gpu_only() {
        // The CUDA fixture's runs, alternately on cuda:0 and cuda:1.
        let mut record = crate::record::fixture::cuda_record();
        record.header.device = "cuda:0,1".into();
        for run in &mut record.runs {
            run.meta.device = Some(format!("cuda:{}", (run.meta.run + 1) % 2));
        }
        let summary = summarize(&record);
        assert_eq!(
            summary.resources,
            [Resource::Host, Resource::Device(0), Resource::Device(1)]
        );
        let alone = summarize(&crate::record::fixture::cuda_record());
        for (run, same) in summary.runs.iter().zip(&alone.runs) {
            let gpu = (run.run + 1) % 2;
            let mine = run.resource(Resource::Device(gpu)).unwrap();
            let theirs = run.resource(Resource::Device(1 - gpu)).unwrap();
            assert_eq!(
                mine,
                same.resource(Resource::Device(0))
                    .map(|r| {
                        let mut r = r.clone();
                        r.resource = Resource::Device(gpu);
                        r
                    })
                    .as_ref()
                    .unwrap()
            );
            assert_eq!(
                theirs.not_measured.as_deref(),
                Some(format!("VRAM not measured: the run ran on cuda:{gpu}").as_str())
            );
            assert!(theirs.retained_bytes.is_none());
        }
    }
}
