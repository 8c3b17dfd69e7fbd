//! `memrel check`: the regression gate. Compares saved results (or fresh runs
//! of the baseline's own scenarios) with a named baseline and writes
//! verdict.json and verdict.md. Exit code 1 on a regression or a blown
//! budget; an error (exit 2) when the evidence is broken.
//!
//! Broken evidence never passes: a run of either side that failed, timed
//! out, was killed or measured too few cycles makes the check an error that
//! names each such run and why, unless `--complete-runs-only` asks to judge
//! the complete runs alone (every affected verdict then says which runs were
//! left out). A budget nothing could be checked against is an error too. The
//! verdict files are written either way, so a CI job summary shows why.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::ExitStatus;
use crate::baseline;
use crate::cli;
use crate::export::verdict::{verdict_json, verdict_markdown};
use crate::fsutil::write_atomic;
use crate::gate::{self, MetricVerdict, Side, Verdict, VerdictReport, VERDICT_SCHEMA_VERSION};
use crate::metrics;
use crate::record::Record;
use crate::scenario;

pub struct CheckOptions {
    pub baseline: String,
    /// Saved results to check; empty: run the baseline's scenarios now.
    pub dirs: Vec<PathBuf>,
    /// Skip scenarios the baseline lacks (with a warning) instead of failing.
    pub lenient: bool,
    /// Results root: baselines live in `<root>/baselines`, new runs in `<root>/<scenario>`.
    pub results_root: PathBuf,
    /// Where verdict.json and verdict.md go.
    pub verdict_dir: Option<PathBuf>,
    /// What to do with runs that failed, timed out, were killed or are incomplete.
    pub broken_runs: BrokenRuns,
}

/// What the gate does with runs that failed, timed out, were killed or are incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokenRuns {
    /// The check is an error (exit 2) naming them: the default.
    Fail,
    /// Leave them out, judge the complete runs, and say so in every affected verdict.
    LeaveOut,
}

impl BrokenRuns {
    /// `--complete-runs-only` as a policy.
    pub fn from_flag(complete_runs_only: bool) -> BrokenRuns {
        if complete_runs_only {
            BrokenRuns::LeaveOut
        } else {
            BrokenRuns::Fail
        }
    }
}

