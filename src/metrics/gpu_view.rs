//! One GPU's view of a run, for records with several GPUs: the runs of one
//! invocation spread over GPUs (`devices = [0, 1]`), or a program whose
//! processes use several (VRAM per GPU, `record::gpu`).
//!
//! Every metric is written for a run whose device readings are one number
//! per sample and per phase edge. This module gives that to them: a view of
//! the run in which `vram_bytes` is GPU N's, so the metrics stay as they
//! are. memrel's worker reads its own GPU at its edges; the parent reads
//! every GPU at every edge (`session::edges`: the process's or the
//! tree's sum per GPU, the edge's `gpu_vram`). Only records made before
//! that have edges without such a reading: theirs are read off the samples,
//! a begin edge the last sample at or before it, an end edge the first at
//! or after it.

use crate::metrics::ResourceFacts;
use std::borrow::Cow;

use super::Resource;
use crate::protocol::Edge;
use crate::record::{Header, RunRecord};

/// The GPU index of a device name (`cuda`, `cuda:N`).
pub fn gpu_of(device: &str) -> Option<u32> {
    match Resource::device_of(device) {
        Some(Resource::Device(n)) => Some(n),
        _ => None,
    }
}

/// The GPU whose edge readings in `run` (of a record with `header`) are the
/// worker's own: memrel's worker reads its own device (the run's, else the
/// record's); a program's or an attached process's edge reading is the
/// parent's (its own `vram_bytes` the root process's, every GPU's in
/// `gpu_vram`), so none.
pub fn own_gpu(header: &Header, run: &RunRecord) -> Option<u32> {
    if header.program.is_some() || header.attached.is_some() {
        return None;
    }
    match &run.meta.device {
        Some(device) => gpu_of(device),
        None => gpu_of(&header.device),
    }
}

/// `run` as resource `r` saw it: for a GPU its [`view`], for the others the
/// run itself. Metrics and charts read a run's GPU through this one door.
pub fn of<'a>(header: &Header, run: &'a RunRecord, r: Resource) -> Cow<'a, RunRecord> {
    match r {
        Resource::Device(gpu) => view(run, gpu, own_gpu(header, run)),
        _ => Cow::Borrowed(run),
    }
}

/// `run` as GPU `gpu` saw it; `own` is the GPU whose edge readings are the
/// worker's own (memrel's worker: the run's device, else the record's;
/// `None` for a program). A run of one device on a machine of one GPU is
/// its own view (borrowed: nothing copied).
pub fn view(run: &RunRecord, gpu: u32, own: Option<u32>) -> Cow<'_, RunRecord> {
    let per_gpu = run.samples.iter().any(|s| s.readings.per_gpu());
    // A program sampled as a tree on one GPU: its samples hold the tree's
    // sum and its edges no reading of their own (one process's is not the
    // tree's), so the edges are read off the samples.
    let edges_from_samples = own.is_none()
        && run
            .events
            .iter()
            .all(|e| e.readings.vram_column().is_none())
        && run.samples.iter().any(|s| s.vram_bytes().is_some());
    if !per_gpu && !edges_from_samples && own.is_none_or(|own| own == gpu) {
        return Cow::Borrowed(run);
    }
    let resource = Resource::Device(gpu);
    let mut out = run.clone();
    for sample in &mut out.samples {
        let bytes = if per_gpu {
            resource.in_sample(sample)
        } else if edges_from_samples {
            sample.vram_bytes()
        } else {
            None
        };
        sample.readings.set_one_device(gpu, bytes);
    }
    if own != Some(gpu) {
        let read: Vec<(f64, u64)> = out
            .samples
            .iter()
            .filter_map(|s| s.vram_bytes().map(|v| (s.t_s, v)))
            .collect();
        for event in &mut out.events {
            let bytes = if event.readings.per_gpu() {
                // Read at the edge: a GPU that lists none of the processes holds 0.
                Some(event.readings.get(resource).unwrap_or(0))
            } else {
                at_edge(&read, event.t_s, event.edge.edge)
            };
            event.readings.set_one_device(gpu, bytes);
            event.edge.memory.vram_bytes = bytes;
        }
    } else {
        // The worker's own reading of its GPU (the root's own, where the
        // parent also read every GPU).
        for event in &mut out.events {
            let own_bytes = event.readings.vram_column();
            event.readings.set_one_device(gpu, own_bytes);
        }
    }
    Cow::Owned(out)
}

