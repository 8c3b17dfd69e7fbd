//! Where a CUDA worker's own VRAM numbers come from (candle's in a `cuda`
//! build, the fake worker's in any build; NVML needs no CUDA toolkit):
//! NVML's per-process memory of this PID, what `nvidia-smi --query-compute-apps`
//! shows. Where NVML does not list this PID (a container's own PID namespace)
//! it falls back to NVML's device used memory minus its value before this
//! process created a context, right only while nothing else uses the GPU; the
//! hello check `vram source (worker)` says which, and `MEMREL_VRAM_FALLBACK=1`
//! forces the fallback to check it against NVML. Never a silent 0: without
//! NVML every reading is `None`.
//!
//! Also the opt-in nvidia-smi cross-check at phase edges.

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::sampler::nvml;
use crate::textutil::MIB;

/// Set once the device is open; read by [`process_vram_bytes`] at every edge.
static READER: OnceLock<VramReader> = OnceLock::new();

struct VramReader {
    device: nvml_wrapper::Device<'static>,
    pid: u32,
    source: VramSource,
}

#[derive(Debug, Clone, Copy)]
enum VramSource {
    /// NVML lists this PID: its per-process used memory (0 once it holds no context).
    PerProcess,
    /// NVML cannot see this PID: device used minus device used before our context.
    DeviceDelta { before_context_bytes: u64 },
}

impl VramReader {
    fn read(&self) -> Option<u64> {
        match self.source {
            VramSource::PerProcess => nvml::process_bytes(&self.device, self.pid)
                .ok()
                .map(|b| b.unwrap_or(0)),
            VramSource::DeviceDelta {
                before_context_bytes,
            } => nvml::device_memory(&self.device)
                .ok()
                .map(|(used, _)| used.saturating_sub(before_context_bytes)),
        }
    }
}

/// This process's VRAM now, `None` before the device is open or without NVML.
pub fn process_vram_bytes() -> Option<u64> {
    READER.get().and_then(VramReader::read)
}

/// With `MEMREL_CROSSCHECK_NVIDIA_SMI=1`: what `nvidia-smi --query-compute-apps`
/// says about this process, as `nvidia_smi_mib=N` (`absent` when not listed).
/// Costs one nvidia-smi run (~20 ms) per phase edge: for cross-check runs only.
pub fn nvidia_smi_note() -> Option<String> {
    if std::env::var("MEMREL_CROSSCHECK_NVIDIA_SMI")
        .ok()
        .as_deref()
        != Some("1")
    {
        return None;
    }
    let pid = READER.get()?.pid;
    let output = Command::new("nvidia-smi")
        .args([
            "--query-compute-apps=pid,used_memory",
            "--format=csv,noheader,nounits",
        ])
        .output();
    let text = match output {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => return Some(format!("nvidia_smi=failed({})", o.status)),
        Err(e) => return Some(format!("nvidia_smi=unavailable({e})")),
    };
    let mib: Option<u64> = text
        .lines()
        .filter_map(|line| line.split_once(','))
        .filter(|(p, _)| p.trim().parse::<u32>().ok() == Some(pid))
        .filter_map(|(_, m)| m.trim().parse::<u64>().ok())
        .reduce(|a, b| a + b);
    Some(match mib {
        Some(m) => format!("nvidia_smi_mib={m}"),
        None => "nvidia_smi_mib=absent".into(),
    })
}

/// (per-process bytes if NVML lists this PID, device used bytes), read at one moment.
pub type Reading = (Option<u64>, Option<u64>);

/// Which source this worker uses, and what it measured for the bare device.
pub struct Source {
    pub context_only_bytes: Option<u64>,
    pub bare_device_bytes: Option<u64>,
    pub detail: String,
    pub ok: bool,
}

/// Decides the VRAM source from readings taken before the context, with the
/// context alone and with the full device, and installs the reader.
pub fn choose_source(
    nvml_device: Result<nvml_wrapper::Device<'static>, String>,
    before_context_bytes: Option<u64>,
    at_context: Option<Reading>,
    at_device: Option<Reading>,
    pid: u32,
) -> Source {
    let forced = std::env::var("MEMREL_VRAM_FALLBACK").ok().as_deref() == Some("1");
    let at_device = at_device.map(|(listed, used)| (listed.filter(|_| !forced), used));
    let (source, out) = match (&nvml_device, before_context_bytes, at_device) {
        (Ok(_), _, Some((Some(bytes), _))) => (
            Some(VramSource::PerProcess),
            Source {
                context_only_bytes: at_context.and_then(|(listed, _)| listed),
                bare_device_bytes: Some(bytes),
                detail: format!(
                    "nvml per-process memory of pid {pid} (the value nvidia-smi --query-compute-apps shows)"
                ),
                ok: true,
            },
        ),
        (Ok(_), Some(before), Some((None, Some(used)))) => (
            Some(VramSource::DeviceDelta {
                before_context_bytes: before,
            }),
            Source {
                context_only_bytes: at_context.and_then(|(_, u)| u).map(|u| u.saturating_sub(before)),
                bare_device_bytes: Some(used.saturating_sub(before)),
                detail: format!(
                    "FALLBACK{}: pid {pid} is not in nvml's process list (a container PID namespace?); VRAM is \
                     device used minus the {:.0} MiB used before this worker's context: wrong if anything else \
                     uses the GPU meanwhile",
                    if forced { " (forced by MEMREL_VRAM_FALLBACK=1)" } else { "" },
                    before as f64 / MIB
                ),
                ok: true,
            },
        ),
        (Err(e), _, _) => (None, none(format!("none: {e}; VRAM columns stay empty"))),
        (Ok(_), _, _) => (None, none("none: nvml gave no memory readings; VRAM columns stay empty".into())),
    };
    if let (Some(source), Ok(device)) = (source, nvml_device) {
        // A second open in one worker keeps the first reader: same device, same PID.
        let _ = READER.set(VramReader {
            device,
            pid,
            source,
        });
    }
    out
}

fn none(detail: String) -> Source {
    Source {
        context_only_bytes: None,
        bare_device_bytes: None,
        detail,
        ok: false,
    }
}

/// Polls NVML briefly for `pid` (the list can trail a new context by a moment).
pub fn wait_listed(device: &nvml_wrapper::Device<'static>, pid: u32) -> Option<u64> {
    for _ in 0..25 {
        if let Ok(Some(bytes)) = nvml::process_bytes(device, pid) {
            return Some(bytes);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}
