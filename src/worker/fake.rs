//! The fake worker: the scenario's steps on "models" that are exact numbers
//! of bytes, so that every stage after the worker (sampler, record, metrics,
//! exporters, gate) can be tested against known answers, the way hyperfine
//! tests its pipeline with a mock executor.
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

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::cuda_driver::DeviceMemory;
use super::emitter::{phase, Emitter};
use super::fake_device::FakeDevice;
use super::{glibc, selfmem, WorkerSpec};
use crate::model::spec::FakeModel;
use crate::protocol::{Done, Hello, Message, Phase};
use crate::scenario::{DeviceSpec, Step};
use crate::strategy::{self, ReleaseAction};

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
    let mut device = match spec.device {
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
    let models: std::collections::HashMap<&str, FakeModel> =
        spec.fakes.iter().map(|(id, m)| (id.as_str(), *m)).collect();
    let w = &spec.workload;
    let dir = std::env::temp_dir();
    phase(out, Phase::Baseline, 0, None, || {
        std::thread::sleep(Duration::from_millis(w.baseline_ms));
        Ok(((), None))
    })?;
    let mut leaked: Vec<Region> = Vec::new();
    // Late frees wait for the release step; a workload without one frees at the unload's end.
    let has_release = w.steps.contains(&Step::Release);
    let mut pending: Vec<Late> = Vec::new();
    let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    for cycle in 1..=spec.cycles {
        let mut loaded: std::collections::HashMap<&str, Loaded> = Default::default();
        for step in &w.steps {
            match step {
                Step::Load(id) => {
                    if let (DeviceSpec::Cuda(ordinal), None, false) =
                        (spec.device, &device, no_device)
                    {
                        device = Some(FakeDevice::open(ordinal)?);
                    }
                    let m = *models
                        .get(id.as_str())
                        .context("scenario names an unknown model")?;
                    let l = phase(out, Phase::Load, cycle, Some(id), || {
                        let l = Loaded {
                            anon: Region::anon(m.anon_bytes as usize)?,
                            file: Region::file(m.file_bytes as usize, &dir)?,
                            vram: match &device {
                                Some(d) => d.alloc(m.vram_bytes)?,
                                None => None,
                            },
                            host_copy: None,
                        };
                        leaked.push(Region::anon(m.leak_bytes as usize)?);
                        spike(&m)?;
                        Ok((l, Some(format!("tensor_bytes={}", m.load_bytes()))))
                    })?;
                    loaded.insert(id.as_str(), l);
                }
                Step::Forward(id) => {
                    let l = loaded.get(id.as_str()).context("forward before load")?;
                    phase(out, Phase::Forward, cycle, Some(id), || {
                        if let Some(vram) = &l.vram {
                            vram.fill(0x5A)?;
                        }
                        let pages = l.anon.touch() + l.file.touch();
                        Ok(((), Some(format!("outputs={pages}"))))
                    })?;
                }
                Step::Unload(id) => {
                    let l = loaded.remove(id.as_str()).context("unload before load")?;
                    let late_ms = models.get(id.as_str()).map_or(0, |m| m.late_free_ms);
                    phase(out, Phase::Unload, cycle, Some(id), || {
                        if late_ms > 0 {
                            drop(l.vram);
                            pending.push(Late {
                                regions: vec![l.anon, l.file],
                                after: Duration::from_millis(late_ms),
                            });
                            let note = format!("host memory freed {late_ms} ms after the release");
                            return Ok(((), Some(note)));
                        }
                        drop(l);
                        Ok(((), None))
                    })?;
                    if !has_release {
                        free_late(&mut pending, &mut threads);
                    }
                }
                Step::Release => {
                    phase(out, Phase::Release, cycle, None, || {
                        let note = match strategy.release {
                            ReleaseAction::MallocTrim => match glibc::malloc_trim() {
                                Some(true) => "malloc_trim(0) returned memory",
                                Some(false) => "malloc_trim(0) had nothing to return",
                                None => "malloc_trim needs glibc",
                            },
                            _ => {
                                "fake worker: nothing to release (its memory is unmapped at unload)"
                            }
                        };
                        Ok(((), Some(note.to_string())))
                    })?;
                    free_late(&mut pending, &mut threads);
                }
                Step::Settle => sleep_phase(out, Phase::Settle, cycle, w.settle_ms)?,
                Step::Idle(ms) => sleep_phase(out, Phase::Idle, cycle, *ms)?,
                Step::Busy(ms) => sleep_phase(out, Phase::Busy, cycle, *ms)?,
                Step::Asleep(ms) => sleep_phase(out, Phase::Asleep, cycle, *ms)?,
                Step::Sleep(id) => {
                    let m = *models
                        .get(id.as_str())
                        .context("scenario names an unknown model")?;
                    let l = loaded.get_mut(id.as_str()).context("sleep before load")?;
                    // Exact bytes: the device's block becomes a host block of its size.
                    phase(out, Phase::Sleep, cycle, Some(id), || {
                        let host = Region::anon(m.vram_bytes as usize)?;
                        host.touch();
                        l.host_copy = Some(host);
                        l.vram = None;
                        Ok(((), Some(format!("host_copy_bytes={}", m.vram_bytes))))
                    })?;
                }
                Step::Wake(id) => {
                    let m = *models
                        .get(id.as_str())
                        .context("scenario names an unknown model")?;
                    let l = loaded.get_mut(id.as_str()).context("wake before sleep")?;
                    phase(out, Phase::Wake, cycle, Some(id), || {
                        l.vram = match &device {
                            Some(d) => d.alloc(m.vram_bytes)?,
                            None => None,
                        };
                        l.host_copy = None;
                        Ok(((), None))
                    })?;
                }
            }
        }
    }
    // Every late free is done before the run ends: nothing comes back after it.
    free_late(&mut pending, &mut threads);
    for t in threads {
        if t.join().is_err() {
            bail!("fake worker: a late-free thread panicked");
        }
    }
    out.send(Message::Done(Done {
        vm_hwm_bytes: selfmem::vm_hwm_bytes(),
        checks: Vec::new(),
    }));
    drop(leaked);
    Ok(())
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

fn sleep_phase(out: &mut Emitter, p: Phase, cycle: u32, ms: u64) -> Result<()> {
    phase(out, p, cycle, None, || {
        let until = Instant::now() + Duration::from_millis(ms);
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        Ok(((), None))
    })
}
