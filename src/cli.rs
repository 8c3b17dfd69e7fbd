//! Command-line definitions (clap derive). No logic lives here: `main` turns
//! these into typed options and hands them to `commands`. A flag with a
//! type or a range is checked once, by its `value_parser` (at the end of
//! this file), so a command receives a `DeviceSpec`, not text to parse;
//! the parser's message is the whole error (`main` prints it as memrel's).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::protocol::Phase;
use crate::scenario::{DeviceSpec, Overrides};

#[derive(Debug, Parser)]
#[command(
    name = "memrel",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("MEMREL_COMMIT"), ")"),
    about = "Measures whether, how fast and at what cost ML model memory goes back to the system after a model is unloaded",
    long_about = None,
    after_help = "Examples:\n  memrel run                                   # the default scenario (cpu-trim)\n  memrel run --scenario cpu-load-only --strategy drop --strategy malloc-trim --cycles 5\n  memrel compare --scenario cpu-trim --repeat 3  # strategies side by side: compare.png, retained.png, release.png, compare.md\n  memrel compare results/a/<stamp> results/b/<stamp>\n  memrel report results/cpu-trim/<stamp>       # re-render a saved run from its data\n  memrel list --long                           # scenarios, strategies, model presets\n  memrel model gen bert-base ./bert-base       # write a synthetic HuggingFace-layout model"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario: one fresh worker process per strategy and repetition.
    #[command(after_help = RUN_HELP_END)]
    Run(RunArgs),
    /// Compare strategies side by side: run a scenario's matrix, or compare saved results directories.
    #[command(after_help = COMPARE_HELP_END)]
    Compare(CompareArgs),
    /// Advise from saved results: the cheapest strategy that gives each retaining resource back in every run, its price and its setting.
    #[command(after_help = ADVISE_HELP_END)]
    Advise(AdviseArgs),
    /// Measure any program (a PyTorch server, a script): one fresh process per strategy and repetition.
    #[command(after_help = EXEC_HELP_END)]
    Exec(ExecArgs),
    /// Measure a running process memrel did not start (and its descendants) until it exits, Ctrl-C or --duration.
    #[command(after_help = ATTACH_HELP_END)]
    Attach(AttachArgs),
    /// Watch a model server for as long as it runs (--pid, --url's listener, or started with -- CMD): attach with no end of its own, OpenMetrics at /metrics (--metrics), edges from the requests it forwards (--proxy).
    #[command(after_help = WATCH_HELP_END)]
    Watch(WatchArgs),
    /// Drive a model server over its own HTTP API (sleep/wake, load/unload) and measure every request's memory.
    #[command(after_help = DRIVE_HELP_END)]
    Drive(DriveArgs),
    /// Mark a phase of a live `memrel attach` from another shell: `memrel mark DIR load`.
    #[command(after_help = MARK_HELP_END)]
    Mark(MarkArgs),
    /// Re-render every output of a saved run (CSV, JSON, charts, comparison) from its data on disk.
    #[command(after_help = REPORT_HELP_END)]
    Report(ReportArgs),
    /// The regression gate: compare results with a named baseline; exit 1 on a regression.
    #[command(after_help = CHECK_HELP_END)]
    Check(CheckArgs),
    /// Check memrel's numbers against exact allocations (the fake worker): size, peak vs VmHWM, marker timing, a short spike.
    #[command(after_help = CALIBRATE_HELP_END)]
    Calibrate(CalibrateArgs),
    /// List built-in scenarios, strategies and model presets.
    #[command(after_help = "Examples:\n  memrel list\n  memrel list --long")]
    List(ListArgs),
    /// Write or inspect HuggingFace-layout model directories.
    #[command(subcommand)]
    Model(ModelCommand),
    /// List the saved baselines, or show what one covers and how it was made.
    #[command(subcommand)]
    Baseline(BaselineCommand),
    /// Internal: the child process of one run (started by memrel itself).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

// What each command's --help ends with (examples, exit codes), after its
// options: kept here, so that each variant above reads as one line.

const RUN_HELP_END: &str = "Examples:\n  memrel run\n  memrel run --model ./my-checkpoint\n  memrel run --model Qwen/Qwen2.5-0.5B --strategy drop,malloc-trim\n  memrel run --scenario cpu-load-only --strategy drop --strategy malloc-trim --cycles 5\n  memrel run --scenario ./my-scenario.toml --repeat 3 --out /tmp/results\n  memrel run --scenario cpu-all --interval-ms 1";

