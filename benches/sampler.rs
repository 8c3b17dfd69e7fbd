//! Costs of measuring: one RSS reading of another process, the CPU the
//! sampler thread uses at 1 ms, the throughput of loading the bert-base
//! preset from a warm page cache (README "Benchmarks" quotes these), and one
//! split of a 4 GiB process's host memory by mapping (`sampler::mappings`,
//! read at each phase edge).

use std::hint::black_box;
use std::io::BufWriter;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memrel::model::spec::{Dtype, LoadMethod};
use memrel::model::{preset, synth, LoadedModel, ModelDir};
use memrel::record::live::{LivePhase, SampleWriter};
use memrel::record::RunMeta;
use memrel::sampler::procfs::StatmProbe;
use memrel::sampler::{Probe, Probes, Sampler};

/// A process to measure that is not this one.
fn other_process() -> Child {
    Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("sleep starts")
}

fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn one_sample(c: &mut Criterion) {
    let mut child = other_process();
    let pid = child.id();
    let mut probe = StatmProbe::open(pid).expect("statm opens");
    c.bench_function("rss_sample/statm_pread_open_fd", |b| {
        b.iter(|| black_box(probe.read().expect("read")))
    });
    let status = format!("/proc/{pid}/status");
    c.bench_function("rss_sample/status_open_read (for comparison)", |b| {
        b.iter(|| black_box(std::fs::read(&status).expect("read")))
    });
    let _ = child.kill();
    let _ = child.wait();
}

/// Reports the CPU time the 1 ms sampler spends per 100 ms of sampling,
/// writing every sample to a samples.csv as a run does: 2 ms here would be
/// 2 % of one core.
fn sampler_cpu(c: &mut Criterion) {
    let mut child = other_process();
    let pid = child.id();
    let csv = std::env::temp_dir().join(format!("memrel-sampler-bench-{}.csv", std::process::id()));
    let meta = RunMeta::planned(1, "drop", 1);
    let mut group = c.benchmark_group("sampler_1ms");
    group.sample_size(10);
    group.bench_function("cpu_time_per_100ms_of_sampling", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let file = std::fs::File::create(&csv).expect("creates samples.csv");
                let writer = SampleWriter::new(
                    Box::new(BufWriter::with_capacity(1 << 16, file)),
                    &meta,
                    LivePhase::default(),
                );
                let before = cpu_time();
                let probes = Probes {
                    host: Probe::open(pid),
                    others: Vec::new(),
                };
                let sampler = Sampler::start(
                    pid,
                    Duration::from_millis(1),
                    Instant::now(),
                    writer,
                    probes,
                )
                .expect("the sampler starts");
                std::thread::sleep(Duration::from_millis(100));
                let writer = sampler.stop().expect("the sampler stops");
                assert!(writer.finish().is_none(), "samples written");
                total += cpu_time() - before;
            }
            total
        })
    });
    group.finish();
    let _ = std::fs::remove_file(&csv);
    let _ = child.kill();
    let _ = child.wait();
}

fn load_bert_base(c: &mut Criterion) {
    let dir = synth::ensure(
        preset::lookup("bert-base").expect("preset"),
        &synth::cache_dir(),
    )
    .expect("model written");
    let model = ModelDir::inspect(&dir).expect("model inspects");
    let device = candle_core::Device::Cpu;
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(model.tensor_bytes));
    group.bench_function("bert-base_mmap_warm_page_cache", |b| {
        b.iter(|| {
            drop(black_box(
                LoadedModel::load(&model, &device, Dtype::F32, LoadMethod::Mmap).expect("loads"),
            ))
        })
    });
    group.bench_function("bert-base_read_warm_page_cache", |b| {
        b.iter(|| {
            drop(black_box(
                LoadedModel::load(&model, &device, Dtype::F32, LoadMethod::Read).expect("loads"),
            ))
        })
    });
    group.finish();
}

/// A process holding 4 GiB of touched anonymous memory in `mappings`
/// mappings of equal size (and Python's own), idle.
fn holding_4_gib(mappings: usize) -> Child {
    let program = format!(
        "import mmap, sys, time\n\
         n = {mappings}\n\
         size = (4 << 30) // n\n\
         maps = []\n\
         for _ in range(n):\n\
         \x20   m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n\
         \x20   m.write(b'x' * size)\n\
         \x20   maps.append(m)\n\
         print('ready', flush=True)\n\
         time.sleep(600)\n"
    );
    let mut child = Command::new("python3")
        .args(["-c", &program])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 starts");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .expect("the program says ready");
    assert_eq!(line.trim(), "ready");
    child
}

/// One edge's split of host memory by mapping: `/proc/PID/smaps` read and
/// classified, for a process of 4 GiB in 64 mappings and in 2048.
fn mappings_at_an_edge(c: &mut Criterion) {
    let classifier = memrel::sampler::mappings::Classifier::new(&[]);
    let mut group = c.benchmark_group("mappings_split_4_gib");
    group.sample_size(20);
    for count in [64, 2048] {
        let mut child = holding_4_gib(count);
        let pid = child.id();
        let split = classifier.read(pid).expect("smaps reads");
        assert!(split.rss_bytes(memrel::sampler::mappings::MappingKind::Heap) >= 4 << 30);
        group.bench_function(format!("{count}_mappings"), |b| {
            b.iter(|| black_box(classifier.read(pid).expect("smaps reads")))
        });
        let _ = child.kill();
        let _ = child.wait();
    }
    group.finish();
}

criterion_group!(
    benches,
    one_sample,
    sampler_cpu,
    load_bert_base,
    mappings_at_an_edge
);
criterion_main!(benches);
