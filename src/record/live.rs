//! The record on disk while a run goes on, so that memrel's memory stays
//! bounded however long it runs and a crash at any moment leaves a record
//! `memrel report` reads.
//!
//! Before a run starts, runs.json names it (as stopped early, until it ends)
//! and samples.csv is opened for appending. The sampler writes every sample
//! as it takes it, tagged with the phase the orchestrator last heard of
//! ([`LivePhase`]), flushed every [`FLUSH_EVERY_S`]; events.csv gets each
//! phase edge as it arrives (the orchestrator keeps only the latest). When
//! the run ends, [`LiveRun::finish`] reads its events back, rewrites
//! samples.csv once with every sample's phase joined exactly from them (as
//! [`Record::save`] would write it) and reads the samples back through an
//! [`Envelope`]: the metrics and charts of `run` are built from the files,
//! the same way `report` builds them.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use super::envelope::Envelope;
use super::gpu::ProcessVram;
use super::rows::{EventRow, SampleRow, EVENT_COLUMNS, SAMPLE_COLUMNS};
use super::schema::{EVENTS_FILE, SAMPLES_FILE};
use super::types::{round_us, Event, PhaseCursor, Record, RunMeta, RunRecord, Sample};
use crate::fsutil::write_atomic;
use crate::protocol::Phase;

/// How often the sampler flushes samples.csv: what a crash can lose.
pub const FLUSH_EVERY_S: f64 = 0.1;

/// The cycle and phase the orchestrator last heard of, for the sampler's
/// rows (one word, so the sampler reads it without a lock).
#[derive(Debug, Clone, Default)]
pub struct LivePhase(Arc<AtomicU64>);

impl LivePhase {
    pub fn set(&self, (cycle, phase): (u32, Phase)) {
        let index = Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0);
        self.0
            .store(u64::from(cycle) << 8 | index as u64, Ordering::Relaxed);
    }

    pub fn get(&self) -> (u32, Phase) {
        let word = self.0.load(Ordering::Relaxed);
        let phase = Phase::ALL
            .get((word & 0xff) as usize)
            .copied()
            .unwrap_or(Phase::Idle);
        ((word >> 8) as u32, phase)
    }
}

/// Appends one run's samples to samples.csv as the sampler takes them.
pub struct SampleWriter {
    csv: csv::Writer<Box<dyn Write + Send>>,
    run: u32,
    strategy: String,
    repetition: u32,
    phase: LivePhase,
    flushed_at_s: f64,
    /// The first write that failed; later samples are not written.
    error: Option<String>,
    /// The `gpu_vram` cell's text, reused from row to row.
    cell: String,
    /// gpu_processes.csv, opened at the first per-process VRAM reading.
    processes: ProcessLog,
    /// The latest sample written (an OOM kill's "last reading").
    last: Option<Sample>,
    /// Where the latest samples also go (`memrel watch`'s live metrics).
    tap: Option<SampleTap>,
    /// Rotates the files at a size (`--max-disk`).
    rotation: Option<Rotation>,
}

/// samples.csv's rotated part: when samples.csv reaches its part's size
/// under `--max-disk`, it is moved here (the part before it removed) and
/// a new samples.csv begins.
pub const SAMPLES_ROTATED_FILE: &str = "samples.rotated.csv";

/// gpu_processes.csv's rotated part, as [`SAMPLES_ROTATED_FILE`].
pub const GPU_PROCESSES_ROTATED_FILE: &str = "gpu_processes.rotated.csv";

/// Where a writer's files are and the size at which each is rotated.
#[derive(Debug, Clone)]
struct Rotation {
    samples: PathBuf,
    part_bytes: u64,
}

/// The latest samples, shared with a reader while the sampler writes
/// them: at most `capacity`, the oldest dropped, and how many came in all.
#[derive(Debug, Default)]
pub struct TapState {
    pub recent: std::collections::VecDeque<Sample>,
    pub capacity: usize,
    pub samples_total: u64,
}

/// A [`TapState`] the sampler thread and the measurement's loop share.
pub type SampleTap = Arc<std::sync::Mutex<TapState>>;

/// Each sampled process's VRAM on each GPU (`record::gpu`), appended to
/// gpu_processes.csv: raw readings, kept as taken (metrics read the sums).
enum ProcessLog {
    /// Not opened yet (at `path`), or nowhere to write (`None`: tests).
    Closed(Option<PathBuf>),
    Open(Box<csv::Writer<BufWriter<File>>>),
}