const COMPARE_HELP_END: &str = "Examples:\n  memrel compare --scenario article-cpu --repeat 3\n  memrel compare --scenario cpu-trim --strategy drop,malloc-trim --cycles 5 --export-trace trace.json\n  memrel compare --scenario ci-gate --save-baseline main\n  memrel compare results/cpu-trim/20261122-040426 results/cpu-trim/20261123-101500\n\nWrites compare.csv, compare.json, compare.md, compare.png, retained.png and release.png: into the\nrun's own results directory with --scenario, into <OUT>/compare/<timestamp> for saved directories.";

const ADVISE_HELP_END: &str = "Examples:\n  memrel compare --scenario cpu-trim --repeat 3\n  memrel advise results/cpu-trim/20261122-040426\n  memrel advise results/a/<stamp> results/b/<stamp>\n\nA strategy needs 3 completed runs to be judged; failed runs never count.\n\nExit codes: 0 advice given, 2 error (no directory, not a results directory).";

const EXEC_HELP_END: &str = "Examples:\n  memrel exec -- python3 serve.py --port 8000\n  memrel exec --strategy drop --strategy malloc-trim --repeat 3 -- python3 load_and_unload.py\n  memrel exec --device cuda --strategy empty-cache --python .venv/bin/python -- python3 infer.py\n  memrel exec --tree --interval-ms 50 -- python3 train.py\n\nThe program marks its phases with the memrel Python module memrel puts on its PYTHONPATH\n(import memrel; with memrel.phase(\"load\", model=\"bert\"): ...; memrel.release()), or by\nwriting the protocol's JSON lines on the descriptor in MEMREL_EVENT_FD\n(docs/guide.md, \"Phase markers\"). Without markers it still gets a full timeline and the metrics\nthat need no phases.\n\nThe program reads memrel's stdin (`echo hi | memrel exec -- cat`); its stdout and stderr are shown\nas they come (--quiet hides them) and their tails kept in runs.json.";

const ATTACH_HELP_END: &str = "Examples:\n  memrel attach 12345\n  memrel attach --dir /tmp/serve-mem --duration 600 12345      # then, in another shell:\n  memrel mark /tmp/serve-mem load; memrel mark /tmp/serve-mem unload; memrel mark /tmp/serve-mem end\n  memrel attach --log serve.log --mark-on 'Loading model=load' --mark-on 'Model unloaded=unload' 12345\n\nA mark begins its phase and ends the one marked before (`end` ends it). SIGINT or SIGTERM ends the\nmeasurement, writes the results and exits 0. `memrel report`, `compare` and `check` read the results\ndirectory like a run's (docs/attach.md).";

const DRIVE_HELP_END: &str = "Examples:\n  memrel drive --server vllm --sleep-level 1 --url http://127.0.0.1:8000 --cycles 3\n  memrel drive --server ollama --model llama3.2 --url http://127.0.0.1:11434\n  memrel drive --server v2 --model iris --url http://127.0.0.1:8080 -- mlserver start models/\n  memrel drive --cycle my-server.toml --url http://127.0.0.1:9000 -- python3 serve.py --port 9000\n  memrel drive --server vllm --repeat 3 --save-baseline main -- vllm serve MODEL --enable-sleep-mode\n  memrel drive --server vllm --budget max_retained_mib=512 --dir out -- vllm serve MODEL --enable-sleep-mode\n  memrel check --baseline main out      # exit 1: more retained than the baseline, or over a budget\n\nWithout --pid or -- CMD it measures the process listening on the URL's port. Writes a run's\nresults directory plus requests.csv (memory at send, answer and settled, late bytes, back to the\nlevel before the load) and processes.csv (docs/servers.md). --repeat N makes N runs in one results directory (each\nrepeat-K/ holds its requests.csv); budgets (--budget, a cycle file's [thresholds]) are kept for\n`memrel check`.\n\nExit codes: 0 every request answered as expected, 2 error (what was measured is kept), 130/143\nstopped by Ctrl-C/SIGTERM (the run recorded as stopped early).";

const WATCH_HELP_END: &str = "Examples:\n  memrel watch --url http://127.0.0.1:8000 --metrics 0.0.0.0:9464   # the listener on :8000\n  memrel watch --pid 12345 --url http://127.0.0.1:8000 --proxy 0.0.0.0:8001 --server vllm\n  memrel watch --url http://127.0.0.1:8000 --proxy 0.0.0.0:8001 --server vllm \\\n      -- vllm serve MODEL --enable-sleep-mode\n\nThe server is named one way: --pid, -- CMD (memrel starts it, its output in server.log, waits until\nit listens on --url's port where --url is given, and stops it at the end: SIGTERM to its process\ngroup, SIGKILL half a second later), or --url alone (the process listening on its port). It ends\nwhen the server exits (its exit status in the header's `ended`) or at SIGINT/SIGTERM: results\nwritten, exit 0 (docs/attach.md).";

