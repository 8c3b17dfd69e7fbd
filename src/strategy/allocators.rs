//! The allocators servers deploy instead of glibc's, preloaded into the worker
//! with `LD_PRELOAD` (the real libraries from Debian's packages): each with
//! its defaults, its release-tuned settings, and a forced release through its
//! own call in the `release` step. The worker proves which allocator served
//! it and reads every setting back (see `worker::allocator`).

use super::{Allocator, ReleaseAction, Strategy};

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
        summary,
        explanation,
        env,
        release,
        allocator,
        expect,
        ..Strategy::PLAIN
    }
}

pub const ALLOCATORS: &[Strategy] = &[
    preloaded(
        "jemalloc",
        Allocator::Jemalloc,
        "preload jemalloc with its defaults (Triton's advice for growth across load/unload)",
        "jemalloc keeps freed pages as dirty and returns them on a 10 s decay curve \
         (dirty_decay_ms 10000; muzzy decay is 0 in 5.3), and without its background thread \
         only when the arena that holds them is used again. Measured (2-core VM, cpu-all, 3 \
         processes x 5 cycles): 55 MiB stay above the baseline in every cycle (16-core host: \
         75 MiB); after 12 s idle still 50 MiB, and 12 s of small allocations on the main \
         thread did not bring them back either (50 MiB): they sit in the arenas of candle's \
         worker threads, which sleep.",
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
         and the worker reads opt.dirty_decay_ms and opt.muzzy_decay_ms back. Measured (VM, \
         cpu-all): 5.1 MiB retained, no cycle retaining; every free of a large extent becomes \
         an madvise: the forward pass took 252 ms against 213 ms with the defaults (+18 %).",
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
         returns memory, but at the pace of the 10 s decay curve. Measured (VM): 53 MiB \
         retained after cpu-all's 0.3 s settle (every cycle), 6.0 MiB after 12 s idle \
         (cpu-idle-release: the curve in release.png steps down between 2 and 6 s after the \
         unload).",
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
         to call it. Measured (VM, cpu-all): 5.1 MiB retained, no cycle retaining; the purge \
         took 5.0 ms.",
        &[],
        &[],
        ReleaseAction::AllocatorRelease,
    ),
    preloaded(
        "tcmalloc",
        Allocator::Tcmalloc,
        "preload tcmalloc (gperftools, minimal) with its defaults",
        "tcmalloc keeps freed spans in its page heap and returns them to the kernel only \
         gradually as the program goes on freeing (release rate 1): after a model's one large \
         drop it all stays. Measured (VM, cpu-all): 427 MiB retained in every cycle, the whole \
         model, still there after 12 s idle or busy; the next load reuses it (60 ms against \
         185 ms for glibc's drop). article-cpu: 1139 MiB, all three models.",
        &[],
        &[],
        ReleaseAction::None,
    ),
    preloaded(
        "tcmalloc-release-rate",
        Allocator::Tcmalloc,
        "preload tcmalloc with TCMALLOC_RELEASE_RATE=10",
        "A higher release rate makes tcmalloc return free spans faster as the program \
         deallocates, but release still happens only on frees: it does not help a process \
         that freed everything at once and went quiet. The worker reads the rate back from \
         tcmalloc. Measured (VM, cpu-all): 422 MiB retained in every cycle, as the defaults.",
        &[("TCMALLOC_RELEASE_RATE", "10")],
        &[("release_rate", "10")],
        ReleaseAction::None,
    ),
    preloaded(
        "tcmalloc-aggressive",
        Allocator::Tcmalloc,
        "preload tcmalloc with TCMALLOC_AGGRESSIVE_DECOMMIT=true",
        "With aggressive decommit tcmalloc returns free spans to the kernel at once instead \
         of keeping them for reuse. Read back as the property \
         tcmalloc.aggressive_memory_decommit. Measured (VM, cpu-all): 5.2 MiB retained, no \
         cycle retaining; the next load faults its pages in again (194 ms against 60 ms with \
         the defaults) and the forward pass took 237 ms against 203 ms (+17 %).",
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
         objects) stays. Measured (VM, cpu-all): 5.3 MiB retained, no cycle retaining; the \
         call took 34 ms.",
        &[],
        &[],
        ReleaseAction::AllocatorRelease,
    ),
    preloaded(
        "mimalloc",
        Allocator::Mimalloc,
        "preload mimalloc with its defaults (what text-embeddings-inference switched to)",
        "mimalloc frees into per-thread pages and segments and purges unused memory after a \
         delay (decommit_delay 25 ms in Debian 12's 2.0.9, as read back), but only when the \
         heap that owns it runs again. Measured (VM, cpu-all): 320 MiB retained in every \
         cycle, 317-318 MiB after 12 s idle or busy; the next load reuses it (118 ms against \
         185 ms for glibc's drop). article-cpu: 732 MiB.",
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
         MIMALLOC_PURGE_DELAY alone is silently ignored: MIMALLOC_VERBOSE=1 shows \
         decommit_delay still at 25), so both names are set and the worker reads option 15 \
         back. Measured (VM, cpu-all): 5.2 MiB retained, no cycle retaining; the forward pass \
         took 241 ms against 194 ms with the defaults (+24 %).",
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
         segments now (18.6 ms). Measured (VM): 97 MiB stay in every cycle of cpu-all, most \
         likely the forward pass's memory freed into the heaps of candle's worker threads, \
         which a collect on the main thread does not reach; on article-cpu, whose forward \
         pass is 1x16 tokens, it returned to 5.0 MiB.",
        &[],
        &[],
        ReleaseAction::AllocatorRelease,
    ),
];
