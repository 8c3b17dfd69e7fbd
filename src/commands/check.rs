//! `memrel check`: the regression gate. Compares saved results (or fresh runs
//! of the baseline's own scenarios) with a named baseline and writes
//! verdict.json and verdict.md. Exit code 1 on a regression or a blown budget.
//!
//! Every resource the records measured (host RSS, VRAM per CUDA device) is
//! judged; a budget that could not be checked (its resource was not
//! measured) is an `inconclusive` row and a warning here, never a silent pass.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::baseline;
use crate::export::verdict::{verdict_json, verdict_markdown};
use crate::fsutil::write_atomic;
use crate::gate::{self, MetricVerdict, Verdict, VerdictReport, VERDICT_SCHEMA_VERSION};
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
}

/// Runs the gate; returns the report and the directory holding the verdict files.
pub fn execute(options: &CheckOptions) -> Result<(VerdictReport, PathBuf)> {
    baseline::validate_name(&options.baseline)?;
    let root = baseline::root(&options.results_root);
    let dirs = if options.dirs.is_empty() {
        run_baseline_scenarios(options, &root)?
    } else {
        options.dirs.clone()
    };
    let mut report = VerdictReport {
        schema_version: VERDICT_SCHEMA_VERSION,
        baseline: options.baseline.clone(),
        regressed: false,
        verdicts: Vec::new(),
        warnings: Vec::new(),
    };
    for dir in &dirs {
        let record = Record::load(dir)?;
        let name = record.header.scenario.clone();
        let new_scenario = scenario::parse_str(
            &name,
            &record.header.scenario_origin,
            &record.header.scenario_toml,
        )
        .with_context(|| format!("the scenario saved in {}", dir.display()))?;
        let new_summary = metrics::summarize(&record);
        report
            .verdicts
            .extend(gate::budgets(&new_summary, &new_scenario.thresholds));
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
        let base_summary = metrics::summarize(&base);
        report.verdicts.extend(gate::compare(
            &base_summary,
            &new_summary,
            &new_scenario.thresholds,
        ));
    }
    report.warnings.extend(unchecked_budgets(&report.verdicts));
    report.regressed = report.verdicts.iter().any(|v| v.verdict.fails());
    let out = match &options.verdict_dir {
        Some(dir) => dir.clone(),
        None => match dirs.as_slice() {
            [one] => one.clone(),
            _ => crate::commands::run::create_out_dir(&options.results_root, "check")?,
        },
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    write_atomic(&out.join("verdict.json"), &verdict_json(&report)?)?;
    write_atomic(
        &out.join("verdict.md"),
        verdict_markdown(&report).as_bytes(),
    )?;
    Ok((report, out))
}

/// One warning per scenario budget that nothing could be checked against,
/// naming the strategies it concerns and why.
fn unchecked_budgets(verdicts: &[MetricVerdict]) -> Vec<String> {
    let mut out: Vec<(String, Vec<&str>, &str)> = Vec::new();
    for v in verdicts {
        let Some(budget) = &v.budget else { continue };
        if v.verdict != Verdict::Inconclusive {
            continue;
        }
        let head = format!(
            "scenario {}: budget {} ({})",
            v.scenario, budget.key, v.resource
        );
        match out.iter_mut().find(|(h, _, _)| *h == head) {
            Some((_, strategies, _)) => strategies.push(&v.strategy),
            None => out.push((head, vec![&v.strategy], &v.note)),
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
        let options = crate::commands::run::RunOptions {
            strategies: crate::commands::run::resolve_strategies(&strategies, scenario.device)?,
            scenario,
            out_root: options.results_root.clone(),
        };
        eprintln!("memrel: running scenario {name} for the check");
        let (dir, _) = crate::commands::run::execute(&options, std::env::args().collect())?;
        dirs.push(dir);
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Thresholds;

    #[test]
    fn a_budget_nothing_could_be_checked_against_is_one_warning() {
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
