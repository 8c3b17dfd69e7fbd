//! Small hand-built records for tests across the crate, the integration tests
//! and the benches (behind the `test-support` feature outside `cfg(test)`).
//! Test data only: nothing in memrel's own paths may call it.

use super::*;
use crate::protocol::{Check, Edge, MemoryAtEdge, Phase, PhaseEdge};

pub const MIB: u64 = 1 << 20;

pub fn header(scenario: &str, cycles: u32) -> Header {
    Header {
        schema_version: SCHEMA_VERSION,
        memrel_version: "0.1.0".into(),
        memrel_commit: None,
        scenario: scenario.into(),
        scenario_origin: "builtin".into(),
        scenario_toml: format!("cycles = {cycles}"),
        device: "cpu".into(),
        command: vec!["memrel".into()],
        created_unix_s: 1_795_000_000,
        host: Host {
            hostname: "vm".into(),
            os: "Linux".into(),
            kernel: "6.1".into(),
            libc: "glibc 2.36".into(),
            cpus: 2,
            total_memory_bytes: 8 << 30,
            machine: None,
        },
        sampler: "procfs-statm".into(),
        interval_s: 0.01,
        cycles,
        retention_threshold_bytes: 16 * MIB,
        models: vec![ModelInfo {
            id: "m".into(),
            source: "preset:bert-tiny".into(),
            dir: "/cache/m".into(),
            architecture: "bert".into(),
            tensor_bytes: 100 * MIB,
            parameters: 25 * MIB,
            load: None,
        }],
        program: None,
        attached: None,
        container: None,
        page_cache: None,
        probed: Vec::new(),
        catalogue: None,
    }
}

/// Memory of `rss_bytes` split as every fixture splits it: 3/4 anonymous,
/// 1/4 file-backed.
pub fn memory(rss_bytes: u64, vram_bytes: Option<u64>) -> MemoryAtEdge {
    MemoryAtEdge {
        rss_bytes,
        anon_bytes: rss_bytes * 3 / 4,
        file_bytes: rss_bytes / 4,
        vram_bytes,
        page_cache_bytes: None,
    }
}

/// A sampler reading at `t_s`, split as [`memory`].
pub fn sample(t_s: f64, rss_bytes: u64, vram_bytes: Option<u64>) -> Sample {
    let m = memory(rss_bytes, vram_bytes);
    let readings = Readings::of_line(&m);
    Sample::from_readings(t_s, readings)
}

/// A phase edge at `t_s` with no model, no elapsed time and nothing else.
pub fn edge(t_s: f64, phase: Phase, edge: Edge, cycle: u32, memory: MemoryAtEdge) -> Event {
    let readings = Readings::of_line(&memory);
    Event {
        t_s,
        edge: PhaseEdge {
            phase,
            edge,
            cycle,
            model: None,
            elapsed_s: None,
            memory,
            allocator: None,
            heap: None,
            views: Default::default(),
            note: None,
            mono_s: None,
        },
        readings,
        held_s: None,
    }
}

/// [`edge`] of model `m` (on load and unload), 0.3 s at an end.
fn event(t_s: f64, phase: Phase, at: Edge, cycle: u32, rss_mib: u64) -> Event {
    let mut e = edge(t_s, phase, at, cycle, memory(rss_mib * MIB, None));
    e.edge.model = matches!(phase, Phase::Load | Phase::Unload).then(|| "m".to_string());
    e.edge.elapsed_s = (at == Edge::End).then_some(0.1 + 0.2);
    e
}

/// One run: baseline 10 MiB, then per cycle load to 110 MiB, unload, release,
/// settle at 10 + `retained_mib[cycle]` MiB; samples every ~10 ms with
/// times that are not round numbers.
pub fn run(run: u32, strategy: &str, repetition: u32, retained_mib: &[u64]) -> RunRecord {
    let mut events = vec![
        event(0.0013, Phase::Baseline, Edge::Begin, 0, 10),
        event(0.1000003, Phase::Baseline, Edge::End, 0, 10),
    ];
    let mut levels: Vec<(f64, u64)> = vec![(0.0, 10)];
    for (i, kept) in retained_mib.iter().enumerate() {
        let cycle = i as u32 + 1;
        let t0 = 0.1 + i as f64 * 1.0;
        events.push(event(t0 + 0.0000001, Phase::Load, Edge::Begin, cycle, 10));
        events.push(event(t0 + 0.3, Phase::Load, Edge::End, cycle, 110));
        events.push(event(t0 + 0.3, Phase::Unload, Edge::Begin, cycle, 110));
        events.push(event(t0 + 0.4, Phase::Unload, Edge::End, cycle, 10 + kept));
        events.push(event(
            t0 + 0.4,
            Phase::Release,
            Edge::Begin,
            cycle,
            10 + kept,
        ));
        events.push(event(t0 + 0.5, Phase::Release, Edge::End, cycle, 10 + kept));
        events.push(event(
            t0 + 0.5,
            Phase::Settle,
            Edge::Begin,
            cycle,
            10 + kept,
        ));
        events.push(event(t0 + 0.9, Phase::Settle, Edge::End, cycle, 10 + kept));
        levels.push((t0, 110));
        levels.push((t0 + 0.4, 10 + kept));
    }
    let end_s = 0.1 + retained_mib.len() as f64 + 0.05;
    let samples = (0..)
        .map(|i| f64::from(i) * 0.010000017 + 0.0000004)
        .take_while(|t| *t < end_s)
        .map(|t_s| {
            let mib = levels
                .iter()
                .rev()
                .find(|(from, _)| *from <= t_s)
                .map(|l| l.1)
                .unwrap_or(10);
            sample(t_s, mib * MIB, None)
        })
        .collect();
    RunRecord {
        meta: RunMeta {
            pid: 1000 + run,
            status: RunStatus::Completed,
            checks: vec![Check {
                name: "env".into(),
                ok: true,
                detail: "set".into(),
            }],
            vm_hwm_bytes: Some(120 * MIB),
            duration_s: 1.0 / 3.0 + end_s,
            ..RunMeta::planned(run, strategy, repetition)
        },
        samples,
        events,
        decimation: None,
    }
}

