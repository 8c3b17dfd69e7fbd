//! The `memrel` binary: parse the arguments, run the one command they name
//! with stdout as its writer, and turn how it ended (`commands::ExitStatus`)
//! into the exit code: 0 ok, 1 regression, 2 error, 130 / 143 interrupted by
//! SIGINT / SIGTERM. Nothing is printed here but the error line.

use std::process::ExitCode;

use clap::Parser;
use memrel::cli::{Cli, Command};
use memrel::commands::{self, output::Stdout, ExitStatus};
use memrel::signals;

fn main() -> ExitCode {
    // clap reads std::env::args_os: a path that is not UTF-8 stays a path.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return refused(e),
    };
    let out = &mut Stdout::default();
    let result = match &cli.command {
        Command::Run(args) => commands::run::run(args, out),
        Command::Exec(args) => commands::exec::run(args, out),
        Command::Compare(args) => commands::compare::run(args, out),
        Command::Advise(args) => commands::advise::run(args, out),
        Command::Attach(args) => commands::attach::run(args, out),
        Command::Watch(args) => commands::watch::run(args, out),
        Command::Drive(args) => commands::drive::run(args, out),
        Command::Mark(args) => commands::mark::run(args, out),
        Command::Report(args) => commands::report::run(args, out),
        Command::Check(args) => commands::check::run(args, out),
        Command::Calibrate(args) => commands::calibrate::run(args, out),
        Command::List(args) => commands::list::run(args, out),
        Command::Model(command) => commands::model::run(command, out),
        Command::Baseline(command) => commands::baseline::run(command, out),
        Command::Worker(args) => {
            let code = memrel::worker::main(&args.spec);
            return ExitCode::from(u8::try_from(code).unwrap_or(2));
        }
    };
    match result {
        Ok(status) => ExitCode::from(status.code()),
        // The reader went away (`memrel list | head -1`): not an error.
        Err(e) if broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memrel: error: {}", lowercase_chain(&e));
            // Stopped by SIGINT/SIGTERM: that is the outcome, whatever failed after it.
            let status = signals::received().map_or(ExitStatus::Error, ExitStatus::Interrupted);
            ExitCode::from(status.code())
        }
    }
}

/// A command line clap refused: a flag's value parser (`cli.rs`) wrote the
/// whole message, said as memrel says an error (exit 2); clap says the rest
/// (usage, `--help`, `--version`) itself.
fn refused(e: clap::Error) -> ExitCode {
    use std::error::Error;
    match (e.kind(), e.source()) {
        (clap::error::ErrorKind::ValueValidation, Some(why)) => {
            eprintln!("memrel: error: {why}");
            ExitCode::from(ExitStatus::Error.code())
        }
        _ => e.exit(),
    }
}

/// Whether a broken pipe caused the error (ripgrep's test): stdout swallows
/// its own, this catches one met on any other writer.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
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
