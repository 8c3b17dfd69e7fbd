//! A scenario × its strategies × repetitions → the runs to make, and making
//! them: the one place that runs anything (used by `run`, `compare`, `check`
//! and `exec`). Each run is a fresh process of the scenario's worker plug
//! (candle, fake or a program); samples and phase edges go to disk as they
//! are taken (`record::live`) and every output is written after every run,
//! so a crash, a kill or Ctrl-C never loses what was measured. `lanes`
//! spreads runs over several GPUs; `rerun` makes again the runs a baseline
//! was saved from, for `memrel check` without directories.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::export;
use crate::metrics::measured::Measured;
use crate::metrics::{self, Summary};
use crate::model::inspect::{ModelDir, WeightFormat};
use crate::model::spec::{FakeModel, ModelSource};
use crate::model::synth::cache_dir;
use crate::model::{gguf, source};
use crate::orchestrator::{self, RunPlan};
use crate::protocol::Check;
use crate::record::live::LiveRun;
use crate::record::{
    Header, ModelInfo, PageCacheInfo, Program, Record, RunMeta, RunRecord, RunStatus, WeightFile,
};
use crate::results::create_out_dir;
use crate::sampler::page_cache;
use crate::scenario::{DeviceSpec, Overrides, Scenario, WorkerKind};
use crate::strategy::{self, Strategy};
use crate::worker::command::{python_module_dir, CommandSpec, ProgramIo};
use crate::worker::{Plug, WorkerSpec};

mod allocations;
mod lanes;
pub mod rerun;

/// What will run, fully validated before anything starts.
pub struct Plan {
    pub scenario: Scenario,
    pub strategies: Vec<&'static Strategy>,
    pub out_root: PathBuf,
    /// The interpreter for a command that starts with `python3` or `python`.
    pub python: Option<String>,
    /// Sample a program's whole process tree (see `sampler::tree`).
    pub tree: bool,
    /// Where a program runs and its relative paths start (default: the
    /// scenario file's directory).
    pub cwd: Option<PathBuf>,
    /// A program's stdin and output (`memrel exec` passes them through).
    pub program_io: ProgramIo,
    /// GPUs the runs are spread over in parallel (`lanes`); fewer than two:
    /// one run at a time on the scenario's device.
    pub devices: Vec<u32>,
    /// `--cgroup-parent` and `--memory-limit` (see `cgroup`).
    pub cgroup: crate::cgroup::setup::Setup,
    /// `--trace-allocations`: each run's program traces with tracemalloc
    /// (set by [`Plan::trace_allocations`], which refuses memrel's worker).
    trace_allocations: bool,
}

/// The command line as runs.json records it: each argument as text, a byte
/// that is not UTF-8 (a path's) written as U+FFFD.
pub fn command_line() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

impl Plan {
    /// A plan for `scenario` with `names` (empty: the scenario's strategies)
    /// and the command line's overrides applied.
    pub fn new(
        mut scenario: Scenario,
        names: &[String],
        overrides: &Overrides,
        out_root: &Path,
    ) -> Result<Plan> {
        overrides.apply(&mut scenario).map_err(anyhow::Error::msg)?;
        if overrides.tree && !matches!(scenario.worker, WorkerKind::Command(_)) {
            bail!("--tree samples a program's process tree: it applies to memrel exec and scenarios with a command");
        }
        let names = if names.is_empty() {
            scenario.strategies.clone()
        } else {
            names.to_vec()
        };
        let strategies = resolve_strategies(&names, &scenario)?;
        let cgroup = crate::cgroup::setup::Setup::from_flags(
            overrides.cgroup_parent.as_deref(),
            overrides.memory_limit.as_deref(),
        )
        .map_err(anyhow::Error::msg)?;
        Ok(Plan {
            strategies,
            out_root: out_root.to_path_buf(),
            python: overrides.python.clone(),
            tree: overrides.tree,
            cwd: None,
            program_io: ProgramIo::default(),
            cgroup,
            devices: scenario.devices.clone(),
            trace_allocations: false,
            scenario,
        })
    }

    /// `--trace-allocations` as asked: an error, before anything runs,
    /// where the scenario runs memrel's own worker (no Python to trace).
    pub fn trace_allocations(&mut self, on: bool) -> Result<()> {
        if on {
            allocations::check(&self.scenario)?;
        }
        self.trace_allocations = on;
        Ok(())
    }

