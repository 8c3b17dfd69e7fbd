//! `memrel mark DIR PHASE`: one phase mark for the live `memrel attach`
//! writing DIR (`attach::live`); an error, and nothing recorded, when none
//! is live there or the phase is unknown.

use std::io::Write;

use anyhow::Result;

use super::ExitStatus;
use crate::attach::live::{append_mark, MarkPhase};
use crate::cli::MarkArgs;

pub fn run(args: &MarkArgs, _out: &mut dyn Write) -> Result<ExitStatus> {
    let phase = MarkPhase::parse(&args.phase)?;
    append_mark(&args.dir, phase, args.model.as_deref())?;
    Ok(ExitStatus::Success)
}
