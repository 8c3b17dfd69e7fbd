//! `allocations.csv`: where the bytes still held were allocated, as
//! tracemalloc saw them in a traced program (`--trace-allocations`; the
//! module's `memrel._trace`). One row per site per snapshot: a run's cycle
//! ends an `unload` or a `release`, and the 20 sites whose size grew most
//! since cycle 1's load began are written (file:line, bytes, blocks), with
//! the net growth of everything traced and what tracemalloc itself held.
//!
//! Raw data like samples.csv: written once a run is over (the program's own
//! file, its run named), read by the console, `memrel report` and `advise`;
//! nothing in the record depends on it. Read with a clear error naming the
//! file and the line of a row that does not parse.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil::write_atomic;

/// The file in a results directory.
pub const ALLOCATIONS_FILE: &str = "allocations.csv";

/// One site still holding memory at one snapshot of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    pub run: u32,
    pub strategy: String,
    pub repetition: u32,
    pub cycle: u32,
    /// The phase whose end the snapshot followed: `unload` or `release`.
    pub edge: String,
    /// The allocating line's file, as the program's code names it.
    pub file: String,
    pub line: u32,
    /// Growth of the bytes allocated at this line since cycle 1's load
    /// began (still held).
    pub bytes: u64,
    /// Growth of the blocks allocated there.
    pub count: u64,
    /// Net growth of everything traced since the load began (every site,
    /// shrunk ones included): what to hold against /proc's `retained`.
    pub traced_bytes: i64,
    /// tracemalloc's own memory at the snapshot (its traces), which the
    /// run's readings include.
    pub tracemalloc_bytes: u64,
}

/// A row of the file the module writes for one run (a [`Site`] without
/// the run's names).
#[derive(Debug, Clone, Deserialize)]
struct ProgramRow {
    cycle: u32,
    edge: String,
    file: String,
    line: u32,
    bytes: u64,
    count: u64,
    traced_bytes: i64,
    tracemalloc_bytes: u64,
}

/// What a traced program's module left for a run: `None` when it wrote no
/// file (the program never imported the memrel module); else its sites
/// (none: it marked no cycle that ended, or nothing it traced is held).
pub fn from_program(
    path: &Path,
    (run, strategy, repetition): (u32, &str, u32),
) -> Result<Option<Vec<Site>>> {
    if !path.exists() {
        return Ok(None);
    }
    let rows: Vec<ProgramRow> = read_rows(path)?;
    Ok(Some(
        rows.into_iter()
            .map(|r| Site {
                run,
                strategy: strategy.to_string(),
                repetition,
                cycle: r.cycle,
                edge: r.edge,
                file: r.file,
                line: r.line,
                bytes: r.bytes,
                count: r.count,
                traced_bytes: r.traced_bytes,
                tracemalloc_bytes: r.tracemalloc_bytes,
            })
            .collect(),
    ))
}

/// The sites of `dir/allocations.csv`, in the file's order; empty when
/// the directory has none (a run made without `--trace-allocations`).
pub fn read(dir: &Path) -> Result<Vec<Site>> {
    let path = dir.join(ALLOCATIONS_FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    read_rows(&path)
}

/// Writes `sites` as `dir/allocations.csv`, atomically.
pub fn write(dir: &Path, sites: &[Site]) -> Result<()> {
    let path = dir.join(ALLOCATIONS_FILE);
    let mut csv = csv::WriterBuilder::new().from_writer(Vec::new());
    if sites.is_empty() {
        csv.write_record(COLUMNS)?;
    }
    for site in sites {
        csv.serialize(site)?;
    }
    let bytes = csv
        .into_inner()
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    write_atomic(&path, &bytes)
}

/// The columns of allocations.csv, in order.
pub const COLUMNS: [&str; 11] = [
    "run",
    "strategy",
    "repetition",
    "cycle",
    "edge",
    "file",
    "line",
    "bytes",
    "count",
    "traced_bytes",
    "tracemalloc_bytes",
];

/// Every row of the CSV at `path`, each error naming the file and line.
fn read_rows<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for row in reader.deserialize() {
        match row {
            Ok(row) => out.push(row),
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                bail!(
                    "{} line {line}: not a row of allocations ({}): {e}",
                    path.display(),
                    COLUMNS.join(",")
                );
            }
        }
    }
    Ok(out)
}

