//! The memory metrics of one resource in one run, and over the runs of a
//! strategy: baseline, peak, loaded, after unload, after release, retained and
//! its slope, released fraction, release latency, the release curve's t50 and
//! t90, the release gap (settle time and late bytes), cycles and processes
//! retaining. One function each, applied alike to host RSS and device VRAM;
//! the definitions are in docs/metrics.md.

use crate::metrics::ResourceFacts;
use serde::{Deserialize, Serialize};

use super::resource::Resource;
use crate::protocol::{Edge, Phase};
use crate::record::{Event, RunRecord, RunStatus};
use crate::stats::{slope, spread, Spread};

/// Release latency counts as reached within max(this, 2 % of the drop).
const LATENCY_TOLERANCE_BYTES: u64 = 2 << 20;

/// One cycle of one resource.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CycleMemory {
    pub cycle: u32,
    /// At the start of the first unload: everything of the cycle loaded.
    pub loaded_bytes: u64,
    /// At the end of the last unload, before the release step.
    pub after_unload_bytes: u64,
    /// After the release step and the settle time.
    pub after_release_bytes: u64,
    /// after_release − baseline (negative when memory ends below the baseline).
    pub retained_bytes: i64,
    /// The anonymous part of `retained_bytes` (host only: heap and copied tensors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retained_anon_bytes: Option<i64>,
    /// (loaded − after_release) / (loaded − baseline); `None` when nothing was loaded.
    pub released_fraction: Option<f64>,
    /// From the end of the unload until memory first came within a tolerance
    /// of its released value; `None` when less than the retention threshold
    /// came back (drift, not a release). This and every time below are the
    /// program's own: memrel's readings at the edges inside are left out
    /// (`RunRecord::own_span_s`).
    pub release_latency_s: Option<f64>,
    /// From the begin of the first unload until half of what came back by the
    /// end of the cycle (`loaded − after_release`) had come back; `None` like
    /// `release_latency_s`.
    #[serde(default)]
    pub release_t50_s: Option<f64>,
    /// The same for 90 % of it.
    #[serde(default)]
    pub release_t90_s: Option<f64>,
    /// The release gap: from the end of the cycle's release edge (the call
    /// returned) until memory stays within the retention threshold of where
    /// it ends up (see [`settle`]); `None` without a release edge or a window
    /// after it.
    #[serde(default)]
    pub settle_s: Option<f64>,
    /// What came back after the release call returned: the value at the
    /// release edge's end − where it ends up, 0 when memory grew instead.
    #[serde(default)]
    pub late_bytes: Option<u64>,
    pub retained_over_threshold: bool,
}

/// One resource over one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResourceRun {
    pub resource: Resource,
    /// Why this resource has no readings (`None`: it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
    /// Just before the first load (after the warm-up, if any).
    pub baseline_bytes: Option<u64>,
    /// What the resource cannot go below while a device is open: a bare CUDA
    /// device as the worker calibrated it. `None` for host memory.
    pub floor_bytes: Option<u64>,
    /// Highest sampled value.
    pub peak_bytes: Option<u64>,
    pub cycles: Vec<CycleMemory>,
    /// The last sampled value: set for a run whose phases give no cycle to
    /// measure (a program without markers, or with too few), which is then
    /// one phase from its first sample to its last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_bytes: Option<u64>,
    /// end − baseline of such a run: what it still held when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_bytes: Option<i64>,
    /// Retained after the last complete cycle.
    pub retained_bytes: Option<i64>,
    pub retained_max_bytes: Option<i64>,
    /// Least-squares slope of retained over cycles: growth means a leak.
    pub retained_slope_bytes_per_cycle: Option<f64>,
    pub cycles_retaining: u32,
    /// Each sleep of a model and its wake, as this resource saw them
    /// (`metrics::sleep`); empty when no model slept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sleeps: Vec<super::sleep::SleepMemory>,
}

