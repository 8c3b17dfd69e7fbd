//! The candle worker: loads, uses and drops models through candle as the
//! scenario's steps say, applies the strategy's in-process knobs and release
//! action. It is one [`Backend`] of the one step interpreter (`steps.rs`),
//! which walks the steps and reports every phase edge through the [`Emitter`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::emitter::Emitter;
use super::steps::{self, Backend};
use super::{allocator, device, glibc, sleep, WorkerSpec};
use crate::model::spec::LoadThread;
use crate::model::{LoadedModel, ModelDir};
use crate::protocol::{AllocatorReport, Check, Hello, Message};
use crate::sampler::page_cache;
use crate::scenario::Step;
use crate::strategy::{self, ReleaseAction, SleepMode, StartAction, Strategy, WeightFiles};

pub fn run(spec: &WorkerSpec, out: &mut Emitter) -> Result<()> {
    let strategy = strategy::lookup(&spec.strategy)?;
    let allocator_checks = allocator_checks(strategy, &out.allocator.report);
    // A strategy whose allocator or settings did not take effect would
    // measure something else under its name: the run fails, never silently.
    let not_in_effect = allocator_checks.iter().find(|c| !c.ok).map(|c| {
        format!(
            "strategy {:?} did not take effect: {} ({}); nothing was measured",
            strategy.name, c.name, c.detail
        )
    });
    let mut checks = allocator_checks;
    checks.extend(start_checks(strategy));
    let device = device::Session::open(spec.device)?;
    checks.extend(device.checks());
    out.send(Message::Hello(Hello {
        pid: std::process::id(),
        strategy: strategy.name.to_string(),
        device: spec.device.to_string(),
        checks,
        vram_floor_bytes: device.vram_floor_bytes(),
        allocator: Some(out.allocator.report.clone()),
    }));
    if let Some(error) = not_in_effect {
        anyhow::bail!(error);
    }
    // The weight files' page cache at every edge, read at the edge itself
    // (the parent samples it in between).
    let files: Vec<_> = spec
        .models
        .iter()
        .flat_map(|(_, m)| m.files.clone())
        .collect();
    let (method, _) = page_cache::Method::choose(files.first().map(|f| f.as_path()));
    out.page_cache = Some(page_cache::PageCacheProbe::new(&files, method));
    let mut candle = Candle {
        spec,
        strategy,
        models: spec.models.iter().map(|(id, m)| (id.as_str(), m)).collect(),
        keep_weights: device::Session::needs_weights(strategy),
        served: out.allocator.clone(),
        device,
        kept_small: Vec::new(),
        post_checks: Vec::new(),
    };
    steps::run(spec, &mut candle, out)
}

/// The candle worker as the steps' [`Backend`]: real models on a real
/// device, the strategy's knobs and release action.
struct Candle<'a> {
    spec: &'a WorkerSpec,
    strategy: &'static Strategy,
    models: HashMap<&'a str, &'a ModelDir>,
    /// Loads keep a handle to every weight (`to-cpu`, a sleep).
    keep_weights: bool,
    served: allocator::Served,
    device: device::Session,
    /// Long-lived small allocations (bookkeeping a server keeps between loads).
    kept_small: Vec<String>,
    /// Checks made along the way, sent with `done`.
    post_checks: Vec<Check>,
}

impl<'a> Candle<'a> {
    fn model(&self, id: &str) -> Result<&'a ModelDir> {
        self.models
            .get(id)
            .copied()
            .context("scenario names an unknown model")
    }
}

