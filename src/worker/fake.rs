//! The fake worker: the scenario's steps on "models" that are exact numbers
//! of bytes, so that every stage after the worker (sampler, record, metrics,
//! exporters, gate) can be tested against known answers, the way hyperfine
//! tests its pipeline with a mock executor: the second [`Backend`] of the
//! one step interpreter (`steps.rs`), beside the candle worker.
//!
//! A load maps anonymous memory (`mmap`, not `malloc`: no allocator can keep
//! or round it) and touches every page, writes a file of `file_bytes` and maps
//! and reads it page by page (file-backed RSS), and maps `leak_bytes` that it
//! never unmaps. An unload unmaps all but the leak, so after a cycle exactly
//! the leak stays: `retained = leak × cycle` up to the page rounding and the
//! few pages the worker itself touches.
//!
//! On a CUDA device (any build: `fake_device`, through the driver library)
//! a load also allocates `vram_bytes` of device memory and sets every byte;
//! the unload frees it. The parent samples that VRAM through NVML.
//!
//! A model with `late_free_ms` keeps its host memory past the unload: a
//! thread frees it that many ms after the cycle's release step returns (the
//! unload's, without a release step), the way a delayed free or a child
//! that exits late gives memory back after the call that should have.
//!
//! A model with `spike_bytes` maps and touches that much more inside its
//! load, holds it `spike_ms` (5 ms by default) and unmaps it before the load
//! ends: a peak between two 10 ms samples that only the kernel's VmHWM sees.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::cuda_driver::DeviceMemory;
use super::emitter::Emitter;
use super::fake_device::FakeDevice;
use super::steps::{self, Backend};
use super::{glibc, WorkerSpec};
use crate::model::spec::FakeModel;
use crate::protocol::{Check, Hello, Message};
use crate::scenario::{DeviceSpec, Step};
use crate::strategy::{self, ReleaseAction, Strategy};

/// One mapping the fake worker owns; unmapped when dropped.
struct Region {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Region {
    /// `len` bytes of private anonymous memory, every page written once.
    fn anon(len: usize) -> Result<Region> {
        let region = Region::map(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
        )?;
        let page = page_bytes();
        for offset in (0..len).step_by(page) {
            // SAFETY: offset < len, inside the mapping just made writable.
            unsafe { std::ptr::write_volatile(region.ptr.cast::<u8>().add(offset), 0xA5) };
        }
        Ok(region)
    }

    /// A file of `len` bytes in `dir`, mapped shared and written page by
    /// page: its pages are the process's file-backed RSS. The file is
    /// unlinked at once; its pages live as long as the mapping.
    fn file(len: usize, dir: &std::path::Path) -> Result<Region> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path: PathBuf = dir.join(format!("memrel-fake-{}-{n}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| {
                format!(
                    "fake worker: cannot create {}: set TMPDIR to a writable directory",
                    path.display()
                )
            })?;
        // Sized, then written through the mapping: no heap buffer, so no
        // allocator keeps a byte of it after the unload.
        file.set_len(len as u64)
            .with_context(|| format!("fake worker: cannot size {}", path.display()))?;
        let region = Region::map(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
        );
        let _ = std::fs::remove_file(&path);
        let region = region?;
        let page = page_bytes();
        for offset in (0..len).step_by(page) {
            // SAFETY: offset < len, inside the writable mapping of a file of len bytes.
            unsafe { std::ptr::write_volatile(region.ptr.cast::<u8>().add(offset), 0x5A) };
        }
        Ok(region)
    }