/// One cycle's value over the runs of a strategy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CycleSpread {
    pub cycle: u32,
    #[serde(flatten)]
    pub spread: Spread,
}

/// The last cycle of one run: a row of a table that agrees with itself
/// (`after_release − baseline = retained`, and the released fraction from the same numbers).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LastCycle {
    pub run: u32,
    pub cycle: u32,
    pub baseline_bytes: u64,
    /// The run's context floor (device memory only).
    pub floor_bytes: Option<u64>,
    pub peak_bytes: Option<u64>,
    pub loaded_bytes: u64,
    pub after_unload_bytes: u64,
    pub after_release_bytes: u64,
    pub retained_bytes: i64,
    pub released_fraction: Option<f64>,
    /// The cycle's release curve (see `CycleMemory`).
    #[serde(default)]
    pub release_t50_s: Option<f64>,
    #[serde(default)]
    pub release_t90_s: Option<f64>,
}

/// One resource over the runs of a strategy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResourceSummary {
    pub resource: Resource,
    /// Why no run has readings of this resource (`None`: measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
    /// The representative run's last cycle (see `StrategySummary::representative_run`).
    pub row: Option<LastCycle>,
    /// Per run (one value each): baseline, floor, peak.
    pub baseline_bytes: Option<Spread>,
    pub floor_bytes: Option<Spread>,
    pub peak_bytes: Option<Spread>,
    /// Per run, at its last cycle.
    pub loaded_bytes: Option<Spread>,
    pub after_unload_bytes: Option<Spread>,
    pub after_release_bytes: Option<Spread>,
    pub retained_bytes: Option<Spread>,
    pub retained_anon_bytes: Option<Spread>,
    pub released_fraction: Option<Spread>,
    /// Per run.
    pub retained_slope_bytes_per_cycle: Option<Spread>,
    /// Every timed cycle of every run (each release is its own event).
    pub release_latency_s: Option<Spread>,
    /// The release curve's t50 and t90 over every timed cycle of every run.
    #[serde(default)]
    pub release_t50_s: Option<Spread>,
    #[serde(default)]
    pub release_t90_s: Option<Spread>,
    /// The release gap over every cycle of every run that has one.
    #[serde(default)]
    pub settle_s: Option<Spread>,
    #[serde(default)]
    pub late_bytes: Option<Spread>,
    /// Cycles whose retained value exceeded the threshold, over all runs.
    pub cycles_retaining: u32,
    pub cycles_total: u32,
    /// Runs (processes) in which at least one cycle retained.
    pub processes_retaining: u32,
    /// Retained after each cycle, median and range over the runs that reached it.
    pub retained_by_cycle: Vec<CycleSpread>,
    /// Why this resource is shown as context and not judged (a cgroup shared
    /// with other processes: "shared cgroup: 3 other processes").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

fn edges<'a>(
    run: &'a RunRecord,
    cycle: u32,
    phase: Phase,
    edge: Edge,
) -> impl Iterator<Item = &'a Event> + 'a {
    run.events
        .iter()
        .filter(move |e| e.edge.cycle == cycle && e.edge.phase == phase && e.edge.edge == edge)
}

/// The phases that make a cycle's settle: memory may still come back while
/// they run (an idle or busy step after the release times a timer-based
/// allocator's return), so the released value is read at the end of the last.
const SETTLING: [Phase; 4] = [Phase::Release, Phase::Settle, Phase::Idle, Phase::Busy];

