//! One `memrel check` over saved results: loads each record, its scenario
//! and the baseline's entry for it, judges them (`compare`, `budgets`) and
//! gathers the report with every error that makes the check exit 2. It
//! reads results directories and runs nothing (`commands::check` re-runs the
//! baseline's scenarios first when given no directories) and writes
//! nothing; `commands::check` writes the verdict files. Where a named
//! baseline lives on disk is `baseline/`'s business: the gate reads its
//! entries through [`SavedBaseline`], which `commands::check` hands it, so
//! the gate imports nothing of the baseline's storage and the baseline's
//! save can read the gate's rules without a loop.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::coverage::{gaps, Covered};
use super::evidence::{attach_stderr, errors, judged_nothing, BrokenRuns, BASELINE_MIN_RUNS};
use super::program::program_differences;
use super::report::{
    BrokenRun, CoverageGap, MetricVerdict, Side, VerdictReport, VERDICT_SCHEMA_VERSION,
};
use super::{broken_runs, budgets, compare, complete_only, note_left_out};
use crate::metrics;
use crate::record::Record;
use crate::scenario;

/// A named baseline as the gate reads it: its entries by scenario.
pub trait SavedBaseline {
    /// Where the named baselines live (`<results root>/baselines`), for messages.
    fn root(&self) -> &Path;
    /// The saved record of `scenario`; `None` when the baseline has no entry for it.
    fn entry(&self, scenario: &str) -> Result<Option<Record>>;
    /// The directory of the entry of `scenario`, for messages.
    fn entry_dir(&self, scenario: &str) -> PathBuf;
    /// The scenarios the baseline holds.
    fn scenarios(&self) -> Result<Vec<String>>;
}

pub struct CheckOptions {
    pub baseline: String,
    /// Skip scenarios the baseline lacks (with a warning) instead of failing.
    pub lenient: bool,
    /// Results root: baselines live in `<root>/baselines`, new runs in `<root>/<scenario>`.
    pub results_root: PathBuf,
    /// Where verdict.json and verdict.md go.
    pub verdict_dir: Option<PathBuf>,
    /// What to do with runs that failed, timed out, were killed or are incomplete.
    pub broken_runs: BrokenRuns,
    /// Judge a baseline made on another kind of machine (every row of such
    /// a scenario says so) instead of an error.
    pub any_machine: bool,
}

