//! The run record: everything measured in one invocation, and its on-disk form.
//!
//! A record is raw data only (samples, phase events, per-run metadata); every
//! number in a report is computed from it by `metrics`, so a saved results
//! directory can be re-rendered later without re-running anything.
//!
//! On disk a record is three files: `samples.csv`, `events.csv` and `runs.json`.
//! They are rewritten atomically after every run, so a crash later loses nothing
//! already measured.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil::write_atomic;
use crate::protocol::{AllocatorState, Check, Edge, MemoryAtEdge, Phase, PhaseEdge};

/// Version of the files in a results directory (samples.csv, events.csv, runs.json, summary.json).
pub const SCHEMA_VERSION: u32 = 1;

pub const SAMPLES_FILE: &str = "samples.csv";
pub const EVENTS_FILE: &str = "events.csv";
pub const RUNS_FILE: &str = "runs.json";

/// One reading of the worker's memory by the parent's sampler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the worker was spawned (parent's monotonic clock).
    pub t_s: f64,
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub vram_bytes: Option<u64>,
}

/// A phase edge as the parent received it, stamped on the sampler's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub t_s: f64,
    pub edge: PhaseEdge,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Completed,
    /// The worker exited with an error, was killed by a signal, or broke the protocol.
    Failed,
    /// The worker ran past the scenario's timeout and was killed.
    TimedOut,
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
    /// The last lines the worker wrote to stderr.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
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
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Host {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub libc: String,
    pub cpus: usize,
    pub total_memory_bytes: u64,
}

/// Facts about the whole invocation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub schema_version: u32,
    pub memrel_version: String,
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
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub meta: RunMeta,
    pub samples: Vec<Sample>,
    pub events: Vec<Event>,
}

/// Everything one invocation measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub header: Header,
    pub runs: Vec<RunRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RunsFile {
    header: Header,
    runs: Vec<RunMeta>,
}

#[derive(Debug, Serialize, Deserialize)]
struct SampleRow {
    t_s: f64,
    run: u32,
    strategy: String,
    repetition: u32,
    cycle: u32,
    phase: String,
    rss_bytes: u64,
    anon_bytes: u64,
    file_bytes: u64,
    vram_bytes: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct EventRow {
    t_s: f64,
    run: u32,
    strategy: String,
    repetition: u32,
    cycle: u32,
    phase: String,
    edge: String,
    model: Option<String>,
    elapsed_s: Option<f64>,
    rss_bytes: u64,
    anon_bytes: u64,
    file_bytes: u64,
    vram_bytes: Option<u64>,
    glibc_arena_bytes: Option<u64>,
    glibc_mmapped_bytes: Option<u64>,
    glibc_in_use_bytes: Option<u64>,
    glibc_free_bytes: Option<u64>,
    glibc_top_releasable_bytes: Option<u64>,
    note: Option<String>,
}

impl RunRecord {
    /// The cycle and phase each sample falls in, joined from the events on one clock.
    /// A sample belongs to the innermost phase that has begun and not yet ended
    /// before it; between phases it belongs to `idle` of the current cycle.
    pub fn sample_phases(&self) -> Vec<(u32, Phase)> {
        let mut out = Vec::with_capacity(self.samples.len());
        let mut open: Vec<Phase> = Vec::new();
        let mut cycle = 0;
        let mut next = 0;
        for sample in &self.samples {
            while next < self.events.len() && self.events[next].t_s <= sample.t_s {
                let edge = &self.events[next].edge;
                cycle = edge.cycle;
                match edge.edge {
                    Edge::Begin => open.push(edge.phase),
                    Edge::End => {
                        if let Some(pos) = open.iter().rposition(|p| *p == edge.phase) {
                            open.remove(pos);
                        }
                    }
                }
                next += 1;
            }
            out.push((cycle, open.last().copied().unwrap_or(Phase::Idle)));
        }
        out
    }
}

impl Record {
    /// Writes samples.csv, events.csv and runs.json into `dir`, each atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        write_atomic(&dir.join(SAMPLES_FILE), &self.samples_csv()?)?;
        write_atomic(&dir.join(EVENTS_FILE), &self.events_csv()?)?;
        let runs = RunsFile {
            header: self.header.clone(),
            runs: self.runs.iter().map(|r| r.meta.clone()).collect(),
        };
        let mut json = serde_json::to_vec_pretty(&runs)?;
        json.push(b'\n');
        write_atomic(&dir.join(RUNS_FILE), &json)?;
        Ok(())
    }

    pub fn samples_csv(&self) -> Result<Vec<u8>> {
        let mut writer = csv::Writer::from_writer(Vec::new());
        for run in &self.runs {
            for (sample, (cycle, phase)) in run.samples.iter().zip(run.sample_phases()) {
                writer.serialize(SampleRow {
                    t_s: round_us(sample.t_s),
                    run: run.meta.run,
                    strategy: run.meta.strategy.clone(),
                    repetition: run.meta.repetition,
                    cycle,
                    phase: phase.as_str().to_string(),
                    rss_bytes: sample.rss_bytes,
                    anon_bytes: sample.anon_bytes,
                    file_bytes: sample.file_bytes,
                    vram_bytes: sample.vram_bytes,
                })?;
            }
        }
        if self.runs.iter().all(|r| r.samples.is_empty()) {
            writer.write_record([
                "t_s",
                "run",
                "strategy",
                "repetition",
                "cycle",
                "phase",
                "rss_bytes",
                "anon_bytes",
                "file_bytes",
                "vram_bytes",
            ])?;
        }
        Ok(writer.into_inner()?)
    }

