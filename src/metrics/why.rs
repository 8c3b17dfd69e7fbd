//! Why memory stays: a cycle's retained bytes of a resource split by the
//! mechanism that holds them, each with its class (live, free but kept,
//! floor) — the next sentence after "host kept 130 MiB": *which mechanism
//! holds it, and what frees it* (`metrics::advice` names the knob).
//!
//! It reads only the edges' readings: host memory by mapping
//! (`Part::Mapped`, `sampler::mappings`), the allocator's own view
//! (`edge.heap`: in use vs held), and the frameworks' (`Part::View`:
//! PyTorch's allocated/reserved VRAM and pinned host cache, JAX's arrays and
//! pool). Each mechanism's retained bytes are its value at the cycle's
//! released edge less its value at the run's baseline edge, as `retained`
//! is; a view the program did not send at the baseline (a framework not yet
//! imported) counts as zero there. A resource whose edges have no split has
//! no rows. Pure: a run in, rows out.

use serde::{Deserialize, Serialize};

use super::memory;
use crate::record::{Event, MappingKind, Part, Readings, Resource, RunRecord, ViewKind};

/// What a mechanism's bytes are, for whoever must free them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Objects the program still references (a leak in its code, or what it
    /// keeps on purpose): only the program can let them go.
    Live,
    /// Free memory an allocator or a cache keeps: a knob frees it.
    FreeKept,
    /// What any process of this kind costs (the CUDA context, code, the
    /// stack): only a new process drops it.
    Floor,
    /// Memory no view accounts for (anonymous memory of a program whose
    /// allocator says nothing, other mappings).
    Unsplit,
}

impl Class {
    pub fn label(self) -> &'static str {
        match self {
            Class::Live => "live",
            Class::FreeKept => "free but kept",
            Class::Floor => "floor",
            Class::Unsplit => "not split",
        }
    }
}

/// One mechanism that can hold retained memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// Host: chunks the program freed that `malloc` keeps in its arenas
    /// (held − in use, the allocator's own view), as far as their pages are
    /// resident (the heap mapping's bytes beyond what is in use).
    FreeChunks,
    /// Host: bytes `malloc` handed out that the program has not freed.
    LiveHeap,
    /// Host: anonymous memory beside `malloc`'s view (Python's object
    /// arenas, direct mmaps), or all of it where the allocator said nothing.
    OtherAnon,
    /// Host: pinned memory PyTorch's host allocator caches after its tensors
    /// were freed.
    PinnedCache,
    /// Host: pinned memory in live tensors (a sleep's backup kept on purpose).
    PinnedTensors,
    /// Host: pinned memory no framework's view accounts for (a program
    /// that sends none: a server's pinned backup, live or cached).
    Pinned,
    /// Host: what the GPU driver's device files map (the CUDA context's
    /// host side); on a GPU: VRAM outside the framework's allocator (the
    /// context, cuBLAS workspaces, NCCL buffers, graphs).
    Context,
    /// Host: /dev/shm, memfd and SysV segments the process maps.
    SharedMemory,
    /// Host: pages of the model's weight files the process still maps.
    MappedWeights,
    /// Host: code (libraries and executables loaded since the baseline).
    Code,
    /// Host: the stack and every other mapping.
    Rest,
    /// GPU: VRAM PyTorch's caching allocator reserves and no tensor uses.
    TorchCache,
    /// GPU: VRAM in live PyTorch tensors.
    TorchTensors,
    /// GPU: VRAM XLA's pool keeps and no JAX array uses.
    JaxPool,
    /// GPU: VRAM in live JAX arrays.
    JaxArrays,
    /// The model files' pages the kernel keeps cached.
    PageCache,
}

impl Mechanism {
    /// Every mechanism, in the order the console and compare.csv list them.
    pub const ALL: [Mechanism; 16] = [
        Mechanism::FreeChunks,
        Mechanism::LiveHeap,
        Mechanism::OtherAnon,
        Mechanism::PinnedCache,
        Mechanism::PinnedTensors,
        Mechanism::Pinned,
        Mechanism::Context,
        Mechanism::SharedMemory,
        Mechanism::MappedWeights,
        Mechanism::Code,
        Mechanism::Rest,
        Mechanism::TorchCache,
        Mechanism::TorchTensors,
        Mechanism::JaxPool,
        Mechanism::JaxArrays,
        Mechanism::PageCache,
    ];

