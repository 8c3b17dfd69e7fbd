//! `memrel check` without directories: re-runs every scenario a baseline
//! holds, as it was saved (same scenario file, strategies, cycles and
//! repetitions; for a program, the interpreter, process tree and working
//! directory the record names), so the gate has new runs to judge. It
//! judges nothing: [`program_differences`] only says what a new program
//! run did differently from the baseline's (warnings).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::baseline;
use crate::cli::ScenarioOverrides;
use crate::plan::Plan;
use crate::record::{Header, Record};
use crate::scenario;

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
        let plan = as_saved(name, &scenario_name, &base, results_root)?;
        eprintln!("memrel: running scenario {scenario_name} for the check");
        if let Some(program) = &base.header.program {
            eprintln!(
                "memrel: as the baseline recorded it: {} (in {})",
                program.argv.join(" "),
                program.cwd
            );
        }
        let (dir, _) = plan.execute(crate::plan::command_line())?;
        dirs.push(dir);
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
             (memrel check --baseline {baseline} DIR)",
            attached.pid
        );
    }
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
    let Some(program) = &base.header.program else {
        return Plan::new(
            scenario,
            &strategies,
            &ScenarioOverrides::default(),
            results_root,
        );
    };
    let overrides = ScenarioOverrides {
        python: program.python.clone(),
        tree: program.tree,
        ..ScenarioOverrides::default()
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
                 or re-save the baseline from where the program lives now (memrel exec … --save-baseline {baseline})",
                program.cwd
            );
        }
        plan.cwd = Some(cwd);
    }
    Ok(plan)
}

/// What the new record's program ran with that differs from the baseline's
/// (the command, interpreter, directory, or a variable memrel set, per
/// strategy both ran): one warning each. Empty when either record has no
/// program block (memrel's own workers, or an older record).
pub fn program_differences(scenario: &str, base: &Header, new: &Header) -> Vec<String> {
    let (Some(b), Some(n)) = (&base.program, &new.program) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut differs = |what: &str, was: String, now: String| {
        if was != now {
            out.push(format!(
                "scenario {scenario}: the program's {what} differs from the baseline's: {was} (baseline) → {now} (new)"
            ));
        }
    };
    differs("command", b.argv.join(" "), n.argv.join(" "));
    let python = |p: &Option<String>| p.clone().unwrap_or_else(|| "none".into());
    differs("--python", python(&b.python), python(&n.python));
    differs("working directory", b.cwd.clone(), n.cwd.clone());
    for (strategy, base_env) in &b.env {
        let Some(new_env) = n.env.get(strategy) else {
            continue;
        };
        let names = base_env
            .keys()
            .chain(new_env.keys().filter(|k| !base_env.contains_key(*k)));
        for var in names {
            let value = |env: &std::collections::BTreeMap<String, String>| {
                env.get(var).cloned().unwrap_or_else(|| "<unset>".into())
            };
            differs(
                &format!("{var} ({strategy})"),
                value(base_env),
                value(new_env),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{fixture, Program};

    #[test]
    fn a_program_run_differently_is_named_variable_by_variable() {
        let program = Program {
            argv: vec!["/venv/bin/python".into(), "job.py".into()],
            python: Some("/venv/bin/python".into()),
            tree: false,
            cwd: "/work/repo".into(),
            env: [(
                "malloc-trim".to_string(),
                [
                    ("LD_PRELOAD".to_string(), "/lib/a.so".to_string()),
                    ("MEMREL_CYCLES".to_string(), "3".to_string()),
                ]
                .into(),
            )]
            .into(),
        };
        let mut base = fixture::header("s", 3);
        base.program = Some(program.clone());
        let mut new = base.clone();
        assert!(program_differences("s", &base, &new).is_empty());
        assert!(program_differences("s", &fixture::header("s", 3), &new).is_empty());
        let p = new.program.as_mut().expect("program");
        p.cwd = "/elsewhere".into();
        let env = p.env.get_mut("malloc-trim").expect("env");
        env.insert("LD_PRELOAD".into(), "/lib/b.so".into());
        env.remove("MEMREL_CYCLES");
        assert_eq!(
            program_differences("s", &base, &new),
            [
                "scenario s: the program's working directory differs from the baseline's: /work/repo (baseline) → /elsewhere (new)",
                "scenario s: the program's LD_PRELOAD (malloc-trim) differs from the baseline's: /lib/a.so (baseline) → /lib/b.so (new)",
                "scenario s: the program's MEMREL_CYCLES (malloc-trim) differs from the baseline's: 3 (baseline) → <unset> (new)",
            ]
        );
    }
}
