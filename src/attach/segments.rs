//! A watch of days on disk (issue 50 item 2): each start of memrel is a
//! segment, a results directory of its own under `<OUT>/<NAME>/`, and
//! cycles.csv in each holds its closed cycles, a row per model and resource
//! as each cycle closes, so that what a watch measured outlives its samples
//! (rotated under `--max-disk`) and memrel itself: a watch started again
//! under the same `--out` goes on from the newest earlier segment's file
//! (its counters, each model's last cycle), and under `--max-disk` the
//! older segments' samples are removed, oldest first, to fit the cap.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::export::openmetrics::{CycleValues, MetricsState};

/// The file's name in a watch's results directory.
pub const CYCLES_FILE: &str = "cycles.csv";

/// One row: a model's and resource's cycle, as /metrics served it when it
/// closed, with the watch's counters then (earlier segments' included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleRow {
    /// When it was written, seconds since the Unix epoch.
    pub closed_unix_s: u64,
    /// The cycle's number over the watch's segments (/metrics'
    /// `memrel_cycle_number`).
    pub cycle: u32,
    /// Its number in this segment's record (events.csv's `cycle`).
    pub segment_cycle: u32,
    pub model: Option<String>,
    pub resource: String,
    pub retained_bytes: i64,
    pub released_fraction: Option<f64>,
    pub settle_s: Option<f64>,
    pub late_bytes: Option<u64>,
    pub cycles_total: u64,
    pub sleeps_total: u64,
    pub wakes_total: u64,
}

impl CycleRow {
    fn values(&self) -> CycleValues {
        CycleValues {
            model: self.model.clone(),
            resource: self.resource.clone(),
            cycle: self.cycle,
            retained_bytes: self.retained_bytes,
            released_fraction: self.released_fraction,
            settle_s: self.settle_s,
            late_bytes: self.late_bytes,
        }
    }
}

/// Appends rows to a directory's cycles.csv (created with its header at
/// the first row); each row is flushed as it is written.
pub struct CyclesFile {
    path: PathBuf,
    csv: Option<csv::Writer<File>>,
}

impl CyclesFile {
    pub fn in_dir(dir: &Path) -> CyclesFile {
        CyclesFile {
            path: dir.join(CYCLES_FILE),
            csv: None,
        }
    }

    pub fn append(&mut self, row: &CycleRow) -> Result<()> {
        let cannot = || format!("cannot append to {}", self.path.display());
        if self.csv.is_none() {
            let exists = self.path.exists();
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .with_context(cannot)?;
            self.csv = Some(
                csv::WriterBuilder::new()
                    .has_headers(!exists)
                    .from_writer(file),
            );
        }
        if let Some(csv) = self.csv.as_mut() {
            csv.serialize(row).with_context(cannot)?;
            csv.flush().with_context(cannot)?;
        }
        Ok(())
    }
}

/// The rows of `path`; a damaged row names the file and its line.
pub fn read_rows(path: &Path) -> Result<Vec<CycleRow>> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut rows = Vec::new();
    for (i, row) in reader.deserialize::<CycleRow>().enumerate() {
        rows.push(row.with_context(|| {
            format!(
                "{} line {} is not a cycle row: move the file away to start the watch afresh",
                path.display(),
                i + 2
            )
        })?);
    }
    Ok(rows)
}

/// Where a watch left off: the state to serve from its start (each model's
/// last cycle, the counters) and the cycle number to go on from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Carried {
    pub state: MetricsState,
    /// The earlier segment it came from.
    pub from: Option<PathBuf>,
}

/// The newest earlier segment's cycles.csv among `out`'s directories other
/// than `own` (by the file's modification time), as [`Carried`]; nothing
/// when no directory has one.
pub fn carried_from(out: &Path, own: &Path) -> Result<Carried> {
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    let entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(_) => return Ok(Carried::default()),
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        if dir == own {
            continue;
        }
        let file = dir.join(CYCLES_FILE);
        let Ok(modified) = std::fs::metadata(&file).and_then(|m| m.modified()) else {
            continue;
        };
        if newest.as_ref().is_none_or(|(at, _)| modified > *at) {
            newest = Some((modified, file));
        }
    }
    let Some((_, file)) = newest else {
        return Ok(Carried::default());
    };
    let rows = read_rows(&file)?;
    Ok(Carried {
        state: state_of_rows(&rows),
        from: file.parent().map(Path::to_path_buf),
    })
}

