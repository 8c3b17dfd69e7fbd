//! Which columns a strategy table has, per layout, and what their headers
//! say. The memory metrics, their names and units come from `export::fields`
//! (shared with compare.csv); this module only chooses and orders them.
//!
//! Chooses columns; reads no numbers and formats no cells (`cells`).

use super::super::fields::{names_of, table_metrics, Names};
use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::Resource;
use crate::metrics::ResourceFacts;

/// The width the compact console layout must fit in.
pub const COMPACT_MAX_CHARS: usize = 100;

/// Which columns a table has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The console default, at most [`COMPACT_MAX_CHARS`] wide: strategy, runs;
    /// the lead resource's baseline, after release, retained (range over
    /// runs), released and retaining cycles; every other resource's retained;
    /// checks.
    Compact,
    /// compare.md: every column of the lead resource, the others' peak and
    /// retained, and the times (load, forward, forward vs ref).
    Markdown,
    /// `--wide`: every column of every resource, the times and the checks.
    Wide,
}

impl Layout {
    /// The console layout `--wide` asks for.
    pub fn console(wide: bool) -> Layout {
        if wide {
            Layout::Wide
        } else {
            Layout::Compact
        }
    }
}

/// How much the compact layout gives up to fit [`COMPACT_MAX_CHARS`], in
/// turn: nothing, the retained ranges, then also the lead's "after release"
/// (baseline + retained) and the long resource names over the columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fit {
    Full,
    NoRanges,
    Slim,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Column {
    Strategy,
    /// The row's `machine` key (only in tables that span several machines).
    Machine,
    Runs,
    /// A memory metric of a resource; `range`: retained adds its range over
    /// the runs (when there are several).
    Memory {
        resource: Resource,
        metric: MemoryMetric,
        range: bool,
    },
    LoadTime,
    ForwardTime,
    ForwardVsRef,
    ReleaseAction,
    /// The release step plus the next cycle's first load and forward.
    Ready,
    Checks,
}

/// The columns of `layout`; `resources` lead first; `fit` what the compact
/// layout leaves out to fit its width (the others always have everything).
pub(super) fn columns(
    layout: Layout,
    resources: &[Resource],
    relative: bool,
    fit: Fit,
) -> Vec<Column> {
    let ranges = fit == Fit::Full;
    let mut out = vec![Column::Strategy, Column::Runs];
    let Some((&lead, others)) = resources.split_first() else {
        return out;
    };
    let memory = |resource: Resource, metrics: &[MemoryMetric], range: bool| -> Vec<Column> {
        metrics
            .iter()
            .map(|&metric| Column::Memory {
                resource,
                metric,
                range,
            })
            .collect()
    };
    match layout {
        Layout::Compact => {
            let lead_metrics: Vec<MemoryMetric> = [
                MemoryMetric::Baseline,
                MemoryMetric::AfterRelease,
                MemoryMetric::Retained,
                MemoryMetric::ReleasedFraction,
                MemoryMetric::RetainingCycles,
            ]
            .into_iter()
            .filter(|m| fit != Fit::Slim || *m != MemoryMetric::AfterRelease)
            .collect();
            out.extend(memory(lead, &lead_metrics, ranges));
            for &r in others {
                // The page cache's story is what stays cached after the unload.
                let shown = if r.look().cache {
                    MemoryMetric::AfterUnload
                } else {
                    MemoryMetric::Retained
                };
                out.extend(memory(r, &[shown], false));
            }
            out.push(Column::Checks);
        }
        Layout::Markdown => {
            let lead_metrics: Vec<MemoryMetric> = table_metrics(lead)
                .into_iter()
                .filter(|m| *m != MemoryMetric::AfterUnload)
                .collect();
            out.extend(memory(lead, &lead_metrics, true));
            for &r in others {
                let shown: &[MemoryMetric] = if r.look().cache {
                    &[MemoryMetric::AfterUnload, MemoryMetric::AfterRelease]
                } else {
                    &[MemoryMetric::Peak, MemoryMetric::Retained]
                };
                out.extend(memory(r, shown, true));
            }
            out.extend([Column::LoadTime, Column::ForwardTime]);
            if relative {
                out.push(Column::ForwardVsRef);
            }
            out.extend([Column::ReleaseAction, Column::Ready]);
        }
        Layout::Wide => {
            for &r in resources {
                out.extend(memory(r, &table_metrics(r), true));
            }
            out.extend([Column::LoadTime, Column::ForwardTime]);
            if relative {
                out.push(Column::ForwardVsRef);
            }
            out.extend([Column::ReleaseAction, Column::Ready, Column::Checks]);
        }
    }
    out
}

/// The console header, the Markdown header without the resource, the unit
/// (the timing columns are in ms, from seconds).
pub(super) fn names(column: Column) -> Names {
    let plain = |console, markdown, unit: &'static str| Names {
        console,
        markdown,
        unit,
        scale: if unit == "ms" { 1e3 } else { 1.0 },
    };
    match column {
        Column::Strategy => plain("strategy", "strategy", ""),
        Column::Machine => plain("machine", "machine", ""),
        Column::Runs => plain("runs", "runs", ""),
        Column::LoadTime => plain("load ms", "load", "ms"),
        Column::ForwardTime => plain("forward ms", "forward", "ms"),
        Column::ForwardVsRef => plain("vs ref", "forward vs ref", ""),
        Column::ReleaseAction => plain("release ms", "release action", "ms"),
        Column::Ready => plain("ready ms", "release → next ready", "ms"),
        Column::Checks => plain("checks", "checks", ""),
        Column::Memory { metric, .. } => names_of(metric),
    }
}

/// How Markdown headers name a resource: `VRAM` / `RSS`, or the full label
/// (`VRAM cuda:1`) when several devices would otherwise share a name.
pub(super) fn prefix(resource: Resource, resources: &[Resource]) -> String {
    if resources.iter().filter(|r| r.is_device()).count() > 1 {
        resource.label()
    } else {
        resource.quantity().to_string()
    }
}
