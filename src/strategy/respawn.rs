//! Restarting the worker: what ollama, llama.cpp's router mode, llama-swap and
//! koboldcpp do to unload a model. The orchestrator carries it out (the
//! worker only says where it stopped); its cost is the time until the next
//! model is ready in the new process.

use super::{DeviceKind, ReleaseAction, Strategy};

pub const RESPAWN: &[Strategy] = &[Strategy {
    name: "respawn",
    device: DeviceKind::Any,
    summary: "end the worker process at the release step; a fresh one takes over (ollama, llama.cpp router)",
    explanation: "The release step ends the process that held the models and starts a new one, \
        which continues with the next step: everything the old process held goes back to the \
        kernel at its exit, whatever the allocator. The release step's time is the exit plus \
        the new process's start; what it really costs is in the next load and forward, which \
        run in a cold process. A release while models are still loaded does nothing (a \
        server would end only the process of the model it unloads): the process ends at the \
        first release with every model unloaded. Measured (VM, cpu-all): -0.1 MiB retained, \
        no cycle retaining, whatever the allocator would have kept; the release step took \
        30 ms and release to next model ready 442 ms against 375 ms for a plain drop (the \
        load in the new process 203 ms against 185).",
    release: ReleaseAction::Respawn,
    ..Strategy::PLAIN
}];
