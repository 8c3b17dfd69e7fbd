//! `memrel attach PID`: checks the options and the process before anything
//! is measured, makes the results directory, measures (`attach::session`)
//! and prints the table and where the results went. SIGINT and SIGTERM end
//! the measurement the way the process exiting does: results written, exit
//! 0 (a program that started memrel stops it this way).

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::{output, ExitStatus};
use crate::attach::follow::{Follower, Rule};
use crate::attach::header::{budgets, Setup};
use crate::attach::session::{self, Job};
use crate::attach::target::Target;
use crate::cli::AttachArgs;
use crate::export::console;
use crate::results::{check_output_args, results_dir};
use crate::scenario::DeviceSpec;
use crate::signals;

pub fn run(args: &AttachArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    if !(1.0..=10_000.0).contains(&args.interval_ms) {
        bail!(
            "--interval-ms {} is out of range: use 1 to 10000",
            args.interval_ms
        );
    }
    let duration = match args.duration_s {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            bail!("--duration {s} must be a positive number of seconds")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let device = DeviceSpec::parse(&args.device).with_context(|| {
        format!(
            "--device {:?} is not valid: use cpu, cuda or cuda:N",
            args.device
        )
    })?;
    if device.is_cuda() {
        // A VRAM series was asked for: without NVML there would be none.
        if let Err(why) = crate::sampler::nvml::NvmlProbe::open() {
            bail!("--device {device}: cannot sample VRAM: {why}");
        }
    }
    let rules = args
        .mark_on
        .iter()
        .map(|r| Rule::parse(r))
        .collect::<Result<Vec<_>>>()?;
    let log = args.log.as_deref().map(Follower::open).transpose()?;
    let thresholds = budgets(&args.budgets, None, device)?;
    check_output_args(&args.output)?;
    let target = Target::open(args.pid)?;
    let dir = results_dir(args.dir.as_deref(), &args.output.out, &args.name)?;
    signals::install()?;
    let job = Job {
        setup: Setup {
            strategy: crate::attach::header::STRATEGY,
            strategies: Vec::new(),
            name: &args.name,
            target: &target,
            device,
            interval_ms: args.interval_ms,
            duration_s: args.duration_s,
            tree: !args.no_tree,
            log: log.as_ref().map(|l| l.path().display().to_string()),
            command_line: crate::plan::command_line(),
            model_files: crate::attach::model_files(&args.model_files)?,
            description: None,
            thresholds,
        },
        duration,
        rules,
        log,
        dir: dir.clone(),
        driver: None,
    };
    let (record, summary) = session::measure(job)?;
    write!(
        out,
        "{}",
        console::summary_table_as(&summary, args.console.view())
    )?;
    output::finish_measured(
        out,
        &dir,
        (&record, &summary),
        &args.output,
        output::Measured::Attached,
    )
}
