//! The run record's types: what one invocation measured, in memory.
//!
//! Raw data only (samples, phase events, per-run metadata); nothing here reads
//! or writes files (see `rows`, `schema`, `salvage`) or computes a metric.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::readings::Part;
pub use super::readings::Readings;
use super::resource::Resource;
pub use crate::cgroup::view::ContainerSample;
use crate::protocol::{AllocatorReport, Check, Edge, MemoryAtEdge, Phase, PhaseEdge};

/// One reading of the measured process's memory by the parent's sampler:
/// every resource it read at that instant, in one map.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since the worker was spawned (parent's monotonic clock).
    pub t_s: f64,
    /// Every resource read at `t_s` (host memory and its parts, VRAM per
    /// GPU, the container, the page cache (read every 100 ms or so: absent
    /// between readings), the catalogued resources).
    pub readings: Readings,
}

impl Sample {
    /// The sample of one map of readings taken at `t_s` (the sampler's and
    /// the edge reader's one way to make one).
    pub fn from_readings(t_s: f64, readings: Readings) -> Sample {
        Sample { t_s, readings }
    }

    /// A sample of host memory (RSS and its parts) and one device's VRAM,
    /// as hand-built records and benches make them.
    pub fn of_host(
        t_s: f64,
        rss_bytes: u64,
        anon_bytes: u64,
        file_bytes: u64,
        vram_bytes: Option<u64>,
    ) -> Sample {
        let memory = MemoryAtEdge {
            rss_bytes,
            anon_bytes,
            file_bytes,
            vram_bytes,
            ..MemoryAtEdge::default()
        };
        Sample::from_readings(t_s, Readings::of_line(&memory))
    }

    /// The host memory read (RSS, or a tree's PSS sum); 0 where none was.
    pub fn host_bytes(&self) -> u64 {
        self.readings.get(Resource::Host).unwrap_or(0)
    }

    /// Host memory's anonymous part; 0 where none was read.
    pub fn anon_bytes(&self) -> u64 {
        self.readings.part(Resource::Host, Part::Anon).unwrap_or(0)
    }

    /// Host memory's file-backed part; 0 where none was read.
    pub fn file_bytes(&self) -> u64 {
        self.readings.part(Resource::Host, Part::File).unwrap_or(0)
    }

    /// The `vram_bytes` column: the one device's VRAM, or on a machine of
    /// several GPUs the root process's own (each GPU's: `Resource::Device`).
    pub fn vram_bytes(&self) -> Option<u64> {
        self.readings.vram_column()
    }

    /// The model files' bytes in the page cache, where read at this instant.
    pub fn page_cache_bytes(&self) -> Option<u64> {
        self.readings.get(Resource::PageCache)
    }

    /// The container's view at this sample, where it was read.
    pub fn container(&self) -> Option<ContainerSample> {
        self.readings.container()
    }
}

impl Event {
    /// An edge whose line's memory is all that was read (hand-built records).
    pub fn of_line(t_s: f64, edge: PhaseEdge) -> Event {
        let readings = Readings::of_line(&edge.memory);
        Event {
            t_s,
            edge,
            readings,
            held_s: None,
        }
    }
}

/// A phase edge as the parent received it, stamped on the sampler's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub t_s: f64,
    pub edge: PhaseEdge,
    /// Every resource read at the edge: the sender's own reading (memrel's
    /// worker reads itself) with the parent's (`session::edges`) of
    /// what the sender did not read, VRAM per GPU included, and the
    /// kernel's peak of host memory since the edge before (`Part::Peak`).
    /// The line's `edge.memory` mirrors what of it the protocol has fields for.
    pub readings: Readings,
    /// Seconds from `t_s` during which the measured program's next step
    /// waited for memrel's reading of this edge: a sender that takes the
    /// handshake waits for the acknowledgement, a driver sends its request
    /// once the begin edge is read. `None` where nothing waited (a program
    /// that does not take the handshake, an end edge of a driver, a mark)
    /// and in older records. Times that span edges leave it out
    /// ([`RunRecord::own_span_s`]).
    pub held_s: Option<f64>,
}

