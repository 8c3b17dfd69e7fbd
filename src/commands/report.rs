//! `memrel report`: re-renders every output of a saved results directory from
//! its data on disk, without running anything: the record's CSV and JSON
//! (byte-identical to what the run wrote), summary.json, timeline.png, and the
//! comparison files when the directory has them.
//!
//! A directory damaged by a crash is re-rendered from what can be read, but its
//! raw files (samples.csv, events.csv, runs.json) are never overwritten in
//! place with the salvaged part: pass `--out` to get a repaired copy.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::ExitStatus;
use crate::cli::ReportArgs;
use crate::export::{self, console, table, COMPARE_JSON_FILE};
use crate::metrics::comparison::{Comparison, COMPARE_SCHEMA_VERSION};
use crate::metrics::Summary;
use crate::record::{Record, RUNS_FILE, SAMPLES_FILE};
use crate::results::{compare_loaded, load, write_trace, Loaded};

/// `memrel report` as the arguments ask: re-renders, warns of damage found
/// (stderr), prints the table and where the outputs went to `out`.
pub fn run(args: &ReportArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let outcome = execute(args)?;
    for d in &outcome.damage {
        eprintln!("memrel: warning: {d}");
    }
    match (&outcome.comparison, &outcome.summary) {
        (Some(c), _) => write!(out, "{}", table::plain(c))?,
        (None, Some(s)) => write!(out, "{}", console::summary_table(s))?,
        (None, None) => {}
    }
    writeln!(out, "\nre-rendered: {}", outcome.dir.display())?;
    Ok(ExitStatus::Success)
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

fn execute(args: &ReportArgs) -> Result<ReportOutcome> {
    let dir = &args.dir;
    if !dir.join(RUNS_FILE).is_file() && dir.join(COMPARE_JSON_FILE).is_file() {
        return report_comparison(dir, args.out.as_deref(), args.export_trace.as_deref());
    }
    let loaded = load(dir)?;
    let target = match &args.out {
        Some(out) => {
            std::fs::create_dir_all(out).with_context(|| {
                format!(
                    "cannot create {}: pass --out with a writable directory",
                    out.display()
                )
            })?;
            out.clone()
        }
        None => dir.clone(),
    };
    let rewrite_raw = loaded.damage.is_empty() || args.out.is_some();
    let enveloped = loaded.record.runs.iter().any(|r| r.decimation.is_some());
    if rewrite_raw && enveloped {
        // Memory holds an envelope of the samples: samples.csv is copied as it is.
        copy_samples(dir, &target)
            .and_then(|()| loaded.record.save_events_and_runs(&target))
            .and_then(|()| {
                export::write_derived_run_outputs(&target, &loaded.record, &loaded.summary)
            })
    } else if rewrite_raw {
        export::write_run_outputs(&target, &loaded.record, &loaded.summary)
    } else {
        export::write_derived_run_outputs(&target, &loaded.record, &loaded.summary)
    }
    .with_context(|| format!("cannot write the outputs into {}", target.display()))?;

    let mut comparison = None;
    if dir.join(COMPARE_JSON_FILE).is_file() {
        // A run made by `memrel compare --scenario`: keep the directory name it
        // was compared under, so compare.json comes out the same.
        let previous = read_comparison(dir)?;
        let mut sources = [loaded];
        if let Some(first) = previous.first() {
            sources[0].dir = first.clone();
        }
        let c = compare_loaded(&sources);
        let records: Vec<&Record> = sources.iter().map(|l| &l.record).collect();
        export::write_compare_outputs(&target, &c, &records)
            .with_context(|| format!("cannot write the comparison into {}", target.display()))?;
        if let Some(path) = &args.export_trace {
            write_trace(path, &c, &records)?;
        }
        let [Loaded {
            summary, damage, ..
        }] = sources;
        comparison = Some(c);
        return Ok(ReportOutcome {
            dir: target,
            summary: Some(summary),
            comparison,
            damage,
        });
    }
    if let Some(path) = &args.export_trace {
        let c = compare_loaded(std::slice::from_ref(&loaded));
        write_trace(path, &c, &[&loaded.record])?;
    }
    Ok(ReportOutcome {
        dir: target,
        summary: Some(loaded.summary),
        comparison,
        damage: loaded.damage,
    })
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
    let damage = sources
        .iter()
        .flat_map(|s| s.damage.iter().cloned())
        .collect();
    Ok(ReportOutcome {
        dir: target.to_path_buf(),
        summary: None,
        comparison: Some(comparison),
        damage,
    })
}

/// Copies samples.csv from `dir` to `target` unless they are one directory.
fn copy_samples(dir: &Path, target: &Path) -> Result<()> {
    let (from, to) = (dir.join(SAMPLES_FILE), target.join(SAMPLES_FILE));
    let same = std::fs::canonicalize(&from).ok() == std::fs::canonicalize(&to).ok();
    if !same {
        std::fs::copy(&from, &to)
            .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    }
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