const MARK_HELP_END: &str = "Examples:\n  memrel mark /tmp/serve-mem load --model bert\n  memrel mark /tmp/serve-mem unload --model bert\n  memrel mark /tmp/serve-mem end      # ends the phase marked last\n\nExit codes: 0 marked, 2 error (no live measurement in DIR, unknown phase).";

const REPORT_HELP_END: &str = "Examples:\n  memrel report results/cpu-trim/20261122-040426\n  memrel report results/cpu-trim/20261122-040426 --out /tmp/again --export-trace trace.json";

const CHECK_HELP_END: &str = "Examples:\n  memrel run --scenario ci-smoke --repeat 3 --save-baseline main   # 3 runs a strategy\n  memrel check --baseline main --verdict-dir verdict   # re-runs the baseline's scenarios as saved\n  memrel run --scenario ci-smoke --repeat 3            # or judge runs you made (3 a strategy):\n  memrel check --baseline main results/ci-smoke/20261122-040426\n  memrel check --baseline main --complete-runs-only results/ci-smoke/20261122-040426\n\nA baseline needs 3 runs of every strategy (fewer cannot show a regression, so --save-baseline\nrefuses it) unless the scenario budgets every metric the gate judges.\n\nExit codes: 0 no regression, 1 regression or budget exceeded, 2 error (broken evidence:\na run failed, timed out, was killed or is incomplete; a budget nothing could be checked against;\na check that judged nothing, with --lenient too).";

const CALIBRATE_HELP_END: &str = "Examples:\n  memrel calibrate\n  memrel calibrate --interval-ms 1 --sizes-mib 1,16,256,1024\n  memrel calibrate --device cuda\n\nExit codes: 0 every target met, 1 a target missed, 2 error.";

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A built-in scenario name (see `memrel list`) or a path to a scenario TOML file (default: cpu-trim).
    #[arg(short, long, conflicts_with = "model")]
    pub scenario: Option<String>,
    /// Measure this checkpoint with the default scenario's workload and strategies, no TOML file needed: a local HuggingFace-layout directory, a llama-family .gguf file, or a hub repository `org/name` (`org/name@revision`) fetched into the hub cache.
    #[arg(long, value_name = "DIR|ORG/NAME")]
    pub model: Option<String>,
    /// Run only these strategies (repeatable, or comma-separated; NAME=VALUE for one that takes a value, e.g. xla-mem-fraction=0.40); default: the scenario's list.
    #[arg(long = "strategy", value_name = "NAME", value_delimiter = ',')]
    pub strategies: Vec<String>,
    #[command(flatten)]
    pub overrides: ScenarioOverrides,
    /// Trace where the memory still held was allocated (Python's tracemalloc, started at the first load's begin): the top sites by file:line after each cycle's unload and release go to allocations.csv and the console. Programs only (the memrel module); tracemalloc slows allocation and its own memory is in the readings.
    #[arg(long)]
    pub trace_allocations: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// A release strategy (repeatable, or comma-separated; default: drop; NAME=VALUE for one that takes a value, e.g. xla-mem-fraction=0.40). Environment strategies apply as they are; in-process ones run in memrel.release().
    #[arg(long = "strategy", value_name = "NAME", value_delimiter = ',')]
    pub strategies: Vec<String>,
    #[command(flatten)]
    pub overrides: ScenarioOverrides,
    /// Stop a run that takes longer than this many seconds (default: a day).
    #[arg(long, value_name = "S", default_value_t = 86_400.0)]
    pub timeout_s: f64,
    /// The model's weight files the program reads, whose page cache is read at every edge and sampled: a file, or a directory (its .safetensors, .gguf, .bin, .pt, .pth and .onnx files); repeatable.
    #[arg(long = "model-files", value_name = "PATH")]
    pub model_files: Vec<PathBuf>,
    /// The name its results go under (<OUT>/<NAME>/<timestamp>).
    #[arg(long, default_value = "exec")]
    pub name: String,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
    /// Trace where the memory still held was allocated (Python's tracemalloc, started at the first load's begin): the top sites by file:line after each cycle's unload and release go to allocations.csv and the console. Programs only (the memrel module); tracemalloc slows allocation and its own memory is in the readings.
    #[arg(long)]
    pub trace_allocations: bool,
    /// Hide the program's stdout and stderr (shown as they come by default); their last 8 KiB are kept in runs.json either way (stdout_tail, stderr_tail).
    #[arg(long)]
    pub quiet: bool,
    /// The program and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The process to measure (memrel needs its user, or root).
    #[arg(value_name = "PID")]
    pub pid: u32,
    /// The name its results go under (<OUT>/<NAME>/<timestamp>).
    #[arg(long, default_value = "attach")]
    pub name: String,
    #[command(flatten)]
    pub how: MeasureArgs,
}