    /// Its name in summary.json, compare.csv and budget keys (snake_case).
    pub fn key(self) -> &'static str {
        match self {
            Mechanism::FreeChunks => "free_chunks",
            Mechanism::LiveHeap => "live_heap",
            Mechanism::OtherAnon => "other_anon",
            Mechanism::PinnedCache => "pinned_cache",
            Mechanism::PinnedTensors => "pinned_tensors",
            Mechanism::Pinned => "pinned",
            Mechanism::Context => "context",
            Mechanism::SharedMemory => "shared_memory",
            Mechanism::MappedWeights => "mapped_weights",
            Mechanism::Code => "code",
            Mechanism::Rest => "rest",
            Mechanism::TorchCache => "torch_cache",
            Mechanism::TorchTensors => "torch_tensors",
            Mechanism::JaxPool => "jax_pool",
            Mechanism::JaxArrays => "jax_arrays",
            Mechanism::PageCache => "page_cache",
        }
    }

    /// Whether it can hold memory of `resource` (host memory's mechanisms,
    /// a GPU's; the page cache is its own resource and its own budget).
    pub fn splits(self, resource: Resource) -> bool {
        match resource {
            Resource::Host => self.mapping().is_some(),
            Resource::Device(_) => matches!(
                self,
                Mechanism::Context
                    | Mechanism::TorchCache
                    | Mechanism::TorchTensors
                    | Mechanism::JaxPool
                    | Mechanism::JaxArrays
            ),
            _ => false,
        }
    }

    /// Its `[thresholds]` budget key on `resource`: `max_retained_<key>_mib`
    /// for host memory, `max_retained_vram_<key>_mib` for VRAM; `None`
    /// where it holds none of that resource.
    pub fn budget_key(self, resource: Resource) -> Option<String> {
        if !self.splits(resource) {
            return None;
        }
        Some(match resource {
            Resource::Device(_) => format!("max_retained_vram_{}_mib", self.key()),
            _ => format!("max_retained_{}_mib", self.key()),
        })
    }

    /// Every mechanism budget key with its mechanism and resource class
    /// (`Device(0)` for any GPU), host first.
    pub fn budget_keys() -> impl Iterator<Item = (Mechanism, Resource, String)> {
        [Resource::Host, Resource::Device(0)]
            .into_iter()
            .flat_map(|r| {
                Mechanism::ALL
                    .into_iter()
                    .filter_map(move |m| m.budget_key(r).map(|k| (m, r, k)))
            })
    }

    /// Its name on the console and in advice.
    pub fn label(self) -> &'static str {
        match self {
            Mechanism::FreeChunks => "free malloc chunks",
            Mechanism::LiveHeap => "malloc in use",
            Mechanism::OtherAnon => "other anonymous",
            Mechanism::PinnedCache => "pinned host cache",
            Mechanism::PinnedTensors => "pinned tensors",
            Mechanism::Pinned => "pinned host memory",
            Mechanism::Context => "CUDA context",
            Mechanism::SharedMemory => "shared memory",
            Mechanism::MappedWeights => "mapped weights",
            Mechanism::Code => "code",
            Mechanism::Rest => "stack and other mappings",
            Mechanism::TorchCache => "PyTorch cache",
            Mechanism::TorchTensors => "PyTorch tensors",
            Mechanism::JaxPool => "XLA pool",
            Mechanism::JaxArrays => "JAX arrays",
            Mechanism::PageCache => "page cache",
        }
    }

    pub fn class(self) -> Class {
        match self {
            Mechanism::FreeChunks
            | Mechanism::PinnedCache
            | Mechanism::TorchCache
            | Mechanism::JaxPool
            | Mechanism::PageCache => Class::FreeKept,
            Mechanism::LiveHeap
            | Mechanism::PinnedTensors
            | Mechanism::SharedMemory
            | Mechanism::MappedWeights
            | Mechanism::TorchTensors
            | Mechanism::JaxArrays => Class::Live,
            Mechanism::Context | Mechanism::Code => Class::Floor,
            Mechanism::OtherAnon | Mechanism::Pinned | Mechanism::Rest => Class::Unsplit,
        }
    }

    /// The mapping kind it is a share of (host memory's split), if any.
    pub fn mapping(self) -> Option<MappingKind> {
        match self {
            Mechanism::FreeChunks | Mechanism::LiveHeap | Mechanism::OtherAnon => {
                Some(MappingKind::Heap)
            }
            Mechanism::PinnedCache | Mechanism::PinnedTensors | Mechanism::Pinned => {
                Some(MappingKind::Pinned)
            }
            Mechanism::Context => Some(MappingKind::Driver),
            Mechanism::SharedMemory => Some(MappingKind::Shm),
            Mechanism::MappedWeights => Some(MappingKind::Weights),
            Mechanism::Code => Some(MappingKind::Code),
            Mechanism::Rest => Some(MappingKind::Rest),
            _ => None,
        }
    }
}

