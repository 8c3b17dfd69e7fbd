//! The `memrel` binary: parse arguments, run the command, map the outcome to
//! an exit code (0 ok, 1 regression, 2 error). Nothing else lives here.

use std::process::ExitCode;

use clap::Parser;
use memrel::cli::{Cli, Command, ModelCommand};
use memrel::commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("memrel: error: {}", lowercase_chain(&e));
            ExitCode::from(2)
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => {
            let options = commands::run::RunOptions::from_args(&args)?;
            let (dir, summary) = commands::run::execute(&options, std::env::args().collect())?;
            print!("{}", memrel::export::console::summary_table(&summary));
            println!("\nresults: {}", dir.display());
            let failed = summary.runs.iter().filter(|r| r.error.is_some()).count();
            if failed > 0 {
                eprintln!("memrel: error: {failed} of {} runs did not complete; what they measured is kept in {}", summary.runs.len(), dir.display());
                return Ok(ExitCode::from(2));
            }
            Ok(ExitCode::SUCCESS)
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

/// The error and its causes, "a: b: c", starting lowercase.
fn lowercase_chain(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().collect::<String>() + chars.as_str(),
        None => text,
    }
}