/// A GPU's bytes at an edge at `t_s`, from its readings `read` (time order):
/// a begin edge the last at or before it (none yet: 0, the run holds nothing
/// on a GPU before it first lists one of its processes), an end edge the
/// first at or after it (none: the last). `None`: the GPU was never read.
fn at_edge(read: &[(f64, u64)], t_s: f64, edge: Edge) -> Option<u64> {
    if read.is_empty() {
        return None;
    }
    match edge {
        Edge::Begin => {
            let upto = read.partition_point(|(t, _)| *t <= t_s);
            Some(upto.checked_sub(1).map_or(0, |i| read[i].1))
        }
        Edge::End => {
            let from = read.partition_point(|(t, _)| *t < t_s);
            read.get(from).or(read.last()).map(|r| r.1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixture;
    use crate::record::gpu::{GpuVram, ProcessVram};

    #[test]
    fn another_gpus_view_reads_its_sums_and_its_edges_off_the_samples() {
        let mut record = fixture::record();
        let run = &mut record.runs[0];
        let first_edge_s = run.events[0].t_s;
        for (i, s) in run.samples.iter_mut().enumerate() {
            let on_gpu1 = [ProcessVram {
                gpu: 1,
                pid: 7,
                bytes: 1000 + i as u64,
            }];
            // GPU 1 lists the run's process from its first edge on.
            s.readings.set_gpu_vram(&if s.t_s >= first_edge_s {
                GpuVram::of(0b10, &on_gpu1)
            } else {
                GpuVram::of(0, &[])
            });
        }
        let view1 = view(run, 1, Some(0));
        for (s, v) in run.samples.iter().zip(&view1.samples) {
            assert_eq!(v.vram_bytes(), s.readings.gpu_vram().get(1));
        }
        for e in &view1.events {
            let mut read = run
                .samples
                .iter()
                .filter_map(|s| s.readings.gpu_vram().get(1).map(|v| (s.t_s, v)));
            let expected = match e.edge.edge {
                Edge::Begin => read.rfind(|(t, _)| *t <= e.t_s),
                Edge::End => read.clone().find(|(t, _)| *t >= e.t_s).or(read.next_back()),
            };
            assert_eq!(
                e.readings.vram_column(),
                Some(expected.map_or(0, |r| r.1)),
                "{e:?}"
            );
        }
        // GPU 0, the worker's own, keeps the worker's edge readings; its
        // samples have no GPU 0 reading: none.
        let view0 = view(run, 0, Some(0));
        assert!(view0.samples.iter().all(|s| s.vram_bytes().is_none()));
        assert_eq!(view0.events, run.events);
    }

    /// `exec --tree` on one GPU: the samples hold the tree's sum, the
    /// edges none of their own; the view reads them off the samples.
    #[test]
    fn a_program_trees_edges_are_read_off_its_samples() {
        let mut record = fixture::record();
        let run = &mut record.runs[0];
        for (i, s) in run.samples.iter_mut().enumerate() {
            s.readings.set_one_device(0, Some(100 * i as u64));
        }
        for e in &mut run.events {
            e.readings.set_one_device(0, None);
        }
        let program = view(run, 0, None);
        let read: Vec<(f64, u64)> = run
            .samples
            .iter()
            .filter_map(|s| s.vram_bytes().map(|v| (s.t_s, v)))
            .collect();
        for e in &program.events {
            assert_eq!(
                e.readings.vram_column(),
                at_edge(&read, e.t_s, e.edge.edge),
                "{e:?}"
            );
            assert!(e.readings.vram_column().is_some());
        }
        assert_eq!(program.samples, run.samples);
        // memrel's worker keeps its own edges (none here: none made up).
        assert!(matches!(view(run, 0, Some(0)), Cow::Borrowed(_)));
    }

    /// Issue 35's `exec --tree` on two GPUs: rank 0 allocates 1 GiB right
    /// after each phase begins, so the first sample after a begin edge
    /// already holds the next phase. An edge read at the edge keeps its own
    /// value; the samples do not replace it.
    #[test]
    fn an_edges_own_per_gpu_reading_wins_over_the_next_sample() {
        const MIB: u64 = crate::record::fixture::MIB;
        let mut record = fixture::record();
        let run = &mut record.runs[0];
        for s in run.samples.iter_mut() {
            // Every sample sees the 1 GiB the phase allocated right after its edge.
            let on = [ProcessVram {
                gpu: 0,
                pid: 7,
                bytes: 1636 * MIB,
            }];
            s.readings.set_gpu_vram(&GpuVram::of(0b11, &on));
        }
        for e in &mut run.events {
            let on = [
                ProcessVram {
                    gpu: 0,
                    pid: 7,
                    bytes: 612 * MIB,
                },
                ProcessVram {
                    gpu: 1,
                    pid: 8,
                    bytes: 500 * MIB,
                },
            ];
            e.readings.set_gpu_vram(&GpuVram::of(0b11, &on));
        }
        for (gpu, expected) in [(0, 612 * MIB), (1, 500 * MIB)] {
            let v = view(run, gpu, None);
            assert!(v
                .events
                .iter()
                .all(|e| e.readings.vram_column() == Some(expected)));
            assert!(v.samples.iter().all(|s| s.vram_bytes().is_some()));
        }
    }

    #[test]
    fn a_run_of_one_gpu_on_a_machine_of_one_is_its_own_view() {
        let record = fixture::record();
        assert!(matches!(
            view(&record.runs[0], 0, Some(0)),
            Cow::Borrowed(_)
        ));
        // Another GPU of a record without per-GPU readings: nothing read.
        let other = view(&record.runs[0], 1, Some(0));
        assert!(other.samples.iter().all(|s| s.vram_bytes().is_none()));
        assert!(other
            .events
            .iter()
            .all(|e| e.readings.vram_column().is_none()));
    }
}
