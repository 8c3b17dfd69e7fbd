//! One interpreter of a scenario's steps for memrel's own workers: the
//! warm-up, the baseline, then each cycle's `load`, `forward`, `unload`,
//! `release`, `settle`, `idle`, `busy`, `sleep`, `asleep` and `wake` in the
//! scenario's order, each a timed phase whose edges go out through the
//! [`Emitter`], and the `done` message at the end. What a step does to a
//! model is a [`Backend`]'s: the candle worker (`candle.rs`, real models)
//! and the fake worker (`fake.rs`, exact bytes), the test double every later
//! stage is checked with, as hyperfine's `MockExecutor` is. A respawn's
//! handover (the process ends in a release; the next one resumes there) is
//! walked here too, so both workers keep one order of edges.
//!
//! Knows no model, device or allocator: it must not look inside a backend.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result};

use super::emitter::{phase, Emitter};
use super::{selfmem, WorkerSpec};
use crate::protocol::{Check, Done, Edge, Handover, Message, Phase, Resume};
use crate::scenario::Step;

/// What the steps do to models: one implementation a worker. Each method
/// but the hooks runs inside its step's timed phase and returns the note of
/// the phase's end edge.
pub trait Backend {
    /// A model while it is loaded.
    type Model;
    /// A model while it is asleep (`sleep` until `wake`).
    type Asleep;

    /// Whether the scenario's `warmup` makes an untimed warm-up phase.
    fn warms_up(&self) -> bool {
        false
    }
    /// The untimed warm-up; returns its note.
    fn warm_up(&mut self) -> Result<String> {
        Ok(String::new())
    }
    /// Untimed, before a load's phase (a device a strategy dropped is
    /// opened again); returns a note for the load's end edge.
    fn before_load(&mut self) -> Result<Option<String>> {
        Ok(None)
    }
    /// Loads model `id`; `before` is [`Backend::before_load`]'s note.
    fn load(&mut self, id: &str, before: Option<String>) -> Result<(Self::Model, Option<String>)>;
    fn forward(&mut self, id: &str, model: &mut Self::Model) -> Result<Option<String>>;
    fn unload(&mut self, id: &str, model: Self::Model) -> Result<Option<String>>;
    /// The strategy's release action; `models_alive` models are still loaded.
    fn release(&mut self, models_alive: usize) -> Result<Option<String>>;
    /// Whether a release with no model loaded ends this process, a fresh
    /// one taking over (`respawn`).
    fn hands_over(&self) -> bool {
        false
    }
    fn sleep(&mut self, id: &str, model: Self::Model) -> Result<(Self::Asleep, Option<String>)>;
    fn wake(&mut self, id: &str, asleep: Self::Asleep) -> Result<(Self::Model, Option<String>)>;
    /// `ms` of small allocations (or of waiting) while models stay loaded.
    fn busy(&mut self, ms: u64) -> Result<Option<String>>;
    /// Untimed, after a step's end edge (a check, a free that comes late).
    fn after(&mut self, _step: &Step, _cycle: u32) -> Result<()> {
        Ok(())
    }
    /// After the last cycle, before `done`: the checks only the end can make.
    fn finish(&mut self) -> Result<Vec<Check>> {
        Ok(Vec::new())
    }
}