impl Event {
    /// The kernel's peak of the measured RSS since the previous edge (VmHWM,
    /// reset at each edge: `sampler::hwm`): the exact peak of the span this
    /// edge closes, which samples can miss. `None` where it is not available
    /// (the run's `kernel_peak_unavailable` says why) or in older records.
    pub fn kernel_peak_bytes(&self) -> Option<u64> {
        self.readings.part(Resource::Host, Part::Peak)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Completed,
    /// The worker exited with an error or broke the protocol.
    Failed,
    /// The worker ran past the scenario's timeout and was killed.
    TimedOut,
    /// Killed by a signal memrel did not send (a user; an OOM kill no
    /// counter showed), or
    /// stopped by SIGINT/SIGTERM to memrel; the error names which.
    Killed,
    /// Killed by the kernel's OOM killer: SIGKILL while the oom_kill counter
    /// of its cgroup (or of the machine) rose; the error gives the counter,
    /// the limit and the last reading.
    OomKilled,
    /// An allocation was refused (RLIMIT_AS, ENOMEM, a device out of
    /// memory) and the worker failed or aborted; the error quotes it.
    AllocFailed,
}

/// What the parent knows about one worker process.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunMeta {
    /// 1-based index within the invocation.
    pub run: u32,
    pub strategy: String,
    /// 1-based repetition of this strategy.
    pub repetition: u32,
    pub pid: u32,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The strategy's checks, from the worker's hello and done messages.
    pub checks: Vec<Check>,
    /// The kernel's VmHWM for the worker, as the worker read it at the end.
    #[serde(default)]
    pub vm_hwm_bytes: Option<u64>,
    pub duration_s: f64,
    /// VRAM of a bare device (CUDA context, cuBLAS, cuRAND; no tensors) as
    /// the worker calibrated it before its first load: the floor a device
    /// resource cannot go below while a device is open (CUDA only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_floor_bytes: Option<u64>,
    /// The device this run's worker ran on, where the runs of one record
    /// were spread over several GPUs (`devices`); `None`: the header's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The last lines the worker wrote to stderr.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
    /// The last bytes the worker wrote to stdout (libraries print there;
    /// memrel's own messages travel on a private pipe).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout_tail: String,
    /// The allocator that served the worker's `malloc`, as the worker
    /// identified it (`None` in records made before memrel reported it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<AllocatorReport>,
    /// Allocator variables of memrel's environment (`NAME=value`, `LD_PRELOAD`
    /// included) that were kept out of this worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_env: Vec<String>,
    /// The processes that took over from `pid` in turn (`respawn` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub respawned_pids: Vec<u32>,
    /// The worker's cgroup and its counters at the run's start and end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<crate::cgroup::view::CgroupRun>,
    /// Why the model files' page cache could not be read (from then on), if
    /// it could not: a weights file deleted or replaced during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_note: Option<String>,
    /// Why the process was not read at its exit, where it was not
    /// (`orchestrator::exit_stop`: ptrace refused, or no reading in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_reading_note: Option<String>,
    /// Why the phase edges carry no kernel peak (`Event::kernel_peak_bytes`):
    /// e.g. the VmHWM reset through /proc/PID/clear_refs was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_peak_unavailable: Option<String>,
    /// Processes of the measured tree still alive after the program ended
    /// (they left its process group: `setsid`, a daemon); memrel names them
    /// and does not wait for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outlived: Vec<Outlived>,
}

/// A descendant that outlived the measured program.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Outlived {
    pub pid: u32,
    /// Its command line (the first 120 characters).
    pub command: String,
    /// Its resident memory when memrel saw it outlive the program.
    pub rss_bytes: u64,
}

impl RunMeta {
    /// A run before it starts: failed until it says otherwise.
    pub fn planned(run: u32, strategy: &str, repetition: u32) -> RunMeta {
        RunMeta {
            run,
            strategy: strategy.to_string(),
            repetition,
            pid: 0,
            status: RunStatus::Failed,
            error: None,
            checks: Vec::new(),
            vm_hwm_bytes: None,
            duration_s: 0.0,
            vram_floor_bytes: None,
            device: None,
            stderr_tail: String::new(),
            stdout_tail: String::new(),
            allocator: None,
            ignored_env: Vec::new(),
            respawned_pids: Vec::new(),
            cgroup: None,
            page_cache_note: None,
            exit_reading_note: None,
            kernel_peak_unavailable: None,
            outlived: Vec::new(),
        }
    }
}

/// A model as it was resolved for this invocation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    pub id: String,
    pub source: String,
    pub dir: String,
    pub architecture: String,
    pub tensor_bytes: u64,
    pub parameters: u64,
    /// How the worker loads it where the scenario's load method does not
    /// apply (a GGUF file: its types, read into memory); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Host {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub libc: String,
    pub cpus: usize,
    pub total_memory_bytes: u64,
    /// The other facts that change memory behaviour; `None` in records made
    /// before memrel recorded them (and in hand-built fixtures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
}

