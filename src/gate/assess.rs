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

use super::coverage::{gaps, new_since, not_judged_new, Covered, NEW_SINCE};
use super::evidence::{
    attach_stderr, errors, judged_nothing, too_few_runs, BrokenRuns, BASELINE_MIN_RUNS,
};
use super::program::program_differences;
use super::report::{
    BrokenRun, CoverageGap, MetricVerdict, Remake, Side, VerdictReport, VERDICT_SCHEMA_VERSION,
};
use super::{broken_runs, budgets, compare, complete_only, note_left_out};
use crate::hint::Hint;
use crate::metrics;
use crate::metrics::ResourceFacts;
use crate::record::{Header, Record};
use crate::scenario::Scenario;

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

/// What the loop over the checked directories gathers besides the report.
#[derive(Default)]
struct Tally {
    /// Where each broken run's record lives, for the error message.
    broken_in: Vec<(BrokenRun, PathBuf)>,
    /// The scenarios of the directories checked.
    judged: Vec<String>,
    /// Why each scenario skipped under --lenient was not judged.
    skipped: Vec<String>,
    /// Scenarios with too few runs of a strategy to judge (each an error).
    too_few: Vec<String>,
}

/// One checked directory's new side: its record, scenario and summary.
struct NewSide<'a> {
    dir: &'a Path,
    record: Record,
    scenario: Scenario,
    summary: metrics::Summary,
    /// Its broken runs (then the baseline's, once read).
    left_out: Vec<BrokenRun>,
}

/// Judges every results directory of `dirs` against `baseline` (the one
/// `options` names); returns the report. The report's `errors` say why the
/// evidence cannot be judged.
pub fn assess(
    options: &CheckOptions,
    baseline: &dyn SavedBaseline,
    dirs: &[PathBuf],
) -> Result<VerdictReport> {
    let mut report = empty_report(options);
    let mut tally = Tally::default();
    for dir in dirs {
        assess_dir(options, baseline, dir, &mut report, &mut tally)?;
    }
    report.regressed = report.verdicts.iter().any(|v| v.verdict.fails());
    missing_scenarios(options, baseline, &tally.judged, &mut report);
    gather_errors(options, &mut report, tally);
    Ok(report)
}

/// The report before any scenario is judged.
fn empty_report(options: &CheckOptions) -> VerdictReport {
    VerdictReport {
        schema_version: VERDICT_SCHEMA_VERSION,
        baseline: options.baseline.clone(),
        regressed: false,
        errors: Vec::new(),
        gaps: Vec::new(),
        broken_runs: Vec::new(),
        complete_runs_only: options.broken_runs == BrokenRuns::LeaveOut,
        verdicts: Vec::new(),
        warnings: Vec::new(),
        machine_differences: Vec::new(),
        other_machines: Vec::new(),
        any_machine: options.any_machine,
        remake: Vec::new(),
    }
}

/// Judges the results directory `dir` against the baseline's entry for its
/// scenario, adding its rows, gaps and warnings to `report`.
fn assess_dir(
    options: &CheckOptions,
    baseline: &dyn SavedBaseline,
    dir: &Path,
    report: &mut VerdictReport,
    tally: &mut Tally,
) -> Result<()> {
    let record = Record::load(dir)?;
    let name = record.header.scenario.clone();
    tally.judged.push(name.clone());
    let scenario = Scenario::of_header(&record.header)
        .with_context(|| format!("the scenario saved in {}", dir.display()))?;
    let mut summary = metrics::summarize(&record);
    let mut left_out = broken_runs(&summary, Side::New);
    attach_stderr(&mut left_out, &record);
    tally
        .broken_in
        .extend(left_out.iter().map(|b| (b.clone(), dir.to_path_buf())));
    if report.complete_runs_only {
        summary = complete_only(&summary);
    }
    let verdicts = budgets(&summary, &scenario.thresholds);
    let new = NewSide {
        dir,
        record,
        scenario,
        summary,
        left_out,
    };
    match baseline.entry(&name)? {
        Some(base) => judge_against(options, baseline, &base, new, verdicts, report, tally),
        None => {
            let why = no_entry(options, baseline, &new.record, &new.scenario)?;
            report.warnings.push(why.clone());
            tally.skipped.push(why);
            finish_scenario(report, verdicts, &new.left_out);
        }
    }
    Ok(())
}

/// The scenario of `record` has no entry in the baseline: the warning that
/// skips it under `--lenient`, else the error, each with the command that
/// creates the entry.
fn no_entry(
    options: &CheckOptions,
    baseline: &dyn SavedBaseline,
    record: &Record,
    scenario: &Scenario,
) -> Result<String> {
    let name = &record.header.scenario;
    // The command that makes an entry the gate can judge with: three
    // runs a strategy, unless the scenario already repeats enough.
    let repeat = ((scenario.repeat as usize) < BASELINE_MIN_RUNS).then_some(BASELINE_MIN_RUNS);
    // A drive's record is made again by the drive (its own flags).
    let driven = record.header.command.get(1).is_some_and(|c| c == "drive");
    let create = if driven {
        Hint::DriveAgain {
            name,
            repeat: BASELINE_MIN_RUNS,
            baseline: &options.baseline,
        }
        .line()
    } else {
        Hint::SaveScenario {
            scenario: scenario_arg(&record.header),
            repeat,
            baseline: &options.baseline,
            replace: false,
            out: out_flag(options, &[]),
        }
        .line()
    };
    if options.lenient {
        return Ok(format!(
            "baseline {:?} has no entry for scenario {name}: skipped; create it with `{create}`",
            options.baseline
        ));
    }
    bail!(
        "baseline {:?} has no entry for scenario {name} (in {}): create it with `{create}`, or pass --lenient to skip",
        options.baseline,
        baseline.root().display()
    );
}

