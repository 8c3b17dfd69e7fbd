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
pub const WHY_PNG_FILE: &str = "why.png";

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
/// peaks.csv, timeline.png and why.png (see [`write_why`]) (the record's own files are the record's to
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
    write_why(dir, &chart::why::WhyInput::of_summary(summary))
}

/// why.png where some strategy's retained memory is split by mechanism;
/// where none is, no why.png, and one left in `dir` from before is removed
/// (`memrel report` re-renders into the directory it reads: a chart the
/// record does not back must not stay).
fn write_why(dir: &Path, input: &chart::why::WhyInput) -> Result<()> {
    let path = dir.join(WHY_PNG_FILE);
    if !chart::why::write_why_chart(input, &path)? {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(anyhow::Error::new(e)
                    .context(format!("cannot remove the stale {}", path.display())));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes compare.csv, compare.json, compare.md, compare.png, retained.png,
/// release.png and why.png (see [`write_why`]) into `dir`; `records[i]` is source `i` of `comparison`.
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
    write_why(dir, &chart::why::WhyInput::of_comparison(comparison))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_without_a_split_writes_no_why_png_and_removes_a_stale_one() {
        let record = crate::record::fixture::record();
        let summary = crate::metrics::summarize(&record);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(WHY_PNG_FILE), b"stale").unwrap();
        write_derived_run_outputs(dir.path(), &record, &summary).unwrap();
        assert!(!dir.path().join(WHY_PNG_FILE).exists());
        assert!(dir.path().join(TIMELINE_FILE).is_file());
    }
}
