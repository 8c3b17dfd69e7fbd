//! `memrel compare`: strategies side by side. With `--scenario` it runs the
//! matrix through the [`Plan`] (a fresh worker per strategy × repetition)
//! and writes the comparison into that run's results directory; with saved
//! results directories it runs nothing and writes into `<OUT>/compare/<stamp>`.
//!
//! Saved directories from several machines are compared as (machine,
//! strategy) rows; two directories that claim one `machine` key but differ
//! in its facts are an error naming both (`machine::clashes`).
//!
//! Loads, summarizes and hands over to the exporters; it computes no number
//! itself and never rewrites the saved directories it compares.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{output, ExitStatus};
use crate::cli::CompareArgs;
use crate::export::{self, table};
use crate::machine::{clashes, Keyed};
use crate::metrics::comparison::Comparison;
use crate::metrics::measured::Measured;
use crate::metrics::Summary;
use crate::plan::Plan;
use crate::record::{Header, Record, RunStatus};
use crate::results::{
    check_output_args, compare_loaded, compare_measured, create_out_dir, load, write_trace,
};
use crate::scenario;

/// What a comparison produced.
pub struct CompareOutcome {
    /// Where compare.* and retained.png were written.
    pub dir: PathBuf,
    pub comparison: Comparison,
    /// Runs of this invocation that did not complete (their data is kept and
    /// marked); always 0 when saved directories are compared.
    pub failed_runs: usize,
    /// Each source's summary, for the advice.
    pub summaries: Vec<Summary>,
    /// Each source's record header, for the advice on drives.
    pub headers: Vec<Header>,
    /// The runs this invocation made (`--scenario`), what `--save-baseline`
    /// saves; `None` when saved directories are compared.
    pub measured: Option<Measured>,
}

/// `memrel compare` as the arguments ask: compares, prints the table and
/// where the results went to `out`, and says how this invocation's runs ended.
pub fn run(args: &CompareArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let outcome = execute(args)?;
    write!(
        out,
        "{}",
        table::plain_as(&outcome.comparison, output::view(args.console))
    )?;
    let summaries: Vec<&Summary> = outcome.summaries.iter().collect();
    let headers: Vec<&Header> = outcome.headers.iter().collect();
    output::advise(out, &summaries, &headers, &[])?;
    let runs: u32 = outcome.comparison.rows.iter().map(|r| r.summary.runs).sum();
    // The trace, when asked for, was written with the comparison.
    let trace_written = |_: &Path| Ok(());
    output::finish(
        out,
        (&outcome.dir, outcome.measured.as_ref()),
        &args.output,
        &trace_written,
        (outcome.failed_runs, runs as usize),
    )
}

/// Runs or loads, compares and writes the comparison.
fn execute(args: &CompareArgs) -> Result<CompareOutcome> {
    check_output_args(&args.output)?;
    match &args.scenario {
        Some(scenario) => run_matrix(args, scenario),
        None => compare_saved(
            &args.dirs,
            &args.output.out,
            args.output.export_trace.as_deref(),
        ),
    }
}

fn run_matrix(args: &CompareArgs, scenario: &str) -> Result<CompareOutcome> {
    let plan = Plan::new(
        scenario::load(scenario)?,
        &args.strategies,
        &(&args.overrides).into(),
        &args.output.out,
    )?;
    let measured = plan.execute(crate::plan::command_line())?;
    // The runs as written, compared as a later compare of the directory
    // would compare them.
    let comparison = compare_measured(&measured);
    let records = [&measured.record];
    let dir = measured.dir.clone();
    export::write_compare_outputs(&dir, &comparison, &records)
        .with_context(|| format!("cannot write the comparison into {}", dir.display()))?;
    if let Some(path) = &args.output.export_trace {
        write_trace(path, &comparison, &records)?;
    }
    Ok(CompareOutcome {
        dir,
        failed_runs: failed_runs(&records),
        comparison,
        headers: vec![measured.record.header.clone()],
        summaries: vec![measured.summary.clone()],
        measured: Some(measured),
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
    let keyed: Vec<Keyed> = sources
        .iter()
        .map(|l| Keyed {
            who: l.dir.display().to_string(),
            key: crate::machine::key(&l.record.header.host),
            host: &l.record.header.host,
        })
        .collect();
    let clashes = clashes(&keyed);
    if !clashes.is_empty() {
        bail!("{}", clashes.join("\n"));
    }
    let mut comparison = compare_loaded(&sources);
    comparison.warnings.extend(same_directories(&comparison));
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
        headers: sources.iter().map(|l| l.record.header.clone()).collect(),
        summaries: sources.into_iter().map(|l| l.summary).collect(),
        measured: None,
    })
}

/// A warning for each source that is a directory an earlier source already
/// named (`A` and `./A/`, or a link to it): its rows are the same runs twice.
fn same_directories(c: &Comparison) -> Vec<String> {
    let real: Vec<Option<PathBuf>> = c
        .sources
        .iter()
        .map(|s| std::fs::canonicalize(&s.dir).ok())
        .collect();
    let mut out = Vec::new();
    for (i, s) in c.sources.iter().enumerate() {
        let same = (0..i).find(|&j| real[j].is_some() && real[j] == real[i]);
        if let Some(j) = same {
            let first = &c.sources[j];
            out.push(format!(
                "{} ({}) is the same directory as {} ({}): its rows are the same runs twice",
                s.label, s.dir, first.label, first.dir
            ));
        }
    }
    out
}

fn failed_runs(records: &[&Record]) -> usize {
    records
        .iter()
        .flat_map(|r| r.runs.iter())
        .filter(|r| r.meta.status != RunStatus::Completed)
        .count()
}
