//! `memrel check`: the regression gate. Compares saved results (or fresh runs
//! of the baseline's own scenarios) with a named baseline and writes
//! verdict.json and verdict.md. Exit code 1 on a regression or a blown
//! budget; an error (exit 2) when the evidence is broken or the check
//! judged nothing (a gate that could not have failed never passes).
//!
//! Without directories the baseline's scenarios run again first
//! (`plan::rerun`); the judging of the directories is `gate::assess`, which
//! only reads them, and the baseline's entries, which this file opens where
//! `baseline/` keeps them ([`OnDisk`]). This file turns the flags into
//! options, writes the verdict files (always, so a CI job summary shows why
//! even when the check is an error), prints verdict.md and says how the
//! check ended.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::ExitStatus;
use crate::baseline;
use crate::cli;
use crate::export::verdict::{verdict_json, verdict_markdown};
use crate::fsutil::write_atomic;
use crate::gate::{assess, BrokenRuns, CheckOptions, SavedBaseline, VerdictReport};
use crate::plan::rerun::run_baseline_scenarios;
use crate::record::Record;

/// `memrel check` as the command line asks: runs the gate, prints its
/// warnings (stderr) and verdict.md (`out`), and says how it ended.
pub fn run(args: &cli::CheckArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let options = CheckOptions {
        baseline: args.baseline.clone(),
        lenient: args.lenient,
        results_root: args.out.clone(),
        verdict_dir: args.verdict_dir.clone(),
        broken_runs: BrokenRuns::from_flag(args.complete_runs_only),
        any_machine: args.any_machine,
    };
    let (report, dir) = execute(&options, &args.dirs)?;
    for w in &report.warnings {
        eprintln!("memrel: warning: {w}");
    }
    write!(out, "{}", verdict_markdown(&report))?;
    writeln!(out, "\nverdict: {}", dir.join("verdict.json").display())?;
    if let Some(status) = super::interrupted(&dir) {
        return Ok(status);
    }
    Ok(if report.regressed {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// Runs the gate over `dirs` (none: fresh runs of the baseline's scenarios,
/// made first) and writes its verdict files; returns the report and the
/// directory holding them. An error when the evidence is broken, after the
/// verdict files are written.
pub fn execute(options: &CheckOptions, dirs: &[PathBuf]) -> Result<(VerdictReport, PathBuf)> {
    baseline::validate_name(&options.baseline)?;
    let dirs = if dirs.is_empty() {
        run_baseline_scenarios(&options.baseline, &options.results_root)?
    } else {
        dirs.to_vec()
    };
    let saved = OnDisk {
        root: baseline::root(&options.results_root),
        name: &options.baseline,
    };
    let report = assess(options, &saved, &dirs)?;
    let out = match &options.verdict_dir {
        Some(dir) => dir.clone(),
        None => match dirs.as_slice() {
            [one] => one.clone(),
            _ => crate::results::create_out_dir(&options.results_root, "check")?,
        },
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    write_atomic(&out.join("verdict.json"), &verdict_json(&report)?)?;
    write_atomic(
        &out.join("verdict.md"),
        verdict_markdown(&report).as_bytes(),
    )?;
    if !report.errors.is_empty() {
        bail!(
            "the gate cannot judge this evidence (verdict files in {}):\n{}",
            out.display(),
            report.errors.join("\n")
        );
    }
    Ok((report, out))
}

/// A named baseline where `baseline/` keeps it (`<root>/<name>/<scenario>`),
/// as the gate reads it.
struct OnDisk<'a> {
    /// `<results root>/baselines`.
    root: PathBuf,
    name: &'a str,
}

impl SavedBaseline for OnDisk<'_> {
    fn root(&self) -> &Path {
        &self.root
    }

    fn entry(&self, scenario: &str) -> Result<Option<Record>> {
        baseline::load(&self.root, self.name, scenario)
    }

    fn entry_dir(&self, scenario: &str) -> PathBuf {
        self.root.join(self.name).join(scenario)
    }

    fn scenarios(&self) -> Result<Vec<String>> {
        baseline::scenarios(&self.root, self.name)
    }
}
