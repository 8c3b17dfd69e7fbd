//! Advice: for each resource that retains memory, the cheapest strategy that
//! gives it back in every completed run, with its price and the setting to
//! use (`memrel advise`). It exists so that a comparison ends in a decision
//! a person can apply, not only a table to read.
//!
//! Pure like the rest of `metrics`: summaries in, an [`Advice`] out; no I/O
//! and no formatting (that is `export::advice`). Only completed runs count:
//! a failed run's memory says nothing about the strategy. A strategy with
//! fewer than [`MIN_COMPLETED_RUNS`] completed runs is not judged. Runs with
//! no cycle (a program that marked none) measured no release: nothing to
//! advise from. A resource is advised on only where some judged strategy
//! retains above the retention threshold (the median of its runs' last
//! cycles); where none does there is nothing to do.

use serde::Serialize;

use super::{Resource, RunSummary, Summary};
use crate::record::RunStatus;
use crate::stats::spread;
use crate::strategy::{self, ReleaseAction, SleepMode};

/// Completed runs a strategy needs before advice names it (one run that gave
/// back may be luck; three that all did are a pattern).
pub const MIN_COMPLETED_RUNS: u32 = 3;

/// A strategy as advice names it: its runs, its price and its setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pick {
    pub strategy: String,
    /// Completed runs that measured the resource.
    pub runs: u32,
    /// Of those, runs in which at least one cycle retained.
    pub retaining_runs: u32,
    /// Of those, runs in which a load raised the resource by the retention
    /// threshold or more, or a cycle moved it by as much (a sleep that
    /// copies the weights into host memory until the wake): a strategy under
    /// which it never moved (a page cache full before the first load) gave
    /// nothing back.
    pub moved_runs: u32,
    /// Median over its runs of what the last cycle retained (`None`: no run
    /// had a cycle that measured the resource).
    pub retained_bytes: Option<i64>,
    /// Median time of the release step, over every cycle of its completed runs.
    pub release_action_s: Option<f64>,
    /// Median time from the release until the next model is ready, for the
    /// strategies that restart or reload (`None` for the others).
    pub ready_s: Option<f64>,
    /// What to set where the program lives (`None`: a strategy this build
    /// does not know, named in an older record).
    pub setting: Option<String>,
}

impl Pick {
    /// What the strategy costs: its release, and the time until ready again
    /// where it restarts or reloads.
    pub fn price_s(&self) -> f64 {
        self.release_action_s.unwrap_or(0.0) + self.ready_s.unwrap_or(0.0)
    }
}

/// The advice for one resource that retained in some run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceAdvice {
    pub resource: Resource,
    /// The cheapest strategy that gave back in every run, or, when none did,
    /// the one with the fewest retaining runs.
    pub pick: Pick,
    /// Whether `pick` gave back in every completed run.
    pub every_run: bool,
}

/// What the saved results advise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Advice {
    /// Completed runs, none with a cycle (a load and its release): the
    /// program marked none, so no release was measured.
    NothingMeasured { runs: u32 },
    /// No strategy has [`MIN_COMPLETED_RUNS`] completed runs: (strategy,
    /// its completed runs).
    TooFewRuns { strategies: Vec<(String, u32)> },
    /// No judged strategy retains above the retention threshold in any
    /// resource: nothing to do.
    NothingToDo {
        /// The retention threshold (the largest of the summaries').
        threshold_bytes: u64,
        not_judged: Vec<(String, u32)>,
    },
    /// One entry per resource that retained, in the summaries' resource order.
    Resources {
        resources: Vec<ResourceAdvice>,
        /// Strategies left out for too few completed runs.
        not_judged: Vec<(String, u32)>,
    },
}

/// One strategy's completed runs, over every summary that has it.
struct Candidate<'a> {
    name: String,
    runs: Vec<&'a RunSummary>,
    /// Resources some summary marks as context for it (a shared cgroup): not judged.
    context: Vec<Resource>,
    /// The summaries' retention threshold (the largest, where they differ).
    threshold_bytes: u64,
}

/// Advice from one or more summaries; a strategy named in several is one
/// candidate with all its completed runs.
pub fn advise(summaries: &[&Summary]) -> Advice {
    let completed: Vec<&RunSummary> = summaries
        .iter()
        .flat_map(|s| s.runs.iter())
        .filter(|r| r.status == RunStatus::Completed)
        .collect();
    if !completed.is_empty() && completed.iter().all(|r| !has_cycle(r)) {
        return Advice::NothingMeasured {
            runs: completed.len() as u32,
        };
    }
    let threshold_bytes = summaries
        .iter()
        .map(|s| s.retention_threshold_bytes)
        .max()
        .unwrap_or(0);
    let mut resources: Vec<Resource> = Vec::new();
    for r in summaries.iter().flat_map(|s| s.resources.iter()) {
        if !resources.contains(r) {
            resources.push(*r);
        }
    }
    let (judged, short): (Vec<Candidate>, Vec<Candidate>) = candidates(summaries)
        .into_iter()
        .partition(|c| c.runs.len() as u32 >= MIN_COMPLETED_RUNS);
    let not_judged: Vec<(String, u32)> = short
        .iter()
        .map(|c| (c.name.clone(), c.runs.len() as u32))
        .collect();
    if judged.is_empty() {
        return Advice::TooFewRuns {
            strategies: not_judged,
        };
    }
    let out: Vec<ResourceAdvice> = resources
        .iter()
        .filter_map(|&resource| advise_resource(&judged, resource, threshold_bytes))
        .collect();
    if out.is_empty() {
        Advice::NothingToDo {
            threshold_bytes,
            not_judged,
        }
    } else {
        Advice::Resources {
            resources: out,
            not_judged,
        }
    }
}

