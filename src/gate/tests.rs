//! The gate's unit tests, compiled only under `#[cfg(test)]` (declared in
//! gate/mod.rs): judging, budgets, rates and the verdict rows' JSON shape.

use super::decide::{judge, RATE_ALPHA};
use super::*;
use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::summarize;
use crate::protocol::Check;
use crate::record::fixture::{cuda_record, record, run, with_vram};
use crate::record::{Record, RunStatus};

use crate::textutil::MIB;
const VRAM: Resource = Resource::Device(0);

fn judged(metric: MemoryMetric, baseline: &[f64], new: &[f64]) -> MetricVerdict {
    judge(
        "s",
        "x",
        Resource::Host,
        metric,
        &Observations::per_run(baseline),
        &Observations::per_run(new),
        &Thresholds::fixture(),
    )
}

fn row<'a>(
    rows: &'a [MetricVerdict],
    strategy: &str,
    resource: Resource,
    metric: MemoryMetric,
) -> &'a MetricVerdict {
    rows.iter()
        .find(|v| v.strategy == strategy && v.resource == resource && v.metric == metric)
        .unwrap_or_else(|| panic!("no row {strategy} {resource} {metric:?}: {rows:#?}"))
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
            .for_each(|e| e.readings.set_one_device(0, None));
        r.samples
            .iter_mut()
            .for_each(|s| s.readings.set_one_device(0, None));
        r.meta.checks.push(Check {
            name: "vram sampler (nvml)".into(),
            ok: false,
            detail: "nvml: driver not loaded".into(),
        });
    }
    record
}

fn failing(rows: &[MetricVerdict]) -> Vec<(String, Resource, MemoryMetric, Verdict)> {
    rows.iter()
        .filter(|v| v.verdict.fails())
        .map(|v| (v.strategy.clone(), v.resource, v.metric, v.verdict))
        .collect()
}

#[test]
fn a_clear_rise_beyond_the_band_regresses() {
    let v = judged(
        MemoryMetric::Retained,
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
        &Thresholds::fixture(),
    )
    .into_iter()
    .find(|v| v.metric == MemoryMetric::ReleaseLatency)
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
        MemoryMetric::ReleaseLatency,
        &Observations::per_run(&[0.01, 0.011]),
        &one_run,
        &Thresholds::fixture(),
    );
    assert_eq!(v.verdict, Verdict::Inconclusive);
    assert!(v.note.contains("would be regressed"), "{}", v.note);
}

#[test]
fn changes_inside_the_band_are_no_change() {
    let v = judged(
        MemoryMetric::Retained,
        &[2.0 * MIB, 3.0 * MIB],
        &[4.0 * MIB, 2.5 * MIB],
    );
    assert_eq!(v.verdict, Verdict::NoChange);
}

#[test]
fn a_wide_spread_is_inconclusive_not_regressed() {
    // Retention that happens in some processes only: median moved, interval too wide.
    let v = judged(
        MemoryMetric::Retained,
        &[2.0 * MIB, 3.0 * MIB],
        &[2.0 * MIB, 400.0 * MIB],
    );
    assert_eq!(v.verdict, Verdict::Inconclusive);
}

#[test]
fn a_clear_drop_improves() {
    let v = judged(
        MemoryMetric::Peak,
        &[800.0 * MIB, 810.0 * MIB],
        &[400.0 * MIB, 405.0 * MIB],
    );
    assert_eq!(v.verdict, Verdict::Improved);
}

