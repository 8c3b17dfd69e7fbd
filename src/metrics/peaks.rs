//! The peak of host memory in each phase of a run, two ways: the highest
//! sample, and the kernel's exact peak (VmHWM, which the parent read and
//! reset at every phase edge: `sampler::hwm`). A spike shorter than the
//! sampling interval shows as a kernel peak above the sampled one.
//!
//! Each edge carries the kernel's peak of the span since the edge before
//! it, so a phase's kernel peak is the largest of the spans its begin and
//! end enclose. The reset happens when the parent reads the edge, a moment
//! after the worker sent it: what the worker did in between counts in the
//! span before (a few µs to a ms at most).

use serde::{Deserialize, Serialize};

use crate::protocol::{Edge, Phase};
use crate::record::{PhaseStack, RunRecord};

/// One phase of one run (one begin and its end).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhasePeak {
    pub cycle: u32,
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub begin_s: f64,
    pub end_s: f64,
    /// The highest host RSS sample from begin to end; `None` without one.
    pub sampled_peak_bytes: Option<u64>,
    /// The kernel's peak of host RSS from begin to end; `None` where an
    /// edge in it has none (the run's `kernel_peak_unavailable` says why).
    pub kernel_peak_bytes: Option<u64>,
}

impl PhasePeak {
    /// What the samples missed: kernel peak − sampled peak (0 when the
    /// samples caught it).
    pub fn missed_bytes(&self) -> Option<u64> {
        Some(
            self.kernel_peak_bytes?
                .saturating_sub(self.sampled_peak_bytes.unwrap_or(0)),
        )
    }
}

/// Every complete phase of `run` in the order they end, with both peaks;
/// empty when no edge carries a kernel peak (records made before memrel
/// read it, or where it was not available).
pub fn of_run(run: &RunRecord) -> Vec<PhasePeak> {
    if run.events.iter().all(|e| e.kernel_peak_bytes().is_none()) {
        return Vec::new();
    }
    // Per phase begun: its begin's index, time and model.
    let mut open: PhaseStack<(usize, f64, Option<String>)> = PhaseStack::default();
    let mut out = Vec::new();
    for (i, event) in run.events.iter().enumerate() {
        let e = &event.edge;
        match e.edge {
            Edge::Begin => open.begin(e.phase, (i, event.t_s, e.model.clone())),
            Edge::End => {
                let Some((begun, begin_s, model)) = open.end(e.phase) else {
                    continue;
                };
                // The spans after the begin edge, up to and including this one.
                let kernel_peak_bytes = run.events[begun + 1..=i]
                    .iter()
                    .map(|e| e.kernel_peak_bytes())
                    .try_fold(0u64, |max, peak| Some(max.max(peak?)));
                out.push(PhasePeak {
                    cycle: e.cycle,
                    phase: e.phase,
                    model,
                    begin_s,
                    end_s: event.t_s,
                    sampled_peak_bytes: sampled_peak(run, begin_s, event.t_s),
                    kernel_peak_bytes,
                });
            }
        }
    }
    out
}

/// The highest RSS sample in [from_s, to_s] (samples are in time order).
fn sampled_peak(run: &RunRecord, from_s: f64, to_s: f64) -> Option<u64> {
    let first = run.samples.partition_point(|s| s.t_s < from_s);
    run.samples[first..]
        .iter()
        .take_while(|s| s.t_s <= to_s)
        .map(|s| s.host_bytes())
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixture;
    use crate::record::{Part, Resource};

    const MIB: u64 = crate::record::fixture::MIB;

    /// A load whose 64 MiB spike fell between two samples: the kernel's
    /// peak holds it, the sampled one does not.
    #[test]
    fn a_spike_between_samples_shows_in_the_kernel_peak_only() {
        let mut run = fixture::run(1, "drop", 1, &[0]);
        for e in &mut run.events {
            let host = e.readings.get(Resource::Host).unwrap_or(0);
            e.readings.set_part(Resource::Host, Part::Peak, host);
        }
        let load_end = run
            .events
            .iter_mut()
            .find(|e| e.edge.phase == Phase::Load && e.edge.edge == Edge::End)
            .expect("a load");
        load_end
            .readings
            .set_part(Resource::Host, Part::Peak, 110 * MIB + 64 * MIB);
        let peaks = of_run(&run);
        let load = peaks
            .iter()
            .find(|p| p.phase == Phase::Load)
            .expect("the load's peaks");
        assert_eq!(load.kernel_peak_bytes, Some(174 * MIB));
        let sampled = load.sampled_peak_bytes.expect("samples in the load");
        assert!(sampled <= 110 * MIB, "{sampled}");
        assert_eq!(load.missed_bytes(), Some(174 * MIB - sampled));
        // Every phase of the run is there, in the order they end.
        let phases: Vec<Phase> = peaks.iter().map(|p| p.phase).collect();
        assert_eq!(phases[..3], [Phase::Baseline, Phase::Load, Phase::Unload]);
    }

    #[test]
    fn a_run_without_kernel_peaks_has_no_rows_and_a_gap_leaves_a_phase_unknown() {
        let mut run = fixture::run(1, "drop", 1, &[0]);
        assert!(of_run(&run).is_empty());
        for e in &mut run.events {
            let host = e.readings.get(Resource::Host).unwrap_or(0);
            e.readings.set_part(Resource::Host, Part::Peak, host);
        }
        run.events[3]
            .readings
            .remove_part(Resource::Host, Part::Peak);
        let peaks = of_run(&run);
        let load = peaks.iter().find(|p| p.phase == Phase::Load).expect("load");
        assert_eq!(load.kernel_peak_bytes, None, "{:?}", run.events[3]);
    }
}