    /// Runs every run; the results directory, the record written there and
    /// its summary.
    pub fn execute(&self, command_line: Vec<String>) -> Result<Measured> {
        let scenario = &self.scenario;
        let cache = cache_dir();
        let inherited = strategy::inherited_allocator_variables();
        if !inherited.is_empty() {
            eprintln!(
                "memrel: ignoring {} from memrel's environment: every worker starts with its \
                 strategy's allocator and variables only (glibc for glibc strategies; runs.json \
                 records the allocator each run had). To measure another allocator, use its \
                 strategy ({})",
                inherited.join(" "),
                crate::hint::Hint::List
            );
        }
        let (plug, infos) = self.prepare_plug(&cache)?;
        // From here on, Ctrl-C or SIGTERM stops the worker, saves its run marked
        // interrupted and starts no other (main then exits 130 / 143): a results
        // directory, once made, always gets a record.
        crate::signals::install()?;
        let out_dir = create_out_dir(&self.out_root, &scenario.name)?;
        let exe = std::env::current_exe()
            .context("cannot find the memrel executable to start workers")?;
        let interval = Duration::from_secs_f64(scenario.interval_ms / 1e3);
        let mut record = Record {
            header: Header {
                models: infos,
                program: self.program_record(&plug),
                container: Some(self.cgroup.view()),
                page_cache: page_cache_info(&plug, scenario.workload.evict_page_cache),
                ..scenario.header(self.device_name(), command_line, interval.as_secs_f64())
            },
            runs: Vec::new(),
        };
        let slots = self.slots();
        let progress = ProgressBar::new(slots.len() as u64 * u64::from(scenario.cycles));
        progress.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cycles  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let run = RunContext {
            plan: self,
            exe: &exe,
            interval,
            progress: &progress,
            total_runs: slots.len(),
        };
        if self.devices.len() > 1 {
            let out = lanes::execute(&run, &plug, record, &out_dir, slots, &self.devices);
            progress.finish_and_clear();
            return out.map(|(record, summary)| Measured {
                dir: out_dir,
                record,
                summary,
            });
        }
        let mut summary = metrics::summarize(&record);
        for slot in slots {
            summary = run.make(&plug, &mut record, &out_dir, slot)?;
            if crate::signals::received().is_some() {
                break;
            }
        }
        progress.finish_and_clear();
        Ok(Measured {
            dir: out_dir,
            record: record.at_file_precision().into_owned(),
            summary,
        })
    }

    /// The record's device: `cuda:0,1` for runs spread over GPUs.
    fn device_name(&self) -> String {
        if self.devices.len() > 1 {
            let list: Vec<String> = self.devices.iter().map(u32::to_string).collect();
            format!("cuda:{}", list.join(","))
        } else {
            self.scenario.device.to_string()
        }
    }

    /// Every run to make, numbered, in order: each repetition of every strategy.
    fn slots(&self) -> Vec<Slot> {
        let mut out = Vec::new();
        for repetition in 1..=self.scenario.repeat {
            for strategy in &self.strategies {
                out.push(Slot {
                    run: out.len() as u32 + 1,
                    repetition,
                    strategy,
                });
            }
        }
        out
    }

    /// What a program runs with, for the record (`None` for memrel's own
    /// workers): `check` re-runs a program baseline from it.
    fn program_record(&self, plug: &Plug) -> Option<Program> {
        let Plug::Command(spec) = plug else {
            return None;
        };
        let env = self
            .strategies
            .iter()
            .filter_map(|s| {
                // A library not found fails the run itself, which says why.
                let preload = strategy::find_library(s).ok().flatten();
                let env = spec.environment(s, preload.as_deref()).ok()?;
                Some((s.name.to_string(), env))
            })
            .collect();
        Some(Program {
            argv: spec.argv.clone(),
            python: self.python.clone(),
            tree: self.tree,
            cwd: spec.cwd.display().to_string(),
            env,
        })
    }

    /// Resolves the models (written or fetched here, before any run, so that
    /// neither shows in a measurement) and builds the process every run starts.
    fn prepare_plug(&self, cache: &Path) -> Result<(Plug, Vec<ModelInfo>)> {
        let scenario = &self.scenario;
        let mut base = self
            .cwd
            .clone()
            .unwrap_or_else(|| scenario_base_dir(scenario));
        if scenario.origin == "builtin" && matches!(scenario.worker, WorkerKind::Command(_)) {
            base = crate::scenario::extract_scripts(cache).with_context(|| {
                format!(
                    "cannot write the scripts of scenario {} under {}: set MEMREL_CACHE_DIR to a writable directory",
                    scenario.name,
                    cache.display()
                )
            })?;
        }
        let models = Models::resolve(scenario, &base, cache)?;
        let plug = match &scenario.worker {
            WorkerKind::Candle | WorkerKind::Fake => Plug::Memrel(WorkerSpec {
                resume: None,
                strategy: String::new(),
                device: scenario.device,
                cycles: scenario.cycles,
                models: models.dirs,
                fakes: models.fakes,
                workload: scenario.workload.clone(),
            }),
            WorkerKind::Command(argv) => self.command_plug(argv, &base, cache, models.dirs)?,
        };
        Ok((plug, models.infos))
    }

