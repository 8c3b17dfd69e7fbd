//! NVML, the driver's own bookkeeping of GPU memory: per-process used memory
//! (the numbers `nvidia-smi --query-compute-apps` prints) and device used and
//! total memory. Shared by the parent's VRAM probe and the CUDA worker.
//!
//! NVML never creates a CUDA context, so the parent can watch a worker
//! without holding VRAM itself. In every build: nvml-wrapper opens
//! `libnvidia-ml.so.1` with dlopen on first use, so a machine without the
//! NVIDIA driver gets a clear error there, not a binary that fails to start.
//! A reading is one NVML call, the process list, into a buffer the probe
//! keeps (`nvml_list`); the device's used memory is read beside it at most
//! every 100 ms. `benches/nvml/run.sh` times a reading against a bare
//! NVML call from Python; the measured costs are in
//! results/reference/cuda/README.md.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::record::gpu::{ProcessVram, MAX_GPUS};
use nvml_wrapper::{Device, Nvml};

use super::nvml_list::{Listed, ProcessList};
use super::vram::VramProbe;
use crate::protocol::Check;
use crate::textutil::MIB;

static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();

/// The process-wide NVML handle, initialised on first use.
pub fn handle() -> Result<&'static Nvml, String> {
    NVML.get_or_init(|| {
        Nvml::init().map_err(|e| {
            format!("cannot initialise NVML (libnvidia-ml.so.1 comes with the NVIDIA driver): {e}")
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Every GPU NVML sees, in NVML's order.
pub fn devices() -> Result<Vec<Device<'static>>, String> {
    let nvml = handle()?;
    let count = nvml
        .device_count()
        .map_err(|e| format!("nvml device count: {e}"))?;
    (0..count)
        .map(|i| {
            nvml.device_by_index(i)
                .map_err(|e| format!("nvml device {i}: {e}"))
        })
        .collect()
}

/// The NVML device with a CUDA device's UUID (CUDA and NVML may number GPUs
/// differently, e.g. under `CUDA_VISIBLE_DEVICES`).
pub fn device_by_uuid(uuid: &[u8; 16]) -> Result<Device<'static>, String> {
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    let text = format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    handle()?
        .device_by_uuid(text.as_str())
        .map_err(|e| format!("nvml has no device {text}: {e}"))
}

/// Bytes `pid` holds on `device`, `None` when NVML does not list it among the
/// compute processes (no CUDA context there, or a PID from another namespace).
/// For a reading now and then (a phase edge); the sampler keeps its list.
pub fn process_bytes(device: &Device, pid: u32) -> Result<Option<u64>, String> {
    bytes_of_any(ProcessList::default().read(device)?, &[pid])
}

/// The bytes NVML lists for any of `pids`, summed; `None` when it lists none.
fn bytes_of_any(list: impl Iterator<Item = Listed>, pids: &[u32]) -> Result<Option<u64>, String> {
    let mut total: Option<u64> = None;
    for p in list.filter(|p| pids.contains(&p.pid)) {
        match p.used_bytes {
            Some(bytes) => total = Some(total.unwrap_or(0) + bytes),
            None => return Err("nvml reports no per-process memory on this driver".into()),
        }
    }
    Ok(total)
}

/// (used, total) bytes of the whole device.
pub fn device_memory(device: &Device) -> Result<(u64, u64), String> {
    device
        .memory_info()
        .map(|m| (m.used, m.total))
        .map_err(|e| format!("nvml memory info: {e}"))
}

/// How long one NVML call takes: every duration (up to a pre-reserved
/// number, so timing never allocates), for median, p99, max and mean.
#[derive(Debug, Default, Clone)]
struct Cost {
    calls: u64,
    total: Duration,
    kept_ns: Vec<u32>,
}

/// How often the probe reads the whole device's used memory (for its
/// check's first / max / last): not at every reading, which would make one
/// reading two NVML calls.
const DEVICE_READ_EVERY: Duration = Duration::from_millis(100);

/// Durations kept per probe: 20 minutes at 200 Hz.
const KEPT_DURATIONS: usize = 240_000;

impl Cost {
    fn new() -> Cost {
        Cost {
            calls: 0,
            total: Duration::ZERO,
            kept_ns: Vec::with_capacity(KEPT_DURATIONS),
        }
    }

    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let value = f();
        let spent = start.elapsed();
        self.calls += 1;
        self.total += spent;
        if self.kept_ns.len() < KEPT_DURATIONS {
            self.kept_ns
                .push(u32::try_from(spent.as_nanos()).unwrap_or(u32::MAX));
        }
        value
    }

    fn describe(&self) -> String {
        if self.calls == 0 {
            return "not called".into();
        }
        let mut sorted = self.kept_ns.clone();
        sorted.sort_unstable();
        let at = |q: f64| {
            sorted
                .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0)
        };
        let us = |ns: u32| f64::from(ns) / 1e3;
        let mean_us = self.total.as_secs_f64() * 1e6 / self.calls as f64;
        format!(
            "median {:.1} µs, p99 {:.1} µs, max {:.1} µs, mean {mean_us:.1} µs over {} calls",
            us(at(0.5)),
            us(at(0.99)),
            us(at(1.0)),
            self.calls
        )
    }
}

