//! A scenario's `[workload]`: the steps of one cycle for memrel's worker
//! (each model loaded before it is used, put to sleep before it is woken)
//! and the knobs of how it loads and runs, checked with the file's line and
//! column like the rest of the scenario (`parse.rs`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use toml::Spanned;

use super::super::types::*;
use super::ScenarioError;
use crate::model::spec::{Dtype, LoadMethod, LoadThread, ModelSource};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkloadFile {
    steps: Spanned<Vec<Spanned<String>>>,
    #[serde(default = "one")]
    batch_size: Spanned<usize>,
    #[serde(default = "default_seq_len")]
    seq_len: Spanned<usize>,
    #[serde(default = "default_load_method")]
    load_method: LoadMethod,
    #[serde(default = "default_load_thread")]
    load_thread: LoadThread,
    #[serde(default = "default_dtype")]
    dtype: Dtype,
    #[serde(default)]
    small_allocs_between_loads: usize,
    #[serde(default = "default_settle_ms")]
    settle_ms: u64,
    #[serde(default = "default_baseline_ms")]
    baseline_ms: u64,
    #[serde(default)]
    warmup: bool,
    #[serde(default)]
    evict_page_cache: bool,
}

fn one() -> Spanned<usize> {
    Spanned::new(0..0, 1)
}

fn default_seq_len() -> Spanned<usize> {
    Spanned::new(0..0, 32)
}

fn default_load_method() -> LoadMethod {
    LoadMethod::Mmap
}

fn default_load_thread() -> LoadThread {
    LoadThread::Main
}

fn default_dtype() -> Dtype {
    Dtype::F32
}

fn default_settle_ms() -> u64 {
    300
}

fn default_baseline_ms() -> u64 {
    200
}

/// The most tokens one forward pass may take (batch_size × seq_len): the
/// worker builds the batch before any model code can refuse it.
const MAX_TOKENS: usize = 1 << 20;

/// The `[workload]` table: steps that name only known models, each loaded
/// model unloaded in the cycle, and a forward pass of a sane size.
pub(super) fn parse_workload(
    table: &Spanned<WorkloadFile>,
    models: &BTreeMap<String, ModelSource>,
    invalid: &dyn Fn(std::ops::Range<usize>, String) -> ScenarioError,
) -> Result<Workload, ScenarioError> {
    let w = table.get_ref();
    let mut steps = Vec::new();
    let mut states = ModelStates::default();
    for raw in w.steps.get_ref() {
        let step = Step::parse(raw.get_ref()).map_err(|e| invalid(raw.span(), e))?;
        known_model(&step, raw.get_ref(), models)
            .and_then(|()| states.take(&step, raw.get_ref()))
            .map_err(|e| invalid(raw.span(), e))?;
        steps.push(step);
    }
    states
        .at_end(&steps)
        .map_err(|e| invalid(w.steps.span(), e))?;
    check_size(w, invalid)?;
    Ok(Workload {
        steps,
        batch_size: *w.batch_size.get_ref(),
        seq_len: *w.seq_len.get_ref(),
        load_method: w.load_method,
        load_thread: w.load_thread,
        dtype: w.dtype,
        small_allocs_between_loads: w.small_allocs_between_loads,
        settle_ms: w.settle_ms,
        baseline_ms: w.baseline_ms,
        warmup: w.warmup,
        evict_page_cache: w.evict_page_cache,
    })
}

/// `Err`: `step` (written `raw`) names a model that is not under `[models]`.
fn known_model(
    step: &Step,
    raw: &str,
    models: &BTreeMap<String, ModelSource>,
) -> Result<(), String> {
    let (Step::Load(m) | Step::Forward(m) | Step::Unload(m) | Step::Sleep(m) | Step::Wake(m)) =
        step
    else {
        return Ok(());
    };
    if models.contains_key(m) {
        return Ok(());
    }
    let known: Vec<&str> = models.keys().map(String::as_str).collect();
    Err(format!(
        "step {raw:?} names model {m:?}, which is not under [models]; known: {}",
        known.join(", ")
    ))
}

/// Which models are loaded and which asleep, step by step through a cycle.
#[derive(Default)]
struct ModelStates {
    loaded: BTreeSet<String>,
    asleep: BTreeSet<String>,
}

impl ModelStates {
    /// Takes `step` (written `raw`); `Err`: it does not follow from the
    /// steps before it (a forward before its load, a wake before its sleep).
    fn take(&mut self, step: &Step, raw: &str) -> Result<(), String> {
        let (loaded, asleep) = (&mut self.loaded, &mut self.asleep);
        match step {
            Step::Load(m) if !loaded.insert(m.clone()) => Err(format!(
                "model {m:?} is loaded twice without an unload in between"
            )),
            Step::Forward(m) if !loaded.contains(m) => {
                Err(format!("forward {m:?} comes before \"load {m}\""))
            }
            Step::Unload(m) if !loaded.remove(m) => {
                Err(format!("unload {m:?} comes before \"load {m}\""))
            }
            Step::Forward(m) | Step::Unload(m) | Step::Sleep(m) if asleep.contains(m) => Err(
                format!("step {raw:?}: model {m:?} is asleep; add \"wake {m}\" before it"),
            ),
            Step::Sleep(m) if !loaded.contains(m) => {
                Err(format!("sleep {m:?} comes before \"load {m}\""))
            }
            Step::Sleep(m) => {
                asleep.insert(m.clone());
                Ok(())
            }
            Step::Wake(m) if !asleep.remove(m) => {
                Err(format!("wake {m:?} comes before \"sleep {m}\""))
            }
            _ => Ok(()),
        }
    }

    /// `Err`: at the end of the cycle (`steps`), a model is still asleep or
    /// loaded, or none was loaded at all.
    fn at_end(&self, steps: &[Step]) -> Result<(), String> {
        if let Some(m) = self.asleep.iter().next() {
            return Err(format!(
                "model {m:?} is still asleep at the end of the cycle: add \"wake {m}\""
            ));
        }
        if let Some(m) = self.loaded.iter().next() {
            return Err(format!(
                "model {m:?} is still loaded at the end of the cycle: add \"unload {m}\""
            ));
        }
        if !steps.iter().any(|s| matches!(s, Step::Load(_))) {
            return Err("steps load no model: add e.g. \"load bert\"".into());
        }
        Ok(())
    }
}

/// `batch_size` and `seq_len` at least 1, and their product a forward
/// pass the worker can build.
fn check_size(
    w: &WorkloadFile,
    invalid: &dyn Fn(std::ops::Range<usize>, String) -> ScenarioError,
) -> Result<(), ScenarioError> {
    let (batch_size, seq_len) = (&w.batch_size, &w.seq_len);
    for (key, value) in [("batch_size", batch_size), ("seq_len", seq_len)] {
        if *value.get_ref() == 0 {
            let span = if value.span().is_empty() {
                w.steps.span()
            } else {
                value.span()
            };
            return Err(invalid(span, format!("{key} must be at least 1")));
        }
    }
    if batch_size.get_ref().saturating_mul(*seq_len.get_ref()) > MAX_TOKENS {
        let span = if seq_len.span().is_empty() {
            batch_size.span()
        } else {
            seq_len.span()
        };
        return Err(invalid(
            span,
            format!(
                "batch_size × seq_len = {} × {} is more than {MAX_TOKENS} tokens in one forward pass: make them smaller",
                batch_size.get_ref(),
                seq_len.get_ref()
            ),
        ));
    }
    Ok(())
}
