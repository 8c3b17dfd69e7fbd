//! Exporters: turn a record, its summary or a comparison into files and text.
//! They format; they compute nothing (all numbers come from `metrics`).
//!
//! Every file is written whole or not at all (`fsutil::write_atomic`, or a
//! temporary PNG renamed into place).

pub mod advice;
pub mod allocations;
pub mod chart;
pub mod compare_files;
pub mod console;
mod fields;
pub mod glance;
pub mod markdown;
pub mod metrics_http;
pub mod openmetrics;
pub mod peaks;
pub mod sleep;
pub mod table;
pub mod trace;
pub mod verdict;
pub mod why;

use std::path::Path;

use anyhow::Result;

use crate::fsutil::write_atomic;
use crate::metrics::comparison::Comparison;
use crate::metrics::Summary;
use crate::record::{Record, SUMMARY_FILE};

pub const TIMELINE_FILE: &str = "timeline.png";
pub const COMPARE_CSV_FILE: &str = "compare.csv";
pub const COMPARE_JSON_FILE: &str = "compare.json";
pub const COMPARE_MD_FILE: &str = "compare.md";
pub const COMPARE_PNG_FILE: &str = "compare.png";
pub const RETAINED_PNG_FILE: &str = "retained.png";
pub const RELEASE_PNG_FILE: &str = "release.png";

/// A CSV of `header` and the rows `write` gives, or `None` where there is
/// nothing to write (`any` false): the one frame of the optional CSVs
/// (`peaks.csv`, `sleep.csv`).
pub(crate) fn optional_csv(
    any: bool,
    header: &[&str],
    write: impl FnOnce(&mut ::csv::Writer<Vec<u8>>) -> Result<()>,
) -> Result<Option<Vec<u8>>> {
    if !any {
        return Ok(None);
    }
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record(header)?;
    write(&mut w)?;
    Ok(Some(w.into_inner()?))
}

/// `summary.json`, pretty-printed.
pub fn summary_json(summary: &Summary) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(summary)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// What a run's record derives, each atomically: summary.json, sleep.csv,
/// peaks.csv and timeline.png (the record's own files are the record's to
/// write; a record read back from damaged files must not be overwritten
/// with what was salvaged).
pub fn write_derived_run_outputs(dir: &Path, record: &Record, summary: &Summary) -> Result<()> {
    write_atomic(&dir.join(SUMMARY_FILE), &summary_json(summary)?)?;
    if let Some(csv) = sleep::csv(summary)? {
        write_atomic(&dir.join(sleep::SLEEP_CSV_FILE), &csv)?;
    }
    if let Some(csv) = peaks::csv(summary)? {
        write_atomic(&dir.join(peaks::PEAKS_CSV_FILE), &csv)?;
    }
    chart::timeline::write_timeline(record, summary, &dir.join(TIMELINE_FILE))?;
    Ok(())
}

/// Writes compare.csv, compare.json, compare.md, compare.png, retained.png and
/// release.png into `dir`; `records[i]` is source `i` of `comparison`.
pub fn write_compare_outputs(
    dir: &Path,
    comparison: &Comparison,
    records: &[&Record],
) -> Result<()> {
    write_atomic(
        &dir.join(COMPARE_CSV_FILE),
        &compare_files::comparison_csv(comparison)?,
    )?;
    write_atomic(
        &dir.join(COMPARE_JSON_FILE),
        &compare_files::comparison_json(comparison)?,
    )?;
    write_atomic(
        &dir.join(COMPARE_MD_FILE),
        table::markdown(comparison).as_bytes(),
    )?;
    chart::compare::write_compare_chart(comparison, records, &dir.join(COMPARE_PNG_FILE))?;
    chart::retained::write_retained_chart(comparison, &dir.join(RETAINED_PNG_FILE))?;
    chart::release::write_release_chart(comparison, records, &dir.join(RELEASE_PNG_FILE))?;
    Ok(())
}
