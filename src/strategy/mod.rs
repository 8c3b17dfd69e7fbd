//! Release strategies: what a strategy is called, the environment its worker
//! starts with, which allocator serves its `malloc`, what the worker does
//! in-process (at start, and in the `release` step), how it checks that it
//! took effect, and why it works or not.
//!
//! This module only describes strategies; the worker carries them out and the
//! orchestrator applies the environment. Everything a user reads in
//! `memrel list --long` comes from the tables here, one file per family:
//! `glibc` (drop and glibc's knobs), `cuda`, `allocators` (jemalloc,
//! tcmalloc, mimalloc preloaded), `respawn` (a new process per cycle),
//! `sleep` (offload to the host and back, or reload: what `sleep`/`wake`
//! steps do), `page_cache` (the weight files' cached pages), `program` (what only a measured program can do: PyTorch's
//! calls), `ort` (ONNX Runtime's arena settings) and `jax` (XLA's client
//! allocator), the last two for programs.
//!
//! A strategy applies to the candle worker and, where it has a meaning there,
//! to any program (`memrel exec`): its environment as it is, its in-process
//! actions as named steps ([`ProgramActions`]) that the `memrel` Python module
//! (or any program reading `MEMREL_STRATEGY`) carries out.
//!
//! A row may take a value after its name (`xla-mem-fraction=0.40`): it
//! declares a [`Param`] and `param` makes the strategy each name asks for.
//! A user defines one without code in a `[[strategy]]` table (`custom`:
//! environment variables and a preload), found by [`lookup`] after the rows.

mod allocators;
mod cuda;
pub mod custom;
mod glibc;
mod jax;
mod ort;
mod page_cache;
mod param;
mod preload;
mod program;
mod respawn;
mod setting;
mod sleep;
mod steps;

use std::fmt;

use crate::textutil::did_you_mean;
pub use page_cache::WeightFiles;
pub use param::{fraction, Param};
pub use preload::{
    clean_environment, find_library, inherited_allocator_variables, system_library_dirs,
    PreloadError, ALLOCATOR_PATH_ENV,
};
pub use steps::{program_step_call, At, ProgramStep, PROGRAM_STEPS};

/// Which devices a strategy applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Cuda,
    Any,
}

/// The allocator that serves the worker's `malloc`: glibc's own, or a
/// library memrel preloads into the worker (never into itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    Glibc,
    Jemalloc,
    Tcmalloc,
    Mimalloc,
}

impl Allocator {
    /// The name the worker reports and runs.json records.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::Glibc => "glibc",
            Allocator::Jemalloc => "jemalloc",
            Allocator::Tcmalloc => "tcmalloc",
            Allocator::Mimalloc => "mimalloc",
        }
    }

    /// The shared library to preload (`None`: glibc, nothing to preload).
    pub fn library(self) -> Option<&'static str> {
        match self {
            Allocator::Glibc => None,
            Allocator::Jemalloc => Some("libjemalloc.so.2"),
            Allocator::Tcmalloc => Some("libtcmalloc_minimal.so.4"),
            Allocator::Mimalloc => Some("libmimalloc.so.2"),
        }
    }

    /// The Debian (and Ubuntu) package that ships [`Allocator::library`].
    pub fn debian_package(self) -> Option<&'static str> {
        match self {
            Allocator::Glibc => None,
            Allocator::Jemalloc => Some("libjemalloc2"),
            Allocator::Tcmalloc => Some("libtcmalloc-minimal4"),
            Allocator::Mimalloc => Some("libmimalloc2.0"),
        }
    }
}

/// Done once in the worker before anything is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAction {
    None,
    /// `mallopt(M_MMAP_THRESHOLD, bytes)`: freezes glibc's dynamic mmap threshold.
    MalloptMmapThreshold(i32),
    /// Steps only a measured program carries out (see [`ProgramActions`]).
    ProgramOnly(&'static [&'static str]),
}

/// Done by the worker in each `release` step, after the models were dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseAction {
    None,
    /// glibc `malloc_trim(0)`.
    MallocTrim,
    /// The preloaded allocator's own "give free memory back" call: jemalloc
    /// `arena.<all>.purge`, tcmalloc `MallocExtension_ReleaseFreeMemory`,
    /// mimalloc `mi_collect(true)`.
    AllocatorRelease,
    /// End the worker process; a fresh one takes over for what follows.
    Respawn,
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
    /// Steps only a measured program carries out (PyTorch's calls; see [`ProgramActions`]).
    ProgramOnly(&'static [&'static str]),
}

