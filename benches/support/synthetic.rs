//! A synthetic record of one million samples (1 ms for 1000 s, 100 cycles),
//! shared by the benches that render and stream long runs.

use memrel::protocol::{Edge, MemoryAtEdge, Phase, PhaseEdge};
use memrel::record::{
    Event, Header, Host, Record, RunMeta, RunRecord, RunStatus, Sample, SCHEMA_VERSION,
};

pub const SAMPLES: usize = 1_000_000;
const CYCLES: u32 = 100;
const MIB: u64 = 1 << 20;

/// One run: 1 ms samples, 10 s cycles of load (4 s) → forward (3 s) → unload →
/// release → settle, a sawtooth RSS with a one-sample spike in every cycle; on
/// `cuda`, VRAM follows RSS 600 MiB higher (a context floor under it).
pub fn synthetic_record(cuda: bool) -> Record {
    let vram = |rss: u64| cuda.then_some(rss + 600 * MIB);
    let base = 50 * MIB;
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let t_s = i as f64 * 1e-3;
        let in_cycle = t_s % 10.0;
        let rss = if in_cycle < 4.0 {
            base + (in_cycle / 4.0 * 800.0) as u64 * MIB
        } else if in_cycle < 7.0 {
            base + 800 * MIB
        } else {
            base + 20 * MIB
        };
        let spike = if i % 10_000 == 5_555 { 300 * MIB } else { 0 };
        samples.push(Sample {
            t_s,
            rss_bytes: rss + spike,
            anon_bytes: (rss + spike) * 3 / 4,
            file_bytes: (rss + spike) / 4,
            vram_bytes: vram(rss + spike),
        });
    }
    let mut events = Vec::new();
    let mut edge = |t_s: f64, phase: Phase, edge: Edge, cycle: u32, rss_bytes: u64| {
        events.push(Event {
            t_s,
            edge: PhaseEdge {
                phase,
                edge,
                cycle,
                model: None,
                elapsed_s: (edge == Edge::End).then_some(0.5),
                memory: MemoryAtEdge {
                    rss_bytes,
                    anon_bytes: rss_bytes * 3 / 4,
                    file_bytes: rss_bytes / 4,
                    vram_bytes: vram(rss_bytes),
                },
                allocator: None,
                heap: None,
                note: None,
                mono_s: None,
            },
        })
    };
    edge(0.0, Phase::Baseline, Edge::Begin, 0, base);
    edge(0.001, Phase::Baseline, Edge::End, 0, base);
    for c in 0..CYCLES {
        let t0 = f64::from(c) * 10.0;
        let cycle = c + 1;
        edge(t0 + 0.002, Phase::Load, Edge::Begin, cycle, base);
        edge(t0 + 4.0, Phase::Load, Edge::End, cycle, base + 800 * MIB);
        edge(
            t0 + 4.0,
            Phase::Forward,
            Edge::Begin,
            cycle,
            base + 800 * MIB,
        );
        edge(t0 + 7.0, Phase::Forward, Edge::End, cycle, base + 800 * MIB);
        edge(
            t0 + 7.0,
            Phase::Unload,
            Edge::Begin,
            cycle,
            base + 800 * MIB,
        );
        edge(t0 + 7.1, Phase::Unload, Edge::End, cycle, base + 20 * MIB);
        edge(
            t0 + 7.1,
            Phase::Release,
            Edge::Begin,
            cycle,
            base + 20 * MIB,
        );
        edge(t0 + 7.2, Phase::Release, Edge::End, cycle, base + 20 * MIB);
        edge(t0 + 7.2, Phase::Settle, Edge::Begin, cycle, base + 20 * MIB);
        edge(t0 + 9.9, Phase::Settle, Edge::End, cycle, base + 20 * MIB);
    }
    Record {
        header: Header {
            schema_version: SCHEMA_VERSION,
            memrel_version: "bench".into(),
            scenario: "synthetic-1m".into(),
            scenario_origin: "bench".into(),
            scenario_toml: String::new(),
            device: if cuda { "cuda:0" } else { "cpu" }.into(),
            command: Vec::new(),
            created_unix_s: 0,
            host: Host {
                hostname: "bench".into(),
                os: "bench".into(),
                kernel: "bench".into(),
                libc: "bench".into(),
                cpus: 1,
                total_memory_bytes: 0,
            },
            sampler: "synthetic".into(),
            interval_s: 1e-3,
            cycles: CYCLES,
            retention_threshold_bytes: 16 * MIB,
            models: Vec::new(),
        },
        runs: vec![RunRecord {
            meta: RunMeta {
                run: 1,
                strategy: "drop".into(),
                repetition: 1,
                pid: 1,
                status: RunStatus::Completed,
                error: None,
                checks: Vec::new(),
                vm_hwm_bytes: None,
                duration_s: 1000.0,
                vram_floor_bytes: cuda.then_some(586 * MIB),
                stderr_tail: String::new(),
                stdout_tail: String::new(),
                allocator: None,
                ignored_env: Vec::new(),
                respawned_pids: Vec::new(),
            },
            samples,
            events,
            decimation: None,
        }],
    }
}
