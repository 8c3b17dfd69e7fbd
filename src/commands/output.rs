//! What the commands share in printing: the lines run, exec and compare
//! print after their table (results, trace, baseline) and how their runs
//! ended, the same for attach and drive (with their budgets), and stdout as
//! a writer that a reader closing the pipe early cannot fail.
//!
//! Results go to the writer a command is given; warnings and errors go to
//! stderr. Nothing here measures or decides a number.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Result;

use super::ExitStatus;
use crate::baseline;
use crate::cli::{ConsoleArgs, OutputArgs};
use crate::export::console;
use crate::metrics::advice::Advice;
use crate::metrics::measured::Measured;
use crate::metrics::Summary;
use crate::record::{Header, Record};
use crate::results;

/// How much the console says, as `--wide` and `--verbose` ask.
pub fn view(console: ConsoleArgs) -> console::View {
    console::View::console(console.wide, console.verbose)
}

/// After `memrel run` or `memrel exec`: the run's table, the advice where
/// asked (`run`), then [`finish`] (the trace and the baseline made from the
/// measurement as it is).
pub fn finish_run(
    out: &mut dyn Write,
    measured: &Measured,
    output: &OutputArgs,
    view: console::View,
    advice: bool,
) -> Result<ExitStatus> {
    let summary = &measured.summary;
    write!(out, "{}", console::summary_table_as(summary, view))?;
    write!(out, "{}", crate::export::sleep::console(summary))?;
    allocations(out, &measured.dir)?;
    if advice {
        advise(out, &[summary], &[], &[measured.dir.as_path()])?;
    }
    let failed = summary.runs.iter().filter(|r| r.error.is_some()).count();
    let export_trace = |path: &Path| results::export_trace(measured, path);
    finish(
        out,
        (&measured.dir, Some(measured)),
        output,
        &export_trace,
        (failed, summary.runs.len()),
    )
}

/// The sites still holding memory where `dir` has an allocations.csv
/// (`--trace-allocations`); a file that cannot be read is said on stderr.
pub fn allocations(out: &mut dyn Write, dir: &Path) -> Result<()> {
    match crate::record::allocations::read(dir) {
        Ok(sites) => write!(out, "{}", crate::export::allocations::console(&sites))?,
        Err(e) => eprintln!("memrel: warning: {e:#}"),
    }
    Ok(())
}

/// Where the results went (`dir`); unless SIGINT or SIGTERM stopped the
/// runs (what was measured is no baseline and gets no trace): the trace
/// (`export_trace` writes it), the baseline (of `measured`, the runs just
/// made; `None` for saved directories compared, which are none), and how
/// the runs ended, `runs` being (did not complete, all).
pub fn finish(
    out: &mut dyn Write,
    (dir, measured): (&Path, Option<&Measured>),
    output: &OutputArgs,
    export_trace: &dyn Fn(&Path) -> Result<()>,
    runs: (usize, usize),
) -> Result<ExitStatus> {
    writeln!(out, "\nresults: {}", dir.display())?;
    if let Some(status) = super::interrupted(dir) {
        return Ok(status);
    }
    if let Some(path) = &output.export_trace {
        export_trace(path)?;
        writeln!(out, "trace: {}", path.display())?;
    }
    if let Some(measured) = measured {
        save_baseline(out, measured, output)?;
    }
    Ok(runs_ended(runs, dir))
}

/// `--save-baseline NAME`: `measured` saved as that baseline, where it went
/// said (and on stderr what a `--replace` dropped).
fn save_baseline(out: &mut dyn Write, measured: &Measured, output: &OutputArgs) -> Result<()> {
    if let Some(name) = &output.save_baseline {
        let saved = baseline::save(measured, &baseline::root(&output.out), name, output.replace)?;
        if !saved.dropped.is_empty() {
            eprintln!(
                "memrel: baseline {name}: replaced; dropped {}",
                saved.dropped.join(", ")
            );
        }
        writeln!(out, "baseline {name}: {}", saved.entry.display())?;
    }
    Ok(())
}