/// The parent's VRAM probe: NVML's per-process memory of the worker.
///
/// A PID NVML does not list on a GPU that answered reads 0 (no context yet:
/// see [`look_up`]); `None` only when no GPU answered. Device used and total
/// are tracked on the GPU where the PID was found.
pub struct NvmlProbe {
    devices: Vec<Device<'static>>,
    found: Option<usize>,
    pid: Option<u32>,
    process_cost: Cost,
    device_cost: Cost,
    first_read: Option<Instant>,
    last_read: Option<Instant>,
    device_read: Option<Instant>,
    reads: u64,
    device_used_first_bytes: Option<u64>,
    device_used_max_bytes: u64,
    device_used_last_bytes: u64,
    device_total_bytes: u64,
    errors: u64,
    last_error: Option<String>,
    /// The GPUs that listed a sampled process so far (bit N: GPU N).
    touched: u8,
    /// The process list's buffer, kept between readings.
    list: ProcessList,
    /// Whether a reading summed a process tree (`--tree`), not one process.
    tree: bool,
}

impl NvmlProbe {
    pub fn open() -> Result<NvmlProbe, String> {
        let devices = devices()?;
        if devices.is_empty() {
            return Err("nvml sees no GPU".into());
        }
        Ok(NvmlProbe {
            devices,
            found: None,
            pid: None,
            process_cost: Cost::new(),
            device_cost: Cost::new(),
            first_read: None,
            last_read: None,
            device_read: None,
            reads: 0,
            device_used_first_bytes: None,
            device_used_max_bytes: 0,
            device_used_last_bytes: 0,
            device_total_bytes: 0,
            errors: 0,
            last_error: None,
            touched: 0,
            list: ProcessList::default(),
            tree: false,
        })
    }

    fn note_error(&mut self, error: String) {
        self.errors += 1;
        self.last_error = Some(error);
    }

    fn track_device(&mut self, index: usize) {
        let device = &self.devices[index];
        match self.device_cost.time(|| device_memory(device)) {
            Ok((used, total)) => {
                self.device_used_first_bytes.get_or_insert(used);
                self.device_used_max_bytes = self.device_used_max_bytes.max(used);
                self.device_used_last_bytes = used;
                self.device_total_bytes = total;
            }
            Err(e) => self.note_error(e),
        }
    }
}

impl VramProbe for NvmlProbe {
    fn process_bytes(&mut self, pid: u32) -> Option<u64> {
        self.tree_bytes(&[pid])
    }

