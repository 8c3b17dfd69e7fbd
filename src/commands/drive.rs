//! `memrel drive`: the flags made into [`DriveOptions`] (the cycle, its
//! budgets, the strategies, the server: a running one checked before
//! anything is written), the results directory made, the drive measured
//! (`drive::run`: every run, each run's requests printed as it ends) and
//! the lines after it (`output::finish_measured`: budgets, where the results
//! went, the trace, the baseline). A request that fails ends the drive:
//! what was measured is kept, exit 2. SIGINT or SIGTERM stops it at once:
//! the run is kept as stopped early, no baseline is saved, and memrel exits
//! 130 or 143.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Result};

use super::{output, ExitStatus};
use crate::attach::header::budgets;
use crate::cli::DriveArgs;
use crate::drive::cycle::{self, Cycle, PresetArgs};
use crate::drive::driver::Options;
use crate::drive::run::{self, DriveOptions};
use crate::results::{check_output_args, results_dir};
use crate::signals;

pub fn run(args: &DriveArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let options = options(args)?;
    signals::install()?;
    let measured = run::run(&options, out)?;
    let requests = options.requests();
    // Stopped by SIGINT/SIGTERM: kept as stopped early, no baseline, 130/143.
    if signals::received().is_some() {
        let dir = measured.dir.display();
        writeln!(out, "\nresults: {dir} ({requests}: every request)")?;
        if let Some(status) = super::interrupted(&measured.dir) {
            return Ok(status);
        }
    }
    let how = output::Measuring::Driven(&requests);
    output::finish_measured(out, &measured, &args.output, how)
}

/// The drive the flags ask for, checked before anything is written; its
/// results directory made last.
fn options(args: &DriveArgs) -> Result<DriveOptions> {
    let preset_args = PresetArgs {
        sleep_level: Some(args.sleep_level),
        model: args.model.clone(),
    };
    let cycle = match (&args.server, &args.cycle) {
        (Some(name), None) => cycle::preset(name, &preset_args)?,
        (None, Some(path)) => Cycle::read(path, &preset_args)?,
        _ => bail!("pass one of --server NAME and --cycle FILE"),
    };
    let thresholds = budgets(&args.budgets, args.cycle.as_deref(), args.device)?;
    let strategy_file = args.strategy_file.as_deref();
    let strategies = run::strategies(&args.strategies, strategy_file, &args.command)?;
    check_output_args(&args.output)?;
    let server = run::server(args.pid, &args.url, &args.command)?;
    let model_files = crate::attach::model_files(&args.model_files)?;
    Ok(DriveOptions {
        driving: Options {
            url: args.url.clone(),
            cycle,
            cycles: args.cycles,
            warmup_cycles: args.warmup_cycles,
            settle_s: args.settle_s,
            ready_timeout_s: args.ready.ready_timeout_s,
            request_timeout_s: args.request_timeout_s,
            grace: Duration::from_secs_f64(args.grace_s),
            dir: std::path::PathBuf::new(),
        },
        server,
        strategies,
        repeat: args.repeat,
        name: args.name.clone(),
        dir: results_dir(args.dir.as_deref(), &args.output.out, &args.name)?,
        device: args.device,
        interval_ms: args.interval_ms,
        model_files,
        thresholds,
        command_line: crate::plan::command_line(),
    })
}