/// Which command measured a process it did not start as a run: the words
/// of its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measuring<'a> {
    /// `memrel attach`: the process ended the measurement, or a signal did.
    Attached,
    /// `memrel drive`: a request that failed ends it; where its requests
    /// are (`requests.csv`, or each repeat's) named after the results.
    Driven(&'a str),
}

/// After `memrel attach` or `memrel drive` (its table printed): the budget
/// rows (`--budget`, a cycle file's `[thresholds]`) as `memrel check` will
/// judge them, where the results went, the trace, the baseline, and how the
/// measurement ended (an error said on stderr, what was measured kept).
pub fn finish_measured(
    out: &mut dyn Write,
    measured: &Measured,
    output: &OutputArgs,
    how: Measuring<'_>,
) -> Result<ExitStatus> {
    let Measured {
        dir,
        record,
        summary,
    } = measured;
    let unjudged = budget_rows(out, record, summary)?;
    match how {
        Measuring::Attached => writeln!(out, "\nresults: {}", dir.display())?,
        Measuring::Driven(requests) => writeln!(
            out,
            "\nresults: {} ({requests}: every request)",
            dir.display()
        )?,
    }
    if let Some(path) = &output.export_trace {
        results::export_trace(measured, path)?;
        writeln!(out, "trace: {}", path.display())?;
    }
    save_baseline(out, measured, output)?;
    if let Some(error) = summary.runs.iter().find_map(|r| r.error.as_ref()) {
        let (lead, kept) = match how {
            Measuring::Attached => (
                "the measurement did not complete: ",
                "what was measured is kept",
            ),
            Measuring::Driven(_) => ("", "what was measured so far is kept"),
        };
        eprintln!("memrel: error: {lead}{error}; {kept} in {}", dir.display());
        return Ok(ExitStatus::Error);
    }
    // A budget that could not be judged is not a pass (`memrel check`
    // would exit 2 on it too).
    if let Some(note) = unjudged.first() {
        eprintln!(
            "memrel: error: {} of the budgets could not be judged: {note}; remove the budget, \
             or measure what it needs (the results are kept in {})",
            unjudged.len(),
            dir.display()
        );
        return Ok(ExitStatus::Error);
    }
    Ok(ExitStatus::Success)
}

/// One line per budget of the record's scenario, as the gate judges it
/// (`memrel check` exits 1 on `over-budget`, 2 on `error`); nothing
/// without budgets. Returns the notes of the budgets it could not judge.
fn budget_rows(out: &mut dyn Write, record: &Record, summary: &Summary) -> Result<Vec<String>> {
    let header = &record.header;
    let scenario = crate::scenario::Scenario::of_header(header)?;
    let rows = crate::gate::budgets(summary, &scenario.thresholds);
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    writeln!(out)?;
    let mut unjudged = Vec::new();
    for v in rows {
        writeln!(
            out,
            "budget ({}): {}: {}",
            v.resource,
            v.note,
            v.verdict.as_str()
        )?;
        if v.verdict == crate::gate::Verdict::Error {
            unjudged.push(format!("budget ({}): {}", v.resource, v.note));
        }
    }
    Ok(unjudged)
}

/// The last lines of `run` and `compare` before where the results went:
/// the advice of `summaries` (`memrel advise`; `headers` are the records'
/// where they are drives), each line `advice: …`; nothing where the runs
/// were stopped by SIGINT or SIGTERM.
pub fn advise(
    out: &mut dyn Write,
    summaries: &[&Summary],
    headers: &[&Header],
    dirs: &[&Path],
) -> Result<()> {
    if crate::signals::received().is_some() {
        return Ok(());
    }
    let mut advice = crate::metrics::advice::advise(summaries);
    on_the_servers_command_line(&mut advice, headers);
    let text = crate::export::advice::text(&advice) + &mechanism_advice(summaries, headers, dirs);
    let mut first = true;
    for line in text.lines() {
        if first {
            writeln!(out)?;
            first = false;
        }
        writeln!(out, "advice: {line}")?;
    }
    Ok(())
}

