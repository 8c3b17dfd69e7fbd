//! The allocators servers deploy instead of glibc's, preloaded into the worker
//! with `LD_PRELOAD` (the real libraries from Debian's packages): each with
//! its defaults, its release-tuned settings, and a forced release through its
//! own call in the `release` step. The worker proves which allocator served
//! it and reads every setting back (see `worker::allocator`).

use super::{Allocator, DeviceKind, ReleaseAction, StartAction, Strategy};

/// The fields every preloaded-allocator strategy shares.
const fn preloaded(
    name: &'static str,
    allocator: Allocator,
    summary: &'static str,
    explanation: &'static str,
    env: &'static [(&'static str, &'static str)],
    expect: &'static [(&'static str, &'static str)],
    release: ReleaseAction,
) -> Strategy {
    Strategy {
        name,
        device: DeviceKind::Any,
        summary,
        explanation,
        env,
        start: StartAction::None,
        release,
        needs_glibc: false,
        freezes_mmap_threshold: false,
        unsupported: false,
        allocator,
        expect,
    }
}

pub const ALLOCATORS: &[Strategy] = &[
    preloaded(
        "jemalloc",
        Allocator::Jemalloc,
        "preload jemalloc with its defaults (Triton's advice for growth across load/unload)",
        "jemalloc keeps freed pages as dirty and returns them on a decay curve \
         (dirty_decay_ms 10 s, then muzzy 10 s): memory comes back over seconds, and without \
         its background thread only while the program calls the allocator, so an idle \
         server after an unload keeps what decay has not yet reached.",
        &[],
        &[],
        ReleaseAction::None,
    ),
    preloaded(
        "jemalloc-decay0",
        Allocator::Jemalloc,
        "preload jemalloc with MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0",
        "Decay 0 makes jemalloc purge freed pages at once instead of over seconds; \
         abort_conf:true makes a misspelt setting abort the worker instead of being ignored, \
         and the worker reads opt.dirty_decay_ms and opt.muzzy_decay_ms back. Every free of \
         a large extent becomes an madvise, which costs some speed.",
        &[(
            "MALLOC_CONF",
            "abort_conf:true,dirty_decay_ms:0,muzzy_decay_ms:0",
        )],
        &[
            ("opt.abort_conf", "true"),
            ("opt.dirty_decay_ms", "0"),
            ("opt.muzzy_decay_ms", "0"),
        ],
        ReleaseAction::None,
    ),
    preloaded(
        "jemalloc-bg-thread",
        Allocator::Jemalloc,
        "preload jemalloc with MALLOC_CONF=background_thread:true",
        "A background thread runs jemalloc's decay on a timer, so an idle process still \
         returns memory, but only at the pace of the decay curve (10 s): with a short settle \
         it looks like the defaults.",
        &[("MALLOC_CONF", "abort_conf:true,background_thread:true")],
        &[
            ("opt.abort_conf", "true"),
            ("opt.background_thread", "true"),
        ],
        ReleaseAction::None,
    ),
    preloaded(
        "jemalloc-purge",
        Allocator::Jemalloc,
        "preload jemalloc; mallctl(\"arena.4096.purge\") after the drop (timed)",
        "Purges every arena's dirty and muzzy pages now (4096 = MALLCTL_ARENAS_ALL), the \
         jemalloc counterpart of malloc_trim(0): the decay is skipped, but the program has \
         to call it.",
        &[],
        &[],
        ReleaseAction::AllocatorRelease,
    ),
    preloaded(
        "tcmalloc",
        Allocator::Tcmalloc,
        "preload tcmalloc (gperftools, minimal) with its defaults",
        "tcmalloc keeps freed spans in its page heap and returns them to the kernel slowly, \
         a few pages for every page freed (release rate 1) and only as the program frees \
         more: after a model's single large drop most of it stays.",
        &[],
        &[],
        ReleaseAction::None,
    ),
    preloaded(
        "tcmalloc-release-rate",
        Allocator::Tcmalloc,
        "preload tcmalloc with TCMALLOC_RELEASE_RATE=10",
        "A higher release rate makes tcmalloc return free spans faster as the program \
         deallocates, but release still happens only on frees: the rate does not help a \
         process that freed everything at once and went quiet. The worker reads the rate \
         back from tcmalloc.",
        &[("TCMALLOC_RELEASE_RATE", "10")],
        &[("release_rate", "10")],
        ReleaseAction::None,
    ),
    preloaded(
        "tcmalloc-aggressive",
        Allocator::Tcmalloc,
        "preload tcmalloc with TCMALLOC_AGGRESSIVE_DECOMMIT=true",
        "With aggressive decommit tcmalloc returns every span it frees to the kernel at \
         once instead of keeping it for reuse: memory comes back at the drop, at the price \
         of page faults when the next model loads. Read back as the property \
         tcmalloc.aggressive_memory_decommit.",
        &[("TCMALLOC_AGGRESSIVE_DECOMMIT", "true")],
        &[("aggressive_memory_decommit", "1")],
        ReleaseAction::None,
    ),
    preloaded(
        "tcmalloc-release",
        Allocator::Tcmalloc,
        "preload tcmalloc; MallocExtension_ReleaseFreeMemory() after the drop (timed)",
        "Returns every free page of tcmalloc's page heap to the kernel now, the tcmalloc \
         counterpart of malloc_trim(0). Memory in the per-thread and central caches (small \
         objects) stays.",
        &[],
        &[],
        ReleaseAction::AllocatorRelease,
    ),
    preloaded(
        "mimalloc",
        Allocator::Mimalloc,
        "preload mimalloc with its defaults (what text-embeddings-inference switched to)",
        "mimalloc frees into per-thread pages and segments and purges unused memory after a \
         delay (25 ms in 2.0, 10 ms in 2.1), but only when the heap that owns it is touched \
         again: segments whose owner went quiet stay committed.",
        &[],
        &[],
        ReleaseAction::None,
    ),
    preloaded(
        "mimalloc-purge0",
        Allocator::Mimalloc,
        "preload mimalloc with purge delay 0 (MIMALLOC_PURGE_DELAY / MIMALLOC_DECOMMIT_DELAY)",
        "Purge delay 0 makes mimalloc decommit free memory as soon as it is freed. The \
         option is called decommit_delay before mimalloc 2.1 (Debian 12 ships 2.0.9, where \
         MIMALLOC_PURGE_DELAY alone is silently ignored), so both names are set and the \
         worker reads option 15 back.",
        &[
            ("MIMALLOC_PURGE_DELAY", "0"),
            ("MIMALLOC_DECOMMIT_DELAY", "0"),
        ],
        &[("purge_delay", "0")],
        ReleaseAction::None,
    ),
    preloaded(
        "mimalloc-collect",
        Allocator::Mimalloc,
        "preload mimalloc; mi_collect(true) after the drop (timed)",
        "Forces mimalloc to collect and purge the calling thread's heap and abandoned \
         segments now. Memory owned by other threads' heaps (candle's worker threads) is not \
         reached by a collect on the main thread.",
        &[],
        &[],
        ReleaseAction::AllocatorRelease,
    ),
];