/// The edges that bound a cycle's memory metrics: (loaded: the begin of the
/// first unload, unloaded: the end of the last unload, released: the end of
/// the last release/settle/idle/busy step after it, else `unloaded`).
pub fn cycle_edges(run: &RunRecord, cycle: u32) -> Option<(&Event, &Event, &Event)> {
    if cut_short(run, cycle) {
        return None;
    }
    // A program that unloads inside its release (accelerate's
    // `model = release_memory(model)`) marks no unload: the release's begin
    // stands for both the loaded and the after-unload point.
    let first_release = || edges(run, cycle, Phase::Release, Edge::Begin).next();
    let Some(loaded) = edges(run, cycle, Phase::Unload, Edge::Begin)
        .next()
        .or_else(first_release)
    else {
        return sleep_cycle_edges(run, cycle);
    };
    let unloaded = edges(run, cycle, Phase::Unload, Edge::End)
        .last()
        .or_else(first_release)?;
    let released = run
        .events
        .iter()
        .filter(|e| e.edge.cycle == cycle && e.edge.edge == Edge::End)
        .rfind(|e| SETTLING.contains(&e.edge.phase) && e.t_s >= unloaded.t_s)
        .unwrap_or(unloaded);
    Some((loaded, unloaded, released))
}

/// The edges of a cycle that puts a model to sleep and wakes it, with no
/// unload or release (a server's sleep → wake, `memrel drive --server
/// vllm`): judged like a load → unload, the sleep standing for the unload
/// and the wake for the release. Loaded: the first sleep's begin (awake,
/// everything on the device); unloaded: the end of the time asleep (the
/// first wake's begin, else the last sleep's end); released: the end of the
/// last settling step after the last wake (a driver's settle), else the
/// wake's end. So `retained` is what the cycle left behind against the
/// baseline (the level before the first judged sleep), a leak grows it
/// cycle by cycle, and the time asleep is `metrics::sleep`'s.
fn sleep_cycle_edges(run: &RunRecord, cycle: u32) -> Option<(&Event, &Event, &Event)> {
    let loaded = edges(run, cycle, Phase::Sleep, Edge::Begin).next()?;
    let asleep = edges(run, cycle, Phase::Wake, Edge::Begin)
        .next()
        .or_else(|| edges(run, cycle, Phase::Sleep, Edge::End).last())?;
    let woken = edges(run, cycle, Phase::Wake, Edge::End).last()?;
    let released = run
        .events
        .iter()
        .filter(|e| e.edge.cycle == cycle && e.edge.edge == Edge::End)
        .rfind(|e| SETTLING.contains(&e.edge.phase) && e.t_s >= woken.t_s)
        .unwrap_or(woken);
    Some((loaded, asleep, released))
}

/// A cycle of a run that did not complete, with a phase begun and never
/// ended: stopped in the middle, so it has no loaded/released points (its
/// unload's end is not the end of its release).
fn cut_short(run: &RunRecord, cycle: u32) -> bool {
    if run.meta.status == RunStatus::Completed {
        return false;
    }
    let mut open: Vec<Phase> = Vec::new();
    for e in run.events.iter().filter(|e| e.edge.cycle == cycle) {
        match e.edge.edge {
            Edge::Begin => open.push(e.edge.phase),
            Edge::End => {
                if let Some(i) = open.iter().rposition(|p| *p == e.edge.phase) {
                    open.remove(i);
                }
            }
        }
    }
    !open.is_empty()
}

/// The baseline edge: the end of the quiet time before the first load
/// (`memrel.baseline()`).
pub(super) fn baseline_edge(run: &RunRecord) -> Option<&Event> {
    edges(run, 0, Phase::Baseline, Edge::End).last()
}

/// The baseline of a run that marked phases but no baseline: the begin of
/// its first phase after any warm-up (the first edge of cycle 1), whose
/// reading is the memory of the time before it.
pub(super) fn implied_baseline_edge(run: &RunRecord) -> Option<&Event> {
    run.events
        .iter()
        .find(|e| e.edge.cycle >= 1 && e.edge.edge == Edge::Begin)
}

/// The baseline every metric of a run counts from: the marked one, else the
/// implied one (see [`implied_baseline_edge`]).
pub(super) fn effective_baseline_edge(run: &RunRecord) -> Option<&Event> {
    baseline_edge(run).or_else(|| implied_baseline_edge(run))
}

