//! The streaming path of a long run (`record::live`, `record::envelope`):
//! what one sample costs the sampler to write to samples.csv, what it costs
//! to fold into the in-memory envelope, and reading a run of one million
//! samples back from disk (the end of every run, and `memrel report`), with
//! the memory that reading keeps.
//!
//! `cargo bench --bench streaming`

mod support;

use std::hint::black_box;
use std::io::BufWriter;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memrel::record::envelope::Envelope;
use memrel::record::live::{LivePhase, SampleWriter};
use memrel::record::{Record, RunMeta, Sample};
use support::synthetic::{synthetic_record, SAMPLES};

fn sample(i: u64) -> Sample {
    Sample::of_host(
        i as f64 * 1e-3,
        1_000_000_000 + (i % 977) * 4096,
        900_000_000 + (i % 977) * 4096,
        100_000_000,
        None,
    )
}

fn write_rows(c: &mut Criterion) {
    let dir = tempfile_dir("write");
    let meta = RunMeta::planned(1, "malloc-trim", 1);
    let file = std::fs::File::create(dir.join("samples.csv")).expect("creates a file");
    let mut writer = SampleWriter::new(
        Box::new(BufWriter::with_capacity(1 << 16, file)),
        &meta,
        LivePhase::default(),
    );
    let mut i = 0u64;
    let mut group = c.benchmark_group("streaming");
    group.throughput(Throughput::Elements(1));
    group.bench_function("write_one_sample_row_to_samples_csv", |b| {
        b.iter(|| {
            i += 1;
            writer.write(black_box(&sample(i)));
        })
    });
    assert!(writer.finish().is_none(), "the rows were written");
    let mut envelope = Envelope::default();
    let mut j = 0u64;
    group.bench_function("fold_one_sample_into_the_envelope", |b| {
        b.iter(|| {
            j += 1;
            envelope.push(black_box(sample(j)));
        })
    });
    black_box(envelope.finish());
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn read_back(c: &mut Criterion) {
    let dir = tempfile_dir("read");
    synthetic_record(false).save(&dir).expect("saves");
    let mut group = c.benchmark_group("streaming");
    group.sample_size(10);
    group.throughput(Throughput::Elements(SAMPLES as u64));
    group.bench_function("load_1m_sample_run_through_the_envelope", |b| {
        b.iter(|| black_box(Record::load(&dir).expect("loads")))
    });
    group.finish();
    let record = Record::load(&dir).expect("loads");
    let run = &record.runs[0];
    eprintln!(
        "a run of {} samples read back keeps {} in memory ({:.1} MiB), buckets of {}",
        SAMPLES,
        run.samples.len(),
        (run.samples.len() * std::mem::size_of::<Sample>()) as f64 / 1048576.0,
        run.decimation.map_or(1, |d| d.bucket_samples)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "memrel-streaming-bench-{what}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("creates a temporary directory");
    dir
}

criterion_group!(benches, write_rows, read_back);
criterion_main!(benches);