/// gpu_processes.csv: one row per process per GPU per sample.
pub const GPU_PROCESSES_FILE: &str = "gpu_processes.csv";

impl SampleWriter {
    /// A writer of `meta`'s rows into `out` (no header: the file has one).
    pub fn new(out: Box<dyn Write + Send>, meta: &RunMeta, phase: LivePhase) -> SampleWriter {
        SampleWriter {
            csv: csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(out),
            run: meta.run,
            strategy: meta.strategy.clone(),
            repetition: meta.repetition,
            phase,
            flushed_at_s: 0.0,
            error: None,
            cell: String::new(),
            processes: ProcessLog::Closed(None),
            last: None,
            tap: None,
            rotation: None,
        }
    }

    /// Also hands every sample written to `tap`.
    pub fn with_tap(mut self, tap: Option<SampleTap>) -> SampleWriter {
        self.tap = tap;
        self
    }

    /// Writes each process's part of `sample`'s per-GPU VRAM to
    /// gpu_processes.csv (a header when it is new).
    pub fn write_processes(&mut self, t_s: f64, processes: &[ProcessVram]) {
        if self.error.is_some() || processes.is_empty() {
            return;
        }
        if let ProcessLog::Closed(Some(path)) = &self.processes {
            let opened = write_header_if_new(path, &["t_s", "run", "gpu", "pid", "vram_bytes"])
                .and_then(|()| append(path));
            match opened {
                Ok(file) => {
                    self.processes = ProcessLog::Open(Box::new(
                        csv::WriterBuilder::new()
                            .has_headers(false)
                            .from_writer(BufWriter::with_capacity(1 << 14, file)),
                    ))
                }
                Err(e) => self.error = Some(format!("{e:#}")),
            }
        }
        if let ProcessLog::Open(csv) = &mut self.processes {
            for p in processes {
                let row = (round_us(t_s), self.run, p.gpu, p.pid, p.bytes);
                if let Err(e) = csv.serialize(row) {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
    }

    /// The latest sample written.
    pub fn last(&self) -> Option<Sample> {
        self.last.clone()
    }

    /// Writes one sample; flushes when [`FLUSH_EVERY_S`] has passed.
    pub fn write(&mut self, sample: &Sample) {
        if self.error.is_some() {
            return;
        }
        self.last = Some(sample.clone());
        if let Some(Ok(mut tap)) = self.tap.as_ref().map(|t| t.lock()) {
            tap.samples_total += 1;
            if tap.recent.len() >= tap.capacity.max(1) {
                tap.recent.pop_front();
            }
            tap.recent.push_back(sample.clone());
        }
        let (cycle, phase) = self.phase.get();
        let row = SampleRow::new(
            self.run,
            &self.strategy,
            self.repetition,
            cycle,
            phase,
            sample,
            &mut self.cell,
        );
        let mut written = self.csv.serialize(row).map_err(|e| e.to_string());
        if written.is_ok() && sample.t_s - self.flushed_at_s >= FLUSH_EVERY_S {
            self.flushed_at_s = sample.t_s;
            written = self.csv.flush().map_err(|e| e.to_string());
            if written.is_ok() {
                written = self.rotate_if_full(sample.t_s);
            }
        }
        if let Err(e) = written {
            self.error = Some(e);
        }
    }

    /// Under `--max-disk`: a file that reached its part's size (flushed) is
    /// moved to its rotated name and begun again.
    fn rotate_if_full(&mut self, t_s: f64) -> Result<(), String> {
        let Some(rotation) = self.rotation.clone() else {
            return Ok(());
        };
        let full =
            |path: &Path| std::fs::metadata(path).is_ok_and(|m| m.len() >= rotation.part_bytes);
        let dir = rotation.samples.parent().unwrap_or(Path::new("."));
        if full(&rotation.samples) {
            let moved = dir.join(SAMPLES_ROTATED_FILE);
            let begun = std::fs::rename(&rotation.samples, &moved)
                .map_err(anyhow::Error::from)
                .and_then(|()| write_header_if_new(&rotation.samples, &SAMPLE_COLUMNS))
                .and_then(|()| append(&rotation.samples))
                .map_err(|e| {
                    format!(
                        "--max-disk: cannot rotate {}: {e:#}",
                        rotation.samples.display()
                    )
                })?;
            self.csv = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(Box::new(BufWriter::with_capacity(1 << 16, begun)));
            eprintln!(
                "memrel: --max-disk: samples until {t_s:.1} s moved to {SAMPLES_ROTATED_FILE} (the part before it removed)"
            );
        }
        let processes = dir.join(GPU_PROCESSES_FILE);
        if matches!(self.processes, ProcessLog::Open(_)) && full(&processes) {
            if let ProcessLog::Open(csv) = &mut self.processes {
                csv.flush().map_err(|e| e.to_string())?;
            }
            std::fs::rename(&processes, dir.join(GPU_PROCESSES_ROTATED_FILE))
                .map_err(|e| format!("--max-disk: cannot rotate {}: {e}", processes.display()))?;
            self.processes = ProcessLog::Closed(Some(processes));
        }
        Ok(())
    }

    /// Flushes what is buffered; the first error of the writer, if any.
    pub fn finish(mut self) -> Option<String> {
        if let Err(e) = self.csv.flush() {
            self.error.get_or_insert(e.to_string());
        }
        if let ProcessLog::Open(csv) = &mut self.processes {
            if let Err(e) = csv.flush() {
                self.error.get_or_insert(e.to_string());
            }
        }
        self.error
    }
}

/// Where one run's records go while it runs: its samples (a writer per
/// worker process) and its phase edges.
pub struct LiveRun {
    pub samples: SampleTarget,
    pub events: EventLog,
    dir: PathBuf,
    /// Where this run's rows start in samples.csv.
    samples_from_byte: u64,
}

/// Opens writers of a run's samples (one per worker process: a respawned
/// run has several).
pub struct SampleTarget {
    path: PathBuf,
    meta: RunMeta,
    phase: LivePhase,
    /// Each file's part size under `--max-disk` (see [`SampleTarget::rotate_at`]).
    part_bytes: Option<u64>,
}

impl SampleTarget {
    pub fn writer(&self) -> Result<SampleWriter> {
        let file = append(&self.path)?;
        let mut writer = SampleWriter::new(
            Box::new(BufWriter::with_capacity(1 << 16, file)),
            &self.meta,
            self.phase.clone(),
        );
        writer.processes =
            ProcessLog::Closed(self.path.parent().map(|dir| dir.join(GPU_PROCESSES_FILE)));
        writer.rotation = self.part_bytes.map(|part_bytes| Rotation {
            samples: self.path.clone(),
            part_bytes,
        });
        Ok(writer)
    }

    /// Rotates samples.csv (and gpu_processes.csv) when it reaches
    /// `part_bytes`: a file holds at most about that, its rotated part as
    /// much, older samples are removed. Only for a file of this run alone
    /// (`memrel watch` and `attach` measure into a new directory).
    fn rotate_at(&mut self, part_bytes: u64, samples_from_byte: u64) -> Result<()> {
        let header_bytes = {
            let mut header = csv::Writer::from_writer(Vec::new());
            header.write_record(SAMPLE_COLUMNS)?;
            header.into_inner()?.len() as u64
        };
        if samples_from_byte != header_bytes {
            bail!(
                "--max-disk: {} holds other runs' samples: rotate only a new directory's",
                self.path.display()
            );
        }
        self.part_bytes = Some(part_bytes);
        Ok(())
    }
}

/// Appends a run's phase edges to events.csv as they arrive, and keeps the
/// live phase the sampler tags its rows with.
pub struct EventLog {
    csv: csv::Writer<File>,
    meta: RunMeta,
    cursor: PhaseCursor<'static>,
    phase: LivePhase,
    /// The first append that failed (the run's events are read back from
    /// this file: a gap would lose them).
    error: Option<String>,
}

impl EventLog {
    /// Appends `event` (flushed: edges are few) and moves the live phase on.
    pub fn append(&mut self, event: &Event) {
        self.cursor.take(&event.edge);
        self.phase.set(self.cursor.now());
        if self.error.is_some() {
            return;
        }
        let written = self
            .csv
            .serialize(EventRow::new(&self.meta, event))
            .and_then(|()| Ok(self.csv.flush()?));
        if let Err(e) = written {
            self.error = Some(e.to_string());
        }
    }
}

impl LiveRun {
    /// Gets `dir` ready for a run: runs.json lists it (stopped early, until
    /// it ends), samples.csv and events.csv exist with their headers. `done`
    /// is what the directory holds of earlier runs.
    pub fn begin(dir: &Path, done: &Record, meta: &RunMeta) -> Result<LiveRun> {
        // Only runs.json changes: earlier runs' files are as their end wrote them.
        let provisional = RunMeta {
            status: super::RunStatus::Killed,
            error: Some(STOPPED_EARLY.to_string()),
            ..meta.clone()
        };
        let metas = done.runs.iter().map(|r| r.meta.clone());
        super::write_runs_file(dir, &done.header, metas.chain([provisional]))?;
        write_header_if_new(&dir.join(EVENTS_FILE), &EVENT_COLUMNS)?;
        let samples_path = dir.join(SAMPLES_FILE);
        write_header_if_new(&samples_path, &SAMPLE_COLUMNS)?;
        let samples_from_byte = std::fs::metadata(&samples_path)
            .with_context(|| format!("cannot read {}", samples_path.display()))?
            .len();
        let phase = LivePhase::default();
        Ok(LiveRun {
            samples: SampleTarget {
                path: samples_path,
                meta: meta.clone(),
                phase: phase.clone(),
                part_bytes: None,
            },
            events: EventLog {
                csv: csv::WriterBuilder::new()
                    .has_headers(false)
                    .from_writer(append(&dir.join(EVENTS_FILE))?),
                meta: meta.clone(),
                cursor: PhaseCursor::new(&[]),
                phase,
                error: None,
            },
            dir: dir.to_path_buf(),
            samples_from_byte,
        })
    }

    /// Rotates the run's sample files at `part_bytes` each (`--max-disk`):
    /// only a directory that holds this run alone.
    pub fn rotate_samples_at(&mut self, part_bytes: u64) -> Result<()> {
        self.samples.rotate_at(part_bytes, self.samples_from_byte)
    }

    /// Reads the run's events back from events.csv into `run.events` (the
    /// orchestrator keeps only the latest), rewrites samples.csv with this
    /// run's phases joined exactly from them, and fills `run.samples` from
    /// the file (an envelope when the run took more than memory keeps).
    pub fn finish(self, run: &mut RunRecord) -> Result<()> {
        if let Some(e) = &self.events.error {
            bail!(
                "cannot append to {}: {e}",
                self.dir.join(EVENTS_FILE).display()
            );
        }
        drop(self.events);
        // The orchestrator may give the last edge its kernel peak after the
        // edge was streamed (its line arrived after the worker exited):
        // that peak is kept over the file's empty one.
        let late_peak = run.events.last().and_then(|e| {
            e.kernel_peak_bytes()
                .map(|bytes| ((e.edge.cycle, e.edge.phase, e.edge.edge), bytes))
        });
        run.events = super::salvage::read_events_of_run(&self.dir, run.meta.run)?;
        if let (Some(last), Some((which, bytes))) = (run.events.last_mut(), late_peak) {
            if last.kernel_peak_bytes().is_none()
                && (last.edge.cycle, last.edge.phase, last.edge.edge) == which
            {
                last.readings.set_part(
                    crate::record::Resource::Host,
                    crate::record::Part::Peak,
                    bytes,
                );
            }
        }
        finish_run(&self.dir, self.samples_from_byte, run)
    }
}

/// What runs.json says of a run until it ends: if memrel dies first, this
/// is what `report` shows.
pub const STOPPED_EARLY: &str = "memrel stopped while this run was going on (killed or crashed): \
     the samples and phase edges written until then are kept";

/// Creates a CSV file holding only its header, unless it exists; one that
/// exists must have this header (rows are appended to it): a file another
/// version of memrel wrote, with other columns, is refused, never mixed.
fn write_header_if_new(path: &Path, columns: &[&str]) -> Result<()> {
    let mut header = csv::Writer::from_writer(Vec::new());
    header.write_record(columns)?;
    let header = header.into_inner()?;
    if path.exists() {
        let mut first_line = Vec::new();
        BufReader::new(File::open(path)?).read_until(b'\n', &mut first_line)?;
        if first_line != header {
            anyhow::bail!(
                "{} has other columns than this memrel writes (another version wrote it): \
                 measure into a new directory, or continue this one with the memrel that began it",
                path.display()
            );
        }
        return Ok(());
    }
    write_atomic(path, &header)
}

fn append(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {} to append to it", path.display()))
}

/// See [`LiveRun::finish`]: samples.csv's bytes before `from_byte` (earlier
/// runs) are copied as they are.
fn finish_run(dir: &Path, from_byte: u64, run: &mut RunRecord) -> Result<()> {
    let path = dir.join(SAMPLES_FILE);
    let tmp = dir.join(format!(".{SAMPLES_FILE}.tmp{}", std::process::id()));
    let rewritten = rewrite(&path, &tmp, from_byte, run).and_then(|envelope| {
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("cannot move {} into place", path.display()))?;
        Ok(envelope)
    });
    if rewritten.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    let (samples, decimation) = rewritten?.finish();
    run.samples = samples;
    run.decimation = decimation;
    Ok(())
}

fn rewrite(path: &Path, tmp: &Path, from_byte: u64, run: &RunRecord) -> Result<Envelope> {
    let cannot_read = || format!("cannot read {}", path.display());
    let mut source = File::open(path).with_context(cannot_read)?;
    let out = File::create(tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    let mut out = BufWriter::with_capacity(1 << 16, out);
    std::io::copy(&mut (&mut source).take(from_byte), &mut out).with_context(cannot_read)?;
    source
        .seek(SeekFrom::Start(from_byte))
        .with_context(cannot_read)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(BufReader::with_capacity(1 << 16, source));
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out);
    let mut cursor = PhaseCursor::new(&run.events);
    let mut envelope = Envelope::default();
    let mut cell = String::new();
    for (i, row) in reader.deserialize::<SampleRow<'static>>().enumerate() {
        let row = row.with_context(|| {
            format!(
                "{} is damaged in run {}'s rows (row {} of the run)",
                path.display(),
                run.meta.run,
                i + 1
            )
        })?;
        let sample = row.sample().map_err(|e| {
            anyhow::anyhow!(
                "{} is damaged in run {}'s rows (row {} of the run): {e}",
                path.display(),
                run.meta.run,
                i + 1
            )
        })?;
        let (cycle, phase) = cursor.at(sample.t_s);
        writer.serialize(SampleRow::new(
            run.meta.run,
            &run.meta.strategy,
            run.meta.repetition,
            cycle,
            phase,
            &sample,
            &mut cell,
        ))?;
        envelope.push(sample);
    }
    let mut out = writer
        .into_inner()
        .map_err(|e| anyhow::anyhow!("cannot write {}: {}", tmp.display(), e.error()))?;
    out.flush()
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    out.get_ref()
        .sync_all()
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    Ok(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{fixture, RUNS_FILE};

    /// Each run streamed as a real one is (samples tagged with the phase
    /// heard of so far, edges arriving after the samples they precede), then
    /// finished: the files are byte for byte what `Record::save` writes for
    /// the whole record, and what memory holds is what the files hold.
    #[test]
    fn a_streamed_record_ends_as_the_files_save_would_write() {
        let full = fixture::record();
        let streamed = tempfile::tempdir().unwrap();
        let mut done = Record {
            header: full.header.clone(),
            runs: Vec::new(),
        };
        for run in &full.runs {
            let mut live = LiveRun::begin(streamed.path(), &done, &run.meta).unwrap();
            let mut writer = live.samples.writer().unwrap();
            let mut edges = run.events.iter().peekable();
            for sample in &run.samples {
                writer.write(sample);
                // Late: an edge reaches the parent after the sample it precedes.
                while let Some(e) = edges.next_if(|e| e.t_s <= sample.t_s) {
                    live.events.append(e);
                }
            }
            edges.for_each(|e| live.events.append(e));
            assert_eq!(writer.finish(), None);
            let mut got = RunRecord {
                meta: run.meta.clone(),
                samples: Vec::new(),
                events: Vec::new(),
                decimation: None,
            };
            live.finish(&mut got).unwrap();
            done.runs.push(got);
            done.save_events_and_runs(streamed.path()).unwrap();
        }
        let saved = tempfile::tempdir().unwrap();
        full.save(saved.path()).unwrap();
        for file in [SAMPLES_FILE, EVENTS_FILE, RUNS_FILE] {
            let read = |dir: &Path| std::fs::read(dir.join(file)).unwrap();
            assert!(
                read(streamed.path()) == read(saved.path()),
                "{file} differs from what save writes"
            );
        }
        let loaded = Record::load(saved.path()).unwrap();
        assert!(
            *done.at_file_precision() == loaded,
            "memory differs from the files"
        );
    }
}