/// Every memory metric of `resource` in one run.
pub fn resource_run(
    run: &RunRecord,
    resource: Resource,
    cycles: &[u32],
    threshold: u64,
    not_measured: Option<String>,
) -> ResourceRun {
    let baseline = effective_baseline_edge(run);
    let baseline_bytes = baseline.and_then(|e| resource.at_event(e));
    let memory: Vec<CycleMemory> = match (baseline, baseline_bytes) {
        (Some(base), Some(base_bytes)) => cycles
            .iter()
            .filter_map(|&c| cycle_memory(run, resource, c, base, base_bytes, threshold))
            .collect(),
        _ => Vec::new(),
    };
    let retained: Vec<f64> = memory.iter().map(|c| c.retained_bytes as f64).collect();
    // No cycle to measure: the run is one phase, from its first sample (the
    // baseline, unless the program marked or implied one) to its last.
    let whole = memory
        .is_empty()
        .then(|| whole_run(run, resource))
        .flatten();
    let baseline_bytes = baseline_bytes.or(whole.map(|(first, _)| first));
    let end_bytes = whole.map(|(_, last)| last);
    ResourceRun {
        resource,
        not_measured,
        end_bytes,
        held_bytes: baseline_bytes
            .zip(end_bytes)
            .map(|(base, end)| end as i64 - base as i64),
        baseline_bytes,
        floor_bytes: if resource.is_device() {
            run.meta.vram_floor_bytes
        } else {
            None
        },
        // Every reading counts, the edges' too: on a busy machine the
        // sampler may miss a short load that an edge read exactly.
        peak_bytes: run
            .samples
            .iter()
            .filter_map(|s| resource.in_sample(s))
            .chain(run.events.iter().filter_map(|e| resource.at_event(e)))
            .max(),
        retained_bytes: memory.last().map(|c| c.retained_bytes),
        retained_max_bytes: memory.iter().map(|c| c.retained_bytes).max(),
        retained_slope_bytes_per_cycle: slope(&retained),
        cycles_retaining: memory.iter().filter(|c| c.retained_over_threshold).count() as u32,
        cycles: memory,
        sleeps: super::sleep::memory_of(run, resource),
    }
}

/// The first and the last sampled value of `resource` in `run`.
fn whole_run(run: &RunRecord, resource: Resource) -> Option<(u64, u64)> {
    let first = run.samples.iter().find_map(|s| resource.in_sample(s))?;
    let last = run
        .samples
        .iter()
        .rev()
        .find_map(|s| resource.in_sample(s))?;
    Some((first, last))
}

