//! Release strategies: what a strategy is called, the environment its worker
//! starts with, what the worker does in-process (at start, and in the
//! `release` step), how it checks that it took effect, and why it works or not.
//!
//! This module only describes strategies; the worker carries them out and the
//! orchestrator applies the environment. Everything a user reads in
//! `memrel list --long` comes from the table here.

use std::fmt;

use crate::textutil::did_you_mean;

/// Which devices a strategy applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Cuda,
    Any,
}

/// Done once in the worker before anything is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAction {
    None,
    /// `mallopt(M_MMAP_THRESHOLD, bytes)`: freezes glibc's dynamic mmap threshold.
    MalloptMmapThreshold(i32),
}

/// Done by the worker in each `release` step, after the models were dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseAction {
    None,
    /// glibc `malloc_trim(0)`.
    MallocTrim,
    /// Synchronize the CUDA device (stream-ordered frees complete).
    CudaSync,
    /// Synchronize, then trim the device's default memory pool to 0.
    CudaPoolTrim,
    /// Copy every weight to the CPU before dropping (the folklore recipe).
    CudaToCpu,
    /// Drop the candle device itself (and every handle to it), then synchronize.
    CudaDeviceDrop,
    /// Drop the device, then release the CUDA primary context until inactive.
    CudaContextRelease,
}

#[derive(Debug, Clone, Copy)]
pub struct Strategy {
    pub name: &'static str,
    pub device: DeviceKind,
    /// One line for `memrel list`.
    pub summary: &'static str,
    /// Why it works or does not, for `memrel list --long` and the README.
    pub explanation: &'static str,
    /// Set on the worker's environment at spawn.
    pub env: &'static [(&'static str, &'static str)],
    pub start: StartAction,
    pub release: ReleaseAction,
    /// Needs glibc (Linux with the GNU C library); elsewhere it is refused.
    pub needs_glibc: bool,
    /// Freezes glibc's dynamic mmap threshold: big tensors stay mmapped, so a
    /// load in cycle ≥ 2 must still show most model bytes as mmapped.
    pub freezes_mmap_threshold: bool,
    /// Unsupported by the libraries involved; opt-in only.
    pub unsupported: bool,
}

/// Environment variables that change glibc's allocator. The orchestrator
/// removes them from every worker's environment before adding the strategy's,
/// so a knob set in the user's shell cannot leak into every run.
pub const ALLOCATOR_ENV_VARS: &[&str] = &[
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "MALLOC_ARENA_MAX",
    "MALLOC_ARENA_TEST",
    "GLIBC_TUNABLES",
];

