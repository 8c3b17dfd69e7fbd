//! What a program's own allocators and frameworks say they hold, read from
//! inside the process at a phase edge (the memrel Python module sends them):
//! words of the record's floor, since each is a part of a resource in the
//! one map of readings (`Part::View`), host memory's or a GPU's.
//!
//! glibc's and the other `malloc`s' view keeps its own columns
//! (`glibc_*_bytes`, `heap_*_bytes`); these are the frameworks' caches that
//! sit above `malloc` or beside it.

/// A framework's account of its memory, as a part of one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViewKind {
    /// On a GPU: bytes in PyTorch tensors (`torch.cuda.memory_allocated`).
    TorchAllocated,
    /// On a GPU: bytes PyTorch's caching allocator holds from CUDA, in
    /// tensors or cached (`torch.cuda.memory_reserved`).
    TorchReserved,
    /// On the host: pinned bytes PyTorch's host allocator holds from CUDA,
    /// in tensors or cached (`host_memory_stats()["allocated_bytes.current"]`).
    TorchPinnedHeld,
    /// On the host: pinned bytes in live tensors
    /// (`host_memory_stats()["active_bytes.current"]`).
    TorchPinnedInUse,
    /// On a GPU: bytes in JAX arrays (`memory_stats()["bytes_in_use"]`).
    JaxInUse,
    /// On a GPU: bytes XLA's allocator holds, in arrays or pooled
    /// (`memory_stats()["pool_bytes"]`, else `bytes_reserved`).
    JaxPool,
}

impl ViewKind {
    pub const ALL: [ViewKind; 6] = [
        ViewKind::TorchAllocated,
        ViewKind::TorchReserved,
        ViewKind::TorchPinnedHeld,
        ViewKind::TorchPinnedInUse,
        ViewKind::JaxInUse,
        ViewKind::JaxPool,
    ];

    /// The word in a readings cell entry and a column (`torch_reserved`).
    pub fn key(self) -> &'static str {
        match self {
            ViewKind::TorchAllocated => "torch_allocated",
            ViewKind::TorchReserved => "torch_reserved",
            ViewKind::TorchPinnedHeld => "torch_pinned_held",
            ViewKind::TorchPinnedInUse => "torch_pinned_in_use",
            ViewKind::JaxInUse => "jax_in_use",
            ViewKind::JaxPool => "jax_pool",
        }
    }

    pub fn parse(key: &str) -> Option<ViewKind> {
        ViewKind::ALL.into_iter().find(|k| k.key() == key)
    }

    /// Whether it is a part of host memory (else of a GPU's VRAM).
    pub fn on_host(self) -> bool {
        matches!(self, ViewKind::TorchPinnedHeld | ViewKind::TorchPinnedInUse)
    }
}