/// Bytes one mechanism retained in one resource.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Held {
    pub resource: Resource,
    pub mechanism: Mechanism,
    /// Its value at the cycle's released edge less its value at the baseline.
    pub bytes: i64,
}

/// Each mechanism's share of what the run's last cycle retained, per
/// resource; empty where its edges carry no split.
pub fn of_run(run: &RunRecord, resources: &[Resource], cycles: &[u32]) -> Vec<Held> {
    let (Some(base), Some(&last)) = (memory::effective_baseline_edge(run), cycles.last()) else {
        return Vec::new();
    };
    let Some((_, _, released)) = memory::cycle_edges(run, last) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &resource in resources {
        let before = shares(base, resource);
        let after = shares(released, resource);
        if after.is_empty() {
            continue;
        }
        for (mechanism, bytes) in after {
            let was = before
                .iter()
                .find(|(m, _)| *m == mechanism)
                .map_or(0, |(_, b)| *b);
            out.push(Held {
                resource,
                mechanism,
                bytes: bytes - was,
            });
        }
    }
    out
}

/// Each mechanism's bytes of `resource` at one edge.
fn shares(event: &Event, resource: Resource) -> Vec<(Mechanism, i64)> {
    let r = &event.readings;
    match resource {
        Resource::Host => host_shares(event),
        Resource::Device(_) => device_shares(r, resource),
        Resource::PageCache => r
            .get(resource)
            .map(|b| vec![(Mechanism::PageCache, b as i64)])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Host memory by mapping, the heap refined by the allocator's view and the
/// pinned memory by PyTorch's host allocator's.
fn host_shares(event: &Event) -> Vec<(Mechanism, i64)> {
    let r = &event.readings;
    let mapped = |kind| r.part(Resource::Host, Part::Mapped(kind)).map(|b| b as i64);
    let Some(heap) = mapped(MappingKind::Heap) else {
        return Vec::new();
    };
    let view = |kind| {
        r.part(Resource::Host, Part::View(kind))
            .map_or(0, |b| b as i64)
    };
    let mut out = Vec::new();
    // The allocator's numbers are its address space; the heap mapping's
    // are resident pages. What is in use is resident; free chunks count
    // only as far as the heap's resident pages go beyond it (a trim gives
    // their pages back and leaves the chunks free); the rest of the heap is
    // beside the allocator's view.
    match event.edge.heap {
        Some(h) => {
            let in_use = h.in_use_bytes.map_or(0, |b| b as i64);
            let free = (h.held_bytes as i64 - in_use).clamp(0, (heap - in_use).max(0));
            out.push((Mechanism::FreeChunks, free));
            if h.in_use_bytes.is_some() {
                out.push((Mechanism::LiveHeap, in_use));
            }
            out.push((Mechanism::OtherAnon, heap - in_use - free));
        }
        None => out.push((Mechanism::OtherAnon, heap)),
    }
    let pinned = mapped(MappingKind::Pinned).unwrap_or(0);
    let pinned_held = view(ViewKind::TorchPinnedHeld);
    let pinned_in_use = view(ViewKind::TorchPinnedInUse);
    out.push((Mechanism::PinnedCache, pinned_held - pinned_in_use));
    out.push((Mechanism::PinnedTensors, pinned_in_use));
    out.push((Mechanism::Pinned, pinned - pinned_held));
    out.push((Mechanism::Context, mapped(MappingKind::Driver).unwrap_or(0)));
    let stack = mapped(MappingKind::Stack).unwrap_or(0);
    for (mechanism, kind) in [
        (Mechanism::SharedMemory, MappingKind::Shm),
        (Mechanism::MappedWeights, MappingKind::Weights),
        (Mechanism::Code, MappingKind::Code),
    ] {
        out.push((mechanism, mapped(kind).unwrap_or(0)));
    }
    out.push((
        Mechanism::Rest,
        mapped(MappingKind::Rest).unwrap_or(0) + stack,
    ));
    out
}

/// A GPU's VRAM split by the frameworks' views; no split where none sent
/// one (the candle worker's VRAM, a server's: the whole is all there is).
fn device_shares(r: &Readings, resource: Resource) -> Vec<(Mechanism, i64)> {
    let Some(whole) = r.get(resource).map(|b| b as i64) else {
        return Vec::new();
    };
    let view = |kind| r.part(resource, Part::View(kind)).map(|b| b as i64);
    let torch = view(ViewKind::TorchReserved).zip(view(ViewKind::TorchAllocated));
    let jax = view(ViewKind::JaxPool).zip(view(ViewKind::JaxInUse));
    if torch.is_none() && jax.is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut framework = 0;
    if let Some((reserved, allocated)) = torch {
        out.push((Mechanism::TorchCache, reserved - allocated));
        out.push((Mechanism::TorchTensors, allocated));
        framework += reserved;
    }
    if let Some((pool, in_use)) = jax {
        out.push((Mechanism::JaxPool, pool - in_use));
        out.push((Mechanism::JaxArrays, in_use));
        framework += pool;
    }
    out.push((Mechanism::Context, whole - framework));
    out
}

/// The medians over runs of each (resource, mechanism), in first-seen order.
pub fn median_over_runs<'a>(runs: impl Iterator<Item = &'a [Held]>) -> Vec<Held> {
    let mut keys: Vec<(Resource, Mechanism)> = Vec::new();
    let all: Vec<&[Held]> = runs.collect();
    for h in all.iter().flat_map(|r| r.iter()) {
        if !keys.contains(&(h.resource, h.mechanism)) {
            keys.push((h.resource, h.mechanism));
        }
    }
    keys.into_iter()
        .filter_map(|(resource, mechanism)| {
            let v: Vec<f64> = all
                .iter()
                .filter_map(|r| {
                    r.iter()
                        .find(|h| h.resource == resource && h.mechanism == mechanism)
                        .map(|h| h.bytes as f64)
                })
                .collect();
            Some(Held {
                resource,
                mechanism,
                bytes: crate::stats::median(&v)?.round() as i64,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mechanism_is_listed_once_and_its_key_is_its_json_name() {
        for (i, m) in Mechanism::ALL.iter().enumerate() {
            assert!(!Mechanism::ALL[i + 1..].contains(m), "{m:?} twice");
            let json = serde_json::to_string(m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.key()));
        }
    }

    #[test]
    fn budget_keys_name_each_mechanism_of_each_resource_once() {
        let keys: Vec<String> = Mechanism::budget_keys().map(|(_, _, k)| k).collect();
        assert_eq!(keys.len(), 11 + 5, "{keys:?}");
        assert!(keys.contains(&"max_retained_free_chunks_mib".to_string()));
        assert!(keys.contains(&"max_retained_pinned_cache_mib".to_string()));
        assert!(keys.contains(&"max_retained_vram_torch_cache_mib".to_string()));
        assert!(keys.contains(&"max_retained_vram_context_mib".to_string()));
        assert_eq!(Mechanism::TorchCache.budget_key(Resource::Host), None);
        assert_eq!(Mechanism::PageCache.budget_key(Resource::PageCache), None);
        // None is spelled like a resource's own budget key.
        for (_, _, k) in crate::metrics::catalogue::budget_keys() {
            assert!(!keys.contains(&k), "{k}");
        }
    }
}
