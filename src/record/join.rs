//! Several results directories joined into one record, beside the schema
//! it writes: the runs `plan` made on several GPUs (one lane directory per
//! GPU) and the runs of `memrel drive --repeat` / `--strategy` (one
//! directory per run). Each part's CSV files are copied row by row into the
//! joined directory (gzipped ones read as they are), with each row's `run`
//! and `repetition` cells set to what its run is in the joined record;
//! runs.json is written from the parts' records. The joined record is
//! returned as it was written, so nothing reads it back.
//!
//! It measures nothing and computes no number: what a run is called in the
//! joined record is the caller's choice (`renumber`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::live::GPU_PROCESSES_FILE;
use super::schema::{is_gz, record_file, EVENTS_FILE, SAMPLES_FILE};
use super::types::{Header, Record, RunMeta};

/// Writes the records of `parts` (each a directory and the record written
/// there, in order) into `dir` as one record under `header`: every run of
/// every part, its metadata as `renumber(part, meta)` makes it (its number,
/// its repetition, its device), in the order of the new run numbers. Returns
/// the joined record, its times to the microsecond as its files hold them.
/// A part's CSV rows whose run is not in its record are
/// kept as they are.
pub fn join(
    dir: &Path,
    header: Header,
    parts: Vec<(PathBuf, Record)>,
    renumber: impl Fn(usize, &RunMeta) -> RunMeta,
) -> Result<Record> {
    let cannot = || format!("cannot join the runs into {}", dir.display());
    let mut runs = Vec::new();
    let mut cells: Vec<HashMap<String, (String, String)>> = Vec::new();
    let mut dirs = Vec::new();
    for (i, (part_dir, record)) in parts.into_iter().enumerate() {
        let mut map = HashMap::new();
        for mut run in record.runs {
            let meta = renumber(i, &run.meta);
            map.insert(
                run.meta.run.to_string(),
                (meta.run.to_string(), meta.repetition.to_string()),
            );
            run.meta = meta;
            runs.push(run);
        }
        cells.push(map);
        dirs.push(part_dir);
    }
    for file in [SAMPLES_FILE, EVENTS_FILE, GPU_PROCESSES_FILE] {
        renumbered(&dirs, &cells, file, &dir.join(file)).with_context(cannot)?;
    }
    runs.sort_by_key(|r| r.meta.run);
    let record = Record { header, runs }.at_file_precision().into_owned();
    super::write_runs_file(
        dir,
        &record.header,
        record.runs.iter().map(|r| r.meta.clone()),
    )
    .with_context(cannot)?;
    Ok(record)
}

/// `file` of every directory in `dirs` as one CSV: the first header, then
/// each directory's rows with its `run` and `repetition` cells replaced as
/// `cells` (one map a directory, from a run's number to its new number and
/// repetition) says. Directories without the file add nothing; none with
/// it: no file.
fn renumbered(
    dirs: &[PathBuf],
    cells: &[HashMap<String, (String, String)>],
    file: &str,
    to: &Path,
) -> Result<()> {
    let mut out: Option<csv::Writer<File>> = None;
    for (dir, map) in dirs.iter().zip(cells) {
        let path = record_file(dir, file);
        let Ok(source) = File::open(&path) else {
            continue;
        };
        let reader: Box<dyn Read> = if is_gz(&path) {
            Box::new(flate2::read::GzDecoder::new(BufReader::new(source)))
        } else {
            Box::new(BufReader::new(source))
        };
        let mut csv = csv::ReaderBuilder::new().flexible(true).from_reader(reader);
        let header = csv
            .headers()
            .with_context(|| format!("cannot read {}", path.display()))?
            .clone();
        let column = |name: &str| header.iter().position(|h| h == name);
        let (run, repetition) = (column("run"), column("repetition"));
        let writer = match &mut out {
            Some(w) => w,
            None => {
                let mut w = csv::WriterBuilder::new()
                    .flexible(true)
                    .from_path(to)
                    .with_context(|| format!("cannot write {}", to.display()))?;
                w.write_record(&header)?;
                out.insert(w)
            }
        };
        for row in csv.records() {
            let row = row.with_context(|| format!("cannot read {}", path.display()))?;
            let new = run.and_then(|j| row.get(j)).and_then(|r| map.get(r));
            let cells = row.iter().enumerate().map(|(j, cell)| match new {
                Some((run_cell, _)) if Some(j) == run => run_cell.as_str(),
                Some((_, rep_cell)) if Some(j) == repetition => rep_cell.as_str(),
                _ => cell,
            });
            writer
                .write_record(cells)
                .with_context(|| format!("cannot write {}", to.display()))?;
        }
    }
    if let Some(mut w) = out {
        w.flush()
            .with_context(|| format!("cannot write {}", to.display()))?;
    }
    Ok(())
}