/// Every strategy of the summaries, once, with its completed runs from all.
fn candidates<'a>(summaries: &[&'a Summary]) -> Vec<Candidate<'a>> {
    let mut candidates: Vec<Candidate> = Vec::new();
    for summary in summaries {
        for s in &summary.strategies {
            let index = match candidates.iter().position(|c| c.name == s.strategy) {
                Some(i) => i,
                None => {
                    candidates.push(Candidate {
                        name: s.strategy.clone(),
                        runs: Vec::new(),
                        context: Vec::new(),
                        threshold_bytes: 0,
                    });
                    candidates.len() - 1
                }
            };
            let c = &mut candidates[index];
            c.threshold_bytes = c.threshold_bytes.max(summary.retention_threshold_bytes);
            c.runs.extend(
                summary
                    .runs
                    .iter()
                    .filter(|r| r.strategy == s.strategy && r.status == RunStatus::Completed),
            );
            c.context.extend(
                s.resources
                    .iter()
                    .filter(|m| m.context.is_some())
                    .map(|m| m.resource),
            );
        }
    }
    candidates
}

/// The advice for one resource among the judged candidates; `None`: no
/// strategy keeps more than the threshold of it.
fn advise_resource(
    judged: &[Candidate],
    resource: Resource,
    threshold_bytes: u64,
) -> Option<ResourceAdvice> {
    // A strategy under which the resource never moved neither retains
    // nor gives back: it is no pick.
    let picks: Vec<Pick> = judged
        .iter()
        .filter_map(|c| pick(c, resource))
        .filter(|p| p.moved_runs > 0 || p.retaining_runs > 0)
        .collect();
    // Nothing to do where no strategy keeps more than the threshold
    // (a cycle of one run above it, the others below, is noise).
    let retains =
        |p: &Pick| p.retaining_runs > 0 && p.retained_bytes > Some(threshold_bytes as i64);
    if !picks.iter().any(retains) {
        return None;
    }
    // The cheapest; at one price (none of them has a release step, as
    // settings of a server's environment), changing nothing (`drop`)
    // where it gives back too, else the one that keeps the least (below
    // the baseline is keeping nothing, not keeping less).
    let kept = |p: &Pick| p.retained_bytes.map(|b| b.max(0));
    let cheapest = |a: &&Pick, b: &&Pick| {
        a.price_s()
            .total_cmp(&b.price_s())
            .then((a.strategy != "drop").cmp(&(b.strategy != "drop")))
            .then(kept(a).cmp(&kept(b)))
    };
    let every = picks
        .iter()
        .filter(|p| p.retaining_runs == 0)
        .min_by(cheapest);
    let (p, every_run) = match every {
        Some(p) => Some((p, true)),
        None => picks
            .iter()
            .min_by(|a, b| {
                a.retaining_runs
                    .cmp(&b.retaining_runs)
                    .then(a.price_s().total_cmp(&b.price_s()))
            })
            .map(|p| (p, false)),
    }?;
    Some(ResourceAdvice {
        resource,
        pick: p.clone(),
        every_run,
    })
}

/// Whether the run measured a cycle (a load and its release) in any resource.
fn has_cycle(run: &RunSummary) -> bool {
    !run.cycles.is_empty() || run.resources.iter().any(|m| !m.cycles.is_empty())
}