    /// The program of a command scenario (`argv`, from `base`), with
    /// memrel's Python module and the model files it names.
    fn command_plug(
        &self,
        argv: &[String],
        base: &Path,
        cache: &Path,
        dirs: Vec<(String, ModelDir)>,
    ) -> Result<Plug> {
        let scenario = &self.scenario;
        let mut argv = argv.to_vec();
        if let (Some(python), Some(first)) = (&self.python, argv.first_mut()) {
            if first == "python3" || first == "python" {
                *first = python.clone();
            }
        }
        let base = std::fs::canonicalize(base).with_context(|| {
            format!("the program's directory {} does not exist", base.display())
        })?;
        if argv[0].contains('/') && Path::new(&argv[0]).is_relative() {
            argv[0] = base.join(&argv[0]).display().to_string();
        }
        let python_path = python_module_dir(cache).with_context(|| {
            format!(
                "cannot write memrel's Python module under {}: set MEMREL_CACHE_DIR to a writable directory",
                cache.display()
            )
        })?;
        let named: Vec<PathBuf> = scenario.model_files.iter().map(|f| base.join(f)).collect();
        let model_files = crate::model::files::model_files_named(&named, "model_files")
            .with_context(|| format!("scenario {}", scenario.name))?;
        Ok(Plug::Command(CommandSpec {
            argv,
            cwd: base,
            model_files,
            models: dirs.into_iter().map(|(id, d)| (id, d.dir)).collect(),
            device: scenario.device,
            cycles: scenario.cycles,
            python_path,
            tree: self.tree,
            io: self.program_io,
            trace_allocations: None,
        }))
    }
}

/// A scenario's models, resolved: directories of real ones, fake ones, and
/// what the record's header says of each.
struct Models {
    dirs: Vec<(String, ModelDir)>,
    fakes: Vec<(String, FakeModel)>,
    infos: Vec<ModelInfo>,
}

impl Models {
    /// Resolves every model of `scenario` (paths from `base`, downloads
    /// into `cache`), saying so on stderr.
    fn resolve(scenario: &Scenario, base: &Path, cache: &Path) -> Result<Models> {
        let mut models = Models {
            dirs: Vec::new(),
            fakes: Vec::new(),
            infos: Vec::new(),
        };
        for (id, src) in &scenario.models {
            if let ModelSource::Fake(fake) = src {
                models.infos.push(ModelInfo {
                    id: id.clone(),
                    source: src.to_string(),
                    dir: String::new(),
                    architecture: "fake".into(),
                    tensor_bytes: fake.load_bytes(),
                    parameters: 0,
                    load: None,
                });
                models.fakes.push((id.clone(), *fake));
                continue;
            }
            eprintln!("memrel: preparing model {id} ({src})");
            let dir = source::resolve(src, base, cache)
                .with_context(|| format!("model {id:?} of scenario {}", scenario.name))?;
            let load = match dir.format {
                WeightFormat::Gguf => {
                    let words = gguf::read_header(&dir.dir)?.load_words();
                    eprintln!("memrel: model {id} is {words}");
                    Some(words)
                }
                WeightFormat::Safetensors => None,
            };
            models.infos.push(ModelInfo {
                id: id.clone(),
                source: src.to_string(),
                dir: dir.dir.display().to_string(),
                architecture: dir.architecture.as_str().to_string(),
                tensor_bytes: dir.tensor_bytes,
                parameters: dir.parameters,
                load,
            });
            models.dirs.push((id.clone(), dir));
        }
        Ok(models)
    }
}

/// One run to make: its number in the invocation, its repetition and strategy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub run: u32,
    pub repetition: u32,
    pub strategy: &'static Strategy,
}

/// What every run of an invocation shares.
pub(crate) struct RunContext<'a> {
    pub plan: &'a Plan,
    pub exe: &'a Path,
    pub interval: Duration,
    pub progress: &'a ProgressBar,
    pub total_runs: usize,
}

