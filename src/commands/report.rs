//! `memrel report`: re-renders every output of a saved results directory from
//! its data on disk, without running anything: runs.json, summary.json,
//! timeline.png, and the comparison files when the directory has them. The
//! raw data, samples.csv and events.csv, is read and never written over.
//!
//! It re-renders into the directory only from complete inputs: a record file
//! missing, cut short or emptied (samples.csv, events.csv: no data rows where
//! runs.json says a run completed and the other file shows it had some;
//! runs.json) or a corrupt
//! summary.json or compare.json leaves every file in the directory as it was
//! and is an error (exit 2) naming the file and the line, before anything is
//! written. What a crash left can still be read on purpose: `--out NEWDIR`
//! writes a repaired copy from the rows before the damage (the salvage of
//! `record::salvage`), with a warning per problem, and never touches DIR.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::ExitStatus;
use crate::cli::ReportArgs;
use crate::export::openmetrics::{self, MetricsState, OwnCost};
use crate::export::{self, console, metrics_http, table, COMPARE_JSON_FILE};
use crate::metrics::comparison::{Comparison, COMPARE_SCHEMA_VERSION};
use crate::metrics::Summary;
use crate::record::allocations::ALLOCATIONS_FILE;
use crate::record::{
    record_file, write_record_file, Record, EVENTS_FILE, RUNS_FILE, SAMPLES_FILE, SUMMARY_FILE,
};
use crate::results::{compare_loaded, load, write_trace, Loaded};

/// `memrel report` as the arguments ask: re-renders, warns of damage found
/// (stderr), prints the table and where the outputs went to `out`.
pub fn run(args: &ReportArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let dir = &args.dir;
    if args.metrics_once || args.metrics.is_some() {
        return metrics(dir, args.metrics.as_deref(), out);
    }
    let (into, trace) = (args.out.as_deref(), args.export_trace.as_deref());
    let outcome = if !dir.join(RUNS_FILE).is_file() && dir.join(COMPARE_JSON_FILE).is_file() {
        report_comparison(dir, into, trace)?
    } else {
        report_run(dir, into, trace)?
    };
    print_outcome(&outcome, out)?;
    Ok(ExitStatus::Success)
}

/// `--metrics-once` (the exposition of the run in `dir` on `out`) or
/// `--metrics LISTEN` (served until memrel is killed; the address bound goes
/// to `out` first): the stepping stone to `memrel watch --metrics`. The
/// record is read and nothing is written.
fn metrics(dir: &Path, listen: Option<&str>, out: &mut dyn Write) -> Result<ExitStatus> {
    let loaded = load(dir)?;
    for d in &loaded.damage {
        eprintln!("memrel: warning: {d}");
    }
    let state = MetricsState::of_record(&loaded.record, &loaded.summary, OwnCost::default());
    let render = || {
        openmetrics::render(&MetricsState {
            own: OwnCost::read(),
            ..state.clone()
        })
    };
    let Some(listen) = listen else {
        write!(out, "{}", render())?;
        return Ok(ExitStatus::Success);
    };
    let listener =
        TcpListener::bind(listen).with_context(|| format!("--metrics {listen}: cannot listen"))?;
    let addr = listener.local_addr()?;
    writeln!(out, "serving http://{addr}{}", metrics_http::PATH)?;
    out.flush()?;
    metrics_http::serve(&listener, &render);
    Ok(ExitStatus::Success)
}

/// The damage found (stderr), the table and where the outputs went (`out`).
fn print_outcome(outcome: &ReportOutcome, out: &mut dyn Write) -> Result<()> {
    for d in &outcome.damage {
        eprintln!("memrel: warning: {d}");
    }
    match (&outcome.comparison, &outcome.summary) {
        (Some(c), _) => write!(out, "{}", table::plain(c))?,
        (None, Some(s)) => {
            write!(out, "{}", console::summary_table(s))?;
            super::output::allocations(out, &outcome.dir)?;
        }
        (None, None) => {}
    }
    writeln!(out, "\nre-rendered: {}", outcome.dir.display())?;
    Ok(())
}

/// What `memrel report` re-rendered.
struct ReportOutcome {
    dir: PathBuf,
    /// The run's summary (absent for a directory of `memrel compare` of saved runs).
    summary: Option<Summary>,
    comparison: Option<Comparison>,
    /// Damage found in the saved files, one line each.
    damage: Vec<String>,
}

