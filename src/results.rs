//! Results directories: making a new one (never reusing a name), reading one
//! back (salvaging what a crash left: `report`, `compare` and `check` read
//! saved results), comparing what was read or just measured, and writing a
//! Chrome trace of it. Used by every command that reads or writes results,
//! so each of these lives in one place.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cli::OutputArgs;
use crate::export;
use crate::fsutil::{now_unix_s, utc_stamp, write_atomic};
use crate::metrics::comparison::{compare, Comparison, Input};
use crate::metrics::measured::Measured;
use crate::metrics::{self, Summary};
use crate::record::{Record, RUNS_FILE};

/// A results directory as read from disk.
pub struct Loaded {
    pub dir: PathBuf,
    pub record: Record,
    pub summary: Summary,
    /// Problems found while reading (see `Record::salvage`).
    pub damage: Vec<String>,
    /// The record files that did not read whole (`Salvaged::damaged`).
    pub damaged: Vec<&'static str>,
}

/// `--dir` (made, or empty: results are never written over others), else
/// a new `<root>/<name>/<timestamp>` (`attach`, `drive`).
pub fn results_dir(dir: Option<&Path>, root: &Path, name: &str) -> Result<PathBuf> {
    let Some(dir) = dir else {
        return create_out_dir(root, name);
    };
    let empty = std::fs::read_dir(dir).is_ok_and(|mut e| e.next().is_none());
    if dir.exists() && !empty {
        bail!(
            "--dir {}: not an empty directory: name a new one (results are never written over others)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--dir {}: cannot create it", dir.display()))?;
    Ok(dir.to_path_buf())
}

/// A new, never-reused directory `<root>/<scenario>/<UTC timestamp>[-N]`.
pub fn create_out_dir(root: &Path, scenario: &str) -> Result<PathBuf> {
    let parent = crate::fsutil::join_name(root, "scenario", scenario)?;
    std::fs::create_dir_all(&parent).with_context(|| {
        format!(
            "cannot create {}: pass --out with a writable directory",
            parent.display()
        )
    })?;
    let stamp = utc_stamp(now_unix_s());
    for n in 0..1000 {
        let name = if n == 0 {
            stamp.clone()
        } else {
            format!("{stamp}-{n}")
        };
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    bail!(
        "cannot find a free results directory under {}",
        parent.display()
    )
}

/// The comparison of loaded directories, in the order given.
pub fn compare_loaded(sources: &[Loaded]) -> Comparison {
    let inputs: Vec<Input> = sources
        .iter()
        .map(|l| Input {
            dir: l.dir.display().to_string(),
            header: &l.record.header,
            summary: &l.summary,
            damage: l.damage.clone(),
        })
        .collect();
    compare(&inputs)
}

/// Reads one results directory, salvaging what a crash or a cut-short file left.
pub fn load(dir: &Path) -> Result<Loaded> {
    if !dir.join(RUNS_FILE).is_file() && dir.is_dir() {
        let inside = result_dirs_inside(dir);
        if let Some(newest) = inside.last() {
            bail!(
                "{} is not a results directory but holds {} of them: name one, e.g. {}",
                dir.display(),
                inside.len(),
                newest.display()
            );
        }
    }
    let salvaged = Record::salvage(dir)?;
    crate::strategy::custom::define_kept(&salvaged.record.header.scenario_toml).map_err(|e| {
        anyhow::anyhow!(
            "{}: the [[strategy]] tables its scenario kept: {e}; compare results whose \
             user-defined strategies of one name are the same",
            dir.display()
        )
    })?;
    let summary = metrics::summarize(&salvaged.record);
    Ok(Loaded {
        dir: dir.to_path_buf(),
        record: salvaged.record,
        summary,
        damage: salvaged.damage,
        damaged: salvaged.damaged,
    })
}

/// Subdirectories of `dir` that hold a runs.json, sorted by name (oldest stamp first).
fn result_dirs_inside(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join(RUNS_FILE).is_file())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Refuses a trace path whose directory does not exist, before anything runs.
pub fn check_trace_path(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            bail!(
                "--export-trace {}: directory {} does not exist: create it or pick another path",
                path.display(),
                parent.display()
            );
        }
    }
    Ok(())
}

/// Writes the Chrome trace of every run of `records` to `path`.
pub fn write_trace(path: &Path, comparison: &Comparison, records: &[&Record]) -> Result<()> {
    check_trace_path(path)?;
    let labelled: Vec<(&str, &Record)> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                comparison
                    .sources
                    .get(i)
                    .map(|s| s.label.as_str())
                    .unwrap_or(""),
                *r,
            )
        })
        .collect();
    let bytes = export::trace::trace_json(&labelled)?;
    write_atomic(path, &bytes).with_context(|| format!("--export-trace {}", path.display()))
}

/// The comparison of one measurement just made (its record as written: no
/// damage), as `compare_loaded` makes it of the same directory read back.
pub fn compare_measured(measured: &Measured) -> Comparison {
    compare(&[Input {
        dir: measured.dir.display().to_string(),
        header: &measured.record.header,
        summary: &measured.summary,
        damage: Vec::new(),
    }])
}

/// Writes the Chrome trace of a measurement just made (`--export-trace` of
/// run, exec, attach and drive).
pub fn export_trace(measured: &Measured, path: &Path) -> Result<()> {
    let c = compare_measured(measured);
    write_trace(path, &c, &[&measured.record])
}

/// Checks the output options before anything runs, so that a bad trace path
/// or baseline name does not cost a whole matrix of runs.
pub fn check_output_args(output: &OutputArgs) -> Result<()> {
    if let Some(path) = &output.export_trace {
        check_trace_path(path)?;
    }
    if let Some(name) = &output.save_baseline {
        crate::baseline::validate_name(name).context("--save-baseline")?;
    }
    Ok(())
}
