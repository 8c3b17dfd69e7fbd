//! The run record: everything measured in one invocation, and its on-disk form.
//!
//! A record is raw data only (samples, phase events, per-run metadata); every
//! number in a report is computed from it by `metrics`, so a saved results
//! directory can be re-rendered later without re-running anything.
//!
//! On disk a record is three files: `samples.csv`, `events.csv` and `runs.json`.
//! They are rewritten atomically after every run, so a crash later loses nothing
//! already measured.

use std::borrow::Cow;
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

/// The header of samples.csv: `SampleRow`'s fields, written by hand when
/// there is no row to serialize (a unit test keeps the two in step).
const SAMPLE_COLUMNS: [&str; 10] = [
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
];

/// The header of events.csv: `EventRow`'s fields (see `SAMPLE_COLUMNS`).
const EVENT_COLUMNS: [&str; 19] = [
    "t_s",
    "run",
    "strategy",
    "repetition",
    "cycle",
    "phase",
    "edge",
    "model",
    "elapsed_s",
    "rss_bytes",
    "anon_bytes",
    "file_bytes",
    "vram_bytes",
    "glibc_arena_bytes",
    "glibc_mmapped_bytes",
    "glibc_in_use_bytes",
    "glibc_free_bytes",
    "glibc_top_releasable_bytes",
    "note",
];

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
    /// Times are written to the microsecond (see [`Record::at_file_precision`]).
    pub fn save(&self, dir: &Path) -> Result<()> {
        let record = self.at_file_precision();
        write_atomic(&dir.join(SAMPLES_FILE), &record.samples_csv()?)?;
        write_atomic(&dir.join(EVENTS_FILE), &record.events_csv()?)?;
        let runs = RunsFile {
            header: record.header.clone(),
            runs: record.runs.iter().map(|r| r.meta.clone()).collect(),
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
            writer.write_record(SAMPLE_COLUMNS)?;
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
            writer.write_record(EVENT_COLUMNS)?;
        }
        Ok(writer.into_inner()?)
    }

    /// Reads a results directory written by [`Record::save`]; any damage is an error.
    pub fn load(dir: &Path) -> Result<Record> {
        let (record, damage) = Record::load_partial(dir)?;
        if let Some(first) = damage.first() {
            bail!("{first}");
        }
        Ok(record)
    }

    /// Reads what can be read of a results directory: a missing or cut-short
    /// samples.csv or events.csv keeps the rows before the damage, and each
    /// problem comes back as one line for people. Only runs.json is required.
    pub fn load_partial(dir: &Path) -> Result<(Record, Vec<String>)> {
        let runs_file = read_runs_file(dir)?;
        let mut damage = Vec::new();
        let mut samples: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
        read_rows::<SampleRow>(&dir.join(SAMPLES_FILE), &mut damage, |row, _| {
            samples.entry(row.run).or_default().push(Sample {
                t_s: row.t_s,
                rss_bytes: row.rss_bytes,
                anon_bytes: row.anon_bytes,
                file_bytes: row.file_bytes,
                vram_bytes: row.vram_bytes,
            });
            Ok(())
        });
        let mut events: BTreeMap<u32, Vec<Event>> = BTreeMap::new();
        let events_path = dir.join(EVENTS_FILE);
        read_rows::<EventRow>(&events_path, &mut damage, |row, line| {
            let event = event_from_row(row)
                .map_err(|e| format!("{} line {line}: {e}", events_path.display()))?;
            events.entry(event.0).or_default().push(event.1);
            Ok(())
        });
        let runs = runs_file
            .runs
            .into_iter()
            .map(|meta| RunRecord {
                samples: samples.remove(&meta.run).unwrap_or_default(),
                events: events.remove(&meta.run).unwrap_or_default(),
                meta,
            })
            .collect();
        let record = Record {
            header: runs_file.header,
            runs,
        };
        Ok((record, damage))
    }

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