fn cycle_memory(
    run: &RunRecord,
    resource: Resource,
    cycle: u32,
    baseline: &Event,
    baseline_bytes: u64,
    threshold: u64,
) -> Option<CycleMemory> {
    let (loaded, unloaded, released) = cycle_edges(run, cycle)?;
    let loaded_bytes = resource.at_event(loaded)?;
    let after_unload_bytes = resource.at_event(unloaded)?;
    let after_release_bytes = resource.at_event(released)?;
    let retained = after_release_bytes as i64 - baseline_bytes as i64;
    let denominator = loaded_bytes as f64 - baseline_bytes as f64;
    let released_fraction = (denominator > 0.0)
        .then(|| (loaded_bytes as f64 - after_release_bytes as f64) / denominator);

    // A release smaller than the retention threshold is drift, not a release:
    // timing it would report when a few MiB happened to move (on CUDA, the
    // host side of the context shrinks some 300 ms into the settle).
    let drop_bytes = loaded_bytes.saturating_sub(after_release_bytes);
    let tolerance = LATENCY_TOLERANCE_BYTES.max(drop_bytes / 50);
    let target = after_release_bytes + tolerance;
    let release_latency_s = if drop_bytes < threshold {
        None
    } else {
        run.samples
            .iter()
            .filter(|s| s.t_s >= unloaded.t_s && s.t_s <= released.t_s)
            .find(|s| resource.in_sample(s).is_some_and(|v| v <= target))
            .map(|s| run.own_span_s(unloaded.t_s, s.t_s))
            .or_else(|| {
                (released.t_s > unloaded.t_s).then(|| run.own_span_s(unloaded.t_s, released.t_s))
            })
    };
    let release_t50_s = release_time_s(run, resource, loaded, released, threshold, 0.5);
    let release_t90_s = release_time_s(run, resource, loaded, released, threshold, 0.9);
    let gap = release_edge(run, cycle).and_then(|e| settle(run, resource, e, threshold));
    let retained_anon_bytes = match (
        resource.anon_at_event(released),
        resource.anon_at_event(baseline),
    ) {
        (Some(after), Some(base)) => Some(after as i64 - base as i64),
        _ => None,
    };
    Some(CycleMemory {
        cycle,
        loaded_bytes,
        after_unload_bytes,
        after_release_bytes,
        retained_bytes: retained,
        retained_anon_bytes,
        released_fraction,
        release_latency_s,
        release_t50_s,
        release_t90_s,
        settle_s: gap.map(|g| g.settle_s),
        late_bytes: gap.map(|g| g.late_bytes),
        retained_over_threshold: retained > threshold as i64,
    })
}

/// The release curve's time to `fraction` (0.5: t50, 0.9: t90): seconds from
/// `loaded` (the begin of the cycle's first unload, value L) until the first
/// sample at or below L − fraction × (L − F), F being the value at `released`,
/// searching samples up to `released` (whose own reading is F: its time when
/// no sample got there first). `None` when L − F is below `threshold`: drift,
/// not a release (the rule of `release_latency_s`).
pub fn release_time_s(
    run: &RunRecord,
    resource: Resource,
    loaded: &Event,
    released: &Event,
    threshold: u64,
    fraction: f64,
) -> Option<f64> {
    let loaded_bytes = resource.at_event(loaded)?;
    let released_bytes = resource.at_event(released)?;
    let came_back_bytes = loaded_bytes.saturating_sub(released_bytes);
    if came_back_bytes < threshold || came_back_bytes == 0 {
        return None;
    }
    let target = loaded_bytes as f64 - fraction * came_back_bytes as f64;
    let reached = run
        .samples
        .iter()
        .filter(|s| s.t_s >= loaded.t_s && s.t_s <= released.t_s)
        .find(|s| resource.in_sample(s).is_some_and(|v| v as f64 <= target))
        .map(|s| s.t_s);
    Some(run.own_span_s(loaded.t_s, reached.unwrap_or(released.t_s)))
}

/// The phases whose end is a release edge: the call that should give memory
/// back has returned. A `sleep` edge gets its own in `metrics::sleep` (its
/// window ends with the time asleep, before the wake).
pub const RELEASING: [Phase; 1] = [Phase::Release];

/// The release edge of `cycle`: the end of its last [`RELEASING`] phase,
/// else (a plain drop, no release step) the end of its last unload.
pub fn release_edge(run: &RunRecord, cycle: u32) -> Option<&Event> {
    let last_end = |phase: Phase| edges(run, cycle, phase, Edge::End).last();
    RELEASING
        .iter()
        .filter_map(|&p| last_end(p))
        .reduce(|a, b| if b.t_s >= a.t_s { b } else { a })
        .or_else(|| last_end(Phase::Unload))
}

/// Where the settle window after `from` ends: the last edge before the next
/// load begins (the end of the last step before the program moved on: a
/// settle, idle or busy step), the next load's begin when nothing came
/// between, else the run's last edge. `None` when the run ends at `from`:
/// no time to watch.
pub fn settle_end<'a>(run: &'a RunRecord, from: &Event) -> Option<&'a Event> {
    let at = run.events.iter().position(|e| std::ptr::eq(e, from))?;
    let after = run.events.get(at + 1..)?;
    let next_load = after
        .iter()
        .position(|e| e.edge.phase == Phase::Load && e.edge.edge == Edge::Begin);
    let before_load = &after[..next_load.unwrap_or(after.len())];
    before_load
        .last()
        .or_else(|| next_load.and_then(|i| after.get(i)))
        .filter(|e| e.t_s > from.t_s)
}

