//! The glibc family: a plain drop, and the knobs of glibc's own allocator
//! (`malloc_trim`, the `MALLOC_*_` variables, tunables, `mallopt`).

use super::{DeviceKind, ReleaseAction, StartAction, Strategy};

pub const GLIBC: &[Strategy] = &[
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
        ..Strategy::PLAIN
    },
    Strategy {
        name: "malloc-trim",
        device: DeviceKind::Cpu,
        summary: "call glibc malloc_trim(0) after the drop (timed)",
        explanation: "malloc_trim(0) walks every arena and madvise(MADV_DONTNEED)s every whole free \
            page, also in the middle of the heap, so it returns memory even when a live chunk pins \
            the top. It costs a walk of the free lists each call.",
        release: ReleaseAction::MallocTrim,
        needs_glibc: true,
        ..Strategy::PLAIN
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
        needs_glibc: true,
        freezes_mmap_threshold: true,
        ..Strategy::PLAIN
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
        needs_glibc: true,
        freezes_mmap_threshold: true,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "mallopt",
        device: DeviceKind::Cpu,
        summary: "call mallopt(M_MMAP_THRESHOLD, 131072) in the worker before loading",
        explanation: "The in-process form of mmap-threshold-env, for programs that cannot control \
            their environment: it must run before the first large free, which it does here at \
            worker start.",
        start: StartAction::MalloptMmapThreshold(131_072),
        needs_glibc: true,
        freezes_mmap_threshold: true,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "tcache-off",
        device: DeviceKind::Cpu,
        summary: "start the worker with GLIBC_TUNABLES=glibc.malloc.tcache_count=0",
        explanation: "Turns off glibc's per-thread cache, so freed small chunks (tensor names) are \
            consolidated instead of staying live-looking above the freed tensors; the heap top can \
            then shrink. Small allocations lose their fast path.",
        env: &[("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0")],
        needs_glibc: true,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "arena-max-1",
        device: DeviceKind::Cpu,
        summary: "start the worker with MALLOC_ARENA_MAX=1",
        explanation: "One arena for all threads: the common advice for memory growth in threaded \
            servers. It limits fragmentation across arenas but does nothing about a pinned heap top, \
            which is what keeps model memory here.",
        env: &[("MALLOC_ARENA_MAX", "1")],
        needs_glibc: true,
        ..Strategy::PLAIN
    },
];
