//! Pure functions from a saved [`Record`] to the numbers people read.
//!
//! Nothing here measures or formats; every report (console, JSON, charts,
//! the gate) reads a [`Summary`], so all of them agree and can be recomputed
//! from disk at any time. The definitions are in the README ("Metrics").

pub mod comparison;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::protocol::{Edge, MemoryAtEdge, Phase};
use crate::record::{Record, RunRecord, RunStatus, SCHEMA_VERSION};

/// Release latency counts as reached within max(this, 2 % of the drop).
const LATENCY_TOLERANCE_BYTES: u64 = 2 << 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CycleMetrics {
    pub cycle: u32,
    pub loaded_bytes: u64,
    pub after_unload_bytes: u64,
    pub after_release_bytes: u64,
    /// after_release − baseline (negative when memory ends below the baseline).
    pub retained_bytes: i64,
    pub retained_anon_bytes: i64,
    pub released_fraction: Option<f64>,
    pub release_latency_s: Option<f64>,
    pub load_time_s: f64,
    pub load_bytes: u64,
    pub forward_time_s: Option<f64>,
    pub release_action_s: Option<f64>,
    /// glibc's free bytes inside its arenas after the release (mallinfo2 fordblks).
    pub glibc_free_bytes: Option<u64>,
    pub vram_after_release_bytes: Option<u64>,
    pub retained_over_threshold: bool,
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
    pub baseline_bytes: u64,
    pub baseline_vram_bytes: Option<u64>,
    /// Highest sampled RSS.
    pub peak_bytes: u64,
    pub peak_vram_bytes: Option<u64>,
    /// The kernel's VmHWM, a cross-check of `peak_bytes` that no sampling can miss.
    pub vm_hwm_bytes: Option<u64>,
    pub samples: usize,
    pub cycles: Vec<CycleMetrics>,
    /// Retained after the last complete cycle.
    pub retained_bytes: Option<i64>,
    pub retained_max_bytes: Option<i64>,
    /// Least-squares slope of retained over cycles: growth means a leak.
    pub retained_slope_bytes_per_cycle: Option<f64>,
    pub cycles_retaining: u32,
    pub load_throughput_bytes_per_s: Option<f64>,
}

/// Median and range over the runs of one strategy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StrategySummary {
    pub strategy: String,
    pub runs: u32,
    pub runs_completed: u32,
    pub checks_passed: bool,
    pub baseline_bytes: Option<Spread>,
    pub peak_bytes: Option<Spread>,
    pub loaded_bytes: Option<Spread>,
    pub after_release_bytes: Option<Spread>,
    pub retained_bytes: Option<Spread>,
    pub retained_slope_bytes_per_cycle: Option<Spread>,
    pub released_fraction: Option<Spread>,
    pub release_latency_s: Option<Spread>,
    pub load_time_s: Option<Spread>,
    pub load_throughput_bytes_per_s: Option<Spread>,
    pub forward_time_s: Option<Spread>,
    pub release_action_s: Option<Spread>,
    pub peak_vram_bytes: Option<Spread>,
    pub vram_after_release_bytes: Option<Spread>,
    /// Cycles whose retained value exceeded the threshold, over all runs.
    pub cycles_retaining: u32,
    pub cycles_total: u32,
    /// Runs (processes) in which at least one cycle retained.
    pub processes_retaining: u32,
    /// Retained per cycle, median over runs (cycle 1 first).
    pub retained_by_cycle_bytes: Vec<f64>,
    /// Retained after each cycle, median and range over the runs that reached it.
    #[serde(default)]
    pub retained_by_cycle: Vec<CycleSpread>,
    /// The anonymous part of `retained_bytes` (heap and copied tensors).
    #[serde(default)]
    pub retained_anon_bytes: Option<Spread>,
    /// Cycles the scenario asked for, over all runs (runs × cycles).
    #[serde(default)]
    pub cycles_expected: u32,
    /// Some run failed or timed out, or fewer cycles were measured than asked for.
    #[serde(default)]
    pub incomplete: bool,
    /// The run charts draw for this strategy: the completed run whose retained
    /// value is closest to the median (the first such run on a tie).
    #[serde(default)]
    pub representative_run: Option<u32>,
}

