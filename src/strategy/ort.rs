//! ONNX Runtime's CPU arena knobs, for programs that serve ONNX models: the
//! arena keeps what the largest request needed and gives nothing back unless
//! told. A program carries each out through the `memrel` Python module
//! (`memrel.ort_session()` makes the session with the strategy's options,
//! `memrel.ort_run_options()` gives each request's run options), which reads
//! every setting back from onnxruntime and reports it as a check; the candle
//! worker refuses them.

use super::{ReleaseAction, StartAction, Strategy};

pub const ORT: &[Strategy] = &[
    Strategy {
        name: "ort-arena",
        summary: "programs: ONNX Runtime's default CPU arena (enable_cpu_mem_arena=True, next power of two)",
        explanation: "The default: each session's CPU allocator is an arena that grows by the next \
            power of two when a request needs more and keeps every chunk until the session is \
            deleted, so after a large batch the process holds the largest request's activations. \
            The baseline the other ort- strategies are measured against.",
        start: StartAction::ProgramOnly(&["ort_arena"]),
        release: ReleaseAction::ProgramOnly(&["gc"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "ort-no-arena",
        summary: "programs: ONNX Runtime without the CPU arena (SessionOptions.enable_cpu_mem_arena = False)",
        explanation: "Every tensor is malloc'ed and freed as the graph runs, so what a request used \
            goes back to the C allocator after it (and to the kernel as glibc allows); each request \
            pays for its own allocations.",
        start: StartAction::ProgramOnly(&["ort_no_arena"]),
        release: ReleaseAction::ProgramOnly(&["gc"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "ort-shrink",
        summary: "programs: ONNX Runtime's arena, shrunk after each request (run option memory.enable_memory_arena_shrinkage = cpu:0)",
        explanation: "The arena stays, and at the end of every run() given this run option it frees \
            the chunks no tensor uses any more: memory follows the last request, not the largest, \
            and each request allocates its chunks again.",
        start: StartAction::ProgramOnly(&["ort_shrink"]),
        release: ReleaseAction::ProgramOnly(&["gc"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "ort-same-as-requested",
        summary: "programs: ONNX Runtime's arena growing by what is asked (arena_extend_strategy kSameAsRequested)",
        explanation: "A shared CPU arena (create_and_register_allocator with arena_extend_strategy \
            = 1, session.use_env_allocators = 1) that grows by exactly the chunk a request needs \
            instead of doubling: less held past the largest request, still nothing given back \
            before the allocator goes. The allocator belongs to the process, not the session: \
            deleting the session keeps it.",
        start: StartAction::ProgramOnly(&["ort_same_as_requested"]),
        release: ReleaseAction::ProgramOnly(&["gc"]),
        ..Strategy::PLAIN
    },
];
