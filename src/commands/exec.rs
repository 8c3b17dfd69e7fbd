//! `memrel exec -- CMD ARGS...`: a program measured like a scenario. The
//! options become a scenario file's text (kept in runs.json, so `report` and
//! `check` treat the results like any others), parsed by the one scenario
//! parser, and run by the [`Plan`].

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::{output, ExitStatus};
use crate::cli::{ExecArgs, ScenarioOverrides};
use crate::metrics::Summary;
use crate::plan::Plan;
use crate::results::check_output_args;
use crate::scenario;

/// `memrel exec` as the arguments ask: runs, prints the table and where the
/// results went to `out`, and says how the runs ended.
pub fn run(args: &ExecArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let (dir, summary) = execute(args)?;
    output::finish_run(out, &dir, &summary, &args.output, args.wide)
}

/// The runs; returns the results directory and summary.
fn execute(args: &ExecArgs) -> Result<(PathBuf, Summary)> {
    let text = scenario_text(args)?;
    let scenario = scenario::parse_str(&args.name, "exec", &text)
        .with_context(|| format!("memrel exec {}", args.command.join(" ")))?;
    // The scenario text already holds the overrides; only the ones that are
    // not scenario keys remain.
    let rest = ScenarioOverrides {
        python: args.overrides.python.clone(),
        tree: args.overrides.tree,
        ..ScenarioOverrides::default()
    };
    let mut plan = Plan::new(scenario, &[], &rest, &args.output.out)?;
    plan.cwd = Some(std::env::current_dir().context("cannot read the current directory")?);
    check_output_args(&args.output)?;
    plan.execute(crate::plan::command_line())
}

/// The scenario `memrel exec` runs, as TOML.
fn scenario_text(args: &ExecArgs) -> Result<String> {
    let o = &args.overrides;
    let strategies = if args.strategies.is_empty() {
        vec!["drop".to_string()]
    } else {
        args.strategies.clone()
    };
    let mut table = toml::Table::new();
    table.insert(
        "description".into(),
        format!("memrel exec -- {}", args.command.join(" ")).into(),
    );
    table.insert(
        "device".into(),
        o.device.clone().unwrap_or_else(|| "cpu".into()).into(),
    );
    table.insert("cycles".into(), i64::from(o.cycles.unwrap_or(1)).into());
    table.insert("repeat".into(), i64::from(o.repeat.unwrap_or(1)).into());
    table.insert("strategies".into(), strategies.into());
    table.insert("interval_ms".into(), o.interval_ms.unwrap_or(10.0).into());
    table.insert("timeout_s".into(), args.timeout_s.into());
    table.insert("command".into(), args.command.clone().into());
    toml::to_string(&table).context("cannot write the scenario of memrel exec")
}