/// The sample files a segment has (the current part and the rotated one).
pub const SAMPLE_FILES: [&str; 4] = [
    "samples.csv",
    crate::record::live::SAMPLES_ROTATED_FILE,
    crate::record::live::GPU_PROCESSES_FILE,
    crate::record::live::GPU_PROCESSES_ROTATED_FILE,
];

/// Removes the sample files of `out`'s directories other than `own`,
/// oldest directory first (by its name: a UTC timestamp), until theirs
/// take at most `keep_bytes`; says on stderr what it removed. Each
/// directory keeps its events, runs.json, summary and cycles.csv.
pub fn prune_older_samples(out: &Path, own: &Path, keep_bytes: u64) -> Result<()> {
    let mut dirs: Vec<(PathBuf, u64)> = Vec::new();
    let Ok(entries) = std::fs::read_dir(out) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        if dir == own || !dir.join(CYCLES_FILE).exists() && !dir.join("runs.json").exists() {
            continue;
        }
        let bytes = SAMPLE_FILES
            .iter()
            .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
            .map(|m| m.len())
            .sum();
        dirs.push((dir, bytes));
    }
    dirs.sort();
    let mut total: u64 = dirs.iter().map(|(_, b)| b).sum();
    for (dir, bytes) in dirs {
        if total <= keep_bytes {
            break;
        }
        if bytes == 0 {
            continue;
        }
        for f in SAMPLE_FILES {
            let path = dir.join(f);
            if path.exists() {
                std::fs::remove_file(&path)
                    .with_context(|| format!("--max-disk: cannot remove {}", path.display()))?;
            }
        }
        eprintln!(
            "memrel: --max-disk: removed the samples of {} ({}); its cycles and edges are kept",
            dir.display(),
            crate::textutil::format_mib(bytes)
        );
        total -= bytes;
    }
    Ok(())
}

/// The last row of each model and resource, and the last row's counters.
fn state_of_rows(rows: &[CycleRow]) -> MetricsState {
    let mut last = std::collections::BTreeMap::new();
    for row in rows {
        last.insert((row.model.clone(), row.resource.clone()), row.values());
    }
    let mut state = MetricsState {
        cycles: last.into_values().collect(),
        ..MetricsState::default()
    };
    if let Some(row) = rows.last() {
        state.cycles_total = row.cycles_total;
        state.sleeps_total = row.sleeps_total;
        state.wakes_total = row.wakes_total;
    }
    state
}