/// The release gap of one release edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gap {
    /// From the edge's end until memory stays within the threshold of its final value.
    pub settle_s: f64,
    /// The edge's value − the final value, 0 when memory grew.
    pub late_bytes: u64,
}

/// The release gap after `from` (a release edge's end, value R at time t0):
/// F is the value where the window ends ([`settle_end`]: its edge's own
/// reading). `settle_s` is the time from t0 to the first point (R itself,
/// a sample, or the window's end) after which every point is within
/// `threshold` of F (the retention threshold, the same that calls a cycle
/// retaining): 0 when R already was. `late_bytes` = R − F, clamped at 0
/// (memory that grew after the call is not a late release).
pub fn settle(run: &RunRecord, resource: Resource, from: &Event, threshold: u64) -> Option<Gap> {
    settle_between(run, resource, from, settle_end(run, from)?, threshold)
}

/// [`settle`] over a window that ends at `to` (a sleep's: the end of the
/// time asleep, before the wake).
pub fn settle_between(
    run: &RunRecord,
    resource: Resource,
    from: &Event,
    to: &Event,
    threshold: u64,
) -> Option<Gap> {
    if to.t_s <= from.t_s {
        return None;
    }
    let start = resource.at_event(from)?;
    let end = resource.at_event(to)?;
    let inside_window = run
        .samples
        .iter()
        .filter(|s| s.t_s > from.t_s && s.t_s < to.t_s)
        .filter_map(|s| resource.in_sample(s).map(|v| (s.t_s, v)));
    let settled_s = settled_at_s((from.t_s, start), inside_window, (to.t_s, end), threshold);
    Some(Gap {
        settle_s: run.own_span_s(from.t_s, settled_s),
        late_bytes: start.saturating_sub(end),
    })
}

/// The one settle rule (a run's phase edges here, `memrel drive`'s
/// requests too): over a window from `from` (its time and reading R) to
/// `to` (F, where memory ends up), with the readings `between` in time
/// order, the seconds from `from` to the first point (R itself, a reading
/// between, or the window's end) after which every point is within
/// `threshold` of F: 0 when R already was.
pub fn settle_time_s(
    from: (f64, u64),
    between: impl IntoIterator<Item = (f64, u64)>,
    to: (f64, u64),
    threshold: u64,
) -> f64 {
    settled_at_s(from, between, to, threshold) - from.0
}

/// When [`settle_time_s`]'s window settled: the time of that first point.
fn settled_at_s(
    from: (f64, u64),
    between: impl IntoIterator<Item = (f64, u64)>,
    to: (f64, u64),
    threshold: u64,
) -> f64 {
    let end = to.1;
    let outside = |v: u64| v.abs_diff(end) > threshold;
    let mut settled_t_s = from.0;
    let mut out = outside(from.1);
    for (t_s, v) in between {
        if outside(v) {
            out = true;
        } else if out {
            out = false;
            settled_t_s = t_s;
        }
    }
    if out {
        settled_t_s = to.0;
    }
    settled_t_s
}

