//! `memrel check` without directories: re-runs every scenario a baseline
//! holds, as it was saved (same scenario file, strategies, cycles and
//! repetitions), so the gate has new runs to judge. It judges nothing.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::baseline;
use crate::record::Record;
use crate::scenario::{self, Scenario};

/// Runs every scenario baseline `name` (in `root`) holds and returns the new
/// results directories (under `results_root`).
pub fn run_baseline_scenarios(
    name: &str,
    root: &Path,
    results_root: &Path,
) -> Result<Vec<PathBuf>> {
    let names = baseline::scenarios(root, name)?;
    if names.is_empty() {
        bail!(
            "baseline {name:?} in {} holds no scenarios: create it with `memrel run --scenario <scenario> --save-baseline {name}`",
            root.display(),
        );
    }
    let mut dirs = Vec::new();
    for scenario_name in names {
        let Some(base) = baseline::load(root, name, &scenario_name)? else {
            continue;
        };
        let (scenario, strategies) = as_saved(&scenario_name, &base)?;
        let plan = crate::plan::Plan::new(
            scenario,
            &strategies,
            &crate::cli::ScenarioOverrides::default(),
            results_root,
        )?;
        eprintln!("memrel: running scenario {scenario_name} for the check");
        let (dir, _) = plan.execute(crate::plan::command_line())?;
        dirs.push(dir);
    }
    Ok(dirs)
}

/// The scenario and strategies a baseline record was made with.
fn as_saved(name: &str, base: &Record) -> Result<(Scenario, Vec<String>)> {
    let mut scenario = scenario::parse_str(
        name,
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
    Ok((scenario, strategies))
}