/// How a running process is measured: `memrel attach`'s and `memrel watch`'s options.
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// Stop after this many seconds (default: when the process exits, or on Ctrl-C / SIGTERM).
    #[arg(long = "duration", value_name = "SECONDS", value_parser = duration_s)]
    pub duration_s: Option<f64>,
    /// Mark PHASE when a line of the --log file matches REGEX (repeatable; the first rule that matches a line wins).
    #[arg(long = "mark-on", value_name = "REGEX=PHASE", requires = "log")]
    pub mark_on: Vec<String>,
    /// The log file to follow for --mark-on, like `tail -F` (from its end; rotation and truncation are followed).
    #[arg(long, value_name = "FILE", requires = "mark_on")]
    pub log: Option<PathBuf>,
    /// Sampling interval in milliseconds, 1 to 10000 (reading a process tree costs ~17 µs per resident MiB).
    #[arg(long, value_name = "MS", default_value_t = 50.0, value_parser = interval_ms)]
    pub interval_ms: f64,
    /// Sample the process alone (its RSS), not its process tree (PSS summed over it and its descendants).
    #[arg(long)]
    pub no_tree: bool,
    /// The model's weight files whose page cache is read at every edge and sampled: a file, or a directory (its .safetensors, .gguf, .bin, .pt, .pth and .onnx files); repeatable.
    #[arg(long = "model-files", value_name = "PATH")]
    pub model_files: Vec<PathBuf>,
    /// Also sample the process's VRAM on this device (cuda or cuda:N; NVML); default cpu: host memory only.
    #[arg(long, default_value = "cpu", value_parser = device)]
    pub device: DeviceSpec,
    /// A budget, as a scenario's [thresholds] key: KEY=VALUE in the key's unit (MiB, MiB per cycle, ms), e.g. max_retained_mib=64; repeatable. Kept in the results, judged by `memrel check` (exit 1 when exceeded).
    #[arg(long = "budget", value_name = "KEY=VALUE")]
    pub budgets: Vec<String>,
    /// Write the results into exactly this directory (created; must be new or empty) instead of <OUT>/<NAME>/<timestamp>.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Keep the samples on disk under SIZE (e.g. 1GiB, 500MB; at least 4MiB): samples.csv is rotated at a quarter of it (the part before the last removed); `memrel watch` also removes its older segments' samples under <OUT>/<NAME>, oldest first, beyond half of it. Edges, cycles and summaries are kept.
    #[arg(long = "max-disk", value_name = "SIZE", value_parser = disk_bytes)]
    pub max_disk_bytes: Option<u64>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The running process to measure (default: the one -- CMD starts, else the one listening on --url's port).
    #[arg(long)]
    pub pid: Option<u32>,
    /// The server's base URL (default http://127.0.0.1:8000): without --pid or -- CMD its process is the one listening on its port; --proxy forwards to it; a server -- CMD starts is waited for until it listens there.
    #[arg(long)]
    pub url: Option<String>,
    /// Serve OpenMetrics at http://LISTEN/metrics (e.g. 0.0.0.0:9464) while it measures: current bytes, each model's last cycle, counters, memrel's own cost (docs/metrics.md).
    #[arg(long, value_name = "LISTEN")]
    pub metrics: Option<String>,
    /// Forward HTTP from LISTEN to --url and mark an edge at each request that matches --server's or --cycle's load/unload/sleep/wake requests.
    #[arg(long, value_name = "LISTEN")]
    pub proxy: Option<String>,
    /// The preset whose requests --proxy marks: vllm, vllm-tags, sglang, ollama or v2 (as `memrel drive --server`).
    #[arg(long, value_name = "NAME", conflicts_with = "cycle")]
    pub server: Option<String>,
    /// A cycle file whose requests --proxy marks (as `memrel drive --cycle`).
    #[arg(long, value_name = "FILE")]
    pub cycle: Option<PathBuf>,
    /// The model a preset's requests name (ollama, v2), as `memrel drive --model`.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Seconds memory is watched after an unload's or a wake's answer before its cycle closes (as `memrel drive --settle`).
    #[arg(long = "settle", value_name = "SECONDS", default_value_t = 2.0, value_parser = seconds("--settle"))]
    pub settle_s: f64,
    /// The name its results go under (<OUT>/<NAME>/<timestamp>).
    #[arg(long, default_value = "watch")]
    pub name: String,
    #[command(flatten)]
    pub ready: ReadyTimeout,
    #[command(flatten)]
    pub how: MeasureArgs,
    /// The server's command, after `--`: memrel starts it (its output in server.log), watches it until it exits or memrel gets SIGINT/SIGTERM, then stops it.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// How long a server memrel waits on may take to be up: drive's and
/// watch's `--ready-timeout`.
#[derive(Debug, Clone, Copy, Args)]
pub struct ReadyTimeout {
    /// How long the server may take to be up: to answer its readiness GET (drive), to listen on --url's port (watch -- CMD).
    #[arg(
        long = "ready-timeout",
        value_name = "SECONDS",
        default_value_t = 600.0,
        value_parser = seconds("--ready-timeout")
    )]
    pub ready_timeout_s: f64,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("shape").required(true).args(["server", "cycle"])))]