pub const STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "drop",
        device: DeviceKind::Any,
        summary: "drop the model and do nothing else (the article's `del model; gc.collect()`)",
        explanation: "Freed tensors go back to glibc, not necessarily to the kernel. Tensors above the \
            mmap threshold are unmapped at once; the rest stay in the heap until its top is free. \
            After the first cycle glibc's dynamic threshold has risen to 32 MiB, so most tensors \
            come from the heap, and one small live chunk above them (freed tensor-name strings \
            parked in the tcache) stops the heap from shrinking. On CUDA, candle frees with \
            cuMemFreeAsync into the device's memory pool: the VRAM stays with the process until \
            something synchronizes, and the next load reuses it first. Measured (H100, bert-base, \
            415 MiB): 1094 MiB stay after the drop against a 678 MiB baseline (416 MiB retained); with the article's \
            three models deleted 1832 MiB stay (the article's PyTorch: 1702 MiB).",
        env: &[],
        start: StartAction::None,
        release: ReleaseAction::None,
        needs_glibc: false,
        freezes_mmap_threshold: false,
        unsupported: false,
    },
    Strategy {
        name: "malloc-trim",
        device: DeviceKind::Cpu,
        summary: "call glibc malloc_trim(0) after the drop (timed)",
        explanation: "malloc_trim(0) walks every arena and madvise(MADV_DONTNEED)s every whole free \
            page, also in the middle of the heap, so it returns memory even when a live chunk pins \
            the top. It costs a walk of the free lists each call.",
        env: &[],
        start: StartAction::None,
        release: ReleaseAction::MallocTrim,
        needs_glibc: true,
        freezes_mmap_threshold: false,
        unsupported: false,
    },
    Strategy {
        name: "trim-threshold-env",
        device: DeviceKind::Cpu,
        summary: "start the worker with MALLOC_TRIM_THRESHOLD_=-1",
        explanation: "-1 becomes SIZE_MAX, which disables top trimming altogether: it works not by \
            trimming harder but because setting any of the trim/top-pad/mmap knobs freezes glibc's \
            dynamic mmap threshold at 128 KiB, so every tensor stays an mmap of its own and goes \
            back to the kernel at free. Read once at process start: setting it inside a running \
            process does nothing.",
        env: &[("MALLOC_TRIM_THRESHOLD_", "-1")],
        start: StartAction::None,
        release: ReleaseAction::None,
        needs_glibc: true,
        freezes_mmap_threshold: true,
        unsupported: false,
    },
    Strategy {
        name: "mmap-threshold-env",
        device: DeviceKind::Cpu,
        summary: "start the worker with MALLOC_MMAP_THRESHOLD_=131072",
        explanation: "Pins the mmap threshold at 128 KiB (and so freezes it): every allocation above \
            it is its own mmap and is unmapped at free. The same mechanism as trim-threshold-env, \
            named for what it does. Costs speed: mmap/munmap and page faults on every large \
            temporary in the forward pass.",
        env: &[("MALLOC_MMAP_THRESHOLD_", "131072")],
        start: StartAction::None,
        release: ReleaseAction::None,
        needs_glibc: true,
        freezes_mmap_threshold: true,
        unsupported: false,
    },
    Strategy {
        name: "mallopt",
        device: DeviceKind::Cpu,
        summary: "call mallopt(M_MMAP_THRESHOLD, 131072) in the worker before loading",
        explanation: "The in-process form of mmap-threshold-env, for programs that cannot control \
            their environment: it must run before the first large free, which it does here at \
            worker start.",
        env: &[],
        start: StartAction::MalloptMmapThreshold(131_072),
        release: ReleaseAction::None,
        needs_glibc: true,
        freezes_mmap_threshold: true,
        unsupported: false,
    },
    Strategy {
        name: "tcache-off",
        device: DeviceKind::Cpu,
        summary: "start the worker with GLIBC_TUNABLES=glibc.malloc.tcache_count=0",
        explanation: "Turns off glibc's per-thread cache, so freed small chunks (tensor names) are \
            consolidated instead of staying live-looking above the freed tensors; the heap top can \
            then shrink. Small allocations lose their fast path.",
        env: &[("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0")],
        start: StartAction::None,
        release: ReleaseAction::None,
        needs_glibc: true,
        freezes_mmap_threshold: false,
        unsupported: false,
    },
    Strategy {
        name: "arena-max-1",
        device: DeviceKind::Cpu,
        summary: "start the worker with MALLOC_ARENA_MAX=1",
        explanation: "One arena for all threads: the common advice for memory growth in threaded \
            servers. It limits fragmentation across arenas but does nothing about a pinned heap top, \
            which is what keeps model memory here.",
        env: &[("MALLOC_ARENA_MAX", "1")],
        start: StartAction::None,
        release: ReleaseAction::None,
        needs_glibc: true,
        freezes_mmap_threshold: false,
        unsupported: false,
    },
    Strategy {
        name: "sync",
        device: DeviceKind::Cuda,
        summary: "drop, then synchronize the device",
        explanation: "The pool's release threshold is 0, so the frees queued on the stream return \
            their memory to the driver as soon as the stream is synchronized. Measured (H100, \
            bert-base): 1094 → 678 MiB, back to the baseline, in a synchronize of about 1 ms. 678 MiB is \
            as low as VRAM goes while the device lives: the bare device (context + cuBLAS + cuRAND, \
            the context floor) is 586 MiB and the loaded kernels and cuBLAS workspace add 92 MiB once \
            a model has run.",
        env: &[],
        start: StartAction::None,
        release: ReleaseAction::CudaSync,
        needs_glibc: false,
        freezes_mmap_threshold: false,
        unsupported: false,
    },
    Strategy {
        name: "cache-flush",
        device: DeviceKind::Cuda,
        summary: "drop, synchronize, then cuMemPoolTrimTo(default pool, 0)",
        explanation: "candle's equivalent of torch.cuda.empty_cache(): trims the default memory pool \
            to zero. After a synchronize there is nothing left to trim with a release threshold of \
            0 (measured: the pool's reserved bytes are the same before and after the trim, and the \
            process ends at the same 678 MiB baseline as `sync`); it matters where the threshold was \
            raised. The article's empty_cache() reached 254 MiB, its PyTorch context.",
        env: &[],
        start: StartAction::None,
        release: ReleaseAction::CudaPoolTrim,
        needs_glibc: false,
        freezes_mmap_threshold: false,
        unsupported: false,
    },
    Strategy {
        name: "to-cpu",
        device: DeviceKind::Cuda,
        summary: "copy the weights to the CPU before dropping them (folklore recipe), then synchronize",
        explanation: "The recipe `model.to(\"cpu\"); del model` from the PyTorch folklore: it costs a \
            device-to-host copy of every weight and RAM for them, and frees nothing that a plain \
            drop and a synchronize would not. Measured (H100, bert-base): 415 MiB copied in \
            0.35–0.45 s, RSS up by the model's size meanwhile, then the same 678 MiB as `sync`.",
        env: &[],
        start: StartAction::None,
        release: ReleaseAction::CudaToCpu,
        needs_glibc: false,
        freezes_mmap_threshold: false,
        unsupported: false,
    },
    Strategy {
        name: "device-drop",
        device: DeviceKind::Cuda,
        summary: "drop every candle handle to the device (a new device per cycle)",
        explanation: "Dropping candle's Device does not release the CUDA primary context: the CUDA \
            runtime behind cuBLAS and cuRAND holds references and never releases them, so the \
            context stays active. Measured (H100): 612 MiB stay (the context alone is 518 MiB), \
            against 678 MiB with the device kept. The next device opens in about 1 ms, but every \
            kernel module is loaded again: the first forward pass after it took 30–38 ms instead of 5–7.",
        env: &[],
        start: StartAction::None,
        release: ReleaseAction::CudaDeviceDrop,
        needs_glibc: false,
        freezes_mmap_threshold: false,
        unsupported: false,
    },
    Strategy {
        name: "context-release",
        device: DeviceKind::Cuda,
        summary: "UNSUPPORTED: drop the device, then release the primary context until inactive",
        explanation: "Calls cuDevicePrimaryCtxRelease until the primary context is inactive, so the \
            process holds no VRAM at all; memrel then creates a new device and checks a matmul. It \
            releases references other libraries own: opt-in only, never in production. Measured \
            (H100): the first time, three releases (61–71 ms) take the process from 612 to 0 MiB; \
            after that the runtime holds no reference any more and dropping the device alone \
            reaches 0. A new device takes 100–155 ms, every matmul check passed, and the first \
            forward pass after it took 33–63 ms instead of 5–7 (kernels reloaded).",
        env: &[],
        start: StartAction::None,
        release: ReleaseAction::CudaContextRelease,
        needs_glibc: false,
        freezes_mmap_threshold: false,
        unsupported: true,
    },
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StrategyError {
    #[error("unknown strategy {name:?}{suggestion}; see `memrel list --long`")]
    Unknown { name: String, suggestion: String },
}