/// What `memrel check` compares besides `Host`'s first fields: a record made
/// elsewhere (another distribution, CPU, driver or allocator build) can
/// measure different numbers for the same code. A `None` or an empty list is
/// a fact found absent (no GPU, no NVML, the package not installed).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    /// `PRETTY_NAME` of /etc/os-release.
    #[serde(default)]
    pub distribution: Option<String>,
    /// The first CPU's brand string (`model name` in /proc/cpuinfo).
    #[serde(default)]
    pub cpu_model: Option<String>,
    /// NVML's name of each GPU, in NVML's order.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// The NVIDIA driver's version, from NVML.
    #[serde(default)]
    pub gpu_driver: Option<String>,
    /// The newest CUDA the driver supports (`major.minor`), from NVML.
    #[serde(default)]
    pub cuda: Option<String>,
    /// Each allocator library memrel preloads that is installed, by its
    /// Debian package: the version dpkg records for it, or `so:` and
    /// the library's file name where dpkg does not know it.
    #[serde(default)]
    pub allocators: BTreeMap<String, String>,
    /// The name `MEMREL_MACHINE` gave this machine: its `machine` key in
    /// place of the one derived from the facts (`machine::key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Facts about the whole invocation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub schema_version: u32,
    pub memrel_version: String,
    /// The git commit memrel was built from (`build_info::COMMIT`;
    /// `unknown` when built without .git); `None` in records made before
    /// memrel recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memrel_commit: Option<String>,
    pub scenario: String,
    /// `builtin` or the path the scenario was read from.
    pub scenario_origin: String,
    /// The scenario file exactly as it was used.
    pub scenario_toml: String,
    pub device: String,
    pub command: Vec<String>,
    pub created_unix_s: u64,
    pub host: Host,
    pub sampler: String,
    pub interval_s: f64,
    pub cycles: u32,
    pub retention_threshold_bytes: u64,
    pub models: Vec<ModelInfo>,
    /// What a program (`memrel exec`, a scenario's `command`) ran with;
    /// `None` for memrel's own workers and in records made before memrel
    /// recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<Program>,
    /// The process `memrel attach` measured (it did not start it); `None`
    /// for runs memrel started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<Attached>,
    /// The container resource: which cgroup it reads, or why it cannot;
    /// `None` where there is none (records made before memrel read cgroups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<crate::cgroup::view::ContainerView>,
    /// The model files whose page cache was measured, and how; `None` where
    /// no weights files were known (programs, fakes, older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache: Option<PageCacheInfo>,
    /// The catalogued resources the runs read (`sampler::resources`), and
    /// how; empty in records made before memrel had them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probed: Vec<Probed>,
    /// The keys of every catalogued resource the memrel that made the
    /// record had (`sampler::resources::CATALOGUE`), read here or not: the
    /// resources it knew. `memrel check` reports a resource the baseline's
    /// memrel did not know as new since the baseline was made, not as a
    /// gap ([`Header::knew`]). `None` in records made before memrel kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalogue: Option<Vec<String>>,
}

impl Header {
    /// Whether the memrel that made this record knew `resource`, so that
    /// not measuring it is a fact of the record, not of an older memrel.
    /// The fixed resources (host, GPUs, the container, the page cache) it
    /// always knew. A catalogued one: where the record lists its catalogue,
    /// whether the key is in it; in an older record, whether it read the
    /// resource (`probed`; a record with neither was made before the
    /// catalogue held a resource, so it knew none). What an older record's
    /// memrel knew but could not open on its machine is thus taken as not
    /// known: nothing in such a record tells the two apart.
    pub fn knew(&self, resource: Resource) -> bool {
        let Some(key) = resource.catalogue_key() else {
            return true;
        };
        match &self.catalogue {
            Some(keys) => keys.iter().any(|k| k == key.as_str()),
            None => self.probed.iter().any(|p| p.key == key.as_str()),
        }
    }
}

/// A catalogued resource a record read, for its header.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Probed {
    /// Its key (`shm`): the readings' key, budget keys and columns name it.
    pub key: String,
    /// What was read, for people: `/dev/shm in use (statvfs)`.
    pub how: String,
}

/// What the page cache of a run's weight files is, for the record's header
/// (`sampler::page_cache` reads it and chooses the method).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PageCacheInfo {
    /// `cachestat` or `mincore`, with why cachestat was not used.
    pub method: String,
    /// The weight files measured, with their sizes when the run began.
    pub files: Vec<WeightFile>,
    /// The parent dropped the files from the page cache before each run
    /// (the scenario's `evict_page_cache`), so every run starts cold.
    #[serde(default)]
    pub evicted_before_runs: bool,
    /// The parent read the files into the page cache before each run
    /// (memrel's own worker, without `evict_page_cache`), so every run
    /// starts warm; `false` in records made before it did.
    #[serde(default)]
    pub warmed_before_runs: bool,
}