/// One cycle's value over the runs of a strategy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CycleSpread {
    pub cycle: u32,
    #[serde(flatten)]
    pub spread: Spread,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub schema_version: u32,
    pub scenario: String,
    pub device: String,
    pub memrel_version: String,
    pub created_unix_s: u64,
    pub retention_threshold_bytes: u64,
    pub runs: Vec<RunSummary>,
    pub strategies: Vec<StrategySummary>,
}

/// Computes every metric of a record, at the precision its files keep, so the
/// summary of a record and of the same record read back from disk are identical.
pub fn summarize(record: &Record) -> Summary {
    let record = record.at_file_precision();
    let record = record.as_ref();
    let threshold = record.header.retention_threshold_bytes;
    let model_bytes: BTreeMap<&str, u64> = record
        .header
        .models
        .iter()
        .map(|m| (m.id.as_str(), m.tensor_bytes))
        .collect();
    let runs: Vec<RunSummary> = record
        .runs
        .iter()
        .map(|r| summarize_run(r, threshold, &model_bytes))
        .collect();
    let mut order: Vec<String> = Vec::new();
    for r in &runs {
        if !order.contains(&r.strategy) {
            order.push(r.strategy.clone());
        }
    }
    let strategies = order
        .iter()
        .map(|name| {
            let of: Vec<&RunSummary> = runs.iter().filter(|r| &r.strategy == name).collect();
            summarize_strategy(name, &of, record.header.cycles)
        })
        .collect();
    Summary {
        schema_version: SCHEMA_VERSION,
        scenario: record.header.scenario.clone(),
        device: record.header.device.clone(),
        memrel_version: record.header.memrel_version.clone(),
        created_unix_s: record.header.created_unix_s,
        retention_threshold_bytes: threshold,
        runs,
        strategies,
    }
}

fn edges<'a>(
    run: &'a RunRecord,
    cycle: u32,
    phase: Phase,
    edge: Edge,
) -> impl Iterator<Item = &'a crate::record::Event> + 'a {
    run.events
        .iter()
        .filter(move |e| e.edge.cycle == cycle && e.edge.phase == phase && e.edge.edge == edge)
}

pub fn summarize_run(
    run: &RunRecord,
    threshold: u64,
    model_bytes: &BTreeMap<&str, u64>,
) -> RunSummary {
    let baseline: Option<MemoryAtEdge> = edges(run, 0, Phase::Baseline, Edge::End)
        .last()
        .map(|e| e.edge.memory);
    let baseline_bytes = baseline.map(|m| m.rss_bytes).unwrap_or(0);
    let last_cycle = run.events.iter().map(|e| e.edge.cycle).max().unwrap_or(0);
    let mut cycles = Vec::new();
    if let Some(base) = baseline {
        for cycle in 1..=last_cycle {
            if let Some(m) = cycle_metrics(run, cycle, base, threshold, model_bytes) {
                cycles.push(m);
            }
        }
    }
    let retained: Vec<f64> = cycles.iter().map(|c| c.retained_bytes as f64).collect();
    let load_time: f64 = cycles.iter().map(|c| c.load_time_s).sum();
    let load_bytes: u64 = cycles.iter().map(|c| c.load_bytes).sum();
    RunSummary {
        run: run.meta.run,
        strategy: run.meta.strategy.clone(),
        repetition: run.meta.repetition,
        status: run.meta.status,
        error: run.meta.error.clone(),
        checks_passed: run.meta.checks.iter().all(|c| c.ok),
        baseline_bytes,
        baseline_vram_bytes: baseline.and_then(|m| m.vram_bytes),
        peak_bytes: run.samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0),
        peak_vram_bytes: run.samples.iter().filter_map(|s| s.vram_bytes).max(),
        vm_hwm_bytes: run.meta.vm_hwm_bytes,
        samples: run.samples.len(),
        retained_bytes: cycles.last().map(|c| c.retained_bytes),
        retained_max_bytes: cycles.iter().map(|c| c.retained_bytes).max(),
        retained_slope_bytes_per_cycle: slope(&retained),
        cycles_retaining: cycles.iter().filter(|c| c.retained_over_threshold).count() as u32,
        load_throughput_bytes_per_s: (load_time > 0.0).then(|| load_bytes as f64 / load_time),
        cycles,
    }
}

