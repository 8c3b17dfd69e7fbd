//! `memrel run`: plan the runs of a scenario, execute each in a fresh worker,
//! and write every output after every run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::RunArgs;
use crate::export;
use crate::fsutil::{now_unix_s, utc_stamp};
use crate::metrics::{self, Summary};
use crate::model::source;
use crate::model::synth::cache_dir;
use crate::orchestrator::{self, RunPlan};
use crate::record::{Header, ModelInfo, Record, RunStatus, SCHEMA_VERSION};
use crate::scenario::{self, DeviceSpec, Scenario};
use crate::strategy::{self, Strategy};
use crate::worker::WorkerSpec;

/// What `memrel run` will do, fully validated before anything starts.
pub struct RunOptions {
    pub scenario: Scenario,
    pub strategies: Vec<&'static Strategy>,
    pub out_root: PathBuf,
}

impl RunOptions {
    pub fn from_args(args: &RunArgs) -> Result<RunOptions> {
        let mut scenario = scenario::load(&args.scenario)?;
        if let Some(device) = &args.overrides.device {
            scenario.device = DeviceSpec::parse(device).with_context(|| {
                format!("--device {device:?} is not valid: use cpu, cuda or cuda:N")
            })?;
        }
        if let Some(cycles) = args.overrides.cycles {
            if cycles == 0 {
                bail!("--cycles must be at least 1");
            }
            scenario.cycles = cycles;
        }
        if let Some(repeat) = args.overrides.repeat {
            if repeat == 0 {
                bail!("--repeat must be at least 1");
            }
            scenario.repeat = repeat;
        }
        if let Some(ms) = args.overrides.interval_ms {
            if !(1.0..=10_000.0).contains(&ms) {
                bail!("--interval-ms {ms} is out of range: use 1 to 10000");
            }
            scenario.interval_ms = ms;
        }
        let names = if args.strategies.is_empty() {
            scenario.strategies.clone()
        } else {
            args.strategies.clone()
        };
        let strategies = resolve_strategies(&names, scenario.device)?;
        Ok(RunOptions {
            scenario,
            strategies,
            out_root: args.output.out.clone(),
        })
    }
}