/// One resource over the runs of a strategy; `representative` is the run
/// whose last cycle makes the table row.
pub fn resource_summary(
    resource: Resource,
    runs: &[(&ResourceRun, RunStatus, u32)],
    representative: Option<u32>,
) -> ResourceSummary {
    let over = |f: &dyn Fn(&ResourceRun) -> Option<f64>| {
        spread(runs.iter().filter_map(|(r, _, _)| f(r)).collect())
    };
    let last = |f: &dyn Fn(&CycleMemory) -> Option<f64>| {
        spread(
            runs.iter()
                .filter_map(|(r, _, _)| r.cycles.last().and_then(f))
                .collect(),
        )
    };
    let every_cycle = |f: &dyn Fn(&CycleMemory) -> Option<f64>| {
        spread(
            runs.iter()
                .flat_map(|(r, _, _)| r.cycles.iter().filter_map(f))
                .collect(),
        )
    };
    let last_cycle = runs
        .iter()
        .flat_map(|(r, _, _)| r.cycles.iter().map(|c| c.cycle))
        .max()
        .unwrap_or(0);
    let retained_by_cycle = (1..=last_cycle)
        .filter_map(|cycle| {
            let v: Vec<f64> = runs
                .iter()
                .flat_map(|(r, _, _)| r.cycles.iter().filter(|c| c.cycle == cycle))
                .map(|c| c.retained_bytes as f64)
                .collect();
            spread(v).map(|spread| CycleSpread { cycle, spread })
        })
        .collect();
    let row = runs
        .iter()
        .find(|(_, _, run)| Some(*run) == representative)
        .and_then(|(r, _, run)| {
            let c = r.cycles.last()?;
            Some(LastCycle {
                run: *run,
                cycle: c.cycle,
                baseline_bytes: r.baseline_bytes?,
                floor_bytes: r.floor_bytes,
                peak_bytes: r.peak_bytes,
                loaded_bytes: c.loaded_bytes,
                after_unload_bytes: c.after_unload_bytes,
                after_release_bytes: c.after_release_bytes,
                retained_bytes: c.retained_bytes,
                released_fraction: c.released_fraction,
                release_t50_s: c.release_t50_s,
                release_t90_s: c.release_t90_s,
            })
        });
    let measured = runs.iter().any(|(r, _, _)| r.not_measured.is_none());
    ResourceSummary {
        resource,
        not_measured: if measured {
            None
        } else {
            runs.iter().find_map(|(r, _, _)| r.not_measured.clone())
        },
        row,
        baseline_bytes: over(&|r| r.baseline_bytes.map(|v| v as f64)),
        floor_bytes: over(&|r| r.floor_bytes.map(|v| v as f64)),
        peak_bytes: over(&|r| r.peak_bytes.map(|v| v as f64)),
        loaded_bytes: last(&|c| Some(c.loaded_bytes as f64)),
        after_unload_bytes: last(&|c| Some(c.after_unload_bytes as f64)),
        after_release_bytes: last(&|c| Some(c.after_release_bytes as f64)),
        retained_bytes: over(&|r| r.retained_bytes.map(|v| v as f64)),
        retained_anon_bytes: last(&|c| c.retained_anon_bytes.map(|v| v as f64)),
        released_fraction: last(&|c| c.released_fraction),
        retained_slope_bytes_per_cycle: over(&|r| r.retained_slope_bytes_per_cycle),
        release_latency_s: every_cycle(&|c| c.release_latency_s),
        release_t50_s: every_cycle(&|c| c.release_t50_s),
        release_t90_s: every_cycle(&|c| c.release_t90_s),
        settle_s: every_cycle(&|c| c.settle_s),
        late_bytes: every_cycle(&|c| c.late_bytes.map(|v| v as f64)),
        cycles_retaining: runs.iter().map(|(r, _, _)| r.cycles_retaining).sum(),
        cycles_total: runs.iter().map(|(r, _, _)| r.cycles.len() as u32).sum(),
        processes_retaining: runs
            .iter()
            .filter(|(r, _, _)| r.cycles_retaining > 0)
            .count() as u32,
        retained_by_cycle,
        context: None,
    }
}