/// How `sleep` and `wake` steps move a model's weights (the sleep family);
/// `None` for strategies that never sleep a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SleepMode {
    None,
    /// Weights copied to pageable host memory and back (`model.to("cpu")`).
    Offload,
    /// Weights copied into page-locked host buffers and back.
    OffloadPinned,
    /// The model dropped at sleep and loaded again from its files at wake.
    Reload,
}

impl SleepMode {
    pub fn name(self) -> &'static str {
        match self {
            SleepMode::None => "none",
            SleepMode::Offload => "offload",
            SleepMode::OffloadPinned => "offload-pinned",
            SleepMode::Reload => "reload",
        }
    }
}

/// A strategy's in-process steps for a measured program, by name, in order:
/// `start` at `import memrel`, `release` in each `memrel.release()`. The
/// names are [`PROGRAM_STEPS`]'s, the protocol between memrel and the
/// program (docs/guide.md, "Phase markers").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProgramActions {
    pub start: Vec<String>,
    pub release: Vec<String>,
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
    /// What `sleep` and `wake` steps do under this strategy.
    pub sleep: SleepMode,
    /// The allocator that must serve the worker's `malloc` (the worker checks).
    pub allocator: Allocator,
    /// Settings the worker reads back from the allocator, with the value the
    /// strategy sets: a typo in a variable shows up as a failed check.
    pub expect: &'static [(&'static str, &'static str)],
    /// What the worker does with the weight files' page cache (the
    /// page-cache family); candle's worker only.
    pub weights: WeightFiles,
    /// The value the strategy takes after its name (`NAME=VALUE`), if any;
    /// the row writes [`Param::VALUE`] where it goes.
    pub param: Option<Param>,
}

impl Strategy {
    /// A strategy that does nothing: every table entry names what it changes
    /// and takes the rest from here (`..Strategy::PLAIN`).
    pub const PLAIN: Strategy = Strategy {
        name: "",
        device: DeviceKind::Any,
        summary: "",
        explanation: "",
        env: &[],
        start: StartAction::None,
        release: ReleaseAction::None,
        needs_glibc: false,
        freezes_mmap_threshold: false,
        sleep: SleepMode::None,
        allocator: Allocator::Glibc,
        expect: &[],
        weights: WeightFiles::AsScenario,
        param: None,
    };

    /// The name without its value: the row's (`xla-mem-fraction` for
    /// `xla-mem-fraction=0.40`).
    pub fn family(&self) -> &'static str {
        family(self.name)
    }
}

/// A strategy name without its value (`xla-mem-fraction=0.40` →
/// `xla-mem-fraction`); a name without `=` as it is.
pub fn family(name: &str) -> &str {
    name.split_once('=').map_or(name, |(row, _)| row)
}

/// Every strategy, in the order of `memrel list`: a row that takes a value
/// with its default, under its bare name.
pub fn all() -> impl Iterator<Item = &'static Strategy> {
    rows().map(|row| param::instance(row, None).unwrap_or(row))
}

/// Every table row as written (a parameterized one with [`Param::VALUE`] in
/// its strings).
fn rows() -> impl Iterator<Item = &'static Strategy> {
    glibc::GLIBC
        .iter()
        .chain(cuda::CUDA)
        .chain(allocators::ALLOCATORS)
        .chain(respawn::RESPAWN)
        .chain(sleep::SLEEP)
        .chain(page_cache::PAGE_CACHE)
        .chain(program::PROGRAM)
        .chain(ort::ORT)
        .chain(jax::JAX)
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StrategyError {
    #[error(
        "unknown strategy {name:?}{suggestion}; see `{}`",
        crate::hint::Hint::ListLong
    )]
    Unknown { name: String, suggestion: String },
    #[error("strategy {name:?} takes no value (\"={value}\"): name it alone, as {name:?}")]
    TakesNoValue { name: &'static str, value: String },
    #[error("strategy {name:?}: {why}; {fix}")]
    BadValue {
        name: String,
        why: String,
        fix: String,
    },
}

/// Finds a strategy by name (`NAME`, or `NAME=VALUE` for one that takes a
/// value), with a "did you mean" on a typo and the fix for a bad value.
pub fn lookup(name: &str) -> Result<&'static Strategy, StrategyError> {
    let (row_name, value) = match name.split_once('=') {
        Some((row, value)) => (row, Some(value)),
        None => (name, None),
    };
    if let Some(row) = rows().find(|s| s.name == row_name) {
        return param::instance(row, value);
    }
    if let Some(defined) = custom::defined(name) {
        return Ok(defined);
    }
    let name = row_name;
    let names: Vec<&str> = rows().map(|s| s.name).collect();
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

