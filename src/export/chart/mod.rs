//! The PNG charts: one file per chart (timeline, compare, retained, release,
//! why), the frame they share (frame.rs, its cycle axis cycles.rs), their colours (palette.rs), the PNG
//! writer (png.rs) and min/max decimation (decimate.rs). They draw what
//! `metrics` computed; they compute no metric.

pub mod compare;
pub mod cycles;
pub mod decimate;
pub mod frame;
pub mod palette;
pub mod png;
pub mod release;
pub mod retained;
pub mod timeline;
pub mod why;

use crate::metrics::comparison::{Comparison, Row};
use crate::metrics::ResourceFacts;
use crate::metrics::{Resource, ResourceSummary, Summary};
use crate::record::{Record, RunRecord, RunStatus};

/// The run drawn for each strategy of `summary`: its representative run (see
/// `StrategySummary::representative_run`), else its first completed run, else its first.
pub fn drawn_runs<'a>(record: &'a Record, summary: &Summary) -> Vec<&'a RunRecord> {
    summary
        .strategies
        .iter()
        .filter_map(|s| drawn_run(record, &s.strategy, s.representative_run))
        .collect()
}

/// The run drawn for one strategy (see [`drawn_runs`]).
pub fn drawn_run<'a>(
    record: &'a Record,
    strategy: &str,
    representative: Option<u32>,
) -> Option<&'a RunRecord> {
    let of = || {
        record
            .runs
            .iter()
            .filter(move |r| r.meta.strategy == strategy)
    };
    representative
        .and_then(|n| of().find(|r| r.meta.run == n))
        .or_else(|| of().find(|r| r.meta.status == RunStatus::Completed))
        .or_else(|| of().next())
}

/// The resources of `comparison` that no row measured, each with why, and
/// those some row measured, in the comparison's order (lead first).
pub fn resources(comparison: &Comparison) -> (Vec<(Resource, String)>, Vec<Resource>) {
    let mut missing = Vec::new();
    let mut measured = Vec::new();
    for &r in &comparison.resources {
        match not_measured(comparison, r) {
            Some(why) => missing.push((r, why)),
            None => measured.push(r),
        }
    }
    (missing, measured)
}

pub fn measured_in(row: &Row, r: Resource) -> Option<&ResourceSummary> {
    row.summary.resource(r).filter(|s| s.not_measured.is_none())
}

/// Why no row of `comparison` measured `r`; `None` when one did.
fn not_measured(comparison: &Comparison, r: Resource) -> Option<String> {
    if comparison.rows.is_empty()
        || comparison
            .rows
            .iter()
            .any(|row| measured_in(row, r).is_some())
    {
        return None;
    }
    Some(
        comparison
            .rows
            .iter()
            .find_map(|row| row.summary.resource(r)?.not_measured.clone())
            .unwrap_or_else(|| format!("{} not measured", r.quantity())),
    )
}

/// The header's note on a comparison of several sources: the even-numbered
/// ones (B, D, …) are drawn dashed.
pub fn dashed_sources(comparison: &Comparison) -> &'static str {
    if comparison.sources.len() > 1 {
        " · dashed: source B (and D, …)"
    } else {
        ""
    }
}

/// A chart's panels, notes first: one `note(resource, why)` per resource no
/// row of `comparison` measured (a GPU user must see at once that VRAM is
/// missing), then `drawn(measured)`, the chart's own panels of the measured
/// resources in the comparison's order (lead first).
pub fn notes_first<P>(
    comparison: &Comparison,
    note: impl Fn(Resource, String) -> P,
    drawn: impl FnOnce(Vec<Resource>) -> Vec<P>,
) -> Vec<P> {
    let (missing, measured) = resources(comparison);
    let mut panels: Vec<P> = missing.into_iter().map(|(r, why)| note(r, why)).collect();
    panels.extend(drawn(measured));
    panels
}
