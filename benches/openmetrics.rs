//! One scrape of `/metrics` (issue 50, item 3): the OpenMetrics text of a
//! state of 1,000 series (200 current readings, 50 models × 3 resources ×
//! 5 cycle series, 44 sleep states, 6 counters and memrel's own cost),
//! rendered alone and with memrel's own cost read from /proc/self as each
//! scrape does. The target is under 1 ms a scrape (docs/metrics.md,
//! "OpenMetrics").
//!
//! `cargo bench --bench openmetrics`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use memrel::export::openmetrics::{render, CycleValues, MemoryReading, MetricsState, OwnCost};

/// A state of exactly 1,000 series.
fn state() -> MetricsState {
    let parts = [None, Some("anon"), Some("file"), Some("usage")];
    let memory = (0..200)
        .map(|i| MemoryReading {
            resource: format!("cuda:{}", i / 4),
            part: parts[i % 4].map(str::to_string),
            pid: Some(4242),
            bytes: 1_000_000_007 * i as u64,
        })
        .collect();
    let cycles = (0..150)
        .map(|i| CycleValues {
            model: Some(format!("model-{}", i / 3)),
            resource: ["host", "cuda:0", "container"][i % 3].to_string(),
            cycle: 17,
            retained_bytes: 123_456_789 - i as i64 * 1_000_003,
            released_fraction: Some(0.987_654_321 - i as f64 * 1e-4),
            settle_s: Some(0.125 + i as f64 * 1e-3),
            late_bytes: Some(4_194_304 + i as u64),
        })
        .collect();
    let asleep = (0..44)
        .map(|i| (Some(format!("model-{i}")), i % 2 == 0))
        .collect();
    MetricsState {
        memory,
        cycles,
        cycles_total: 17,
        sleeps_total: 9,
        wakes_total: 8,
        asleep,
        samples_total: 604_800,
        own: OwnCost {
            cpu_s: Some(12.5),
            resident_bytes: Some(12 << 20),
        },
    }
}

fn scrape(c: &mut Criterion) {
    let state = state();
    let text = render(&state);
    let series = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(series, 1000, "{text}");
    let mut group = c.benchmark_group("openmetrics_1000_series");
    group.bench_function("render", |b| b.iter(|| render(black_box(&state))));
    group.bench_function("render_with_own_cost", |b| {
        b.iter(|| {
            render(&MetricsState {
                own: OwnCost::read(),
                ..black_box(&state).clone()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, scrape);
criterion_main!(benches);