/// Writes `row`s of the cycles of `state` newer than `written` (the highest
/// watch cycle number written so far), returning the new highest.
pub fn append_closed(
    file: &mut CyclesFile,
    state: &MetricsState,
    offset: u32,
    written: u32,
) -> Result<u32> {
    let mut highest = written;
    let now = crate::fsutil::now_unix_s();
    for c in state.cycles.iter().filter(|c| c.cycle > written) {
        file.append(&CycleRow {
            closed_unix_s: now,
            cycle: c.cycle,
            segment_cycle: c.cycle.saturating_sub(offset),
            model: c.model.clone(),
            resource: c.resource.clone(),
            retained_bytes: c.retained_bytes,
            released_fraction: c.released_fraction,
            settle_s: c.settle_s,
            late_bytes: c.late_bytes,
            cycles_total: state.cycles_total,
            sleeps_total: state.sleeps_total,
            wakes_total: state.wakes_total,
        })?;
        highest = highest.max(c.cycle);
    }
    Ok(highest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cycle: u32, model: &str, resource: &str, retained_bytes: i64) -> CycleRow {
        CycleRow {
            closed_unix_s: 1,
            cycle,
            segment_cycle: cycle,
            model: Some(model.into()),
            resource: resource.into(),
            retained_bytes,
            released_fraction: Some(0.5),
            settle_s: None,
            late_bytes: Some(3),
            cycles_total: u64::from(cycle),
            sleeps_total: 2 * u64::from(cycle),
            wakes_total: 2 * u64::from(cycle),
        }
    }

    #[test]
    fn a_restarted_watch_goes_on_from_the_newest_segments_last_rows() {
        let out = tempfile::tempdir().unwrap();
        let (old, newer, own) = (
            out.path().join("a"),
            out.path().join("b"),
            out.path().join("c"),
        );
        for d in [&old, &newer, &own] {
            std::fs::create_dir(d).unwrap();
        }
        let mut f = CyclesFile::in_dir(&old);
        f.append(&row(9, "m", "host", 900)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut f = CyclesFile::in_dir(&newer);
        for r in [
            row(1, "m", "host", 10),
            row(1, "m", "cuda:0", 11),
            row(2, "m", "host", 20),
        ] {
            f.append(&r).unwrap();
        }
        let carried = carried_from(out.path(), &own).unwrap();
        assert_eq!(carried.from.as_deref(), Some(newer.as_path()));
        assert_eq!(carried.state.cycles_total, 2);
        assert_eq!(carried.state.sleeps_total, 4);
        let got: Vec<_> = carried
            .state
            .cycles
            .iter()
            .map(|c| (c.resource.as_str(), c.cycle, c.retained_bytes))
            .collect();
        assert_eq!(got, [("cuda:0", 1, 11), ("host", 2, 20)]);
        // Its own directory is never where it comes from.
        assert_eq!(
            carried_from(out.path(), &newer).unwrap().state.cycles_total,
            9
        );
    }

    #[test]
    fn older_segments_lose_their_samples_oldest_first_and_keep_the_rest() {
        let out = tempfile::tempdir().unwrap();
        let names = [
            "20261101T000000Z",
            "20261102T000000Z",
            "20261103T000000Z",
            "own",
        ];
        for name in names {
            let d = out.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("runs.json"), "{}").unwrap();
            std::fs::write(d.join("samples.csv"), vec![b'x'; 1000]).unwrap();
        }
        let own = out.path().join("own");
        prune_older_samples(out.path(), &own, 1500).unwrap();
        let has = |n: &str| out.path().join(n).join("samples.csv").exists();
        assert_eq!(names.map(has), [false, false, true, true]);
        assert!(out.path().join(names[0]).join("runs.json").exists());
        prune_older_samples(out.path(), &own, 0).unwrap();
        assert_eq!(names.map(has), [false, false, false, true]);
    }

    #[test]
    fn a_damaged_file_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = CyclesFile::in_dir(dir.path());
        f.append(&row(1, "m", "host", 10)).unwrap();
        let path = dir.path().join(CYCLES_FILE);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("x,y\n");
        std::fs::write(&path, text).unwrap();
        let err = format!("{:#}", read_rows(&path).unwrap_err());
        assert!(
            err.contains("cycles.csv line 3 is not a cycle row"),
            "{err}"
        );
    }

    #[test]
    fn only_cycles_newer_than_written_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = CyclesFile::in_dir(dir.path());
        let mut state = MetricsState {
            cycles: vec![
                row(3, "m", "host", 30).values(),
                row(4, "n", "host", 40).values(),
            ],
            cycles_total: 4,
            ..MetricsState::default()
        };
        assert_eq!(append_closed(&mut f, &state, 2, 3).unwrap(), 4);
        state.cycles[1].cycle = 5;
        assert_eq!(append_closed(&mut f, &state, 2, 4).unwrap(), 5);
        let rows = read_rows(&dir.path().join(CYCLES_FILE)).unwrap();
        let got: Vec<_> = rows.iter().map(|r| (r.cycle, r.segment_cycle)).collect();
        assert_eq!(got, [(4, 2), (5, 3)]);
    }
}
