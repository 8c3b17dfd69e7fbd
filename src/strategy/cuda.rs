//! The CUDA family: what a candle program can do about device memory after a
//! drop (synchronize, trim the pool, copy to the CPU, drop the device, release
//! the primary context).

use super::{DeviceKind, ReleaseAction, Strategy};

pub const CUDA: &[Strategy] = &[
    Strategy {
        name: "sync",
        device: DeviceKind::Cuda,
        summary: "drop, then synchronize the device",
        explanation: "The pool's release threshold is 0, so the frees queued on the stream return \
            their memory to the driver as soon as the stream is synchronized. Measured (H100, \
            bert-base): 1094 → 678 MiB, back to the baseline, in a synchronize of about 1 ms. 678 MiB is \
            as low as VRAM goes while the device lives: the bare device (context + cuBLAS + cuRAND, \
            the context floor) is 586 MiB and the loaded kernels and cuBLAS workspace add 92 MiB once \
            a model has run.",
        release: ReleaseAction::CudaSync,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "cache-flush",
        device: DeviceKind::Cuda,
        summary: "drop, synchronize, then cuMemPoolTrimTo(default pool, 0)",
        explanation: "candle's equivalent of torch.cuda.empty_cache(): trims the default memory pool \
            to zero. After a synchronize there is nothing left to trim with a release threshold of \
            0 (measured: the pool's reserved bytes are the same before and after the trim, and the \
            process ends at the same 678 MiB baseline as `sync`); it matters where the threshold was \
            raised. The article's empty_cache() reached 254 MiB, its PyTorch context.",
        release: ReleaseAction::CudaPoolTrim,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "to-cpu",
        device: DeviceKind::Cuda,
        summary: "copy the weights to the CPU before dropping them (folklore recipe), then synchronize",
        explanation: "The recipe `model.to(\"cpu\"); del model` from the PyTorch folklore: it costs a \
            device-to-host copy of every weight and RAM for them, and frees nothing that a plain \
            drop and a synchronize would not. Measured (H100, bert-base): 415 MiB copied in \
            0.35–0.45 s, RSS up by the model's size meanwhile, then the same 678 MiB as `sync`.",
        release: ReleaseAction::CudaToCpu,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "device-drop",
        device: DeviceKind::Cuda,
        summary: "drop every candle handle to the device (a new device per cycle)",
        explanation: "Dropping candle's Device does not release the CUDA primary context: the CUDA \
            runtime behind cuBLAS and cuRAND holds references and never releases them, so the \
            context stays active. Measured (H100): 612 MiB stay (the context alone is 518 MiB), \
            against 678 MiB with the device kept. The next device opens in about 1 ms, but every \
            kernel module is loaded again: the first forward pass after it took 30–38 ms instead of 5–7.",
        release: ReleaseAction::CudaDeviceDrop,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "context-release",
        device: DeviceKind::Cuda,
        summary: "UNSUPPORTED: drop the device, then release the primary context until inactive",
        explanation: "Calls cuDevicePrimaryCtxRelease until the primary context is inactive, so the \
            process holds no VRAM at all; memrel then creates a new device and checks a matmul. It \
            releases references other libraries own: opt-in only, never in production. Measured \
            (H100): the first time, three releases (61–71 ms) take the process from 612 to 0 MiB; \
            after that the runtime holds no reference any more and dropping the device alone \
            reaches 0. A new device takes 100–155 ms, every matmul check passed, and the first \
            forward pass after it took 33–63 ms instead of 5–7 (kernels reloaded).",
        release: ReleaseAction::CudaContextRelease,
        ..Strategy::PLAIN
    },
];