/// Judges every results directory of `dirs` against `baseline` (the one
/// `options` names); returns the report. The report's `errors` say why the
/// evidence cannot be judged.
pub fn assess(
    options: &CheckOptions,
    baseline: &dyn SavedBaseline,
    dirs: &[PathBuf],
) -> Result<VerdictReport> {
    let leave_out = options.broken_runs == BrokenRuns::LeaveOut;
    let mut report = VerdictReport {
        schema_version: VERDICT_SCHEMA_VERSION,
        baseline: options.baseline.clone(),
        regressed: false,
        errors: Vec::new(),
        gaps: Vec::new(),
        broken_runs: Vec::new(),
        complete_runs_only: leave_out,
        verdicts: Vec::new(),
        warnings: Vec::new(),
        machine_differences: Vec::new(),
        other_machines: Vec::new(),
        any_machine: options.any_machine,
    };
    // Where each broken run's record lives, for the error message.
    let mut broken_in: Vec<(BrokenRun, PathBuf)> = Vec::new();
    let mut judged: Vec<String> = Vec::new();
    // Why each scenario skipped under --lenient was not judged.
    let mut skipped: Vec<String> = Vec::new();
    for dir in dirs {
        let record = Record::load(dir)?;
        let name = record.header.scenario.clone();
        judged.push(name.clone());
        let new_scenario = scenario::parse_str(
            &name,
            &record.header.scenario_origin,
            &record.header.scenario_toml,
        )
        .with_context(|| format!("the scenario saved in {}", dir.display()))?;
        let mut new_summary = metrics::summarize(&record);
        let mut left_out = broken_runs(&new_summary, Side::New);
        attach_stderr(&mut left_out, &record);
        broken_in.extend(left_out.iter().map(|b| (b.clone(), dir.clone())));
        if leave_out {
            new_summary = complete_only(&new_summary);
        }
        let mut verdicts = budgets(&new_summary, &new_scenario.thresholds);
        let Some(base) = baseline.entry(&name)? else {
            // The command that makes an entry the gate can judge with: three
            // runs a strategy, unless the scenario already repeats enough.
            let repeat = if (new_scenario.repeat as usize) < BASELINE_MIN_RUNS {
                format!(" --repeat {BASELINE_MIN_RUNS}")
            } else {
                String::new()
            };
            // A drive's record is made again by the drive (its own flags).
            let driven = record.header.command.get(1).is_some_and(|c| c == "drive");
            let create = if driven {
                format!(
                    "memrel drive <its flags> --name {name} --repeat {BASELINE_MIN_RUNS} --save-baseline {}",
                    options.baseline
                )
            } else {
                format!(
                    "memrel run --scenario {name}{repeat} --save-baseline {}",
                    options.baseline
                )
            };
            if options.lenient {
                let why = format!(
                    "baseline {:?} has no entry for scenario {name}: skipped; create it with `{create}`",
                    options.baseline
                );
                report.warnings.push(why.clone());
                skipped.push(why);
                finish_scenario(&mut report, verdicts, &left_out);
                continue;
            }
            bail!(
                "baseline {:?} has no entry for scenario {name} (in {}): create it with `{create}`, or pass --lenient to skip",
                options.baseline,
                baseline.root().display()
            );
        };
        if base.header.scenario_toml != record.header.scenario_toml {
            report.warnings.push(format!(
                "scenario {name}: the scenario file differs from the baseline's (compare runs.json scenario_toml)"
            ));
        }
        report
            .warnings
            .extend(program_differences(&name, &base.header, &record.header));
        let machine = super::machine::compare(&name, &base.header.host, &record.header.host);
        report.warnings.extend(machine.warnings);
        report.machine_differences.extend(machine.differences);
        let other = super::machine::other_machine(&name, &base.header.host, &record.header.host);
        let mut base_summary = metrics::summarize(&base);
        let mut base_broken = broken_runs(&base_summary, Side::Baseline);
        attach_stderr(&mut base_broken, &base);
        let base_dir = baseline.entry_dir(&name);
        broken_in.extend(base_broken.iter().map(|b| (b.clone(), base_dir.clone())));
        left_out.extend(base_broken);
        if leave_out {
            base_summary = complete_only(&base_summary);
        }
        report.gaps.extend(gaps(
            &options.baseline,
            Covered {
                summary: &base_summary,
                dir: &base_dir,
            },
            Covered {
                summary: &new_summary,
                dir,
            },
        ));
        verdicts.extend(compare(
            &base_summary,
            &new_summary,
            &new_scenario.thresholds,
        ));
        if let Some(other) = other {
            if options.any_machine {
                note_across_machines(&mut verdicts, &other.row_note());
            }
            report.other_machines.push(other);
        }
        finish_scenario(&mut report, verdicts, &left_out);
    }
    report.regressed = report.verdicts.iter().any(|v| v.verdict.fails());
    missing_scenarios(options, baseline, &judged, &mut report);
    report.errors = errors(&report.verdicts, &broken_in, options.broken_runs);
    report
        .errors
        .extend(judged_nothing(&report.verdicts, &skipped));
    report
        .errors
        .extend(report.gaps.iter().map(|g| format!("coverage: {g}")));
    if !options.any_machine {
        report.errors.extend(report.other_machines.iter().map(|o| {
            format!(
                "machine: {}: numbers from two kinds of machine are not comparable; check against a baseline made on this kind of machine (`memrel run --scenario {} --save-baseline NAME`), or pass --any-machine to judge across machines",
                o.sentence(),
                o.scenario
            )
        }));
    }
    Ok(report)
}

/// Every row of a scenario judged across machines says so (its note).
fn note_across_machines(verdicts: &mut [MetricVerdict], note: &str) {
    for v in verdicts {
        v.note = if v.note.is_empty() {
            note.to_string()
        } else {
            format!("{}; {note}", v.note)
        };
    }
}

/// The baseline's scenarios that no checked directory holds: a gap each
/// (with `--lenient`, a warning each).
fn missing_scenarios(
    options: &CheckOptions,
    baseline: &dyn SavedBaseline,
    judged: &[String],
    report: &mut VerdictReport,
) {
    let saved = baseline.scenarios().unwrap_or_default();
    for scenario in saved.iter().filter(|s| !judged.contains(s)) {
        let dir = baseline.entry_dir(scenario);
        if options.lenient {
            report.warnings.push(format!(
                "baseline {:?} has scenario {scenario} (in {}), which no directory checked holds: not judged",
                options.baseline,
                dir.display()
            ));
            continue;
        }
        report.gaps.push(CoverageGap {
            scenario: scenario.clone(),
            strategy: None,
            resource: None,
            metric: None,
            missing_in: Side::New,
            why: format!(
                "the baseline has it (in {}), no directory checked holds it; pass its results directory too, or --lenient to judge only what was given",
                dir.display()
            ),
        });
    }
}

/// Adds one scenario's rows to the report, each affected row saying which
/// broken runs were left out.
fn finish_scenario(
    report: &mut VerdictReport,
    mut verdicts: Vec<MetricVerdict>,
    broken: &[BrokenRun],
) {
    if report.complete_runs_only {
        note_left_out(&mut verdicts, broken);
    }
    report.verdicts.extend(verdicts);
    report.broken_runs.extend(broken.iter().cloned());
}
