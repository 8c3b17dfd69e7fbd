//! `memrel run`: a scenario's runs, each in a fresh worker, every output
//! written after every run (see [`Plan`]).

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::RunArgs;
use crate::metrics::Summary;
use crate::plan::Plan;
use crate::results::check_output_args;
use crate::scenario;

/// Runs `memrel run` as the arguments ask; returns the results directory and summary.
pub fn execute_args(args: &RunArgs, command_line: Vec<String>) -> Result<(PathBuf, Summary)> {
    let plan = Plan::new(
        scenario::load(&args.scenario)?,
        &args.strategies,
        &args.overrides,
        &args.output.out,
    )?;
    check_output_args(&args.output)?;
    plan.execute(command_line)
}
