//! The sleep family: what model servers do instead of unloading (vLLM's sleep
//! levels, SGLang's release/resume_memory_occupation, torch_memory_saver):
//! a `sleep` step takes a loaded model's weights off the device and frees its
//! device memory, a `wake` step brings them back. How they travel is the
//! strategy; after the last unload each trims the memory pool like
//! `cache-flush`, so cycles end comparably.

use super::{DeviceKind, ReleaseAction, SleepMode, Strategy};

pub const SLEEP: &[Strategy] = &[
    Strategy {
        name: "offload",
        device: DeviceKind::Cuda,
        summary: "sleep: copy the weights to ordinary (pageable) host memory and free the device's; wake: copy them back",
        explanation: "What `model.to(\"cpu\")` and `model.to(\"cuda\")` do: every weight crosses \
            the bus through pageable host memory, which the driver stages through its own pinned \
            buffer, so both directions run far below the bus's pinned ceiling. Measured (H200, \
            bert-base, cuda-sleep): 1.2 GiB/s asleep and 4.2 GiB/s awake, 2 % and 8 % of the \
            51 GiB/s ceiling measured in the same runs; 400 MiB of host memory while asleep. The \
            host copy is freed at wake; whether its pages go back to the system is glibc's call.",
        release: ReleaseAction::CudaPoolTrim,
        sleep: SleepMode::Offload,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "offload-pinned",
        device: DeviceKind::Cuda,
        summary: "sleep: copy the weights into page-locked host buffers and free the device's; wake: copy them back",
        explanation: "What torch_memory_saver and vLLM's sleep do: page-locked (pinned) host \
            buffers the device reaches by DMA, so a copy can run at the bus's ceiling. memrel \
            pins one buffer per sleep and copies every weight into it on candle's stream. \
            Measured (H200, bert-base, cuda-sleep): 48.8 GiB/s asleep and 46.4 GiB/s awake, 95 % \
            and 90 % of the ceiling, but pinning 415 MiB took 189 ms of the 199 ms sleep (a \
            server would pin once and keep the buffer). Pinned memory is locked in RAM while the \
            model sleeps and returned to the driver at wake.",
        release: ReleaseAction::CudaPoolTrim,
        sleep: SleepMode::OffloadPinned,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "reload",
        device: DeviceKind::Cuda,
        summary: "sleep: drop the model; wake: load it again from its files",
        explanation: "The alternative to keeping a host copy: nothing is held while asleep but \
            the page cache of the weight files, and a wake costs a full load (read, convert, \
            copy to the device). Measured (H200, bert-base from the page cache, cuda-sleep): \
            sleep 1.3 ms, wake 88 ms, no host memory held.",
        release: ReleaseAction::CudaPoolTrim,
        sleep: SleepMode::Reload,
        ..Strategy::PLAIN
    },
];