/// `drop` retaining from cycle 2 on and `malloc-trim` retaining nothing, twice each.
pub fn record() -> Record {
    Record {
        header: header("fixture", 3),
        runs: vec![
            run(1, "drop", 1, &[2, 60, 60]),
            run(2, "malloc-trim", 1, &[1, 1, 1]),
            run(3, "drop", 2, &[2, 2, 60]),
            run(4, "malloc-trim", 2, &[1, 2, 1]),
        ],
    }
}

/// Puts a VRAM series on `run` (a run made by [`run`]): `base_mib` at the
/// baseline, `loaded_mib` while loaded, `base_mib + kept_mib[c]` after the
/// unload of cycle c; each sample takes the value of the last edge before it.
/// The record becomes a `cuda:0` run with a calibrated floor of `floor_mib`.
pub fn with_vram(
    mut run: RunRecord,
    base_mib: u64,
    loaded_mib: u64,
    kept_mib: &[i64],
    floor_mib: u64,
) -> RunRecord {
    let level = |cycle: u32, phase: Phase, edge: Edge| -> u64 {
        if cycle == 0 {
            return base_mib;
        }
        let kept = |c: u32| (base_mib as i64 + kept_mib[c as usize - 1]) as u64;
        match (phase, edge) {
            (Phase::Load, Edge::Begin) if cycle == 1 => base_mib,
            (Phase::Load, Edge::Begin) => kept(cycle - 1),
            (Phase::Load, Edge::End) | (Phase::Unload, Edge::Begin) => loaded_mib,
            _ => kept(cycle),
        }
    };
    for e in &mut run.events {
        let bytes = Some(level(e.edge.cycle, e.edge.phase, e.edge.edge) * MIB);
        e.edge.memory.vram_bytes = bytes;
        e.readings.set_one_device(0, bytes);
    }
    let edges: Vec<(f64, Option<u64>)> = run
        .events
        .iter()
        .map(|e| (e.t_s, e.readings.vram_column()))
        .collect();
    for s in &mut run.samples {
        let bytes = edges
            .iter()
            .rev()
            .find(|(t, _)| *t <= s.t_s)
            .and_then(|(_, v)| *v)
            .or(Some(base_mib * MIB));
        s.readings.set_one_device(0, bytes);
    }
    run.meta.vram_floor_bytes = Some(floor_mib * MIB);
    run
}

/// A CUDA record like bert-base on an H100: baseline 678 MiB, loaded 1094;
/// `drop` keeps the model's 416 MiB, `sync` returns to the baseline and
/// `context-release` to 0 MiB; two runs each, floor 586 MiB.
pub fn cuda_record() -> Record {
    let mut header = header("cuda-fixture", 3);
    header.device = "cuda:0".into();
    let runs = [
        ("drop", [416, 416, 416]),
        ("sync", [0, 0, 0]),
        ("context-release", [-678, -678, -678]),
    ];
    let mut out = Vec::new();
    for rep in 1..=2 {
        for (strategy, kept) in &runs {
            let n = out.len() as u32 + 1;
            out.push(with_vram(
                run(n, strategy, rep, &[1, 1, 1]),
                678,
                1094,
                kept,
                586,
            ));
        }
    }
    Record { header, runs: out }
}

/// [`record`] on a CUDA device whose VRAM sampler could not start: host RSS
/// only, and the reason VRAM was not measured in the first run's checks.
pub fn cuda_unmeasured() -> Record {
    let mut record = record();
    record.header.device = "cuda:0".into();
    record.runs[0].meta.checks.push(Check {
        name: "vram sampler (nvml)".into(),
        ok: false,
        detail: "nvml: driver not loaded".into(),
    });
    record
}
