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