#[test]
fn one_run_per_side_is_never_a_regression() {
    let v = judged(MemoryMetric::Retained, &[2.0 * MIB], &[400.0 * MIB]);
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
    compare(baseline, new, &Thresholds::fixture())
        .into_iter()
        .find(|v| v.metric == MemoryMetric::RetentionRate)
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
            MemoryMetric::RetentionRate,
            &zeros(n),
            &zeros(n),
            &Thresholds::fixture(),
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
    let mut rows = compare(&base, &complete_only(&new), &Thresholds::fixture());
    note_left_out(&mut rows, &left_out);
    // malloc-trim lost both runs: nothing to judge is an error, not a pass.
    let trim = row(&rows, "malloc-trim", Resource::Host, MemoryMetric::Retained);
    assert_eq!(trim.verdict, Verdict::Error, "{trim:?}");
    assert!(
            trim.note.starts_with(
                "complete runs only, left out new run 2 (failed), new run 4 (timed_out); no complete run"
            ),
            "{}",
            trim.note
        );
    // drop keeps one complete run: judged on it, and says what was left out.
    let drop = row(&rows, "drop", Resource::Host, MemoryMetric::Retained);
    assert_eq!((drop.new_runs, drop.baseline_runs), (1, 2));
    assert!(
        drop.note
            .starts_with("complete runs only, left out new run 3 (incomplete)"),
        "{}",
        drop.note
    );
    // Budgets of a strategy without a complete run have no observation: an error.
    let mut t = Thresholds::fixture();
    t.budgets_mut(crate::metrics::Resource::Host)
        .max_retained_bytes = Some(64 << 20);
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
    let rows = compare(&summary, &summary, &Thresholds::fixture());
    assert_eq!(failing(&rows), []);
    // 3 strategies × 2 resources × 7 metrics (the sleep metrics only where
    // a model slept), VRAM (the lead) first.
    assert_eq!(rows.len(), 3 * 2 * 7);
    assert_eq!(rows[0].resource, VRAM);
    for strategy in ["drop", "sync", "context-release"] {
        for metric in GATED.into_iter().filter(|m| !m.only_with_sleeps()) {
            row(&rows, strategy, VRAM, metric);
            row(&rows, strategy, Resource::Host, metric);
        }
    }
    let drop = row(&rows, "drop", VRAM, MemoryMetric::Retained);
    assert_eq!(drop.verdict, Verdict::NoChange);
    assert_eq!(drop.new_value, Some(416.0 * MIB));
    assert_eq!(drop.statistic, Statistic::Mean);
}

#[test]
fn vram_kept_after_sync_regresses_vram_retained_and_not_host() {
    let baseline = summarize(&cuda_record());
    let new = summarize(&cuda_keeping("sync", 416));
    let rows = compare(&baseline, &new, &Thresholds::fixture());
    // Every cycle of both runs now retains, where none did: the rate regresses too.
    let regressed = |metric: MemoryMetric| ("sync".to_string(), VRAM, metric, Verdict::Regressed);
    assert_eq!(
        failing(&rows),
        [
            regressed(MemoryMetric::Retained),
            regressed(MemoryMetric::RetentionRate)
        ]
    );
    let rate = row(&rows, "sync", VRAM, MemoryMetric::RetentionRate);
    assert_eq!(
        (rate.baseline_value, rate.new_value),
        (Some(0.0), Some(1.0))
    );
    let retained = row(&rows, "sync", VRAM, MemoryMetric::Retained);
    assert_eq!(retained.change, Some(416.0 * MIB));
    assert_eq!((retained.baseline_runs, retained.new_runs), (2, 2));
    for metric in GATED.into_iter().filter(|m| !m.only_with_sleeps()) {
        let host = row(&rows, "sync", Resource::Host, metric);
        // None of 6 cycles retaining on either side is too few to show no change.
        let expected = match metric {
            MemoryMetric::RetentionRate => Verdict::Inconclusive,
            _ => Verdict::NoChange,
        };
        assert_eq!(host.verdict, expected, "{host:?}");
    }
    // Nothing comes back any more: no release left to time.
    let latency = row(&rows, "sync", VRAM, MemoryMetric::ReleaseLatency);
    assert_eq!(latency.verdict, Verdict::Inconclusive);
    assert!(latency.note.contains("in the new runs"), "{}", latency.note);
    assert_eq!(
        row(&rows, "drop", VRAM, MemoryMetric::Retained).verdict,
        Verdict::NoChange
    );
}

