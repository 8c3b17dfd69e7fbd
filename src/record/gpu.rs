//! VRAM per GPU, for machines with several: what one sample read on each GPU
//! the run touched, summed over the sampled processes (samples.csv's
//! `gpu_vram` column), and each process's part (gpu_processes.csv).
//!
//! A run on a one-GPU machine writes neither (its VRAM is `vram_bytes`, as
//! always). Where NVML sees several GPUs, the sampler writes every GPU that
//! listed a sampled process at any time during the run (from then on, a GPU
//! that lists none reads 0: the context is gone, not unknown), as `GPU:BYTES`
//! entries separated by spaces, e.g. `0:1073741824 1:0`; `-` when the GPUs
//! answered and none has listed a sampled process yet.

use std::fmt::Write as _;

/// The most GPUs one sample keeps (the largest hosts memrel runs on have 8).
pub const MAX_GPUS: usize = 8;

/// Bytes per GPU in one sample; a fixed array, so a sample stays `Copy` and
/// the sampler allocates nothing per reading for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GpuVram {
    bytes: [u64; MAX_GPUS],
    /// Bit N: GPU N was read.
    present: u8,
    /// The GPUs were asked (with none present: none lists a sampled process yet).
    read: bool,
}

impl GpuVram {
    /// The GPUs were asked and none has listed a sampled process yet.
    pub fn read_none() -> GpuVram {
        GpuVram {
            read: true,
            ..GpuVram::default()
        }
    }

    /// Bytes on `gpu`; `None` where this sample has no reading of it.
    pub fn get(&self, gpu: u32) -> Option<u64> {
        let i = gpu as usize;
        (i < MAX_GPUS && self.present & (1 << i) != 0).then(|| self.bytes[i])
    }

    /// Adds `bytes` to `gpu`'s sum (GPUs past [`MAX_GPUS`] are not kept).
    pub fn add(&mut self, gpu: u32, bytes: u64) {
        let i = gpu as usize;
        if i < MAX_GPUS {
            self.bytes[i] = if self.present & (1 << i) != 0 {
                self.bytes[i] + bytes
            } else {
                bytes
            };
            self.present |= 1 << i;
        }
        self.read = true;
    }

    /// The sample has per-GPU readings (a machine of several GPUs); when
    /// not, a device's VRAM is the sample's `vram_bytes`.
    pub fn was_read(&self) -> bool {
        self.read
    }

    /// The GPUs read, in order.
    pub fn gpus(&self) -> impl Iterator<Item = u32> + '_ {
        (0..MAX_GPUS as u32).filter(move |i| self.present & (1 << i) != 0)
    }

    /// The sums of a `gpu_vram` cell; `Err` names the entry that is not
    /// `GPU:SUM[/PID=BYTES,…]`.
    pub fn parse(cell: &str) -> Result<GpuVram, String> {
        let mut out = GpuVram::default();
        if cell.trim() == "-" {
            out.read = true;
            return Ok(out);
        }
        for entry in cell.split_whitespace() {
            let parsed = entry
                .split_once(':')
                .and_then(|(gpu, bytes)| Some((gpu.parse::<u32>().ok()?, bytes.parse().ok()?)));
            match parsed {
                Some((gpu, bytes)) => out.add(gpu, bytes),
                None => return Err(format!("gpu_vram entry {entry:?} is not GPU:BYTES")),
            }
        }
        Ok(out)
    }
}

/// One process's bytes on one GPU, as the sampler read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessVram {
    pub gpu: u32,
    pub pid: u32,
    pub bytes: u64,
}

impl GpuVram {
    /// The sums of every GPU in `touched` (bit N: GPU N) over `processes`.
    pub fn of(touched: u8, processes: &[ProcessVram]) -> GpuVram {
        let mut sums = GpuVram {
            read: true,
            ..GpuVram::default()
        };
        for gpu in (0..MAX_GPUS as u32).filter(|i| touched & (1 << i) != 0) {
            sums.add(gpu, 0);
        }
        for p in processes {
            sums.add(p.gpu, p.bytes);
        }
        sums
    }

    /// The `gpu_vram` cell: `GPU:BYTES` entries, into `out` (cleared first).
    pub fn write_cell(&self, out: &mut String) {
        out.clear();
        if self.read && self.present == 0 {
            out.push('-');
        }
        for gpu in self.gpus() {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "{gpu}:{}", self.bytes[gpu as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_round_trips_its_sums_per_gpu() {
        let processes = [
            ProcessVram {
                gpu: 0,
                pid: 10,
                bytes: 100,
            },
            ProcessVram {
                gpu: 1,
                pid: 11,
                bytes: 200,
            },
            ProcessVram {
                gpu: 1,
                pid: 12,
                bytes: 50,
            },
        ];
        let mut cell = String::new();
        // GPU 2 was touched earlier in the run and now lists nobody: 0.
        let sums = GpuVram::of(0b111, &processes);
        sums.write_cell(&mut cell);
        assert_eq!(cell, "0:100 1:250 2:0");
        assert_eq!(GpuVram::parse(&cell), Ok(sums));
        assert_eq!(sums.get(1), Some(250));
        assert_eq!(sums.get(2), Some(0));
        assert_eq!(sums.get(3), None);
        assert_eq!(sums.gpus().collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    #[test]
    fn a_bad_entry_is_named() {
        let err = GpuVram::parse("0:12 one:3").unwrap_err();
        assert!(err.contains("\"one:3\""), "{err}");
        assert!(!GpuVram::parse("").unwrap().was_read());
        let none_yet = GpuVram::of(0, &[]);
        let mut cell = String::new();
        none_yet.write_cell(&mut cell);
        assert_eq!(cell, "-");
        assert_eq!(GpuVram::parse(&cell), Ok(none_yet));
        assert_eq!(none_yet.get(0), None);
    }
}
