//! `memrel run`: a scenario's runs (or, with `--model`, the default
//! scenario's on that model), each in a fresh worker, every output written
//! after every run (see [`Plan`]).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use super::{output, ExitStatus};
use crate::cli::RunArgs;
use crate::metrics::Summary;
use crate::plan::Plan;
use crate::results::check_output_args;
use crate::scenario;

/// `memrel run` as the arguments ask: runs, prints the table and where the
/// results went to `out`, and says how the runs ended.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let (dir, summary) = execute(args)?;
    output::finish_run(out, &dir, &summary, &args.output, args.console.view(), true)
}

/// The runs; returns the results directory and summary.
fn execute(args: &RunArgs) -> Result<(PathBuf, Summary)> {
    // clap refuses --scenario with --model.
    let scenario = match (&args.model, &args.scenario) {
        (Some(model), _) => scenario::for_model(model)?,
        (None, name) => scenario::load(name.as_deref().unwrap_or(scenario::DEFAULT))?,
    };
    let plan = Plan::new(
        scenario,
        &args.strategies,
        &args.overrides,
        &args.output.out,
    )?;
    check_output_args(&args.output)?;
    plan.execute(crate::plan::command_line())
}