#[test]
fn a_vram_budget_below_what_drop_keeps_is_over_budget_for_drop_only() {
    let mut t = Thresholds::fixture();
    t.budgets_mut(crate::metrics::Resource::Device(0))
        .max_retained_bytes = Some(300 << 20);
    t.budgets_mut(crate::metrics::Resource::Host)
        .max_retained_bytes = Some(64 << 20);
    let rows = budgets(&summarize(&cuda_record()), &t);
    assert_eq!(
        failing(&rows),
        [(
            "drop".to_string(),
            VRAM,
            MemoryMetric::Retained,
            Verdict::OverBudget
        )]
    );
    let drop = row(&rows, "drop", VRAM, MemoryMetric::Retained);
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
    let released = row(&rows, "context-release", VRAM, MemoryMetric::Retained);
    assert_eq!(released.verdict, Verdict::NoChange);
    assert_eq!(released.budget.as_ref().unwrap().worst, Some(-678.0 * MIB));
    // Host memory keeps its own key and budget.
    let host = row(&rows, "drop", Resource::Host, MemoryMetric::Retained);
    assert_eq!(host.budget.as_ref().unwrap().key, "max_retained_mib");
    assert_eq!(host.verdict, Verdict::NoChange);
    assert_eq!(rows.len(), 3 * 2);
}

#[test]
fn a_vram_peak_budget_is_checked_on_the_worst_run() {
    let mut t = Thresholds::fixture();
    t.budgets_mut(crate::metrics::Resource::Device(0))
        .max_peak_bytes = Some(1000 << 20);
    let rows = budgets(&summarize(&cuda_record()), &t);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|v| v.verdict == Verdict::OverBudget
        && v.budget.as_ref().unwrap().key == "max_peak_vram_mib"));
    t.budgets_mut(crate::metrics::Resource::Device(0))
        .max_peak_bytes = Some(1100 << 20);
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

    let rows = compare(&measured, &unmeasured, &Thresholds::fixture());
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
    assert_eq!(rows.iter().filter(|v| v.resource == VRAM).count(), 3 * 7);
    // Host memory is still judged.
    let host = row(&rows, "drop", Resource::Host, MemoryMetric::Retained);
    assert_eq!(host.verdict, Verdict::NoChange);

    let rows = compare(&unmeasured, &measured, &Thresholds::fixture());
    let v = row(&rows, "sync", VRAM, MemoryMetric::Retained);
    assert_eq!(v.verdict, Verdict::Inconclusive);
    assert!(
        v.note.contains("not measured in the baseline runs"),
        "{}",
        v.note
    );

    let rows = compare(&unmeasured, &unmeasured, &Thresholds::fixture());
    let v = row(&rows, "sync", VRAM, MemoryMetric::ReleaseLatency);
    assert_eq!(v.verdict, Verdict::Inconclusive, "not a no-change: {v:?}");
    assert!(v.note.contains("on either side"), "{}", v.note);
}

#[test]
fn a_budget_with_nothing_to_check_is_an_error_not_a_pass() {
    let mut t = Thresholds::fixture();
    t.budgets_mut(crate::metrics::Resource::Device(0))
        .max_retained_bytes = Some(300 << 20);
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
    let rows = compare(&summary, &summary, &Thresholds::fixture());
    assert_eq!(rows.len(), 2 * 7);
    assert!(rows.iter().all(|v| v.resource == Resource::Host));
    assert_eq!(failing(&rows), []);
}

#[test]
fn verdict_json_names_the_resource_and_what_one_observation_is() {
    let summary = summarize(&cuda_record());
    let rows = compare(&summary, &summary, &Thresholds::fixture());
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

#[test]
fn metric_names_are_the_catalogue_s_and_serde_s() {
    for metric in GATED {
        let json = serde_json::to_value(metric).unwrap();
        assert_eq!(json, metric.as_str(), "{metric:?}");
    }
}

#[test]
fn a_budget_nothing_could_be_checked_against_is_one_error() {
    let mut t = Thresholds::fixture();
    t.budgets_mut(crate::metrics::Resource::Device(0))
        .max_retained_bytes = Some(300 << 20);
    t.budgets_mut(crate::metrics::Resource::Host)
        .max_retained_bytes = Some(64 << 20);
    // A record without VRAM readings: the host budget is checked, the VRAM one cannot be.
    let summary = summarize(&record());
    let rows = budgets(&summary, &t);
    let warnings = super::evidence::unchecked_budgets(&rows);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "scenario fixture: budget max_retained_vram_mib (cuda:0) was not checked for drop, malloc-trim: "
        ),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].contains("VRAM not measured"), "{}", warnings[0]);
    let unchecked = rows
        .iter()
        .filter_map(|v| v.budget.as_ref()?.unchecked.as_deref());
    assert!(unchecked
        .clone()
        .all(|why| why.contains("VRAM not measured")));
    assert_eq!(unchecked.count(), 2);
}