/// The completed run (else any run) whose last retained value of `resource`
/// is closest to the median over those runs (the first on a tie); runs
/// without a retained value come last.
pub fn representative_run(runs: &[(&ResourceRun, RunStatus, u32)]) -> Option<u32> {
    let completed: Vec<&(&ResourceRun, RunStatus, u32)> = runs
        .iter()
        .filter(|(_, status, _)| *status == RunStatus::Completed)
        .collect();
    let pool: Vec<&(&ResourceRun, RunStatus, u32)> = if completed.is_empty() {
        runs.iter().collect()
    } else {
        completed
    };
    let median = spread(
        pool.iter()
            .filter_map(|(r, _, _)| r.retained_bytes.map(|v| v as f64))
            .collect(),
    )
    .map(|s| s.median);
    let distance = |r: &ResourceRun| match (r.retained_bytes, median) {
        (Some(v), Some(m)) => (v as f64 - m).abs(),
        _ => f64::INFINITY,
    };
    let mut best: Option<&(&ResourceRun, RunStatus, u32)> = None;
    for entry in pool {
        if best.is_none_or(|b| distance(entry.0) < distance(b.0)) {
            best = Some(entry);
        }
    }
    best.map(|(_, _, run)| *run)
}

/// A resource's retention split into its first cycle and the steady state
/// after it (cycles 2..n), from the medians of `retained_by_cycle`: tells a
/// one-time cost of the first load (imports, caches, a CUDA context) from
/// retention that repeats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FirstLoad {
    /// Retained after cycle 1.
    pub first_bytes: f64,
    /// What each later cycle added on average: (retained after the last
    /// cycle − after cycle 1) / (cycles − 1).
    pub steady_bytes_per_cycle: f64,
    /// The last cycle.
    pub cycles: u32,
}

impl FirstLoad {
    /// Over `by_cycle` (retained after each cycle); `None` with fewer than 2 cycles.
    pub fn of(by_cycle: &[CycleSpread]) -> Option<FirstLoad> {
        let first = by_cycle.iter().find(|c| c.cycle == 1)?;
        let last = by_cycle.last().filter(|c| c.cycle >= 2)?;
        Some(FirstLoad {
            first_bytes: first.spread.median,
            steady_bytes_per_cycle: (last.spread.median - first.spread.median)
                / f64::from(last.cycle - 1),
            cycles: last.cycle,
        })
    }

    /// The first cycle retained more than `threshold_bytes`, and more than
    /// every later cycle added together: most of the retention is paid once.
    pub fn is_most_of_it(&self, threshold_bytes: u64) -> bool {
        let later = self.steady_bytes_per_cycle * f64::from(self.cycles - 1);
        self.first_bytes > threshold_bytes as f64 && self.first_bytes > later
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_cycle(mib: &[f64]) -> Vec<CycleSpread> {
        mib.iter()
            .enumerate()
            .map(|(i, &v)| CycleSpread {
                cycle: i as u32 + 1,
                spread: spread(vec![v * 1048576.0]).expect("one value"),
            })
            .collect()
    }

    #[test]
    fn a_first_load_cost_is_told_from_retention_that_repeats() {
        let threshold = 10 << 20;
        // PyTorch's first load: 188 MiB once, then flat.
        let once = FirstLoad::of(&by_cycle(&[188.0, 188.5, 189.0])).expect("3 cycles");
        assert_eq!(once.first_bytes, 188.0 * 1048576.0);
        assert_eq!(once.steady_bytes_per_cycle, 0.5 * 1048576.0);
        assert!(once.is_most_of_it(threshold));
        // A leak: every cycle adds the same.
        let leak = FirstLoad::of(&by_cycle(&[60.0, 120.0, 180.0])).expect("3 cycles");
        assert!(!leak.is_most_of_it(threshold));
        // Below the threshold: nothing to explain.
        assert!(!FirstLoad::of(&by_cycle(&[2.0, 2.0]))
            .expect("2 cycles")
            .is_most_of_it(threshold));
        assert_eq!(FirstLoad::of(&by_cycle(&[188.0])), None);
    }
}
