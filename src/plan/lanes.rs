//! Runs spread over several GPUs (`devices = [0, 1]`, `--devices 0,1`): one
//! lane per GPU, each a thread that takes the next run from one queue and
//! makes it with its worker pinned to its GPU, so N GPUs answer in about
//! 1/N of the time.
//!
//! Each lane writes an ordinary results directory of its own
//! (`lanes/cuda<N>/`, streamed as a run always is), so nothing is shared
//! while runs go on. When every lane has stopped, their files are joined
//! into the invocation's directory by `record::join` (rows as they are: run
//! numbers are the invocation's, each run's device in runs.json), and the
//! lanes are removed.
//! A lane that could not be joined stays where it is, and the error says so.

use std::collections::VecDeque;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{anyhow, Context, Result};

use super::{RunContext, Slot};
use crate::export;
use crate::metrics::{self, Summary};
use crate::record::Record;
use crate::scenario::DeviceSpec;
use crate::worker::Plug;

/// Makes `slots` on `gpus` in parallel into `out_dir`, whose record starts
/// as `record` (no runs); the joined record of every run and its summary.
pub(super) fn execute(
    run: &RunContext,
    plug: &Plug,
    record: Record,
    out_dir: &Path,
    slots: Vec<Slot>,
    gpus: &[u32],
) -> Result<(Record, Summary)> {
    let queue = Mutex::new(VecDeque::from(slots));
    let lanes: Vec<Result<(u32, PathBuf, Record)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = gpus
            .iter()
            .map(|&gpu| {
                let queue = &queue;
                let record = record.clone();
                scope.spawn(move || lane(run, plug, record, out_dir, gpu, queue))
            })
            .collect();
        handles
            .into_iter()
            .zip(gpus)
            .map(|(h, gpu)| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("the lane of cuda:{gpu} panicked")))
            })
            .collect()
    });
    let mut done = Vec::new();
    let mut errors = Vec::new();
    for lane in lanes {
        match lane {
            Ok(lane) => done.push(lane),
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    let dirs: Vec<PathBuf> = done.iter().map(|(_, dir, _)| dir.clone()).collect();
    let joined = join(record, out_dir, done)?;
    super::allocations::join(out_dir, &dirs).with_context(|| {
        format!(
            "cannot join the lanes' allocations in {}",
            out_dir.display()
        )
    })?;
    let summary = metrics::summarize(&joined);
    export::write_derived_run_outputs(out_dir, &joined, &summary)
        .with_context(|| format!("cannot write results into {}", out_dir.display()))?;
    if !errors.is_empty() {
        return Err(anyhow!(errors.join("; ")));
    }
    for dir in &dirs {
        fs::remove_dir_all(dir)
            .with_context(|| format!("cannot remove the lane directory {}", dir.display()))?;
    }
    let _ = fs::remove_dir(out_dir.join("lanes"));
    Ok((joined, summary))
}

/// One GPU's lane: takes runs from `queue` until it is empty (or memrel was
/// told to stop) and makes them on `gpu`, into `out_dir/lanes/cuda<gpu>`.
fn lane(
    run: &RunContext,
    plug: &Plug,
    mut record: Record,
    out_dir: &Path,
    gpu: u32,
    queue: &Mutex<VecDeque<Slot>>,
) -> Result<(u32, PathBuf, Record)> {
    let dir = out_dir.join("lanes").join(format!("cuda{gpu}"));
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let device = DeviceSpec::Cuda(gpu as usize);
    let plug = plug.on_device(device);
    record.header.device = device.to_string();
    loop {
        let next = queue
            .lock()
            .map_err(|_| anyhow!("the run queue is poisoned"))?
            .pop_front();
        let Some(slot) = next else { break };
        run.make(&plug, &mut record, &dir, slot)?;
        if crate::signals::received().is_some() {
            break;
        }
    }
    Ok((gpu, dir, record))
}

/// Writes the lanes' runs into `out_dir` as one record (`record::join`:
/// rows as they are, each run's device named), the header's sampler the
/// first lane's.
fn join(mut record: Record, out_dir: &Path, lanes: Vec<(u32, PathBuf, Record)>) -> Result<Record> {
    if let Some((_, _, first)) = lanes.first() {
        record.header.sampler = first.header.sampler.clone();
    }
    let gpus: Vec<u32> = lanes.iter().map(|(gpu, _, _)| *gpu).collect();
    let parts = lanes
        .into_iter()
        .map(|(_, dir, lane)| (dir, lane))
        .collect();
    crate::record::join::join(out_dir, record.header, parts, |lane, meta| {
        let mut meta = meta.clone();
        if let Some(gpu) = gpus.get(lane) {
            meta.device = Some(DeviceSpec::Cuda(*gpu as usize).to_string());
        }
        meta
    })
    .with_context(|| {
        format!(
            "cannot join the runs in {} (each GPU's runs stay in {}/lanes)",
            out_dir.display(),
            out_dir.display()
        )
    })
}