/// Reads runs.json, checking the schema version before the shape so a file
/// from another memrel gets a clear message rather than a parse error.
fn read_runs_file(dir: &Path) -> Result<RunsFile> {
    let runs_path = dir.join(RUNS_FILE);
    let text = std::fs::read_to_string(&runs_path).with_context(|| {
        format!(
            "cannot read {}: is {} a memrel results directory (one made by `memrel run`)?",
            runs_path.display(),
            dir.display()
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not valid JSON (cut short?): re-run the scenario to get a complete results directory",
            runs_path.display()
        )
    })?;
    let header = value.get("header");
    let version = header
        .and_then(|h| h.get("schema_version"))
        .and_then(|v| v.as_u64());
    if version != Some(u64::from(SCHEMA_VERSION)) {
        let written_by = header
            .and_then(|h| h.get("memrel_version"))
            .and_then(|v| v.as_str())
            .unwrap_or("an unknown memrel");
        let found = version
            .map(|v| v.to_string())
            .unwrap_or_else(|| "none".to_string());
        bail!(
            "{} has schema version {found} (written by memrel {written_by}), this memrel reads version \
             {SCHEMA_VERSION}: open it with the memrel that wrote it, or re-run the scenario with this one",
            runs_path.display()
        );
    }
    serde_json::from_value(value)
        .with_context(|| format!("{} is not a memrel runs file", runs_path.display()))
}

/// Feeds each row of a CSV file to `take`; a missing file or the first bad
/// row ends the reading with one line in `damage` (the rows before it are kept).
fn read_rows<T: serde::de::DeserializeOwned>(
    path: &Path,
    damage: &mut Vec<String>,
    mut take: impl FnMut(T, usize) -> std::result::Result<(), String>,
) {
    let mut reader = match csv::Reader::from_path(path) {
        Ok(reader) => reader,
        Err(e) => {
            damage.push(format!("cannot read {}: {e}", path.display()));
            return;
        }
    };
    for (i, row) in reader.deserialize::<T>().enumerate() {
        let line = i + 2;
        let taken = row
            .map_err(|e| {
                format!(
                    "{} line {line} is malformed or cut short ({e})",
                    path.display()
                )
            })
            .and_then(|row| take(row, line));
        if let Err(problem) = taken {
            damage.push(format!("{problem}: kept the {} rows before it", i));
            return;
        }
    }
}

/// One events.csv row as (run, event).
fn event_from_row(row: EventRow) -> std::result::Result<(u32, Event), String> {
    let phase = Phase::parse(&row.phase).ok_or_else(|| format!("unknown phase {:?}", row.phase))?;
    let edge = match row.edge.as_str() {
        "begin" => Edge::Begin,
        "end" => Edge::End,
        other => return Err(format!("unknown edge {other:?}")),
    };
    let allocator = match (
        row.glibc_arena_bytes,
        row.glibc_mmapped_bytes,
        row.glibc_in_use_bytes,
        row.glibc_free_bytes,
        row.glibc_top_releasable_bytes,
    ) {
        (Some(arena), Some(mmapped), Some(in_use), Some(free), Some(top)) => Some(AllocatorState {
            arena_bytes: arena,
            mmapped_bytes: mmapped,
            in_use_bytes: in_use,
            free_bytes: free,
            top_releasable_bytes: top,
        }),
        _ => None,
    };
    let event = Event {
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
    };
    Ok((row.run, event))
}

/// Times are stored to the microsecond: finer digits are noise and bloat the CSV.
fn round_us(t_s: f64) -> f64 {
    (t_s * 1e6).round() / 1e6
}

/// Small hand-built records for unit tests across the crate.
#[cfg(test)]
pub mod fixture {
    use super::*;

    pub const MIB: u64 = 1 << 20;

    pub fn header(scenario: &str, cycles: u32) -> Header {
        Header {
            schema_version: SCHEMA_VERSION,
            memrel_version: "0.1.0".into(),
            scenario: scenario.into(),
            scenario_origin: "builtin".into(),
            scenario_toml: format!("cycles = {cycles}"),
            device: "cpu".into(),
            command: vec!["memrel".into()],
            created_unix_s: 1_795_000_000,
            host: Host {
                hostname: "vm".into(),
                os: "Linux".into(),
                kernel: "6.1".into(),
                libc: "glibc 2.36".into(),
                cpus: 2,
                total_memory_bytes: 8 << 30,
            },
            sampler: "procfs-statm".into(),
            interval_s: 0.01,
            cycles,
            retention_threshold_bytes: 16 * MIB,
            models: vec![ModelInfo {
                id: "m".into(),
                source: "preset:bert-tiny".into(),
                dir: "/cache/m".into(),
                architecture: "bert".into(),
                tensor_bytes: 100 * MIB,
                parameters: 25 * MIB,
            }],
        }
    }