/// Walks `spec`'s steps over `backend`, from the warm-up (or, for a process
/// that took over, the end of the release it resumes) to `done`.
pub fn run<B: Backend>(spec: &WorkerSpec, backend: &mut B, out: &mut Emitter) -> Result<()> {
    let w = &spec.workload;
    start(spec, backend, out)?;
    let first_cycle = spec.resume.map_or(1, |r| r.cycle);
    for cycle in first_cycle..=spec.cycles {
        let mut loaded: HashMap<&str, B::Model> = HashMap::new();
        let mut asleep: HashMap<&str, B::Asleep> = HashMap::new();
        for (index, step) in w.steps.iter().enumerate() {
            if spec
                .resume
                .is_some_and(|r| r.cycle == cycle && index <= r.release_step)
            {
                continue;
            }
            match step {
                Step::Load(id) => {
                    let before = backend.before_load()?;
                    let m = phase(out, Phase::Load, cycle, Some(id), || {
                        backend.load(id, before)
                    })?;
                    loaded.insert(id.as_str(), m);
                }
                Step::Forward(id) => {
                    let m = loaded.get_mut(id.as_str()).context("forward before load")?;
                    phase(out, Phase::Forward, cycle, Some(id), || {
                        Ok(((), backend.forward(id, m)?))
                    })?;
                }
                Step::Unload(id) => {
                    let m = loaded.remove(id.as_str()).context("unload before load")?;
                    phase(out, Phase::Unload, cycle, Some(id), || {
                        Ok(((), backend.unload(id, m)?))
                    })?;
                }
                Step::Release => {
                    if backend.hands_over() && loaded.is_empty() {
                        hand_over(out, cycle, index);
                        return Ok(());
                    }
                    let alive = loaded.len();
                    phase(out, Phase::Release, cycle, None, || {
                        Ok(((), backend.release(alive)?))
                    })?;
                }
                Step::Settle => wait(out, Phase::Settle, cycle, w.settle_ms)?,
                Step::Idle(ms) => wait(out, Phase::Idle, cycle, *ms)?,
                Step::Asleep(ms) => wait(out, Phase::Asleep, cycle, *ms)?,
                Step::Busy(ms) => {
                    phase(out, Phase::Busy, cycle, None, || {
                        Ok(((), backend.busy(*ms)?))
                    })?;
                }
                Step::Sleep(id) => {
                    let m = loaded.remove(id.as_str()).context("sleep before load")?;
                    let slept = phase(out, Phase::Sleep, cycle, Some(id), || backend.sleep(id, m))?;
                    asleep.insert(id.as_str(), slept);
                }
                Step::Wake(id) => {
                    let slept = asleep.remove(id.as_str()).context("wake before sleep")?;
                    let m = phase(out, Phase::Wake, cycle, Some(id), || {
                        backend.wake(id, slept)
                    })?;
                    loaded.insert(id.as_str(), m);
                }
            }
            backend.after(step, cycle)?;
        }
    }
    let checks = backend.finish()?;
    out.send(Message::Done(Done {
        vm_hwm_bytes: selfmem::vm_hwm_bytes(),
        checks,
    }));
    Ok(())
}

/// What comes before the first cycle: the warm-up and the baseline, or, for
/// a process that took over, the end of the release it resumes.
fn start<B: Backend>(spec: &WorkerSpec, backend: &mut B, out: &mut Emitter) -> Result<()> {
    if let Some(resume) = spec.resume {
        // This process takes over from one that ended at a release step
        // (respawn): its start is the end of that release.
        let note = format!(
            "new worker process {} took over (respawn)",
            std::process::id()
        );
        out.edge(
            Phase::Release,
            Edge::End,
            resume.cycle,
            None,
            None,
            Some(note),
        );
        return Ok(());
    }
    let w = &spec.workload;
    if w.warmup && backend.warms_up() {
        let first = spec.models.first().map(|(id, _)| id.as_str());
        phase(out, Phase::Warmup, 0, first, || {
            Ok(((), Some(backend.warm_up()?)))
        })?;
    }
    wait(out, Phase::Baseline, 0, w.baseline_ms)
}

/// A release that ends this process (`respawn`): its begin edge, then the
/// handover; the parent starts a new process that ends this release.
fn hand_over(out: &mut Emitter, cycle: u32, release_step: usize) {
    out.edge(Phase::Release, Edge::Begin, cycle, None, None, None);
    out.send(Message::Handover(Handover {
        resume: Resume {
            cycle,
            release_step,
        },
        vm_hwm_bytes: selfmem::vm_hwm_bytes(),
    }));
}

/// A phase that only waits `ms` (baseline, settle, idle, asleep).
fn wait(out: &mut Emitter, p: Phase, cycle: u32, ms: u64) -> Result<()> {
    phase(out, p, cycle, None, || {
        std::thread::sleep(Duration::from_millis(ms));
        Ok(((), None))
    })
}