/// A run's results directory `dir` re-rendered (into `into`, else in place),
/// with its comparison where `memrel compare --scenario` wrote one.
fn report_run(dir: &Path, into: Option<&Path>, trace: Option<&Path>) -> Result<ReportOutcome> {
    let loaded = load(dir)?;
    let mut damage = loaded.damage.clone();
    damage.extend(corrupt_json(&dir.join(SUMMARY_FILE)));
    let previous = if dir.join(COMPARE_JSON_FILE).is_file() {
        Some(read_comparison(dir)?)
    } else {
        None
    };
    if in_place(dir, into) {
        refuse_damaged(dir, &damage)?;
    }
    let target = match into {
        Some(out) => {
            std::fs::create_dir_all(out).with_context(|| {
                format!(
                    "cannot create {}: pass --out with a writable directory",
                    out.display()
                )
            })?;
            out.to_path_buf()
        }
        None => dir.to_path_buf(),
    };
    write_run_outputs(dir, &target, &loaded)?;
    let Some(previous) = previous else {
        if let Some(path) = trace {
            let c = compare_loaded(std::slice::from_ref(&loaded));
            write_trace(path, &c, &[&loaded.record])?;
        }
        return Ok(ReportOutcome {
            dir: target,
            summary: Some(loaded.summary),
            comparison: None,
            damage,
        });
    };
    // A run made by `memrel compare --scenario`: keep the directory name it
    // was compared under, so compare.json comes out the same.
    let mut sources = [loaded];
    if let Some(first) = previous.first() {
        sources[0].dir = first.clone();
    }
    let c = compare_loaded(&sources);
    let records: Vec<&Record> = sources.iter().map(|l| &l.record).collect();
    export::write_compare_outputs(&target, &c, &records)
        .with_context(|| format!("cannot write the comparison into {}", target.display()))?;
    if let Some(path) = trace {
        write_trace(path, &c, &records)?;
    }
    let [Loaded { summary, .. }] = sources;
    Ok(ReportOutcome {
        dir: target,
        summary: Some(summary),
        comparison: Some(c),
        damage,
    })
}

/// Writes the run's outputs of `dir` into `target`. samples.csv and
/// events.csv are raw data: never written over. In place (from complete
/// inputs only, refused before) they stay as they are; under --out each is
/// copied as it is, or, where it did not read whole, written from the rows
/// salvaged. runs.json is written (a migrated field comes out in its
/// current form), then what is derived from the record.
fn write_run_outputs(dir: &Path, target: &Path, loaded: &Loaded) -> Result<()> {
    save_record_file(dir, target, SAMPLES_FILE, loaded, |record| {
        record.samples_csv()
    })
    .and_then(|()| {
        save_record_file(dir, target, EVENTS_FILE, loaded, |record| {
            record.events_csv()
        })
    })
    .and_then(|()| copy_allocations(dir, target))
    .and_then(|()| loaded.record.save_runs(target))
    .and_then(|()| export::write_derived_run_outputs(target, &loaded.record, &loaded.summary))
    .with_context(|| format!("cannot write the outputs into {}", target.display()))
}

/// allocations.csv (`--trace-allocations`), raw data: copied as it is into
/// another directory, where `dir` has one.
fn copy_allocations(dir: &Path, target: &Path) -> Result<()> {
    let from = dir.join(ALLOCATIONS_FILE);
    if in_place(dir, Some(target)) || !from.is_file() {
        return Ok(());
    }
    let bytes = std::fs::read(&from).with_context(|| format!("cannot read {}", from.display()))?;
    crate::fsutil::write_atomic(&target.join(ALLOCATIONS_FILE), &bytes)
}

/// Whether the outputs would go into `dir` itself (no `--out`, or `--out`
/// naming the same directory).
fn in_place(dir: &Path, out: Option<&Path>) -> bool {
    out.is_none_or(|out| {
        out == dir || std::fs::canonicalize(out).ok() == std::fs::canonicalize(dir).ok()
    })
}

/// The error that refuses to re-render `dir` over its outputs from damaged
/// inputs; nothing has been written when it is returned.
fn refuse_damaged(dir: &Path, problems: &[String]) -> Result<()> {
    if problems.is_empty() {
        return Ok(());
    }
    let mut lines = format!(
        "{} was not re-rendered: its data is incomplete, and re-rendering from it would write over good outputs:",
        dir.display()
    );
    for p in problems {
        lines.push_str(&format!("\n  - {p}"));
    }
    lines.push_str(&format!(
        "\nevery file in {} is left as it was: put the complete file back (from a copy or a baseline), \
         or write what can be read into a new directory with `{}`",
        dir.display(),
        crate::hint::Hint::ReportInto { dir, out: "NEWDIR" }
    ));
    bail!(lines)
}

/// Why the JSON file at `path` cannot be read, if it exists and cannot
/// (cut short, or not JSON at all); `None` when it reads or is absent.
fn corrupt_json(path: &Path) -> Option<String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("cannot read {}: {e}", path.display())),
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v) if v.get("schema_version").is_some() => None,
        Ok(_) => Some(format!(
            "{} is not a memrel summary (it has no schema_version)",
            path.display()
        )),
        Err(e) => Some(format!(
            "{} is corrupt or cut short (line {}, column {}: {e})",
            path.display(),
            e.line(),
            e.column()
        )),
    }
}