pub struct DriveArgs {
    /// A server whose API memrel knows (a preset: src/drive/presets/NAME.toml): vllm (VLLM_SERVER_DEV_MODE=1), vllm-tags (woken by tags), sglang, ollama or v2 (Triton, KServe, MLServer: the Open Inference Protocol's model repository).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// A TOML file listing the cycle's requests (any other server; docs/servers.md).
    #[arg(long, value_name = "FILE")]
    pub cycle: Option<PathBuf>,
    /// The server's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    pub url: String,
    /// Measure this running process (default: the one listening on the URL's port).
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// How many cycles are driven and judged, after the warm-up.
    #[arg(long, default_value_t = 1, value_parser = at_least_one("--cycles", "--cycles 0: drive at least one cycle"))]
    pub cycles: u32,
    /// A strategy to start the server under (repeatable; needs -- CMD): one that works from outside a process (its environment or a preloaded allocator: `memrel list`), or one --strategy-file defines; each gets --repeat runs, all in one results directory.
    #[arg(long = "strategy", value_name = "NAME")]
    pub strategies: Vec<String>,
    /// A TOML file of strategies defined without code ([[strategy]] tables: name, env = { VAR = "value" }, preload = "jemalloc"), named by --strategy.
    #[arg(long = "strategy-file", value_name = "FILE")]
    pub strategy_file: Option<PathBuf>,
    /// Cycles driven first as a warm-up, reported (cycle 0) but not judged, so the server's one-time costs (imports, first allocations) are not counted as retention.
    #[arg(long = "warmup-cycles", value_name = "N", default_value_t = 1)]
    pub warmup_cycles: u32,
    /// vLLM's sleep level: 1 (weights to host memory) or 2 (weights dropped).
    #[arg(long, default_value_t = 1)]
    pub sleep_level: u8,
    /// The model a preset loads and unloads (ollama, v2).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The model's weight files whose page cache is read at every edge and sampled: a file, or a directory (its .safetensors, .gguf, .bin, .pt, .pth and .onnx files); repeatable.
    #[arg(long = "model-files", value_name = "PATH")]
    pub model_files: Vec<PathBuf>,
    /// Seconds memory is read after each answer (a request's own settle_s wins).
    #[arg(long = "settle", value_name = "SECONDS", default_value_t = 2.0, value_parser = seconds("--settle"))]
    pub settle_s: f64,
    #[command(flatten)]
    pub ready: ReadyTimeout,
    /// How long a request may take before it fails (a cycle file's own timeout_s wins).
    #[arg(
        long = "request-timeout",
        value_name = "SECONDS",
        default_value_t = 300.0,
        value_parser = seconds("--request-timeout")
    )]
    pub request_timeout_s: f64,
    /// After SIGTERM, how long a server memrel started has before SIGKILL.
    #[arg(long = "grace", value_name = "SECONDS", default_value_t = 10.0, value_parser = seconds("--grace"))]
    pub grace_s: f64,
    /// Sampling interval in milliseconds, 1 to 10000.
    #[arg(long, value_name = "MS", default_value_t = 50.0, value_parser = interval_ms)]
    pub interval_ms: f64,
    /// Also read VRAM on this device (cuda or cuda:N; NVML); default cpu: host memory only.
    #[arg(long, default_value = "cpu", value_parser = device)]
    pub device: DeviceSpec,
    /// A budget, as a scenario's [thresholds] key: KEY=VALUE in the key's unit (MiB, MiB per cycle, ms), e.g. max_retained_mib=64; repeatable. Kept in the results, judged by `memrel check` (exit 1 when exceeded).
    #[arg(long = "budget", value_name = "KEY=VALUE")]
    pub budgets: Vec<String>,
    /// Runs: each drives the cycles once more as a run of its own (a server memrel starts with -- CMD is started again for each); 3 make a baseline without budgets.
    #[arg(long, default_value_t = 1, value_parser = at_least_one("--repeat", "--repeat 0: make at least one run"))]
    pub repeat: u32,
    /// The name its results go under (<OUT>/<NAME>/<timestamp>).
    #[arg(long, default_value = "drive")]
    pub name: String,
    /// Write the results into exactly this directory (created; must be new or empty).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The server's command, after `--`: memrel starts it, waits until it is ready, and stops it at the end.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct MarkArgs {
    /// The results directory a live `memrel attach` writes.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    #[arg(value_name = "PHASE", help = mark_phases())]
    pub phase: String,
    /// The model the phase is about (as memrel.phase("load", model="bert") names it).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
}