fn cycle_metrics(
    run: &RunRecord,
    cycle: u32,
    baseline: MemoryAtEdge,
    threshold: u64,
    model_bytes: &BTreeMap<&str, u64>,
) -> Option<CycleMetrics> {
    let loaded = edges(run, cycle, Phase::Unload, Edge::Begin).next()?;
    let unloaded = edges(run, cycle, Phase::Unload, Edge::End).last()?;
    let released = edges(run, cycle, Phase::Settle, Edge::End)
        .last()
        .or_else(|| edges(run, cycle, Phase::Release, Edge::End).last())
        .unwrap_or(unloaded);
    let loaded_bytes = loaded.edge.memory.rss_bytes;
    let after_release = released.edge.memory;
    let retained = after_release.rss_bytes as i64 - baseline.rss_bytes as i64;
    let denominator = loaded_bytes as f64 - baseline.rss_bytes as f64;
    let released_fraction = (denominator > 0.0)
        .then(|| (loaded_bytes as f64 - after_release.rss_bytes as f64) / denominator);

    // A release smaller than the retention threshold is drift, not a release:
    // timing it would report when a few MiB happened to move (on CUDA, the
    // host side of the context shrinks some 300 ms into the settle).
    let drop_bytes = loaded_bytes.saturating_sub(after_release.rss_bytes);
    let tolerance = LATENCY_TOLERANCE_BYTES.max(drop_bytes / 50);
    let target = after_release.rss_bytes + tolerance;
    let release_latency_s = if drop_bytes < threshold {
        None
    } else {
        run.samples
            .iter()
            .filter(|s| s.t_s >= unloaded.t_s && s.t_s <= released.t_s)
            .find(|s| s.rss_bytes <= target)
            .map(|s| s.t_s - unloaded.t_s)
            .or_else(|| (released.t_s > unloaded.t_s).then_some(released.t_s - unloaded.t_s))
    };

    let sum = |phase: Phase| -> Option<f64> {
        let v: Vec<f64> = edges(run, cycle, phase, Edge::End)
            .filter_map(|e| e.edge.elapsed_s)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    let load_bytes = edges(run, cycle, Phase::Load, Edge::End)
        .filter_map(|e| e.edge.model.as_deref())
        .filter_map(|m| model_bytes.get(m))
        .sum();
    Some(CycleMetrics {
        cycle,
        loaded_bytes,
        after_unload_bytes: unloaded.edge.memory.rss_bytes,
        after_release_bytes: after_release.rss_bytes,
        retained_bytes: retained,
        retained_anon_bytes: after_release.anon_bytes as i64 - baseline.anon_bytes as i64,
        released_fraction,
        release_latency_s,
        load_time_s: sum(Phase::Load).unwrap_or(0.0),
        load_bytes,
        forward_time_s: sum(Phase::Forward),
        release_action_s: sum(Phase::Release),
        glibc_free_bytes: released.edge.allocator.map(|a| a.free_bytes),
        vram_after_release_bytes: after_release.vram_bytes,
        retained_over_threshold: retained > threshold as i64,
    })
}

fn summarize_strategy(name: &str, runs: &[&RunSummary], cycles_per_run: u32) -> StrategySummary {
    let over =
        |f: &dyn Fn(&RunSummary) -> Option<f64>| spread(runs.iter().filter_map(|r| f(r)).collect());
    let per_cycle = |f: &dyn Fn(&CycleMetrics) -> Option<f64>| {
        spread(
            runs.iter()
                .flat_map(|r| r.cycles.iter().filter_map(f))
                .collect(),
        )
    };
    let max_cycles = runs.iter().map(|r| r.cycles.len()).max().unwrap_or(0);
    let retained_by_cycle_bytes = (0..max_cycles)
        .filter_map(|i| {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.cycles.get(i).map(|c| c.retained_bytes as f64))
                .collect();
            spread(v).map(|s| s.median)
        })
        .collect();
    let last_cycle = runs
        .iter()
        .flat_map(|r| r.cycles.iter().map(|c| c.cycle))
        .max()
        .unwrap_or(0);
    let retained_by_cycle: Vec<CycleSpread> = (1..=last_cycle)
        .filter_map(|cycle| {
            let v: Vec<f64> = runs
                .iter()
                .flat_map(|r| r.cycles.iter().filter(|c| c.cycle == cycle))
                .map(|c| c.retained_bytes as f64)
                .collect();
            spread(v).map(|spread| CycleSpread { cycle, spread })
        })
        .collect();
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
        baseline_bytes: over(&|r| Some(r.baseline_bytes as f64)),
        peak_bytes: over(&|r| Some(r.peak_bytes as f64)),
        loaded_bytes: per_cycle(&|c| Some(c.loaded_bytes as f64)),
        after_release_bytes: per_cycle(&|c| Some(c.after_release_bytes as f64)),
        retained_bytes: over(&|r| r.retained_bytes.map(|v| v as f64)),
        retained_slope_bytes_per_cycle: over(&|r| r.retained_slope_bytes_per_cycle),
        released_fraction: per_cycle(&|c| c.released_fraction),
        release_latency_s: per_cycle(&|c| c.release_latency_s),
        load_time_s: per_cycle(&|c| Some(c.load_time_s)),
        load_throughput_bytes_per_s: over(&|r| r.load_throughput_bytes_per_s),
        forward_time_s: per_cycle(&|c| c.forward_time_s),
        release_action_s: per_cycle(&|c| c.release_action_s),
        peak_vram_bytes: over(&|r| r.peak_vram_bytes.map(|v| v as f64)),
        vram_after_release_bytes: per_cycle(&|c| c.vram_after_release_bytes.map(|v| v as f64)),
        cycles_retaining: runs.iter().map(|r| r.cycles_retaining).sum(),
        cycles_total,
        processes_retaining: runs.iter().filter(|r| r.cycles_retaining > 0).count() as u32,
        retained_by_cycle_bytes,
        retained_by_cycle,
        retained_anon_bytes: over(&|r| r.cycles.last().map(|c| c.retained_anon_bytes as f64)),
        cycles_expected,
        incomplete: runs_completed < runs.len() as u32 || cycles_total < cycles_expected,
        representative_run: representative_run(runs),
    }
}