    fn event(t_s: f64, phase: Phase, edge: Edge, cycle: u32, rss_mib: u64) -> Event {
        Event {
            t_s,
            edge: PhaseEdge {
                phase,
                edge,
                cycle,
                model: matches!(phase, Phase::Load | Phase::Unload).then(|| "m".to_string()),
                elapsed_s: (edge == Edge::End).then_some(0.1 + 0.2),
                memory: MemoryAtEdge {
                    rss_bytes: rss_mib * MIB,
                    anon_bytes: rss_mib * MIB * 3 / 4,
                    file_bytes: rss_mib * MIB / 4,
                    vram_bytes: None,
                },
                allocator: None,
                note: None,
            },
        }
    }

    /// One run: baseline 10 MiB, then per cycle load to 110 MiB, unload, release,
    /// settle at 10 + `retained_mib[cycle]` MiB; samples every ~10 ms with
    /// times that are not round numbers.
    pub fn run(run: u32, strategy: &str, repetition: u32, retained_mib: &[u64]) -> RunRecord {
        let mut events = vec![
            event(0.0013, Phase::Baseline, Edge::Begin, 0, 10),
            event(0.1000003, Phase::Baseline, Edge::End, 0, 10),
        ];
        let mut levels: Vec<(f64, u64)> = vec![(0.0, 10)];
        for (i, kept) in retained_mib.iter().enumerate() {
            let cycle = i as u32 + 1;
            let t0 = 0.1 + i as f64 * 1.0;
            events.push(event(t0 + 0.0000001, Phase::Load, Edge::Begin, cycle, 10));
            events.push(event(t0 + 0.3, Phase::Load, Edge::End, cycle, 110));
            events.push(event(t0 + 0.3, Phase::Unload, Edge::Begin, cycle, 110));
            events.push(event(t0 + 0.4, Phase::Unload, Edge::End, cycle, 10 + kept));
            events.push(event(
                t0 + 0.4,
                Phase::Release,
                Edge::Begin,
                cycle,
                10 + kept,
            ));
            events.push(event(t0 + 0.5, Phase::Release, Edge::End, cycle, 10 + kept));
            events.push(event(
                t0 + 0.5,
                Phase::Settle,
                Edge::Begin,
                cycle,
                10 + kept,
            ));
            events.push(event(t0 + 0.9, Phase::Settle, Edge::End, cycle, 10 + kept));
            levels.push((t0, 110));
            levels.push((t0 + 0.4, 10 + kept));
        }
        let end_s = 0.1 + retained_mib.len() as f64 + 0.05;
        let samples = (0..)
            .map(|i| f64::from(i) * 0.010000017 + 0.0000004)
            .take_while(|t| *t < end_s)
            .map(|t_s| {
                let mib = levels
                    .iter()
                    .rev()
                    .find(|(from, _)| *from <= t_s)
                    .map(|l| l.1)
                    .unwrap_or(10);
                Sample {
                    t_s,
                    rss_bytes: mib * MIB,
                    anon_bytes: mib * MIB * 3 / 4,
                    file_bytes: mib * MIB / 4,
                    vram_bytes: None,
                }
            })
            .collect();
        RunRecord {
            meta: RunMeta {
                run,
                strategy: strategy.into(),
                repetition,
                pid: 1000 + run,
                status: RunStatus::Completed,
                error: None,
                checks: vec![Check {
                    name: "env".into(),
                    ok: true,
                    detail: "set".into(),
                }],
                vm_hwm_bytes: Some(120 * MIB),
                duration_s: 1.0 / 3.0 + end_s,
                stderr_tail: String::new(),
            },
            samples,
            events,
        }
    }