/// Looks strategies up and checks they fit the device and this build.
pub fn resolve_strategies(names: &[String], device: DeviceSpec) -> Result<Vec<&'static Strategy>> {
    check_device_supported(device)?;
    let mut out: Vec<&'static Strategy> = Vec::new();
    for name in names {
        let s = strategy::lookup(name).map_err(|e| anyhow::anyhow!("--strategy: {e}"))?;
        if !s.runs_on(device.is_cuda()) {
            bail!(
                "strategy {:?} is for {} devices and this run is on {device}: pick one of {}",
                s.name,
                s.device,
                strategy::all()
                    .filter(|x| x.runs_on(device.is_cuda()))
                    .map(|x| x.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if s.needs_glibc && !strategy::have_glibc() {
            bail!("strategy {:?} needs glibc (Linux with the GNU C library); this build is not on glibc", s.name);
        }
        strategy::find_library(s)?;
        if !out.iter().any(|x| x.name == s.name) {
            out.push(s);
        }
    }
    Ok(out)
}

/// Refuses CUDA in a build without the `cuda` feature: never a silent CPU fallback.
pub fn check_device_supported(device: DeviceSpec) -> Result<()> {
    if device.is_cuda() && !cfg!(feature = "cuda") {
        bail!(
            "device {device} needs a memrel built with the `cuda` feature: run scripts/build-cuda.sh \
             (or `cargo build --release --features cuda` with a CUDA toolkit); this build runs on cpu only"
        );
    }
    Ok(())
}

/// Runs everything and returns the results directory and summary.
pub fn execute(options: &RunOptions, command_line: Vec<String>) -> Result<(PathBuf, Summary)> {
    let scenario = &options.scenario;
    let base = scenario_base_dir(scenario);
    let cache = cache_dir();
    let mut models = Vec::new();
    let mut infos = Vec::new();
    let inherited = strategy::inherited_allocator_variables();
    if !inherited.is_empty() {
        eprintln!(
            "memrel: ignoring {} from memrel's environment: every worker starts with its \
             strategy's allocator and variables only (glibc for glibc strategies; runs.json \
             records the allocator each run had). To measure another allocator, use its \
             strategy (memrel list)",
            inherited.join(" ")
        );
    }
    for (id, src) in &scenario.models {
        eprintln!("memrel: preparing model {id} ({src})");
        let dir = source::resolve(src, &base, &cache)
            .with_context(|| format!("model {id:?} of scenario {}", scenario.name))?;
        infos.push(ModelInfo {
            id: id.clone(),
            source: src.to_string(),
            dir: dir.dir.display().to_string(),
            architecture: dir.architecture.as_str().to_string(),
            tensor_bytes: dir.tensor_bytes,
            parameters: dir.parameters,
        });
        models.push((id.clone(), dir));
    }
    // From here on, Ctrl-C or SIGTERM stops the worker, saves its run marked
    // interrupted and starts no other (main then exits 130 / 143): a results
    // directory, once made, always gets a record.
    orchestrator::signals::install()?;
    let out_dir = create_out_dir(&options.out_root, &scenario.name)?;
    let exe =
        std::env::current_exe().context("cannot find the memrel executable to start workers")?;
    let interval = Duration::from_secs_f64(scenario.interval_ms / 1e3);
    let mut record = Record {
        header: Header {
            schema_version: SCHEMA_VERSION,
            memrel_version: env!("CARGO_PKG_VERSION").to_string(),
            scenario: scenario.name.clone(),
            scenario_origin: scenario.origin.clone(),
            scenario_toml: scenario.toml_text.clone(),
            device: scenario.device.to_string(),
            command: command_line,
            created_unix_s: now_unix_s(),
            host: crate::host::describe(),
            sampler: "procfs-statm".to_string(),
            interval_s: interval.as_secs_f64(),
            cycles: scenario.cycles,
            retention_threshold_bytes: scenario.thresholds.retention_threshold_bytes,
            models: infos,
        },
        runs: Vec::new(),
    };
    let total_runs = options.strategies.len() as u64 * u64::from(scenario.repeat);
    let cycles = u64::from(scenario.cycles);
    let progress = ProgressBar::new(total_runs * cycles);
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cycles  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut run_number = 0u32;
    let mut summary = metrics::summarize(&record);
    'runs: for repetition in 1..=scenario.repeat {
        for strategy in &options.strategies {
            run_number += 1;
            let spec = WorkerSpec {
                resume: None,
                strategy: strategy.name.to_string(),
                device: scenario.device,
                cycles: scenario.cycles,
                models: models.clone(),
                workload: scenario.workload.clone(),
            };
            let plan = RunPlan {
                run: run_number,
                repetition,
                strategy,
                spec: &spec,
                interval,
                timeout: Duration::from_secs_f64(scenario.timeout_s.max(1.0)),
            };
            let done_before = u64::from(run_number - 1) * cycles;
            progress.set_position(done_before);
            let label = format!(
                "run {run_number}/{total_runs} {} (repetition {repetition})",
                strategy.name
            );
            progress.set_message(label.clone());
            let (run, probe) =
                orchestrator::execute(&exe, &plan, vram_probe(scenario.device), &mut |edge| {
                    progress.set_position(done_before + u64::from(edge.cycle.saturating_sub(1)));
                    progress.set_message(format!(
                        "{label}: cycle {} {}{}",
                        edge.cycle,
                        edge.phase.as_str(),
                        edge.model
                            .as_deref()
                            .map(|m| format!(" {m}"))
                            .unwrap_or_default()
                    ));
                });
            record.header.sampler = probe.to_string();
            if run.meta.status != RunStatus::Completed {
                progress.suspend(|| {
                    eprintln!(
                        "memrel: run {run_number} ({}) did not complete: {}",
                        strategy.name,
                        run.meta.error.as_deref().unwrap_or("unknown error")
                    )
                });
            }
            record.runs.push(run);
            summary = metrics::summarize(&record);
            export::write_run_outputs(&out_dir, &record, &summary)
                .with_context(|| format!("cannot write results into {}", out_dir.display()))?;
            if orchestrator::signals::received().is_some() {
                break 'runs;
            }
        }
    }
    progress.finish_and_clear();
    Ok((out_dir, summary))
}

/// The VRAM probe for a device: NVML in `cuda` builds, none otherwise.
fn vram_probe(device: DeviceSpec) -> Option<Box<dyn crate::sampler::VramProbe>> {
    if !device.is_cuda() {
        return None;
    }
    crate::sampler::vram::open_nvml()
}

/// Relative model paths in a scenario file start from the file's directory.
fn scenario_base_dir(scenario: &Scenario) -> PathBuf {
    if scenario.origin == "builtin" {
        return PathBuf::from(".");
    }
    Path::new(&scenario.origin)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A new, never-reused directory `<root>/<scenario>/<UTC timestamp>[-N]`.
pub fn create_out_dir(root: &Path, scenario: &str) -> Result<PathBuf> {
    let parent = crate::fsutil::join_name(root, "scenario", scenario)?;
    std::fs::create_dir_all(&parent).with_context(|| {
        format!(
            "cannot create {}: pass --out with a writable directory",
            parent.display()
        )
    })?;
    let stamp = utc_stamp(now_unix_s());
    for n in 0..1000 {
        let name = if n == 0 {
            stamp.clone()
        } else {
            format!("{stamp}-{n}")
        };
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    bail!(
        "cannot find a free results directory under {}",
        parent.display()
    )
}
