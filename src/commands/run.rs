//! `memrel run`: a scenario's runs (or, with `--model`, the default
//! scenario's on that model), each in a fresh worker, every output written
//! after every run (see [`Plan`]).

use std::io::Write;

use anyhow::Result;

use super::{output, ExitStatus};
use crate::cli::RunArgs;
use crate::metrics::measured::Measured;
use crate::plan::Plan;
use crate::results::check_output_args;
use crate::scenario;

/// `memrel run` as the arguments ask: runs, prints the table and where the
/// results went to `out`, and says how the runs ended.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let measured = execute(args)?;
    output::finish_run(
        out,
        &measured,
        &args.output,
        output::view(args.console),
        true,
    )
}

/// The runs: the results directory, its record and summary.
fn execute(args: &RunArgs) -> Result<Measured> {
    // clap refuses --scenario with --model.
    let scenario = match (&args.model, &args.scenario) {
        (Some(model), _) => scenario::for_model(model)?,
        (None, name) => scenario::load(name.as_deref().unwrap_or(scenario::DEFAULT))?,
    };
    let mut plan = Plan::new(
        scenario,
        &args.strategies,
        &(&args.overrides).into(),
        &args.output.out,
    )?;
    plan.trace_allocations(args.trace_allocations)?;
    check_output_args(&args.output)?;
    plan.execute(crate::plan::command_line())
}
