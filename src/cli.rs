//! Command-line definitions (clap derive). No logic lives here: `main` turns
//! these into typed options and hands them to `commands`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "memrel",
    version,
    about = "Measures whether, how fast and at what cost ML model memory goes back to the system after a model is unloaded",
    long_about = None,
    after_help = "Examples:\n  memrel run                                   # the default scenario (cpu-trim)\n  memrel run --scenario cpu-load-only --strategy drop --strategy malloc-trim --cycles 5\n  memrel list --long                           # scenarios, strategies, model presets\n  memrel model gen bert-base ./bert-base       # write a synthetic HuggingFace-layout model"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario: one fresh worker process per strategy and repetition.
    #[command(after_help = "Examples:\n  memrel run\n  memrel run --scenario cpu-load-only --strategy drop --strategy malloc-trim --cycles 5\n  memrel run --scenario ./my-scenario.toml --repeat 3 --out /tmp/results\n  memrel run --scenario cpu-all --interval-ms 1")]
    Run(RunArgs),
    /// List built-in scenarios, strategies and model presets.
    #[command(after_help = "Examples:\n  memrel list\n  memrel list --long")]
    List(ListArgs),
    /// Write or inspect HuggingFace-layout model directories.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Internal: the child process of one run (started by memrel itself).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A built-in scenario name (see `memrel list`) or a path to a scenario TOML file.
    #[arg(short, long, default_value = "cpu-trim")]
    pub scenario: String,
    /// Run only these strategies (repeatable); default: the scenario's list.
    #[arg(long = "strategy", value_name = "NAME")]
    pub strategies: Vec<String>,
    /// Cycles per worker process (overrides the scenario).
    #[arg(long)]
    pub cycles: Option<u32>,
    /// Worker processes per strategy (overrides the scenario).
    #[arg(long)]
    pub repeat: Option<u32>,
    /// Sampling interval in milliseconds, 1 to 10000 (default: the scenario's, usually 10).
    #[arg(long, value_name = "MS")]
    pub interval_ms: Option<f64>,
    /// Device: cpu, cuda or cuda:N (overrides the scenario).
    #[arg(long)]
    pub device: Option<String>,
    /// Where results go: a new directory <OUT>/<scenario>/<timestamp> is created.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Explain each strategy: what it does and why it works or does not.
    #[arg(long)]
    pub long: bool,
}

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Write a synthetic model (config.json + model.safetensors, seeded weights) into DIR.
    #[command(after_help = "Example:\n  memrel model gen bert-base ./bert-base")]
    Gen {
        /// A preset name (see `memrel list`).
        preset: String,
        /// The directory to write (created if missing).
        dir: PathBuf,
    },
    /// Show what a HuggingFace-layout directory holds and whether memrel can load it.
    #[command(after_help = "Example:\n  memrel model info ./bert-base")]
    Info {
        /// A directory with config.json and model.safetensors (or a sharded index).
        dir: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The run's specification, as JSON.
    #[arg(long)]
    pub spec: String,
}