/// The candidate as a pick for `resource`; `None` where fewer than
/// [`MIN_COMPLETED_RUNS`] of its runs measured it (a strategy named in two
/// directories may have its runs for this resource in only one), or the
/// resource is only context for it.
fn pick(c: &Candidate, resource: Resource) -> Option<Pick> {
    if c.context.contains(&resource) {
        return None;
    }
    let measured: Vec<_> = c
        .runs
        .iter()
        .filter_map(|r| r.resource(resource))
        .filter(|m| m.not_measured.is_none())
        .collect();
    if (measured.len() as u32) < MIN_COMPLETED_RUNS {
        return None;
    }
    let known = strategy::lookup(&c.name).ok();
    let restarts =
        known.is_some_and(|s| s.release == ReleaseAction::Respawn || s.sleep == SleepMode::Reload);
    let median = |f: &dyn Fn(&super::CycleTimes) -> Option<f64>| {
        spread(
            c.runs
                .iter()
                .flat_map(|r| r.cycles.iter().filter_map(f))
                .collect(),
        )
        .map(|s| s.median)
    };
    Some(Pick {
        strategy: c.name.clone(),
        runs: measured.len() as u32,
        retaining_runs: measured.iter().filter(|m| m.cycles_retaining > 0).count() as u32,
        moved_runs: measured
            .iter()
            .filter(|m| {
                // Loaded above its baseline, or moved within the cycle: a
                // sleep that copies the weights to the host grows the host
                // between the sleep and the wake while awake it is level.
                m.cycles.iter().any(|cycle| {
                    m.baseline_bytes.is_some_and(|base| {
                        cycle.loaded_bytes.saturating_sub(base) >= c.threshold_bytes
                    }) || cycle.after_unload_bytes.abs_diff(cycle.loaded_bytes) >= c.threshold_bytes
                })
            })
            .count() as u32,
        retained_bytes: spread(
            measured
                .iter()
                .filter_map(|m| m.retained_bytes.map(|b| b as f64))
                .collect(),
        )
        .map(|s| s.median.round() as i64),
        release_action_s: median(&|t| t.release_action_s),
        ready_s: if restarts {
            median(&|t| t.ready_s)
        } else {
            None
        },
        setting: known.map(|s| s.setting()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::summarize;
    use crate::record::{fixture, PageCacheInfo};

    /// Two strategies give back in every run at one price (as settings of a
    /// server's environment are: none has a release step) and a third keeps:
    /// the one keeping less is named, whichever was measured first; `drop`,
    /// where it is one of them.
    #[test]
    fn at_one_price_the_strategy_keeping_less_is_named() {
        // 3 runs of each strategy, each cycle keeping its MiB; the host's pick.
        let host_pick = |kept: &[(&str, u64)]| {
            let mut record = fixture::record();
            record.runs.clear();
            for rep in 1..=3 {
                for &(strategy, mib) in kept {
                    let n = record.runs.len() as u32;
                    record
                        .runs
                        .push(fixture::run(n + 1, strategy, rep, &[mib, mib]));
                }
            }
            let summary = summarize(&record);
            let Advice::Resources { resources, .. } = advise(&[&summary]) else {
                panic!("no advice: {:?}", advise(&[&summary]));
            };
            assert_eq!(resources[0].resource, Resource::Host);
            assert!(resources[0].every_run, "{resources:?}");
            resources[0].pick.strategy.clone()
        };
        let kept = [("drop", 64), ("trim-threshold-env", 12), ("jemalloc", 1)];
        assert_eq!(host_pick(&kept), "jemalloc");
        // Where `drop` gives back in every run too, nothing needs changing.
        assert_eq!(
            host_pick(&[("jemalloc", 1), ("drop", 2), ("tcmalloc", 64)]),
            "drop"
        );
    }

    /// Host memory that `drop` keeps and `malloc-trim` gives back, and a page
    /// cache full from the first reading to the last under both (one run
    /// of `drop` starting cold): host advice, none for the page cache, which
    /// no strategy gave back.
    #[test]
    fn a_resource_that_never_moved_under_a_strategy_is_not_given_back_by_it() {
        const MIB: u64 = crate::record::fixture::MIB;
        let mut record = fixture::record();
        record.header.page_cache = Some(PageCacheInfo {
            method: "mincore".into(),
            files: Vec::new(),
            evicted_before_runs: false,
            warmed_before_runs: false,
        });
        for rep in 3..=5 {
            let n = record.runs.len() as u32;
            record
                .runs
                .push(fixture::run(n + 1, "drop", rep, &[2, 60, 60]));
            record
                .runs
                .push(fixture::run(n + 2, "malloc-trim", rep, &[1, 1, 1]));
        }
        for (i, run) in record.runs.iter_mut().enumerate() {
            for e in &mut run.events {
                // The first run starts cold: its baseline edge reads 0.
                let cold = i == 0 && e.edge.cycle == 0;
                let bytes = if cold { 0 } else { 415 * MIB };
                e.readings.set(Resource::PageCache, bytes);
            }
            for s in &mut run.samples {
                s.readings.set(Resource::PageCache, 415 * MIB);
            }
        }
        let summary = summarize(&record);
        let Advice::Resources { resources, .. } = advise(&[&summary]) else {
            panic!("no advice: {:?}", advise(&[&summary]));
        };
        let of = |r: Resource| resources.iter().find(|a| a.resource == r);
        let host = of(Resource::Host).expect("host advice");
        assert_eq!(host.pick.strategy, "malloc-trim");
        assert!(host.every_run);
        // malloc-trim never moved the page cache: it is not said to give it back.
        if let Some(page_cache) = of(Resource::PageCache) {
            assert_ne!(page_cache.pick.strategy, "malloc-trim", "{page_cache:?}");
            assert!(!page_cache.every_run, "{page_cache:?}");
        }
    }
}
