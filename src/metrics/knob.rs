//! The knob that frees each mechanism holding retained memory
//! (`metrics::why`), and its price where a run of it was measured: the
//! mechanism half of `memrel advise`. It exists so that advice can say
//! what to set for a program or a server whose release was measured under
//! one strategy only ("not measured here: run … --strategy X to price it").
//!
//! Pure: summaries in, one [`MechanismAdvice`] per mechanism that holds the
//! retention threshold or more under the strategy that does least out.

use serde::Serialize;

use super::why::{Class, Held, Mechanism};
use super::{Resource, Summary};
use crate::record::RunStatus;

/// What frees a mechanism: a strategy memrel can measure, else words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knob {
    /// The strategy that applies it (`malloc-trim`), where one does.
    pub strategy: Option<&'static str>,
    /// What it is, for people: `malloc_trim(0) after the unload`.
    pub what: &'static str,
}

/// The knob's strategy as measured in the summaries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Priced {
    /// Its completed runs.
    pub runs: u32,
    /// What the mechanism still held under it (median over its runs).
    pub kept_bytes: Option<i64>,
    /// Median time of its release step, and until ready again where it
    /// restarts or reloads.
    pub release_action_s: Option<f64>,
    pub ready_s: Option<f64>,
}

/// One mechanism that holds retained memory, and what frees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MechanismAdvice {
    pub resource: Resource,
    pub mechanism: Mechanism,
    /// The strategy it was seen under: `drop`, else the summaries' first.
    pub strategy: String,
    /// What it held after the last cycle (median over the completed runs).
    pub bytes: i64,
    pub knob: Knob,
    /// The knob's strategy where the summaries have completed runs of it.
    pub priced: Option<Priced>,
}

/// Every mechanism that holds the retention threshold or more under the
/// strategy that does least (`drop`, else the first strategy with a split),
/// largest first.
pub fn advise(summaries: &[&Summary]) -> Vec<MechanismAdvice> {
    let threshold = summaries
        .iter()
        .map(|s| s.retention_threshold_bytes)
        .max()
        .unwrap_or(0) as i64;
    let strategies = || summaries.iter().flat_map(|s| s.strategies.iter());
    let Some(plain) = strategies()
        .filter(|s| !s.why.is_empty())
        .find(|s| s.strategy == "drop")
        .or_else(|| strategies().find(|s| !s.why.is_empty()))
    else {
        return Vec::new();
    };
    let mut held: Vec<&Held> = plain.why.iter().filter(|h| h.bytes >= threshold).collect();
    held.sort_by_key(|h| std::cmp::Reverse(h.bytes));
    held.into_iter()
        .map(|h| {
            let knob = knob(h.mechanism, &plain.strategy);
            MechanismAdvice {
                resource: h.resource,
                mechanism: h.mechanism,
                strategy: plain.strategy.clone(),
                bytes: h.bytes,
                priced: knob.strategy.and_then(|k| priced(summaries, k, h)),
                knob,
            }
        })
        .collect()
}

/// The knob of `mechanism` in a process started under `strategy` (whose
/// allocator frees its free chunks its own way).
pub fn knob(mechanism: Mechanism, strategy: &str) -> Knob {
    let k = |strategy, what| Knob {
        strategy: Some(strategy),
        what,
    };
    let words = |what| Knob {
        strategy: None,
        what,
    };
    match mechanism {
        Mechanism::FreeChunks => match strategy.split('-').next() {
            Some("jemalloc") => k("jemalloc-purge", "mallctl(\"arena.4096.purge\") after the unload, or MALLOC_CONF=dirty_decay_ms:0 (jemalloc-decay0)"),
            Some("tcmalloc") => k("tcmalloc-release", "MallocExtension_ReleaseFreeMemory() after the unload"),
            Some("mimalloc") => k("mimalloc-collect", "mi_collect(true) after the unload"),
            _ => k("malloc-trim", "malloc_trim(0) after the unload, or MALLOC_TRIM_THRESHOLD_/MALLOC_MMAP_THRESHOLD_ at start (trim-threshold-env, mmap-threshold-env)"),
        },
        Mechanism::PinnedCache => k("host-empty-cache", "empty PyTorch's pinned host cache after the tensors are freed (torch._C._host_emptyCache())"),
        Mechanism::Pinned => k("host-empty-cache", "pinned host memory with no view of who holds it: if PyTorch's host allocator caches it (a sleep's backup freed at the wake), torch._C._host_emptyCache() in the program frees it; a server needs its own switch; if a live tensor holds it, only the program can drop it"),
        Mechanism::TorchCache => k("empty-cache", "torch.cuda.empty_cache() after gc.collect()"),
        Mechanism::JaxPool => k("xla-platform-allocator", "XLA_PYTHON_CLIENT_ALLOCATOR=platform (frees each array's memory on delete)"),
        Mechanism::PageCache => k("fadvise-dontneed", "posix_fadvise(DONTNEED) on the weight files after the unload"),
        Mechanism::Context => k("respawn", "a new process: the CUDA context is the floor of every process that uses the GPU"),
        Mechanism::Code | Mechanism::OtherAnon | Mechanism::Rest => k("respawn", "a new process (no view tells what holds it)"),
        Mechanism::SharedMemory => words("the program (or a peer) still maps the segment: unmap and unlink it"),
        Mechanism::MappedWeights => words("the program still maps the weight files: drop every tensor that views them"),
        Mechanism::LiveHeap | Mechanism::PinnedTensors | Mechanism::TorchTensors | Mechanism::JaxArrays => {
            words("the program still references them (a leak in its code, or kept on purpose)")
        }
    }
}

/// The knob's strategy as the summaries measured it.
fn priced(summaries: &[&Summary], strategy: &str, held: &Held) -> Option<Priced> {
    let s = summaries
        .iter()
        .flat_map(|s| s.strategies.iter())
        .find(|s| s.strategy == strategy && s.runs_completed > 0)?;
    let kept_bytes = s
        .why
        .iter()
        .find(|h| h.resource == held.resource && h.mechanism == held.mechanism)
        .map(|h| h.bytes);
    let runs = summaries
        .iter()
        .flat_map(|s| s.runs.iter())
        .filter(|r| r.strategy == strategy && r.status == RunStatus::Completed)
        .count() as u32;
    Some(Priced {
        runs,
        kept_bytes,
        release_action_s: s.release_action_s.as_ref().map(|x| x.median),
        ready_s: s.ready_s.as_ref().map(|x| x.median),
    })
}

impl MechanismAdvice {
    /// Whether only the program can free it (no knob).
    pub fn live(&self) -> bool {
        self.mechanism.class() == Class::Live
    }
}
