//! The run record: everything measured in one invocation, and its on-disk form.
//!
//! A record is raw data only (samples, phase events, per-run metadata); every
//! number in a report is computed from it by `metrics`, so a saved results
//! directory can be re-rendered later without re-running anything.
//!
//! On disk a record is three files: `samples.csv`, `events.csv` and `runs.json`
//! (the two CSVs may be kept gzipped, `samples.csv.gz`: see [`record_file`]).
//! While a run goes on they are appended to (`live`); after it, events.csv and
//! runs.json are rewritten atomically and samples.csv once, so a crash at any
//! moment loses at most the last tenth of a second.
//!
//! The files: `types` (the record in memory), `rows` (CSV rows), `schema`
//! (file names, version, runs.json), `salvage` (reading damaged directories),
//! `live` (writing during a run), `envelope` (a long run in bounded memory).

pub mod allocations;
pub mod envelope;
pub mod gpu;
pub mod join;
pub mod live;
mod mapping;
mod readings;
mod resource;
mod rows;
mod salvage;
mod schema;
mod types;
mod view;

/// Hand-built records for tests and benches (the `test-support` feature).
#[cfg(any(test, feature = "test-support"))]
pub mod fixture;

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use crate::fsutil::write_atomic;
pub use mapping::MappingKind;
pub use readings::{Part, Readings};
pub use resource::{is_key as is_reading_key, Key, Resource};
pub use salvage::Salvaged;
pub use schema::{record_file, EVENTS_FILE, RUNS_FILE, SAMPLES_FILE, SCHEMA_VERSION, SUMMARY_FILE};
pub use types::*;
pub use view::ViewKind;

impl Record {
    /// Writes samples.csv, events.csv and runs.json into `dir`, each atomically
    /// (a CSV kept gzipped there is written gzipped: [`write_record_file`]).
    /// Times are written to the microsecond (see [`Record::at_file_precision`]).
    /// (A record with an envelope of samples, see `envelope`, is saved by the
    /// run that took them: `live`.)
    pub fn save(&self, dir: &Path) -> Result<()> {
        let record = self.at_file_precision();
        write_record_file(dir, SAMPLES_FILE, &record.samples_csv()?)?;
        record.save_events_and_runs(dir)
    }

    /// Writes runs.json alone into `dir`, atomically: what `memrel report`
    /// writes of a record in place (samples.csv and events.csv are raw data
    /// it never writes over).
    pub fn save_runs(&self, dir: &Path) -> Result<()> {
        write_runs_file(dir, &self.header, self.runs.iter().map(|r| r.meta.clone()))
    }

    /// Writes events.csv and runs.json into `dir`, each atomically: all of a
    /// record but its samples, which `live` streams to samples.csv.
    pub fn save_events_and_runs(&self, dir: &Path) -> Result<()> {
        let record = self.at_file_precision();
        write_record_file(dir, EVENTS_FILE, &record.events_csv()?)?;
        write_runs_file(
            dir,
            &record.header,
            record.runs.iter().map(|r| r.meta.clone()),
        )
    }
}

/// Writes the record file `name` (samples.csv or events.csv) into `dir`
/// atomically, in the form it has there: gzipped as `name.gz` when only that
/// is in `dir` (a directory kept small, see [`record_file`]), plain otherwise.
/// The same rows give the same file (best compression, no time or name in
/// the gzip header): re-rendering what memrel wrote gives the same bytes.
pub fn write_record_file(dir: &Path, name: &str, csv: &[u8]) -> Result<()> {
    let path = record_file(dir, name);
    if !schema::is_gz(&path) {
        return write_atomic(&path, csv);
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(csv)?;
    let bytes = gz.finish()?;
    write_atomic(&path, &bytes)
}

/// Writes runs.json (the header and each run's metadata) atomically; times
/// to the microsecond, as everywhere in the files.
pub(crate) fn write_runs_file(
    dir: &Path,
    header: &Header,
    metas: impl Iterator<Item = RunMeta>,
) -> Result<()> {
    let runs = schema::RunsFile {
        header: header.clone(),
        runs: metas
            .map(|m| RunMeta {
                duration_s: types::round_us(m.duration_s),
                ..m
            })
            .collect(),
    };
    let mut json = serde_json::to_vec_pretty(&runs)?;
    json.push(b'\n');
    write_atomic(&dir.join(RUNS_FILE), &json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::summarize;
    use std::borrow::Cow;

    fn files(dir: &Path) -> Vec<Vec<u8>> {
        [SAMPLES_FILE, EVENTS_FILE, RUNS_FILE]
            .iter()
            .map(|f| std::fs::read(dir.join(f)).unwrap())
            .collect()
    }

    #[test]
    fn a_span_leaves_out_the_waits_for_memrels_readings_inside_it() {
        let mut run = fixture::record().runs.remove(0);
        run.events.truncate(3);
        for (e, (t_s, held_s)) in
            run.events
                .iter_mut()
                .zip([(1.0, Some(0.1)), (2.0, Some(0.5)), (3.0, None)])
        {
            (e.t_s, e.held_s) = (t_s, held_s);
        }
        let own = |from_s, to_s| run.own_span_s(from_s, to_s);
        // Both waits inside, the second cut at the span's end.
        assert!((own(0.5, 2.2) - (1.7 - 0.1 - 0.2)).abs() < 1e-12);
        // A span that begins inside a wait counts only the rest of it.
        assert!((own(1.05, 1.5) - (0.45 - 0.05)).abs() < 1e-12);
        // An edge with no wait, and a span inside a wait: nothing of its own.
        assert!((own(2.6, 3.5) - 0.9).abs() < 1e-12);
        assert_eq!(own(2.1, 2.4), 0.0);
        assert_eq!(own(3.0, 2.0), 0.0);
        // Saved and loaded, the waits stay (to the microsecond).
        let mut record = fixture::record();
        record.runs = vec![run.clone()];
        let dir = tempfile::tempdir().unwrap();
        record.save(dir.path()).unwrap();
        let loaded = Record::load(dir.path()).unwrap();
        let held: Vec<_> = loaded.runs[0].events.iter().map(|e| e.held_s).collect();
        assert_eq!(held, [Some(0.1), Some(0.5), None]);
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
            rows::EVENT_COLUMNS.join(",")
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
            damage[0].ends_with("the 10 rows before it are whole"),
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
