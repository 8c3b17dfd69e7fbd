//! `memrel attach PID`: checks the options and the process before anything
//! is measured, makes the results directory, measures (`attach::session`)
//! and prints the table and where the results went. SIGINT and SIGTERM end
//! the measurement the way the process exiting does: results written, exit
//! 0 (a program that started memrel stops it this way).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};

use super::{output, ExitStatus};
use crate::attach::follow::{Follower, Rule};
use crate::attach::header::{budgets, Setup};
use crate::attach::live_metrics::SharedState;
use crate::attach::session::{self, Job};
use crate::attach::target::Target;
use crate::cli::AttachArgs;
use crate::export::console;
use crate::metrics::measured::Measured;
use crate::results::{check_output_args, results_dir};
use crate::signals;

/// `memrel attach` as the arguments ask: measures the process, prints the
/// table and where the results went to `out`.
pub fn run(args: &AttachArgs, out: &mut dyn Write) -> Result<ExitStatus> {
    let mut start = |_: &Path| -> Result<Begun> {
        Ok(Begun {
            keep: Box::new(()),
            pid: None,
        })
    };
    run_with(args, Some(args.pid), None, &mut start, out)
}

/// What `run_with`'s `start` began once the results directory exists.
pub struct Begun {
    /// Lives until the measurement ends (a proxy, a server it started).
    pub keep: Box<dyn std::any::Any>,
    /// The process it started, to measure (`memrel watch -- CMD`).
    pub pid: Option<u32>,
}

/// `memrel attach` (and `memrel watch`): the process `pid` (checked before
/// anything is written), or, where it is `None`, the one `start` starts;
/// `start` is called with the results directory once it exists, before the
/// measurement. `metrics`: the state kept current while it measures.
pub fn run_with(
    args: &AttachArgs,
    pid: Option<u32>,
    metrics: Option<SharedState>,
    start: &mut dyn FnMut(&Path) -> Result<Begun>,
    out: &mut dyn Write,
) -> Result<ExitStatus> {
    let options = options(args)?;
    let named = pid.map(Target::open).transpose()?;
    let dir = results_dir(args.how.dir.as_deref(), &args.how.output.out, &args.name)?;
    signals::install()?;
    let begun = start(&dir)?;
    let target = match (named, begun.pid) {
        (Some(target), _) => target,
        (None, Some(pid)) => Target::open(pid)?,
        (None, None) => bail!("no process to measure: name its pid"),
    };
    let measured = measure(args, options, &target, dir, metrics)?;
    drop(begun);
    write!(
        out,
        "{}",
        console::summary_table_as(&measured.summary, output::view(args.how.console))
    )?;
    output::finish_measured(
        out,
        &measured,
        &args.how.output,
        output::Measuring::Attached,
    )
}

/// What the flags ask, checked before the process is looked at: the
/// device's VRAM can be read, the rules, the log, the budgets.
struct AttachOptions {
    rules: Vec<Rule>,
    log: Option<Follower>,
    /// The budgets, as a scenario's [thresholds] keys and values.
    thresholds: Vec<(String, f64)>,
}

fn options(args: &AttachArgs) -> Result<AttachOptions> {
    let args = &args.how;
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
    Ok(AttachOptions {
        rules,
        log,
        thresholds,
    })
}

/// Under `--max-disk`, samples.csv and its rotated part take a quarter of
/// the cap each (a watch's older segments the other half).
pub fn sample_part_bytes(max_disk_bytes: u64) -> u64 {
    max_disk_bytes / 4
}

/// Measures `target` into `dir` until it exits, `--duration` passes or a
/// signal comes.
fn measure(
    args: &AttachArgs,
    options: AttachOptions,
    target: &Target,
    dir: PathBuf,
    metrics: Option<SharedState>,
) -> Result<Measured> {
    let AttachOptions {
        rules,
        log,
        thresholds,
    } = options;
    let job = Job {
        setup: Setup {
            duration_s: args.how.duration_s,
            tree: !args.how.no_tree,
            log: log.as_ref().map(|l| l.path().display().to_string()),
            ..Setup::new(
                &args.name,
                target,
                args.how.device,
                args.how.interval_ms,
                crate::attach::model_files(&args.how.model_files)?,
                thresholds,
                crate::plan::command_line(),
            )
        },
        duration: args.how.duration_s.map(Duration::from_secs_f64),
        rules,
        log,
        dir,
        driver: None,
        metrics,
        sample_part_bytes: args.how.max_disk_bytes.map(sample_part_bytes),
    };
    session::measure(job)
}