/// The completed run (else any run) whose last retained value is closest to
/// the median over those runs; runs without a retained value come last.
fn representative_run(runs: &[&RunSummary]) -> Option<u32> {
    let completed: Vec<&RunSummary> = runs
        .iter()
        .copied()
        .filter(|r| r.status == RunStatus::Completed)
        .collect();
    let pool: Vec<&RunSummary> = if completed.is_empty() {
        runs.to_vec()
    } else {
        completed
    };
    let median = spread(
        pool.iter()
            .filter_map(|r| r.retained_bytes.map(|v| v as f64))
            .collect(),
    )
    .map(|s| s.median);
    let distance = |r: &RunSummary| match (r.retained_bytes, median) {
        (Some(v), Some(m)) => (v as f64 - m).abs(),
        _ => f64::INFINITY,
    };
    let mut best: Option<&RunSummary> = None;
    for r in pool {
        if best.is_none_or(|b| distance(r) < distance(b)) {
            best = Some(r);
        }
    }
    best.map(|r| r.run)
}

/// Median and range, `None` for no values.
pub fn spread(mut values: Vec<f64>) -> Option<Spread> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: values[0],
        max: values[n - 1],
        n,
    })
}

/// Least-squares slope of `values` against their index; `None` for fewer than two.
pub fn slope(values: &[f64]) -> Option<f64> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean_x = (n - 1) as f64 / 2.0;
    let mean_y = values.iter().sum::<f64>() / n as f64;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in values.iter().enumerate() {
        let dx = i as f64 - mean_x;
        num += dx * (y - mean_y);
        den += dx * dx;
    }
    Some(num / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_is_its_gradient() {
        assert_eq!(slope(&[1.0, 3.0, 5.0, 7.0]), Some(2.0));
        assert_eq!(slope(&[4.0, 4.0, 4.0]), Some(0.0));
        assert_eq!(slope(&[4.0]), None);
    }

    #[test]
    fn spread_takes_median_of_even_count() {
        let s = spread(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 4.0, 4));
        assert!(spread(vec![]).is_none());
    }

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
        let drop = of(&summary, "drop");
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
        assert_eq!(drop.cycles_expected, 6);
        assert!(!drop.incomplete);
        assert_eq!(mib(drop.retained_anon_bytes.as_ref().unwrap().median), 45.0);
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
        let cycles = &summary.runs[0].cycles;
        assert!(cycles[0].release_latency_s.is_some_and(|s| s >= 0.0));
        assert_eq!(cycles[1].release_latency_s, None);
    }

    #[test]
    fn a_run_cut_short_makes_its_strategy_incomplete() {
        let mut record = crate::record::fixture::record();
        record.runs[1].events.truncate(10);
        let summary = summarize(&record);
        let trim = of(&summary, "malloc-trim");
        assert_eq!((trim.cycles_total, trim.cycles_expected), (4, 6));
        assert!(trim.incomplete);
    }
}
