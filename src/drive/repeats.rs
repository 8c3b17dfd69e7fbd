//! The runs of `memrel drive --repeat N` as one record. Each repeat is an
//! attach session of its own (one run, written into `repeat-K/` as any
//! drive's results directory, with its `requests.csv` and `server.log`);
//! once they are over, their rows are joined into the drive's directory as
//! runs 1..N (run and repetition K), so the metrics, charts, baseline and
//! gate see N runs of one strategy, as for `memrel run --repeat N`.
//!
//! With `--strategy`, each strategy's runs are made in turn (in
//! `STRATEGY/repeat-K/`) and joined the same way, each run keeping its
//! strategy. Only files are joined here: nothing is measured, no number computed
//! beyond what `metrics` derives from the joined record.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::metrics::{self, Summary};
use crate::record::live::GPU_PROCESSES_FILE;
use crate::record::{record_file, Record, EVENTS_FILE, SAMPLES_FILE};

/// The directory of repeat `k` (1-based) inside the drive's `dir`.
pub fn repeat_dir(dir: &Path, k: u32) -> PathBuf {
    dir.join(format!("repeat-{k}"))
}

/// Writes the records of `repeats` (each one run, in the order made, read
/// from its directory) into `dir` as one record of runs 1..N, with the
/// derived outputs (summary, charts); returns it and its summary.
pub fn join(dir: &Path, repeats: &[(PathBuf, Record)]) -> Result<(Record, Summary)> {
    let Some((_, first)) = repeats.first() else {
        bail!("no repeat was measured: nothing to join");
    };
    let cannot = || format!("cannot join the repeats into {}", dir.display());
    // Run K of the drive; its repetition is its place among the runs of
    // its strategy (`--strategy`: each strategy's runs are 1..N).
    let strategy_of = |record: &Record| {
        record
            .runs
            .first()
            .map(|r| r.meta.strategy.clone())
            .unwrap_or_default()
    };
    let repetitions: Vec<u32> = (0..repeats.len())
        .map(|i| {
            let mine = strategy_of(&repeats[i].1);
            repeats[..=i]
                .iter()
                .filter(|(_, r)| strategy_of(r) == mine)
                .count() as u32
        })
        .collect();
    for file in [SAMPLES_FILE, EVENTS_FILE, GPU_PROCESSES_FILE] {
        renumbered(repeats, &repetitions, file, &dir.join(file)).with_context(cannot)?;
    }
    let metas: Vec<_> = repeats
        .iter()
        .zip(&repetitions)
        .enumerate()
        .flat_map(|(i, ((_, record), repetition))| {
            record.runs.iter().map(move |run| {
                let mut meta = run.meta.clone();
                meta.run = i as u32 + 1;
                meta.repetition = *repetition;
                meta
            })
        })
        .collect();
    crate::record::write_runs_file(dir, &first.header, metas.into_iter()).with_context(cannot)?;
    let record = Record::load(dir)
        .with_context(|| format!("cannot read back the joined record in {}", dir.display()))?;
    let summary = metrics::summarize(&record);
    crate::export::write_derived_run_outputs(dir, &record, &summary).with_context(cannot)?;
    Ok((record, summary))
}

/// `file` of every repeat as one CSV: the first header, then each repeat's
/// rows with its `run` cells set to K and its `repetition` cells to
/// `repetitions[K - 1]`. Repeats without the
/// file add nothing; none with it: no file.
fn renumbered(
    repeats: &[(PathBuf, Record)],
    repetitions: &[u32],
    file: &str,
    to: &Path,
) -> Result<()> {
    let mut out: Option<csv::Writer<File>> = None;
    for (i, (dir, _)) in repeats.iter().enumerate() {
        let path = record_file(dir, file);
        let Ok(source) = File::open(&path) else {
            continue;
        };
        let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
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
        let k = (i + 1).to_string();
        let rep = repetitions.get(i).map_or(k.clone(), |r| r.to_string());
        for row in csv.records() {
            let row = row.with_context(|| format!("cannot read {}", path.display()))?;
            let cells = row.iter().enumerate().map(|(j, cell)| {
                if Some(j) == run {
                    k.as_str()
                } else if Some(j) == repetition {
                    rep.as_str()
                } else {
                    cell
                }
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
