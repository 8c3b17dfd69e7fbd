//! The VRAM part of `memrel calibrate --device cuda`: the fake worker holds
//! exactly N bytes of device memory (`cuMemAlloc_v2`, every byte set) and
//! this compares memrel's per-process VRAM with it: the parent's NVML
//! samples and the worker's own reading at the phase edges, each as a change
//! over the reading just before the load (the CUDA context alone holds
//! hundreds of MiB, which is no part of what a load allocated).
//!
//! The target is the allocation granularity, not a percentage: cuMemAlloc
//! hands out whole 2 MiB pages, and NVML's per-process figure moves in steps
//! of its own, which this measures from the run's samples (the smallest
//! change seen); the coarser of the two is the tolerance. VmHWM has no VRAM
//! counterpart: the sampled peak is compared with the highest reading before
//! a load plus what it allocated. Pure functions of a saved record.

use std::fmt::Write;

use serde::Serialize;

use super::{
    edge, middle_reading, model_id, spike_table, window, yes_no, Kind, Spike, ALIGNMENT_SLACK_S,
    MIB, SPIKE_ID,
};
use crate::export::markdown::{
    Align::{Left, Right},
    Table,
};
use crate::protocol::{Edge, Phase};
use crate::record::RunRecord;

/// cuMemAlloc's page: every allocation takes whole pages of this size.
pub const CU_MEM_ALLOC_PAGE_BYTES: u64 = 2 * 1024 * 1024;

/// How long before a load its "before" reading is taken (s), as for host memory.
const BEFORE_S: f64 = 0.1;

/// One size, as measured.
#[derive(Debug, Clone, Serialize)]
pub struct VramCase {
    pub expected_bytes: u64,
    /// Median of the samples in the 100 ms before the load.
    pub before_bytes: Option<u64>,
    /// The worker's own reading (NVML) at the load's end edge minus at its begin edge.
    pub edge_bytes: Option<i64>,
    /// Median of the samples while held minus `before_bytes`.
    pub sampled_bytes: Option<i64>,
    /// The larger of the two errors, signed (measured − expected).
    pub error_bytes: Option<i64>,
    /// Whether the size is above the granularity, so that the moment it
    /// arrived can be told from the moment before.
    pub timed: bool,
    /// First sample holding all the bytes (less one granularity), minus the
    /// load's end edge (s); `None` when not timed or never reached.
    pub alignment_s: Option<f64>,
    pub ok: bool,
}