/// One model file whose cached bytes are counted.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WeightFile {
    pub path: String,
    pub bytes: u64,
}

/// A process measured by `memrel attach`: which one, what it ran, when it
/// started and why the measurement ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Attached {
    pub pid: u32,
    /// Its arguments as /proc/PID/cmdline gave them at attach time.
    pub argv: Vec<String>,
    /// When the process started (Unix seconds), from /proc/PID/stat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_s: Option<u64>,
    /// When memrel attached (Unix seconds): samples start here.
    pub attached_unix_s: u64,
    /// Its descendants were sampled too (PSS summed over the tree).
    pub tree: bool,
    /// The log file followed for `--mark-on`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// Why the measurement ended: the process exited, `--duration` passed,
    /// or SIGINT/SIGTERM to memrel.
    #[serde(default)]
    pub ended: String,
}

/// A program's run as `memrel check` re-runs it: the command as run, the
/// interpreter, the working directory and the variables memrel set.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Program {
    /// The command as run: `python3`/`python` replaced by `--python`, a
    /// relative program made absolute.
    pub argv: Vec<String>,
    /// `--python`, when it was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// `--tree`: the whole process tree was sampled.
    #[serde(default)]
    pub tree: bool,
    /// The absolute directory the program ran in.
    pub cwd: String,
    /// Per strategy, the variables memrel set for the program (name → value):
    /// the protocol's and the module's (`MEMREL_*`, `PYTHONPATH`) and the
    /// strategy's (`MALLOC_*`, `LD_PRELOAD`, …).
    #[serde(default)]
    pub env: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub meta: RunMeta,
    /// Every sample, or an envelope of them when the run took more than
    /// memory keeps (see `envelope`; samples.csv has every one).
    pub samples: Vec<Sample>,
    pub events: Vec<Event>,
    /// `Some` when `samples` is an envelope.
    pub decimation: Option<super::envelope::Decimation>,
}

/// Everything one invocation measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub header: Header,
    pub runs: Vec<RunRecord>,
}

impl RunRecord {
    /// The cycle and phase each sample falls in, joined from the events on one clock.
    /// A sample belongs to the innermost phase that has begun and not yet ended
    /// before it; between phases it belongs to `idle` of the current cycle.
    pub fn sample_phases(&self) -> Vec<(u32, Phase)> {
        let mut cursor = PhaseCursor::new(&self.events);
        self.samples.iter().map(|s| cursor.at(s.t_s)).collect()
    }
}

/// Walks a run's events in time order and says which cycle and phase a time
/// falls in: the innermost phase that has begun and not yet ended at or
/// before it; between phases, `idle` of the current cycle. Times asked must
/// not decrease.
pub struct PhaseCursor<'a> {
    events: &'a [Event],
    next: usize,
    open: PhaseStack<()>,
    cycle: u32,
}

/// The phases begun and not yet ended, innermost last, each with what its
/// begin edge carried: an end closes the innermost open phase of its name (an
/// end with no begin is ignored). The one begin/end stack of the crate's
/// readers of a run (the phase at a time, the phase spans).
#[derive(Debug, Clone)]
pub struct PhaseStack<T> {
    open: Vec<(Phase, T)>,
}

impl<T> Default for PhaseStack<T> {
    fn default() -> Self {
        PhaseStack { open: Vec::new() }
    }
}

impl<T> PhaseStack<T> {
    pub fn begin(&mut self, phase: Phase, with: T) {
        self.open.push((phase, with));
    }

    /// Closes the innermost open `phase` and returns what its begin carried.
    pub fn end(&mut self, phase: Phase) -> Option<T> {
        let pos = self.open.iter().rposition(|(p, _)| *p == phase)?;
        Some(self.open.remove(pos).1)
    }

    /// The innermost open phase.
    pub fn innermost(&self) -> Option<Phase> {
        self.open.last().map(|(p, _)| *p)
    }

    /// The phases still open, outermost first.
    pub fn into_open(self) -> Vec<(Phase, T)> {
        self.open
    }
}

/// A phase's time span within a run.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSpan {
    pub phase: Phase,
    pub cycle: u32,
    /// The model the phase worked on, if any (from its begin edge).
    pub model: Option<String>,
    pub start_s: f64,
    pub end_s: f64,
}

