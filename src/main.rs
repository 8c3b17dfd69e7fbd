//! The `memrel` binary: parse arguments, run the command, map the outcome to
//! an exit code (0 ok, 1 regression, 2 error, 130 / 143 interrupted by
//! SIGINT / SIGTERM). Nothing else lives here.

use std::process::ExitCode;

use clap::Parser;
use memrel::cli::{Cli, Command, ModelCommand};
use memrel::commands;
use memrel::export::{console, table};
use memrel::orchestrator::signals;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("memrel: error: {}", lowercase_chain(&e));
            // Stopped by SIGINT/SIGTERM: that is the outcome, whatever failed after it.
            match signals::received() {
                Some(sig) => ExitCode::from(u8::try_from(signals::exit_code(sig)).unwrap_or(2)),
                None => ExitCode::from(2),
            }
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => {
            let (dir, summary) = commands::run::execute_args(&args, std::env::args().collect())?;
            finish_run(&dir, &summary, &args.output, args.wide)
        }
        Command::Exec(args) => {
            let (dir, summary) = commands::exec::execute_args(&args, std::env::args().collect())?;
            finish_run(&dir, &summary, &args.output, args.wide)
        }
        Command::Compare(args) => {
            let outcome = commands::compare::execute_args(&args, std::env::args().collect())?;
            print!(
                "{}",
                table::plain_as(&outcome.comparison, table::Layout::console(args.wide))
            );
            println!("\nresults: {}", outcome.dir.display());
            if let Some(code) = interrupted_code(&outcome.dir) {
                return Ok(code);
            }
            if let Some(path) = &args.output.export_trace {
                println!("trace: {}", path.display());
            }
            save_baseline(&args.output, &outcome.dir)?;
            let runs: u32 = outcome.comparison.rows.iter().map(|r| r.summary.runs).sum();
            Ok(runs_failed_code(
                outcome.failed_runs,
                runs as usize,
                &outcome.dir,
            ))
        }
        Command::Report(args) => {
            let outcome = commands::report::execute_args(&args)?;
            for d in &outcome.damage {
                eprintln!("memrel: warning: {d}");
            }
            match (&outcome.comparison, &outcome.summary) {
                (Some(c), _) => print!("{}", table::plain(c)),
                (None, Some(s)) => print!("{}", console::summary_table(s)),
                (None, None) => {}
            }
            println!("\nre-rendered: {}", outcome.dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(args) => {
            let status = commands::check::run(&args, &mut std::io::stdout().lock())?;
            Ok(ExitCode::from(status.code()))
        }
        Command::Calibrate(args) => {
            let (calibration, dir) = commands::calibrate::execute_args(&args)?;
            print!("{}", memrel::calibrate::markdown(&calibration));
            println!("\ncalibration: {}", dir.join("calibrate.md").display());
            Ok(if calibration.passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::List(args) => {
            print!("{}", commands::list::render(args.long));
            Ok(ExitCode::SUCCESS)
        }
        Command::Model(ModelCommand::Gen { preset, dir }) => {
            println!("{}", commands::model::gen(&preset, &dir)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Model(ModelCommand::Info { dir }) => {
            println!("{}", commands::model::info(&dir)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker(args) => {
            let code = memrel::worker::main(&args.spec);
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(2)))
        }
    }
}

/// Prints a run's table and where it went, then exports and exit code.
fn finish_run(
    dir: &std::path::Path,
    summary: &memrel::metrics::Summary,
    output: &memrel::cli::OutputArgs,
    wide: bool,
) -> anyhow::Result<ExitCode> {
    print!(
        "{}",
        console::summary_table_as(summary, table::Layout::console(wide))
    );
    println!("\nresults: {}", dir.display());
    if let Some(code) = interrupted_code(dir) {
        return Ok(code);
    }
    if let Some(path) = &output.export_trace {
        memrel::results::export_trace_of(dir, path)?;
        println!("trace: {}", path.display());
    }
    save_baseline(output, dir)?;
    Ok(runs_failed_code(
        summary.runs.iter().filter(|r| r.error.is_some()).count(),
        summary.runs.len(),
        dir,
    ))
}

/// `--save-baseline NAME`: copies the results directory into the baseline store.
fn save_baseline(output: &memrel::cli::OutputArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    if let Some(name) = &output.save_baseline {
        let entry = memrel::baseline::save(dir, &memrel::baseline::root(&output.out), name)?;
        println!("baseline {name}: {}", entry.display());
    }
    Ok(())
}

/// 128 + the signal when SIGINT or SIGTERM stopped the runs: what was
/// measured is saved, but it is no baseline and no trace is exported.
fn interrupted_code(dir: &std::path::Path) -> Option<ExitCode> {
    let sig = signals::received()?;
    eprintln!(
        "memrel: interrupted by {}: the worker was stopped and no further run started; \
         what was measured so far is in {}",
        signals::name(sig),
        dir.display()
    );
    Some(ExitCode::from(
        u8::try_from(signals::exit_code(sig)).unwrap_or(2),
    ))
}

/// Exit code 2 when some runs did not complete (their data is kept), else 0.
fn runs_failed_code(failed: usize, total: usize, dir: &std::path::Path) -> ExitCode {
    if failed == 0 {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "memrel: error: {failed} of {total} runs did not complete; what they measured is kept in {}",
        dir.display()
    );
    ExitCode::from(2)
}

/// The error and its causes, "a: b: c", starting lowercase.
fn lowercase_chain(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().collect::<String>() + chars.as_str(),
        None => text,
    }
}