impl ProgramActions {
    /// Every step name a program may be asked to take in `memrel.release()`,
    /// from [`PROGRAM_STEPS`]: the Python module's `RELEASE_ACTIONS` must
    /// equal it (a test in `worker::command` holds the two together).
    pub fn release_steps() -> Vec<&'static str> {
        steps::names(At::Release)
    }

    /// Every step name a program may be asked to take at `import memrel`
    /// (`mallopt_mmap_threshold` takes `=BYTES`): the module's `START_ACTIONS`.
    pub fn start_steps() -> Vec<&'static str> {
        steps::names(At::Start)
    }
}

impl Strategy {
    /// Whether the candle worker can carry this strategy out (the program-only
    /// ones call PyTorch).
    pub fn for_candle(&self) -> bool {
        !matches!(self.release, ReleaseAction::ProgramOnly(_))
            && !matches!(self.start, StartAction::ProgramOnly(_))
    }

    /// What a measured program does for this strategy, or why a program
    /// cannot carry it out. Environment and preloaded allocator apply as they
    /// are; in-process actions become named steps.
    pub fn for_programs(&self) -> Result<ProgramActions, String> {
        let names = |steps: &[&str]| steps.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        if self.weights != WeightFiles::AsScenario {
            return Err(format!(
                "strategy {:?} changes how memrel's own worker loads the weight files; a program \
                 loads its own (call os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED) on them there)",
                self.name
            ));
        }
        let start = match self.start {
            StartAction::None => Vec::new(),
            StartAction::MalloptMmapThreshold(bytes) => {
                vec![format!("mallopt_mmap_threshold={bytes}")]
            }
            StartAction::ProgramOnly(steps) => names(steps),
        };
        let release = match self.release {
            ReleaseAction::None => Vec::new(),
            ReleaseAction::MallocTrim => names(&["gc", "malloc_trim"]),
            ReleaseAction::AllocatorRelease => names(&["allocator_release"]),
            ReleaseAction::CudaSync => names(&["cuda_synchronize"]),
            ReleaseAction::CudaPoolTrim => names(&["cuda_synchronize", "empty_cache"]),
            ReleaseAction::CudaToCpu => names(&["to_cpu", "cuda_synchronize"]),
            ReleaseAction::ProgramOnly(steps) => names(steps),
            ReleaseAction::Respawn => {
                return Err(format!(
                    "strategy {:?} restarts memrel's own worker; memrel cannot restart a program \
                     in the middle of its run (run the program once per model instead)",
                    self.name
                ))
            }
            ReleaseAction::CudaDeviceDrop | ReleaseAction::CudaContextRelease => {
                return Err(format!(
                    "strategy {:?} drops candle's CUDA device and has no PyTorch counterpart; for a \
                     program use empty-cache, ipc-collect or device-reset ({})",
                    self.name,
                    crate::hint::Hint::ListLong
                ))
            }
        };
        Ok(ProgramActions { start, release })
    }

    /// Whether the strategy reaches a program whole from outside: it is set
    /// in the environment the program starts with (its variables, its
    /// preloaded allocator), and its steps only read that setting back
    /// (`xla_env`) or collect garbage (`gc`, what a release begins with).
    /// A program that never imports memrel still runs under it (the parent
    /// reads the environment and the maps back); a strategy with any other
    /// step needs the module, in which those steps run.
    pub fn works_from_outside(&self) -> bool {
        let Ok(actions) = self.for_programs() else {
            return false;
        };
        let from_environment = !self.env.is_empty() || self.allocator != Allocator::Glibc;
        let only_checks = actions
            .start
            .iter()
            .all(|step| steps::find(step).is_some_and(|s| s.reads_back));
        from_environment && only_checks && actions.release.iter().all(|step| step == "gc")
    }

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

    /// Issue 47: an environment setting reaches a program that never imports
    /// memrel; a strategy with a step that must run inside it does not.
    #[test]
    fn only_environment_settings_work_from_outside() {
        for name in [
            "xla-no-prealloc",
            "xla-platform-allocator",
            "xla-mem-fraction=0.30",
            "trim-threshold-env",
            "arena-max-1",
            "tcache-off",
            "jemalloc",
        ] {
            assert!(lookup(name).unwrap().works_from_outside(), "{name}");
        }
        for name in [
            "drop",
            "gc-collect",
            "malloc-trim",
            "mallopt",
            "trim-threshold-inside",
            "jemalloc-purge",
            "ort-arena",
            "jax-clear",
            "empty-cache",
            "respawn",
        ] {
            assert!(!lookup(name).unwrap().works_from_outside(), "{name}");
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = all().map(|s| s.name).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }

    #[test]
    fn typo_gets_a_suggestion() {
        let err = lookup("maloc-trim").unwrap_err().to_string();
        assert!(err.contains("did you mean \"malloc-trim\""), "{err}");
    }
}