/// `record()` with the model files' page cache read at every edge: `drop`
/// keeps 100 MiB cached from its first load on, `malloc-trim` none.
fn with_page_cache() -> Record {
    let mut record = record();
    record.header.page_cache = Some(Default::default());
    for r in &mut record.runs {
        let keeps = r.meta.strategy == "drop";
        for e in &mut r.events {
            let loaded = e.edge.cycle >= 1;
            let bytes = if keeps && loaded { 100 << 20 } else { 0 };
            e.readings.set(Resource::PageCache, bytes);
        }
    }
    record
}

#[test]
fn a_page_cache_budget_is_checked_and_a_record_without_one_says_so() {
    let mut t = Thresholds::fixture();
    t.budgets_mut(crate::metrics::Resource::PageCache)
        .max_retained_bytes = Some(8 << 20);
    let rows = budgets(&summarize(&with_page_cache()), &t);
    let of = |strategy: &str| row(&rows, strategy, Resource::PageCache, MemoryMetric::Retained);
    assert_eq!(of("drop").verdict, Verdict::OverBudget);
    assert!(
        of("drop").note.contains("max_retained_page_cache_mib"),
        "{}",
        of("drop").note
    );
    assert_eq!(of("malloc-trim").verdict, Verdict::NoChange);
    // A record without the resource (older, or a program's): an error row each.
    let rows = budgets(&summarize(&record()), &t);
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|v| v.resource == Resource::PageCache && v.verdict == Verdict::Error));
    // Against a baseline made before memrel read the page cache: not judged.
    let old = summarize(&record());
    let new = summarize(&with_page_cache());
    let rows = compare(&old, &new, &Thresholds::fixture());
    assert!(
        rows.iter().all(|v| v.resource == Resource::Host),
        "{rows:#?}"
    );
}

#[test]
fn a_changed_retained_row_names_the_mechanism_that_moved_most() {
    use crate::metrics::why::{Held, Mechanism};
    use crate::metrics::RunSummary;
    let summary = summarize(&record());
    let mut base: Vec<RunSummary> = summary
        .runs
        .iter()
        .filter(|r| r.strategy == "drop")
        .cloned()
        .collect();
    assert!(base.len() >= 2);
    let mut new = base.clone();
    let held = |mechanism, mib: i64| Held {
        resource: Resource::Host,
        mechanism,
        bytes: mib << 20,
    };
    for r in &mut base {
        r.why = vec![
            held(Mechanism::FreeChunks, 2),
            held(Mechanism::LiveHeap, 10),
        ];
    }
    for r in &mut new {
        r.why = vec![
            held(Mechanism::FreeChunks, 66),
            held(Mechanism::LiveHeap, 12),
        ];
    }
    let shift = |verdict, base: &[RunSummary], new: &[RunSummary]| {
        let (b, n): (Vec<&RunSummary>, Vec<&RunSummary>) =
            (base.iter().collect(), new.iter().collect());
        budget::mechanism_shift(verdict, Resource::Host, &b, &n)
    };
    assert_eq!(
        shift(Verdict::Regressed, &base, &new).as_deref(),
        Some("; most of it: free malloc chunks, 2.0 → 66.0 MiB")
    );
    assert_eq!(shift(Verdict::NoChange, &base, &new), None);
    // A side without a split: nothing to name.
    for r in &mut base {
        r.why.clear();
    }
    assert_eq!(shift(Verdict::Regressed, &base, &new), None);
}