/// The sampled peak against what the loads allocated (VmHWM: host only).
#[derive(Debug, Clone, Serialize)]
pub struct VramPeak {
    pub sampled_peak_bytes: u64,
    /// The highest of (reading before a load + what it allocated), spike included.
    pub expected_peak_bytes: u64,
    pub error_bytes: i64,
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct VramCalibration {
    /// `cuda:N`.
    pub device: String,
    /// The worker's context alone, as it calibrated it at start (`vram_floor_bytes`).
    pub floor_bytes: Option<u64>,
    /// Median of the samples in the baseline phase, before the first load.
    pub baseline_bytes: Option<u64>,
    /// The smallest change between two successive VRAM samples of the run.
    pub step_bytes: Option<u64>,
    /// The tolerance: the coarser of cuMemAlloc's page and `step_bytes`.
    pub granularity_bytes: u64,
    pub cases: Vec<VramCase>,
    pub peak: Option<VramPeak>,
    pub spike: Option<Spike>,
    pub passed: bool,
}

/// The VRAM calibration of one run of the `calibrate-vram` scenario.
pub fn measure(
    run: &RunRecord,
    device: &str,
    sizes_mib: &[u64],
    interval_s: f64,
    spike: (u64, u64),
) -> VramCalibration {
    let step_bytes = smallest_step(run);
    let granularity =
        step_bytes.map_or(CU_MEM_ALLOC_PAGE_BYTES, |s| s.max(CU_MEM_ALLOC_PAGE_BYTES));
    let mut cases = Vec::new();
    let mut expected_peak: Option<u64> = None;
    for &mib in sizes_mib {
        if let Some(case) = measure_case(run, mib, interval_s, granularity) {
            expected_peak = expected_peak.max(case.before_bytes.map(|b| b + case.expected_bytes));
            cases.push(case);
        }
    }
    let spike = measure_spike(run, spike, &mut expected_peak);
    let sampled_peak = run.samples.iter().filter_map(|s| s.vram_bytes()).max();
    let peak = sampled_peak.zip(expected_peak).map(|(sampled, expected)| {
        let error_bytes = sampled as i64 - expected as i64;
        VramPeak {
            sampled_peak_bytes: sampled,
            expected_peak_bytes: expected,
            error_bytes,
            ok: error_bytes.unsigned_abs() <= granularity,
        }
    });
    let passed = cases.len() == sizes_mib.len()
        && cases.iter().all(|c| c.ok)
        && peak.as_ref().is_some_and(|p| p.ok);
    VramCalibration {
        device: device.to_string(),
        floor_bytes: run.meta.vram_floor_bytes,
        baseline_bytes: baseline_bytes(run),
        step_bytes,
        granularity_bytes: granularity,
        cases,
        peak,
        spike,
        passed,
    }
}

/// The case of one size (`mib`), within `granularity`; `None` where the
/// run lacks its load or unload edges.
fn measure_case(run: &RunRecord, mib: u64, interval_s: f64, granularity: u64) -> Option<VramCase> {
    let id = model_id(Kind::Vram, mib);
    let expected = mib * 1024 * 1024;
    let begin = edge(run, Phase::Load, Edge::Begin, &id)?;
    let end = edge(run, Phase::Load, Edge::End, &id)?;
    let unload = edge(run, Phase::Unload, Edge::Begin, &id)?;
    let edge_bytes = match (begin.edge.memory.vram_bytes, end.edge.memory.vram_bytes) {
        (Some(b), Some(e)) => Some(e as i64 - b as i64),
        _ => None,
    };
    let before = middle_reading(window(run, begin.t_s - BEFORE_S, begin.t_s), Kind::Vram);
    let held = middle_reading(window(run, end.t_s + interval_s, unload.t_s), Kind::Vram);
    let sampled_bytes = before.zip(held).map(|(b, h)| h as i64 - b as i64);
    let error_bytes = [edge_bytes, sampled_bytes]
        .into_iter()
        .flatten()
        .map(|m| m - expected as i64)
        .max_by_key(|e| e.abs());
    let within =
        |m: Option<i64>| m.is_none_or(|m| (m - expected as i64).unsigned_abs() <= granularity);
    let timed = expected > granularity;
    let alignment_s = before.filter(|_| timed).and_then(|b| {
        let target = b + expected - granularity;
        run.samples
            .iter()
            .filter(|s| s.t_s >= begin.t_s)
            .find(|s| s.vram_bytes().is_some_and(|v| v >= target))
            .map(|s| s.t_s - end.t_s)
    });
    let aligned = !timed || alignment_s.is_some_and(|a| a.abs() <= interval_s + ALIGNMENT_SLACK_S);
    Some(VramCase {
        expected_bytes: expected,
        before_bytes: before,
        edge_bytes,
        sampled_bytes,
        error_bytes,
        timed,
        alignment_s,
        ok: sampled_bytes.is_some() && within(sampled_bytes) && within(edge_bytes) && aligned,
    })
}

/// The spike of `(MiB, ms)`, if the run has its edges; what it allocated
/// over the reading before it raises `expected_peak`.
fn measure_spike(
    run: &RunRecord,
    (spike_mib, spike_ms): (u64, u64),
    expected_peak: &mut Option<u64>,
) -> Option<Spike> {
    let begin = edge(run, Phase::Load, Edge::Begin, SPIKE_ID)?;
    let end = edge(run, Phase::Unload, Edge::End, SPIKE_ID)?;
    let bytes = spike_mib * 1024 * 1024;
    let before = middle_reading(window(run, begin.t_s - BEFORE_S, begin.t_s), Kind::Vram);
    *expected_peak = (*expected_peak).max(before.map(|b| b + bytes));
    let seen = before.and_then(|b| {
        window(run, begin.t_s, end.t_s)
            .filter_map(|s| s.vram_bytes())
            .map(|v| v as i64 - b as i64)
            .max()
    });
    Some(Spike {
        bytes,
        held_ms: spike_ms,
        seen_bytes: seen.unwrap_or(0),
        caught: seen.is_some_and(|s| s as f64 >= 0.9 * bytes as f64),
    })
}

/// Median of the samples in the baseline phase, before the first load.
fn baseline_bytes(run: &RunRecord) -> Option<u64> {
    let at = |e: Edge| {
        run.events
            .iter()
            .find(|x| x.edge.phase == Phase::Baseline && x.edge.edge == e)
    };
    let (b, e) = (at(Edge::Begin)?, at(Edge::End)?);
    middle_reading(window(run, b.t_s, e.t_s), Kind::Vram)
}

/// The smallest change between successive VRAM samples: the step NVML's
/// per-process figure (and the allocations under it) moved in, in this run.
fn smallest_step(run: &RunRecord) -> Option<u64> {
    let values: Vec<u64> = run.samples.iter().filter_map(|s| s.vram_bytes()).collect();
    values
        .windows(2)
        .map(|w| w[0].abs_diff(w[1]))
        .filter(|&d| d > 0)
        .min()
}

/// The VRAM tables, for people.
pub fn markdown(v: &VramCalibration, interval_s: f64) -> String {
    let mib = |b: u64| b as f64 / MIB;
    let opt_mib = |b: Option<u64>| {
        b.map(|b| format!("{:.0} MiB", mib(b)))
            .unwrap_or_else(|| "unknown".into())
    };
    let signed = |b: Option<i64>, digits: usize| {
        b.map(|b| format!("{:.*}", digits, b as f64 / MIB))
            .unwrap_or_else(|| "–".into())
    };
    let granularity = format!("{:.0} MiB", mib(v.granularity_bytes));
    let mut out = format!(
        "### VRAM on {}: {} (NVML per-process, sampling every {:.0} ms)\n\n\
         The fake worker's CUDA context alone held {} (its floor); {} before the first load. \
         Each size is the change over the reading just before its load.\n\n",
        v.device,
        if v.passed {
            "every target met"
        } else {
            "TARGETS MISSED"
        },
        interval_s * 1e3,
        opt_mib(v.floor_bytes),
        opt_mib(v.baseline_bytes),
    );
    let mut cases = Table::columns([
        ("kind", Left),
        ("expected MiB", Right),
        ("before MiB", Right),
        ("at the edges MiB", Right),
        ("sampled MiB", Right),
        ("error MiB", Right),
        ("marker vs memory", Right),
        ("ok", Left),
    ]);
    for c in &v.cases {
        let marker = match (c.timed, c.alignment_s) {
            (false, _) => format!("n/a (≤ {granularity})"),
            (true, Some(a)) => format!("{:+.1} ms", a * 1e3),
            (true, None) => "never reached".into(),
        };
        cases.row([
            "vram".to_string(),
            format!("{:.0}", mib(c.expected_bytes)),
            c.before_bytes
                .map(|b| format!("{:.2}", mib(b)))
                .unwrap_or_else(|| "–".into()),
            signed(c.edge_bytes, 2),
            signed(c.sampled_bytes, 2),
            c.error_bytes
                .map(|e| format!("{:+.2}", e as f64 / MIB))
                .unwrap_or_else(|| "–".into()),
            marker,
            yes_no(c.ok).to_string(),
        ]);
    }
    out.push_str(&cases.markdown());
    let mut peak = Table::columns([
        ("run", Left),
        ("sampled peak MiB", Right),
        ("expected peak MiB", Right),
        ("error MiB", Right),
        ("VmHWM", Left),
        ("ok", Left),
    ]);
    let host_only = "n/a (host only)";
    match &v.peak {
        Some(p) => peak.row([
            "vram".to_string(),
            format!("{:.2}", mib(p.sampled_peak_bytes)),
            format!("{:.2}", mib(p.expected_peak_bytes)),
            format!("{:+.2}", p.error_bytes as f64 / MIB),
            host_only.to_string(),
            yes_no(p.ok).to_string(),
        ]),
        None => peak.row(["vram", "–", "–", "–", host_only, "NO"]),
    }
    out.push('\n');
    out.push_str(&peak.markdown());
    out.push('\n');
    out.push_str(&spike_table(&v.spike));
    let _ = writeln!(
        out,
        "\nTargets: each size within the allocation granularity, {granularity}: the coarser of \
         cuMemAlloc's 2 MiB pages and the smallest change between two successive VRAM samples of \
         this run ({}); the sampled peak within it of the highest reading before a load plus what \
         that load allocated (VmHWM counts host pages only); each load's end marker within one \
         interval + 1 ms of the first sample that holds all the bytes less one granularity (sizes \
         above it; a smaller one cannot be told from the step itself).",
        opt_mib(v.step_bytes),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::{markdown as full_markdown, scenario_text, Calibration};
    use crate::model::spec::ModelSource;
    use crate::protocol::{MemoryAtEdge, PhaseEdge};
    use crate::record::{fixture, Event, Sample};
    use crate::scenario::{self, DeviceSpec};

    const M: u64 = 1 << 20;
    const BASE_MIB: u64 = 518;
    const INTERVAL_S: f64 = 0.01;

    fn event(t_s: f64, phase: Phase, edge: Edge, model: Option<&str>, vram_mib: u64) -> Event {
        Event::of_line(
            t_s,
            PhaseEdge {
                phase,
                edge,
                cycle: u32::from(phase != Phase::Baseline),
                model: model.map(str::to_string),
                elapsed_s: None,
                memory: MemoryAtEdge {
                    vram_bytes: Some(vram_mib * M),
                    ..MemoryAtEdge::default()
                },
                allocator: None,
                heap: None,
                views: Default::default(),
                note: None,
                mono_s: None,
            },
        )
    }

    /// A `calibrate-vram` run as memrel records it: the context holds
    /// 518 MiB, each size shows as `shown(mib)` MiB above it for 150 ms
    /// (the spike for `spike_ms`), samples every 10 ms off the edges.
    fn synthetic(sizes: &[u64], spike: (u64, u64), shown: impl Fn(u64) -> u64) -> RunRecord {
        let mut events = vec![
            event(0.0, Phase::Baseline, Edge::Begin, None, BASE_MIB),
            event(0.15, Phase::Baseline, Edge::End, None, BASE_MIB),
        ];
        let mut levels = vec![(0.0, BASE_MIB)];
        let mut t = 0.15;
        let items: Vec<(String, u64, f64)> = sizes
            .iter()
            .map(|&m| (model_id(Kind::Vram, m), m, 0.15))
            .chain([(SPIKE_ID.to_string(), spike.0, spike.1 as f64 / 1e3)])
            .collect();
        for (id, mib, hold_s) in &items {
            let held = BASE_MIB + shown(*mib);
            events.push(event(t, Phase::Load, Edge::Begin, Some(id), BASE_MIB));
            events.push(event(t + 0.002, Phase::Load, Edge::End, Some(id), held));
            events.push(event(
                t + hold_s,
                Phase::Unload,
                Edge::Begin,
                Some(id),
                held,
            ));
            events.push(event(
                t + hold_s + 0.001,
                Phase::Unload,
                Edge::End,
                Some(id),
                BASE_MIB,
            ));
            levels.push((t + 0.001, held));
            levels.push((t + hold_s + 0.0005, BASE_MIB));
            t += hold_s + 0.15;
        }
        let mut run = fixture::run(1, "drop", 1, &[]);
        run.events = events;
        run.samples = (0..)
            .map(|i| f64::from(i) * INTERVAL_S + 0.0033)
            .take_while(|s| *s < t)
            .map(|t_s| {
                let mib = levels.iter().rev().find(|l| l.0 <= t_s).map_or(0, |l| l.1);
                Sample::of_host(t_s, 0, 0, 0, Some(mib * M))
            })
            .collect();
        run.meta.vram_floor_bytes = Some(BASE_MIB * M);
        run
    }

    const SIZES: [u64; 4] = [1, 16, 256, 1024];

    fn round_up(mib: u64, step_mib: u64) -> u64 {
        mib.div_ceil(step_mib) * step_mib
    }

    #[test]
    fn whole_2_mib_pages_meet_the_target_with_a_2_mib_granularity() {
        let run = synthetic(&SIZES, (100, 20), |m| round_up(m, 2));
        let v = measure(&run, "cuda:0", &SIZES, INTERVAL_S, (100, 20));
        assert!(v.passed, "{v:#?}");
        assert_eq!(v.granularity_bytes, 2 * M);
        assert_eq!(v.step_bytes, Some(2 * M));
        assert_eq!(v.floor_bytes, Some(BASE_MIB * M));
        assert_eq!(v.baseline_bytes, Some(BASE_MIB * M));
        let one = &v.cases[0];
        assert_eq!(one.before_bytes, Some(BASE_MIB * M));
        assert_eq!(one.sampled_bytes, Some(2 * M as i64));
        assert_eq!(one.edge_bytes, Some(2 * M as i64));
        assert_eq!(one.error_bytes, Some(M as i64));
        assert!(!one.timed && one.alignment_s.is_none());
        for c in &v.cases[1..] {
            assert_eq!(c.error_bytes, Some(0), "{c:?}");
            let a = c.alignment_s.expect("timed sizes are reached");
            assert!((-0.002..=INTERVAL_S).contains(&a), "{a}");
        }
        let peak = v.peak.as_ref().expect("peak");
        assert_eq!(peak.sampled_peak_bytes, (BASE_MIB + 1024) * M);
        assert_eq!(peak.error_bytes, 0);
        let spike = v.spike.as_ref().expect("spike");
        assert!(
            spike.caught && spike.seen_bytes == 100 * M as i64,
            "{spike:?}"
        );

        let md = markdown(&v, INTERVAL_S);
        assert!(
            md.starts_with("### VRAM on cuda:0: every target met"),
            "{md}"
        );
        assert!(
            md.contains("| vram | 1 | 518.00 | 2.00 | 2.00 | +1.00 | n/a (≤ 2 MiB) | yes |"),
            "{md}"
        );
        assert!(
            md.contains("| vram | 1024 | 518.00 | 1024.00 | 1024.00 | +0.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| vram | 1542.00 | 1542.00 | +0.00 | n/a (host only) | yes |"),
            "{md}"
        );
        assert!(md.contains("| 100 | 20 | 100.0 | yes |"), "{md}");
        assert!(md.contains("granularity, 2 MiB"), "{md}");
    }

    #[test]
    fn a_coarser_nvml_step_is_measured_and_becomes_the_granularity() {
        let run = synthetic(&SIZES, (100, 20), |m| round_up(m, 32));
        let v = measure(&run, "cuda:0", &SIZES, INTERVAL_S, (100, 20));
        assert_eq!(v.step_bytes, Some(32 * M));
        assert_eq!(v.granularity_bytes, 32 * M);
        assert!(v.passed, "{v:#?}");
        assert!(!v.cases[0].timed && !v.cases[1].timed && v.cases[2].timed);
        assert_eq!(v.cases[1].error_bytes, Some(16 * M as i64));
    }

    #[test]
    fn a_size_off_by_more_than_the_granularity_is_a_miss_and_says_so() {
        let run = synthetic(&SIZES, (100, 20), |m| if m == 256 { 266 } else { m.max(2) });
        let v = measure(&run, "cuda:0", &SIZES, INTERVAL_S, (100, 20));
        assert!(!v.passed);
        let bad = &v.cases[2];
        assert!(!bad.ok && bad.error_bytes == Some(10 * M as i64), "{bad:?}");
        let md = markdown(&v, INTERVAL_S);
        assert!(
            md.contains("TARGETS MISSED") && md.contains("| +10.00 |"),
            "{md}"
        );
        assert!(md.contains("| NO |"), "{md}");
    }

    #[test]
    fn without_vram_samples_every_row_fails_and_nothing_reads_as_zero() {
        let mut run = synthetic(&SIZES, (100, 20), |m| m);
        for s in &mut run.samples {
            s.readings.set_one_device(0, None);
        }
        let v = measure(&run, "cuda:0", &SIZES, INTERVAL_S, (100, 20));
        assert!(!v.passed);
        assert!(v.cases.iter().all(|c| !c.ok && c.sampled_bytes.is_none()));
        assert!(v.peak.is_none() && v.step_bytes.is_none());
        assert!(!v.spike.as_ref().expect("spike").caught);
        let md = markdown(&v, INTERVAL_S);
        assert!(md.contains("| vram | 1 | – | 1.00 | – |"), "{md}");
        assert!(
            md.contains("| vram | – | – | – | n/a (host only) | NO |"),
            "{md}"
        );
    }

    #[test]
    fn a_spike_shorter_than_the_interval_can_be_missed_and_is_reported_so() {
        let run = synthetic(&SIZES, (100, 2), |m| m.max(2));
        let v = measure(&run, "cuda:0", &SIZES, INTERVAL_S, (100, 2));
        let spike = v.spike.expect("spike");
        assert!(!spike.caught && spike.held_ms == 2, "{spike:?}");
    }

    #[test]
    fn the_vram_scenario_runs_on_the_device_and_spikes_device_memory() {
        let cuda = DeviceSpec::Cuda(1);
        let text = scenario_text(Kind::Vram, cuda, &[1, 16], 10.0, (100, 20));
        let s = scenario::parse_str("calibrate-vram", "calibrate", &text).expect("parses");
        assert_eq!(s.device, cuda);
        for (id, bytes) in [("vram-1", M), ("vram-16", 16 * M), (SPIKE_ID, 100 * M)] {
            match &s.models[id] {
                ModelSource::Fake(m) => assert_eq!((m.vram_bytes, m.anon_bytes), (bytes, 0)),
                other => panic!("{id}: {other:?}"),
            }
        }
        // Host kinds stay on the CPU whatever --device says, with the same text as before.
        let anon = scenario_text(Kind::Anon, cuda, &[1], 10.0, (100, 20));
        assert_eq!(
            anon,
            scenario_text(Kind::Anon, DeviceSpec::Cpu, &[1], 10.0, (100, 20))
        );
        assert!(!anon.contains("device"), "{anon}");
    }

    #[test]
    fn a_cpu_calibration_keeps_its_table_and_a_cuda_one_appends_the_vram_tables() {
        let mut c = Calibration {
            interval_s: INTERVAL_S,
            cases: Vec::new(),
            peaks: Vec::new(),
            spikes: Vec::new(),
            vram: None,
            passed: true,
        };
        let cpu = full_markdown(&c);
        assert!(cpu.ends_with(
            "machine). VRAM: not measured here (memrel calibrate --device cuda measures it).\n"
        ));
        assert!(!serde_json::to_string(&c).expect("json").contains("vram"));
        let run = synthetic(&SIZES, (100, 20), |m| round_up(m, 2));
        c.vram = Some(measure(&run, "cuda:0", &SIZES, INTERVAL_S, (100, 20)));
        let cuda = full_markdown(&c);
        let host_part = cpu.trim_end_matches(
            "VRAM: not measured here (memrel calibrate --device cuda measures it).\n",
        );
        assert!(cuda.starts_with(host_part), "{cuda}");
        assert!(
            cuda.contains("VRAM: below.\n\n### VRAM on cuda:0"),
            "{cuda}"
        );
    }

    /// calibrate.md as people read it: a CPU part with every table and a
    /// VRAM part, one with a peak and a spike and one without (pinned before
    /// the tables moved to `export::markdown`).
    #[test]
    fn calibrate_md_as_it_reads() {
        use super::super::{Case, Peak};
        let mut c = Calibration {
            interval_s: INTERVAL_S,
            cases: vec![
                Case {
                    kind: Kind::Anon,
                    expected_bytes: 256 * M,
                    edge_bytes: (256 * M + 12_288) as i64,
                    sampled_bytes: (256 * M + 4096) as i64,
                    error_fraction: 0.000_05,
                    alignment_s: Some(0.0021),
                    ok: true,
                },
                Case {
                    kind: Kind::File,
                    expected_bytes: 64 * M,
                    edge_bytes: (60 * M) as i64,
                    sampled_bytes: (59 * M) as i64,
                    error_fraction: 0.078,
                    alignment_s: None,
                    ok: false,
                },
            ],
            peaks: vec![Peak {
                kind: Kind::Anon,
                sampled_peak_bytes: 300 * M,
                vm_hwm_bytes: 301 * M,
                error_fraction: 0.0033,
                ok: true,
            }],
            spikes: vec![Spike {
                bytes: 100 * M,
                held_ms: 20,
                seen_bytes: (99 * M) as i64,
                caught: true,
            }],
            vram: None,
            passed: false,
        };
        let run = synthetic(&SIZES, (100, 20), |m| round_up(m, 2));
        c.vram = Some(measure(&run, "cuda:0", &SIZES, INTERVAL_S, (100, 20)));
        insta::assert_snapshot!(full_markdown(&c), @r#"
### memrel calibrate: TARGETS MISSED (sampling every 10 ms)

| kind | expected MiB | at the edges MiB | sampled MiB | error | marker vs memory | ok |
|---|---:|---:|---:|---:|---:|---|
| anon | 256 | 256.01 | 256.00 | 0.005 % | +2.1 ms | yes |
| file | 64 | 60.00 | 59.00 | 7.800 % | never reached | NO |

| run | sampled peak MiB | VmHWM MiB | error | ok |
|---|---:|---:|---:|---|
| anon | 300.00 | 301.00 | 0.330 % | yes |

| spike MiB | held ms | highest sample above it MiB | caught |
|---:|---:|---:|---|
| 100 | 20 | 99.0 | yes |

Targets: anon and file within 1 % plus 64 pages (the worker's own pages), sampled peak within 1 % of the kernel's VmHWM, each load's end marker within one interval + 1 ms of the first sample that holds all the bytes (less 64 pages), or between that sample and the one before it (a sampler that fell behind on a busy machine). VRAM: below.

### VRAM on cuda:0: every target met (NVML per-process, sampling every 10 ms)

The fake worker's CUDA context alone held 518 MiB (its floor); 518 MiB before the first load. Each size is the change over the reading just before its load.

| kind | expected MiB | before MiB | at the edges MiB | sampled MiB | error MiB | marker vs memory | ok |
|---|---:|---:|---:|---:|---:|---:|---|
| vram | 1 | 518.00 | 2.00 | 2.00 | +1.00 | n/a (≤ 2 MiB) | yes |
| vram | 16 | 518.00 | 16.00 | 16.00 | +0.00 | +1.3 ms | yes |
| vram | 256 | 518.00 | 256.00 | 256.00 | +0.00 | +1.3 ms | yes |
| vram | 1024 | 518.00 | 1024.00 | 1024.00 | +0.00 | +1.3 ms | yes |

| run | sampled peak MiB | expected peak MiB | error MiB | VmHWM | ok |
|---|---:|---:|---:|---|---|
| vram | 1542.00 | 1542.00 | +0.00 | n/a (host only) | yes |

| spike MiB | held ms | highest sample above it MiB | caught |
|---:|---:|---:|---|
| 100 | 20 | 100.0 | yes |

Targets: each size within the allocation granularity, 2 MiB: the coarser of cuMemAlloc's 2 MiB pages and the smallest change between two successive VRAM samples of this run (2 MiB); the sampled peak within it of the highest reading before a load plus what that load allocated (VmHWM counts host pages only); each load's end marker within one interval + 1 ms of the first sample that holds all the bytes less one granularity (sizes above it; a smaller one cannot be told from the step itself).
"#);
        let mut bare = measure(&run, "cuda:0", &SIZES, INTERVAL_S, (100, 20));
        bare.peak = None;
        bare.spike = None;
        // Without the peak and the spike, the same text but for their rows.
        let full = markdown(c.vram.as_ref().unwrap(), INTERVAL_S);
        let (peak_row, spike_row) = (
            "| vram | 1542.00 | 1542.00 | +0.00 | n/a (host only) | yes |\n",
            "| 100 | 20 | 100.0 | yes |\n",
        );
        assert!(
            full.contains(peak_row) && full.contains(spike_row),
            "{full}"
        );
        assert_eq!(
            markdown(&bare, INTERVAL_S),
            full.replace(peak_row, "| vram | – | – | – | n/a (host only) | NO |\n")
                .replace(spike_row, "")
        );
    }
}
