//! The on-disk layout of a results directory and its schema version: which
//! files make a record, where each one is (plain, or gzipped to keep a
//! committed directory small), and reading runs.json with a clear word for a
//! file another memrel wrote.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::types::{Header, RunMeta};

/// Version of the files in a results directory (samples.csv, events.csv, runs.json, summary.json).
pub const SCHEMA_VERSION: u32 = 1;

pub const SAMPLES_FILE: &str = "samples.csv";
pub const EVENTS_FILE: &str = "events.csv";
pub const RUNS_FILE: &str = "runs.json";
/// The record's summary (`metrics`), written beside it by `export` and kept
/// with it in a baseline.
pub const SUMMARY_FILE: &str = "summary.json";

/// Where the record file `name` (samples.csv or events.csv) of `dir` is:
/// `dir/name` if it exists, else `dir/name.gz` if that exists (a directory
/// kept small, issue 36: `zcat` reads it, and so does memrel), else
/// `dir/name` (missing: reading it says so).
pub fn record_file(dir: &Path, name: &str) -> PathBuf {
    let plain = dir.join(name);
    if plain.exists() {
        return plain;
    }
    let gz = gz_path(&plain);
    if gz.exists() {
        gz
    } else {
        plain
    }
}

/// `path` with `.gz` appended.
pub(super) fn gz_path(path: &Path) -> PathBuf {
    let mut gz = path.as_os_str().to_owned();
    gz.push(".gz");
    PathBuf::from(gz)
}

/// Whether `path` names a gzipped file (it ends in `.gz`).
pub(super) fn is_gz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RunsFile {
    pub header: Header,
    pub runs: Vec<RunMeta>,
}

/// Reads runs.json, checking the schema version before the shape so a file
/// from another memrel gets a clear message rather than a parse error.
pub(super) fn read_runs_file(dir: &Path) -> Result<RunsFile> {
    let runs_path = dir.join(RUNS_FILE);
    let text = std::fs::read_to_string(&runs_path).with_context(|| {
        format!(
            "cannot read {}: is {} a memrel results directory (one made by `memrel run`)?",
            runs_path.display(),
            dir.display()
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not valid JSON (cut short?): re-run the scenario to get a complete results directory",
            runs_path.display()
        )
    })?;
    let header = value.get("header");
    let version = header
        .and_then(|h| h.get("schema_version"))
        .and_then(|v| v.as_u64());
    if version != Some(u64::from(SCHEMA_VERSION)) {
        let written_by = header
            .and_then(|h| h.get("memrel_version"))
            .and_then(|v| v.as_str())
            .unwrap_or("an unknown memrel");
        let found = version
            .map(|v| v.to_string())
            .unwrap_or_else(|| "none".to_string());
        bail!(
            "{} has schema version {found} (written by memrel {written_by}), this memrel reads version \
             {SCHEMA_VERSION}: open it with the memrel that wrote it, or re-run the scenario with this one",
            runs_path.display()
        );
    }
    let mut file: RunsFile = serde_json::from_value(value)
        .with_context(|| format!("{} is not a memrel runs file", runs_path.display()))?;
    for run in &mut file.runs {
        migrate_vram_floor(run);
    }
    Ok(file)
}

/// The calibration check's detail of a CUDA run carries `bare_device_bytes=N`;
/// runs.json written before `vram_floor_bytes` existed has only that.
fn migrate_vram_floor(run: &mut RunMeta) {
    if run.vram_floor_bytes.is_some() {
        return;
    }
    run.vram_floor_bytes = run
        .checks
        .iter()
        .filter(|c| c.name == CALIBRATION_CHECK)
        .find_map(|c| {
            let (_, rest) = c.detail.split_once("bare_device_bytes=")?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        });
}

/// The name of the worker's check that reports the CUDA calibration.
pub const CALIBRATION_CHECK: &str = "cuda context (calibration)";