/// How much the console says (shared by run, exec, attach and compare).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct ConsoleArgs {
    /// Print every column of the table (each resource's baseline, floor, peak, loaded, after unload, growth, latency, the times); default: a compact table that fits 100 columns.
    #[arg(long)]
    pub wide: bool,
    /// Also print each resource's verdict per run, its retained after every cycle and every note in full; default: one screen (the table, a line per resource, the first notes).
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

/// Where a run's outputs go (shared by run and compare).
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// The results root: a run writes a new <OUT>/<scenario>/<timestamp>; comparing saved directories writes <OUT>/compare/<timestamp>.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Also write the runs as Chrome trace-event JSON (opens in Perfetto and chrome://tracing).
    #[arg(long, value_name = "FILE")]
    pub export_trace: Option<PathBuf>,
    /// Also save the runs as baseline NAME (<OUT>/baselines/NAME/<scenario>) for `memrel check`.
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// With --save-baseline: replace the scenario's entry even when it covered strategies or resources these runs lack (they are dropped, and named).
    #[arg(long, requires = "save_baseline")]
    pub replace: bool,
}

/// Options that override a scenario's own settings (shared by run, compare and exec).
#[derive(Debug, Clone, Default, Args)]
pub struct ScenarioOverrides {
    /// Cycles per worker process (overrides the scenario).
    #[arg(long, value_parser = at_least_one("--cycles", "--cycles must be at least 1"))]
    pub cycles: Option<u32>,
    /// Worker processes per strategy (overrides the scenario).
    #[arg(long, value_parser = at_least_one("--repeat", "--repeat must be at least 1"))]
    pub repeat: Option<u32>,
    /// Sampling interval in milliseconds, 1 to 10000 (default: the scenario's, usually 10).
    #[arg(long, value_name = "MS", value_parser = interval_ms)]
    pub interval_ms: Option<f64>,
    /// Device: cpu, cuda or cuda:N (overrides the scenario).
    #[arg(long, value_parser = device)]
    pub device: Option<DeviceSpec>,
    /// Spread the runs over these GPUs, one worker per GPU at a time, in parallel (e.g. 0,1; overrides the scenario's `devices`).
    #[arg(long, value_name = "N,M", value_delimiter = ',')]
    pub devices: Option<Vec<u32>>,
    /// The Python interpreter for a program started as python3 or python (e.g. a venv's).
    #[arg(long, value_name = "PATH")]
    pub python: Option<String>,
    /// Sample the program's whole process tree (data-loader workers, …), shared pages counted once (PSS); one reading costs ~17 µs per resident MiB, so use --interval-ms 50 or more for GiB-sized trees.
    #[arg(long)]
    pub tree: bool,
    /// Give each worker its own cgroup under DIR, a cgroup v2 directory delegated to you (memory in its cgroup.subtree_control): the container columns become the worker's alone, with its memory.peak. Default: read the cgroup memrel runs in, read-only (the whole cgroup's numbers).
    #[arg(long, value_name = "DIR")]
    pub cgroup_parent: Option<PathBuf>,
    /// The most memory a worker may have (512M, 2G): its cgroup's memory.max under --cgroup-parent (over it: oom_killed), else its RLIMIT_AS, address space (over it an allocation fails: alloc_failed).
    #[arg(long, value_name = "SIZE")]
    pub memory_limit: Option<String>,
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Sampling interval in milliseconds, 1 to 100.
    #[arg(long, value_name = "MS", default_value_t = 10.0, value_parser = calibrate_interval_ms)]
    pub interval_ms: f64,
    /// The sizes to map, in MiB, comma-separated.
    #[arg(
        long,
        value_name = "A,B,C",
        value_delimiter = ',',
        default_value = "1,16,256,1024",
        value_parser = size_mib
    )]
    pub sizes_mib: Vec<u64>,
    /// The short spike: MiB mapped, touched, held --spike-ms and unmapped.
    #[arg(long, value_name = "MIB", default_value_t = 100)]
    pub spike_mib: u64,
    /// How long the spike is held, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub spike_ms: u64,
    /// Also calibrate device memory on this device (cuda or cuda:N; needs the NVIDIA driver, any build). Default: host memory only.
    #[arg(long, value_name = "DEVICE", default_value = "cpu", value_parser = device)]
    pub device: DeviceSpec,
    /// The results root: the runs go to <OUT>/calibrate-anon, -file (and -vram), the table to <OUT>/calibrate.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The baseline to compare with (made by `memrel run --save-baseline NAME`).
    #[arg(long, value_name = "NAME")]
    pub baseline: String,
    /// Saved results directories to check; none: run the baseline's own scenarios now.
    #[arg(value_name = "RESULTS_DIR")]
    pub dirs: Vec<PathBuf>,
    /// Skip scenarios the baseline lacks (with a warning) instead of failing; a check that then judged nothing is still an error (exit 2).
    #[arg(long)]
    pub lenient: bool,
    /// The results root: baselines are read from <OUT>/baselines, new runs go to <OUT>/<scenario>.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Where verdict.json and verdict.md go (default: the checked results directory).
    #[arg(long, value_name = "DIR")]
    pub verdict_dir: Option<PathBuf>,
    /// Judge only the complete runs: leave out runs that failed, timed out, were killed or are incomplete (every affected verdict says so); default: such runs make the check an error (exit 2).
    #[arg(long)]
    pub complete_runs_only: bool,
    /// Judge runs against a baseline made on another kind of machine (another `machine` key): every verdict row says so; default: such a check is an error (exit 2) naming the facts that differ.
    #[arg(long)]
    pub any_machine: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["scenario", "dirs"])))]
