//! `memrel check` without directories: re-runs every scenario a baseline
//! holds, as it was saved (same scenario file, strategies, cycles and
//! repetitions; for a program, the interpreter, process tree and working
//! directory the record names), so the gate has new runs to judge.
//! `commands::check` calls it before the gate, which only reads the results
//! directories that come back; it judges nothing.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::{command_line, Plan};
use crate::baseline;
use crate::hint::Hint;
use crate::record::Record;
use crate::scenario::{Overrides, Scenario};

/// Runs every scenario baseline `name` (in `<results_root>/baselines`) holds
/// and returns the new results directories (under `results_root`).
pub fn run_baseline_scenarios(name: &str, results_root: &Path) -> Result<Vec<PathBuf>> {
    baseline::validate_name(name)?;
    let root = &baseline::root(results_root);
    let names = baseline::scenarios(root, name)?;
    if names.is_empty() {
        bail!(
            "baseline {name:?} in {} holds no scenarios: create it with `{}`",
            root.display(),
            baseline::save_hint(root, "<scenario>", name, false)
        );
    }
    let mut dirs = Vec::new();
    for scenario_name in names {
        let Some(base) = baseline::load(root, name, &scenario_name)? else {
            continue;
        };
        let plan = as_saved(name, &scenario_name, &base, results_root)?;
        eprintln!("memrel: running scenario {scenario_name} for the check");
        if let Some(program) = &base.header.program {
            eprintln!(
                "memrel: as the baseline recorded it: {} (in {})",
                program.argv.join(" "),
                program.cwd
            );
        }
        dirs.push(plan.execute(command_line())?.dir);
    }
    Ok(dirs)
}

/// The plan a baseline record was made with: its scenario, strategies,
/// cycles and repetitions, and a program's interpreter, tree and working
/// directory (a record made before memrel kept them: the defaults).
fn as_saved(baseline: &str, name: &str, base: &Record, results_root: &Path) -> Result<Plan> {
    if let Some(attached) = &base.header.attached {
        bail!(
            "baseline {baseline:?}, scenario {name}: measured by memrel attach (pid {}), a process memrel \
             cannot start again: attach to the process again and check its results directory \
             ({})",
            attached.pid,
            Hint::Check {
                baseline,
                dir: "DIR"
            }
        );
    }
    let mut scenario = Scenario::of_header(&base.header)?;
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
    let Some(program) = &base.header.program else {
        return Plan::new(scenario, &strategies, &Overrides::default(), results_root);
    };
    let overrides = Overrides {
        python: program.python.clone(),
        tree: program.tree,
        ..Overrides::default()
    };
    let builtin = scenario.origin == "builtin";
    let mut plan = Plan::new(scenario, &strategies, &overrides, results_root)?;
    // A built-in's scripts are written out again wherever the cache is.
    if !builtin {
        let cwd = PathBuf::from(&program.cwd);
        if !cwd.is_dir() {
            bail!(
                "baseline {baseline:?}, scenario {name}: the program ran in {}, which does not exist here: \
                 create that directory (check out the repository at that path) and run the check again, \
                 or re-save the baseline from where the program lives now ({})",
                program.cwd,
                Hint::ExecProgram {
                    repeat: crate::gate::BASELINE_MIN_RUNS,
                    baseline
                }
            );
        }
        plan.cwd = Some(cwd);
    }
    Ok(plan)
}
