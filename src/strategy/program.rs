//! What only a measured program can do (`memrel exec`, scenarios with a
//! `command`): PyTorch's own calls and the recipes built on them, as the
//! seed documents use them. The `memrel` Python module carries them out in
//! `memrel.release()` and reports whether each took effect; the candle
//! worker refuses them.

use super::{DeviceKind, ReleaseAction, StartAction, Strategy};

pub const PROGRAM: &[Strategy] = &[
    Strategy {
        name: "gc-collect",
        device: DeviceKind::Any,
        summary: "programs: gc.collect() after the program's del (the article's `del model; gc.collect()`)",
        explanation: "Python frees an object when its last reference goes; gc.collect() also frees \
            objects kept alive only by reference cycles (a model and its modules refer to each \
            other through hooks and parents). What is freed goes back to the allocator, which \
            decides whether the kernel gets it: glibc keeps heap memory, PyTorch's CUDA caching \
            allocator keeps every block.",
        release: ReleaseAction::ProgramOnly(&["gc"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "trim-threshold-inside",
        device: DeviceKind::Cpu,
        summary: "programs: set MALLOC_TRIM_THRESHOLD_=-1 inside the running process (no effect)",
        explanation: "The article's variant that did nothing: os.environ[\"MALLOC_TRIM_THRESHOLD_\"] \
            = \"-1\" in Python. glibc reads its MALLOC_*_ variables once, when the process starts, \
            so setting one later changes nothing; compare with trim-threshold-env, the same \
            variable in the environment at start.",
        start: StartAction::ProgramOnly(&["setenv_trim_threshold"]),
        release: ReleaseAction::ProgramOnly(&["gc"]),
        needs_glibc: true,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "empty-cache",
        device: DeviceKind::Cuda,
        summary: "programs: gc.collect(), then torch.cuda.empty_cache() (the article's GPU fix)",
        explanation: "PyTorch's caching allocator keeps every freed block reserved for reuse, so \
            VRAM does not fall at del. empty_cache() returns the unused cached blocks to the \
            driver; what stays is the CUDA context, cuBLAS workspaces and loaded kernels: the \
            floor memrel reports.",
        release: ReleaseAction::ProgramOnly(&["gc", "empty_cache"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "host-empty-cache",
        device: DeviceKind::Cuda,
        summary: "programs: gc.collect(), then empty PyTorch's pinned host cache (torch._C._host_emptyCache())",
        explanation: "PyTorch's host allocator keeps every freed pinned (page-locked) buffer for \
            reuse: a sleep's backup copied into pinned memory and freed at the wake stays \
            resident (RssShmem, mapped from /dev/zero by the driver) until the cache is emptied. \
            torch._C._host_emptyCache() gives the unused buffers back with cudaFreeHost; memrel \
            reads the cache at each edge (`host.torch_pinned_held`).",
        release: ReleaseAction::ProgramOnly(&["gc", "host_empty_cache"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "accelerate-release",
        device: DeviceKind::Any,
        summary: "programs: accelerate's release_memory: to(\"cpu\"), None, gc.collect(), empty_cache()",
        explanation: "What accelerate.utils.release_memory does with the objects passed to it: \
            moves each one with a .to to the CPU, drops the references, collects and empties the \
            CUDA cache. Moving to the CPU first costs a device-to-host copy and host RAM for the \
            weights, and frees nothing that del and empty_cache would not; on a CPU device it is \
            the article's model.cpu() first.",
        release: ReleaseAction::ProgramOnly(&["to_cpu", "gc", "empty_cache"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "ipc-collect",
        device: DeviceKind::Cuda,
        summary: "programs: gc, synchronize, ipc_collect(), clear cuBLAS workspaces, empty_cache()",
        explanation: "The article's last resort before cudaDeviceReset: ipc_collect() frees memory \
            kept for tensors shared with other processes, and torch._C._cuda_clearCublasWorkspaces() \
            frees cuBLAS's per-stream workspaces, which empty_cache() alone leaves; the cache is \
            emptied last, so the freed workspaces go back to the driver in the same release.",
        release: ReleaseAction::ProgramOnly(&[
            "gc",
            "cuda_synchronize",
            "ipc_collect",
            "clear_cublas_workspaces",
            "empty_cache",
        ]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "detach-release",
        device: DeviceKind::Any,
        summary: "programs: training clean-up: detach_() every parameter, drop grads and optimizer state, gc, empty_cache()",
        explanation: "The training clean-up recipe: parameters still attached to an autograd graph, \
            gradients and optimizer state (AdamW keeps two tensors per parameter) hold memory \
            after training; detach_(), grad = None and clearing the optimizer's state drop them \
            before gc.collect() and empty_cache().",
        release: ReleaseAction::ProgramOnly(&["detach", "gc", "empty_cache"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "device-reset",
        device: DeviceKind::Cuda,
        summary: "programs: UNSUPPORTED: cudaDeviceReset() after gc and synchronize; reports what the next CUDA call does",
        explanation: "Destroys the process's CUDA primary context, so the process holds no VRAM at \
            all, behind PyTorch's back: PyTorch keeps pointers into the destroyed context. memrel \
            makes one small CUDA call afterwards and records what happened to it. Opt-in only, \
            never in production.",
        release: ReleaseAction::ProgramOnly(&["gc", "cuda_synchronize", "device_reset"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "destroy-pg",
        device: DeviceKind::Cuda,
        summary: "programs: gc.collect(), then torch.distributed.destroy_process_group() in every rank",
        explanation: "A tensor-parallel program (torchrun, NCCL) keeps a communicator per process \
            group: NCCL's buffers and streams on every GPU stay after the model is deleted, until \
            the group is destroyed. Each rank runs the release; the group is made again at the next \
            load. PyTorch's cache still holds the freed weights: see destroy-pg-empty-cache.",
        release: ReleaseAction::ProgramOnly(&["gc", "destroy_process_group"]),
        ..Strategy::PLAIN
    },
    Strategy {
        name: "destroy-pg-empty-cache",
        device: DeviceKind::Cuda,
        summary: "programs: gc.collect(), destroy_process_group(), then torch.cuda.empty_cache() in every rank",
        explanation: "The full tear-down of a tensor-parallel model (what users are told after `del \
            llm`): the process group's NCCL resources, then the caching allocator's freed blocks, \
            go back on each GPU. What stays is each rank's CUDA context.",
        release: ReleaseAction::ProgramOnly(&["gc", "destroy_process_group", "empty_cache"]),
        ..Strategy::PLAIN
    },
];
