//! Reading a results directory back, damaged or not: a missing or cut-short
//! CSV keeps the rows before the damage and says where it stopped, so a crash
//! during a run never makes what was measured before it unreadable. A CSV
//! kept gzipped (`samples.csv.gz`, see `schema::record_file`) reads the same.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Result};

use super::envelope::Envelope;
use super::rows::{event_from_row, EventRow, SampleRow};
use super::schema::{is_gz, read_runs_file, record_file, EVENTS_FILE, SAMPLES_FILE};
use super::types::{Event, Record, RunRecord, RunStatus};
use crate::protocol::Phase;

impl Record {
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
        let salvaged = Record::salvage(dir)?;
        Ok((salvaged.record, salvaged.damage))
    }

    /// [`Record::load_partial`], also naming which record files did not read
    /// whole (their rows are the salvage; the others are as they were written).
    ///
    /// A file that reads without a bad row can still be damage: one with no
    /// data rows where runs.json says a run completed and the other file
    /// shows it had data (an events.csv emptied under samples labelled with
    /// phases, a samples.csv emptied under phase edges). A program that
    /// exited before memrel's first reading has neither, and is no damage.
    pub fn salvage(dir: &Path) -> Result<Salvaged> {
        let runs_file = read_runs_file(dir)?;
        let mut damage = Vec::new();
        let mut damaged = Vec::new();
        // Each run's samples through an envelope: a long run stays bounded.
        let mut samples: BTreeMap<u32, Envelope> = BTreeMap::new();
        // A run's first sample labelled with a phase (cycle, phase): its
        // events.csv rows made that label.
        let mut labelled: BTreeMap<u32, (u32, String)> = BTreeMap::new();
        let samples_path = record_file(dir, SAMPLES_FILE);
        let before = damage.len();
        let sample_rows =
            read_rows::<SampleRow<'static>>(&samples_path, &mut damage, |row, line| {
                let sample = row
                    .sample()
                    .map_err(|e| format!("{} line {line}: {e}", samples_path.display()))?;
                if row.cycle != 0 || row.phase != Phase::Idle.as_str() {
                    labelled
                        .entry(row.run)
                        .or_insert_with(|| (row.cycle, row.phase.to_string()));
                }
                samples.entry(row.run).or_default().push(sample);
                Ok(())
            });
        let samples_whole = damage.len() == before;
        if !samples_whole {
            damaged.push(SAMPLES_FILE);
        }
        let mut events: BTreeMap<u32, Vec<Event>> = BTreeMap::new();
        let events_path = record_file(dir, EVENTS_FILE);
        let before = damage.len();
        let event_rows = read_rows::<EventRow<'static>>(&events_path, &mut damage, |row, line| {
            let event = event_from_row(row)
                .map_err(|e| format!("{} line {line}: {e}", events_path.display()))?;
            events.entry(event.0).or_default().push(event.1);
            Ok(())
        });
        let events_whole = damage.len() == before;
        if !events_whole {
            damaged.push(EVENTS_FILE);
        }
        let completed = |run: &u32| {
            runs_file
                .runs
                .iter()
                .any(|m| m.run == *run && m.status == RunStatus::Completed)
        };
        if samples_whole && sample_rows == 0 {
            if let Some((run, edges)) = events.iter().find(|(run, _)| completed(run)) {
                damaged.push(SAMPLES_FILE);
                damage.push(format!(
                    "{} has no data rows, but runs.json says run {run} completed and events.csv \
                     holds its {} phase edges: the file was emptied",
                    samples_path.display(),
                    edges.len()
                ));
            }
        }
        if events_whole && event_rows == 0 {
            if let Some((run, (cycle, phase))) = labelled.iter().find(|(run, _)| completed(run)) {
                damaged.push(EVENTS_FILE);
                damage.push(format!(
                    "{} has no data rows, but runs.json says run {run} completed and samples.csv \
                     labels its samples with phases (cycle {cycle}, {phase}) that only its phase \
                     edges give: the file was emptied",
                    events_path.display()
                ));
            }
        }
        let runs = runs_file
            .runs
            .into_iter()
            .map(|meta| {
                let (samples, decimation) = samples.remove(&meta.run).unwrap_or_default().finish();
                RunRecord {
                    samples,
                    decimation,
                    events: events.remove(&meta.run).unwrap_or_default(),
                    meta,
                }
            })
            .collect();
        let record = Record {
            header: runs_file.header,
            runs,
        };
        Ok(Salvaged {
            record,
            damage,
            damaged,
        })
    }
}

/// A results directory as [`Record::salvage`] read it.
pub struct Salvaged {
    pub record: Record,
    /// Each problem found, one line for people.
    pub damage: Vec<String>,
    /// The record files (`SAMPLES_FILE`, `EVENTS_FILE`) that did not read
    /// whole: the record holds what could be read of them.
    pub damaged: Vec<&'static str>,
}

/// The events of run `run` in `dir`'s events.csv; any damage is an error.
pub(super) fn read_events_of_run(dir: &Path, run: u32) -> Result<Vec<Event>> {
    let path = record_file(dir, EVENTS_FILE);
    let mut damage = Vec::new();
    let mut events = Vec::new();
    read_rows::<EventRow<'static>>(&path, &mut damage, |row, line| {
        let (of_run, event) =
            event_from_row(row).map_err(|e| format!("{} line {line}: {e}", path.display()))?;
        if of_run == run {
            events.push(event);
        }
        Ok(())
    });
    if let Some(first) = damage.first() {
        bail!("{first}");
    }
    Ok(events)
}

/// Feeds each row of a CSV file (gzipped if its name ends in `.gz`) to
/// `take`; a missing file, the first bad row, or a last line without its end
/// (a file cut inside its last field) ends the reading with one line in
/// `damage` (the rows before it are kept). Returns how many rows it took.
fn read_rows<T: serde::de::DeserializeOwned>(
    path: &Path,
    damage: &mut Vec<String>,
    mut take: impl FnMut(T, usize) -> std::result::Result<(), String>,
) -> usize {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) => {
            damage.push(format!("cannot read {}: {e}", path.display()));
            return 0;
        }
    };
    let bytes: Box<dyn Read> = if is_gz(path) {
        Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(
            file,
        )))
    } else {
        Box::new(file)
    };
    let mut reader = csv::Reader::from_reader(LastByte {
        inner: bytes,
        last: None,
    });
    let mut rows = 0;
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
            damage.push(format!("{problem}: the {i} rows before it are whole"));
            return i;
        }
        rows = i + 1;
    }
    if reader.get_ref().last.is_some_and(|b| b != b'\n') {
        // Every row memrel writes ends with one: the last is cut short.
        damage.push(format!(
            "{} line {} is cut short (the file ends inside it): the {} rows before it are whole",
            path.display(),
            rows + 1,
            rows.saturating_sub(1)
        ));
    }
    rows
}

/// A reader that remembers the last byte it gave out: whether a file read to
/// its end (plain or decompressed) ends with a newline.
struct LastByte<R> {
    inner: R,
    last: Option<u8>,
}

impl<R: Read> Read for LastByte<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }
}