    fn tree_bytes(&mut self, pids: &[u32]) -> Option<u64> {
        let now = Instant::now();
        self.first_read.get_or_insert(now);
        self.last_read = Some(now);
        self.reads += 1;
        self.pid = pids.first().copied();
        self.tree |= pids.len() > 1;
        let devices = &self.devices;
        let cost = &mut self.process_cost;
        let list = &mut self.list;
        let mut errors = Vec::new();
        let (value, found) = look_up(
            self.found,
            devices.len(),
            |index| cost.time(|| bytes_of_any(list.read(&devices[index])?, pids)),
            &mut errors,
        );
        for e in errors {
            self.note_error(e);
        }
        self.found = found;
        let device_due = self
            .device_read
            .is_none_or(|at| now.duration_since(at) >= DEVICE_READ_EVERY);
        if let (Some(index), true) = (found, device_due) {
            self.device_read = Some(now);
            self.track_device(index);
        }
        value
    }

    fn per_gpu(&mut self, pids: &[u32], out: &mut Vec<ProcessVram>) -> Option<(Option<u64>, u8)> {
        out.clear();
        if self.devices.len() < 2 {
            return None;
        }
        // One process list per GPU serves both the per-GPU sums and the
        // root's own reading (`process_bytes` would ask the GPUs again).
        let now = Instant::now();
        self.first_read.get_or_insert(now);
        self.last_read = Some(now);
        self.reads += 1;
        let root = pids.first().copied();
        self.pid = root;
        let mut answered = false;
        let mut root_on: Option<(usize, u64)> = None;
        for index in 0..self.devices.len().min(MAX_GPUS) {
            let device = &self.devices[index];
            let list = &mut self.list;
            let listed = self.process_cost.time(|| {
                list.read(device).map(|entries| {
                    entries
                        .filter(|p| pids.contains(&p.pid))
                        .filter_map(|p| Some((p.pid, p.used_bytes?)))
                        .for_each(|(pid, bytes)| {
                            out.push(ProcessVram {
                                gpu: index as u32,
                                pid,
                                bytes,
                            })
                        })
                })
            });
            if let Err(e) = listed {
                self.note_error(format!("{e} (GPU {index})"));
                continue;
            }
            answered = true;
            for p in out.iter().filter(|p| p.gpu == index as u32) {
                self.touched |= 1 << index;
                if Some(p.pid) == root && root_on.is_none_or(|(i, _)| i == index) {
                    root_on = Some((index, root_on.map_or(0, |(_, b)| b) + p.bytes));
                }
            }
        }
        if !answered {
            return None;
        }
        if let Some((index, _)) = root_on {
            self.found = Some(index);
        }
        let device_due = self
            .device_read
            .is_none_or(|at| now.duration_since(at) >= DEVICE_READ_EVERY);
        if let (Some(index), true) = (self.found, device_due) {
            self.device_read = Some(now);
            self.track_device(index);
        }
        // A root no GPU lists holds nothing there yet: 0 (see `look_up`).
        Some((Some(root_on.map_or(0, |(_, b)| b)), self.touched))
    }

    fn checks(&self) -> Vec<Check> {
        let pid = self
            .pid
            .map(|p| p.to_string())
            .unwrap_or_else(|| "?".into());
        let span_s = match (self.first_read, self.last_read) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        let rate = if span_s > 0.0 {
            format!("{:.0} Hz", (self.reads.saturating_sub(1)) as f64 / span_s)
        } else {
            "-".into()
        };
        let errors = match &self.last_error {
            Some(e) => format!("; {} nvml errors, last: {e}", self.errors),
            None => String::new(),
        };
        let detail = match self.found {
            Some(index) => format!(
                "nvml per-process memory of pid {pid}{} on nvml GPU {index}; device total {:.0} MiB, device used \
                 first {:.0} / max {:.0} / last {:.0} MiB; {} readings over {span_s:.1} s ({rate}); one per-process \
                 read: {}; one device-memory read: {}{errors}",
                if self.tree {
                    " and its process tree (summed)"
                } else {
                    ""
                },
                self.device_total_bytes as f64 / MIB,
                self.device_used_first_bytes.unwrap_or(0) as f64 / MIB,
                self.device_used_max_bytes as f64 / MIB,
                self.device_used_last_bytes as f64 / MIB,
                self.reads,
                self.process_cost.describe(),
                self.device_cost.describe(),
            ),
            // Under --tree a launcher (torchrun) often holds no context
            // itself while the processes it started do: not a warning.
            None if self.touched != 0 => format!(
                "pid {pid} (the sampled tree's root) holds no CUDA context; processes of its tree were \
                 listed on nvml GPU(s) {}: the samples' per-GPU columns hold them ({} readings); one \
                 per-process read: {}{errors}",
                (0..MAX_GPUS)
                    .filter(|i| self.touched & (1 << i) != 0)
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.reads,
                self.process_cost.describe(),
            ),
            None => {
                warn_unseen(&pid);
                format!(
                    "pid {pid} never appeared in nvml's process list ({} readings): sampled VRAM reads 0 \
                     (no CUDA context; in a container's PID namespace it would be wrong: the worker's \
                     phase-edge values are the fallback, see its 'vram source' check); one per-process \
                     read: {}{errors}",
                    self.reads,
                    self.process_cost.describe(),
                )
            }
        };
        vec![Check {
            name: "vram sampler (nvml)".into(),
            ok: true,
            detail,
        }]
    }
}

