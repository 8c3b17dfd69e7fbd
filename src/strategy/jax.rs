//! JAX's (XLA's) memory knobs, for programs that hold models as JAX arrays:
//! on a GPU the XLA client preallocates 75 % of the card at its first use and
//! keeps its pool for the life of the process. Three are environment
//! variables the client reads once, when it starts (so they reach the process
//! as the glibc ones do, in the environment at spawn); one is in-process
//! (`jax-clear`: delete every live array, clear JAX's caches). The `memrel`
//! Python module's `xla_env=VARIABLE:VALUE` start step checks that the
//! process started with the variable and reports, at the end of the run, the
//! variables the process really started with and, where a GPU client is in
//! use, what its allocator reports (`memory_stats()`: the pool's limit and
//! what it reserved); the candle worker refuses these strategies. That step
//! only reads the variable back, so the three are environment settings a
//! program that never imports memrel still runs under
//! ([`Strategy::works_from_outside`]).
//! `xla-mem-fraction` takes its fraction after its name
//! (`xla-mem-fraction=0.40`, a [`Param`]); bare, it means 0.25.

use super::{fraction, Param, ReleaseAction, StartAction, Strategy};

/// The fraction of GPU memory bare `xla-mem-fraction` lets XLA take (XLA's
/// own default is 0.75); `xla-mem-fraction=FRACTION` chooses another.
pub const MEM_FRACTION: &str = "0.25";

pub const JAX: &[Strategy] = &[
    Strategy {
        name: "xla-no-prealloc",
        summary: "programs: JAX with XLA_PYTHON_CLIENT_PREALLOCATE=false (no 75 % preallocation on the GPU)",
        explanation: "By default the XLA GPU client reserves 75 % of the card when JAX first touches \
            it, whatever the program needs. With preallocation off it grows its pool on demand \
            (the BFC allocator still keeps what it grew until the process ends). Read once, at \
            client start: it must be in the environment. No effect on a CPU client.",
        env: &[("XLA_PYTHON_CLIENT_PREALLOCATE", "false")],
        start: StartAction::ProgramOnly(&["xla_env=XLA_PYTHON_CLIENT_PREALLOCATE:false"]),
        release: ReleaseAction::ProgramOnly(&["gc"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "xla-platform-allocator",
        summary: "programs: JAX with XLA_PYTHON_CLIENT_ALLOCATOR=platform (cudaMalloc/cudaFree per array)",
        explanation: "XLA allocates each buffer with the platform's own allocator and frees it when \
            the array goes, so device memory follows the live arrays; every allocation pays the \
            driver's cost (XLA's documentation calls it slow, for debugging). Read once, at client \
            start. No effect on a CPU client.",
        env: &[("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")],
        start: StartAction::ProgramOnly(&["xla_env=XLA_PYTHON_CLIENT_ALLOCATOR:platform"]),
        release: ReleaseAction::ProgramOnly(&["gc"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "xla-mem-fraction",
        summary: "programs: JAX with XLA_PYTHON_CLIENT_MEM_FRACTION={value} (preallocate that fraction of the GPU, not 75 %; =FRACTION chooses it)",
        explanation: "Preallocation stays, at the fraction given instead of 0.75; a program that \
            needs more than that fails with an out-of-memory error rather than growing. The \
            fraction is part of the name: xla-mem-fraction=0.40 sets 0.40 (above 0, at most 1), \
            xla-mem-fraction alone sets 0.25. Read once, at client start. No effect on a CPU \
            client.",
        env: &[("XLA_PYTHON_CLIENT_MEM_FRACTION", Param::VALUE)],
        start: StartAction::ProgramOnly(&["xla_env=XLA_PYTHON_CLIENT_MEM_FRACTION:{value}"]),
        release: ReleaseAction::ProgramOnly(&["gc"]),
        param: Some(Param {
            name: "FRACTION",
            about: "the fraction of the GPU's memory XLA preallocates, above 0 and at most 1",
            default: MEM_FRACTION,
            example: "0.40",
            check: fraction,
        }),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "jax-clear",
        summary: "programs: gc.collect(), then delete every live JAX array and jax.clear_caches()",
        explanation: "What stays after del in a JAX program: arrays still referenced elsewhere \
            (a closure, a cache, a traced constant) and the compiled executables with their \
            constants. jax.live_arrays() lists every array the client holds; deleting each frees \
            its buffer at once (a later use of it raises), and jax.clear_caches() drops the \
            compilation caches. The client's pool keeps what it reserved.",
        release: ReleaseAction::ProgramOnly(&["gc", "jax_clear"]),
        ..Strategy::PLAIN
    },
];