/// Finds a strategy by name, with a "did you mean" on a typo.
pub fn lookup(name: &str) -> Result<&'static Strategy, StrategyError> {
    if let Some(s) = STRATEGIES.iter().find(|s| s.name == name) {
        return Ok(s);
    }
    let names: Vec<&str> = STRATEGIES.iter().map(|s| s.name).collect();
    let suggestion = match did_you_mean(name, &names) {
        Some(guess) => format!(" (did you mean {guess:?}?)"),
        None => format!(" (known: {})", names.join(", ")),
    };
    Err(StrategyError::Unknown {
        name: name.to_string(),
        suggestion,
    })
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
            DeviceKind::Any => "any",
        })
    }
}

impl Strategy {
    pub fn runs_on(&self, cuda: bool) -> bool {
        match self.device {
            DeviceKind::Any => true,
            DeviceKind::Cpu => !cuda,
            DeviceKind::Cuda => cuda,
        }
    }
}

/// True when this binary runs on glibc, where the allocator strategies mean something.
pub fn have_glibc() -> bool {
    cfg!(all(target_os = "linux", target_env = "gnu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = STRATEGIES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), STRATEGIES.len());
    }

    #[test]
    fn typo_gets_a_suggestion() {
        let err = lookup("maloc-trim").unwrap_err().to_string();
        assert!(err.contains("did you mean \"malloc-trim\""), "{err}");
    }
}
