//! `memrel attach PID`: checks the options and the process before anything
//! is measured, makes the results directory, measures (`attach::session`)
//! and prints the table and where the results went. SIGINT and SIGTERM end
//! the measurement the way the process exiting does: results written, exit
//! 0 (a program that started memrel stops it this way).

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Result};

use super::{output, ExitStatus};
use crate::attach::follow::{Follower, Rule};
use crate::attach::header::{budgets, Setup};
use crate::attach::session::{self, Job};
use crate::attach::target::Target;
use crate::cli::AttachArgs;
use crate::export::console;
use crate::results::{check_output_args, results_dir};
use crate::signals;

pub fn run(args: &AttachArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let duration = args.duration_s.map(Duration::from_secs_f64);
    let device = args.device;
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
            duration_s: args.duration_s,
            tree: !args.no_tree,
            log: log.as_ref().map(|l| l.path().display().to_string()),
            ..Setup::new(
                &args.name,
                &target,
                device,
                args.interval_ms,
                crate::attach::model_files(&args.model_files)?,
                thresholds,
                crate::plan::command_line(),
            )
        },
        duration,
        rules,
        log,
        dir: dir.clone(),
        driver: None,
    };
    let measured = session::measure(job)?;
    write!(
        out,
        "{}",
        console::summary_table_as(&measured.summary, output::view(args.console))
    )?;
    output::finish_measured(out, &measured, &args.output, output::Measuring::Attached)
}