/// The sites of the last snapshot of each run (its last cycle, the last
/// edge written in it), largest first, in run order.
pub fn last_of_each_run(sites: &[Site]) -> Vec<Vec<&Site>> {
    let mut runs: Vec<u32> = sites.iter().map(|s| s.run).collect();
    runs.sort_unstable();
    runs.dedup();
    runs.into_iter()
        .filter_map(|run| {
            let of_run: Vec<&Site> = sites.iter().filter(|s| s.run == run).collect();
            let last = of_run.last()?;
            let (cycle, edge) = (last.cycle, last.edge.clone());
            let mut group: Vec<&Site> = of_run
                .into_iter()
                .filter(|s| s.cycle == cycle && s.edge == edge)
                .collect();
            group.sort_by_key(|s| std::cmp::Reverse(s.bytes));
            Some(group)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(run: u32, cycle: u32, edge: &str, line: u32, bytes: u64) -> Site {
        Site {
            run,
            strategy: "drop".into(),
            repetition: 1,
            cycle,
            edge: edge.into(),
            file: "prog, with a comma.py".into(),
            line,
            bytes,
            count: 3,
            traced_bytes: -5,
            tracemalloc_bytes: 1024,
        }
    }

    #[test]
    fn sites_read_back_as_written_and_the_last_snapshot_of_each_run_is_picked() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_empty());
        let sites = vec![
            site(1, 1, "unload", 10, 5),
            site(1, 2, "unload", 10, 7),
            site(1, 2, "release", 11, 1),
            site(1, 2, "release", 12, 9),
            site(2, 1, "unload", 10, 2),
        ];
        write(dir.path(), &sites).unwrap();
        let back = read(dir.path()).unwrap();
        assert_eq!(back, sites);
        let text = std::fs::read_to_string(dir.path().join(ALLOCATIONS_FILE)).unwrap();
        assert_eq!(text.lines().next(), Some(COLUMNS.join(",").as_str()));
        let last = last_of_each_run(&back);
        let lines: Vec<Vec<u32>> = last
            .iter()
            .map(|g| g.iter().map(|s| s.line).collect())
            .collect();
        assert_eq!(lines, [vec![12, 11], vec![10]]);
        write(dir.path(), &[]).unwrap();
        assert!(read(dir.path()).unwrap().is_empty());
    }

    /// The module's columns (`memrel._trace.COLUMNS`) are this file's
    /// after the run's names, in order: one list in each language, tied.
    #[test]
    fn the_modules_columns_are_the_files_after_the_runs_names() {
        let module = include_str!("../../python/memrel/_trace.py");
        let start = module.find("\nCOLUMNS = (").expect("the module's COLUMNS");
        let body = &module[start..];
        let body = &body[..body.find(')').expect("a closing bracket")];
        let names: Vec<&str> = body.split('"').skip(1).step_by(2).collect();
        assert_eq!(names, COLUMNS[3..]);
    }

    #[test]
    fn a_bad_row_is_named_by_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ALLOCATIONS_FILE);
        let good = "1,drop,1,1,unload,a.py,3,100,1,100,10";
        std::fs::write(
            &path,
            format!(
                "{}\n{good}\n1,drop,1,1,unload,a.py,x,100,1,100,10\n",
                COLUMNS.join(",")
            ),
        )
        .unwrap();
        let e = format!("{:#}", read(dir.path()).unwrap_err());
        assert!(e.contains("allocations.csv line 3"), "{e}");
    }

    #[test]
    fn the_programs_file_becomes_the_runs_sites_and_no_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run-1.csv");
        assert_eq!(from_program(&path, (1, "drop", 1)).unwrap(), None);
        std::fs::write(
            &path,
            "cycle,edge,file,line,bytes,count,traced_bytes,tracemalloc_bytes\n\
             1,release,p.py,4,50331648,49,83886080,4096\n",
        )
        .unwrap();
        let sites = from_program(&path, (3, "trim", 2)).unwrap().unwrap();
        assert_eq!(sites.len(), 1);
        assert_eq!(
            (
                sites[0].run,
                sites[0].strategy.as_str(),
                sites[0].repetition
            ),
            (3, "trim", 2)
        );
        assert_eq!((sites[0].line, sites[0].bytes), (4, 50331648));
    }
}