/// `memrel check` as the command line asks: runs the gate, prints its
/// warnings (stderr) and verdict.md (`out`), and says how it ended.
pub fn run(args: &cli::CheckArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let options = CheckOptions {
        baseline: args.baseline.clone(),
        dirs: args.dirs.clone(),
        lenient: args.lenient,
        results_root: args.out.clone(),
        verdict_dir: args.verdict_dir.clone(),
        broken_runs: BrokenRuns::from_flag(args.complete_runs_only),
    };
    let (report, dir) = execute(&options)?;
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

/// Runs the gate; returns the report and the directory holding the verdict
/// files. An error when the evidence is broken, after the verdict files are
/// written.
pub fn execute(options: &CheckOptions) -> Result<(VerdictReport, PathBuf)> {
    let broken_runs = options.broken_runs;
    baseline::validate_name(&options.baseline)?;
    let root = baseline::root(&options.results_root);
    let dirs = if options.dirs.is_empty() {
        run_baseline_scenarios(options, &root)?
    } else {
        options.dirs.clone()
    };
    let leave_out = broken_runs == BrokenRuns::LeaveOut;
    let mut report = VerdictReport {
        schema_version: VERDICT_SCHEMA_VERSION,
        baseline: options.baseline.clone(),
        regressed: false,
        errors: Vec::new(),
        broken_runs: Vec::new(),
        complete_runs_only: leave_out,
        verdicts: Vec::new(),
        warnings: Vec::new(),
    };
    // Where each broken run's record lives, for the error message.
    let mut broken_in: Vec<(gate::BrokenRun, PathBuf)> = Vec::new();
    for dir in &dirs {
        let record = Record::load(dir)?;
        let name = record.header.scenario.clone();
        let new_scenario = scenario::parse_str(
            &name,
            &record.header.scenario_origin,
            &record.header.scenario_toml,
        )
        .with_context(|| format!("the scenario saved in {}", dir.display()))?;
        let mut new_summary = metrics::summarize(&record);
        let mut left_out = gate::broken_runs(&new_summary, Side::New);
        broken_in.extend(left_out.iter().map(|b| (b.clone(), dir.clone())));
        if leave_out {
            new_summary = gate::complete_only(&new_summary);
        }
        let mut verdicts = gate::budgets(&new_summary, &new_scenario.thresholds);
        let Some(base) = baseline::load(&root, &options.baseline, &name)? else {
            let create = format!(
                "memrel run --scenario {name} --save-baseline {}",
                options.baseline
            );
            if options.lenient {
                report.warnings.push(format!(
                    "baseline {:?} has no entry for scenario {name}: skipped; create it with `{create}`",
                    options.baseline
                ));
                finish_scenario(&mut report, verdicts, &left_out);
                continue;
            }
            bail!(
                "baseline {:?} has no entry for scenario {name} (in {}): create it with `{create}`, or pass --lenient to skip",
                options.baseline,
                root.display()
            );
        };
        if base.header.scenario_toml != record.header.scenario_toml {
            report.warnings.push(format!(
                "scenario {name}: the scenario file differs from the baseline's (compare runs.json scenario_toml)"
            ));
        }
        if base.header.host.hostname != record.header.host.hostname {
            report.warnings.push(format!(
                "scenario {name}: baseline made on {}, this run on {}",
                base.header.host.hostname, record.header.host.hostname
            ));
        }
        let mut base_summary = metrics::summarize(&base);
        let base_broken = gate::broken_runs(&base_summary, Side::Baseline);
        let base_dir = root.join(&options.baseline).join(&name);
        broken_in.extend(base_broken.iter().map(|b| (b.clone(), base_dir.clone())));
        left_out.extend(base_broken);
        if leave_out {
            base_summary = gate::complete_only(&base_summary);
        }
        verdicts.extend(gate::compare(
            &base_summary,
            &new_summary,
            &new_scenario.thresholds,
        ));
        finish_scenario(&mut report, verdicts, &left_out);
    }
    report.regressed = report.verdicts.iter().any(|v| v.verdict.fails());
    if !leave_out && !broken_in.is_empty() {
        report.errors.push(broken_message(&broken_in));
    }
    report.errors.extend(unchecked_budgets(&report.verdicts));
    report.errors.extend(unjudged(&report.verdicts));
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

/// Adds one scenario's rows to the report, each affected row saying which
/// broken runs were left out.
fn finish_scenario(
    report: &mut VerdictReport,
    mut verdicts: Vec<MetricVerdict>,
    broken: &[gate::BrokenRun],
) {
    if report.complete_runs_only {
        gate::note_left_out(&mut verdicts, broken);
    }
    report.verdicts.extend(verdicts);
    report.broken_runs.extend(broken.iter().cloned());
}

/// The error that names every broken run, where it is and why.
fn broken_message(broken: &[(gate::BrokenRun, PathBuf)]) -> String {
    let mut out = format!(
        "{} run(s) failed, timed out, were killed or are incomplete, so their evidence is broken:",
        broken.len()
    );
    for (run, dir) in broken {
        out.push_str(&format!("\n  - {run} (in {})", dir.display()));
    }
    let baseline_broken = broken.iter().any(|(b, _)| b.side == Side::Baseline);
    out.push_str(if baseline_broken {
        "\nre-make the baseline from complete runs (memrel run --save-baseline), fix the runs, or pass --complete-runs-only to judge only the complete runs"
    } else {
        "\nfix the runs (their errors above; timeout_s in the scenario), or pass --complete-runs-only to judge only the complete runs"
    });
    out
}

/// One error per strategy the gate could not judge at all (no complete run
/// on a side), naming the scenario and why.
fn unjudged(verdicts: &[MetricVerdict]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in verdicts
        .iter()
        .filter(|v| v.verdict == Verdict::Error && v.budget.is_none())
    {
        let line = format!(
            "scenario {}, strategy {}: {}",
            v.scenario, v.strategy, v.note
        );
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}

/// One error per scenario budget that nothing could be checked against,
/// naming the strategies it concerns and why.
fn unchecked_budgets(verdicts: &[MetricVerdict]) -> Vec<String> {
    let mut out: Vec<(String, Vec<&str>, &str)> = Vec::new();
    for v in verdicts {
        let Some(budget) = &v.budget else { continue };
        if v.verdict != Verdict::Error {
            continue;
        }
        let head = format!(
            "scenario {}: budget {} ({})",
            v.scenario, budget.key, v.resource
        );
        match out.iter_mut().find(|(h, _, _)| *h == head) {
            Some((_, strategies, _)) => strategies.push(&v.strategy),
            None => {
                let why = v
                    .note
                    .split_once(" not checked: ")
                    .map_or(v.note.as_str(), |(_, why)| why);
                out.push((head, vec![&v.strategy], why))
            }
        }
    }
    out.into_iter()
        .map(|(head, strategies, note)| {
            format!(
                "{head} was not checked for {}: {note}",
                strategies.join(", ")
            )
        })
        .collect()
}

/// Runs every scenario the baseline holds, as it was saved (same file, strategies,
/// cycles and repetitions), and returns the new results directories.
fn run_baseline_scenarios(options: &CheckOptions, root: &Path) -> Result<Vec<PathBuf>> {
    let names = baseline::scenarios(root, &options.baseline)?;
    if names.is_empty() {
        bail!(
            "baseline {:?} in {} holds no scenarios: create it with `memrel run --scenario <scenario> --save-baseline {}`",
            options.baseline,
            root.display(),
            options.baseline
        );
    }
    let mut dirs = Vec::new();
    for name in names {
        let Some(base) = baseline::load(root, &options.baseline, &name)? else {
            continue;
        };
        let mut scenario = scenario::parse_str(
            &name,
            &base.header.scenario_origin,
            &base.header.scenario_toml,
        )?;
        scenario.cycles = base.header.cycles;
        scenario.repeat = base
            .runs
            .iter()
            .map(|r| r.meta.repetition)
            .max()
            .unwrap_or(1);
        let mut strategies: Vec<String> = Vec::new();
        for r in &base.runs {
            if !strategies.contains(&r.meta.strategy) {
                strategies.push(r.meta.strategy.clone());
            }
        }
        let plan = crate::plan::Plan::new(
            scenario,
            &strategies,
            &crate::cli::ScenarioOverrides::default(),
            &options.results_root,
        )?;
        eprintln!("memrel: running scenario {name} for the check");
        let (dir, _) = plan.execute(super::output::command_line())?;
        dirs.push(dir);
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Thresholds;

    #[test]
    fn a_budget_nothing_could_be_checked_against_is_one_error() {
        let mut t = Thresholds {
            retention_threshold_bytes: 16 << 20,
            noise_relative: 0.05,
            noise_absolute_bytes: 16 << 20,
            host: Default::default(),
            device: Default::default(),
        };
        t.device.max_retained_bytes = Some(300 << 20);
        t.host.max_retained_bytes = Some(64 << 20);
        // A record without VRAM readings: the host budget is checked, the VRAM one cannot be.
        let summary = metrics::summarize(&crate::record::fixture::record());
        let warnings = unchecked_budgets(&gate::budgets(&summary, &t));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "scenario fixture: budget max_retained_vram_mib (cuda:0) was not checked for drop, malloc-trim: "
            ),
            "{}",
            warnings[0]
        );
        assert!(warnings[0].contains("VRAM not measured"), "{}", warnings[0]);
    }
}
