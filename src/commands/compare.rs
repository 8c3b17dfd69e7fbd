//! `memrel compare`: strategies side by side. With `--scenario` it runs the
//! matrix through `commands::run` (a fresh worker per strategy × repetition)
//! and writes the comparison into that run's results directory; with saved
//! results directories it runs nothing and writes into `<OUT>/compare/<stamp>`.
//!
//! Loads, summarizes and hands over to the exporters; it computes no number
//! itself and never rewrites the saved directories it compares.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::run::{create_out_dir, execute, RunOptions};
use crate::cli::{CompareArgs, OutputArgs, RunArgs};
use crate::export;
use crate::fsutil::write_atomic;
use crate::metrics::comparison::{compare, Comparison, Input};
use crate::metrics::{self, Summary};
use crate::record::{Record, RunStatus, RUNS_FILE};

/// What a comparison produced.
pub struct CompareOutcome {
    /// Where compare.* and retained.png were written.
    pub dir: PathBuf,
    pub comparison: Comparison,
    /// Runs of this invocation that did not complete (their data is kept and
    /// marked); always 0 when saved directories are compared.
    pub failed_runs: usize,
}

/// A results directory as read from disk.
pub struct Loaded {
    pub dir: PathBuf,
    pub record: Record,
    pub summary: Summary,
    /// Problems found while reading (see `Record::load_partial`).
    pub damage: Vec<String>,
}

/// Runs `memrel compare` as the arguments ask.
pub fn execute_args(args: &CompareArgs, command_line: Vec<String>) -> Result<CompareOutcome> {
    check_output_args(&args.output)?;
    match &args.scenario {
        Some(scenario) => run_matrix(args, scenario, command_line),
        None => compare_saved(
            &args.dirs,
            &args.output.out,
            args.output.export_trace.as_deref(),
        ),
    }
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

fn run_matrix(
    args: &CompareArgs,
    scenario: &str,
    command_line: Vec<String>,
) -> Result<CompareOutcome> {
    let run_args = RunArgs {
        scenario: scenario.to_string(),
        strategies: args.strategies.clone(),
        overrides: args.overrides.clone(),
        output: args.output.clone(),
        wide: args.wide,
    };
    let options = RunOptions::from_args(&run_args)?;
    let (dir, _) = execute(&options, command_line)?;
    // Everything below reads the saved files, exactly as a later compare would.
    let loaded = load(&dir)?;
    let sources = [loaded];
    let comparison = compare_loaded(&sources);
    let records: Vec<&Record> = sources.iter().map(|l| &l.record).collect();
    export::write_compare_outputs(&dir, &comparison, &records)
        .with_context(|| format!("cannot write the comparison into {}", dir.display()))?;
    if let Some(path) = &args.output.export_trace {
        write_trace(path, &comparison, &records)?;
    }
    Ok(CompareOutcome {
        dir,
        failed_runs: failed_runs(&records),
        comparison,
    })
}

/// Compares saved results directories without running anything.
pub fn compare_saved(
    dirs: &[PathBuf],
    out_root: &Path,
    trace: Option<&Path>,
) -> Result<CompareOutcome> {
    if dirs.is_empty() {
        bail!("name at least one results directory, or pass --scenario to run one");
    }
    let sources = dirs.iter().map(|d| load(d)).collect::<Result<Vec<_>>>()?;
    let comparison = compare_loaded(&sources);
    let records: Vec<&Record> = sources.iter().map(|l| &l.record).collect();
    let dir = create_out_dir(out_root, "compare")?;
    export::write_compare_outputs(&dir, &comparison, &records)
        .with_context(|| format!("cannot write the comparison into {}", dir.display()))?;
    if let Some(path) = trace {
        write_trace(path, &comparison, &records)?;
    }
    // Failed runs of earlier invocations are marked in the comparison, not an error now.
    Ok(CompareOutcome {
        dir,
        failed_runs: 0,
        comparison,
    })
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
    let (record, damage) = Record::load_partial(dir)?;
    let summary = metrics::summarize(&record);
    Ok(Loaded {
        dir: dir.to_path_buf(),
        record,
        summary,
        damage,
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

fn failed_runs(records: &[&Record]) -> usize {
    records
        .iter()
        .flat_map(|r| r.runs.iter())
        .filter(|r| r.meta.status != RunStatus::Completed)
        .count()
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