impl RunContext<'_> {
    /// Makes one run of `plug` into `out_dir`, appends it to `record` and
    /// writes every output again; the summary of the record so far.
    pub fn make(
        &self,
        plug: &Plug,
        record: &mut Record,
        out_dir: &Path,
        slot: Slot,
    ) -> Result<Summary> {
        let Slot {
            run: run_number,
            repetition,
            strategy,
        } = slot;
        let scenario = &self.plan.scenario;
        let cycles = u64::from(scenario.cycles);
        let progress = self.progress;
        let trace_file =
            (self.plan.trace_allocations).then(|| allocations::program_file(out_dir, run_number));
        let traced = trace_file.as_deref().map(|f| allocations::traced(plug, f));
        let plug = traced.as_ref().unwrap_or(plug);
        let plan = RunPlan {
            run: run_number,
            repetition,
            strategy,
            plug,
            interval: self.interval,
            timeout: Duration::from_secs_f64(scenario.timeout_s.max(1.0)),
            cgroup: &self.plan.cgroup,
        };
        let done_before = u64::from(run_number - 1) * cycles;
        if self.plan.devices.len() <= 1 {
            progress.set_position(done_before);
        }
        let on = plug
            .device()
            .map(|d| format!(" on {d}"))
            .unwrap_or_default();
        let label = format!(
            "run {run_number}/{} {} (repetition {repetition}){on}",
            self.total_runs, strategy.name
        );
        progress.set_message(label.clone());
        let device = plug.device().unwrap_or(scenario.device);
        let (vram, vram_missing) = vram_probe(device);
        self.page_cache_before(plug);
        let meta = RunMeta::planned(run_number, strategy.name, repetition);
        let mut live = LiveRun::begin(out_dir, record, &meta)
            .with_context(|| format!("cannot write results into {}", out_dir.display()))?;
        let events = &mut live.events;
        let lanes = self.plan.devices.len() > 1;
        let (mut run, probe) =
            orchestrator::execute(self.exe, &plan, vram, &live.samples, &mut |event| {
                events.append(event);
                let edge = &event.edge;
                if !lanes {
                    progress.set_position(done_before + u64::from(edge.cycle.saturating_sub(1)));
                }
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
        if lanes {
            progress.inc(cycles);
        }
        if let (Some(why), true) = (vram_missing, plug.duties().complete_edges) {
            // memrel's own worker falls back to its own reading; a
            // program has nothing else: say why its VRAM is empty.
            run.meta.checks.push(Check {
                name: "vram sampler (nvml)".into(),
                ok: false,
                detail: why,
            });
        }
        record.header.sampler = probe.to_string();
        if let Some(file) = &trace_file {
            // A note, never the run's failure: what it measured stands.
            match allocations::take_in(file, out_dir, &run) {
                Ok(None) => {}
                Ok(Some(note)) => progress.suspend(|| eprintln!("memrel: {note}")),
                Err(e) => progress.suspend(|| eprintln!("memrel: warning: {e:#}")),
            }
        }
        if run.meta.status != RunStatus::Completed {
            progress.suspend(|| {
                eprintln!(
                    "memrel: run {run_number} ({}{on}) did not complete: {}",
                    strategy.name,
                    run.meta.error.as_deref().unwrap_or("unknown error")
                )
            });
        }
        write_run(record, run, live, out_dir)
    }

    /// Each run of memrel's own worker starts from the same page cache:
    /// the weight files dropped where the workload asks, else read in.
    fn page_cache_before(&self, plug: &Plug) {
        if self.plan.scenario.workload.evict_page_cache {
            evict_weights(plug, self.progress);
        } else if let Plug::Memrel(_) = plug {
            warm_weights(plug, self.progress);
        }
    }
}

/// Appends `run` to `record` and writes every output again; the summary
/// of the record so far. The run's samples are read back from samples.csv
/// (which gets their exact phases now): `run` and `report` see the same.
/// Should that fail, the files stay as they were streamed (the run listed
/// as stopped early): nothing is rewritten from a record that lacks them.
fn write_run(
    record: &mut Record,
    mut run: RunRecord,
    live: LiveRun,
    out_dir: &Path,
) -> Result<Summary> {
    let cannot_write = || format!("cannot write results into {}", out_dir.display());
    live.finish(&mut run).with_context(cannot_write)?;
    record.runs.push(run);
    record
        .save_events_and_runs(out_dir)
        .with_context(cannot_write)?;
    let summary = metrics::summarize(record);
    export::write_derived_run_outputs(out_dir, record, &summary).with_context(cannot_write)?;
    Ok(summary)
}

/// Looks strategies up and checks they fit the scenario's worker, its device
/// and this build.
pub fn resolve_strategies(names: &[String], scenario: &Scenario) -> Result<Vec<&'static Strategy>> {
    let device = scenario.device;
    let program = matches!(scenario.worker, WorkerKind::Command(_));
    // Only candle needs the feature: the fake worker opens the driver at run time.
    if device.is_cuda() && scenario.worker == WorkerKind::Candle && !cfg!(feature = "cuda") {
        bail!(
            "device {device} needs a memrel built with the `cuda` feature: run scripts/build-cuda.sh \
             (or `cargo build --release --features cuda` with a CUDA toolkit); this build runs candle on \
             cpu only (it measures the VRAM of programs: memrel exec)"
        );
    }
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
                    .filter(|x| if program {
                        x.for_programs().is_ok()
                    } else {
                        x.for_candle()
                    })
                    .map(|x| x.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if program {
            s.for_programs()
                .map_err(|e| anyhow::anyhow!("--strategy: {e}"))?;
        } else if !s.for_candle() {
            bail!(
                "strategy {:?} is for programs (memrel exec, or a scenario with command = [...]): \
                 memrel's candle worker cannot carry it out",
                s.name
            );
        }
        let sleeps = scenario
            .workload
            .steps
            .iter()
            .any(|step| matches!(step, crate::scenario::Step::Sleep(_)));
        if sleeps && !program && s.sleep == strategy::SleepMode::None {
            bail!(
                "strategy {:?} does not put models to sleep, and the scenario's steps do \
                 (\"sleep <model>\"): pick a sleep strategy ({})",
                s.name,
                strategy::all()
                    .filter(|x| x.sleep != strategy::SleepMode::None)
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

/// The VRAM probe for a device (NVML, loaded at run time; none on the CPU),
/// or why a CUDA run has none.
fn vram_probe(device: DeviceSpec) -> (Option<Box<dyn crate::sampler::VramProbe>>, Option<String>) {
    if !device.is_cuda() {
        return (None, None);
    }
    match crate::sampler::vram::try_open_nvml() {
        Ok(probe) => (Some(probe), None),
        Err(why) => (None, Some(why)),
    }
}

/// Relative paths in a scenario file (models, a command) start from the
/// file's directory; a built-in's from the current one.
fn scenario_base_dir(scenario: &Scenario) -> PathBuf {
    if scenario.origin == "builtin" {
        return PathBuf::from(".");
    }
    Path::new(&scenario.origin)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The model files whose page cache the runs measure, and how (`None`: no
/// weights files, as for programs and fakes).
fn page_cache_info(plug: &Plug, evicted: bool) -> Option<PageCacheInfo> {
    let files = plug.weight_files();
    let (_, method) = page_cache::Method::choose(files.first().map(|f| f.as_path()));
    (!files.is_empty()).then(|| PageCacheInfo {
        method,
        files: files
            .iter()
            .map(|f| WeightFile {
                path: f.display().to_string(),
                bytes: std::fs::metadata(f).map_or(0, |m| m.len()),
            })
            .collect(),
        evicted_before_runs: evicted,
        warmed_before_runs: !evicted && matches!(plug, Plug::Memrel(_)),
    })
}

/// Reads the model files into the page cache before a run of memrel's own
/// worker where the scenario does not evict them: every run starts warm,
/// whatever the run before left (`fadvise-dontneed` drops the files; a
/// fresh checkpoint may be on the disk only when the first run begins), so
/// no strategy's page cache is charged with the first read. A program's
/// files are its own: they stay as they are. Where the files do not all
/// stay cached (more than memory holds) or cannot be read, it is said: the
/// runs then start from whatever the last one left.
fn warm_weights(plug: &Plug, progress: &ProgressBar) {
    let files = plug.weight_files();
    if files.is_empty() {
        return;
    }
    let mib = |b: u64| b as f64 / crate::textutil::MIB;
    match page_cache::read_into_cache(&files) {
        Ok(c) if c.cached_bytes < c.total_bytes - c.total_bytes / 20 => progress.suspend(|| {
            eprintln!(
                "memrel: only {:.0} of the weights' {:.0} MiB stay in the page cache before the \
                 run: runs start from what the last one left (set evict_page_cache = true in \
                 [workload] to start each cold)",
                mib(c.cached_bytes),
                mib(c.total_bytes)
            )
        }),
        Ok(_) => {}
        Err(e) => progress.suspend(|| {
            eprintln!("memrel: cannot read the weights into the page cache before the run: {e}")
        }),
    }
}

/// Drops the model files from the page cache before a run (the scenario's
/// `evict_page_cache`): every run starts cold. A failure is said and the run
/// goes on (its page cache then starts where the last run left it).
fn evict_weights(plug: &Plug, progress: &ProgressBar) {
    for file in plug.weight_files() {
        if let Err(e) = page_cache::drop_cached(&file) {
            progress.suspend(|| eprintln!("memrel: cannot evict the weights before the run: {e}"));
        }
    }
}