impl Backend for Candle<'_> {
    type Model = LoadedModel;
    type Asleep = sleep::Asleep;

    fn warms_up(&self) -> bool {
        true
    }

    fn warm_up(&mut self) -> Result<String> {
        warm_up(
            self.spec,
            &mut self.device,
            &self.served,
            self.strategy,
            self.keep_weights,
        )
    }

    /// A strategy that dropped the device gets a new one here, outside the timed load.
    fn before_load(&mut self) -> Result<Option<String>> {
        self.device.ensure_open()
    }

    fn load(
        &mut self,
        id: &str,
        reopened: Option<String>,
    ) -> Result<(LoadedModel, Option<String>)> {
        let model = self.model(id)?;
        let (w, strategy, keep_weights) = (&self.spec.workload, self.strategy, self.keep_weights);
        let dev = self.device.candle()?;
        let m = match w.load_thread {
            LoadThread::Main => LoadedModel::load_with(
                model,
                dev,
                w.dtype,
                strategy.weights.load_method(w.load_method),
                keep_weights,
            )?,
            LoadThread::Spawned => std::thread::scope(|s| {
                s.spawn(|| {
                    LoadedModel::load_with(
                        model,
                        dev,
                        w.dtype,
                        strategy.weights.load_method(w.load_method),
                        keep_weights,
                    )
                })
                .join()
                .map_err(|_| anyhow::anyhow!("the loading thread panicked"))?
            })?,
        };
        self.device.synchronize()?;
        // The tensors are copied and the mapping is gone.
        let dropped = drop_cached_weights(strategy, model)?
            .map(|n| format!("; {n}"))
            .unwrap_or_default();
        let reopened = reopened
            .map(|n| format!("; before the load: {n}"))
            .unwrap_or_default();
        Ok((
            m,
            Some(format!(
                "tensor_bytes={}{reopened}{dropped}",
                model.tensor_bytes
            )),
        ))
    }

    fn forward(&mut self, id: &str, m: &mut LoadedModel) -> Result<Option<String>> {
        let model = self.model(id)?;
        let w = &self.spec.workload;
        let n = m.forward(
            self.device.candle()?,
            w.batch_size,
            w.seq_len,
            model.vocab_size,
        )?;
        self.device.synchronize_forward()?;
        Ok(Some(format!("outputs={n}")))
    }

    fn unload(&mut self, id: &str, m: LoadedModel) -> Result<Option<String>> {
        let model = self.model(id)?;
        let note = self.device.before_drop(self.strategy.release, &m)?;
        drop(m);
        let dropped = drop_cached_weights(self.strategy, model)?;
        Ok(match (note, dropped) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        })
    }

    fn release(&mut self, models_alive: usize) -> Result<Option<String>> {
        self.device
            .release(&self.served, self.strategy.release, models_alive)
    }

    fn hands_over(&self) -> bool {
        self.strategy.release == ReleaseAction::Respawn
    }

    fn sleep(&mut self, _id: &str, m: LoadedModel) -> Result<(sleep::Asleep, Option<String>)> {
        let (slept, note) = sleep::sleep(&mut self.device, self.strategy.sleep, m)?;
        Ok((slept, Some(note)))
    }

    fn wake(&mut self, id: &str, slept: sleep::Asleep) -> Result<(LoadedModel, Option<String>)> {
        let model = self.model(id)?;
        let w = &self.spec.workload;
        let (m, note) = sleep::wake(&mut self.device, slept, model, w.dtype, w.load_method)?;
        Ok((m, Some(note)))
    }

    /// Small blocks through malloc (the preloaded allocator serves them):
    /// every 1 ms, 64 of 1–16 KiB (≤ 1 MiB live), written so their pages
    /// are touched, freed before the next round.
    fn busy(&mut self, ms: u64) -> Result<Option<String>> {
        let until = Instant::now() + Duration::from_millis(ms);
        let mut allocations: u64 = 0;
        let mut round: usize = 0;
        while Instant::now() < until {
            let blocks: Vec<Vec<u8>> = (0..64)
                .map(|i| vec![0xA5u8; 1024 * (1 + (i * 7 + round) % 16)])
                .collect();
            std::hint::black_box(&blocks);
            allocations += blocks.len() as u64;
            drop(blocks);
            round += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(Some(format!("allocations={allocations}")))
    }

    fn after(&mut self, step: &Step, cycle: u32) -> Result<()> {
        if let Step::Load(id) = step {
            if self.strategy.freezes_mmap_threshold && cycle >= 2 {
                let tensor_bytes = self.model(id)?.tensor_bytes;
                self.post_checks
                    .push(mmapped_check(cycle, id, tensor_bytes));
            }
            for i in 0..self.spec.workload.small_allocs_between_loads {
                self.kept_small.push(format!("kept-{cycle}-{id}-{i}"));
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<Check>> {
        let mut checks = std::mem::take(&mut self.post_checks);
        checks.extend(self.device.finish()?);
        Ok(checks)
    }
}

/// One untimed load + forward + drop of every model with the strategy's
/// release: PTX JIT compilation (10–15 s on a fresh machine) and cold caches
/// stay out of the numbers. Then every strategy is brought to the same start:
/// a device the strategy dropped is reopened and warmed like the first one
/// (its kernels loaded, its libraries' workspaces made), queued frees complete
/// and the pool is trimmed. Returns the note of the warm-up's end edge.
fn warm_up(
    spec: &WorkerSpec,
    device: &mut device::Session,
    served: &allocator::Served,
    strategy: &Strategy,
    keep_weights: bool,
) -> Result<String> {
    let mut times = Vec::new();
    for (id, model) in &spec.models {
        let reopened = device.ensure_open()?;
        let (mut m, load_s, forward_s) =
            load_and_forward(spec, device, model, strategy, keep_weights)?;
        if strategy.sleep != SleepMode::None {
            // The first sleep and wake pay one-time costs (pinned pages, kernels).
            let w = &spec.workload;
            let (slept, _) = sleep::sleep(device, strategy.sleep, m)?;
            m = sleep::wake(device, slept, model, w.dtype, w.load_method)?.0;
        }
        device.before_drop(strategy.release, &m)?;
        drop(m);
        drop_cached_weights(strategy, model)?;
        let released = device.release(served, strategy.release, 0)?;
        let reopened = reopened
            .map(|n| format!(", before it: {n}"))
            .unwrap_or_default();
        let released = released
            .map(|n| format!(", release: {n}"))
            .unwrap_or_default();
        times.push(format!(
            "{id}: load {load_s:.3} s, first forward {forward_s:.3} s{reopened}{released}"
        ));
    }
    let mut reset = Vec::new();
    if let Some(reopened) = device.ensure_open()? {
        for (_, model) in &spec.models {
            drop(load_and_forward(
                spec,
                device,
                model,
                strategy,
                keep_weights,
            )?);
        }
        reset.push(format!("{reopened}, warmed with every model"));
    }
    if strategy.sleep != SleepMode::None {
        // Before the flush below, so that its buffers are not in the baseline.
        let bytes = spec
            .models
            .iter()
            .map(|(_, m)| m.tensor_bytes)
            .max()
            .unwrap_or(0);
        if let Some((d2h, h2d)) = device.pinned_ceiling_gib_s(bytes)? {
            reset.push(format!(
                "pinned copy ceiling over {:.0} MiB: ceiling_d2h_gib_s={d2h:.2} ceiling_h2d_gib_s={h2d:.2}",
                bytes as f64 / crate::textutil::MIB
            ));
        }
    }
    reset.extend(device.flush()?);
    let reset = if reset.is_empty() {
        String::new()
    } else {
        format!(
            "; then the same start for every strategy: {}",
            reset.join("; ")
        )
    };
    Ok(format!("untimed warm-up ({}){reset}", times.join("; ")))
}

/// Loads `model` and runs one forward pass on it; returns it with the load
/// and forward times in seconds (device work synchronized in both).
fn load_and_forward(
    spec: &WorkerSpec,
    device: &device::Session,
    model: &ModelDir,
    strategy: &Strategy,
    keep_weights: bool,
) -> Result<(LoadedModel, f64, f64)> {
    let w = &spec.workload;
    let start = Instant::now();
    let mut m = LoadedModel::load_with(
        model,
        device.candle()?,
        w.dtype,
        strategy.weights.load_method(w.load_method),
        keep_weights,
    )?;
    device.synchronize()?;
    drop_cached_weights(strategy, model)?;
    let load_s = start.elapsed().as_secs_f64();
    m.forward(device.candle()?, w.batch_size, w.seq_len, model.vocab_size)?;
    device.synchronize_forward()?;
    let forward_s = start.elapsed().as_secs_f64() - load_s;
    Ok((m, load_s, forward_s))
}

/// `fadvise-dontneed`: drops `model`'s files from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`; pages still mapped stay, so it is
/// called once the loader's mapping is gone); `None` for other strategies.
/// A failure ends the run: the strategy would not have taken effect.
fn drop_cached_weights(strategy: &Strategy, model: &ModelDir) -> Result<Option<String>> {
    if strategy.weights != WeightFiles::DropCached {
        return Ok(None);
    }
    for file in &model.files {
        crate::sampler::page_cache::drop_cached(file).map_err(anyhow::Error::msg)?;
    }
    Ok(Some(format!(
        "fadvise(DONTNEED) on {} weight file(s)",
        model.files.len()
    )))
}

/// Checks done before anything is loaded: the strategy's variables are visible
/// and its in-process knob was accepted.
fn start_checks(strategy: &Strategy) -> Vec<Check> {
    let mut checks = Vec::new();
    for (key, want) in strategy.env {
        let got = std::env::var(key).ok();
        checks.push(Check {
            name: format!("env {key}"),
            ok: got.as_deref() == Some(*want),
            detail: format!("worker sees {key}={}", got.as_deref().unwrap_or("<unset>")),
        });
    }
    if let StartAction::MalloptMmapThreshold(bytes) = strategy.start {
        let accepted = glibc::mallopt_mmap_threshold(bytes);
        checks.push(Check {
            name: "mallopt M_MMAP_THRESHOLD".into(),
            ok: accepted == Some(true),
            detail: match accepted {
                Some(true) => format!("glibc accepted {bytes}"),
                Some(false) => format!("glibc refused {bytes}"),
                None => "not glibc".into(),
            },
        });
    }
    checks
}

/// The allocator serving `malloc` is the strategy's (the library defines the
/// `malloc` in use, is mapped and answers its own call), and every setting
/// the strategy makes reads back with the value it set.
fn allocator_checks(strategy: &Strategy, served: &AllocatorReport) -> Vec<Check> {
    let want = strategy.allocator.name();
    let version = served.version.as_deref().unwrap_or("version unknown");
    let mapped = if served.mapped {
        "mapped"
    } else {
        "NOT mapped"
    };
    let mut checks = vec![Check {
        name: format!("allocator {want}"),
        ok: served.name == want && served.mapped,
        detail: format!(
            "malloc served by {} {version} ({}, {mapped})",
            served.name, served.library
        ),
    }];
    for (key, value) in strategy.expect {
        let got = served.settings.get(*key);
        checks.push(Check {
            name: format!("{want} setting {key}"),
            ok: got.map(String::as_str) == Some(*value),
            detail: format!(
                "{} reads {key} = {} (the strategy sets {value})",
                served.name,
                got.map(String::as_str).unwrap_or("<not readable>")
            ),
        });
    }
    checks
}

/// With a frozen mmap threshold, a load in cycle ≥ 2 must still come mostly
/// from mmap (under the dynamic threshold it would come from the heap).
fn mmapped_check(cycle: u32, id: &str, tensor_bytes: u64) -> Check {
    let mmapped = glibc::allocator_state()
        .map(|a| a.mmapped_bytes)
        .unwrap_or(0);
    Check {
        name: format!("mmap threshold frozen (cycle {cycle}, {id})"),
        ok: mmapped * 2 >= tensor_bytes,
        detail: format!("glibc mmapped {mmapped} bytes after loading {tensor_bytes} tensor bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(name: &str, settings: &[(&str, &str)]) -> AllocatorReport {
        AllocatorReport {
            name: name.into(),
            version: Some("5.3.0".into()),
            library: "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2".into(),
            mapped: true,
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_setting_that_reads_back_otherwise_fails_its_check() {
        // What a misspelt MALLOC_CONF key looks like from inside: jemalloc
        // keeps its default, so the read-back differs from what was set.
        let decay0 = strategy::lookup("jemalloc-decay0").expect("strategy");
        let typo = report(
            "jemalloc",
            &[
                ("opt.abort_conf", "true"),
                ("opt.dirty_decay_ms", "10000"),
                ("opt.muzzy_decay_ms", "0"),
            ],
        );
        let checks = allocator_checks(decay0, &typo);
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(failed, ["jemalloc setting opt.dirty_decay_ms"]);
        assert!(checks[0].ok, "the allocator itself is right: {checks:?}");
    }

    #[test]
    fn glibc_serving_a_preload_strategy_fails_its_check() {
        let jemalloc = strategy::lookup("jemalloc").expect("strategy");
        let checks = allocator_checks(jemalloc, &report("glibc", &[]));
        assert!(!checks[0].ok);
        assert!(checks[0].detail.contains("served by glibc"), "{checks:?}");
    }
}