fn read_comparison(dir: &Path) -> Result<Vec<PathBuf>> {
    let path = dir.join(COMPARE_JSON_FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    source_dirs(&text).with_context(|| {
        format!(
            "{} is not a compare.json this memrel can read: re-run `memrel compare` to write it again",
            path.display()
        )
    })
}

/// The source directories of a compare.json of any version this memrel knows
/// (1: before metrics per resource; 2: before the release curve; 3: now):
/// only they are needed, the comparison itself is recomputed from their records.
fn source_dirs(text: &str) -> Result<Vec<PathBuf>> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let version = value.get("schema_version").and_then(|v| v.as_u64());
    if !matches!(version, Some(v) if (1..=u64::from(COMPARE_SCHEMA_VERSION)).contains(&v)) {
        bail!(
            "schema version {} is unknown (this memrel reads 1 to {COMPARE_SCHEMA_VERSION})",
            version
                .map(|v| v.to_string())
                .unwrap_or_else(|| "none".into())
        );
    }
    let sources = value
        .get("sources")
        .and_then(|s| s.as_array())
        .context("it has no sources")?;
    sources
        .iter()
        .map(|s| {
            s.get("dir")
                .and_then(|d| d.as_str())
                .map(PathBuf::from)
                .context("a source has no dir")
        })
        .collect()
}

/// A directory written by `memrel compare DIR...`: compare the same sources again.
fn report_comparison(
    dir: &Path,
    out: Option<&Path>,
    trace: Option<&Path>,
) -> Result<ReportOutcome> {
    let dirs = read_comparison(dir)?;
    for d in &dirs {
        if !d.join(RUNS_FILE).is_file() {
            bail!(
                "{} compares {}, which has no {RUNS_FILE} here: run `memrel report` from the directory \
                 the comparison was made in, or run `memrel compare` again",
                dir.join(COMPARE_JSON_FILE).display(),
                d.display()
            );
        }
    }
    let sources = dirs.iter().map(|d| load(d)).collect::<Result<Vec<_>>>()?;
    let damage: Vec<String> = sources
        .iter()
        .flat_map(|s| s.damage.iter().cloned())
        .collect();
    if in_place(dir, out) {
        refuse_damaged(dir, &damage)?;
    }
    let comparison = compare_loaded(&sources);
    let records: Vec<&Record> = sources.iter().map(|l| &l.record).collect();
    let target = out.unwrap_or(dir);
    std::fs::create_dir_all(target).with_context(|| {
        format!(
            "cannot create {}: pass --out with a writable directory",
            target.display()
        )
    })?;
    export::write_compare_outputs(target, &comparison, &records)
        .with_context(|| format!("cannot write the comparison into {}", target.display()))?;
    if let Some(path) = trace {
        write_trace(path, &comparison, &records)?;
    }
    Ok(ReportOutcome {
        dir: target.to_path_buf(),
        summary: None,
        comparison: Some(comparison),
        damage,
    })
}

/// Puts the record file `name` (samples.csv or events.csv) of `dir` into
/// `target`: nothing where they are one directory (it is never written
/// over), a copy of its bytes (plain or gzipped, as it is kept) where it
/// read whole, else the rows salvaged from it, made by `rows` (but for the
/// samples of a long run kept as an envelope: a bounded picture, not the
/// file's rows, so that file is copied as it is).
fn save_record_file(
    dir: &Path,
    target: &Path,
    name: &'static str,
    loaded: &Loaded,
    rows: impl FnOnce(&Record) -> Result<Vec<u8>>,
) -> Result<()> {
    let from = record_file(dir, name);
    let to = target.join(from.file_name().unwrap_or(name.as_ref()));
    if std::fs::canonicalize(&from).ok() == std::fs::canonicalize(&to).ok() {
        return Ok(());
    }
    let enveloped = loaded.record.runs.iter().any(|r| r.decimation.is_some());
    if loaded.damaged.contains(&name) && !(enveloped && name == SAMPLES_FILE) {
        let record = loaded.record.at_file_precision();
        return write_record_file(target, name, &rows(&record)?);
    }
    std::fs::copy(&from, &to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_json_of_both_versions_gives_its_sources() {
        let v1 = r#"{"schema_version": 1, "scenario": "x", "sources": [{"dir": "a/b", "label": "A"}], "rows": []}"#;
        assert_eq!(source_dirs(v1).unwrap(), [PathBuf::from("a/b")]);
        let v9 = r#"{"schema_version": 9, "sources": []}"#;
        let e = source_dirs(v9).unwrap_err().to_string();
        assert!(e.contains("schema version 9 is unknown"), "{e}");
    }
}
