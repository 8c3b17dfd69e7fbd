//! The steps a measured program takes for a strategy, each named once:
//! its name (the protocol between memrel and the program: `MEMREL_STRATEGY`,
//! docs/guide.md "Phase markers"), when it is taken (at `import memrel`, or
//! in each `memrel.release()`) and the Python call it stands for (what
//! `memrel advise` prints). [`super::ProgramActions`]'s lists, the advice's
//! calls and the test that ties the Python module's names to Rust's all read
//! [`PROGRAM_STEPS`]; a step added here is known everywhere.
//!
//! Describes steps only; the Python module carries them out.

/// When a program takes a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// Once, at `import memrel`.
    Start,
    /// In each `memrel.release()`, after the drop.
    Release,
}

/// One step a program may be asked to take.
#[derive(Debug, Clone, Copy)]
pub struct ProgramStep {
    pub name: &'static str,
    pub at: At,
    /// The Python call a program makes for it (`memrel advise` prints it).
    pub call: &'static str,
    /// Only reads back a setting the program's environment already carries
    /// (`xla_env=VARIABLE:VALUE`): a program that never takes it still runs
    /// under the strategy (see `Strategy::works_from_outside`).
    pub reads_back: bool,
}

const fn step(name: &'static str, at: At, call: &'static str) -> ProgramStep {
    ProgramStep {
        name,
        at,
        call,
        reads_back: false,
    }
}

/// Every step, release steps then start steps, each in the order of the
/// Python module's `RELEASE_ACTIONS` (its `_ACTIONS` table) and
/// `START_ACTIONS` (a test in `worker::command` holds them equal). A start
/// step may take a value after `=` (`mallopt_mmap_threshold=BYTES`).
pub const PROGRAM_STEPS: &[ProgramStep] = &[
    step("gc", At::Release, "gc.collect()"),
    step(
        "malloc_trim",
        At::Release,
        "ctypes.CDLL(\"libc.so.6\").malloc_trim(0)",
    ),
    step("allocator_release", At::Release, "memrel.release()"),
    step("to_cpu", At::Release, "model.to(\"cpu\")"),
    step(
        "detach",
        At::Release,
        "p.detach_(); p.grad = None for every parameter, optimizer.state.clear()",
    ),
    step("cuda_synchronize", At::Release, "torch.cuda.synchronize()"),
    step("empty_cache", At::Release, "torch.cuda.empty_cache()"),
    step(
        "host_empty_cache",
        At::Release,
        "torch._C._host_emptyCache()",
    ),
    step("ipc_collect", At::Release, "torch.cuda.ipc_collect()"),
    step(
        "clear_cublas_workspaces",
        At::Release,
        "torch._C._cuda_clearCublasWorkspaces()",
    ),
    step(
        "device_reset",
        At::Release,
        "ctypes.CDLL(\"libcudart.so\").cudaDeviceReset()",
    ),
    step(
        "destroy_process_group",
        At::Release,
        "torch.distributed.destroy_process_group()",
    ),
    step(
        "jax_clear",
        At::Release,
        "for a in jax.live_arrays(): a.delete(); jax.clear_caches()",
    ),
    step(
        "mallopt_mmap_threshold",
        At::Start,
        "ctypes.CDLL(\"libc.so.6\").mallopt(-3, BYTES)",
    ),
    step(
        "setenv_trim_threshold",
        At::Start,
        "os.environ[\"MALLOC_TRIM_THRESHOLD_\"] = \"-1\"",
    ),
    step(
        "ort_arena",
        At::Start,
        "onnxruntime.SessionOptions() as it is (enable_cpu_mem_arena = True)",
    ),
    step(
        "ort_no_arena",
        At::Start,
        "so = onnxruntime.SessionOptions(); so.enable_cpu_mem_arena = False",
    ),
    step(
        "ort_shrink",
        At::Start,
        "ro = onnxruntime.RunOptions(); ro.add_run_config_entry(\"memory.enable_memory_arena_shrinkage\", \"cpu:0\"); session.run(None, feeds, ro) for every request",
    ),
    step(
        "ort_same_as_requested",
        At::Start,
        "onnxruntime.create_and_register_allocator(onnxruntime.OrtMemoryInfo(\"Cpu\", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxruntime.OrtMemType.DEFAULT), onnxruntime.OrtArenaCfg({\"arena_extend_strategy\": 1})); so.add_session_config_entry(\"session.use_env_allocators\", \"1\")",
    ),
    ProgramStep {
        reads_back: true,
        ..step(
            "xla_env",
            At::Start,
            "nothing to call (memrel reports the XLA_PYTHON_CLIENT_* variables the process started with and the XLA client's memory_stats())",
        )
    },
];

/// The names of the steps taken `at`, in the table's order.
pub fn names(at: At) -> Vec<&'static str> {
    PROGRAM_STEPS
        .iter()
        .filter(|s| s.at == at)
        .map(|s| s.name)
        .collect()
}

/// The step a name (or `NAME=VALUE`) asks for, if there is one.
pub fn find(step: &str) -> Option<&'static ProgramStep> {
    let name = step.split_once('=').map_or(step, |(name, _)| name);
    PROGRAM_STEPS.iter().find(|s| s.name == name)
}

/// The Python call a program makes for one step name (`None` for a name
/// the module does not know).
pub fn program_step_call(step: &str) -> Option<&'static str> {
    find(step).map(|s| s.call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_is_named_once() {
        let mut seen: Vec<&str> = Vec::new();
        for s in PROGRAM_STEPS {
            assert!(!seen.contains(&s.name), "{} twice", s.name);
            seen.push(s.name);
        }
        assert_eq!(
            names(At::Release).len() + names(At::Start).len(),
            seen.len()
        );
    }

    #[test]
    fn a_step_with_a_value_is_its_name() {
        let s = find("xla_env=XLA_PYTHON_CLIENT_PREALLOCATE:false").unwrap();
        assert!(s.reads_back && s.at == At::Start);
        assert_eq!(
            program_step_call("mallopt_mmap_threshold=65536"),
            Some("ctypes.CDLL(\"libc.so.6\").mallopt(-3, BYTES)")
        );
        assert_eq!(program_step_call("no_such_step"), None);
    }
}