    pub fn events_csv(&self) -> Result<Vec<u8>> {
        let mut writer = csv::Writer::from_writer(Vec::new());
        let mut any = false;
        for run in &self.runs {
            for event in &run.events {
                any = true;
                let e = &event.edge;
                let alloc = e.allocator;
                writer.serialize(EventRow {
                    t_s: round_us(event.t_s),
                    run: run.meta.run,
                    strategy: run.meta.strategy.clone(),
                    repetition: run.meta.repetition,
                    cycle: e.cycle,
                    phase: e.phase.as_str().to_string(),
                    edge: e.edge.as_str().to_string(),
                    model: e.model.clone(),
                    elapsed_s: e.elapsed_s,
                    rss_bytes: e.memory.rss_bytes,
                    anon_bytes: e.memory.anon_bytes,
                    file_bytes: e.memory.file_bytes,
                    vram_bytes: e.memory.vram_bytes,
                    glibc_arena_bytes: alloc.map(|a| a.arena_bytes),
                    glibc_mmapped_bytes: alloc.map(|a| a.mmapped_bytes),
                    glibc_in_use_bytes: alloc.map(|a| a.in_use_bytes),
                    glibc_free_bytes: alloc.map(|a| a.free_bytes),
                    glibc_top_releasable_bytes: alloc.map(|a| a.top_releasable_bytes),
                    note: e.note.clone(),
                })?;
            }
        }
        if !any {
            writer.write_record(["t_s", "run", "strategy", "repetition", "cycle", "phase", "edge"])?;
        }
        Ok(writer.into_inner()?)
    }

    /// Reads a results directory written by [`Record::save`].
    pub fn load(dir: &Path) -> Result<Record> {
        let runs_path = dir.join(RUNS_FILE);
        let text = std::fs::read_to_string(&runs_path).with_context(|| {
            format!(
                "cannot read {}: is {} a memrel results directory?",
                runs_path.display(),
                dir.display()
            )
        })?;
        let runs_file: RunsFile = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a memrel runs file", runs_path.display()))?;
        if runs_file.header.schema_version != SCHEMA_VERSION {
            bail!(
                "{} has schema version {}, this memrel reads version {SCHEMA_VERSION}",
                runs_path.display(),
                runs_file.header.schema_version
            );
        }
        let mut samples: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
        let samples_path = dir.join(SAMPLES_FILE);
        let mut reader = csv::Reader::from_path(&samples_path)
            .with_context(|| format!("cannot read {}", samples_path.display()))?;
        for (i, row) in reader.deserialize::<SampleRow>().enumerate() {
            let row = row.with_context(|| format!("{} line {}", samples_path.display(), i + 2))?;
            samples.entry(row.run).or_default().push(Sample {
                t_s: row.t_s,
                rss_bytes: row.rss_bytes,
                anon_bytes: row.anon_bytes,
                file_bytes: row.file_bytes,
                vram_bytes: row.vram_bytes,
            });
        }
        let mut events: BTreeMap<u32, Vec<Event>> = BTreeMap::new();
        let events_path = dir.join(EVENTS_FILE);
        let mut reader = csv::Reader::from_path(&events_path)
            .with_context(|| format!("cannot read {}", events_path.display()))?;
        for (i, row) in reader.deserialize::<EventRow>().enumerate() {
            let line = i + 2;
            let row = row.with_context(|| format!("{} line {line}", events_path.display()))?;
            let phase = Phase::parse(&row.phase).with_context(|| {
                format!("{} line {line}: unknown phase {:?}", events_path.display(), row.phase)
            })?;
            let edge = match row.edge.as_str() {
                "begin" => Edge::Begin,
                "end" => Edge::End,
                other => bail!("{} line {line}: unknown edge {other:?}", events_path.display()),
            };
            let allocator = match (
                row.glibc_arena_bytes,
                row.glibc_mmapped_bytes,
                row.glibc_in_use_bytes,
                row.glibc_free_bytes,
                row.glibc_top_releasable_bytes,
            ) {
                (Some(arena), Some(mmapped), Some(in_use), Some(free), Some(top)) => {
                    Some(AllocatorState {
                        arena_bytes: arena,
                        mmapped_bytes: mmapped,
                        in_use_bytes: in_use,
                        free_bytes: free,
                        top_releasable_bytes: top,
                    })
                }
                _ => None,
            };
            events.entry(row.run).or_default().push(Event {
                t_s: row.t_s,
                edge: PhaseEdge {
                    phase,
                    edge,
                    cycle: row.cycle,
                    model: row.model,
                    elapsed_s: row.elapsed_s,
                    memory: MemoryAtEdge {
                        rss_bytes: row.rss_bytes,
                        anon_bytes: row.anon_bytes,
                        file_bytes: row.file_bytes,
                        vram_bytes: row.vram_bytes,
                    },
                    allocator,
                    note: row.note,
                },
            });
        }
        let runs = runs_file
            .runs
            .into_iter()
            .map(|meta| RunRecord {
                samples: samples.remove(&meta.run).unwrap_or_default(),
                events: events.remove(&meta.run).unwrap_or_default(),
                meta,
            })
            .collect();
        Ok(Record {
            header: runs_file.header,
            runs,
        })
    }
}

/// Times are stored to the microsecond: finer digits are noise and bloat the CSV.
fn round_us(t_s: f64) -> f64 {
    (t_s * 1e6).round() / 1e6
}
