//! One thin adapter per subcommand, each of one shape:
//! `run(&args, out: &mut dyn Write) -> Result<ExitStatus>`: options in, its
//! results printed to `out` (warnings and errors to stderr), how it ended
//! out. What they share lives outside: running runs in `plan`, results
//! directories in `results`, the lines after a run in [`output`]; no command
//! calls into another command's module.

pub mod advise;
pub mod attach;
pub mod baseline;
pub mod calibrate;
pub mod check;
pub mod compare;
pub mod drive;
pub mod exec;
pub mod list;
pub mod mark;
pub mod model;
pub mod output;
pub mod report;
pub mod run;
pub mod watch;

/// How a command ended; `main` turns it into the process's exit code. Every
/// command returns one (uv's `ExitStatus`), so main needs no per-command arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: done; nothing regressed, every target met.
    Success,
    /// 1: a regression, a budget exceeded, a calibration target missed.
    Failure,
    /// 2: an error: runs that did not complete, evidence that cannot be judged.
    Error,
    /// 127: the program `memrel exec` was to run was not found (as a
    /// shell says it); nothing was run.
    NotFound,
    /// 128 + N: stopped by signal N (SIGINT 130, SIGTERM 143); what was
    /// measured is kept.
    Interrupted(i32),
}

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Error => 2,
            ExitStatus::NotFound => 127,
            ExitStatus::Interrupted(sig) => u8::try_from(128 + sig).unwrap_or(2),
        }
    }
}

/// `Interrupted` when SIGINT or SIGTERM stopped the runs (saying on stderr
/// where what was measured went): such results are no baseline and get no
/// trace.
pub fn interrupted(dir: &std::path::Path) -> Option<ExitStatus> {
    use crate::signals;
    let sig = signals::received()?;
    eprintln!(
        "memrel: interrupted by {}: the worker was stopped and no further run started; \
         what was measured so far is in {}",
        signals::name(sig),
        dir.display()
    );
    Some(ExitStatus::Interrupted(sig))
}
