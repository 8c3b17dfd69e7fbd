//! A GPU's compute-process list in one NVML call, into a buffer kept from
//! one reading to the next: the sampler's hot path on a GPU.
//!
//! Why not nvml-wrapper's `Device::running_compute_processes`, which the
//! rest of memrel uses: it asks NVML twice per list (once for the count with
//! a null buffer, once for the entries) and allocates two vectors each time.
//! On the device tool's H100 that made one memrel reading 58.9 µs median
//! against 25.6 µs for one bare call from Python (`benches/nvml`). Here the
//! buffer starts with room for [`START_ENTRIES`] processes and grows only
//! when NVML answers that it is too small, so a reading is one call and
//! allocates nothing. The call and its types are nvml-wrapper-sys's (the
//! same library handle nvml-wrapper opened), so nothing is declared by hand.

use std::os::raw::c_uint;

use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{
    nvmlProcessInfo_t, nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, nvmlReturn_enum_NVML_SUCCESS,
    NVML_VALUE_NOT_AVAILABLE,
};

/// Room for this many processes before the first reading: more than a GPU
/// usually serves (one worker, a few torchrun ranks, some neighbours).
const START_ENTRIES: usize = 64;

/// One entry of the list: a process and the bytes NVML charges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    pub pid: u32,
    /// `None` where the driver does not report per-process memory.
    pub used_bytes: Option<u64>,
}

/// A reusable buffer for [`ProcessList::read`].
pub struct ProcessList {
    entries: Vec<nvmlProcessInfo_t>,
}

impl Default for ProcessList {
    fn default() -> Self {
        ProcessList {
            // SAFETY: a plain C struct of integers; all zeroes is a valid value.
            entries: vec![unsafe { std::mem::zeroed() }; START_ENTRIES],
        }
    }
}

impl ProcessList {
    /// The compute processes on `device` now, in one NVML call (more only
    /// when more processes are listed than the buffer held: it then grows).
    pub fn read<'a>(
        &'a mut self,
        device: &Device,
    ) -> Result<impl Iterator<Item = Listed> + 'a, String> {
        let call = device
            .nvml()
            .lib()
            .nvmlDeviceGetComputeRunningProcesses_v3
            .as_ref()
            .map_err(|e| format!("nvml has no nvmlDeviceGetComputeRunningProcesses_v3: {e}"))?;
        let mut count: c_uint = 0;
        let mut answered = false;
        for _ in 0..3 {
            count = c_uint::try_from(self.entries.len()).unwrap_or(c_uint::MAX);
            // SAFETY: the handle is a live device of the library `call` came
            // from; `entries` has room for `count` entries, which NVML fills
            // at most, writing the number it listed (or needs) to `count`.
            let code = unsafe { call(device.handle(), &mut count, self.entries.as_mut_ptr()) };
            if code == nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE {
                // More processes than room: grow, with headroom for the ones
                // that start before the next call.
                let needed = usize::try_from(count).unwrap_or(0) + 16;
                // SAFETY: as above, zeroes are a valid entry.
                let zero: nvmlProcessInfo_t = unsafe { std::mem::zeroed() };
                self.entries
                    .resize(needed.max(self.entries.len() * 2), zero);
                continue;
            }
            if code != nvmlReturn_enum_NVML_SUCCESS {
                return Err(format!(
                    "nvml process list: {}",
                    nvml_wrapper::error::NvmlError::from(code)
                ));
            }
            answered = true;
            break;
        }
        if !answered {
            return Err(format!(
                "nvml process list: still more processes than room for {} after growing twice",
                self.entries.len()
            ));
        }
        let listed = usize::try_from(count).unwrap_or(0).min(self.entries.len());
        Ok(self.entries[..listed].iter().map(listed_entry))
    }
}

fn listed_entry(info: &nvmlProcessInfo_t) -> Listed {
    // NVML's "not available" is -1 stored in the unsigned field.
    let unavailable = NVML_VALUE_NOT_AVAILABLE as u64;
    Listed {
        pid: info.pid,
        used_bytes: (info.usedGpuMemory != unavailable).then_some(info.usedGpuMemory),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvmls_not_available_is_none_and_bytes_are_kept() {
        // SAFETY: zeroes are a valid entry.
        let mut info: nvmlProcessInfo_t = unsafe { std::mem::zeroed() };
        info.pid = 42;
        info.usedGpuMemory = 512 << 20;
        assert_eq!(
            listed_entry(&info),
            Listed {
                pid: 42,
                used_bytes: Some(512 << 20)
            }
        );
        info.usedGpuMemory = u64::MAX;
        assert_eq!(listed_entry(&info).used_bytes, None);
    }
}