    fn map(len: usize, prot: i32, flags: i32, fd: i32) -> Result<Region> {
        if len == 0 {
            return Ok(Region {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        // SAFETY: a new mapping at an address the kernel picks; checked below.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if ptr == libc::MAP_FAILED {
            bail!(
                "fake worker: mmap of {len} bytes failed: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(Region { ptr, len })
    }

    /// Reads every page again (the fake "forward pass"); returns the pages read.
    fn touch(&self) -> usize {
        let page = page_bytes();
        let mut sum = 0u64;
        for offset in (0..self.len).step_by(page) {
            // SAFETY: offset < len, inside this readable mapping.
            sum += u64::from(unsafe { std::ptr::read_volatile(self.ptr.cast::<u8>().add(offset)) });
        }
        std::hint::black_box(sum);
        self.len.div_ceil(page)
    }
}

// SAFETY: a Region is the only owner of its mapping (nothing else holds the
// pointer), so unmapping it from another thread is sound.
unsafe impl Send for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: ptr/len are exactly one mapping this Region made and owns.
            unsafe { libc::munmap(self.ptr, self.len) };
        }
    }
}

fn page_bytes() -> usize {
    crate::sampler::procfs::page_size() as usize
}

/// A fake model while it is loaded.
struct Loaded {
    anon: Region,
    file: Region,
    vram: Option<DeviceMemory>,
    /// While asleep: the model's device bytes held as host memory instead
    /// (a sleep frees `vram` and makes this; a wake does the reverse).
    host_copy: Option<Region>,
}

/// Host memory an unload kept for a late free: freed `after` the release returns.
struct Late {
    regions: Vec<Region>,
    after: Duration,
}

/// Hands each pending late free to a thread that frees it `after` from now
/// (the moment the release call returned).
fn free_late(pending: &mut Vec<Late>, threads: &mut Vec<std::thread::JoinHandle<()>>) {
    let now = Instant::now();
    for late in pending.drain(..) {
        threads.push(std::thread::spawn(move || {
            std::thread::sleep((now + late.after).saturating_duration_since(Instant::now()));
            drop(late.regions);
        }));
    }
}

pub fn run(spec: &WorkerSpec, out: &mut Emitter) -> Result<()> {
    let strategy = strategy::lookup(&spec.strategy)?;
    // A lazy context (a test hook) is made at the first load instead.
    let lazy = super::hooks::lazy_context();
    let no_device = super::hooks::no_device();
    let device = match spec.device {
        DeviceSpec::Cuda(ordinal) if !lazy && !no_device => Some(FakeDevice::open(ordinal)?),
        _ => None,
    };
    out.send(Message::Hello(Hello {
        pid: std::process::id(),
        strategy: strategy.name.to_string(),
        device: spec.device.to_string(),
        checks: device
            .as_ref()
            .map(|d| d.checks.clone())
            .unwrap_or_default(),
        vram_floor_bytes: device.as_ref().and_then(|d| d.floor_bytes),
        allocator: None,
    }));
    let on_cpu = spec.device == DeviceSpec::Cpu;
    if let (true, Some((id, _))) = (on_cpu, spec.fakes.iter().find(|(_, m)| m.vram_bytes > 0)) {
        bail!(
            "model {id:?}: fake_vram_mib needs a cuda device: set device = \"cuda\" in the scenario \
             or pass --device cuda"
        );
    }
    let mut fake = Fake {
        spec,
        strategy,
        device,
        no_device,
        models: spec.fakes.iter().map(|(id, m)| (id.as_str(), *m)).collect(),
        dir: std::env::temp_dir(),
        leaked: Vec::new(),
        // Late frees wait for the release step; a workload without one frees at the unload's end.
        has_release: spec.workload.steps.contains(&Step::Release),
        pending: Vec::new(),
        threads: Vec::new(),
    };
    steps::run(spec, &mut fake, out)?;
    // What leaked stays mapped until after `done`.
    drop(fake);
    Ok(())
}

/// The fake worker as the steps' [`Backend`]: models of exact bytes.
struct Fake<'a> {
    spec: &'a WorkerSpec,
    strategy: &'static Strategy,
    device: Option<FakeDevice>,
    /// A test hook: no device, even on `cuda`.
    no_device: bool,
    models: HashMap<&'a str, FakeModel>,
    /// Where the file-backed parts are made.
    dir: PathBuf,
    /// Each load's `leak_bytes`, never unmapped.
    leaked: Vec<Region>,
    has_release: bool,
    /// Host memory unloads kept for a late free, and the threads freeing it.
    pending: Vec<Late>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Fake<'_> {
    fn model(&self, id: &str) -> Result<FakeModel> {
        self.models
            .get(id)
            .copied()
            .context("scenario names an unknown model")
    }
}

