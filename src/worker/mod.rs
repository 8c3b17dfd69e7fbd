//! The worker plug: what a run's process is. memrel's own worker process
//! (`memrel worker --spec JSON`) is the candle worker (`candle`) or, for a
//! scenario of fake models, the fake worker (`fake`: exact bytes, for tests
//! and calibration; on CUDA through the driver library, `cuda_driver`); the command worker (`command`) is any program. The
//! orchestrator starts a [`Plug`] and never asks which one it is.
//!
//! memrel's workers apply the strategy's in-process knobs, run the steps,
//! and report every phase edge on the private event channel (the descriptor
//! the parent names in `MEMREL_EVENT_FD`; see `protocol` and `emitter`),
//! never on stdout, where the libraries they load print.
//!
//! It never samples itself over time and never sees the parent's samples; the
//! only memory it reads is its own at phase edges (no sampling lag there),
//! with the allocator's own view of it (`allocator`: which allocator really
//! serves `malloc`, checked before anything is measured).
//!
//! Under `respawn` a worker ends at the release step with a handover message;
//! the parent starts the next process, which resumes there (`WorkerSpec::resume`).
//!
//! Test hooks (`MEMREL_WORKER_STDOUT_NOISE`, `MEMREL_WORKER_HANG_AFTER`) live
//! in `hooks`: inert unless their variable is set, for memrel's own tests.

mod allocator;
mod candle;
pub mod command;
pub mod cuda_driver;
mod device;
mod emitter;
mod fake;
mod fake_device;
mod glibc;
mod hooks;
mod selfmem;
mod sleep;
pub mod spec;
mod steps;

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::protocol::{Message, Resume, WorkerError};
use crate::strategy::Strategy;
use emitter::Emitter;
pub use spec::WorkerSpec;

/// Exit code of a worker that reported an error.
pub const EXIT_WORKER_ERROR: i32 = 3;

/// Entry point of `memrel worker --spec JSON`.
pub fn main(spec_json: &str) -> i32 {
    let mut out = match Emitter::from_env() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("memrel worker: error: {e:#}");
            return EXIT_WORKER_ERROR;
        }
    };
    let result = serde_json::from_str::<WorkerSpec>(spec_json)
        .context("bad worker spec (memrel worker is internal: use memrel run)")
        .and_then(|spec| match spec.fakes.is_empty() {
            true => candle::run(&spec, &mut out),
            false => fake::run(&spec, &mut out),
        });
    match result {
        Ok(()) => 0,
        Err(e) => {
            out.send(Message::Error(WorkerError {
                message: format!("{e:#}"),
            }));
            EXIT_WORKER_ERROR
        }
    }
}

/// What the parent takes on for a run's process (see [`Plug::duties`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParentDuties {
    /// Number cycles, and read memory for phase lines that lack them.
    pub complete_edges: bool,
    /// Read VRAM (NVML) for phase lines that lack it: a CUDA device (a
    /// process NVML does not list there holds 0 bytes on it).
    pub vram_at_edges: bool,
    /// Check that the strategy's environment, allocator and steps reached it.
    pub check_strategy: bool,
    /// It has completed only if it said `done` (else: if it exited 0).
    pub require_done: bool,
    /// Sample its whole process tree (PSS), not only it.
    pub sample_tree: bool,
}

/// What a run's process is, as the orchestrator starts it.
#[derive(Debug, Clone)]
pub enum Plug {
    /// memrel's own worker (candle, or fake for fake models), this binary.
    Memrel(WorkerSpec),
    /// A program that marks its own phases.
    Command(command::CommandSpec),
}

impl Plug {
    /// The process to start, without the strategy's environment (the
    /// orchestrator applies that to every plug alike).
    pub fn command(&self, exe: &Path, strategy: &Strategy) -> Result<Command, String> {
        match self {
            Plug::Memrel(spec) => {
                let spec = WorkerSpec {
                    strategy: strategy.name.to_string(),
                    ..spec.clone()
                };
                let json = serde_json::to_string(&spec)
                    .map_err(|e| format!("cannot encode the worker spec: {e}"))?;
                let mut command = Command::new(exe);
                command.arg("worker").arg("--spec").arg(json);
                Ok(command)
            }
            Plug::Command(spec) => spec.command(strategy),
        }
    }

    /// What the process gets of memrel's stdin and output: nothing for
    /// memrel's workers (stdin /dev/null, output captured).
    pub fn io(&self) -> command::ProgramIo {
        match self {
            Plug::Memrel(_) => command::ProgramIo::default(),
            Plug::Command(spec) => spec.io,
        }
    }

    /// What the parent does for this process because it does not do it
    /// itself: memrel's workers number, read and check themselves and end
    /// with `done`; a program may do none of it.
    pub fn duties(&self) -> ParentDuties {
        match self {
            // A worker that opens its device late (the fake worker's lazy
            // context) reads no VRAM at its first edges: the parent does.
            Plug::Memrel(spec) => ParentDuties {
                require_done: true,
                vram_at_edges: spec.device.is_cuda(),
                ..ParentDuties::default()
            },
            Plug::Command(spec) => ParentDuties {
                complete_edges: true,
                vram_at_edges: spec.device.is_cuda(),
                check_strategy: true,
                require_done: false,
                sample_tree: spec.tree,
            },
        }
    }

    /// Why the process could not be started, and what to check.
    pub fn start_error(&self, exe: &Path, error: &std::io::Error) -> String {
        match self {
            Plug::Command(p) => format!(
                "cannot start the program {:?} (in {}): {error}: check the command, and that the program is on PATH",
                p.argv.join(" "),
                p.cwd.display()
            ),
            Plug::Memrel(_) => format!("cannot start worker {}: {error}", exe.display()),
        }
    }

    /// The device its processes run on.
    pub fn device(&self) -> Option<crate::scenario::DeviceSpec> {
        match self {
            Plug::Memrel(spec) => Some(spec.device),
            Plug::Command(spec) => Some(spec.device),
        }
    }

    /// The same process, pinned to `device` (a lane of runs spread over GPUs).
    pub fn on_device(&self, device: crate::scenario::DeviceSpec) -> Plug {
        let mut out = self.clone();
        match &mut out {
            Plug::Memrel(spec) => spec.device = device,
            Plug::Command(spec) => spec.device = device,
        }
        out
    }

    /// The model files the process loads (their page cache is a resource):
    /// memrel's candle worker's safetensors, a program's `model_files`;
    /// none for fakes.
    pub fn weight_files(&self) -> Vec<std::path::PathBuf> {
        match self {
            Plug::Memrel(spec) => spec
                .models
                .iter()
                .flat_map(|(_, m)| m.files.iter().cloned())
                .collect(),
            Plug::Command(spec) => spec.model_files.clone(),
        }
    }

    /// The next process of a `respawn` run takes over at `resume`.
    pub fn resume_at(&mut self, resume: Resume) {
        if let Plug::Memrel(spec) = self {
            spec.resume = Some(resume);
        }
    }
}