pub struct CompareArgs {
    /// Saved results directories to compare (nothing is run).
    #[arg(value_name = "RESULTS_DIR", conflicts_with_all = ["strategies", "cycles", "repeat", "interval_ms", "device", "save_baseline"])]
    pub dirs: Vec<PathBuf>,
    /// Run this scenario (a built-in name or a TOML path) and compare its strategies.
    #[arg(short, long)]
    pub scenario: Option<String>,
    /// Run only these strategies (repeatable, or comma-separated; NAME=VALUE for one that takes a value, e.g. xla-mem-fraction=0.40); default: the scenario's list.
    // `--strategies a,b`, the old spelling, still works (a hidden alias).
    #[arg(
        long = "strategy",
        alias = "strategies",
        value_name = "NAME",
        value_delimiter = ','
    )]
    pub strategies: Vec<String>,
    #[command(flatten)]
    pub overrides: ScenarioOverrides,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
}

#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// Results directories written by `memrel run` or `memrel compare --scenario`.
    #[arg(value_name = "RESULTS_DIR", required = true)]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A results directory written by `memrel run` or `memrel compare`.
    #[arg(value_name = "RESULTS_DIR")]
    pub dir: PathBuf,
    /// Write into this directory instead of over the saved outputs; with a damaged record (a file missing or cut short), the way to write a repaired copy from what can be read (in place, report refuses it: exit 2).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also write the runs as Chrome trace-event JSON.
    #[arg(long, value_name = "FILE")]
    pub export_trace: Option<PathBuf>,
    /// Print the run's OpenMetrics exposition to stdout and write nothing (hidden: the stepping stone to `memrel watch --metrics`).
    #[arg(long, hide = true, conflicts_with_all = ["out", "export_trace", "metrics"])]
    pub metrics_once: bool,
    /// Serve the run's OpenMetrics at http://LISTEN/metrics until killed, writing nothing (hidden, as --metrics-once).
    #[arg(long, hide = true, value_name = "LISTEN", conflicts_with_all = ["out", "export_trace"])]
    pub metrics: Option<String>,
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
    #[command(
        after_help = "Example:\n  memrel model gen bert-base ./bert-base\n  memrel model gen llama-tiny --gguf --gguf-type q8_0 ./llama-tiny.gguf"
    )]
    Gen {
        /// A preset name (see `memrel list`).
        preset: String,
        /// The directory to write (created if missing; refused if it holds files, unless --force).
        dir: PathBuf,
        /// Write into DIR even if it already holds files (config.json and model.safetensors are replaced).
        #[arg(long)]
        force: bool,
        /// Write one GGUF file at DIR instead (llama-family presets; llama.cpp's names).
        #[arg(long)]
        gguf: bool,
        /// The GGUF tensor type of the 2-D weights: f32, f16, q8_0 or q4_0 (norms stay f32).
        #[arg(long, value_name = "TYPE", requires = "gguf", default_value = "f32")]
        gguf_type: String,
    },
    /// Show what a HuggingFace-layout directory or a GGUF file holds and whether memrel can load it.
    #[command(
        after_help = "Example:\n  memrel model info ./bert-base\n  memrel model info ./llama-tiny.gguf"
    )]
    Info {
        /// A directory with config.json and model.safetensors (or a sharded index), or a .gguf file.
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum BaselineCommand {
    /// The baselines under <OUT>/baselines: their scenarios, when and where they were made.
    #[command(
        after_help = "Example:\n  memrel baseline list\n  memrel baseline list --out ci-results"
    )]
    List {
        /// The results root the baselines are in (<OUT>/baselines).
        #[arg(long, default_value = "results")]
        out: PathBuf,
    },
    /// What baseline NAME covers (scenarios, strategies, runs, resources), the machine and the command that made it.
    #[command(after_help = "Example:\n  memrel baseline show ci")]
    Show {
        /// The baseline's name (made by --save-baseline NAME).
        name: String,
        /// The results root the baselines are in (<OUT>/baselines).
        #[arg(long, default_value = "results")]
        out: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The run's specification, as JSON.
    #[arg(long)]
    pub spec: String,
}