impl PhaseSpan {
    /// `load bert`, `release`, …
    pub fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{} {m}", self.phase.as_str()),
            None => self.phase.as_str().to_string(),
        }
    }
}

impl RunRecord {
    /// The measured program's own seconds from `from_s` to `to_s`: the
    /// span less the time it waited for memrel's readings at the edges
    /// inside it ([`Event::held_s`], each from its edge's time, cut at
    /// `to_s`). A release latency, a t50 or a settle time is the program's,
    /// never memrel's own cost of reading it; 0 when `to_s` ≤ `from_s`.
    pub fn own_span_s(&self, from_s: f64, to_s: f64) -> f64 {
        if to_s <= from_s {
            return 0.0;
        }
        // Waits follow one another: only the edge just before `from_s` can
        // still be holding at `from_s`.
        let first = self
            .events
            .partition_point(|e| e.t_s < from_s)
            .saturating_sub(1);
        let held_s: f64 = self.events[first..]
            .iter()
            .take_while(|e| e.t_s < to_s)
            .filter_map(|e| {
                let held_s = e.held_s?;
                let overlap_s = (e.t_s + held_s).min(to_s) - e.t_s.max(from_s);
                Some(overlap_s.max(0.0))
            })
            .sum();
        (to_s - from_s - held_s).max(0.0)
    }

    /// Phase spans from begin/end pairs, by start time; a phase cut short by a
    /// crash ends at the last sample.
    pub fn phase_spans(&self) -> Vec<PhaseSpan> {
        let end_of_run = self.samples.last().map(|s| s.t_s).unwrap_or(0.0);
        let mut open = PhaseStack::default();
        let mut spans = Vec::new();
        for e in &self.events {
            let edge = &e.edge;
            match edge.edge {
                Edge::Begin => open.begin(edge.phase, (edge.cycle, edge.model.clone(), e.t_s)),
                Edge::End => {
                    if let Some((cycle, model, start_s)) = open.end(edge.phase) {
                        spans.push(PhaseSpan {
                            phase: edge.phase,
                            cycle,
                            model,
                            start_s,
                            end_s: e.t_s,
                        });
                    }
                }
            }
        }
        for (phase, (cycle, model, start_s)) in open.into_open() {
            spans.push(PhaseSpan {
                phase,
                cycle,
                model,
                start_s,
                end_s: end_of_run.max(start_s),
            });
        }
        spans.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        spans
    }
}

impl<'a> PhaseCursor<'a> {
    pub fn new(events: &'a [Event]) -> PhaseCursor<'a> {
        PhaseCursor {
            events,
            next: 0,
            open: PhaseStack::default(),
            cycle: 0,
        }
    }

    pub fn at(&mut self, t_s: f64) -> (u32, Phase) {
        while self.next < self.events.len() && self.events[self.next].t_s <= t_s {
            let events = self.events;
            self.take(&events[self.next].edge);
            self.next += 1;
        }
        self.now()
    }

    /// Takes an edge as it arrives (the orchestrator's live view).
    pub fn take(&mut self, edge: &PhaseEdge) {
        self.cycle = edge.cycle;
        match edge.edge {
            Edge::Begin => self.open.begin(edge.phase, ()),
            Edge::End => {
                self.open.end(edge.phase);
            }
        }
    }

    /// The cycle and phase after the edges taken so far.
    pub fn now(&self) -> (u32, Phase) {
        (self.cycle, self.open.innermost().unwrap_or(Phase::Idle))
    }
}

impl Record {
    /// The record at the precision its files keep: times to the microsecond.
    /// Saving and every metric go through this, so a summary recomputed from
    /// the files on disk is identical to the one written during the run.
    pub fn at_file_precision(&self) -> Cow<'_, Record> {
        let exact = self.runs.iter().all(|r| {
            r.meta.duration_s == round_us(r.meta.duration_s)
                && r.samples.iter().all(|s| s.t_s == round_us(s.t_s))
                && r.events.iter().all(|e| e.t_s == round_us(e.t_s))
        });
        if exact {
            return Cow::Borrowed(self);
        }
        let mut rounded = self.clone();
        for run in &mut rounded.runs {
            run.meta.duration_s = round_us(run.meta.duration_s);
            for s in &mut run.samples {
                s.t_s = round_us(s.t_s);
            }
            for e in &mut run.events {
                e.t_s = round_us(e.t_s);
            }
        }
        Cow::Owned(rounded)
    }
}

/// Times are stored to the microsecond: finer digits are noise and bloat the CSV.
pub(crate) fn round_us(t_s: f64) -> f64 {
    (t_s * 1e6).round() / 1e6
}