/// One reading of a process's device memory from each GPU's answer
/// (`query(index)`: NVML's bytes for the process on that GPU, `None` when it
/// is not listed there), `found` being the GPU that listed it before.
/// Returns the reading and the GPU that lists it. A process NVML does not list
/// on a GPU that answered holds nothing there: 0, not unknown (PyTorch and
/// JAX create their CUDA context at their first GPU operation, so a program
/// is unlisted until then); `None` only when no GPU answered. Errors go to
/// `errors`.
pub fn look_up(
    found: Option<usize>,
    devices: usize,
    mut query: impl FnMut(usize) -> Result<Option<u64>, String>,
    errors: &mut Vec<String>,
) -> (Option<u64>, Option<usize>) {
    if let Some(index) = found {
        return match query(index) {
            Ok(bytes) => (Some(bytes.unwrap_or(0)), found),
            Err(e) => {
                errors.push(e);
                (None, found)
            }
        };
    }
    let mut answered = false;
    for index in 0..devices {
        match query(index) {
            Ok(Some(bytes)) => return (Some(bytes), Some(index)),
            Ok(None) => answered = true,
            Err(e) => errors.push(e),
        }
    }
    (answered.then_some(0), None)
}

fn warn_unseen(pid: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "memrel: warning: worker pid {pid} never appeared in nvml's process list: its VRAM read 0 \
             (no CUDA context; wrong in a container's PID namespace: runs.json checks say which)"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::look_up;

    /// A fake NVML: per GPU, the process list's answer at each reading.
    fn read(
        found: Option<usize>,
        answers: &[Result<Option<u64>, String>],
    ) -> (Option<u64>, Option<usize>, usize) {
        let mut errors = Vec::new();
        let (value, found) = look_up(found, answers.len(), |i| answers[i].clone(), &mut errors);
        (value, found, errors.len())
    }

    #[test]
    fn a_process_not_yet_listed_on_an_answering_gpu_holds_zero_then_its_bytes() {
        // A program that creates its CUDA context 2 s in: unlisted, then listed on GPU 1.
        assert_eq!(read(None, &[Ok(None), Ok(None)]), (Some(0), None, 0));
        assert_eq!(
            read(None, &[Ok(None), Ok(Some(500))]),
            (Some(500), Some(1), 0)
        );
        // Once found, its absence is 0 too (the context was destroyed).
        assert_eq!(
            read(Some(1), &[Ok(Some(7)), Ok(None)]),
            (Some(0), Some(1), 0)
        );
    }

    #[test]
    fn only_gpus_that_do_not_answer_leave_the_reading_unknown() {
        let broken = || Err("nvml process list: Unknown".to_string());
        assert_eq!(read(None, &[broken(), broken()]), (None, None, 2));
        assert_eq!(read(None, &[broken(), Ok(None)]), (Some(0), None, 1));
        assert_eq!(read(Some(0), &[broken()]), (None, Some(0), 1));
        assert_eq!(read(None, &[]), (None, None, 0));
    }
}
