//! `--trace-allocations` in a plan: refused before anything runs where no
//! Python program runs (memrel's own worker is Rust: no tracemalloc); for
//! each run, the file its program's memrel module writes
//! (`MEMREL_TRACE_ALLOCATIONS`, one per run so strategies and repetitions
//! stay apart), taken into the results directory's `allocations.csv` once
//! the run is over, with a note where nothing was traced.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::protocol::{Edge, Phase};
use crate::record::allocations::{self, Site};
use crate::record::RunRecord;
use crate::scenario::{Scenario, WorkerKind};
use crate::worker::Plug;

/// Refuses the flag for a scenario memrel's own worker runs.
pub fn check(scenario: &Scenario) -> Result<()> {
    match scenario.worker {
        WorkerKind::Command(_) => Ok(()),
        WorkerKind::Candle | WorkerKind::Fake => bail!(
            "--trace-allocations traces a Python program's allocations with tracemalloc, and \
             scenario {} runs memrel's own {} worker, a Rust process with no tracemalloc: use it \
             with memrel exec or a scenario with command = [...]",
            scenario.name,
            if scenario.worker == WorkerKind::Fake {
                "fake"
            } else {
                "candle"
            }
        ),
    }
}

/// The file run `run`'s program writes into (hidden in the results
/// directory, removed once taken in).
pub fn program_file(out_dir: &Path, run: u32) -> PathBuf {
    out_dir.join(format!(".allocations-run{run}.csv"))
}

/// `plug` with its program told to write into `file`.
pub fn traced(plug: &Plug, file: &Path) -> Plug {
    let mut plug = plug.clone();
    if let Plug::Command(spec) = &mut plug {
        spec.trace_allocations = Some(file.to_path_buf());
    }
    plug
}

/// Takes the program's file of `run` into `out_dir/allocations.csv` (the
/// rows of the runs before kept) and removes it; a note where the run
/// traced nothing: the program never imported the memrel module, marked no
/// cycle that ended, or held nothing tracemalloc saw.
pub fn take_in(file: &Path, out_dir: &Path, run: &RunRecord) -> Result<Option<String>> {
    let meta = &run.meta;
    let names = (meta.run, meta.strategy.as_str(), meta.repetition);
    let found = allocations::from_program(file, names);
    let _ = std::fs::remove_file(file);
    let who = format!("run {} ({}): --trace-allocations", meta.run, meta.strategy);
    let Some(sites) = found? else {
        return Ok(Some(format!(
            "{who}: nothing was traced: the program never imported the memrel module \
             (`import memrel`, docs/guide.md \"Phase markers\")"
        )));
    };
    let note = sites.is_empty().then(|| {
        if closed_a_cycle(run) {
            format!("{who}: nothing tracemalloc saw is still held after a cycle (it sees Python objects and numpy arrays, not a torch tensor's storage or a C library's malloc)")
        } else {
            format!("{who}: nothing was traced: the program marked no cycle (a memrel.phase(\"load\") then an \"unload\" or memrel.release())")
        }
    });
    let mut all: Vec<Site> = allocations::read(out_dir)?;
    all.retain(|s| s.run != meta.run);
    all.extend(sites);
    if !all.is_empty() {
        allocations::write(out_dir, &all)?;
    }
    Ok(note)
}

/// Whether a cycle of `run` reached the end of an unload or a release,
/// where the module snapshots.
fn closed_a_cycle(run: &RunRecord) -> bool {
    run.events.iter().any(|e| {
        e.edge.cycle >= 1
            && e.edge.edge == Edge::End
            && matches!(e.edge.phase, Phase::Unload | Phase::Release)
    })
}

/// The lanes' allocations.csv (runs spread over GPUs) as one in `out_dir`,
/// in run order.
pub fn join(out_dir: &Path, lanes: &[PathBuf]) -> Result<()> {
    let mut all = Vec::new();
    for lane in lanes {
        all.extend(allocations::read(lane)?);
    }
    if all.is_empty() {
        return Ok(());
    }
    all.sort_by_key(|s| s.run);
    allocations::write(out_dir, &all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixture;

    const HEADER: &str = "cycle,edge,file,line,bytes,count,traced_bytes,tracemalloc_bytes\n";

    #[test]
    fn each_runs_file_is_taken_in_or_said_to_hold_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let marked = fixture::run(1, "drop", 1, &[4]);
        let file = program_file(out, 1);
        let note = take_in(&file, out, &marked).unwrap().unwrap();
        assert!(note.contains("never imported the memrel module"), "{note}");
        std::fs::write(&file, HEADER).unwrap();
        let note = take_in(&file, out, &marked).unwrap().unwrap();
        assert!(
            note.contains("nothing tracemalloc saw is still held"),
            "{note}"
        );
        let mut unmarked = marked.clone();
        unmarked.events.clear();
        std::fs::write(&file, HEADER).unwrap();
        let note = take_in(&file, out, &unmarked).unwrap().unwrap();
        assert!(note.contains("marked no cycle"), "{note}");
        assert!(!out.join(allocations::ALLOCATIONS_FILE).exists());

        for run in [1, 2] {
            let file = program_file(out, run);
            std::fs::write(
                &file,
                format!("{HEADER}1,release,p.py,{run},4096,1,4096,0\n"),
            )
            .unwrap();
            let record = fixture::run(run, "trim", 3, &[4]);
            assert_eq!(take_in(&file, out, &record).unwrap(), None);
            assert!(!file.exists());
        }
        let sites = allocations::read(out).unwrap();
        let got: Vec<(u32, &str, u32, u32)> = sites
            .iter()
            .map(|s| (s.run, s.strategy.as_str(), s.repetition, s.line))
            .collect();
        assert_eq!(got, [(1, "trim", 3, 1), (2, "trim", 3, 2)]);
    }

    #[test]
    fn the_lanes_files_join_in_run_order() {
        let dir = tempfile::tempdir().unwrap();
        let lanes: Vec<PathBuf> = ["cuda0", "cuda1"]
            .iter()
            .map(|l| dir.path().join("lanes").join(l))
            .collect();
        for (lane, runs) in lanes.iter().zip([[1, 3], [2, 4]]) {
            std::fs::create_dir_all(lane).unwrap();
            for run in runs {
                let file = program_file(lane, run);
                std::fs::write(&file, format!("{HEADER}1,unload,p.py,{run},1,1,1,0\n")).unwrap();
                take_in(&file, lane, &fixture::run(run, "drop", 1, &[1])).unwrap();
            }
        }
        join(dir.path(), &lanes).unwrap();
        let runs: Vec<u32> = allocations::read(dir.path())
            .unwrap()
            .iter()
            .map(|s| s.run)
            .collect();
        assert_eq!(runs, [1, 2, 3, 4]);
        // No lane traced anything: no file.
        let empty = tempfile::tempdir().unwrap();
        join(empty.path(), &[]).unwrap();
        assert!(!empty.path().join(allocations::ALLOCATIONS_FILE).exists());
    }
}
