//! Rendering cost of long runs: timeline.png and compare.png for a synthetic
//! record of one million samples (1 ms sampling for 1000 s, 100 cycles), on
//! the CPU and as a CUDA record (a VRAM series too, so every chart draws its
//! VRAM panels). The charts draw min/max per pixel column, so this must stay
//! well under 1 s.
//!
//! `cargo bench --bench render`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use memrel::export::chart::{compare as compare_chart, decimate, timeline as chart};
use memrel::metrics::{self, comparison};

mod support;

use support::synthetic::synthetic_record;

fn render(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("memrel-render-bench-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        eprintln!("cannot create {}", dir.display());
        return;
    }
    let mut group = c.benchmark_group("render_1m_samples");
    group.sample_size(10);
    for (name, cuda) in [("cpu", false), ("cuda", true)] {
        let record = synthetic_record(cuda);
        let summary = metrics::summarize(&record);
        let inputs = [comparison::Input {
            dir: "bench".into(),
            header: &record.header,
            summary: &summary,
            damage: Vec::new(),
        }];
        let comparison = comparison::compare(&inputs);
        group.bench_function(format!("timeline_png_{name}"), |b| {
            b.iter(|| {
                chart::write_timeline(black_box(&record), &summary, &dir.join("timeline.png"))
            })
        });
        group.bench_function(format!("compare_png_{name}"), |b| {
            b.iter(|| {
                compare_chart::write_compare_chart(
                    black_box(&comparison),
                    &[&record],
                    &dir.join("compare.png"),
                )
            })
        });
        if !cuda {
            group.bench_function("min_max_columns", |b| {
                b.iter(|| {
                    decimate::min_max_columns(
                        record.runs[0]
                            .samples
                            .iter()
                            .map(|s| (s.t_s, s.host_bytes() as f64)),
                        0.0,
                        1000.0,
                        1300,
                    )
                })
            });
        }
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, render);
criterion_main!(benches);