impl From<&ScenarioOverrides> for Overrides {
    fn from(o: &ScenarioOverrides) -> Overrides {
        Overrides {
            cycles: o.cycles,
            repeat: o.repeat,
            interval_ms: o.interval_ms,
            device: o.device,
            devices: o.devices.clone(),
            python: o.python.clone(),
            tree: o.tree,
            cgroup_parent: o.cgroup_parent.clone(),
            memory_limit: o.memory_limit.clone(),
        }
    }
}

// The value parsers: each message names its flag and the fix, and is the
// whole error line (`main` prints a parser's message after `memrel: error: `).

/// `--device`: cpu, cuda or cuda:N.
fn device(text: &str) -> Result<DeviceSpec, String> {
    DeviceSpec::parse(text)
        .ok_or_else(|| format!("--device {text:?} is not valid: use cpu, cuda or cuda:N"))
}

/// `--interval-ms` of run, exec, compare, attach and drive: 1 to 10000.
fn interval_ms(text: &str) -> Result<f64, String> {
    ms_in(text, 10_000.0)
}

/// `calibrate --interval-ms`: 1 to 100.
fn calibrate_interval_ms(text: &str) -> Result<f64, String> {
    ms_in(text, 100.0)
}

/// `--interval-ms` from 1 to `max`.
fn ms_in(text: &str, max: f64) -> Result<f64, String> {
    let ms: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("--interval-ms {text:?} is not a number of milliseconds"))?;
    if !(1.0..=max).contains(&ms) {
        return Err(format!(
            "--interval-ms {ms} is out of range: use 1 to {max}"
        ));
    }
    Ok(ms)
}

/// `calibrate --sizes-mib`: each size from 1 to 16384 MiB.
fn size_mib(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(mib @ 1..=16_384) => Ok(mib),
        _ => Err("--sizes-mib takes sizes from 1 to 16384 MiB, e.g. 1,16,256,1024".to_string()),
    }
}

/// A count of at least 1 (`--cycles`, `--repeat`); 0 is refused with `zero`.
fn at_least_one(
    flag: &'static str,
    zero: &'static str,
) -> impl Fn(&str) -> Result<u32, String> + Clone + Send + Sync + 'static {
    move |text| match text.trim().parse::<u32>() {
        Ok(0) => Err(zero.to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "{flag} {text:?} is not a whole number: use 1 or more"
        )),
    }
}

/// A number of seconds, 0 or more (drive's `--settle`, `--grace`, the timeouts).
fn seconds(
    flag: &'static str,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |text| match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        Ok(s) => Err(format!("{flag} {s} must be a number of seconds, 0 or more")),
        Err(_) => Err(format!(
            "{flag} {text:?} must be a number of seconds, 0 or more"
        )),
    }
}

/// `--max-disk`: a size (`1GiB`, `500MB`, `1048576`), at least 4 MiB.
fn disk_bytes(text: &str) -> Result<u64, String> {
    const LEAST_BYTES: u64 = 4 << 20;
    match parse_size::parse_size(text.trim()) {
        Ok(bytes) if bytes >= LEAST_BYTES => Ok(bytes),
        Ok(_) => Err(format!(
            "--max-disk {text}: too small to hold a sample file's parts: give 4MiB or more"
        )),
        Err(_) => Err(format!(
            "--max-disk {text:?} is not a size: write it as 1GiB, 500MB or a number of bytes"
        )),
    }
}

/// `attach --duration`: a positive number of seconds.
fn duration_s(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        Ok(s) => Err(format!(
            "--duration {s} must be a positive number of seconds"
        )),
        Err(_) => Err(format!(
            "--duration {text:?} must be a positive number of seconds"
        )),
    }
}

/// `mark`'s PHASE help: every phase a mark may begin (`Phase::ALL` but
/// idle, which `end` spells), or end.
fn mark_phases() -> String {
    let names: Vec<&str> = Phase::ALL
        .iter()
        .filter(|p| **p != Phase::Idle)
        .map(|p| p.as_str())
        .collect();
    format!("A phase ({}), or end", names.join(", "))
}