    /// `drop` retaining from cycle 2 on and `malloc-trim` retaining nothing, twice each.
    pub fn record() -> Record {
        Record {
            header: header("fixture", 3),
            runs: vec![
                run(1, "drop", 1, &[2, 60, 60]),
                run(2, "malloc-trim", 1, &[1, 1, 1]),
                run(3, "drop", 2, &[2, 2, 60]),
                run(4, "malloc-trim", 2, &[1, 2, 1]),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::summarize;

    fn files(dir: &Path) -> Vec<Vec<u8>> {
        [SAMPLES_FILE, EVENTS_FILE, RUNS_FILE]
            .iter()
            .map(|f| std::fs::read(dir.join(f)).unwrap())
            .collect()
    }

    #[test]
    fn saving_what_was_loaded_writes_the_same_bytes_and_the_same_summary() {
        let record = fixture::record();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        record.save(a.path()).unwrap();
        let loaded = Record::load(a.path()).unwrap();
        loaded.save(b.path()).unwrap();
        assert!(
            files(a.path()) == files(b.path()),
            "a saved record changed on its way through disk"
        );
        assert_eq!(summarize(&record), summarize(&loaded));
        assert_eq!(*record.at_file_precision(), loaded);
    }

    fn header_line(csv: &[u8]) -> String {
        String::from_utf8_lossy(csv)
            .lines()
            .next()
            .unwrap()
            .to_string()
    }

    #[test]
    fn empty_files_have_the_same_header_as_full_ones() {
        let full = fixture::record();
        let mut empty = fixture::record();
        for run in &mut empty.runs {
            run.samples.clear();
            run.events.clear();
        }
        assert_eq!(
            header_line(&empty.samples_csv().unwrap()),
            header_line(&full.samples_csv().unwrap())
        );
        assert_eq!(
            header_line(&empty.events_csv().unwrap()),
            header_line(&full.events_csv().unwrap())
        );
        assert_eq!(
            header_line(&empty.events_csv().unwrap()),
            EVENT_COLUMNS.join(",")
        );
    }

    #[test]
    fn a_record_already_at_file_precision_is_not_copied() {
        let loaded = fixture::record().at_file_precision().into_owned();
        assert!(matches!(loaded.at_file_precision(), Cow::Borrowed(_)));
    }

    #[test]
    fn a_cut_short_samples_file_keeps_the_rows_before_it() {
        let dir = tempfile::tempdir().unwrap();
        fixture::record().save(dir.path()).unwrap();
        let path = dir.path().join(SAMPLES_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines = text.lines().count();
        // Keep the header, 10 rows and half of the 11th.
        let keep: usize = text.lines().take(11).map(|l| l.len() + 1).sum::<usize>() + 12;
        std::fs::write(&path, &text[..keep]).unwrap();
        let (record, damage) = Record::load_partial(dir.path()).unwrap();
        assert_eq!(
            record.runs.iter().map(|r| r.samples.len()).sum::<usize>(),
            10
        );
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert!(
            damage[0].contains("samples.csv line 12 is malformed or cut short"),
            "{}",
            damage[0]
        );
        assert!(
            damage[0].ends_with("kept the 10 rows before it"),
            "{}",
            damage[0]
        );
        assert!(lines > 12);
        let strict = Record::load(dir.path()).unwrap_err().to_string();
        assert!(strict.contains("samples.csv line 12"), "{strict}");
    }

    #[test]
    fn a_missing_events_file_is_damage_not_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        fixture::record().save(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join(EVENTS_FILE)).unwrap();
        let (record, damage) = Record::load_partial(dir.path()).unwrap();
        assert!(record
            .runs
            .iter()
            .all(|r| r.events.is_empty() && !r.samples.is_empty()));
        assert!(
            damage[0].starts_with("cannot read ") && damage[0].contains("events.csv"),
            "{damage:?}"
        );
    }

    #[test]
    fn another_schema_version_names_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        fixture::record().save(dir.path()).unwrap();
        let path = dir.path().join(RUNS_FILE);
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"schema_version\": 1", "\"schema_version\": 7");
        std::fs::write(&path, text).unwrap();
        let e = format!("{:#}", Record::load_partial(dir.path()).unwrap_err());
        assert!(
            e.contains("runs.json has schema version 7 (written by memrel 0.1.0)"),
            "{e}"
        );
        assert!(
            e.contains("open it with the memrel that wrote it, or re-run the scenario"),
            "{e}"
        );
    }
}
