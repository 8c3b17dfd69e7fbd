//! Exporters: turn a record and its summary into files and text. They format;
//! they compute nothing (all numbers come from `metrics`).

pub mod chart;
pub mod console;
pub mod decimate;
pub mod palette;

use std::path::Path;

use anyhow::Result;

use crate::fsutil::write_atomic;
use crate::metrics::Summary;
use crate::record::Record;

pub const SUMMARY_FILE: &str = "summary.json";
pub const TIMELINE_FILE: &str = "timeline.png";

/// `summary.json`, pretty-printed.
pub fn summary_json(summary: &Summary) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(summary)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes every output of a run into `dir`: the record (samples.csv,
/// events.csv, runs.json), summary.json and timeline.png, each atomically.
pub fn write_run_outputs(dir: &Path, record: &Record, summary: &Summary) -> Result<()> {
    record.save(dir)?;
    write_atomic(&dir.join(SUMMARY_FILE), &summary_json(summary)?)?;
    chart::write_timeline(record, &dir.join(TIMELINE_FILE))?;
    Ok(())
}