impl Backend for Fake<'_> {
    type Model = Loaded;
    /// Asleep, a fake model's device bytes are a host block of their size.
    type Asleep = Loaded;

    /// A lazy context (a test hook) is made here, outside the timed load.
    fn before_load(&mut self) -> Result<Option<String>> {
        if let (DeviceSpec::Cuda(ordinal), None, false) =
            (self.spec.device, &self.device, self.no_device)
        {
            self.device = Some(FakeDevice::open(ordinal)?);
        }
        Ok(None)
    }

    fn load(&mut self, id: &str, _before: Option<String>) -> Result<(Loaded, Option<String>)> {
        let m = self.model(id)?;
        let l = Loaded {
            anon: Region::anon(m.anon_bytes as usize)?,
            file: Region::file(m.file_bytes as usize, &self.dir)?,
            vram: match &self.device {
                Some(d) => d.alloc(m.vram_bytes)?,
                None => None,
            },
            host_copy: None,
        };
        self.leaked.push(Region::anon(m.leak_bytes as usize)?);
        spike(&m)?;
        Ok((l, Some(format!("tensor_bytes={}", m.load_bytes()))))
    }

    fn forward(&mut self, _id: &str, l: &mut Loaded) -> Result<Option<String>> {
        if let Some(vram) = &l.vram {
            vram.fill(0x5A)?;
        }
        let pages = l.anon.touch() + l.file.touch();
        Ok(Some(format!("outputs={pages}")))
    }

    fn unload(&mut self, id: &str, l: Loaded) -> Result<Option<String>> {
        let late_ms = self.models.get(id).map_or(0, |m| m.late_free_ms);
        if late_ms > 0 {
            drop(l.vram);
            self.pending.push(Late {
                regions: vec![l.anon, l.file],
                after: Duration::from_millis(late_ms),
            });
            return Ok(Some(format!(
                "host memory freed {late_ms} ms after the release"
            )));
        }
        drop(l);
        Ok(None)
    }

    fn release(&mut self, _models_alive: usize) -> Result<Option<String>> {
        let note = match self.strategy.release {
            ReleaseAction::MallocTrim => match glibc::malloc_trim() {
                Some(true) => "malloc_trim(0) returned memory",
                Some(false) => "malloc_trim(0) had nothing to return",
                None => "malloc_trim needs glibc",
            },
            _ => "fake worker: nothing to release (its memory is unmapped at unload)",
        };
        Ok(Some(note.to_string()))
    }

    fn sleep(&mut self, id: &str, mut l: Loaded) -> Result<(Loaded, Option<String>)> {
        let m = self.model(id)?;
        // Exact bytes: the device's block becomes a host block of its size.
        let host = Region::anon(m.vram_bytes as usize)?;
        host.touch();
        l.host_copy = Some(host);
        l.vram = None;
        Ok((l, Some(format!("host_copy_bytes={}", m.vram_bytes))))
    }

    fn wake(&mut self, id: &str, mut l: Loaded) -> Result<(Loaded, Option<String>)> {
        let m = self.model(id)?;
        l.vram = match &self.device {
            Some(d) => d.alloc(m.vram_bytes)?,
            None => None,
        };
        l.host_copy = None;
        Ok((l, None))
    }

    /// Waits: the fake worker allocates nothing while busy.
    fn busy(&mut self, ms: u64) -> Result<Option<String>> {
        std::thread::sleep(Duration::from_millis(ms));
        Ok(None)
    }

    /// A late free starts when the release returns (the unload, in a
    /// workload without a release step).
    fn after(&mut self, step: &Step, _cycle: u32) -> Result<()> {
        match step {
            Step::Release => free_late(&mut self.pending, &mut self.threads),
            Step::Unload(_) if !self.has_release => free_late(&mut self.pending, &mut self.threads),
            _ => {}
        }
        Ok(())
    }

    /// Every late free is done before the run ends: nothing comes back after it.
    fn finish(&mut self) -> Result<Vec<Check>> {
        free_late(&mut self.pending, &mut self.threads);
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                bail!("fake worker: a late-free thread panicked");
            }
        }
        Ok(Vec::new())
    }
}

/// The model's spike: `spike_bytes` mapped and touched, held `spike_ms`,
/// unmapped (inside the load: a peak the load's end no longer shows).
fn spike(m: &FakeModel) -> Result<()> {
    if m.spike_bytes == 0 {
        return Ok(());
    }
    // Populated by the kernel in one call: the block is resident at once,
    // not page by page over the next milliseconds.
    let block = Region::map(
        m.spike_bytes as usize,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
        -1,
    )?;
    std::thread::sleep(Duration::from_millis(m.spike_ms));
    drop(block);
    Ok(())
}
