//! A synthetic record of one million samples (1 ms for 1000 s, 100 cycles),
//! shared by the benches that render and stream long runs.

use memrel::protocol::{Edge, Phase};
use memrel::record::fixture::{self, memory, sample};
use memrel::record::{Record, RunMeta, RunRecord, RunStatus};

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
        samples.push(sample(t_s, rss + spike, vram(rss + spike)));
    }
    let mut events = Vec::new();
    let mut edge = |t_s: f64, phase: Phase, edge: Edge, cycle: u32, rss_bytes: u64| {
        let mut e = fixture::edge(t_s, phase, edge, cycle, memory(rss_bytes, vram(rss_bytes)));
        e.edge.elapsed_s = (edge == Edge::End).then_some(0.5);
        events.push(e);
    };
    edge(0.0, Phase::Baseline, Edge::Begin, 0, base);
    edge(0.001, Phase::Baseline, Edge::End, 0, base);
    let (loaded, kept) = (base + 800 * MIB, base + 20 * MIB);
    for c in 0..CYCLES {
        let t0 = f64::from(c) * 10.0;
        let cycle = c + 1;
        edge(t0 + 0.002, Phase::Load, Edge::Begin, cycle, base);
        edge(t0 + 4.0, Phase::Load, Edge::End, cycle, loaded);
        edge(t0 + 4.0, Phase::Forward, Edge::Begin, cycle, loaded);
        edge(t0 + 7.0, Phase::Forward, Edge::End, cycle, loaded);
        edge(t0 + 7.0, Phase::Unload, Edge::Begin, cycle, loaded);
        edge(t0 + 7.1, Phase::Unload, Edge::End, cycle, kept);
        edge(t0 + 7.1, Phase::Release, Edge::Begin, cycle, kept);
        edge(t0 + 7.2, Phase::Release, Edge::End, cycle, kept);
        edge(t0 + 7.2, Phase::Settle, Edge::Begin, cycle, kept);
        edge(t0 + 9.9, Phase::Settle, Edge::End, cycle, kept);
    }
    let mut header = fixture::header("synthetic-1m", CYCLES);
    header.memrel_version = "bench".into();
    header.scenario_origin = "bench".into();
    header.device = if cuda { "cuda:0" } else { "cpu" }.into();
    header.sampler = "synthetic".into();
    header.interval_s = 1e-3;
    header.models = Vec::new();
    Record {
        header,
        runs: vec![RunRecord {
            meta: RunMeta {
                pid: 1,
                status: RunStatus::Completed,
                duration_s: 1000.0,
                vram_floor_bytes: cuda.then_some(586 * MIB),
                device: None,
                ..RunMeta::planned(1, "drop", 1)
            },
            samples,
            events,
            decimation: None,
        }],
    }
}