/// Judges the new side of one scenario against the baseline's entry `base`:
/// warnings on what differs, gaps, the compared rows, too few runs.
fn judge_against(
    options: &CheckOptions,
    baseline: &dyn SavedBaseline,
    base: &Record,
    mut new: NewSide,
    mut verdicts: Vec<MetricVerdict>,
    report: &mut VerdictReport,
    tally: &mut Tally,
) {
    let name = new.record.header.scenario.clone();
    let record = &new.record;
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
    let mut base_summary = metrics::summarize(base);
    let mut base_broken = broken_runs(&base_summary, Side::Baseline);
    attach_stderr(&mut base_broken, base);
    let base_dir = baseline.entry_dir(&name);
    tally
        .broken_in
        .extend(base_broken.iter().map(|b| (b.clone(), base_dir.clone())));
    new.left_out.extend(base_broken);
    if report.complete_runs_only {
        base_summary = complete_only(&base_summary);
    }
    let remake = remake_command(options, record, base);
    // What the baseline's memrel did not know is new, not a gap.
    let unknown = new_since(&base.header, &base_summary, &new.summary);
    report.gaps.extend(
        gaps(
            &remake,
            Covered {
                summary: &base_summary,
                dir: &base_dir,
            },
            Covered {
                summary: &new.summary,
                dir: new.dir,
            },
        )
        .into_iter()
        .filter(|g| g.resource.is_none_or(|r| !unknown.contains(&r))),
    );
    let thresholds = &new.scenario.thresholds;
    let mut compared = compare(&base_summary, &new.summary, thresholds);
    not_judged_new(&mut compared, &unknown, &remake);
    for r in &unknown {
        report.warnings.push(format!(
            "scenario {name}: {} ({}): {NEW_SINCE} (`{remake}`)",
            r.label(),
            r.key()
        ));
    }
    verdicts.extend(compared);
    tally.too_few.extend(too_few_runs(
        &name,
        [(&base_summary, &base_dir), (&new.summary, new.dir)],
        thresholds,
        (
            &remake,
            Hint::again(&record.header.command, BASELINE_MIN_RUNS, None, None),
        ),
    ));
    report.remake.push(Remake {
        scenario: name.clone(),
        command: remake,
    });
    if let Some(other) = other {
        if options.any_machine {
            note_across_machines(&mut verdicts, &other.row_note());
        }
        report.other_machines.push(other);
    }
    finish_scenario(report, verdicts, &new.left_out);
}

/// Every error that makes the check exit 2: broken runs, too few runs,
/// nothing judged, coverage gaps, another kind of machine.
fn gather_errors(options: &CheckOptions, report: &mut VerdictReport, tally: Tally) {
    report.errors = errors(&report.verdicts, &tally.broken_in, options.broken_runs);
    report.errors.extend(tally.too_few);
    report
        .errors
        .extend(judged_nothing(&report.verdicts, &tally.skipped));
    report
        .errors
        .extend(report.gaps.iter().map(|g| format!("coverage: {g}")));
    if !options.any_machine {
        report.errors.extend(report.other_machines.iter().map(|o| {
            format!(
                "machine: {}: numbers from two kinds of machine are not comparable; check against a baseline made on this kind of machine (`{}`), or pass --any-machine to judge across machines",
                o.sentence(),
                report
                    .remake
                    .iter()
                    .find(|r| r.scenario == o.scenario)
                    .map_or_else(|| o.scenario.clone(), |r| r.command.clone())
            )
        }));
    }
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

/// The `--out` a hint needs so that what it saves lands where this check
/// reads baselines: the check's results root, unless that is the default
/// and `command` names none.
fn out_flag<'a>(options: &'a CheckOptions, command: &[String]) -> Option<&'a Path> {
    let named = command
        .iter()
        .any(|a| a == "--out" || a.starts_with("--out="));
    (named || options.results_root != Path::new("results")).then_some(&options.results_root)
}

/// What `memrel run --scenario` takes for the scenario of `header`: a
/// built-in's name, or the path of the file it was read from.
fn scenario_arg(header: &Header) -> &str {
    if header.scenario_origin == "builtin" {
        &header.scenario
    } else {
        &header.scenario_origin
    }
}

/// The command that makes the baseline's entry of a scenario again, with
/// enough runs: the command that made the new results where it can run
/// again (`run`, `compare --scenario`, `exec`, `drive`), else the one that
/// made the baseline's entry (a check's own re-run), else a program
/// measured under `memrel exec` (an attached process).
fn remake_command(options: &CheckOptions, new: &Record, base: &Record) -> String {
    for record in [new, base] {
        let repeat = record
            .runs
            .iter()
            .map(|r| r.meta.repetition as usize)
            .max()
            .unwrap_or(0)
            .max(BASELINE_MIN_RUNS);
        let command = &record.header.command;
        if let Some(hint) = Hint::again(
            command,
            repeat,
            Some(&options.baseline),
            out_flag(options, command),
        ) {
            return hint.line();
        }
    }
    Hint::ExecProgram {
        repeat: BASELINE_MIN_RUNS,
        baseline: &options.baseline,
    }
    .line()
}