/// `memrel advise`'s lines for each mechanism that holds retained memory
/// (`metrics::knob`); the command that would price an unmeasured knob is the
/// first record's command with the knob's strategy. Live bytes on the host
/// name their top allocation sites where `dirs` hold an allocations.csv
/// (`--trace-allocations`).
pub fn mechanism_advice(summaries: &[&Summary], headers: &[&Header], dirs: &[&Path]) -> String {
    let advice = crate::metrics::knob::advise(summaries);
    let sites: Vec<crate::record::allocations::Site> = dirs
        .iter()
        .filter_map(|d| crate::record::allocations::read(d).ok())
        .flatten()
        .collect();
    let command: Vec<String> = headers
        .first()
        .map(|h| h.command.clone())
        .unwrap_or_default();
    let rerun = |strategy: &str| {
        if command.is_empty() {
            format!("memrel … --strategy {strategy}")
        } else {
            crate::export::why::rerun_with(&command, strategy)
        }
    };
    let strategy = advice.first().map(|a| a.strategy.as_str()).unwrap_or("");
    let of_strategy: Vec<crate::record::allocations::Site> = sites
        .into_iter()
        .filter(|s| s.strategy == strategy)
        .collect();
    let top = crate::record::allocations::last_of_each_run(&of_strategy)
        .into_iter()
        .next()
        .unwrap_or_default();
    crate::export::why::advice_text(&advice, &rerun, &top)
}

/// `Error` (saying so on stderr) when some runs did not complete (their data
/// is kept), else `Success`.
fn runs_ended((failed, total): (usize, usize), dir: &Path) -> ExitStatus {
    if failed == 0 {
        return ExitStatus::Success;
    }
    eprintln!(
        "memrel: error: {failed} of {total} runs did not complete; what they measured is kept in {}",
        dir.display()
    );
    ExitStatus::Error
}

/// Stdout for the commands: once the reader has gone (`memrel list | head
/// -1`), every later write succeeds without writing, so the command still
/// finishes its work (a baseline saved, a trace written) and ends with its
/// own status, and nothing is said about the pipe.
#[derive(Debug, Default)]
pub struct Stdout {
    /// The reader closed the pipe: nothing more is written.
    gone: bool,
}

impl Stdout {
    fn quiet(&mut self, result: io::Result<usize>, len: usize) -> io::Result<usize> {
        match result {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.gone = true;
                Ok(len)
            }
            other => other,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.gone {
            return Ok(buf.len());
        }
        let result = io::stdout().write(buf);
        self.quiet(result, buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.gone {
            return Ok(());
        }
        let result = io::stdout().flush().map(|()| 0);
        self.quiet(result, 0).map(|_| ())
    }
}

/// Drives of one server (every header a drive's): each setting as it goes on
/// the server's command line (what a server can be given from outside), not
/// a call inside it. The server's command: what followed `--` where memrel
/// started it, else the running process's arguments.
pub fn on_the_servers_command_line(advice: &mut Advice, headers: &[&Header]) {
    let servers: Vec<&[String]> = headers
        .iter()
        .filter(|h| h.command.get(1).is_some_and(|c| c == "drive"))
        .filter_map(|h| match h.command.iter().position(|a| a == "--") {
            Some(i) => Some(&h.command[i + 1..]),
            None => h.attached.as_ref().map(|a| a.argv.as_slice()),
        })
        .collect();
    if servers.is_empty() || servers.len() != headers.len() {
        return;
    }
    if let (Some(argv), Advice::Resources { resources, .. }) = (servers.first(), advice) {
        for r in resources {
            r.pick.setting = crate::strategy::lookup(&r.pick.strategy)
                .ok()
                .and_then(|s| s.command_line(argv));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_success_and_silences_later_writes() {
        let mut out = Stdout::default();
        let broken = Err(io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(out.quiet(broken, 5).unwrap(), 5);
        assert!(out.gone);
        assert_eq!(out.write(b"abc").unwrap(), 3);
        out.flush().unwrap();
        let other = Err(io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(Stdout::default().quiet(other, 1).is_err());
    }
}
