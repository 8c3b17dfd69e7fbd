//! The kinds of mapping a process's host memory is split into at a phase
//! edge (`sampler::mappings` reads them from /proc/PID/smaps): words of the
//! record's floor, since each is a part of host memory in the one map of
//! readings (`Part::Mapped`).

/// The kinds of mapping host memory is split into, in the order they are
/// shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MappingKind {
    /// Private anonymous memory and `[heap]`: glibc's main heap and arenas,
    /// other allocators' pools, every framework's host caches.
    Heap,
    /// Mappings of the GPU driver's device files (`/dev/nvidia*`,
    /// `/dev/dri/*`): the CUDA context's host side.
    Driver,
    /// In a process that maps a GPU's device files, shared anonymous
    /// mappings (`/dev/zero (deleted)`): CUDA's pinned (page-locked) host
    /// memory, PyTorch's pinned tensors and its host cache (and some 10 MiB
    /// the context maps so at its creation).
    Pinned,
    /// `/dev/shm` files, `memfd:` segments and SysV shared memory.
    Shm,
    /// The model's weight files: the ones named (`--model-files`, the
    /// scenario's models), else files with a weight extension.
    Weights,
    /// Code: every mapping of a file that the process maps executable
    /// (shared libraries, the executable, their data segments).
    Code,
    /// `[stack]`: the main thread's stack.
    Stack,
    /// Everything else: other files, the kernel's `[vvar]`/`[vdso]`,
    /// shared anonymous memory of a process without a GPU.
    Rest,
}

impl MappingKind {
    pub const ALL: [MappingKind; 8] = [
        MappingKind::Heap,
        MappingKind::Driver,
        MappingKind::Pinned,
        MappingKind::Shm,
        MappingKind::Weights,
        MappingKind::Code,
        MappingKind::Stack,
        MappingKind::Rest,
    ];

    /// The word in column names and keys (`heap`, `driver`, …).
    pub fn key(self) -> &'static str {
        match self {
            MappingKind::Heap => "heap",
            MappingKind::Driver => "driver",
            MappingKind::Pinned => "pinned",
            MappingKind::Shm => "shm",
            MappingKind::Weights => "weights",
            MappingKind::Code => "code",
            MappingKind::Stack => "stack",
            MappingKind::Rest => "rest",
        }
    }

    pub fn parse(key: &str) -> Option<MappingKind> {
        MappingKind::ALL.into_iter().find(|k| k.key() == key)
    }
}
